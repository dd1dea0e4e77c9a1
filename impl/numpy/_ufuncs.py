"""Elementwise functions of the array API (jax.numpy names) over impl's primitives."""
from __future__ import annotations

import functools
import operator

import numpy as np

from impl import core
from impl.core import get_aval
from impl.interpreters.lowering import compiled_when_eager
from impl.primitives import complex_parts as cp
from impl.primitives import elementwise as ew
from impl.primitives.special import exp2_p
from impl.primitives import sharding_rules
from impl.primitives.sharding import reshard
from impl.custom_derivatives import custom_jvp
from impl.numpy._jax_calls import staged_as_in_jax
from impl.numpy._util import (asarray, broadcast_arrays, broadcast_operands, promote,  # noqa: F401
                              result_dtype)


def inexact_dtype(dtype):
    """The floating dtype JAX computes in for `dtype`: 64-bit integers become float64,
    smaller integers and bool float32 (then canonicalised: float32 without x64)."""
    d = np.dtype(dtype)
    if core.is_float_dtype(d):
        return d
    return core.canonical_dtype(np.float64 if d.itemsize >= 8 else np.float32)


def _float_operand(x):
    x = asarray(x)
    aval = get_aval(x)
    if not core.is_float_dtype(aval.dtype):
        x = ew.convert_element_type(x, inexact_dtype(aval.dtype), weak_type=aval.weak_type)
    return x


def _unary(prim, floating=True):
    def fn(x):
        x = _float_operand(x) if floating else asarray(x)
        return prim.bind(x)
    fn.__name__ = prim.name
    return compiled_when_eager(fn)


def _binary(prim, floating=False):
    def fn(x, y):
        if floating:
            x, y = broadcast_operands(prim.name, x, y)
            dtype, weak = _float_result(x, y)
            x, y = (ew.convert_element_type(a, dtype, weak_type=weak and get_aval(a).weak_type)
                    for a in (x, y))
            return prim.bind(x, y)
        return prim.bind(*broadcast_operands(prim.name, _scalar(x), _scalar(y)))
    fn.__name__ = prim.name
    return compiled_when_eager(fn)


def _scalar(x):
    return x if isinstance(x, (core.Tracer, int, float, bool, complex)) else asarray(x)


def _float_result(x, y):
    dtype, weak = result_dtype(x, y)
    return inexact_dtype(dtype), weak


sin = _unary(ew.sin_p)
cos = _unary(ew.cos_p)
tan = _unary(ew.tan_p)
arcsin = _unary(ew.asin_p)
arccos = _unary(ew.acos_p)
arctan = _unary(ew.atan_p)
sinh = _unary(ew.sinh_p)
cosh = _unary(ew.cosh_p)
tanh = _unary(ew.tanh_p)
exp = _unary(ew.exp_p)
log = _unary(ew.log_p)
log1p = _unary(ew.log1p_p)
expm1 = _unary(ew.expm1_p)
sqrt = _unary(ew.sqrt_p)


def _integral_unchanged(prim):
    """floor and ceil: integers and booleans are already integral and keep their
    dtype, as in JAX."""
    floating = _unary(prim)

    @compiled_when_eager
    def fn(x):
        x = asarray(x)
        return x if get_aval(x).dtype.kind in "biu" else floating(x)
    fn.__name__ = prim.name
    return fn


floor = _integral_unchanged(ew.floor_p)
ceil = _integral_unchanged(ew.ceil_p)
asin, acos, atan = arcsin, arccos, arctan


@compiled_when_eager
def negative(x):
    return ew.neg_p.bind(asarray(x))


def positive(x):
    return asarray(x)


@compiled_when_eager
def absolute(x):
    x = asarray(x)
    if get_aval(x).dtype.kind in "bu":
        return x
    if get_aval(x).dtype.kind == "c":  # the modulus, a real number (as in JAX)
        from impl.primitives.complex_parts import imag, real
        re, im = real(x), imag(x)
        return ew.sqrt_p.bind(ew.add(ew.mul(re, re), ew.mul(im, im)))
    return ew.abs_p.bind(x)


abs = absolute


@compiled_when_eager
def sign(x):
    return ew.sign_p.bind(asarray(x))


def _complex_by_parts(fn, x):
    """`fn` of a complex `x` applied to its real and imaginary parts, as JAX's rounding
    of complex numbers does."""
    return cp.complex(fn(cp.real(x)), fn(cp.imag(x)))


def _round_half_even(x, decimals):
    dtype = get_aval(x).dtype
    if dtype.kind == "c":
        return _complex_by_parts(lambda part: _round_half_even(part, decimals), x)
    if not decimals:
        return ew.round_p.bind(x, rounding_method=1)
    if decimals > np.log10(np.finfo(dtype).max):   # beyond the dtype's precision
        return x
    if dtype == np.float16:   # scaled in float32, where the scaling is exact enough
        x = ew.convert_element_type(x, np.dtype(np.float32))
    factor = 10.0 ** decimals   # (a Python scalar: takes x's dtype and weak type)
    out = ew.div(ew.round_p.bind(ew.mul(x, factor), rounding_method=1), factor)
    return ew.convert_element_type(out, dtype) if dtype == np.float16 else out


def round(a, decimals=0, out=None):
    from impl.numpy._util import check_no_out
    check_no_out("round", out)
    x = asarray(a)
    kind = get_aval(x).dtype.kind
    if kind == "b":
        raise ValueError(f"data type {np.bool_} not inexact")
    if kind in "iu":   # integers are already round (JAX has no negative decimals for them)
        if decimals < 0:
            raise NotImplementedError("integer np.round not implemented for decimals < 0")
        return x
    return _rounding_to(operator.index(decimals))(x)


@functools.lru_cache(maxsize=None)
def _rounding_to(decimals):
    """Rounding to `decimals` places as one program when eager, as JAX's jitted round
    is (XLA then multiplies by the reciprocal of the scale instead of dividing)."""
    def round(x):  # noqa: A001  (the name programs show)
        return _round_half_even(x, decimals)
    return compiled_when_eager(round)


around = round


@compiled_when_eager
def rint(x):
    x = asarray(x)
    kind = get_aval(x).dtype.kind
    if kind in "biu":   # already integral: the default float dtype, as JAX gives
        return ew.convert_element_type(x, core.canonical_dtype(np.float64))
    return _round_half_even(x, 0)


@compiled_when_eager
def isfinite(x):
    x = asarray(x)
    kind = get_aval(x).dtype.kind
    if kind == "c":   # both parts finite
        return ew.and_p.bind(ew.is_finite_p.bind(cp.real(x)), ew.is_finite_p.bind(cp.imag(x)))
    return ew.is_finite_p.bind(_float_operand(x))


def _logical_on_bools(prim, bool_prim):
    """As in JAX, + of booleans is `or` and * of booleans is `and` (XLA has no boolean
    add or multiply)."""
    def fn(x, y):
        x, y = broadcast_operands(prim.name, _scalar(x), _scalar(y))
        return (bool_prim if get_aval(x).dtype == np.bool_ else prim).bind(x, y)
    fn.__name__ = prim.name
    return compiled_when_eager(fn)


add = _logical_on_bools(ew.add_p, ew.or_p)
subtract = _binary(ew.sub_p)
multiply = _logical_on_bools(ew.mul_p, ew.and_p)
maximum = _binary(ew.max_p)
minimum = _binary(ew.min_p)
arctan2 = _binary(ew.atan2_p, floating=True)
atan2 = arctan2
equal = _binary(ew.eq_p)
not_equal = _binary(ew.ne_p)
less = _binary(ew.lt_p)
less_equal = _binary(ew.le_p)
greater = _binary(ew.gt_p)
greater_equal = _binary(ew.ge_p)
bitwise_and = _binary(ew.and_p)
bitwise_or = _binary(ew.or_p)
bitwise_xor = _binary(ew.xor_p)


@compiled_when_eager
def true_divide(x, y):
    x, y = broadcast_operands("div", _scalar(x), _scalar(y))
    dtype, weak = _float_result(x, y)
    x, y = (ew.convert_element_type(a, dtype, weak_type=weak and get_aval(a).weak_type)
            if get_aval(a).dtype != dtype else a for a in (x, y))
    return ew.div_p.bind(x, y)


divide = true_divide


@compiled_when_eager
def floor_divide(x, y):
    x, y = broadcast_operands("floor_divide", _scalar(x), _scalar(y))
    if core.is_float_dtype(get_aval(x).dtype) or core.is_float_dtype(get_aval(y).dtype):
        return ew.floor_p.bind(ew.div_p.bind(x, y))
    # integer floor division rounds toward -inf: adjust truncation where signs differ
    q = ew.div_p.bind(x, y)
    r = ew.rem_p.bind(x, y)
    fix = ew.logical_and(ew.ne_p.bind(r, 0), ew.ne_p.bind(ew.lt(r, 0), ew.lt(y, 0)))
    return ew.select_n(fix, q, ew.sub(q, 1))


@compiled_when_eager
def remainder(x, y):
    x, y = broadcast_operands("rem", _scalar(x), _scalar(y))
    r = ew.rem_p.bind(x, y)
    fix = ew.logical_and(ew.ne_p.bind(r, 0), ew.ne_p.bind(ew.lt(r, 0), ew.lt(y, 0)))
    return ew.select_n(fix, r, ew.add(r, y))


mod = remainder


@compiled_when_eager
def fmod(x, y):
    return ew.rem_p.bind(*broadcast_operands("rem", _scalar(x), _scalar(y)))


@compiled_when_eager
def power(x, y):
    if isinstance(y, (int, np.integer)) and not isinstance(y, bool):
        x = asarray(x)
        return ew.integer_pow_p.bind(x, y=int(y))
    x, y = broadcast_operands("pow", _scalar(x), _scalar(y))
    return ew.pow_p.bind(x, y)


@compiled_when_eager
def square(x):
    return ew.square_p.bind(asarray(x))


@compiled_when_eager
def reciprocal(x):
    return ew.integer_pow_p.bind(_float_operand(x), y=-1)   # as JAX: its derivative too


@compiled_when_eager
def logical_not(x):
    x = asarray(x)
    if get_aval(x).dtype != np.bool_:
        x = ew.ne_p.bind(x, 0)
    return ew.not_p.bind(x)


@compiled_when_eager
def invert(x):
    return ew.not_p.bind(asarray(x))


bitwise_not = invert


def _as_bool(x):
    x = asarray(x)
    return x if get_aval(x).dtype == np.bool_ else ew.ne_p.bind(x, 0)


@compiled_when_eager
def logical_and(x, y):
    return ew.and_p.bind(*broadcast_operands("and", _as_bool(x), _as_bool(y)))


@compiled_when_eager
def logical_or(x, y):
    return ew.or_p.bind(*broadcast_operands("or", _as_bool(x), _as_bool(y)))


@compiled_when_eager
def logical_xor(x, y):
    return ew.xor_p.bind(*broadcast_operands("xor", _as_bool(x), _as_bool(y)))


@compiled_when_eager
def exp2(x):
    return exp2_p.bind(_float_operand(x))


def _log_base(x, base):
    """log(x) / log(base), the divisor a strongly typed constant's logarithm, as JAX
    computes it (so a weakly typed x gives a strongly typed result)."""
    x = _float_operand(x)
    return ew.div(log(x), log(np.array(base, get_aval(x).dtype)))


@compiled_when_eager
def log2(x):
    return _log_base(x, 2)


@compiled_when_eager
def log10(x):
    """log(x) times the constant 1/log(10) (as JAX computes it, not log(x)/log(10),
    so values round as JAX's); complex logarithms part by part."""
    x = _float_operand(x)
    r = log(x)
    inv_ln10 = np.array(1 / np.log(10), cp.real_dtype_of(get_aval(x).dtype))
    if get_aval(x).dtype.kind == "c":
        return cp.complex(ew.mul(cp.real(r), inv_ln10), ew.mul(cp.imag(r), inv_ln10))
    return ew.mul(r, inv_ln10)


def _float_pair(x, y, op):
    """Broadcast two operands to their common floating dtype (JAX's promotion)."""
    x, y = broadcast_operands(op, _scalar(x), _scalar(y))
    dtype, weak = _float_result(x, y)
    return [ew.convert_element_type(a, dtype, weak_type=weak and get_aval(a).weak_type)
            for a in (x, y)]


def _logaddexp_real(x1, x2):
    # JAX's program: max(x1, x2) + log1p(exp(-|x1 - x2|)), and x1 + x2 where the
    # difference is NaN (both infinite alike, or a NaN)
    x1, x2 = _float_pair(x1, x2, "logaddexp")
    amax = ew.max_p.bind(x1, x2)
    delta = ew.sub(x1, x2)
    undefined, both = ew.ne_p.bind(delta, delta), ew.add(x1, x2)
    return ew.select_n(undefined, ew.add(amax, ew.log1p_p.bind(ew.exp_p.bind(
        ew.neg(ew.abs_p.bind(delta))))), both)


_logaddexp_real.__name__ = "logaddexp"   # the name JAX's programs show
_logaddexp_real = custom_jvp(_logaddexp_real)


def _without_inf(x):
    return ew.select_n(ew.eq_p.bind(x, np.asarray(np.inf, get_aval(x).dtype)), x,
                       np.zeros((), get_aval(x).dtype))


@_logaddexp_real.defjvp
def _logaddexp_jvp(primals, tangents):
    """JAX's rule: each tangent times exp(x - out), infinities counting as 0 there, so a
    tie gives each argument 1/2."""
    x1, x2 = _float_pair(*primals, "logaddexp")
    t1, t2 = (ew.convert_element_type(t, get_aval(x1).dtype) for t in tangents)
    out = _logaddexp_real(x1, x2)
    return out, ew.add(
        multiply(t1, ew.exp_p.bind(ew.sub(_without_inf(x1), _without_inf(out)))),
        multiply(t2, ew.exp_p.bind(ew.sub(_without_inf(x2), _without_inf(out)))))


@compiled_when_eager
def logaddexp(x, y):
    if inexact_dtype(result_dtype(_scalar(x), _scalar(y))[0]).kind != "c":
        return _logaddexp_real(x, y)
    return _logaddexp_complex(x, y)


def _logaddexp_complex(x, y):
    x, y = _float_pair(x, y, "logaddexp")
    amax = maximum(x, y)
    delta = subtract(x, y)
    safe = ew.select_n(isfinite(delta), ew.zeros_like(delta), delta)
    # -|delta| as min(delta, -delta): at a tie its derivative is 0 (the minimum splits
    # it), so each argument gets 1/2 there, as JAX's logaddexp rule gives.
    neg_abs = minimum(safe, negative(safe))
    return ew.select_n(isfinite(delta), amax, add(amax, log1p(exp(neg_abs))))


def clip(arr=None, /, min=None, max=None):
    x = asarray(arr) if not isinstance(arr, core.Tracer) else arr
    if min is not None:
        x = maximum(x, min)
    if max is not None:
        x = minimum(x, max)
    return x


def where(condition, x, y):
    """Elements of x where condition holds, else of y (the three-argument form; the
    public `impl.numpy.where` adds the one-argument form, see _searching.where)."""
    cond = _as_bool(condition)
    x, y = promote(_scalar(x), _scalar(y))
    from impl.numpy._util import broadcast_shapes, broadcast_sharding, broadcast_to
    # A scalar predicate selects whole cases, unbroadcast (as JAX's where leaves it).
    operands = (x, y) if get_aval(cond).ndim == 0 else (cond, x, y)
    shape = broadcast_shapes(*(get_aval(a).shape for a in operands))
    sharding = broadcast_sharding(operands, shape)
    # As JAX's where: operands whose shapes differ are all broadcast to the result's
    # sharding, those of the result's shape too (a predicate without it would not meet
    # the cases sharded alike).
    retype = sharding is not None and len({get_aval(a).shape for a in operands}) > 1
    operands = [broadcast_to(a, shape, out_sharding=sharding) if get_aval(a).shape != shape
                else reshard(a, sharding) if retype and not _typed_as(a, sharding)
                else a for a in operands]
    if len(operands) == 3:
        cond, x, y = operands
    else:
        x, y = operands
    return ew.select_n(cond, y, x)


@staged_as_in_jax
def _where(condition, x, y):
    return where(condition, x, y)


staged_where = _where   # jnp.where's select, a call named _where as in JAX's programs


def _typed_as(x, sharding):
    aval = get_aval(x)
    return aval.on_mesh and tuple(sharding_rules.spec(aval)) == tuple(sharding.spec)


@compiled_when_eager
def isnan(x):
    x = asarray(x)
    return ew.ne_p.bind(x, x)


@compiled_when_eager
def isinf(x):
    x = _float_operand(x)
    return ew.eq_p.bind(absolute(x), float("inf"))


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    x = _float_operand(x)
    info = np.finfo(get_aval(x).dtype)
    x = where(isnan(x), nan, x)
    x = where(ew.eq_p.bind(x, float("inf")), info.max if posinf is None else posinf, x)
    return where(ew.eq_p.bind(x, float("-inf")), info.min if neginf is None else neginf, x)


@staged_as_in_jax
def hypot(x1, x2):
    """sqrt(x1**2 + x2**2) as JAX computes it: the larger magnitude times
    sqrt(1 + ratio**2), so that no square overflows (inf where either is inf)."""
    x1, x2 = _float_pair(x1, x2, "hypot")
    x1, x2 = ew.abs_p.bind(x1), ew.abs_p.bind(x2)
    inf = np.asarray(np.inf, get_aval(x1).dtype)
    at_inf = ew.or_p.bind(ew.eq_p.bind(x1, inf), ew.eq_p.bind(x2, inf))
    big, small = ew.max_p.bind(x1, x2), ew.min_p.bind(x1, x2)
    big_is_zero = equal(big, 0)   # (compared twice, as in JAX's program)
    ratio = ew.div_p.bind(small, _where(equal(big, 0), np.ones((), get_aval(big).dtype), big))
    x = _where(big_is_zero, big, multiply(big, ew.sqrt_p.bind(add(1, ew.square(ratio)))))
    return _where(at_inf, inf, x)


@compiled_when_eager
def heaviside(x1, x2):
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0."""
    x1, x2 = _float_pair(x1, x2, "heaviside")
    zero, one = ew.zeros_like(x1), ew.full_like(x1, 1)
    return where(less(x1, 0), zero, where(greater(x1, 0), one, x2))


@compiled_when_eager
def signbit(x):
    x = asarray(x)
    if get_aval(x).dtype.kind == "f":
        # -0.0 has its sign bit set: 1 / -0.0 is -inf
        return logical_or(less(x, 0), logical_and(equal(x, 0), less(true_divide(1, x), 0)))
    return less(x, 0)
