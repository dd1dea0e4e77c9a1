"""Elementwise primitives: unary math, binary arithmetic, comparisons, select, clamp,
type conversion and stop_gradient, each with all of its rules.

Operands have equal shapes, except that rank-0 operands broadcast (as in JAX's
jaxprs, where `mul x 2.0` is allowed) and so do axes of size 1 among operands of one
rank, as in jax.lax. Dtypes must agree, except that weakly typed
operands (Python scalars) take the dtype of the others; impl.lax's functions check the
stricter contract each primitive declares (`operand_dtypes=`), as jax.lax does.
"""
from __future__ import annotations

import contextlib
import math
import warnings

import jax
import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import ad, batching
from impl.interpreters.ad import Zero, is_undefined_primal
from impl.primitives import sharding_rules
from impl.primitives.sharding import reshard_p
from impl.primitives import _operand_dtypes as dt
from impl.primitives._define import cast_to, define
from impl.primitives.shape import broadcast_in_dim, reduce_sum, reshape


# ------------------------------------------------------------------ type rules

def _result_shape(name, avals):
    """JAX's broadcasting of an elementwise operation's operands: rank-0 operands take
    any shape, the others share their rank and each axis's size, except where it is 1."""
    shape = ()
    for a in avals:   # the common case first: one shape
        if a.shape:
            if shape and a.shape != shape:
                break
            shape = a.shape
    else:
        return shape
    shapes = [a.shape for a in avals if a.shape]
    ranks = {len(s) for s in shapes}
    if len(ranks) != 1:
        raise TypeError(f"{name}: arrays must have the same number of dimensions, "
                        f"got {ranks}")
    try:
        return core.broadcast_sizes(shapes)
    except ValueError:
        raise TypeError(f"{name} got incompatible shapes for broadcasting: "
                        f"{', '.join(str(tuple(s)) for s in shapes)}.") from None


def _unop_aval(name, accepted, out_dtype=None):
    """`out_dtype`: the result's dtype (strongly typed), or a function of the operand's;
    None: the operand's."""
    def rule(x, **params):
        dt.check_unary(name, accepted, x.dtype)
        if callable(out_dtype):
            return ShapedArray(x.shape, out_dtype(x.dtype), x.weak_type)
        if out_dtype is not None:
            return ShapedArray(x.shape, out_dtype, False)
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    return rule


def _magnitude_dtype(dtype):
    """abs's result: the real dtype of a complex operand's parts, else the operand's."""
    return np.dtype(np.finfo(dtype).dtype) if dtype.kind == "c" else dtype


def _contract_aval(name, contract, out_dtype=None):
    """Abstract evaluation of an n-ary primitive under its declared dtype contract,
    weakly typed operands taking the others' dtype; the result has the first operand's
    dtype (pow's base, when its exponent is an integer)."""
    def rule(*avals, **params):
        shape = _result_shape(name, avals)
        dtypes, weak = contract.check_lenient(name, avals)
        if out_dtype is not None:
            return ShapedArray(shape, out_dtype, False)
        return ShapedArray(shape, dtypes[0], weak)
    return rule


try:  # JAX's conversion that can set the weak-type bit (no public equivalent)
    from jax._src.lax.lax import _convert_element_type as _jax_convert
except ImportError:  # pragma: no cover
    _jax_convert = None


def _mark_weak(x):
    """Operations on weakly typed operands only (Python scalars) give weak results."""
    if _jax_convert is None or getattr(x, "weak_type", True):
        return x
    return _jax_convert(x, weak_type=True)


def _lower_nary(lax_fn, contract, weak_ok=True):
    def lower(*args, **params):
        dtypes, weak = contract.lenient([get_aval(a) for a in args])
        out = lax_fn(*[cast_to(a, d) for a, d in zip(args, dtypes)], **params)
        return _mark_weak(out) if weak and weak_ok else out
    return lower


_float = core.is_float_dtype


def unbroadcast(ct, aval):
    """Sum a cotangent down to an operand that was broadcast (a rank-0 one, or one with
    axes of size 1); a cotangent takes its operand's dtype and (explicit) sharding."""
    if type(ct) is Zero:
        return ct
    ct_aval = get_aval(ct)
    if ct_aval.shape != aval.shape:
        if aval.ndim == 0:
            ct = reduce_sum(ct, tuple(range(ct_aval.ndim)))
        else:   # size-1 axes broadcast: summed, and kept (by a reshape, as JAX's)
            axes = tuple(i for i, (c, a) in enumerate(zip(ct_aval.shape, aval.shape))
                         if c != a)
            ct = (reshape(reduce_sum(ct, axes), aval.shape)
                  if aval.explicit_sharding is None and ct_aval.explicit_sharding is None
                  else broadcast_in_dim(reduce_sum(ct, axes), aval.shape,
                                        tuple(i for i in range(aval.ndim) if i not in axes)))
    if get_aval(ct).dtype != aval.dtype and aval.dtype != core.float0:
        ct = convert_element_type(ct, aval.dtype)
    ct_sharding, want = get_aval(ct).explicit_sharding, core.cotangent_sharding(aval)
    if ct_sharding != want:
        ct = reshard_p.bind(ct, out_sharding=want or NamedSharding(
            ct_sharding.mesh, PartitionSpec(*[None] * aval.ndim)))
    return ct


_ONE_OPERAND = dt.OperandDtypes()   # a unary primitive's dtype is its operand's


def _unop(name, lax_fn, jvp, accepted=dt.INEXACT, transpose=None, out_dtype=None):
    """An elementwise primitive of one operand, whose dtype is in the category
    `accepted` (as jax.lax declares it)."""
    return define(name, abstract_eval=_unop_aval(name, accepted, out_dtype),
                  lowering=_lower_nary(lax_fn, _ONE_OPERAND,
                                       weak_ok=out_dtype is None or callable(out_dtype)),
                  jvp=jvp, transpose=transpose, batching=batching.vectorized,
                  operands=1, sharding_rule=sharding_rules.same_as_operand,
                  unreduced_rule=sharding_rules.unary_unreduced(name))


def _binop(name, lax_fn, jvp, accepted=dt.ANY, out_dtype=None, transpose=None,
           jnp_name=None, operands=2, contract=None, unreduced_rule=None):
    """An elementwise primitive of `operands` operands; `accepted`: the category of
    dtypes each accepts, all alike (or a whole `contract`), as jax.lax declares it;
    `jnp_name`: the jax.numpy function JAX's mismatch message recommends;
    `unreduced_rule`: when it takes unreduced operands (add, mul)."""
    contract = contract or dt.OperandDtypes((accepted,), jnp_name=jnp_name)
    return define(name, abstract_eval=_contract_aval(name, contract, out_dtype),
                  lowering=_lower_nary(lax_fn, contract, weak_ok=out_dtype is None),
                  jvp=jvp, transpose=transpose, batching=batching.broadcasting,
                  operands=operands, sharding_rule=sharding_rules.elementwise(name),
                  unreduced_rule=unreduced_rule or sharding_rules.nary_unreduced(name),
                  operand_dtypes=contract)


by_parts = ad.jvp_by_parts


# ------------------------------------------------------------- unary primitives
# The derivative rules compute in the order of JAX's (the same operations on the same
# operands, `square` included), so derivatives round as JAX's do and print as its
# programs print; a Python 1 stands for JAX's `_one(x)` (weak when x is), constant_like
# for its `_const(x, c)`.

neg_p = _unop("neg", lax.neg, ad.linear_jvp, dt.NUMBER, transpose=lambda ct, x: [neg(ct)])
sin_p = _unop("sin", lax.sin, by_parts(lambda t, x: mul(t, cos(x))))
cos_p = _unop("cos", lax.cos, by_parts(lambda t, x: neg(mul(t, sin(x)))))
tan_p = _unop("tan", lax.tan,
              by_parts(lambda t, ans, x: mul(t, add(constant_like(x, 1), square(ans))),
                       use_output=True))
asin_p = _unop("asin", lax.asin, by_parts(
    lambda t, x: mul(t, rsqrt(sub(constant_like(x, 1), square(x))))))
acos_p = _unop("acos", lax.acos,
               by_parts(lambda t, x: mul(t, neg(rsqrt(sub(constant_like(x, 1), square(x)))))))
atan_p = _unop("atan", lax.atan, by_parts(
    lambda t, x: div(t, add(constant_like(x, 1), square(x)))))
sinh_p = _unop("sinh", lax.sinh, by_parts(lambda t, x: mul(t, cosh(x))))
cosh_p = _unop("cosh", lax.cosh, by_parts(lambda t, x: mul(t, sinh(x))))
# (t + t*ans) * (1 - ans), not t * (1 - ans**2): JAX's order of operations, so that
# derivatives through tanh round as JAX's do.
tanh_p = _unop("tanh", lax.tanh,
               by_parts(lambda t, ans, x: mul(add(t, mul(t, ans)), sub(1, ans)),
                        use_output=True))
exp_p = _unop("exp", lax.exp, by_parts(lambda t, ans, x: mul(t, ans), use_output=True))
log_p = _unop("log", lax.log, by_parts(lambda t, x: div(t, x)))
log1p_p = _unop("log1p", lax.log1p, by_parts(lambda t, x: div(t, add(x, 1))))
expm1_p = _unop("expm1", lax.expm1,
                by_parts(lambda t, ans, x: mul(t, add(ans, 1)), use_output=True))
sqrt_p = _unop("sqrt", lax.sqrt,
               by_parts(lambda t, ans, x: mul(t, div(constant_like(x, 0.5), ans)),
                        use_output=True))
rsqrt_p = _unop("rsqrt", lax.rsqrt,
                by_parts(lambda t, ans, x: mul(t, mul(constant_like(x, -0.5), div(ans, x))),
                         use_output=True))
logistic_p = _unop("logistic", lax.logistic,
                   by_parts(lambda t, ans, x: mul(t, mul(ans, sub(1, ans))), use_output=True))
erf_p = _unop("erf", lax.erf, by_parts(
    lambda t, x: mul(constant_like(x, 2 / math.sqrt(math.pi)), mul(t, exp(neg(square(x)))))),
    dt.FLOATING)
# t where x >= 0, else -t: the derivative at 0 is 1, as in JAX (sign(0) would give 0).
abs_p = _unop("abs", lax.abs,
              by_parts(lambda t, x: select_n(ge_p.bind(x, zeros_like(x)), neg(t), t)),
              dt.SIGNED, out_dtype=_magnitude_dtype)
sign_p = _unop("sign", lax.sign, ad.zero_jvp, dt.NUMBER)
floor_p = _unop("floor", lax.floor, ad.zero_jvp, dt.FLOATING)
ceil_p = _unop("ceil", lax.ceil, ad.zero_jvp, dt.FLOATING)
round_p = _unop("round", lambda x, rounding_method=0: lax.round(x, rounding_method),
                ad.zero_jvp, dt.FLOATING)
is_finite_p = _unop("is_finite", lax.is_finite, ad.zero_jvp, dt.FLOATING, out_dtype=np.bool_)
not_p = _unop("not", lax.bitwise_not, ad.zero_jvp, dt.INT_OR_BOOL)


def neg(x): return neg_p.bind(x)
def sin(x): return sin_p.bind(x)
def cos(x): return cos_p.bind(x)
def exp(x): return exp_p.bind(x)
def log(x): return log_p.bind(x)
def sqrt(x): return sqrt_p.bind(x)
def rsqrt(x): return rsqrt_p.bind(x)
def sign(x): return sign_p.bind(x)
def cosh(x): return cosh_p.bind(x)
def sinh(x): return sinh_p.bind(x)


# ------------------------------------------------------------ binary primitives

def _add_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if is_undefined_primal(x) else None,
            unbroadcast(ct, y.aval) if is_undefined_primal(y) else None]


def _sub_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if is_undefined_primal(x) else None,
            unbroadcast(neg(ct), y.aval) if is_undefined_primal(y) else None]


def _as_output_tangent(t, out):
    """The tangent of one operand as the output's, the other's being zero: in its dtype
    (the weak type kept), broadcast to its shape and sharding as JAX broadcasts it (axes
    of size 1 squeezed out first), varying as it does."""
    t_aval, out_aval = get_aval(t), get_aval(out)
    if t_aval.dtype != out_aval.dtype:
        t = convert_element_type(t, out_aval.dtype, t_aval.weak_type)
    sharding = out_aval.explicit_sharding
    if t_aval.shape != out_aval.shape or (sharding is not None
                                          and t_aval.explicit_sharding != sharding):
        dims = [i for i, (a, b) in enumerate(zip(t_aval.shape, out_aval.shape)) if a == b]
        if len(dims) != t_aval.ndim:
            t = reshape(t, tuple(t_aval.shape[i] for i in dims))
        t = broadcast_in_dim(t, out_aval.shape, tuple(dims), out_sharding=sharding)
    return vary_as(t, out_aval)


def _additive_jvp(prim, negate_second):
    """add and sub: a zero tangent adds nothing (no zeros are made, as in JAX)."""
    def rule(primals, tangents):
        out = prim.bind(*primals)
        tx, ty = tangents
        if type(tx) is Zero and type(ty) is Zero:
            return out, Zero(ad.tangent_aval(get_aval(out)))
        if type(ty) is Zero:
            return out, _as_output_tangent(tx, out)
        if type(tx) is Zero:
            return out, _as_output_tangent(neg(ty) if negate_second else ty, out)
        return out, prim.bind(tx, ty)
    return rule


def _div_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    out = div(x, y)
    acc = Zero(ad.tangent_aval(get_aval(out)))
    if type(tx) is not Zero:
        acc = ad.add_tangents(acc, div(tx, y))
    if type(ty) is not Zero:
        # (-ty * x) * y**-2, in JAX's order of operations, so float32 derivatives round
        # as JAX's do
        acc = ad.add_tangents(acc, mul(mul(neg(ty), x), integer_pow_p.bind(y, y=-2)))
    return out, acc


def _div_transpose(ct, x, y):
    if is_undefined_primal(y):
        raise TypeError("div is not linear in its denominator; cannot transpose it")
    return [unbroadcast(div(ct, y), x.aval), None]


def _rem_jvp_y(t, x, y):
    q = div(x, y)
    return neg(mul(t, mul(sign(q), floor_p.bind(abs_p.bind(q)))))


def _pow_jvp_x(t, ans, x, y):
    y_aval, x_dtype = get_aval(y), get_aval(x).dtype
    # An integer exponent stays one in pow (exact powers) and scales in x's dtype.
    scale = y if y_aval.dtype == x_dtype else convert_element_type(y, x_dtype, y_aval.weak_type)
    return mul(t, mul(scale, pow_p.bind(x, sub(y, 1))))


def _pow_jvp_y(t, ans, x, y):
    # log of x with its zeros replaced by ones: 0 ** y contributes nothing
    return mul(t, mul(log(select_n(eq(x, 0), x, full_like(x, 1))), ans))


def _pow_dtypes_agree(x, y):
    """pow's exponent may be an integer; otherwise it has the base's dtype."""
    return x == y or (core.is_float_dtype(x) and y.kind in "iu")


def _pow_mismatch(name, dtypes):
    return ("the first argument to pow must have an inexact dtype (float or complex), and "
            "the second argument must have an inexact or integer dtype, and two inexact "
            f"dtypes must match, but got {dtypes[0]} and {dtypes[1]} respectively.")


def _minmax_jvp(pick):
    """Where the operands tie the derivative is split evenly between them, as in JAX."""
    def make(prim):
        def rule(primals, tangents):
            x, y = primals
            out = prim.bind(x, y)
            acc = Zero(ad.tangent_aval(get_aval(out)))
            for t, me, other in ((tangents[0], x, y), (tangents[1], y, x)):
                if type(t) is Zero:
                    continue
                weight = select_n(pick(me, other),
                                  select_n(eq(me, other), zeros_like(out), full_like(out, 0.5)),
                                  full_like(out, 1.0))
                acc = ad.add_tangents(acc, mul(t, weight))
            return out, acc
        return rule
    return core.RuleMaker(make)


def _atan2_denominator(x, y):
    return add(square(x), square(y))


add_p = _binop("add", lax.add, core.RuleMaker(lambda p: _additive_jvp(p, False)), dt.NUMBER,
               transpose=_add_transpose, jnp_name="add",
               unreduced_rule=sharding_rules.add_unreduced)
sub_p = _binop("sub", lax.sub, core.RuleMaker(lambda p: _additive_jvp(p, True)), dt.NUMBER,
               transpose=_sub_transpose, jnp_name="subtract")
mul_p = _binop("mul", lax.mul, ad.bilinear_jvp, dt.NUMBER, jnp_name="multiply",
               unreduced_rule=sharding_rules.mul_unreduced,
               transpose=ad.bilinear_transpose(
                   lambda ct, x, y: unbroadcast(mul(ct, y), x.aval),
                   lambda ct, x, y: unbroadcast(mul(x, ct), y.aval)))
div_p = _binop("div", lax.div, _div_jvp, dt.NUMBER, transpose=_div_transpose,
               jnp_name="divide")
rem_p = _binop("rem", lax.rem, by_parts(lambda t, x, y: t, _rem_jvp_y),
               dt.INTEGER + dt.FLOATING)
pow_p = _binop("pow", lax.pow, by_parts(_pow_jvp_x, _pow_jvp_y, use_output=True),
               contract=dt.OperandDtypes((dt.INEXACT, dt.NUMBER), agree=_pow_dtypes_agree,
                                         mismatch=_pow_mismatch))
max_p = _binop("max", lax.max, _minmax_jvp(lambda a, b: gt(a, b)), jnp_name="maximum")
min_p = _binop("min", lax.min, _minmax_jvp(lambda a, b: lt(a, b)), jnp_name="minimum")
atan2_p = _binop("atan2", lax.atan2, by_parts(
    lambda t, x, y: mul(t, div(y, _atan2_denominator(x, y))),
    lambda t, x, y: mul(t, div(neg(x), _atan2_denominator(x, y)))), dt.INEXACT,
    jnp_name="arctan2")
and_p = _binop("and", lax.bitwise_and, ad.zero_jvp, dt.INT_OR_BOOL)
or_p = _binop("or", lax.bitwise_or, ad.zero_jvp, dt.INT_OR_BOOL)
xor_p = _binop("xor", lax.bitwise_xor, ad.zero_jvp, dt.INT_OR_BOOL)
eq_p = _binop("eq", lax.eq, ad.zero_jvp, out_dtype=np.bool_, jnp_name="equal")
ne_p = _binop("ne", lax.ne, ad.zero_jvp, out_dtype=np.bool_, jnp_name="not_equal")
lt_p = _binop("lt", lax.lt, ad.zero_jvp, dt.ORDERED, out_dtype=np.bool_)
le_p = _binop("le", lax.le, ad.zero_jvp, dt.ORDERED, out_dtype=np.bool_)
gt_p = _binop("gt", lax.gt, ad.zero_jvp, dt.ORDERED, out_dtype=np.bool_)
ge_p = _binop("ge", lax.ge, ad.zero_jvp, dt.ORDERED, out_dtype=np.bool_)
# Sums tangents and cotangents (the interpreters reach it as core.ops.add_any).
add_any_p = _binop("add_any", lax.add, ad.linear_jvp, transpose=_add_transpose,
                   contract=dt.OperandDtypes(), unreduced_rule=sharding_rules.add_unreduced)


def _int_as(n, other):
    """A Python int written in a rule (1 - x*x) as a scalar of the other operand's
    kind, so that it enters the program as JAX's rules' constants do (1.0:f32[])."""
    if type(n) is not int or isinstance(other, (int, float, complex, bool)):
        return n
    aval = get_aval(other)
    if aval.dtype.kind in "biu":
        return n
    if aval.weak_type:   # stays a Python scalar, so that the result stays weak
        return complex(n) if aval.dtype.kind == "c" else float(n)
    return np.array(n, aval.dtype)


def add(x, y): return add_p.bind(_int_as(x, y), _int_as(y, x))
def sub(x, y): return sub_p.bind(_int_as(x, y), _int_as(y, x))
def mul(x, y): return mul_p.bind(_int_as(x, y), _int_as(y, x))
def div(x, y): return div_p.bind(_int_as(x, y), _int_as(y, x))
def eq(x, y): return eq_p.bind(x, y)
def gt(x, y): return gt_p.bind(x, y)
def lt(x, y): return lt_p.bind(x, y)
def logical_and(x, y): return and_p.bind(x, y)


core.ops.add_any = add_any_p.bind


# ---------------------------------------------------------------- integer_pow

def _integer_pow_jvp(t, x, *, y):
    if y == 0:
        return zeros_like(t)
    if y == 1:
        return t
    base = x if y == 2 else integer_pow_p.bind(x, y=y - 1)
    return mul(t, mul(constant_like(x, y), base))


integer_pow_p = define(
    "integer_pow", abstract_eval=lambda x, *, y: _unop_aval("integer_pow", dt.NUMBER)(x),
    lowering=lambda x, *, y: lax.integer_pow(x, y), jvp=by_parts(_integer_pow_jvp),
    batching=batching.vectorized, sharding_rule=sharding_rules.same_as_operand)
# x * x, a primitive of its own as in JAX (jnp.square and the derivative rules bind it)
square_p = _unop("square", lax.square,
                 by_parts(lambda t, x: mul(t, mul(constant_like(x, 2), x))), dt.NUMBER)


def square(x):
    return square_p.bind(x)


# ---------------------------------------------------------------- select_n

# The cases share one dtype (JAX's messages call the operation select).
_SELECT_N_DTYPES = dt.OperandDtypes(same=slice(1, None), name="select", jnp_name="where")


def _select_n_aval(pred, *cases):
    (_, *dtypes), weak = _SELECT_N_DTYPES.check_lenient("select_n", (pred, *cases))
    if pred.dtype not in (np.dtype(np.bool_), np.dtype(np.int32)):
        raise TypeError(f"select_n predicate must be bool or int32, got {pred.dtype}")
    if pred.shape and cases[0].shape != pred.shape:
        raise TypeError("select `which` must be scalar or have the same shape as cases, "
                        f"got `which` shape {pred.shape} but case shape {cases[0].shape}.")
    return ShapedArray(_result_shape("select_n", cases), dtypes[0], weak)


def _select_n_lower(pred, *cases):
    (_, dtype, *_), weak = _SELECT_N_DTYPES.lenient([get_aval(v) for v in (pred, *cases)])
    shape = np.shape(pred) or _result_shape("select_n", [get_aval(c) for c in cases])
    # (a NumPy case of the full shape stays NumPy: made an array here, JAX would put it
    # on the mesh in context, where its select requires the cases' shardings to agree)
    cases = [c if np.shape(c) == shape else jax.numpy.broadcast_to(c, shape)
             for c in (cast_to(c, dtype) for c in cases)]
    out = lax.select_n(pred, *cases)
    return _mark_weak(out) if weak else out   # as its abstract evaluation says


def select_n(which, *cases):
    return select_n_p.bind(which, *cases)


def check_select_cases(cases):
    """jax.lax's select_n: impl's rules may select between an array and a scalar, but
    jax.lax's cases all have one shape (checked before their dtypes, as JAX does)."""
    if not cases:
        raise ValueError("select_n() must have at least one case")
    shapes = [c.aval.shape if isinstance(c, core.Tracer) else np.shape(c) for c in cases]
    if any(s != shapes[0] for s in shapes[1:]):
        raise TypeError(f"select cases must have the same shapes, got "
                        f"[{', '.join(str(s) for s in shapes)}].")


def _select_n_batch(axis_data, vals, dims):
    pred, *cases = vals
    pdim, *cdims = dims
    frame, size = batching.frame_shape(cases, cdims), axis_data.size
    batched = [None if d is None else batching.to_batched_shape(c, d, size, frame)
               for c, d in zip(cases, cdims)]
    # A select's operands are sharded alike over Explicit mesh axes: those broadcast
    # here take a batched case's sharding, as in JAX.
    typed = next((get_aval(b).explicit_sharding for b in batched if b is not None), None)
    cases = [batching.to_batched_shape(c, None, size, frame, typed) if b is None else b
             for b, c in zip(batched, cases)]
    if pdim is not None or get_aval(pred).shape:
        pred = batching.to_batched_shape(pred, pdim, size, frame, typed)
    return select_n(pred, *cases), 0


def _select_n_jvp(primals, tangents):
    pred, *cases = primals
    out = select_n(pred, *cases)
    if all(type(t) is Zero for t in tangents[1:]):
        return out, Zero(ad.tangent_aval(get_aval(out)))
    ts = [ad.instantiate_zeros(t) for t in tangents[1:]]
    return out, select_n(pred, *ts)


def _select_n_transpose(ct, pred, *cases):
    if is_undefined_primal(pred):
        raise TypeError("select_n is not linear in its predicate")
    if type(ct) is Zero:
        return [None] * (1 + len(cases))
    zeros = zeros_like(ct)
    outs = [None]
    for i, c in enumerate(cases):
        if is_undefined_primal(c):
            branches = [zeros] * len(cases)
            branches[i] = ct
            outs.append(unbroadcast(select_n(pred, *branches), c.aval))
        else:
            outs.append(None)
    return outs


select_n_p = define("select_n", abstract_eval=_select_n_aval, lowering=_select_n_lower,
                    jvp=_select_n_jvp, transpose=_select_n_transpose,
                    batching=_select_n_batch, sharding_rule=sharding_rules.select_cases,
                    unreduced_rule=sharding_rules.select_unreduced,
                    operand_dtypes=_SELECT_N_DTYPES)


# ------------------------------------------------------------------- clamp

_CLAMP_DTYPES = dt.OperandDtypes((dt.ANY,))


def _clamp_lower(lo, x, hi):
    dtypes, weak = _CLAMP_DTYPES.lenient([get_aval(v) for v in (lo, x, hi)])
    out = lax.clamp(*[cast_to(v, d) for v, d in zip((lo, x, hi), dtypes)])
    return _mark_weak(out) if weak else out   # as its abstract evaluation says


def _clamp_aval(lo, x, hi):
    for name, a in (("min", lo), ("max", hi)):
        if a.shape and a.shape != x.shape:
            raise TypeError(f"clamp {name} shape {a.shape} must be scalar or {x.shape}")
    dtypes, weak = _CLAMP_DTYPES.check_lenient("clamp", (lo, x, hi))
    return x.update(dtype=dtypes[1], weak_type=weak)


def _clamp_batch(axis_data, vals, dims):
    lo, x, hi = vals
    dlo, dx, dhi = dims
    frame = batching.frame_shape([x], [dx])
    x = batching.to_batched_shape(x, dx, axis_data.size, frame)
    bounds = [b if d is None and not get_aval(b).shape
              else batching.to_batched_shape(b, d, axis_data.size, frame)
              for b, d in ((lo, dlo), (hi, dhi))]
    return clamp_p.bind(bounds[0], x, bounds[1]), 0


def _clamp_jvp(primals, tangents):
    lo, x, hi = primals
    tlo, tx, thi = tangents
    out = clamp_p.bind(lo, x, hi)
    acc = Zero(ad.tangent_aval(get_aval(out)))
    zero = zeros_like(out)
    if type(tx) is not Zero:
        inside = logical_and(gt(x, lo), lt(x, hi))
        acc = ad.add_tangents(acc, select_n(inside, zero, tx))
    if type(tlo) is not Zero:
        acc = ad.add_tangents(acc, select_n(gt(lo, x), zero, _bcast_like(tlo, out)))
    if type(thi) is not Zero:
        acc = ad.add_tangents(acc, select_n(lt(hi, x), zero, _bcast_like(thi, out)))
    return out, acc


def _bcast_like(t, like):
    if get_aval(t).shape == get_aval(like).shape:
        return t
    return broadcast_in_dim(t, get_aval(like).shape, ())


clamp_p = define("clamp", abstract_eval=_clamp_aval, lowering=_clamp_lower, jvp=_clamp_jvp,
                 batching=_clamp_batch, sharding_rule=sharding_rules.elementwise("clamp"),
                 operand_dtypes=_CLAMP_DTYPES)


# -------------------------------------------------------- convert_element_type

def _convert_lower(x, *, new_dtype, weak_type=False):
    if _jax_convert is None:  # pragma: no cover
        out = lax.convert_element_type(x, new_dtype)
        return _mark_weak(out) if weak_type else out
    # The primitive, as JAX's rules bind it: no ComplexWarning (the public functions
    # that convert warn, as JAX's do)
    return _jax_convert(x, new_dtype, weak_type=bool(weak_type),
                        warn_on_complex_to_real_cast=False)


def warn_if_complex_to_real(dtype, new_dtype):
    """The warning of JAX's public conversions (lax.convert_element_type, a reduction's
    dtype=): a complex value cast to a real dtype loses its imaginary part."""
    if np.dtype(dtype).kind == "c" and np.dtype(new_dtype).kind != "c":
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=3)


def _convert_aval(x, *, new_dtype, weak_type=False):
    return ShapedArray(x.shape, new_dtype, weak_type)


def convert_element_type(x, dtype, weak_type=False):
    dtype = core.canonical_dtype(dtype)
    aval = get_aval(x)
    if aval.dtype == dtype and aval.weak_type == weak_type:
        return x
    if (isinstance(x, (bool, int, float, complex, np.generic)) and not weak_type
            and core.current_trace() is not core.eval_trace
            and not (dtype.kind in "iu" and isinstance(x, (float, complex, np.inexact))
                     and not np.isfinite(x))):
        # A Python or NumPy scalar converted now, as JAX converts one inside a
        # transformation: a constant of the new dtype, not an equation
        try:
            return np.asarray(x).astype(dtype) if type(x) is int else np.asarray(x, dtype)
        except OverflowError:
            pass
    return convert_element_type_p.bind(x, new_dtype=dtype, weak_type=bool(weak_type))


def _convert_jvp(primals, tangents, *, new_dtype, weak_type=False):
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if type(t) is Zero or not _float(new_dtype):
        return out, Zero(ad.tangent_aval(get_aval(out)))
    return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


def _convert_transpose(ct, x, *, new_dtype, weak_type=False):
    if type(ct) is Zero:
        return [None]
    return [convert_element_type_p.bind(ct, new_dtype=x.aval.dtype,
                                        weak_type=x.aval.weak_type)]


def _folded_scalar(value, new_dtype):
    """A scalar constant converted now (NumPy's conversion, the real part of a complex
    number for a real type); None where that would not be the program's conversion (a
    NaN or infinity to an integer type, a value NumPy cannot convert)."""
    new_dtype = np.dtype(new_dtype)
    try:
        value = np.asarray(value)
        if value.dtype.kind == "c" and new_dtype.kind != "c":
            value = value.real
        if new_dtype.kind in "biu" and value.dtype.kind == "f" and not np.isfinite(value):
            return None
        return value.astype(new_dtype)
    except (TypeError, ValueError, OverflowError):
        return None


def _convert_staging(trace, args, *, new_dtype, weak_type=False):
    """As JAX stages a conversion: to the operand's own type it is the operand (this is
    how a constant made inside a transformation enters the program, with no
    equation), and of a scalar constant it is folded into a literal."""
    x, = args
    aval = get_aval(x)
    if aval.dtype == new_dtype and aval.weak_type == weak_type:
        return trace.instantiate(x)
    value = trace.scalar_constant(x)
    if value is None:
        return None
    folded = _folded_scalar(value, new_dtype)
    if folded is None:
        return None
    out_aval = core.abstract_eval(convert_element_type_p, [aval],
                                  dict(new_dtype=new_dtype, weak_type=weak_type))
    if weak_type:
        # a literal's value is what evaluation reads: a weak one must be a Python
        # scalar (of the default dtype of its kind), as JAX's folding makes it
        folded = folded.item()
        if get_aval(folded) != out_aval:
            return None
    return trace.new_literal(folded, out_aval)


convert_element_type_p = define(
    "convert_element_type", abstract_eval=_convert_aval, lowering=_convert_lower,
    jvp=_convert_jvp, transpose=_convert_transpose, batching=batching.vectorized,
    staging=_convert_staging,
    sharding_rule=sharding_rules.same_as_operand,
    unreduced_rule=sharding_rules.keeps_unreduced)


# ------------------------------------------------------------------------ copy

def _copy_transpose(ct, x):
    return [None if type(ct) is Zero else copy_p.bind(ct)]


# A new array of the operand's values (jnp.array(x) and jnp.copy(x) bind it, as in JAX,
# which stages and prints it).
def _copy_lower(x):
    return jax.numpy.array(x, copy=True)


copy_p = define("copy", abstract_eval=lambda x: x, lowering=_copy_lower, jvp=ad.linear_jvp,
                transpose=_copy_transpose, batching=batching.vectorized,
                sharding_rule=sharding_rules.same_as_operand,
                unreduced_rule=sharding_rules.keeps_unreduced)


def copy(x):
    if core.current_trace() is core.eval_trace and not isinstance(x, core.Tracer):
        return _copy_lower(x)   # an array needs no type check: JAX's copy at once
    return copy_p.bind(x)


def _zeros(aval):
    """Zeros of type `aval`, weakly typed when it is (a zero tangent or cotangent of a
    value computed from Python scalars stays weak, as in JAX), off any mesh when it is
    (the cotangent of an input from outside the mesh in context, as in JAX)."""
    with contextlib.ExitStack() as scope:
        # entered only over a mesh: JAX keys its compiled ops by the mesh in context, so
        # an empty one entered where none is would compile the same op again
        if not aval.on_mesh and not jax.sharding.get_abstract_mesh().empty:
            scope.enter_context(jax.sharding.use_abstract_mesh(core.EMPTY_MESH))
        zeros = vary_as(broadcast_in_dim(np.zeros((), aval.dtype), aval.shape, (),
                                         out_sharding=aval.explicit_sharding), aval)
        return convert_element_type(zeros, aval.dtype, weak_type=True) if aval.weak_type \
            else zeros


core.ops.zeros = _zeros


# ------------------------------------------------------------- stop_gradient

stop_gradient_p = define("stop_gradient", abstract_eval=lambda x: x,
                         lowering=lax.stop_gradient, jvp=ad.zero_jvp,
                         batching=batching.vectorized,
                         sharding_rule=sharding_rules.same_as_operand,
                         unreduced_rule=sharding_rules.keeps_unreduced)


# ------------------------------------------------------------------ helpers

def vary_as(x, aval):
    """`x` cast to vary over the manual mesh axes values of type `aval` vary over, as
    JAX makes an array built like another inside a shard_map body."""
    missing = tuple(n for n in aval.vma if n not in get_aval(x).vma)
    return core.ops.pvary(x, missing) if missing else x


def zeros_like(x):
    return full_like(x, 0)


def constant_like(x, value):
    """A constant of a derivative rule about `x`, typed as JAX's rules type theirs: a
    Python scalar (weak, taking x's dtype) beside a weakly typed scalar, else a strongly
    typed one of x's dtype, so that the tangent of a weakly typed array through tan or
    sqrt is strong, as JAX's is."""
    aval = get_aval(x)
    if aval.weak_type and aval.ndim == 0:   # a Python scalar of x's kind
        return {"c": complex, "f": float}.get(aval.dtype.kind, int)(value)
    return np.array(value, aval.dtype)


def full_like(x, value):
    """An array of ``value`` with ``x``'s shape, dtype, weak type and sharding (a rule's
    constant must not make a weakly typed result strong: grad of ``maximum(x, 0.)`` at a
    Python float is weak in JAX)."""
    aval = get_aval(x)
    fill = np.array(value, aval.dtype)
    if aval.weak_type and _jax_convert is not None:
        fill = _jax_convert(fill, weak_type=True)
    # cast before broadcasting, as JAX's programs do (`pvary 1.0` then broadcast_in_dim)
    return broadcast_in_dim(vary_as(fill, aval), aval.shape, (),
                            out_sharding=aval.explicit_sharding)


# ------------------------------------------------- bit-level and special functions
# What random number generation builds on: shifts and bit reinterpretation turn
# random bits into floats, erf_inv turns uniforms into normals.

shift_left_p = _binop("shift_left", lax.shift_left, ad.zero_jvp, dt.INTEGER,
                      jnp_name="left_shift")
shift_right_logical_p = _binop("shift_right_logical", lax.shift_right_logical,
                               ad.zero_jvp, dt.INTEGER, jnp_name="right_shift")
shift_right_arithmetic_p = _binop("shift_right_arithmetic", lax.shift_right_arithmetic,
                                  ad.zero_jvp, dt.INTEGER, jnp_name="right_shift")
clz_p = _unop("clz", lax.clz, ad.zero_jvp, dt.INTEGER)
# JAX defines no derivative for nextafter (callers stop gradients before it).
nextafter_p = _binop("nextafter", lax.nextafter, None, dt.FLOATING, jnp_name="nextafter")
erf_inv_p = _unop("erf_inv", lax.erf_inv, by_parts(
    lambda t, ans, x: mul(constant_like(x, math.sqrt(math.pi) / 2), mul(t, exp(square(ans)))),
    use_output=True), dt.FLOATING)


def _bitcast_aval(x, *, new_dtype):
    old, new = x.dtype.itemsize, np.dtype(new_dtype).itemsize
    if x.dtype == np.bool_ or np.dtype(new_dtype) == np.bool_:
        raise TypeError("bitcast_convert_type does not accept bool operands or results")
    if old == new:
        shape = x.shape
    elif old > new:
        shape = x.shape + (old // new,)
    elif not x.shape or x.shape[-1] != new // old:
        raise TypeError(f"bitcast_convert_type from {x.dtype} to {np.dtype(new_dtype)} needs "
                        f"a last axis of size {new // old}, got shape {x.shape}")
    else:
        shape = x.shape[:-1]
    return ShapedArray(shape, new_dtype)


def _bitcast_batch(axis_data, vals, dims, *, new_dtype):
    # The width change adds or removes the last axis: keep the batch axis in front.
    (x,), (d,) = vals, dims
    return bitcast_convert_type_p.bind(batching.moveaxis(x, d, 0), new_dtype=new_dtype), 0


bitcast_convert_type_p = define(
    "bitcast_convert_type", abstract_eval=_bitcast_aval,
    lowering=lambda x, *, new_dtype: lax.bitcast_convert_type(x, new_dtype),
    jvp=ad.zero_jvp, batching=_bitcast_batch)


def bitcast_convert_type(operand, new_dtype):
    """Reinterpret the bits of `operand` as `new_dtype` (as jax.lax.bitcast_convert_type)."""
    return bitcast_convert_type_p.bind(operand, new_dtype=core.canonical_dtype(new_dtype))
