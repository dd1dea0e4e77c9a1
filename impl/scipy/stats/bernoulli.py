"""The Bernoulli distribution with success probability p (k shifted by loc)."""
import numpy as np

import impl.numpy as jnp
from impl.scipy.special import xlog1py, xlogy
from impl.scipy.stats._common import const_typed_args


def logpmf(k, p, loc=0):
    k, p, loc = const_typed_args(k, p, loc)
    x = k - loc
    log_probs = xlogy(x, p) + xlog1py(1 - x, -p)
    return jnp.where((x < 0) | (x > 1), -np.inf, log_probs)


def pmf(k, p, loc=0):
    return jnp.exp(logpmf(k, p, loc))


def cdf(k, p):
    """0 below 0, 1 - p on [0, 1), 1 from 1 on; NaN for NaN or p outside [0, 1]."""
    k, p = const_typed_args(k, p)
    invalid = jnp.isnan(k) | jnp.isnan(p) | (p < 0) | (p > 1)
    return jnp.select([invalid, k < 0, (k >= 0) & (k < 1), k >= 1], [np.nan, 0, 1 - p, 1])


def ppf(q, p):
    q, p = const_typed_args(q, p)
    invalid = jnp.isnan(q) | jnp.isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    return jnp.where(invalid, np.nan, jnp.where(q <= 1 - p, q * 0, q * 0 + 1))  # 0 or 1 typed as q
