"""The exponential distribution (rate 1/scale) from loc."""
import numpy as np

import impl.numpy as jnp
from impl.scipy.stats._common import inexact_args, standardized


def logpdf(x, loc=0, scale=1):
    x, loc, scale = inexact_args(x, loc, scale)
    return jnp.where(x < loc, -np.inf, -(standardized(x, loc, scale) + jnp.log(scale)))


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    x, loc, scale = inexact_args(x, loc, scale)
    minus_y = standardized(loc, x, scale)
    return jnp.where(x < loc, jnp.zeros_like(minus_y), minus_y)


def sf(x, loc=0, scale=1):
    return jnp.exp(logsf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """-expm1(-y): accurate near loc."""
    x, loc, scale = inexact_args(x, loc, scale)
    minus_y = standardized(loc, x, scale)
    return jnp.where(x < loc, jnp.zeros_like(minus_y), -jnp.expm1(minus_y))


def logcdf(x, loc=0, scale=1):
    return jnp.log1p(-sf(x, loc, scale))


def ppf(q, loc=0, scale=1):
    q, loc, scale = inexact_args(q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, loc - scale * jnp.log1p(-q))
