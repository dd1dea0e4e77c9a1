"""Every transformation on every elementwise, shape and dot_general primitive,
checked against the jax package (values, shapes, dtypes) in float32 and float64.

Each table row is (name, impl_fn, jax_fn, arg_makers, options). The impl functions bind
impl's primitives directly; the jax functions call the same-named jax.lax operation.
Inputs are drawn from numpy RandomState inside each function's domain and away from
its kinks, so reference derivatives are well defined.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import impl
import impl.numpy as inp
from impl.core import float0
from impl.primitives import elementwise as ew
from impl.primitives import linalg as la
from impl.primitives import shape as sh

import helpers
from helpers import (batched_args, floats_in_ci, make_args, partial_args as _partial,
                     seeded_rng as _rng)

FLOATS = [np.float32, np.float64]
# ----------------------------------------------------------------- arg makers

def U(lo, hi, shape=(2, 3)):
    """Uniform in [lo, hi)."""
    return lambda rng, dtype, lead=(): rng.uniform(lo, hi, lead + shape).astype(dtype)


def NZ(lo, hi, shape=(2, 3)):
    """Magnitude in [lo, hi) with a random sign: away from zero."""
    def make(rng, dtype, lead=()):
        s = lead + shape
        return (rng.uniform(lo, hi, s) * rng.choice([-1.0, 1.0], s)).astype(dtype)
    return make


def OFFINT(shape=(2, 3)):
    """Away from integers and half-integers (kinks of floor, ceil, round)."""
    def make(rng, dtype, lead=()):
        s = lead + shape
        return (rng.randint(-3, 4, s) + rng.uniform(0.1, 0.4, s)).astype(dtype)
    return make


def BOOL(shape=(2, 3)):
    return lambda rng, dtype, lead=(): rng.rand(*(lead + shape)) > 0.5


def _other(dtype):
    return np.float64 if np.dtype(dtype) == np.float32 else np.float32


# ------------------------------------------------------------------------ table

class Op:
    """A row of the table. `diff`: argnums to differentiate (None: output not float).
    `linear`: argnums in which the function is jointly linear (others held fixed)."""

    def __init__(self, name, impl_fn, jax_fn, makers, diff="all", linear=None,
                 hess=False, out_dtype=None):
        self.name, self.impl_fn, self.jax_fn, self.makers = name, impl_fn, jax_fn, makers
        n = len(makers)
        self.diff = tuple(range(n)) if diff == "all" else diff
        self.linear = tuple(range(n)) if linear == "all" else linear
        self.hess = hess

    def __repr__(self):
        return self.name


UNARY = {  # name: (primitive, jax.lax fn, maker, linear, hessian)
    "neg": (ew.neg_p, lax.neg, U(-2, 2), True, False),
    "sin": (ew.sin_p, lax.sin, U(-2, 2), False, True),
    "cos": (ew.cos_p, lax.cos, U(-2, 2), False, True),
    "tan": (ew.tan_p, lax.tan, U(-1.2, 1.2), False, True),
    "asin": (ew.asin_p, lax.asin, U(-0.9, 0.9), False, False),
    "acos": (ew.acos_p, lax.acos, U(-0.9, 0.9), False, False),
    "atan": (ew.atan_p, lax.atan, U(-2, 2), False, False),
    "sinh": (ew.sinh_p, lax.sinh, U(-2, 2), False, False),
    "cosh": (ew.cosh_p, lax.cosh, U(-2, 2), False, False),
    "tanh": (ew.tanh_p, lax.tanh, U(-2, 2), False, True),
    "exp": (ew.exp_p, lax.exp, U(-2, 2), False, True),
    "log": (ew.log_p, lax.log, U(0.5, 3), False, True),
    "log1p": (ew.log1p_p, lax.log1p, U(-0.5, 2), False, False),
    "expm1": (ew.expm1_p, lax.expm1, U(-2, 2), False, False),
    "sqrt": (ew.sqrt_p, lax.sqrt, U(0.5, 3), False, True),
    "rsqrt": (ew.rsqrt_p, lax.rsqrt, U(0.5, 3), False, True),
    "logistic": (ew.logistic_p, lax.logistic, U(-3, 3), False, True),
    "abs": (ew.abs_p, lax.abs, NZ(0.2, 2), False, False),
    "sign": (ew.sign_p, lax.sign, NZ(0.2, 2), False, False),
    "floor": (ew.floor_p, lax.floor, OFFINT(), False, False),
    "ceil": (ew.ceil_p, lax.ceil, OFFINT(), False, False),
    "round": (ew.round_p, lax.round, OFFINT(), False, False),
    "erf": (ew.erf_p, lax.erf, U(-2, 2), False, True),
}

BINARY = {  # name: (primitive, jax.lax fn, maker x, maker y, linear, hessian)
    "add": (ew.add_p, lax.add, U(-2, 2), U(-2, 2), "all", False),
    "sub": (ew.sub_p, lax.sub, U(-2, 2), U(-2, 2), "all", False),
    "mul": (ew.mul_p, lax.mul, U(-2, 2), U(-2, 2), (0,), True),
    "div": (ew.div_p, lax.div, U(-2, 2), NZ(0.5, 2), (0,), True),
    "rem": (ew.rem_p, lax.rem, U(5.2, 5.8), U(2.0, 2.4), None, False),
    "pow": (ew.pow_p, lax.pow, U(0.5, 2), U(-1.5, 1.5), None, True),
    "max": (ew.max_p, lax.max, U(-2, 2), U(-2, 2), None, False),
    "min": (ew.min_p, lax.min, U(-2, 2), U(-2, 2), None, False),
    "atan2": (ew.atan2_p, lax.atan2, NZ(0.3, 2), NZ(0.3, 2), None, True),
}

COMPARISONS = {"eq": (ew.eq_p, lax.eq), "ne": (ew.ne_p, lax.ne), "lt": (ew.lt_p, lax.lt),
               "le": (ew.le_p, lax.le), "gt": (ew.gt_p, lax.gt), "ge": (ew.ge_p, lax.ge)}


def _rounded_pair(rng, dtype, lead=()):
    return rng.randint(-2, 3, lead + (2, 3)).astype(dtype)


def _bind(prim, **params):
    def f(*args):
        return prim.bind(*args, **params)
    f.__name__ = prim.name
    return f


OPS = []
for _n, (_p, _j, _m, _lin, _h) in UNARY.items():
    OPS.append(Op(_n, _bind(_p), _j, [_m], linear="all" if _lin else None, hess=_h))
for _n, (_p, _j, _mx, _my, _lin, _h) in BINARY.items():
    OPS.append(Op(_n, _bind(_p), _j, [_mx, _my], linear=_lin, hess=_h))
for _n, (_p, _j) in COMPARISONS.items():
    # rounded values make ties (eq/le/ge) actually occur
    OPS.append(Op(_n, _bind(_p), _j, [_rounded_pair, _rounded_pair], diff=None))

OPS += [
    Op("mul_weak_scalar", lambda x: ew.mul(x, 2.5), lambda x: x * 2.5, [U(-2, 2)],
       linear="all"),
    Op("add_rank0", lambda x, y: ew.add(x, y), lambda x, y: x + y, [U(-2, 2), U(-2, 2, ())]),
    Op("integer_pow3", _bind(ew.integer_pow_p, y=3), lambda x: lax.integer_pow(x, 3),
       [U(-2, 2)], hess=True),
    Op("integer_pow_neg2", _bind(ew.integer_pow_p, y=-2), lambda x: lax.integer_pow(x, -2),
       [NZ(0.5, 2)]),
    Op("integer_pow2", _bind(ew.integer_pow_p, y=2), lambda x: lax.integer_pow(x, 2),
       [U(-2, 2)], hess=True),
    Op("integer_pow0", _bind(ew.integer_pow_p, y=0), lambda x: lax.integer_pow(x, 0),
       [U(-2, 2)]),
    Op("select_n2", _bind(ew.select_n_p), lax.select_n, [BOOL(), U(-2, 2), U(-2, 2)],
       diff=(1, 2), linear=(1, 2)),
    Op("clamp", _bind(ew.clamp_p), lax.clamp, [U(-1, -0.5), U(-2, 2), U(0.5, 1)]),
    Op("clamp_scalar_bounds", lambda x: ew.clamp_p.bind(-0.5, x, 0.7),
       lambda x: jnp.clip(x, -0.5, 0.7), [U(-2, 2)]),
    Op("convert_other_float",
       lambda x: ew.convert_element_type(x, _other(x.dtype)),
       lambda x: lax.convert_element_type(x, _other(x.dtype)), [U(-2, 2)], linear="all"),
    Op("convert_int32", lambda x: ew.convert_element_type(x, np.int32),
       lambda x: lax.convert_element_type(x, np.int32), [U(-5, 5)], diff=None),
    Op("stop_gradient", _bind(ew.stop_gradient_p), lax.stop_gradient, [U(-2, 2)]),
    Op("stop_gradient_mix", lambda x: ew.mul(x, ew.stop_gradient_p.bind(ew.sin(x))),
       lambda x: x * lax.stop_gradient(lax.sin(x)), [U(-2, 2)], hess=True),
    # shape primitives
    Op("broadcast_in_dim", lambda x: sh.broadcast_in_dim(x, (2, 3, 4), (1,)),
       lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (1,)), [U(-2, 2, (3,))], linear="all"),
    Op("broadcast_in_dim_stretch", lambda x: sh.broadcast_in_dim(x, (3, 4), (0, 1)),
       lambda x: lax.broadcast_in_dim(x, (3, 4), (0, 1)), [U(-2, 2, (3, 1))],
       linear="all"),
    Op("reshape", lambda x: sh.reshape(x, (2, 6)), lambda x: lax.reshape(x, (2, 6)),
       [U(-2, 2, (3, 4))], linear="all"),
    Op("transpose", lambda x: sh.transpose(x, (2, 0, 1)),
       lambda x: lax.transpose(x, (2, 0, 1)), [U(-2, 2, (3, 4, 2))], linear="all"),
    Op("squeeze", lambda x: sh.squeeze(x, (1,)), lambda x: lax.squeeze(x, (1,)),
       [U(-2, 2, (3, 1, 4))], linear="all"),
    Op("expand_dims", lambda x: sh.expand_dims(x, (0, 2)),
       lambda x: lax.expand_dims(x, (0, 2)), [U(-2, 2, (3, 4))], linear="all"),
    Op("reduce_sum_02", lambda x: sh.reduce_sum(x, (0, 2)),
       lambda x: lax.reduce_sum(x, (0, 2)), [U(-2, 2, (3, 4, 2))], linear="all"),
    Op("reduce_sum_1", lambda x: sh.reduce_sum(x, (1,)), lambda x: lax.reduce_sum(x, (1,)),
       [U(-2, 2, (3, 4))], linear="all"),
]

DOT_DNS = {
    "matmul": ((((1,), (0,)), ((), ())), (3, 4), (4, 2)),
    "contract_first": ((((0,), (0,)), ((), ())), (4, 3), (4, 2)),
    "two_contract": ((((1, 2), (2, 0)), ((), ())), (3, 4, 2), (2, 5, 4)),
    "outer": ((((), ()), ((), ())), (3,), (2,)),
    "batch": ((((2,), (1,)), ((0,), (0,))), (2, 3, 4), (2, 4, 5)),
    "batch_mid": ((((0,), (2,)), ((1,), (0,))), (4, 2, 3), (2, 5, 4)),
    "vecvec": ((((0,), (0,)), ((), ())), (4,), (4,)),
}
for _n, (_dn, _sx, _sy) in DOT_DNS.items():
    OPS.append(Op(f"dot_general_{_n}",
                  functools.partial(la.dot_general, dimension_numbers=_dn),
                  functools.partial(lax.dot_general, dimension_numbers=_dn),
                  [U(-2, 2, _sx), U(-2, 2, _sy)], linear=(0,),
                  hess=_n in ("matmul", "batch")))

OPS_BY_NAME = {op.name: op for op in OPS}
DIFF_OPS = [op for op in OPS if op.diff]
LINEAR_OPS = [op for op in OPS if op.linear]
HESS_OPS = [op for op in OPS if op.hess]


# ------------------------------------------------------------------- helpers

assert_tree_close = functools.partial(helpers.assert_tree_close, tol=helpers.TOLERANCE["elementwise"],
                                      check_weak=True)


def _summed(fn, sum_fn):
    return lambda *a: sum_fn(fn(*a))


def _isum(x):
    return inp.sum(x)


def _jsum(x):
    return jnp.sum(x)


def _in_axes_options(op):
    n = len(op.makers)
    opts = [(0,) * n]
    ranks = [np.ndim(m(np.random.RandomState(0), np.float32)) for m in op.makers]
    if all(r >= 1 for r in ranks):
        opts.append((1,) * n)
    if n >= 2:
        opts.append((None,) + (0,) * (n - 1))
        last = 1 if ranks[-1] >= 1 else 0
        opts.append((0,) * (n - 2) + (0, None) if n > 2 else (last, None))
        opts.append(tuple(None if i % 2 else (1 if ranks[i] >= 1 else 0) for i in range(n)))
    return list(dict.fromkeys(opts))


VMAP_CASES = [(op, ax) for op in OPS for ax in _in_axes_options(op)]


def _tangents(args, dtype, key):
    rng = _rng(*key)
    return [rng.standard_normal(np.shape(a)).astype(dtype) for a in args]


ids = lambda op: op.name  # noqa: E731


def jit_if_f32(J, f, dtype):
    """The float32 half of the composed-transformation tests runs compiled (one XLA
    program instead of many eagerly dispatched ops); the float64 half runs eagerly."""
    return J.jit(f) if np.dtype(dtype) == np.float32 else f


def alternating(ops):
    """(op, dtype) pairs with the dtype alternating along the table: the costly
    composed transformations see both float32 and float64 without doubling the run."""
    return [pytest.param(op, FLOATS[i % 2], id=f"{op.name}-{np.dtype(FLOATS[i % 2]).name}")
            for i, op in enumerate(ops)]


# ------------------------------------------------------------------- eager / jit

@pytest.mark.parametrize("dtype", floats_in_ci(np.float32))
@pytest.mark.parametrize("op", OPS, ids=ids)
def test_eager(op, dtype):
    args = make_args(op, dtype)
    assert_tree_close(op.impl_fn(*args), op.jax_fn(*args), dtype)


@pytest.mark.parametrize("dtype", floats_in_ci(np.float32))
@pytest.mark.parametrize("op", OPS, ids=ids)
def test_jit(op, dtype):
    args = make_args(op, dtype)
    assert_tree_close(impl.jit(op.impl_fn)(*args), jax.jit(op.jax_fn)(*args), dtype)


# -------------------------------------------------------------------- forward

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", OPS, ids=ids)
def test_jvp(op, dtype):
    """Tangents along the float arguments; non-float outputs get float0 tangents."""
    args = make_args(op, dtype)
    nums = tuple(i for i, a in enumerate(args) if np.asarray(a).dtype.kind == "f")
    ts = _tangents([args[i] for i in nums], dtype, (op.name, "jvp"))
    got = impl.jvp(_partial(op.impl_fn, args, nums), [args[i] for i in nums], ts)
    want = jax.jvp(_partial(op.jax_fn, args, nums), [args[i] for i in nums], ts)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("dtype", floats_in_ci(np.float64))
@pytest.mark.parametrize("op", DIFF_OPS, ids=ids)
def test_linearize(op, dtype):
    args = make_args(op, dtype)
    dyn = [args[i] for i in op.diff]
    ts = _tangents(dyn, dtype, (op.name, "lin"))
    out, f_lin = impl.linearize(_partial(op.impl_fn, args, op.diff), *dyn)
    jout, jf_lin = jax.linearize(_partial(op.jax_fn, args, op.diff), *dyn)
    assert_tree_close(out, jout, dtype)
    assert_tree_close(f_lin(*ts), jf_lin(*ts), dtype)


@pytest.mark.parametrize("op,dtype", alternating(DIFF_OPS))
@pytest.mark.slow
def test_jacfwd(op, dtype):
    args = make_args(op, dtype)
    got = jit_if_f32(impl, impl.jacfwd(op.impl_fn, argnums=op.diff), dtype)(*args)
    want = jit_if_f32(jax, jax.jacfwd(op.jax_fn, argnums=op.diff), dtype)(*args)
    assert_tree_close(got, want, dtype)


# -------------------------------------------------------------------- reverse

@pytest.mark.parametrize("dtype", floats_in_ci(np.float64))
@pytest.mark.parametrize("op", DIFF_OPS, ids=ids)
def test_grad(op, dtype):
    args = make_args(op, dtype)
    got = impl.grad(_summed(op.impl_fn, _isum), argnums=op.diff)(*args)
    want = jax.grad(_summed(op.jax_fn, _jsum), argnums=op.diff)(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", DIFF_OPS, ids=ids)
def test_vjp(op, dtype):
    args = make_args(op, dtype)
    dyn = [args[i] for i in op.diff]
    out, f_vjp = impl.vjp(_partial(op.impl_fn, args, op.diff), *dyn)
    jout, jf_vjp = jax.vjp(_partial(op.jax_fn, args, op.diff), *dyn)
    ct = _tangents([jout], np.asarray(jout).dtype, (op.name, "ct"))[0]
    assert_tree_close(out, jout, dtype)
    assert_tree_close(f_vjp(ct), jf_vjp(ct), dtype)


@pytest.mark.parametrize("op,dtype", alternating(DIFF_OPS))
@pytest.mark.slow
def test_jacrev(op, dtype):
    args = make_args(op, dtype)
    got = jit_if_f32(impl, impl.jacrev(op.impl_fn, argnums=op.diff), dtype)(*args)
    want = jit_if_f32(jax, jax.jacrev(op.jax_fn, argnums=op.diff), dtype)(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("op,dtype", alternating(HESS_OPS))
@pytest.mark.slow
def test_hessian(op, dtype):
    args = make_args(op, dtype)
    got = jit_if_f32(impl, impl.hessian(_summed(op.impl_fn, _isum), argnums=op.diff),
                     dtype)(*args)
    want = jit_if_f32(jax, jax.hessian(_summed(op.jax_fn, _jsum), argnums=op.diff),
                      dtype)(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", LINEAR_OPS, ids=ids)
def test_linear_transpose(op, dtype):
    args = make_args(op, dtype)
    dyn = [args[i] for i in op.linear]
    f_t = impl.linear_transpose(_partial(op.impl_fn, args, op.linear), *dyn)
    jf_t = jax.linear_transpose(_partial(op.jax_fn, args, op.linear), *dyn)
    out = op.jax_fn(*args)
    ct = _tangents([out], np.asarray(out).dtype, (op.name, "lt"))[0]
    assert_tree_close(f_t(ct), jf_t(ct), dtype)


# ---------------------------------------------------------------------- vmap

@pytest.mark.parametrize("op,in_axes,dtype", [
    pytest.param(op, ax, FLOATS[i % 2],
                 id=f"{op.name}-{ax}-{np.dtype(FLOATS[i % 2]).name}".replace(" ", ""))
    for i, (op, ax) in enumerate(VMAP_CASES)])
def test_vmap(op, in_axes, dtype):
    args = batched_args(op, dtype, in_axes)
    got = impl.vmap(op.impl_fn, in_axes=in_axes)(*args)
    want = jax.vmap(op.jax_fn, in_axes=in_axes)(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("op,dtype", alternating(OPS[1:]))
def test_vmap_out_axes_last(op, dtype):
    in_axes = (0,) * len(op.makers)
    args = batched_args(op, dtype, in_axes)
    got = impl.vmap(op.impl_fn, in_axes=in_axes, out_axes=-1)(*args)
    want = jax.vmap(op.jax_fn, in_axes=in_axes, out_axes=-1)(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("op,dtype", alternating(DIFF_OPS))
@pytest.mark.slow
def test_vmap_of_grad(op, dtype):
    in_axes = tuple(0 if i in op.diff else None for i in range(len(op.makers)))
    args = batched_args(op, dtype, in_axes)
    got = impl.vmap(impl.grad(_summed(op.impl_fn, _isum), argnums=op.diff),
                    in_axes=in_axes)(*args)
    want = jax.vmap(jax.grad(_summed(op.jax_fn, _jsum), argnums=op.diff),
                    in_axes=in_axes)(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("op,dtype", alternating(DIFF_OPS))
@pytest.mark.slow
def test_grad_of_vmap(op, dtype):
    in_axes = _in_axes_options(op)[-1]
    args = batched_args(op, dtype, in_axes)
    got = jit_if_f32(impl, impl.grad(_summed(impl.vmap(op.impl_fn, in_axes=in_axes), _isum),
                                     argnums=op.diff), dtype)(*args)
    want = jit_if_f32(jax, jax.grad(_summed(jax.vmap(op.jax_fn, in_axes=in_axes), _jsum),
                                    argnums=op.diff), dtype)(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("op,dtype", alternating(DIFF_OPS))
@pytest.mark.slow
def test_jit_vmap_grad(op, dtype):
    in_axes = (0,) * len(op.makers)
    args = batched_args(op, dtype, in_axes)
    got = impl.jit(impl.vmap(impl.grad(_summed(op.impl_fn, _isum), argnums=op.diff)))(*args)
    want = jax.jit(jax.vmap(jax.grad(_summed(op.jax_fn, _jsum), argnums=op.diff)))(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("op,dtype", alternating(DIFF_OPS[::3]))
def test_grad_of_jit(op, dtype):
    args = make_args(op, dtype)
    got = impl.grad(_summed(impl.jit(op.impl_fn), _isum), argnums=op.diff)(*args)
    want = jax.grad(_summed(jax.jit(op.jax_fn), _jsum), argnums=op.diff)(*args)
    assert_tree_close(got, want, dtype)


# ----------------------------------------------------------- integer operands

INT_OPS = [
    ("add", ew.add_p, lax.add, 2), ("sub", ew.sub_p, lax.sub, 2), ("mul", ew.mul_p, lax.mul, 2),
    ("max", ew.max_p, lax.max, 2), ("min", ew.min_p, lax.min, 2), ("rem", ew.rem_p, lax.rem, 2),
    ("div", ew.div_p, lax.div, 2), ("neg", ew.neg_p, lax.neg, 1),
    ("abs", ew.abs_p, lax.abs, 1), ("sign", ew.sign_p, lax.sign, 1),
    ("lt", ew.lt_p, lax.lt, 2), ("eq", ew.eq_p, lax.eq, 2),
]


@pytest.mark.parametrize("name,prim,jfn,n,dtype", [
    pytest.param(*o, dt, id=f"{o[0]}-{np.dtype(dt).name}")
    for i, o in enumerate(INT_OPS) for dt in [(np.int32, np.int64)[i % 2]]])
def test_integer_operands(name, prim, jfn, n, dtype):
    """Eager, jit, vmap and jvp (float0 tangents in and out) on integer arrays."""
    rng = _rng(name, "int", np.dtype(dtype).name)
    args = [rng.randint(-5, 6, (3, 4)).astype(dtype) for _ in range(n)]
    if name in ("rem", "div"):
        args[1] = np.where(args[1] == 0, 3, args[1]).astype(dtype)
    f = _bind(prim)
    assert_tree_close(f(*args), jfn(*args))
    assert_tree_close(impl.jit(f)(*args), jax.jit(jfn)(*args))
    assert_tree_close(impl.vmap(f, in_axes=1)(*args), jax.vmap(jfn, in_axes=1)(*args))
    ts = [np.zeros(a.shape, float0) for a in args]
    assert_tree_close(impl.jvp(f, args, ts), jax.jvp(jfn, args, ts))


# --------------------------------------------------------------- weak types

WEAK_CASES = [
    ("mul_py_scalars", lambda: ew.mul(2.0, 3.0), lambda: lax.mul(2.0, 3.0)),
    ("add_f32_weak", lambda: ew.add(np.float32(1.5) * np.ones(3, np.float32), 2.0),
     lambda: np.float32(1.5) * jnp.ones(3, np.float32) + 2.0),
    ("sin_weak", lambda: ew.sin(1.0), lambda: lax.sin(1.0)),
    ("int_weak", lambda: ew.add(2, 3), lambda: lax.add(2, 3)),
    ("jit_weak", lambda: impl.jit(lambda x: ew.mul(x, 2.0))(3.0),
     lambda: jax.jit(lambda x: lax.mul(x, 2.0))(3.0)),
    ("grad_weak", lambda: impl.grad(lambda x: ew.mul(x, x))(3.0),
     lambda: jax.grad(lambda x: lax.mul(x, x))(3.0)),
    ("vmap_weak_broadcast", lambda: impl.vmap(lambda x: ew.mul(x, 2.0))(np.ones(3)),
     lambda: jax.vmap(lambda x: lax.mul(x, 2.0))(np.ones(3))),
]


@pytest.mark.parametrize("name,f,jf", WEAK_CASES, ids=[c[0] for c in WEAK_CASES])
def test_weak_types(name, f, jf):
    got, want = f(), jf()
    assert_tree_close(got, want)
    assert getattr(got, "weak_type", False) == want.weak_type


# --------------------------------------------------------------- a composite

@pytest.mark.parametrize("dtype", FLOATS)
def test_composite_program_all_transforms(dtype):
    """A small MLP-like program through nested transformations."""
    rng = _rng("composite", np.dtype(dtype).name)
    w = rng.standard_normal((3, 4)).astype(dtype)
    xs = rng.standard_normal((5, 3)).astype(dtype)

    def make(L, sumf):
        def loss(w, x):
            h = L.dot_general(x, w, (((0,), (0,)), ((), ())))
            return sumf(L.mul(L.tanh(h), L.logistic(h)))
        return loss

    class I:
        dot_general = staticmethod(la.dot_general)
        mul = staticmethod(ew.mul)
        tanh = staticmethod(_bind(ew.tanh_p))
        logistic = staticmethod(_bind(ew.logistic_p))

    il, jl = make(I, _isum), make(lax, _jsum)
    got = impl.jit(impl.vmap(impl.grad(il), in_axes=(None, 0)))(w, xs)
    want = jax.jit(jax.vmap(jax.grad(jl), in_axes=(None, 0)))(w, xs)
    assert_tree_close(got, want, dtype)
    got = impl.hessian(lambda w: il(w, xs[0]))(w)
    want = jax.hessian(lambda w: jl(w, xs[0]))(w)
    assert_tree_close(got, want, dtype)


# ------------------------------------------------------------ the impl.lax surface

LAX_UNARY = ["neg", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
             "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "logistic", "erf", "abs",
             "sign", "floor", "ceil", "round", "square", "stop_gradient", "is_finite"]
LAX_BINARY = ["add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "eq", "ne",
              "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("name", LAX_UNARY + LAX_BINARY)
def test_impl_lax_functions(name):
    """impl.lax exposes jax.lax's elementwise functions with the same results."""
    rng = _rng("lax", name)
    args = [rng.uniform(0.3, 0.9, (2, 3)) for _ in range(1 if name in LAX_UNARY else 2)]
    f, jf = getattr(impl.lax, name), getattr(lax, name)
    assert_tree_close(f(*args), jf(*args))
    if name not in ("eq", "ne", "lt", "le", "gt", "ge", "is_finite"):
        assert_tree_close(impl.grad(lambda *a: inp.sum(f(*a)))(*args),
                          jax.grad(lambda *a: jnp.sum(jf(*a)))(*args))


def test_impl_lax_misc():
    x = np.linspace(-2, 2, 7)
    assert_tree_close(impl.lax.integer_pow(x, 3), lax.integer_pow(x, 3))
    assert_tree_close(impl.lax.clamp(-1.0, x, 1.5), lax.clamp(-1.0, x, 1.5))
    tree = {"a": x, "b": (x * 2,)}
    assert_tree_close(impl.lax.stop_gradient(tree), lax.stop_gradient(tree))
    assert_tree_close(impl.grad(lambda x: x * impl.lax.stop_gradient(x))(3.0),
                      jax.grad(lambda x: x * lax.stop_gradient(x))(3.0))
    b = np.array([1, 6, 3], np.int32)
    assert_tree_close(impl.lax.bitwise_and(b, np.int32(5)), lax.bitwise_and(b, np.int32(5)))
    assert_tree_close(impl.lax.bitwise_not(b), lax.bitwise_not(b))


# ---------------------------------------------------------------- at the kinks

KINKS = [
    ("abs_at_0", lambda L: L.abs, [0.0, -0.0]),
    ("max_tie", lambda L: lambda x: L.max(x, 1.0), [1.0]),
    ("min_tie", lambda L: lambda x: L.min(x, 1.0), [1.0]),
    ("clamp_at_bounds", lambda L: lambda x: L.clamp(-1.0, x, 1.0), [-1.0, 1.0]),
    ("sign_at_0", lambda L: L.sign, [0.0]),
    ("round_half", lambda L: L.round, [0.5, -2.5]),
    ("floor_int", lambda L: L.floor, [2.0]),
    ("integer_pow0_at_0", lambda L: lambda x: L.integer_pow(x, 0), [0.0]),
]


@pytest.mark.parametrize("name,make,points", KINKS, ids=[k[0] for k in KINKS])
def test_derivatives_at_kinks_match_jax(name, make, points):
    """Where the derivative is a convention (ties, zero), impl follows JAX's choice."""
    for p in points:
        x = np.array(p)
        assert_tree_close(impl.grad(make(impl.lax))(x), jax.grad(make(lax))(x),
                          check_weak=False)
        assert_tree_close(impl.jvp(make(impl.lax), (x,), (np.array(1.0),)),
                          jax.jvp(make(lax), (x,), (np.array(1.0),)), check_weak=False)


def test_grad_of_constant_function_is_a_jax_zero():
    g = impl.grad(lambda x: 2.0)(1.0)
    w = jax.grad(lambda x: 2.0)(1.0)
    assert isinstance(g, jax.Array)
    assert_tree_close(g, w, check_weak=False)


# Derivatives (and jnp.log10) written in JAX's order of operations round as JAX's do:
# bit for bit in float32 under jit (eagerly JAX compiles each jnp function whole, which
# may fuse differently from impl's operation-by-operation evaluation).
ROUNDED_AS_JAX = {
    "tanh": (lambda m: m.numpy.tanh, 0.05),
    "arccosh": (lambda m: m.numpy.arccosh, 1.15),
    "arctanh": (lambda m: m.numpy.arctanh, 0.05),
    "log10": (lambda m: m.numpy.log10, 0.05),
    "hypot": (lambda m: lambda x: m.numpy.hypot(x, np.float32(0.7) * x - np.float32(0.3)),
              -0.4),
    "logaddexp": (lambda m: lambda x: m.numpy.logaddexp(x, np.float32(0.7) * x - 1), -3.0),
}


def test_hypot_is_jax_program():
    """jnp.hypot computes as JAX's (staged as a call named hypot): eagerly too, without
    overflow for large operands, with JAX's derivative at 0."""
    x = np.array([3e38, 1e-30, 0.0, -2.5, np.inf, 1.0], np.float32)
    y = np.array([3e37, 3e-30, 0.0, 1e-3, np.nan, -np.inf], np.float32)
    got, want = impl.numpy.hypot(x, y), jax.numpy.hypot(x, y)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert float(got[0]) < np.inf
    for f in (impl.grad(impl.numpy.hypot, argnums=(0, 1)), jax.grad(jax.numpy.hypot,
                                                                   argnums=(0, 1))):
        assert [float(g) for g in f(0.0, 0.0)] == [0.5, 0.5]


@pytest.mark.parametrize("name", sorted(ROUNDED_AS_JAX))
def test_values_and_derivatives_round_as_jax(name):
    fn, lo = ROUNDED_AS_JAX[name]
    x = np.linspace(lo, lo + 0.9, 37).astype(np.float32)

    def run(m):
        f = fn(m)
        return [m.jit(m.vmap(f))(x), m.jit(m.vmap(m.grad(f)))(x),
                m.jit(m.vmap(m.grad(m.grad(f))))(x)]

    for got, want in zip(run(impl), run(jax)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# ------------------------------------------------- derivatives rounded as JAX's

ROUNDING = {
    "tan": 0.7, "asin": 0.36, "acos": 0.36, "atan": 0.9, "tanh": 2.0, "sinh": 0.3,
    "asinh": 0.3, "acosh": 1.8, "atanh": 0.52, "exp2": 1.3, "log1p": 0.3, "erf": 0.05,
    "erfc": 0.3, "erf_inv": 0.52, "logistic": 0.7, "sqrt": 2.1, "rsqrt": 2.1,
    "square": 1.3, "atan2": 0.3,
}


@pytest.mark.parametrize("name", ROUNDING)
def test_derivatives_round_as_jax(name):
    """Up to the third derivative, float32 derivatives equal JAX's bit for bit: the
    rules compute in JAX's order (a reordered product rounds differently)."""
    def f(L):
        if name == "atan2":
            return lambda x: L.atan2(x, np.float32(0.6) * x + np.float32(0.2))
        return getattr(L, name)
    x = np.float32(ROUNDING[name])
    fi, fj = f(impl.lax), f(lax)
    for _ in range(3):
        fi, fj = impl.grad(fi), jax.grad(fj)
        np.testing.assert_array_equal(np.asarray(fi(x)), np.asarray(fj(x)))


def test_square_is_a_primitive_as_in_jax():
    assert str(impl.make_jaxpr(impl.grad(impl.lax.square))(np.float32(2))) == \
        str(jax.make_jaxpr(jax.grad(lax.square))(np.float32(2)))
    assert str(impl.make_jaxpr(impl.numpy.square)(np.int32(2))) == \
        str(jax.make_jaxpr(jax.numpy.square)(np.int32(2)))
