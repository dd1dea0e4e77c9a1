"""The uniform distribution on [loc, loc + scale]."""
import numpy as np

import impl.numpy as jnp
from impl.scipy.stats._common import inexact_args, standardized


def logpdf(x, loc=0, scale=1):
    x, loc, scale = inexact_args(x, loc, scale)
    return jnp.where((x > loc + scale) | (x < loc), -np.inf, -jnp.log(scale))


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = inexact_args(x, loc, scale)
    zero, one = np.zeros((), x.dtype), np.ones((), x.dtype)
    return jnp.select([x < loc, x > loc + scale, (x >= loc) & (x <= loc + scale)],
                      [zero, one, standardized(x, loc, scale)])


def ppf(q, loc=0, scale=1):
    q, loc, scale = inexact_args(q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, loc + scale * q)
