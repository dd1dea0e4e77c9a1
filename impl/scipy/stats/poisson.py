"""The Poisson distribution with mean mu (k shifted by loc)."""
import numpy as np

import impl.numpy as jnp
from impl.scipy.special import gammaincc, gammaln, xlogy
from impl.scipy.stats._common import const_typed_args, inexact_args


def logpmf(k, mu, loc=0):
    """-inf off the support (k - loc negative, or k not an integer)."""
    k, mu, loc = inexact_args(k, mu, loc)
    x = k - loc
    log_probs = xlogy(x, mu) - gammaln(x + 1) - mu
    return jnp.where((x < 0) | (jnp.round(k) != k), -np.inf, log_probs)


def pmf(k, mu, loc=0):
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """P(K <= k) = Q(floor(k - loc) + 1, mu), the regularized upper incomplete gamma."""
    k, mu, loc = const_typed_args(k, mu, loc)
    x = k - loc
    return jnp.where(x < 0, 0.0, gammaincc(jnp.floor(1 + x), mu))
