"""`.at[...]` updates and the scatter primitives against JAX.

Every case runs through value, jit, jvp, grad (array and values) and vmap (both
mapped, and only the array mapped) -- see _against_jax.py. Cases cover repeated
indices (add/multiply accumulate, min/max share the tangent between tied contenders,
set picks one winner), broadcast and mixed indices, the out-of-bounds modes and
JAX's dtype promotion of the values.

impl's eager arrays are jax.Arrays, whose own `.at` is JAX's; the impl side of each
case therefore builds `.at` explicitly (`_IndexUpdateHelper`), as impl's tracers do.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import impl
from impl import lax as ilax
from impl.numpy._indexing import _IndexUpdateHelper
from _against_jax import check_transforms, rng_for
from helpers import first_in_ci

SHAPE = (4, 5)


def normal(shape, seed=0, positive=False):
    def make(dtype):
        x = rng_for("scatter", shape, seed).standard_normal(shape)
        return (np.abs(x) + 0.5 if positive else x).astype(dtype)
    return make


def ties(shape, seed=0):
    return lambda dtype: rng_for("ties", shape, seed).randint(-1, 2, shape).astype(dtype)


def _values_shape(idx):
    return jax.eval_shape(lambda x: x[idx], jax.ShapeDtypeStruct(SHAPE, np.float32)).shape


class Case:
    def __init__(self, name, method, idx, kwargs=None, x=None, values=None, diff=(0, 1)):
        self.name, self.method, self.idx = name, method, idx
        self.kwargs = kwargs or {}
        self.make_x = x or normal(SHAPE)
        self.make_v = values or normal(_values_shape(idx), 1)
        self.diff = diff

    def __repr__(self):
        return self.name

    def functions(self):
        def call(at):
            def fn(x, v):
                return getattr(at(x)[self.idx], self.method)(v, **self.kwargs)
            return fn
        return call(_IndexUpdateHelper), call(lambda x: x.at)


REPEATS = np.array([0, 2, 2, 1])
OOB = np.array([0, 5, -1])
CASES = [
    Case("set_scalar", "set", 1),
    Case("set_repeats", "set", REPEATS),
    Case("set_ellipsis_newaxis", "set", (Ellipsis, None, 2)),
    Case("add_slice_array", "add", (slice(None), np.array([4, 0, 0]))),
    Case("subtract_broadcast_arrays", "subtract",
         (np.array([[0], [3]]), np.array([1, 2, 2]))),
    Case("multiply_unique", "multiply", np.array([0, 2, 3]), dict(unique_indices=True)),
    Case("multiply_scalar_and_step", "multiply", (-1, slice(1, None, 2))),
    Case("multiply_repeats_array_only", "multiply", np.array([0, 0, 1]), diff=(0,)),
    Case("divide", "divide", 2, values=normal((5,), 1, positive=True)),
    Case("power_unique", "power", np.array([1, 3]), dict(unique_indices=True),
         x=normal(SHAPE, positive=True)),
    Case("min_ties", "min", REPEATS, x=ties(SHAPE), values=ties((4, 5), 1)),
    Case("max_ties_columns", "max", (slice(None), np.array([4, 0, 0])), x=ties(SHAPE),
         values=ties((4, 3), 1)),
    Case("set_out_of_bounds_dropped", "set", OOB),
    Case("add_out_of_bounds_clipped", "add", OOB, dict(mode="clip")),
    Case("max_out_of_bounds_dropped", "max", OOB, dict(mode="drop"), x=ties(SHAPE),
         values=ties((3, 5), 1)),
    Case("set_no_negative_wrap", "set", np.array([0, -1]),
         dict(wrap_negative_indices=False)),
    Case("add_sorted_unique_promises", "add", np.array([0, 1, 3]),
         dict(indices_are_sorted=True, unique_indices=True)),
    Case("add_reversed_slice_sorted_promise", "add", (slice(None, None, -1), np.array([0, 2])),
         dict(indices_are_sorted=True)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", first_in_ci(9, CASES), ids=repr)
def test_at_update(case, dtype):
    impl_fn, jax_fn = case.functions()
    check_transforms(f"at_{case.name}", impl_fn, jax_fn,
                     [case.make_x(dtype), case.make_v(dtype)], diff=case.diff,
                     eager=case.name == "add_slice_array" and dtype == np.float64)


GET_CASES = [
    ("scalar_and_slice", (1, slice(None, 3)), {}),
    ("array_fill", OOB, dict(mode="fill", fill_value=-3.0)),
    ("array_clip", OOB, dict(mode="clip")),
    ("no_wrap_fill", np.array([0, -1]), dict(mode="fill", fill_value=2.0,
                                             wrap_negative_indices=False)),
    ("promises", np.array([0, 1, 3]), dict(indices_are_sorted=True, unique_indices=True)),
]


@pytest.mark.parametrize("name, idx, kwargs", GET_CASES, ids=[c[0] for c in GET_CASES])
def test_at_get(name, idx, kwargs):
    check_transforms(f"get_{name}",
                     lambda x: _IndexUpdateHelper(x)[idx].get(**kwargs),
                     lambda x: x.at[idx].get(**kwargs), [normal(SHAPE)(np.float64)])


def test_values_are_combined_in_the_promoted_dtype():
    """An integer array updated with floats computes in floating point, then casts
    back (JAX's rule), e.g. 3 * 2.5 -> 7, not 3 * 2 -> 6."""
    xi = np.array([1, 2, 3], np.int32)
    for method in ("set", "add", "multiply", "min", "max"):
        got = getattr(_IndexUpdateHelper(xi)[2], method)(2.5)
        with pytest.warns(FutureWarning):
            want = getattr(jnp.asarray(xi).at[2], method)(2.5)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype == np.int32


def test_bad_updates():
    x = np.ones(SHAPE)
    with pytest.raises(ValueError, match=r"at\[\]\.add: values of shape \(3,\) cannot be "
                                         r"broadcast to the indexed shape \(5,\)"):
        _IndexUpdateHelper(x)[1].add(np.ones(3))
    with pytest.raises(ValueError, match="mode"):
        _IndexUpdateHelper(x)[1].set(0.0, mode="wrap-around")


# ------------------------------------------------------ lax scatter primitives

DNUMS = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                    scatter_dims_to_operand_dims=(0,))
INDICES = np.array([[1], [3], [1]], np.int32)   # a repeated row


@pytest.mark.parametrize("name, diff", [("scatter_mul", (0,)), ("scatter_min", (0, 2)),
                                        ("scatter_max", (0, 2)), ("scatter_sub", (0, 2)),
                                        ("scatter_add", (0, 2)), ("scatter", (0, 2))])
def test_lax_scatter_with_mapped_indices(name, diff):
    """Windowed scatters with repeated rows; vmap maps the indices too."""
    x = ties(SHAPE)(np.float64)
    upd = ties((3, 5), 1)(np.float64)
    batched = [np.stack([x, -x, x + 1]), np.stack([INDICES, INDICES[::-1], INDICES % 2]),
               np.stack([upd, upd[::-1], -upd])]
    check_transforms(name,
                     lambda a, i, u: getattr(ilax, name)(a, i, u, DNUMS),
                     lambda a, i, u: getattr(lax, name)(a, i, u, DNUMS),
                     [x, INDICES, upd], diff=diff, batched_args=batched)


def test_scatter_mul_unique_gradient_and_repeated_error():
    x = normal(SHAPE)(np.float64)
    upd = normal((2, 5), 1)(np.float64)
    idx = np.array([[0], [2]], np.int32)
    f = lambda m: lambda a, u: m.scatter_mul(a, idx, u, DNUMS, unique_indices=True)  # noqa: E731
    check_transforms("scatter_mul_unique", f(ilax), f(lax), [x, upd])
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        impl.grad(lambda u: ilax.scatter_mul(x, INDICES, u, DNUMS).sum())(
            normal((3, 5))(np.float64))


@pytest.mark.xfail(strict=True, reason="JAX bug: the jvp of scatter_max/scatter_min in "
                   "mode='clip' counts a clipped out-of-bounds index apart from the "
                   "in-bounds index it lands on, so tied updates get weight 1 each (2 in "
                   "total) instead of sharing it")
def test_jax_scatter_max_clip_tie_weights():
    # Minimal program:
    #   f = lambda x, v: x.at[jnp.array([2, 5])].max(v, mode="clip")
    #   jax.jvp(f, (zeros(3), ones(2)), (zeros(3), ones(2)))[1] == [0, 0, 2]
    # but moving both (tied) updates by h moves out[2] by h: finite differences give 1.
    f = lambda x, v: x.at[jnp.array([2, 5])].max(v, mode="clip")  # noqa: E731
    x, v = jnp.zeros(3), jnp.ones(2)
    _, tangent = jax.jvp(f, (x, v), (jnp.zeros(3), jnp.ones(2)))
    h = 1e-6
    np.testing.assert_allclose(tangent, (f(x, v + h) - f(x, v - h)) / (2 * h), atol=1e-6)


def test_impl_scatter_max_clip_tie_weights_match_finite_differences():
    f = lambda x, v: _IndexUpdateHelper(x)[np.array([2, 5])].max(v, mode="clip")  # noqa: E731
    x, v = np.zeros(3), np.ones(2)
    _, tangent = impl.jvp(f, (x, v), (np.zeros(3), np.ones(2)))
    h = 1e-6
    np.testing.assert_allclose(tangent, (f(x, v + h) - f(x, v - h)) / (2 * h), atol=1e-6)


# ------------------------------------------------------ .at[].apply / lax.scatter_apply

APPLY_CASES = [
    ("repeats", np.array([0, 2, 2, 2]), {}),
    ("out_of_bounds_dropped", np.array([1, 7, -9]), {}),
    ("out_of_bounds_clipped", np.array([1, 7, -9]), dict(mode="clip")),
    ("no_wrap_clipped", np.array([-1, 0]), dict(mode="clip", wrap_negative_indices=False)),
    ("no_wrap_dropped", np.array([-1, 3]), dict(wrap_negative_indices=False)),
    ("promises", np.array([0, 1, 3]), dict(indices_are_sorted=True, unique_indices=True)),
]


@pytest.mark.parametrize("name, idx, kwargs", APPLY_CASES, ids=[c[0] for c in APPLY_CASES])
def test_at_apply(name, idx, kwargs):
    """x.at[idx].apply(func) applies func once per occurrence of an index (twice for an
    index given twice), with JAX's out-of-bounds modes; value, jit and vmap (of the array,
    and of array and indices) against JAX. Not differentiable (see below)."""
    def fn(at, np_):
        return lambda x, i: at(x)[:, i].apply(lambda v: np_.sin(v) * 2 + 1, **kwargs)
    x = normal(SHAPE)(np.float64)
    batched = [np.stack([x, -x, x + 1]), np.stack([idx, idx[::-1], idx % 2])]
    with jax.numpy_dtype_promotion("strict"):
        check_transforms(f"apply_{name}", fn(_IndexUpdateHelper, impl.numpy),
                         fn(lambda x: jnp.asarray(x).at, jnp), [x, idx], diff=(),
                         batched_args=batched, eager=name == "repeats")


APPLY_TYPE_CASES = {
    "float32": lambda np_: np_.arange(5, dtype=np.float32),
    "weak": lambda np_: np_.broadcast_to(1.5, (5,)),
    "int32": lambda np_: np_.arange(5, dtype=np.int32),
    "bool": lambda np_: np_.zeros(5, bool),
    "complex64": lambda np_: np_.ones(5, np.complex64),
}


@pytest.mark.parametrize("kind", sorted(APPLY_TYPE_CASES))
def test_at_apply_keeps_the_operand_type_as_jax(kind):
    func = {"bool": lambda np_: np_.logical_not,
            "int32": lambda np_: lambda v: v * 3 - 1,
            "complex64": lambda np_: lambda v: v * 1j}.get(kind, lambda np_: np_.sin)
    idx = np.array([0, 3, 3])

    def run(api, np_):
        x = APPLY_TYPE_CASES[kind](np_)
        f = lambda x: x.at[idx].apply(func(np_))  # noqa: E731
        return [f(x), api.jit(f)(x), api.vmap(f)(np_.stack([x, x])), api.jit(lambda: f(x))()]

    with jax.numpy_dtype_promotion("strict"):
        want, got = run(jax, jnp), run(impl, impl.numpy)
    for g, w in zip(got, want):
        assert str(jax.typeof(g)) == str(jax.typeof(w))
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


APPLY_ERRORS = {
    "jvp": lambda api, np_, x: api.jvp(lambda x: x.at[1].apply(np_.sin), (x,), (x,)),
    "grad": lambda api, np_, x: api.grad(lambda x: x.at[1].apply(np_.sin).sum())(x),
    "closure over a tracer": lambda api, np_, x: api.jit(
        lambda c: x.at[1].apply(lambda v: v * c))(2.0),
    "grad of a closure": lambda api, np_, x: api.grad(
        lambda c: x.at[1].apply(lambda v: v * c).sum())(2.0),
    "returns a string": lambda api, np_, x: api.jit(lambda x: x.at[0].apply(lambda v: "a"))(x),
    "returns another dtype": lambda api, np_, x: api.jit(
        lambda x: x.at[0].apply(lambda v: v.astype(np.int32)))(x),
    "not callable": lambda api, np_, x: api.jit(lambda x: x.at[0].apply(3))(x),
    "out_sharding": lambda api, np_, x: api.jit(
        lambda x: x.at[0].apply(np_.sin, out_sharding=None))(x),
    "bad mode": lambda api, np_, x: api.jit(lambda x: x.at[0].apply(np_.sin, mode="wrap"))(x),
}


@pytest.mark.parametrize("name", sorted(APPLY_ERRORS))
def test_at_apply_refuses_what_jax_refuses(name):
    """No derivative (JAX's NotImplementedError and message), no closing over traced
    values, a scalar of the operand's dtype from the function, JAX's keyword arguments."""
    def raised(api, np_):
        with pytest.raises(Exception) as info:
            APPLY_ERRORS[name](api, np_, np_.arange(4.0))
        return info.value

    with jax.numpy_dtype_promotion("strict"):
        want, got = raised(jax, jnp), raised(impl, impl.numpy)
    assert type(got) is type(want), (got, want)
    first = lambda e: str(e).split(".")[0].split("\n")[0]  # noqa: E731
    if name in ("jvp", "grad", "closure over a tracer", "grad of a closure", "returns a string",
                "bad mode"):
        assert first(got) == first(want)


def test_lax_scatter_apply_with_windows():
    """lax.scatter_apply with row windows and a repeated row: value, jit and vmap of
    operand and indices against JAX."""
    x = ties(SHAPE)(np.float64)
    batched = [np.stack([x, -x, x + 1]), np.stack([INDICES, INDICES[::-1], INDICES % 2])]

    def fn(lax_, np_):
        return lambda a, i: lax_.scatter_apply(a, i, lambda v: np_.exp(v) - 1, DNUMS,
                                               update_shape=(3, 5), mode="clip")
    with jax.numpy_dtype_promotion("strict"):
        check_transforms("scatter_apply", fn(ilax, impl.numpy), fn(lax, jnp), [x, INDICES],
                         diff=(), batched_args=batched)
    # the repeated row 1 has the function applied twice, independently of both
    np.testing.assert_allclose(np.asarray(fn(ilax, impl.numpy)(x, INDICES))[1],
                               np.expm1(np.expm1(x[1])))
