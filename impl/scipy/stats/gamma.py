"""The gamma distribution with shape a (x shifted by loc, scaled by scale)."""
import numpy as np

import impl.numpy as jnp
from impl.scipy.special import gammainc, gammaincc, gammaln, xlogy
from impl.scipy.stats._common import const_typed_args, inexact_args, standardized


def logpdf(x, a, loc=0, scale=1):
    x, a, loc, scale = const_typed_args(x, a, loc, scale)
    inside = x >= loc
    y = jnp.where(inside, standardized(x, loc, scale), 1.0)
    log_probs = xlogy(a - 1, y) - y - (gammaln(a) + jnp.log(scale))
    return jnp.where(inside, log_probs, -np.inf)


def pdf(x, a, loc=0, scale=1):
    return jnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    x, a, loc, scale = const_typed_args(x, a, loc, scale)
    return gammainc(a, jnp.clip(standardized(x, loc, scale), 0, np.inf))


def logcdf(x, a, loc=0, scale=1):
    return jnp.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
    x, a, loc, scale = inexact_args(x, a, loc, scale)
    y = standardized(x, loc, scale)
    return jnp.where(y < 0, 1, gammaincc(a, y))


def logsf(x, a, loc=0, scale=1):
    return jnp.log(sf(x, a, loc, scale))
