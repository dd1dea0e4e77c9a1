"""The beta distribution with shapes a, b on [loc, loc + scale]."""
import numpy as np

import impl.numpy as jnp
from impl.scipy.special import betainc, betaln, xlog1py, xlogy
from impl.scipy.stats._common import const_typed_args, standardized


def logpdf(x, a, b, loc=0, scale=1):
    """-inf outside the support, NaN for non-positive a, b or scale."""
    x, a, b, loc, scale = const_typed_args(x, a, b, loc, scale)
    y = standardized(x, loc, scale)
    log_probs = xlogy(a - 1, y) + xlog1py(b - 1, -y) - betaln(a, b) - jnp.log(scale)
    log_probs = jnp.where((x > loc + scale) | (x < loc), -np.inf, log_probs)
    return jnp.where((a <= 0) | (b <= 0) | (scale <= 0), np.nan, log_probs)


def pdf(x, a, b, loc=0, scale=1):
    return jnp.exp(logpdf(x, a, b, loc, scale))


def _unit(x, loc, scale):
    return jnp.clip(standardized(x, loc, scale), 0, 1)


def cdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = const_typed_args(x, a, b, loc, scale)
    return betainc(a, b, _unit(x, loc, scale))


def logcdf(x, a, b, loc=0, scale=1):
    return jnp.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
    """I_{1-y}(b, a): the upper tail without cancellation."""
    x, a, b, loc, scale = const_typed_args(x, a, b, loc, scale)
    return betainc(b, a, 1 - _unit(x, loc, scale))


def logsf(x, a, b, loc=0, scale=1):
    return jnp.log(sf(x, a, b, loc, scale))
