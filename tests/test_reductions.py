"""Reductions, cumulative reductions, sort and iota, checked against the jax package.

Every row of the table is run in float32 and float64 through: eager evaluation, jit,
jvp, grad (reverse mode), vmap over axis 0 and axis 1, vmap of grad and jit of vmap of
grad; values, shapes and dtypes are compared with what jax gives for the same jax.lax or
jax.numpy call. Inputs deliberately include ties (reduce_max/min, whose tangent is shared
by the tied locations) and zeros (reduce_prod/cumprod, whose derivative then needs the
products of the other elements, not a division).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import impl
import impl.numpy as inp
from impl import lax as ilax
from impl.core import float0
from impl.primitives import reductions as red

from helpers import TOLERANCE, assert_tree_close, floats_in_ci, seeded_rng as _rng

FLOATS = [np.float32, np.float64]
# Second-order tests run the same rules in both dtypes: float32 only nightly.
FLOATS_SECOND_ORDER = [pytest.param(np.float32, marks=pytest.mark.slow), np.float64]
BATCH = 3


# ------------------------------------------------------------------ arg makers

def U(shape=(3, 4), lo=-2.0, hi=2.0):
    """Uniform values: no ties (almost surely)."""
    return lambda rng, dtype, lead=(): rng.uniform(lo, hi, lead + shape).astype(dtype)


def TIES(shape=(3, 4)):
    """Few distinct values, so maxima and minima are tied."""
    return lambda rng, dtype, lead=(): rng.randint(-1, 2, lead + shape).astype(dtype)


def ZEROS(shape=(3, 4)):
    """Values away from zero with about a third set exactly to zero (some rows twice)."""
    def make(rng, dtype, lead=()):
        s = lead + shape
        x = rng.uniform(0.5, 1.5, s) * rng.choice([-1.0, 1.0], s)
        x[rng.rand(*s) < 0.35] = 0.0
        return x.astype(dtype)
    return make


def NANS(shape=(3, 4)):
    """Uniform values with a few NaNs (for the nan-ignoring reductions)."""
    def make(rng, dtype, lead=()):
        x = rng.uniform(0.5, 1.5, lead + shape)
        x[rng.rand(*(lead + shape)) < 0.2] = np.nan
        return x.astype(dtype)
    return make


def INDICES(shape, bound):
    """Indices in range(bound), repeats included (int32)."""
    return lambda rng, dtype, lead=(): rng.randint(0, bound, lead + shape).astype(np.int32)


# ------------------------------------------------------------------------ table

class Case:
    """`diff`: argnums differentiated (None: no float output to differentiate)."""

    def __init__(self, name, impl_fn, jax_fn, makers, diff="all"):
        self.name, self.impl_fn, self.jax_fn, self.makers = name, impl_fn, jax_fn, makers
        self.diff = tuple(range(len(makers))) if diff == "all" else diff

    def __repr__(self):
        return self.name


CASES = [
    # reduce_max / reduce_min
    Case("reduce_max_1", lambda x: ilax.reduce_max(x, (1,)),
         lambda x: lax.reduce_max(x, (1,)), [U()]),
    Case("reduce_max_ties", lambda x: ilax.reduce_max(x, (0,)),
         lambda x: lax.reduce_max(x, (0,)), [TIES()]),
    Case("reduce_max_3d_02", lambda x: ilax.reduce_max(x, (0, 2)),
         lambda x: lax.reduce_max(x, (0, 2)), [TIES((3, 2, 4))]),
    Case("reduce_min_ties", lambda x: ilax.reduce_min(x, (1,)),
         lambda x: lax.reduce_min(x, (1,)), [TIES()]),
    # reduce_prod
    Case("reduce_prod_1", lambda x: ilax.reduce_prod(x, (1,)),
         lambda x: lax.reduce_prod(x, (1,)), [U(lo=0.5, hi=1.5)]),
    Case("reduce_prod_zeros_0", lambda x: ilax.reduce_prod(x, (0,)),
         lambda x: lax.reduce_prod(x, (0,)), [ZEROS()]),
    Case("reduce_prod_zeros_1", lambda x: ilax.reduce_prod(x, (1,)),
         lambda x: lax.reduce_prod(x, (1,)), [ZEROS()]),
    Case("reduce_prod_3d_12", lambda x: ilax.reduce_prod(x, (1, 2)),
         lambda x: lax.reduce_prod(x, (1, 2)), [ZEROS((3, 2, 3))]),
    # argmax / argmin
    Case("argmax_0", lambda x: ilax.argmax(x, 0, np.int32),
         lambda x: lax.argmax(x, 0, np.int32), [U()], diff=None),
    Case("argmax_1_ties", lambda x: ilax.argmax(x, 1, np.int64),
         lambda x: lax.argmax(x, 1, np.int64), [TIES()], diff=None),
    Case("argmin_1", lambda x: ilax.argmin(x, 1, np.int32),
         lambda x: lax.argmin(x, 1, np.int32), [U()], diff=None),
    # cumulative
    Case("cumsum_1_rev", lambda x: ilax.cumsum(x, 1, reverse=True),
         lambda x: lax.cumsum(x, 1, reverse=True), [U()]),
    Case("cumprod_1", lambda x: ilax.cumprod(x, 1), lambda x: lax.cumprod(x, 1),
         [U(lo=0.5, hi=1.5)]),
    Case("cumprod_zeros_1", lambda x: ilax.cumprod(x, 1), lambda x: lax.cumprod(x, 1),
         [ZEROS()]),
    Case("cumprod_zeros_0_rev", lambda x: ilax.cumprod(x, 0, reverse=True),
         lambda x: lax.cumprod(x, 0, reverse=True), [ZEROS()]),
    Case("cummax_1", lambda x: ilax.cummax(x, 1), lambda x: lax.cummax(x, 1), [U()]),
    Case("cummax_0_rev", lambda x: ilax.cummax(x, 0, reverse=True),
         lambda x: lax.cummax(x, 0, reverse=True), [U()]),
    Case("cummin_1_rev", lambda x: ilax.cummin(x, 1, reverse=True),
         lambda x: lax.cummin(x, 1, reverse=True), [U()]),
    # ties: JAX's weights (from its parallel-prefix scan), not a plain mean
    Case("cummax_ties", lambda x: ilax.cummax(x, 1), lambda x: lax.cummax(x, 1),
         [TIES((3, 7))]),
    Case("cummin_ties_0_rev", lambda x: ilax.cummin(x, 0, reverse=True),
         lambda x: lax.cummin(x, 0, reverse=True), [TIES((6, 3))]),
    Case("cumlogsumexp_1_rev", lambda x: ilax.cumlogsumexp(x, 1, reverse=True),
         lambda x: lax.cumlogsumexp(x, 1, reverse=True), [U(lo=-30.0, hi=30.0)]),
    # top_k: ties keep the lower index first
    Case("top_k_0_ties", lambda x: ilax.top_k(x, 2, axis=0),
         lambda x: lax.top_k(x, 2, axis=0), [TIES()]),
    # sort
    Case("sort_last", lambda x: ilax.sort(x), lambda x: lax.sort(x), [U()]),
    Case("sort_0", lambda x: ilax.sort(x, dimension=0), lambda x: lax.sort(x, dimension=0),
         [U()]),
    Case("sort_key_val", lambda k, v: ilax.sort((k, v), dimension=1, num_keys=1),
         lambda k, v: lax.sort((k, v), dimension=1, num_keys=1), [U(), U()]),
    Case("sort_two_keys", lambda k1, k2, v: ilax.sort((k1, k2, v), dimension=0, num_keys=2),
         lambda k1, k2, v: lax.sort((k1, k2, v), dimension=0, num_keys=2),
         [TIES(), U(), U()]),
    Case("sort_unstable", lambda x: ilax.sort(x, dimension=1, is_stable=False),
         lambda x: lax.sort(x, dimension=1, is_stable=False), [U()]),
    # iota (no inputs: exercised inside a function of x)
    Case("broadcasted_iota", lambda x: x * ilax.broadcasted_iota(x.dtype, (3, 4), 1),
         lambda x: x * lax.broadcasted_iota(x.dtype, (3, 4), 1), [U()]),
    # helper primitives, against independent jax formulations
    Case("take_along_axis_1", lambda x, i: red.take_along_axis(x, i, 1),
         lambda x, i: jnp.take_along_axis(x, i, axis=1), [U(), INDICES((3, 6), 4)],
         diff=(0,)),
    Case("scatter_add_along_axis", lambda u, i: red.scatter_add_along_axis(u, i, 1, (3, 4)),
         lambda u, i: jnp.zeros((3, 4), u.dtype).at[
             jnp.arange(3)[:, None], i].add(u), [U((3, 6)), INDICES((3, 6), 4)],
         diff=(0,)),
    Case("shift_fill1", lambda x: red.shift(x, 1, fill=1),
         lambda x: jnp.concatenate([jnp.ones_like(x[:, :1]), x[:, :-1]], axis=1), [U()]),
    Case("shift_rev", lambda x: red.shift(x, 0, reverse=True),
         lambda x: jnp.concatenate([x[1:], jnp.zeros_like(x[:1])], axis=0), [U()]),
]


def _scan_recurrence(a, b, axis, reverse):
    """y[i] = a[i] y[i-1] + b[i], written as a sequential jax.lax.scan."""
    a, b = jnp.moveaxis(a, axis, 0), jnp.moveaxis(b, axis, 0)

    def step(y, ab):
        y = ab[0] * y + ab[1]
        return y, y

    _, ys = lax.scan(step, jnp.zeros_like(b[0]), (a, b), reverse=reverse)
    return jnp.moveaxis(ys, 0, axis)


CASES += [
    Case("linear_recurrence_1", lambda a, b: red.linear_recurrence(a, b, 1),
         lambda a, b: _scan_recurrence(a, b, 1, False), [ZEROS(), U()]),
    Case("linear_recurrence_0_rev", lambda a, b: red.linear_recurrence(a, b, 0, True),
         lambda a, b: _scan_recurrence(a, b, 0, True), [U(), U()]),
]

# The jax.numpy layer and the tracer methods.
NUMPY_CASES = [
    Case("np_max_keepdims", lambda x: inp.max(x, axis=1, keepdims=True),
         lambda x: jnp.max(x, axis=1, keepdims=True), [TIES()]),
    Case("np_amin_initial", lambda x: inp.amin(x, axis=0, initial=-0.5),
         lambda x: jnp.amin(x, axis=0, initial=-0.5), [U()]),
    Case("np_prod", lambda x: inp.prod(x, axis=0), lambda x: jnp.prod(x, axis=0), [ZEROS()]),
    Case("np_prod_keepdims", lambda x: inp.prod(x, axis=(0, 1), keepdims=True),
         lambda x: jnp.prod(x, axis=(0, 1), keepdims=True), [U(lo=0.6, hi=1.4)]),
    Case("np_argmax_flat", lambda x: inp.argmax(x), lambda x: jnp.argmax(x), [U()],
         diff=None),
    Case("np_argmin_keepdims", lambda x: inp.argmin(x, axis=0, keepdims=True),
         lambda x: jnp.argmin(x, axis=0, keepdims=True), [U()], diff=None),
    Case("np_cumsum_flat", lambda x: inp.cumsum(x), lambda x: jnp.cumsum(x), [U()]),
    Case("np_cumprod_axis", lambda x: inp.cumprod(x, axis=-1),
         lambda x: jnp.cumprod(x, axis=-1), [ZEROS()]),
    Case("np_nancumsum_cumulative_prod",
         lambda x: (inp.nancumsum(x, axis=0), inp.cumulative_prod(x, axis=1,
                                                                  include_initial=True)),
         lambda x: (jnp.nancumsum(x, axis=0), jnp.cumulative_prod(x, axis=1,
                                                                  include_initial=True)),
         [NANS()]),
    Case("np_cumulative_sum_bool_dtype",
         lambda x: (inp.cumulative_sum(x > 0, axis=1, include_initial=True),
                    inp.cumsum(x, axis=0, dtype=bool), inp.lexsort([x, x < 0])),
         lambda x: (jnp.cumulative_sum(x > 0, axis=1, include_initial=True),
                    jnp.cumsum(x, axis=0, dtype=bool), jnp.lexsort([x, x < 0])),
         [TIES()], diff=None),
    Case("np_sort", lambda x: inp.sort(x, axis=0), lambda x: jnp.sort(x, axis=0), [U()]),
    Case("np_sort_flat_desc", lambda x: inp.sort(x, axis=None, descending=True),
         lambda x: jnp.sort(x, axis=None, descending=True), [U()]),
    Case("np_argsort", lambda x: inp.argsort(x), lambda x: jnp.argsort(x), [TIES()],
         diff=None),
    Case("np_argsort_desc", lambda x: inp.argsort(x, axis=0, descending=True),
         lambda x: jnp.argsort(x, axis=0, descending=True), [TIES()], diff=None),
    Case("np_all", lambda x: inp.all(x > 0, axis=0), lambda x: jnp.all(x > 0, axis=0),
         [TIES()], diff=None),
    Case("np_any_float", lambda x: inp.any(x, axis=1, keepdims=True),
         lambda x: jnp.any(x, axis=1, keepdims=True), [TIES()], diff=None),
    # (eagerly an impl function sees numpy arrays; the methods are impl's under the
    # transformations, which the jit/grad/vmap tests exercise)
    Case("methods", lambda x: (x.max(axis=0) + x.min(axis=1).sum() + x.prod(axis=1).sum()
                               + x.cumsum(axis=1).sum()),
         lambda x: (x.max(axis=0) + x.min(axis=1).sum() + x.prod(axis=1).sum()
                    + x.cumsum(axis=1).sum()), [U(lo=0.5, hi=1.5)]),
    Case("methods_index", lambda x: (x.argmax(axis=0), x.argmin(), x.all(axis=1),
                                     x.any()),
         lambda x: (x.argmax(axis=0), x.argmin(), x.all(axis=1), x.any()), [TIES()],
         diff=None),
]

ALL = CASES + NUMPY_CASES


# --------------------------------------------------------------------- helpers

def _args(case, dtype, lead=(), salt=""):
    rng = _rng(case.name, np.dtype(dtype).name, salt, lead)
    return [m(rng, dtype, lead) for m in case.makers]


def _leaves(x):
    return jax.tree_util.tree_leaves(x)


def _assert_same(got, want, dtype):
    assert_tree_close(got, want, tol=TOLERANCE["reductions"][np.dtype(dtype)], exact_non_float=True)


def _weights(case, dtype, args):
    """Random cotangent weights, one per float output (fixed per case and dtype)."""
    outs = _leaves(jax.eval_shape(case.jax_fn, *args))
    rng = _rng(case.name, np.dtype(dtype).name, "weights")
    return [rng.uniform(-1, 1, o.shape).astype(o.dtype) for o in outs]


def _loss(fn, args_w, summer):
    def loss(*args):
        outs = _leaves(fn(*args))
        total = 0.0
        for o, w in zip(outs, args_w):
            total = total + summer(o * w)
        return total
    return loss


def _tangents(case, dtype, args):
    rng = _rng(case.name, np.dtype(dtype).name, "tangents")
    return [rng.uniform(-1, 1, np.shape(a)).astype(a.dtype) if i in case.diff
            else np.zeros(np.shape(a), float0)
            for i, a in enumerate(args)]


def _batched(case, dtype, axis):
    args = _args(case, dtype, (BATCH,), salt="batch")
    return [np.moveaxis(a, 0, axis) for a in args]


def _ref(fn, *args):
    """The jax reference, compiled whole (eager jax would compile op by op: slow)."""
    return jax.jit(fn)(*args)


def _diff_cases():
    return [c for c in ALL if c.diff]


# ----------------------------------------------------------------------- tests

@pytest.mark.parametrize("dtype", floats_in_ci(np.float32))
@pytest.mark.parametrize("case", ALL, ids=repr)
def test_eager_and_jit(case, dtype):
    args = _args(case, dtype)
    want = _ref(case.jax_fn, *args)
    _assert_same(case.impl_fn(*args), want, dtype)
    _assert_same(impl.jit(case.impl_fn)(*args), want, dtype)


@pytest.mark.parametrize("dtype", floats_in_ci(np.float64))
@pytest.mark.parametrize("case", ALL, ids=repr)
def test_jvp(case, dtype):
    args = _args(case, dtype)
    if case.diff is None:
        # Integer or boolean outputs: the tangent is a float0 zero of the output's shape.
        ts = [np.ones(np.shape(a), a.dtype) for a in args]
        got = impl.jvp(case.impl_fn, args, ts)
        want = _ref(lambda *a: jax.jvp(case.jax_fn, a, tuple(ts)), *args)
        _assert_same(got, want, dtype)
        return
    ts = _tangents(case, dtype, args)
    got = impl.jvp(case.impl_fn, args, ts)
    want = _ref(lambda *a: jax.jvp(case.jax_fn, a, tuple(ts)), *args)
    _assert_same(got, want, dtype)


@pytest.mark.parametrize("dtype", floats_in_ci(np.float64))
@pytest.mark.parametrize("case", _diff_cases(), ids=repr)
def test_grad(case, dtype):
    args = _args(case, dtype)
    w = _weights(case, dtype, args)
    got = impl.grad(_loss(case.impl_fn, w, inp.sum), case.diff)(*args)
    want = _ref(jax.grad(_loss(case.jax_fn, w, jnp.sum), case.diff), *args)
    _assert_same(got, want, dtype)


@pytest.mark.parametrize("dtype", floats_in_ci(np.float64))
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("case", ALL, ids=repr)
def test_vmap(case, dtype, axis):
    args = _batched(case, dtype, axis)
    got = impl.vmap(case.impl_fn, in_axes=axis)(*args)
    want = _ref(jax.vmap(case.jax_fn, in_axes=axis), *args)
    _assert_same(got, want, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", [c for c in CASES if len(c.makers) > 1], ids=repr)
def test_vmap_mixed_batching(case, dtype):
    """Only the first argument mapped (over axis 1); the others shared."""
    batched = _batched(case, dtype, 1)
    args = [batched[0]] + _args(case, dtype)[1:]
    axes = (1,) + (None,) * (len(args) - 1)
    got = impl.vmap(case.impl_fn, in_axes=axes)(*args)
    want = _ref(jax.vmap(case.jax_fn, in_axes=axes), *args)
    _assert_same(got, want, dtype)


@pytest.mark.parametrize("dtype", FLOATS_SECOND_ORDER)
@pytest.mark.parametrize("case", _diff_cases(), ids=repr)
@pytest.mark.slow
def test_vmap_of_grad(case, dtype):
    """Over axis 0 here; test_jit_vmap_grad maps over axis 1."""
    axis = 0
    args = _batched(case, dtype, axis)
    w = _weights(case, dtype, _args(case, dtype))
    got = impl.vmap(impl.grad(_loss(case.impl_fn, w, inp.sum), case.diff), axis)(*args)
    want = _ref(jax.vmap(jax.grad(_loss(case.jax_fn, w, jnp.sum), case.diff), axis), *args)
    _assert_same(got, want, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", _diff_cases(), ids=repr)
@pytest.mark.slow
def test_jit_vmap_grad(case, dtype):
    args = _batched(case, dtype, 1)
    w = _weights(case, dtype, _args(case, dtype))
    got = impl.jit(impl.vmap(impl.grad(_loss(case.impl_fn, w, inp.sum), case.diff), 1))(*args)
    want = jax.jit(jax.vmap(jax.grad(_loss(case.jax_fn, w, jnp.sum), case.diff), 1))(*args)
    _assert_same(got, want, dtype)


# ------------------------------------------------------- higher order and linearity

SECOND_ORDER = [c for c in CASES if c.name in (
    "reduce_prod_zeros_0", "reduce_prod_3d_12", "cumprod_zeros_1", "cumprod_zeros_0_rev",
    "reduce_max_ties", "cummax_1", "sort_key_val", "linear_recurrence_1")]


@pytest.mark.parametrize("dtype", FLOATS_SECOND_ORDER)
@pytest.mark.parametrize("case", SECOND_ORDER, ids=repr)
def test_jvp_of_grad(case, dtype):
    """Second derivatives (forward over reverse), including at zeros of a product."""
    args = _args(case, dtype)
    w = _weights(case, dtype, args)
    ts = _tangents(case, dtype, args)
    got = impl.jvp(impl.grad(_loss(case.impl_fn, w, inp.sum), case.diff), args, ts)
    want = _ref(lambda *a: jax.jvp(jax.grad(_loss(case.jax_fn, w, jnp.sum), case.diff),
                                   a, tuple(ts)), *args)
    _assert_same(got, want, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_linear_transpose(dtype, reverse):
    x = _rng("cumsum_t", reverse).uniform(-1, 1, (3, 4)).astype(dtype)
    ct = _rng("cumsum_ct", reverse).uniform(-1, 1, (3, 4)).astype(dtype)
    got = impl.linear_transpose(lambda v: ilax.cumsum(v, 1, reverse), x)(ct)
    want = jax.linear_transpose(lambda v: lax.cumsum(v, 1, reverse), x)(ct)
    _assert_same(got, want, dtype)


def test_grad_through_argsort_gather():
    """A sort-based function (median of a row) differentiates like jax's."""
    x = _rng("median").uniform(-1, 1, (3, 5)).astype(np.float64)
    pick = np.eye(5)[2] * 3.0    # weight 3 on the middle of each sorted row
    got = impl.grad(lambda v: inp.sum(inp.sort(v, axis=1) * pick))(x)
    want = jax.grad(lambda v: jnp.sum(jnp.sort(v, axis=1) * pick))(x)
    _assert_same(got, want, np.float64)


def test_cummax_ties_share_tangent():
    """Ties in a running maximum share the tangent; with two ties it is their mean, with
    more JAX's parallel-prefix scan decides the weights, and impl follows it."""
    x = np.array([1.0, 3.0, 3.0, 2.0], np.float64)
    t = np.array([1.0, 10.0, 100.0, 1000.0], np.float64)
    out, tan = impl.jvp(lambda v: ilax.cummax(v), (x,), (t,))
    np.testing.assert_array_equal(out, [1.0, 3.0, 3.0, 3.0])
    np.testing.assert_allclose(tan, [1.0, 10.0, 55.0, 55.0])
    x = np.full(6, 3.0)
    t = 10.0 ** np.arange(6)
    _, tan = impl.jvp(lambda v: ilax.cummax(v), (x,), (t,))
    _, want = jax.jvp(lambda v: lax.cummax(v), (x,), (t,))
    np.testing.assert_allclose(tan, want)


def test_jaxpr_of_sort_grad_is_linear_gather():
    """The tangent of sort is a gather by the sort permutation; its transpose a scatter."""
    x = np.ones((4,), np.float32)
    text = str(impl.make_jaxpr(impl.grad(lambda v: inp.sum(ilax.sort(v) * v)))(x))
    assert "sort" in text and "scatter_add_along_axis" in text


def test_iota_values_and_types():
    for dtype in (np.int32, np.float32, np.float64):
        _assert_same(ilax.iota(dtype, 5), lax.iota(dtype, 5), np.float64)
        _assert_same(ilax.broadcasted_iota(dtype, (2, 3), 0),
                     lax.broadcasted_iota(dtype, (2, 3), 0), np.float64)
        _assert_same(impl.jit(lambda: ilax.broadcasted_iota(dtype, (2, 3), -1))(),
                     lax.broadcasted_iota(dtype, (2, 3), 1), np.float64)


def test_integer_and_bool_inputs():
    xi = np.array([[3, -1, 4], [1, 5, -9]], np.int32)
    xi3 = np.stack([xi, 2 * xi - 1, -xi], axis=1)
    for f, g in [(lambda v: ilax.reduce_max(v, (1,)), lambda v: lax.reduce_max(v, (1,))),
                 (lambda v: ilax.reduce_prod(v, (0,)), lambda v: lax.reduce_prod(v, (0,))),
                 (lambda v: ilax.cummin(v, 1), lambda v: lax.cummin(v, 1)),
                 (lambda v: ilax.sort(v, 0), lambda v: lax.sort(v, 0)),
                 (lambda v: inp.prod(v), lambda v: jnp.prod(v)),
                 (lambda v: inp.cumsum(v > 0, axis=1), lambda v: jnp.cumsum(v > 0, axis=1)),
                 (lambda v: inp.max(v > 0), lambda v: jnp.max(v > 0)),
                 (lambda v: inp.prod(v.astype(np.uint8)), lambda v: jnp.prod(v.astype(np.uint8)))]:
        _assert_same(f(xi), g(xi), np.float64)
        _assert_same(impl.vmap(f, 1)(xi3), jax.vmap(g, 1)(xi3), np.float64)


# --------------------------------------------------------------------- bad input

X = np.ones((2, 3), np.float32)


@pytest.mark.parametrize("call", [
    lambda: ilax.reduce_max(X, (2,)),
    lambda: ilax.reduce_min(X, (5,)),
    lambda: ilax.reduce_prod(X, (0, 3)),
    lambda: ilax.argmax(X, 2, np.int32),
    lambda: ilax.argmin(X, 7, np.int32),
    lambda: ilax.cumsum(X, 2),
    lambda: ilax.cumprod(X, 3),
    lambda: ilax.cummax(X, 2),
    lambda: ilax.cummin(X, -3),
    lambda: ilax.sort(X, dimension=2),
    lambda: ilax.broadcasted_iota(np.int32, (2, 3), 2),
], ids=["reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin", "cumsum",
        "cumprod", "cummax", "cummin", "sort", "iota"])
def test_axis_out_of_range_is_named(call):
    with pytest.raises(TypeError, match=r"(axis|dimension) -?\d+ is out of range"):
        call()


def test_axis_out_of_range_under_jit_and_vmap():
    with pytest.raises(TypeError, match="cumsum: axis 2 is out of range"):
        impl.jit(lambda v: ilax.cumsum(v, 2))(X)
    with pytest.raises(TypeError, match="reduce_max: reduction axis 2 is out of range"):
        impl.vmap(lambda v: ilax.reduce_max(v, (2,)))(np.ones((4, 2, 3), np.float32))


@pytest.mark.parametrize("call", [
    lambda: inp.max(X, axis=2), lambda: inp.prod(X, axis=-3), lambda: inp.argmax(X, axis=2),
    lambda: inp.cumsum(X, axis=5), lambda: inp.sort(X, axis=2), lambda: inp.all(X, axis=3),
], ids=["max", "prod", "argmax", "cumsum", "sort", "all"])
def test_numpy_axis_out_of_bounds(call):
    with pytest.raises(ValueError, match=r"axis -?\d+ is out of bounds"):
        call()


def test_other_bad_input():
    with pytest.raises(TypeError, match="num_keys"):
        ilax.sort((X, X), num_keys=3)
    with pytest.raises(TypeError, match="same shape"):
        ilax.sort((X, np.ones((3, 2), np.float32)))
    with pytest.raises(TypeError, match="index_dtype"):
        ilax.argmax(X, 0, np.float32)
    with pytest.raises(TypeError, match="cumsum does not accept dtype bool"):
        ilax.cumsum(X > 0, 0)
    with pytest.raises(TypeError, match="reduce_prod does not accept dtype bool"):
        ilax.reduce_prod(X > 0, (0,))
    with pytest.raises(TypeError, match="repeated axes"):
        red.reduce_max_p.bind(X, axes=(0, 0))
    with pytest.raises(ValueError, match="zero-size array"):
        inp.max(np.ones((0, 3), np.float32), axis=0)
    with pytest.raises(TypeError, match="axis must be an int, got None"):
        ilax.cumsum(X, None)
    with pytest.raises(TypeError, match="not linear in its coefficients"):
        impl.linear_transpose(lambda a: red.linear_recurrence(a, X, 0), X)(X)
    with pytest.raises(TypeError, match="shift with fill=1 is affine"):
        impl.linear_transpose(lambda v: red.shift(v, 0, fill=1), X)(X)
