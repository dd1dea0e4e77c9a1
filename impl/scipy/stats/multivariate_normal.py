"""The multivariate normal distribution N(mean, cov): the quadratic form through a
Cholesky factor (cov may also be a scalar variance, or mean a scalar)."""
import math

import impl.numpy as jnp
from impl import lax
from impl.scipy.stats._common import promote_inexact


def logpdf(x, mean, cov, allow_singular=None):
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = promote_inexact(x, mean, cov)
    log_2pi = math.log(2 * math.pi)
    if not mean.shape:
        return -0.5 * jnp.square(x - mean) / cov - 0.5 * (log_2pi + jnp.log(cov))
    n = mean.shape[-1]
    if not cov.shape:
        d = x - mean
        return -0.5 * jnp.sum(d * d, axis=-1) / cov - n / 2 * (log_2pi + jnp.log(cov))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError("multivariate_normal.logpdf got incompatible shapes")
    chol = lax.linalg.cholesky(cov)
    d = x - mean
    batch = jnp.broadcast_shapes(chol.shape[:-2], d.shape[:-1])
    chol = jnp.broadcast_to(chol, batch + (n, n))
    d = jnp.broadcast_to(d, batch + (n,))
    # L y = d  <=>  y = L^-1 d, and d^T cov^-1 d = |y|^2
    y = lax.linalg.triangular_solve(chol, d[..., None], left_side=True, lower=True)[..., 0]
    log_det_half = jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * jnp.sum(y * y, axis=-1) - n / 2 * log_2pi - log_det_half


def pdf(x, mean, cov):
    return jnp.exp(logpdf(x, mean, cov))
