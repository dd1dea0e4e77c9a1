"""More elementwise math of jax.numpy, composed from impl's primitives: inverse
hyperbolic functions, complex parts, sign and exponent helpers, bit shifts."""
from __future__ import annotations

import functools
import math

import numpy as np

from impl.core import get_aval
from impl.custom_derivatives import custom_jvp
from impl.numpy import _ufuncs as uf
from impl.numpy._util import asarray, broadcast_operands, check_no_out
from impl.primitives import complex_parts as cp
from impl.primitives import elementwise as ew
from impl.primitives import special as sp

__all__ = ["arcsinh", "arccosh", "arctanh", "asinh", "acosh", "atanh", "cbrt", "copysign",
           "fabs", "float_power", "ldexp", "logaddexp2", "modf", "divmod", "sinc", "nextafter",
           "left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift",
           "bitwise_invert", "pow", "real", "imag", "conj", "conjugate", "angle", "iscomplex",
           "isreal", "isneginf", "isposinf"]


def _real_float(name, x):
    x = uf._float_operand(x)
    if get_aval(x).dtype.kind == "c":
        raise TypeError(f"impl.numpy.{name} does not support complex input yet")
    return x


# ------------------------------------------- inverse hyperbolic functions, cube root
# impl's primitives, as jax.numpy binds jax.lax's (their derivative rules and weak types
# are then JAX's too).

def arcsinh(x, /):
    return sp.asinh_p.bind(uf._float_operand(x))


def arccosh(x, /):
    return sp.acosh_p.bind(uf._float_operand(x))


def arctanh(x, /):
    return sp.atanh_p.bind(uf._float_operand(x))


asinh, acosh, atanh = arcsinh, arccosh, arctanh


def cbrt(x, /):
    """The real cube root (negative for negative x)."""
    return sp.cbrt_p.bind(_real_float("cbrt", x))


def copysign(x1, x2, /):
    """|x1| with the sign bit of x2 (so -0.0 counts as negative)."""
    x1, x2 = uf._float_pair(x1, x2, "copysign")
    magnitude = uf.absolute(x1)
    return uf.where(uf.signbit(x2), uf.negative(magnitude), magnitude)


def fabs(x, /):
    return uf.absolute(_real_float("fabs", x))


def float_power(x, y, /):
    """x ** y computed in the widest floating dtype available."""
    x, y = uf._float_pair(x, y, "float_power")
    return uf.power(x, y)


def ldexp(x1, x2, /):
    """x1 * 2 ** x2 for an integer exponent x2."""
    x2 = asarray(x2)
    if get_aval(x2).dtype.kind not in "iub":
        raise ValueError(f"ldexp: the exponent x2 must be an integer array, got dtype "
                         f"{get_aval(x2).dtype}")
    x1 = uf._float_operand(x1)
    dtype = get_aval(x1).dtype
    return uf.multiply(x1, uf.exp2(ew.convert_element_type(x2, dtype)))


def logaddexp2(x1, x2, /):
    """log2(2**x1 + 2**x2) without overflow."""
    x1, x2 = uf._float_pair(x1, x2, "logaddexp2")
    ln2 = float(np.log(2))
    return uf.true_divide(uf.logaddexp(uf.multiply(x1, ln2), uf.multiply(x2, ln2)), ln2)


def modf(x, /, out=None):
    """(fractional part, integral part), both with x's sign."""
    check_no_out("modf", out)
    x = _real_float("modf", x)
    whole = uf.where(uf.less(x, 0), uf.ceil(x), uf.floor(x))
    return uf.subtract(x, whole), whole


def divmod(x1, x2, /):  # noqa: A001  (jax.numpy's name)
    return uf.floor_divide(x1, x2), uf.remainder(x1, x2)


def sinc(x, /):
    """sin(pi x) / (pi x), 1 at 0. At 0 the value and every derivative come from the
    series of sin(y)/y, so grad of grad of sinc at 0 is -pi**2/3, not 0. Constants are
    typed as JAX's are (`constant_like`), so a weakly typed array gives a strong result
    and a strong cotangent."""
    x = uf._float_operand(x)
    # lax-level mul/div, as JAX's sinc: jnp's would make a weakly typed x strong by a
    # conversion, whose transpose gives the cotangent x's weak type back.
    at_zero = ew.eq(x, ew.constant_like(x, 0))
    pi_x = ew.mul(ew.constant_like(x, math.pi), x)
    safe_pi_x = uf.where(at_zero, ew.constant_like(x, 1), pi_x)
    return uf.where(at_zero, _sin_over_y_derivative_at_zero(0, pi_x),
                    ew.div(ew.sin(safe_pi_x), safe_pi_x))


@functools.partial(custom_jvp, nondiff_argnums=(0,))
def _sin_over_y_derivative_at_zero(k, y):
    """The k-th derivative of sin(y)/y at y = 0 ((-1)**(k/2) / (k+1) for even k, 0 for
    odd k), shaped and typed as y; y * 0 keeps it a function of y, so that its own
    derivative (the next term, times y's tangent) is taken."""
    zero = uf.multiply(y, 0)
    return zero if k % 2 else uf.add(zero, ew.constant_like(y, (-1) ** (k // 2) / (k + 1)))


@_sin_over_y_derivative_at_zero.defjvp
def _sin_over_y_next_term(k, primals, tangents):
    (y,), (y_dot,) = primals, tangents
    return (_sin_over_y_derivative_at_zero(k, y),
            uf.multiply(_sin_over_y_derivative_at_zero(k + 1, y), y_dot))


def nextafter(x, y, /):
    x, y = uf._float_pair(x, y, "nextafter")
    return ew.nextafter_p.bind(x, y)


def _integer_pair(name, x, y):
    x, y = broadcast_operands(name, uf._scalar(x), uf._scalar(y))
    if get_aval(x).dtype.kind not in "iu":
        raise TypeError(f"{name} takes integer operands, got {get_aval(x).dtype}")
    return x, y


def left_shift(x, y, /):
    return ew.shift_left_p.bind(*_integer_pair("left_shift", x, y))


def right_shift(x1, x2, /):
    """Arithmetic shift for signed integers (keeps the sign), logical for unsigned."""
    x, y = _integer_pair("right_shift", x1, x2)
    prim = ew.shift_right_arithmetic_p if get_aval(x).dtype.kind == "i" else \
        ew.shift_right_logical_p
    return prim.bind(x, y)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


def bitwise_invert(x, /):
    return uf.invert(x)


def pow(x1, x2, /):  # noqa: A001  (jax.numpy's name)
    return uf.power(x1, x2)


# ---------------------------------------------------------------- complex parts

def _is_complex(x):
    return get_aval(x).dtype.kind == "c"


def real(val, /):
    x = asarray(val)
    return cp.real(x) if _is_complex(x) else x


def imag(val, /):
    x = asarray(val)
    return cp.imag(x) if _is_complex(x) else ew.zeros_like(x)


def conjugate(x, /):
    x = asarray(x)
    return cp.conj(x) if _is_complex(x) else x


conj = conjugate


def angle(z, deg=False):
    """The argument of z (in degrees if deg)."""
    z = asarray(z)
    if _is_complex(z):
        out = uf.arctan2(cp.imag(z), cp.real(z))
    else:
        z = uf._float_operand(z)
        out = uf.arctan2(ew.zeros_like(z), z)
    return uf.multiply(out, float(180 / np.pi)) if deg else out


def iscomplex(x):
    """Elementwise: a nonzero imaginary part."""
    return uf.not_equal(imag(x), 0)


def isreal(x):
    return uf.equal(imag(x), 0)


def isneginf(x, /, out=None):
    check_no_out("isneginf", out)
    x = asarray(x)
    return uf.equal(x, -np.inf) if get_aval(x).dtype.kind == "f" else ew.full_like(
        ew.ne_p.bind(x, x), False)


def isposinf(x, /, out=None):
    check_no_out("isposinf", out)
    x = asarray(x)
    return uf.equal(x, np.inf) if get_aval(x).dtype.kind == "f" else ew.full_like(
        ew.ne_p.bind(x, x), False)
