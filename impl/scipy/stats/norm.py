"""The normal distribution N(loc, scale^2)."""
import math

import impl.numpy as jnp
from impl.scipy import special
from impl.scipy.stats._common import const_typed_args, inexact_args, standardized


def logpdf(x, loc=0, scale=1):
    x, loc, scale = const_typed_args(x, loc, scale)
    variance = scale * scale
    return -(jnp.log(2 * math.pi * variance) + (x - loc) ** 2 / variance) / 2


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    return special.ndtr(standardized(*inexact_args(x, loc, scale)))


def logcdf(x, loc=0, scale=1):
    return special.log_ndtr(standardized(*inexact_args(x, loc, scale)))


def sf(x, loc=0, scale=1):
    """The survival function 1 - cdf, by symmetry (no cancellation)."""
    x, loc, scale = inexact_args(x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1):
    x, loc, scale = inexact_args(x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q, loc=0, scale=1):
    """The quantile function (inverse of cdf)."""
    return jnp.asarray(special.ndtri(q) * scale + loc, float)


def isf(q, loc=0, scale=1):
    """The inverse of the survival function."""
    return ppf(1 - jnp.asarray(q), loc, scale)
