"""The Laplace (double exponential) distribution."""
import impl.numpy as jnp
from impl.scipy.stats._common import const_typed_args, standardized


def logpdf(x, loc=0, scale=1):
    x, loc, scale = const_typed_args(x, loc, scale)
    return -(jnp.abs(x - loc) / scale + jnp.log(2 * scale))


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = const_typed_args(x, loc, scale)
    y = standardized(x, loc, scale)
    return jnp.where(y <= 0, 0.5 * jnp.exp(y), 1 - 0.5 * jnp.exp(-y))
