"""The logistic distribution."""
import impl.numpy as jnp
from impl.scipy.special import expit, logit
from impl.scipy.stats._common import const_typed_args, inexact_args, standardized


def logpdf(x, loc=0, scale=1):
    """-2 log(2 cosh(y/2)) - log(scale), with logaddexp for range."""
    x, loc, scale = const_typed_args(x, loc, scale)
    half = standardized(x, loc, scale) / 2
    return -2 * jnp.logaddexp(half, -half) - jnp.log(scale)


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = inexact_args(x, loc, scale)
    return expit(standardized(x, loc, scale))


def sf(x, loc=0, scale=1):
    x, loc, scale = inexact_args(x, loc, scale)
    return expit(-standardized(x, loc, scale))


def ppf(x, loc=0, scale=1):
    x, loc, scale = const_typed_args(x, loc, scale)
    return logit(x) * scale + loc


def isf(x, loc=0, scale=1):
    x, loc, scale = const_typed_args(x, loc, scale)
    return -logit(x) * scale + loc
