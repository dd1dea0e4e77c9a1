"""The jax.numpy names of impl/numpy/_more.py, each against jax.numpy: values, dtypes and
weak types eagerly, the `size=` forms under jit, the differentiable ones under jit, jvp,
grad and vmap (check_transforms), and misuse raising JAX's exception types."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from _against_jax import check_transforms, rng_for
from helpers import assert_each

R = rng_for("numpy_names_more")
X = R.standard_normal((3, 4))
X32 = X.astype(np.float32)
V = np.array([3, 1, 2, 3, 1, 0, 0, 5], np.int32)
W = np.array([4, 2, 7, 2, 9], np.int32)
I = np.array([[12, -18, 0, 7], [9, 6, -8, 0]], np.int32)
P = np.array([1.0, -3.0, 2.0])
# (No subnormals: JAX's own frexp gives different answers for them eagerly and under jit.)
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.5, 1e-40, -3e-300, 5e300])


def _assert_same(got, expected, rtol=1e-5, atol=1e-6):
    le, lg = jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(got)
    assert len(le) == len(lg), (got, expected)
    assert type(got) is type(expected) or not isinstance(expected, tuple) or \
        type(got).__name__ == type(expected).__name__, (type(got), type(expected))
    for e, g in zip(le, lg):
        assert getattr(g, "weak_type", False) == getattr(e, "weak_type", False), (g, e)
        e, g = np.asarray(e), np.asarray(g)
        assert (g.shape, g.dtype) == (e.shape, e.dtype), (g, e)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)


VALUES = {
    "insert scalar": lambda m: m.insert(X, 2, 7.0),
    "insert axis": lambda m: m.insert(X, 1, np.array([5.0, 6.0, 7.0]), axis=1),
    "insert many": lambda m: m.insert(V, np.array([0, 8, 3, -1]), np.array([9, 8, 7, 6])),
    "insert slice": lambda m: m.insert(X, slice(0, 4, 2), 1.5, axis=1),
    "insert rows": lambda m: m.insert(X, np.array([1]), np.array([[0.5]]), axis=0),
    "gcd": lambda m: m.gcd(I, np.array([8, 12, 5, 0], np.int32)),
    "gcd scalar": lambda m: m.gcd(I, 6),
    "lcm": lambda m: m.lcm(I, np.array([8, 12, 5, 0], np.int32)),
    "r_": lambda m: m.r_[np.array([1, 2]), 3, 4:7],
    "r_ row": lambda m: m.r_["r", np.array([1, 2]), 3],
    "r_ column": lambda m: m.r_["c", np.array([1, 2]), 3],
    "r_ floats": lambda m: m.r_[X32[0], 0:1:5j],
    "r_ directive": lambda m: m.r_["0,2", np.array([1, 2]), np.array([3, 4])],
    "r_ directive trans": lambda m: m.r_["1,2,0", np.array([1, 2]), np.array([3, 4])],
    "c_": lambda m: m.c_[np.array([1, 2, 3]), np.array([4, 5, 6])],
    "c_ 2d": lambda m: m.c_[X, X[:, :1]],
    "put_along_axis": lambda m: m.put_along_axis(
        X, np.argsort(X, axis=1)[:, :2], -1.0, axis=1, inplace=False),
    "put_along_axis none": lambda m: m.put_along_axis(
        X, np.array([0, 5]), np.array([8.0, 9.0]), axis=None, inplace=False),
    "ravel_multi_index": lambda m: m.ravel_multi_index((np.array([0, 2, 1]),
                                                        np.array([3, 0, 1])), (3, 4)),
    "ravel_multi_index F clip": lambda m: m.ravel_multi_index(
        (np.array([0, 5, 1]), np.array([3, -2, 1])), (3, 4), mode="clip", order="F"),
    "ravel_multi_index wrap": lambda m: m.ravel_multi_index(
        (np.array([0, 5, 1]), np.array([3, -2, 1])), (3, 4), mode="wrap"),
    "frexp": lambda m: m.frexp(SPECIAL),
    "frexp f32": lambda m: m.frexp(X32 * 1e3),
    "frexp int": lambda m: m.frexp(np.array([1, 4, -6])),
    "spacing": lambda m: m.spacing(SPECIAL),
    "spacing f32": lambda m: m.spacing(X32),
    "partition": lambda m: m.partition(np.array([3, 1, 4, 1, 5, 9, 2, 6]), 3),
    "partition axis": lambda m: m.partition(X, 1, axis=0),
    "argpartition": lambda m: m.argpartition(np.array([3, 1, 4, 1, 5, 9, 2, 6]), 3),
    "argpartition neg": lambda m: m.argpartition(X, -2),
    "choose": lambda m: m.choose(np.array([2, 0, 1, 1]), [X[0], X[1], X[2]]),
    "choose wrap": lambda m: m.choose(np.array([[0, 4], [2, -1]]),
                                      [np.array([1, 2]), 99, np.array([[10], [20]])],
                                      mode="wrap"),
    "choose clip": lambda m: m.choose(np.array([5, -1, 1]), [V[:3], W[:3]], mode="clip"),
    "compress": lambda m: m.compress(np.array([True, False, True]), X, axis=0),
    "compress short": lambda m: m.compress(np.array([0, 1]), X, axis=1),
    "compress flat": lambda m: m.compress(np.array([1, 0, 1, 1, 0, 0, 1]), X),
    "gradient": lambda m: m.gradient(X),
    "gradient 1d": lambda m: m.gradient(X[0] ** 2, 0.5),
    "gradient coords": lambda m: m.gradient(X[0], np.array([0.0, 0.5, 1.5, 3.5])),
    "gradient axis": lambda m: m.gradient(X, 2.0, axis=1),
    "gradient axes": lambda m: m.gradient(X, axis=(0, 1)),
    "gradient int": lambda m: m.gradient(V),
    "i0": lambda m: m.i0(X * 3),
    "i0 int": lambda m: m.i0(V),
    "kaiser": lambda m: m.kaiser(7, 4.0),
    "kaiser 1": lambda m: m.kaiser(1, 2.0),
    "intersect1d": lambda m: m.intersect1d(V, W),
    "intersect1d indices": lambda m: m.intersect1d(V, W, return_indices=True),
    "setdiff1d": lambda m: m.setdiff1d(V, W),
    "setxor1d": lambda m: m.setxor1d(V, W),
    "setxor1d mixed": lambda m: m.setxor1d(V, W.astype(np.float32)),
    "unique_inverse": lambda m: m.unique_inverse(V.reshape(2, 4)),
    "unique_all": lambda m: m.unique_all(V),
    "poly": lambda m: m.poly(np.array([1.0, 2.0, -3.0])),
    "poly int": lambda m: m.poly(np.array([1, 2])),
    "polydiv": lambda m: m.polydiv(np.array([1.0, -3.0, 0.0, 4.0]), P),
    "polydiv int": lambda m: m.polydiv(np.array([2, 4, 6]), np.array([2])),
    "polyfit": lambda m: m.polyfit(X[0], X[1], 2),
    "polyfit full": lambda m: m.polyfit(np.arange(6.0), X.ravel()[:6], 2, full=True),
    "polyfit w 2d": lambda m: m.polyfit(np.arange(4.0), X.T, 1, w=np.arange(1.0, 5.0)),
    "polyfit cov": lambda m: m.polyfit(np.arange(6.0), X.ravel()[:6], 2, cov=True),
    "sort_complex": lambda m: m.sort_complex(V),
    "sort_complex f32": lambda m: m.sort_complex(X32),
    "trim_zeros": lambda m: m.trim_zeros(np.array([0, 0, 3, 0, 2, 0])),
    "trim_zeros polydiv": lambda m: m.polydiv(np.array([1.0, -3.0, 0.0, 4.0]), P,
                                              trim_leading_zeros=True),
    "trim_zeros b": lambda m: m.trim_zeros(np.array([0, 0, 3, 0, 2, 0]), "b"),
    "trim_zeros all": lambda m: m.trim_zeros(np.zeros(3)),
    "bitwise_count": lambda m: m.bitwise_count(I),
    "bitwise_count u8": lambda m: m.bitwise_count(np.array([255, 7], np.uint8)),
    "place": lambda m: m.place(X, X > 0, np.array([10.0, 20.0]), inplace=False),
    "put": lambda m: m.put(X, np.array([0, 5, 11]), np.array([7.0, 8.0]), inplace=False),
    "put wrap": lambda m: m.put(V, np.array([9, -1]), 42, mode="wrap", inplace=False),
    "put clip": lambda m: m.put(V, np.array([9, -3]), 42, mode="clip", inplace=False),
    "packbits": lambda m: m.packbits(np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1])),
    "packbits axis little": lambda m: m.packbits(I > 0, axis=1, bitorder="little"),
    "unpackbits": lambda m: m.unpackbits(np.array([[2, 255], [7, 128]], np.uint8)),
    "unpackbits axis count": lambda m: m.unpackbits(np.array([[2, 255], [7, 128]], np.uint8),
                                                    axis=1, count=11, bitorder="little"),
    "unpackbits count neg": lambda m: m.unpackbits(np.array([5, 9], np.uint8), count=-3),
    "mask_indices": lambda m: m.mask_indices(3, m.triu, 1),
    "histogram2d": lambda m: m.histogram2d(X[0], X[1], bins=3),
    "histogram2d pair": lambda m: m.histogram2d(X32[0], X32[1], bins=[2, 3],
                                                range=[(-2, 2), (-1, 1)]),
    "histogram2d weights": lambda m: m.histogram2d(X[0], X[1], bins=2, weights=X[2],
                                                   density=True),
    "histogramdd": lambda m: m.histogramdd(X.T, bins=(2, 3, 2)),
    "histogramdd edges": lambda m: m.histogramdd(X.T[:, :2], bins=[np.array([-3, 0, 3.0]),
                                                                   np.array([-1, 1.0])]),
    "gcd python ints": lambda m: m.gcd(12, 18), "lcm python ints": lambda m: m.lcm(4, 6),
    "spacing python float": lambda m: m.spacing(1.0),
    "frexp python float": lambda m: m.frexp(3.0),
    "kaiser int beta": lambda m: m.kaiser(5, 2),
    "insert python value": lambda m: m.insert(np.arange(3.0), 1, 5),
    "partition uint8": lambda m: m.partition(np.array([3, 0, 2, 1], np.uint8), 1),
    "choose python choices": lambda m: m.choose(np.array([0, 1]), [1, 2.0], mode="clip"),
    "put_along_axis clip": lambda m: m.put_along_axis(np.zeros(3), np.array([5]), 1.0, 0,
                                                      inplace=False, mode="clip"),
    "histogram2d edges": lambda m: m.histogram2d(np.arange(4.0), np.arange(4.0),
                                                 bins=np.array([0.0, 1, 3])),
    "intersect1d assume_unique": lambda m: m.intersect1d(np.array([1, 3, 5]), np.array([5, 1]),
                                                         assume_unique=True),
}


# Results whose shape depends on the input values: compared eagerly, one by one. The rest
# are compared in a few jitted programs (one compilation each, not one per name).
EAGER = sorted(n for n in VALUES if n.split()[0] in (
    "intersect1d", "setdiff1d", "setxor1d", "unique_inverse", "unique_all", "trim_zeros",
    "compress", "mask_indices") or n in ("choose", "ravel_multi_index"))
JITTED = sorted(set(VALUES) - set(EAGER))
GROUPS = [JITTED[i::4] for i in range(4)]


@pytest.mark.parametrize("name", EAGER)
def test_value_dependent_results_match_jax(name):
    _assert_same(VALUES[name](inp), VALUES[name](jnp))


@pytest.mark.parametrize("group", range(len(GROUPS)))
def test_values_dtypes_weak_types_match_jax(group):
    names = GROUPS[group]
    expected = jax.jit(lambda: {n: VALUES[n](jnp) for n in names})()
    got = impl.jit(lambda: {n: VALUES[n](inp) for n in names})()
    assert_each(_assert_same, got, expected)


# With static size=, the value-dependent functions trace.
SIZED = {
    "intersect1d": lambda m, a, b: m.intersect1d(a, b, size=5),
    "intersect1d fill": lambda m, a, b: m.intersect1d(a, b, size=4, fill_value=-1),
    "intersect1d indices": lambda m, a, b: m.intersect1d(a, b, size=3, return_indices=True),
    "setdiff1d": lambda m, a, b: m.setdiff1d(a, b, size=6),
    "setdiff1d fill": lambda m, a, b: m.setdiff1d(a, b, size=2, fill_value=-7),
    "setxor1d": lambda m, a, b: m.setxor1d(a, b, size=9),
    "unique_inverse": lambda m, a, b: m.unique_inverse(a, size=6),
    "unique_all": lambda m, a, b: m.unique_all(a, size=6, fill_value=0),
    "compress": lambda m, a, b: m.compress(a > 1, b, size=4, fill_value=-1),
    "mask_indices": lambda m, a, b: m.mask_indices(3, m.tril, size=7),
    "insert traced obj": lambda m, a, b: m.insert(a, b[:2], 100),
    "ravel_multi_index clip": lambda m, a, b: m.ravel_multi_index((a[:3], b[:3]), (4, 5),
                                                                  mode="clip"),
    "choose wrap": lambda m, a, b: m.choose(a[:5], [b, b * 10], mode="wrap"),
    "gcd": lambda m, a, b: m.gcd(a[:5] * 6, b),
    "put": lambda m, a, b: m.put(a, b[:2], -5, inplace=False),
    "place traced mask": lambda m, a, b: m.place(a, a > 1, b[:3], inplace=False),
}


def test_sized_forms_under_jit_match_jax():
    want = jax.jit(lambda a, b: {n: fn(jnp, a, b) for n, fn in SIZED.items()})(V, W)
    got = impl.jit(lambda a, b: {n: fn(inp, a, b) for n, fn in SIZED.items()})(V, W)
    assert_each(_assert_same, got, want)


def test_batched_under_jit_match_jax():
    """vmap of the looping gcd, the sized unique_inverse and insert at traced indices."""
    def fn(m):
        return m.vmap(lambda a, b: (m.numpy.gcd(a, b), m.numpy.unique_inverse(a, size=3),
                                    m.numpy.insert(a, b[:1] % 3, b[1:3])))
    a, b = np.array([[4, 4, 9], [6, 2, 6]]), np.array([[6, 3, 12], [9, 4, 5]])
    want = jax.jit(fn(jax))(a, b)
    got = impl.jit(fn(impl))(a, b)
    _assert_same(got, want)


TRANSFORMED = {
    "insert": (lambda m: lambda x, v: m.insert(x, 1, v, axis=1), [X, X[:, 0]]),
    "put_along_axis": (lambda m: lambda x, v: m.put_along_axis(
        x, np.array([[0], [2], [3]]), v, axis=1, inplace=False), [X, X[:, :1]]),
    "partition": (lambda m: lambda x: m.partition(x, 2), [X]),
    "choose": (lambda m: lambda x, y: m.choose(np.array([1, 0, 1, 0]), [x, y], mode="clip"),
               [X, X * 2]),
    "gradient": (lambda m: lambda x, h: m.gradient(x, h, axis=1), [X, X[0] ** 2 + 5]),
    "i0 kaiser": (lambda m: lambda x, b: m.i0(x) + m.kaiser(4, b), [X, np.float64(3.0)]),
    "poly": (lambda m: m.poly, [X[0]]),
    "polydiv": (lambda m: m.polydiv, [X.ravel()[:6], P]),
    "polyfit": (lambda m: lambda x, y: m.polyfit(x, y, 2), [np.arange(5.0), X.ravel()[:5]]),
    "place put": (lambda m: lambda x, v: m.put(m.place(x, np.abs(X) > 1, v, inplace=False),
                                                np.array([1, 2]), v[:2], inplace=False),
                  [X, X[1]]),

    "histogramdd weights": (lambda m: lambda w: m.histogramdd(X.T[:, :2], bins=2,
                                                              weights=w)[0], [X[0]]),
}


# Checked in two programs (one compilation each for JAX and impl): every function gets
# its own slice of the arguments.
TRANSFORM_GROUPS = [
    ["insert", "put_along_axis", "partition", "choose", "place put", "histogramdd weights"],
    ["gradient", "i0 kaiser", "poly", "polydiv", "polyfit"],
]


def _together(m, names):
    starts = np.cumsum([0] + [len(TRANSFORMED[n][1]) for n in names])

    def fn(*args):
        return {n: TRANSFORMED[n][0](m)(*args[lo:hi])
                for n, lo, hi in zip(names, starts[:-1], starts[1:])}
    return fn


# The second group (polyfit's lstsq, i0's Bessel series) takes ~18 s: nightly only.
@pytest.mark.parametrize("group", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_under_jit_jvp_grad_vmap_match_jax(group):
    names = TRANSFORM_GROUPS[group]
    args = [a for n in names for a in TRANSFORMED[n][1]]
    check_transforms(f"group {group}", _together(inp, names), _together(jnp, names), args)


def test_transform_groups_cover_every_entry():
    assert sorted(n for g in TRANSFORM_GROUPS for n in g) == sorted(TRANSFORMED)


def test_frexp_spacing_under_jit_vmap_match_jax():
    """Not differentiable in JAX (nextafter has no JVP rule): jit and vmap only."""
    fn = lambda m: lambda x: (m.frexp(x), m.spacing(x))  # noqa: E731
    check_transforms("frexp spacing", fn(inp), fn(jnp), [X * 1e5], diff=())


MISUSE = {
    "insert 2-d obj": lambda m: m.insert(X, np.ones((2, 2), int), 1.0),
    "insert float obj": lambda m: m.insert(X, 1.5, 1.0),
    "gcd float": lambda m: m.gcd(X, 2),
    "put inplace": lambda m: m.put(X, 0, 1.0),
    "place inplace": lambda m: m.place(X, X > 0, 1.0),
    "put_along_axis inplace": lambda m: m.put_along_axis(X, np.zeros((3, 1), int), 1.0, 1),
    "ravel_multi_index out of range": lambda m: m.ravel_multi_index((np.array([5]),), (3,)),
    "ravel_multi_index float": lambda m: m.ravel_multi_index((X[0],), (3,), mode="clip"),
    "choose out of range": lambda m: m.choose(np.array([3]), [V, W[:1]]),
    "choose float": lambda m: m.choose(X32, [V]),
    "compress 2-d": lambda m: m.compress(X > 0, X),
    "packbits float": lambda m: m.packbits(X),
    "packbits order": lambda m: m.packbits(V, bitorder="middle"),
    "unpackbits int32": lambda m: m.unpackbits(V),
    "spacing complex": lambda m: m.spacing(np.array([1j])),
    "gradient too short": lambda m: m.gradient(np.ones(1)),
    "r_ bad directive": lambda m: m.r_["x", [1, 2]],
    "insert list": lambda m: m.insert(X, [1], 0.5),
    "bitwise_count float": lambda m: m.bitwise_count(X),
}


def _raised(fn, m):
    with pytest.raises(Exception) as info:
        fn(m)
    return info.type


@pytest.mark.parametrize("name", sorted(MISUSE))
def test_misuse_raises_jax_exception_type(name):
    assert _raised(MISUSE[name], inp) is _raised(MISUSE[name], jnp)


TRACED_WITHOUT_SIZE = {
    "intersect1d": lambda m, a: m.intersect1d(a, a),
    "setdiff1d": lambda m, a: m.setdiff1d(a, a),
    "setxor1d": lambda m, a: m.setxor1d(a, a),
    "unique_all": lambda m, a: m.unique_all(a),
    "trim_zeros": lambda m, a: m.trim_zeros(a),
    "choose raise": lambda m, a: m.choose(a, [a, a]),
    "ravel_multi_index raise": lambda m, a: m.ravel_multi_index((a,), (9,)),
}


@pytest.mark.parametrize("name", sorted(TRACED_WITHOUT_SIZE))
def test_value_dependent_shapes_need_size_under_jit(name):
    fn = TRACED_WITHOUT_SIZE[name]
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(lambda a: fn(jnp, a))(V)
    with pytest.raises(impl.errors.ConcretizationTypeError):
        impl.jit(lambda a: fn(inp, a))(V)


def test_a_wrong_frexp_exponent_is_caught():
    """Negative test: a frexp whose exponent is off by one for subnormals differs from
    JAX's, and the comparison says so."""
    m, e = inp.frexp(SPECIAL)
    broken = (m, np.where(np.abs(SPECIAL) > 1e200, e + 1, e))
    with pytest.raises(AssertionError):
        _assert_same(tuple(inp.asarray(b) for b in broken), jnp.frexp(SPECIAL))
