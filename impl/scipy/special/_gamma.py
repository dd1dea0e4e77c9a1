"""The gamma family of jax.scipy.special (gamma, beta, incomplete gamma/beta,
polygamma, Hurwitz zeta, combinatorial functions) as compositions of impl.lax's
special-function primitives."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

import impl.numpy as jnp
from impl import lax
from impl.api import jvp
from impl.custom_derivatives import custom_jvp
from impl.scipy.special._args import dtype_of, inexact_arg, inexact_args, reject_complex


def gammaln(x):
    """log|Gamma(x)|."""
    return lax.lgamma(inexact_arg(x))


def digamma(x):
    return lax.digamma(inexact_arg(x))


def gammasgn(x):
    """The sign of Gamma(x): -1 on the negative intervals of odd floor and at -0, NaN at
    the poles (non-positive integers) and at NaN, 1 elsewhere."""
    x = inexact_arg(x)
    reject_complex("gammasgn", x)
    fl = jnp.floor(x)
    negative = x < 0
    pole = (negative & (x == fl)) | jnp.isnan(x)
    minus = (negative & (jnp.remainder(fl, 2) != 0)) | ((x == 0) & jnp.signbit(x))
    return jnp.where(pole, np.nan, jnp.where(minus, -1.0, 1.0)).astype(dtype_of(x))


def gamma(x):
    x = inexact_arg(x)
    reject_complex("gamma", x)
    return gammasgn(x) * jnp.exp(lax.lgamma(x))


def loggamma(x):
    """log Gamma(x) on the positive reals (real inputs only), NaN elsewhere."""
    x = inexact_arg(x)
    if dtype_of(x).kind == "c":
        raise NotImplementedError("loggamma of complex inputs is not supported by impl")
    return jnp.where(x > 0, lax.lgamma(x), np.nan)


def _log1p_ratio_correction(a, b):
    """lgamma(b) - lgamma(a + b) for b >= 8 >= a (the TOMS 708 `algdiv` series),
    which loses no precision when b is much larger than a."""
    # Stirling-series coefficients of the correction term of TOMS 708.
    c = (0.0833333333333333, -0.00277777777760991, 0.00079365066682539,
         -0.00059520293135187, 0.000837308034031215, -0.00165322962780713)
    h = a / b
    r = h / (1 + h)
    r2 = r * r
    s = [1.0]
    for _ in range(5):
        s.append(1.0 + (r + r2 * s[-1]))
    inv_b2 = (1.0 / b) ** 2
    w = c[5] * s[5]
    for k in (4, 3, 2, 1):
        w = w * inv_b2 + c[k] * s[k]
    w = (w * inv_b2 + c[0]) * (r / b)
    u = (b + (a - 0.5)) * jnp.log1p(a / b)
    v = a * (jnp.log(b) - 1.0)
    return w - u - v


def betaln(a, b):
    """log|B(a, b)|; when the larger argument is 8 or more, through a series that
    avoids cancelling two large lgamma values."""
    a, b = inexact_args(a, b)
    small, large = jnp.minimum(a, b), jnp.maximum(a, b)
    direct = lax.lgamma(small) + (lax.lgamma(large) - lax.lgamma(small + large))
    series = lax.lgamma(small) + _log1p_ratio_correction(small, large)
    return jnp.where(large < 8, direct, series)


def beta(a, b):
    a, b = inexact_args(a, b)
    reject_complex("beta", a)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * jnp.exp(betaln(a, b))


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    a, b, x = inexact_args(a, b, x)
    reject_complex("betainc", x)
    return lax.betainc(a, b, x)


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    return lax.igamma(*inexact_args(a, x))


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return lax.igammac(*inexact_args(a, x))


def polygamma(n, x):
    """The n-th derivative of digamma; n must have an integer dtype."""
    n_dtype = jnp.result_type(n)
    if not jnp.issubdtype(n_dtype, jnp.integer):
        raise ValueError(f"Argument `n` to polygamma must be of integer type. "
                         f"Got dtype {n_dtype}.")
    n, x = inexact_args(n, x)
    reject_complex("polygamma", x)
    return lax.polygamma(n, x)


def _bernoulli_ratios(count):
    """(2k)! / B_2k for k = 1..count, B_j the Bernoulli numbers (exact, then float)."""
    bern = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        bern.append(-sum(math.comb(m + 1, j) * bern[j] for j in range(m)) / (m + 1))
    return [float(math.factorial(2 * k) / bern[2 * k]) for k in range(1, count + 1)]


_BERNOULLI_RATIOS = _bernoulli_ratios(16)


def _hurwitz_zeta_series(s, a):
    """zeta(s, a) by Euler-Maclaurin summation with n terms directly and n Bernoulli
    corrections (n = 16 in float64, 8 otherwise): differentiable in both s and a, so
    it gives the derivative of zeta."""
    dtype = dtype_of(a)
    n = 16 if dtype == np.float64 else 8
    k = jnp.arange(n, dtype=dtype)
    direct = jnp.sum((a[..., None] + k) ** (-s[..., None]), axis=-1)
    an = a + n
    integral = an ** (1 - s) / (s - 1)
    tail = an ** (-s)
    m = jnp.arange(2 * n, dtype=dtype)
    rising = jnp.cumprod((s[..., None] + m) / an[..., None], axis=-1)[..., ::2]
    rising = jnp.minimum(rising, np.finfo(dtype).max)
    corrections = jnp.sum(rising / np.asarray(_BERNOULLI_RATIOS[:n], dtype), axis=-1)
    return direct + integral + tail * (0.5 + corrections)


@custom_jvp
def _zeta(x, q):
    return lax.zeta(x, q)


@_zeta.defjvp
def _zeta_jvp(primals, tangents):
    return _zeta(*primals), jvp(_hurwitz_zeta_series, primals, tangents)[1]


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (k + q)^-x (q is required, as in JAX)."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None "
                                  "to compute the Hurwitz Zeta function.")
    return _zeta(*inexact_args(x, q))


def multigammaln(a, d):
    """log of the multivariate gamma function of dimension d (a Python int)."""
    d = int(d)  # a Python int: it sets the number of terms
    a, d_arr = inexact_args(a, d)
    constant = 0.25 * d_arr * (d_arr - 1) * math.log(math.pi)
    half_steps = jnp.arange(d, dtype=dtype_of(a)) / 2
    terms = lax.lgamma(jnp.expand_dims(a, -1) - half_steps)
    return jnp.sum(terms, axis=-1) + constant


def factorial(n, exact=False):
    """Gamma(n + 1) as a float (0 for negative n); exact=True is not supported."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n = inexact_arg(n)
    return jnp.where(n < 0, 0, jnp.exp(lax.lgamma(n + 1)))


def comb(N, k, *, repetition=False):
    """N choose k as a float through lgamma: 0 outside 0 <= k <= N."""
    N, k = inexact_args(N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), 1.0, comb(N + k - 1, k))
    valid = (k <= N) & (N >= 0) & (k >= 0)
    n_ = jnp.where(valid, N, 0.0)
    k_ = jnp.where(valid, k, 0.0)
    log_comb = lax.lgamma(n_ + 1) - lax.lgamma(k_ + 1) - lax.lgamma(n_ + 1 - k_)
    return jnp.where(valid, jnp.exp(log_comb), 0.0)


@custom_jvp
def _poch(z, m):
    return jnp.where(m == 0.0, jnp.ones_like(z), gamma(z + m) / gamma(z))


_poch.defjvps(
    lambda z_dot, ans, z, m: (lax.digamma(z + m) - lax.digamma(z)) * ans * z_dot,
    lambda m_dot, ans, z, m: lax.digamma(z + m) * ans * m_dot)


def poch(z, m):
    """The rising factorial Gamma(z + m) / Gamma(z) (1 when m == 0)."""
    z, m = inexact_args(z, m)
    if dtype_of(z).kind == "c":
        raise ValueError("jnp.poch does not support complex-valued inputs.")
    return _poch(z, m)
