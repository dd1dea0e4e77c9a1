"""The Cauchy distribution."""
import math

import impl.numpy as jnp
from impl.scipy.stats._common import const_typed_args, standardized


def logpdf(x, loc=0, scale=1):
    x, loc, scale = const_typed_args(x, loc, scale)
    y = standardized(x, loc, scale)
    return -(jnp.log(math.pi * scale) + jnp.log1p(y * y))


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = const_typed_args(x, loc, scale)
    return 0.5 + jnp.arctan(standardized(x, loc, scale)) / math.pi


def logcdf(x, loc=0, scale=1):
    return jnp.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    x, loc, scale = const_typed_args(x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1):
    x, loc, scale = const_typed_args(x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q, loc=0, scale=1):
    q, loc, scale = const_typed_args(q, loc, scale)
    return jnp.tan(math.pi * q - math.pi / 2) * scale + loc


def isf(q, loc=0, scale=1):
    q, loc, scale = const_typed_args(q, loc, scale)
    return jnp.tan(math.pi / 2 - math.pi * q) * scale + loc
