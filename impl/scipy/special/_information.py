"""jax.scipy.special's entropy functions (xlog1py, entr, rel_entr, kl_div), modified
Bessel functions of order 0 and 1, and Spence's function."""
from __future__ import annotations

import numpy as np

import impl.numpy as jnp
from impl import lax
from impl.core import get_aval
from impl.custom_derivatives import custom_jvp
from impl.numpy._util import asarray
from impl.scipy.special._args import dtype_of, inexact_arg, inexact_args, reject_complex


@custom_jvp
def xlogy(x, y):
    """x log(y), 0 where x is 0 (unless y is NaN); the derivative is the plain
    product rule's, as in JAX."""
    x, y = inexact_args(x, y)
    keep = (x != 0) | jnp.isnan(y)
    return jnp.where(keep, x * jnp.log(y), 0.0)


@xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (x_dot, y_dot) = primals, tangents
    out = xlogy(x, y)
    return out, (x_dot * jnp.log(y) + y_dot * x / y).astype(dtype_of(out))


@custom_jvp
def xlog1py(x, y):
    """x log(1 + y), 0 where x is 0 (unless y is NaN)."""
    x, y = inexact_args(x, y)
    keep = (x != 0) | jnp.isnan(y)
    return jnp.where(keep, x * jnp.log1p(y), 0.0)


@xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (x_dot, y_dot) = primals, tangents
    out = xlog1py(x, y)
    return out, (x_dot * jnp.log1p(y) + y_dot * x / (1 + y)).astype(dtype_of(out))


@custom_jvp
def _xlogx(x):
    return xlogy(x, x)


_xlogx.defjvps(lambda t, ans, x: t * (jnp.log(x) + 1))


def entr(x):
    """-x log x, -inf for negative x."""
    x = inexact_arg(x)
    reject_complex("entr", x)
    return jnp.where(x < 0, -np.inf, -_xlogx(x))


def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 where p == 0 <= q; inf elsewhere."""
    p, q = inexact_args(p, q)
    reject_complex("rel_entr", p)
    both_positive = (p > 0) & (q > 0)
    p_zero = (p == 0) & (q >= 0)
    safe_p = jnp.where(both_positive, p, 1)
    safe_q = jnp.where(both_positive, q, 1)
    inside = _xlogx(safe_p) - xlogy(safe_p, safe_q)
    # JAX's zero here is weak only for a weakly typed scalar p (the result's type follows)
    weak_scalar = get_aval(p).weak_type and get_aval(p).ndim == 0
    zero = 0.0 if weak_scalar else np.zeros((), dtype_of(p))
    return jnp.where(both_positive, inside, jnp.where(p_zero, zero, np.inf))


def kl_div(p, q):
    """rel_entr(p, q) - p + q."""
    p, q = inexact_args(p, q)
    reject_complex("kl_div", p)
    return rel_entr(p, q) - p + q


def i0e(x):
    return lax.bessel_i0e(inexact_arg(x))


def i1e(x):
    return lax.bessel_i1e(inexact_arg(x))


def i0(x):
    x = inexact_arg(x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i0e(x)


def i1(x):
    x = inexact_arg(x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i1e(x)


# Cephes' rational approximation of Spence's function on [1/2, 3/2], in w (highest
# power first): spence(1 + w) ~ -w A(w) / B(w).
_SPENCE_A = (4.65128586073990045278e-5, 7.31589045238094711071e-3, 1.33847639578309018650e-1,
             8.79691311754530315341e-1, 2.71149851196553469920e0, 4.25697156008121755724e0,
             3.29771340985225106936e0, 1.00000000000000000126e0)
_SPENCE_B = (6.90990488912553276999e-4, 2.54043763932544379113e-2, 2.82974860602568089943e-1,
             1.41172597751831069617e0, 3.63800533345137075418e0, 5.03278880143316990390e0,
             3.54771340985225096217e0, 9.99999999999999998740e-1)


def _spence_positive(x):
    """Spence's function for x > 0, reduced to [1/2, 3/2] by the reflection
    (x -> 1 - x) and inversion (x -> 1/x) identities."""
    dtype = dtype_of(x)
    inverted = x > 2.0
    x = jnp.where(inverted, 1.0 / x, x)
    above = x > 1.5
    below = x < 0.5
    w = jnp.where(above, 1.0 / x - 1.0, jnp.where(below, -x, x - 1.0))
    y = -w * jnp.polyval(np.asarray(_SPENCE_A, dtype), w) / jnp.polyval(
        np.asarray(_SPENCE_B, dtype), w)
    y = jnp.where(below, np.pi ** 2 / 6.0 - jnp.log(x) * jnp.log(1.0 - x) - y, y)
    return jnp.where(inverted | above, -0.5 * jnp.log(x) ** 2 - y, y)


def spence(x):
    """Spence's function (the dilogarithm Li2(1 - x)) for real x >= 0, NaN below 0."""
    x = asarray(x)
    dtype = dtype_of(x)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={dtype} is not supported, see docstring for supported "
                        f"types.")
    safe = jnp.where(x > 0, x, jnp.ones_like(x))
    return jnp.where(x < 0, np.nan, jnp.where(x == 1.0, 0.0, jnp.where(
        x == 0.0, np.pi ** 2 / 6, _spence_positive(safe))))
