"""The normal distribution's functions in jax.scipy.special (ndtr, ndtri, log_ndtr)
and the error-function family (erfinv, erfcx)."""
from __future__ import annotations

import functools
import math

import numpy as np

import impl.numpy as jnp
from impl import core, lax
from impl.core import get_aval
from impl.custom_derivatives import custom_jvp
from impl.primitives import elementwise as ew
from impl.numpy._util import asarray
from impl.scipy.special._args import dtype_of, inexact_arg


def erfinv(x):
    return lax.erf_inv(inexact_arg(x))


def _strong_float(x):
    """x as a strongly typed float32/float64 array: these functions, as in JAX, accept
    no other dtype (integers included) and return strong types."""
    x = asarray(x)
    aval = get_aval(x)
    if aval.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={aval.dtype} is not supported, see docstring for "
                        f"supported types.")
    return ew.convert_element_type(x, aval.dtype, weak_type=False) if aval.weak_type else x


def _ndtr(x):
    # Below |x| = 1 through erf, beyond through erfc (no cancellation in the tails).
    w = x * np.sqrt(0.5).astype(dtype_of(x))
    z = jnp.abs(w)
    inner = 1.0 + lax.erf(w)
    outer = jnp.where(w > 0, 2.0 - lax.erfc(z), lax.erfc(z))
    return 0.5 * jnp.where(z < np.sqrt(0.5), inner, outer)


def ndtr(x):
    """The standard normal CDF."""
    return _ndtr(_strong_float(x))


# Cephes' ndtri rational approximations, highest power first: (P0, Q0) on the central
# region |p - 1/2| < 1/2 - exp(-2); (P1, Q1) and (P2, Q2) in the tails, in 1/z where
# z = sqrt(-2 log p), for z < 8 and z >= 8.
_NDTRI_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
             1.39312609387279679503e1, -1.23916583867381258016e0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
             -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
             1.59056225126211695515e1, -1.18331621121330003142e0)
_NDTRI_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
             4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
             -1.40256079171354495875e-1, -3.50424626827848203418e-2,
             -8.57456785154685413611e-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
             1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
             -3.80806407691578277194e-2, -9.33259480895457427372e-4)
_NDTRI_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
             1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
             3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
             2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
             2.89247864745380683936e-6, 6.79019408009981274425e-9)


def _rational(p, q, x):
    dtype = dtype_of(x)
    return jnp.polyval(np.asarray(p, dtype), x) / jnp.polyval(np.asarray(q, dtype), x)


def ndtri(p):
    """The inverse of ndtr (Cephes' algorithm): -inf at 0, inf at 1, NaN outside [0, 1]."""
    p = _strong_float(p)
    upper = p > -np.expm1(-2.0)
    tail_p = jnp.where(upper, 1.0 - p, p)           # the smaller of p and 1 - p, roughly
    tail_p = jnp.where(tail_p == 0.0, 0.5, tail_p)  # keeps log() finite below
    # central region
    w = tail_p - 0.5
    w2 = w * w
    central = (w + w * w2 * _rational(_NDTRI_P0, _NDTRI_Q0, w2)) * math.sqrt(2 * math.pi)
    # tails
    z = jnp.sqrt(-2.0 * jnp.log(tail_p))
    lead = z - jnp.log(z) / z
    far = jnp.where(z >= 8.0, _rational(_NDTRI_P2, _NDTRI_Q2, 1 / z),
                    _rational(_NDTRI_P1, _NDTRI_Q1, 1 / z)) / z
    tail = far - lead                                 # ndtri(tail_p) < 0
    x = jnp.where(tail_p > np.exp(-2.0), central, tail)
    x = jnp.where(upper, -x, x)
    return jnp.where(p == 0.0, -np.inf, jnp.where(p == 1.0, np.inf, x))


def _log_ndtr_asymptotic(x, series_order):
    """log Phi(x) for very negative x: log of phi(x)/(-x) times the asymptotic series
    1 + sum_n (-1)^n (2n-1)!! / x^2n."""
    x2 = x * x
    series = jnp.ones_like(x)
    power = x2
    for n in range(1, series_order + 1):
        term = float(math.prod(range(2 * n - 1, 0, -2))) / power
        series = series - term if n % 2 else series + term
        power = power * x2
    return -0.5 * x2 - jnp.log(-x) - 0.5 * math.log(2 * math.pi) + jnp.log(series)


# Where log_ndtr switches from log(ndtr(x)) to -ndtr(-x) above and to the asymptotic
# series below, per dtype.
_LOG_NDTR_SEGMENTS = {np.dtype(np.float64): (-20.0, 8.0), np.dtype(np.float32): (-10.0, 5.0)}


@functools.lru_cache(maxsize=None)
def _log_ndtr_of_order(series_order):
    """log_ndtr with a fixed series order, its derivative exp(log pdf - log cdf)
    (one custom_jvp function per order: the order is not an array)."""
    @custom_jvp
    def log_ndtr_fixed(x):
        lower, upper = _LOG_NDTR_SEGMENTS[dtype_of(x)]
        above = x > upper
        phi = _ndtr(jnp.where(above, -x, jnp.maximum(x, lower)))
        middle = jnp.where(x > lower, jnp.log(phi),
                           _log_ndtr_asymptotic(jnp.minimum(x, lower), series_order))
        return jnp.where(above, -phi, middle)

    log_ndtr_fixed.defjvps(lambda t, ans, x: t * jnp.exp(
        -0.5 * x * x - 0.5 * math.log(2 * math.pi) - ans))
    return log_ndtr_fixed


core.register_cache(_log_ndtr_of_order.cache_clear)


def log_ndtr(x, series_order=3):
    """log of the standard normal CDF, accurate far into both tails."""
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    x = asarray(x)
    if dtype_of(x) not in _LOG_NDTR_SEGMENTS:
        raise TypeError(f"x.dtype={dtype_of(x)} is not supported.")
    return _log_ndtr_of_order(series_order)(x)


def _erfcx_asymptotic(x, nterms):
    # erfcx(x) ~ 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2 x^2)^k
    coeffs = [(-1) ** k * math.prod(range(2 * k - 1, 0, -2)) / 2 ** k
              for k in reversed(range(nterms))]
    return jnp.polyval(np.asarray(coeffs, dtype_of(x)), 1.0 / (x * x)) / (x * math.sqrt(math.pi))


def _erfcx_float(x, nterms):
    # exp(x^2) erfc(x) directly until exp(x^2) would overflow, then the asymptotic series
    large = x > float(np.sqrt(np.log(np.finfo(dtype_of(x)).max)))
    safe = jnp.where(large, 1.0, x)
    return jnp.where(large, _erfcx_asymptotic(x, nterms), jnp.exp(safe * safe) * lax.erfc(safe))


@custom_jvp
def _erfcx(x):
    dtype = dtype_of(x)
    if dtype == np.float64:
        return _erfcx_float(x, 9)
    if dtype == np.float32:
        return _erfcx_float(x, 5)
    return _erfcx_float(x.astype(np.float32), 5).astype(dtype)


_erfcx.defjvps(lambda t, ans, x: t * (2 * x * ans - 2 / math.sqrt(math.pi)))


def erfcx(x):
    """The scaled complementary error function exp(x^2) erfc(x) (real inputs)."""
    x = inexact_arg(x)
    if dtype_of(x).kind == "c":
        raise NotImplementedError("erfcx of complex inputs is not supported by impl")
    return _erfcx(x)
