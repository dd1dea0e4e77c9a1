"""jax.numpy's searching (nonzero, unique, searchsorted, digitize, isin, interp) and
statistics (quantiles, medians, averages, histograms, NaN-ignoring reductions), each
checked against JAX: values, dtypes and shapes on concrete input, and the same under
jit / vmap / grad."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as inp

rng = np.random.default_rng(0)
x = rng.normal(size=(3, 5)).astype(np.float32)
xn = x.copy()
xn[0, 1] = np.nan
v = np.array([3, 1, 2, 3, 1, 0, 0, 5], np.int32)

cases = {
 "nonzero": lambda m: m.nonzero(v),
 "nonzero size": lambda m: m.nonzero(x > 0, size=6, fill_value=-1),
 "argwhere": lambda m: m.argwhere(x > 0),
 "flatnonzero": lambda m: m.flatnonzero(v),
 "where1": lambda m: m.where(v > 1),
 "count_nonzero": lambda m: m.count_nonzero(x > 0, axis=1),
 "searchsorted": lambda m: m.searchsorted(np.sort(x[0]), x[1]),
 "searchsorted right": lambda m: m.searchsorted(np.array([1,2,2,3.]), np.array([2., 0, 5]), side="right"),
 "digitize": lambda m: m.digitize(x[0], np.array([-1., 0, 1])),
 "digitize right": lambda m: m.digitize(x[0], np.array([-1., 0, 1]), right=True),
 "unique": lambda m: m.unique(v),
 "unique counts": lambda m: m.unique(v, return_counts=True),
 "unique size": lambda m: m.unique(v, size=7),
 "unique size fill": lambda m: m.unique(v, size=3, fill_value=9),
 "unique size counts": lambda m: m.unique(v, size=7, return_counts=True),
 "interp": lambda m: m.interp(np.linspace(-1, 5, 9), np.array([0., 1, 3]), np.array([1., 2, 0])),
 "interp lr": lambda m: m.interp(np.linspace(-1, 5, 9), np.array([0., 1, 3]), np.array([1., 2, 0]), left=-1, right=7),
 "isin": lambda m: m.isin(v, np.array([1, 5])),
 "quantile": lambda m: m.quantile(x, 0.3),
 "quantile axis q": lambda m: m.quantile(x, np.array([0.1, 0.5, 1.0]), axis=1),
 "quantile methods": lambda m: [m.quantile(x, 0.37, axis=0, method=k) for k in ("lower","higher","nearest","midpoint")],
 "quantile keepdims": lambda m: m.quantile(x, 0.3, axis=1, keepdims=True),
 "percentile": lambda m: m.percentile(x, 40.0, axis=0),
 "median": lambda m: m.median(x, axis=1),
 "median all": lambda m: m.median(x),
 "median nan": lambda m: m.median(xn, axis=1),
 "nanmedian": lambda m: m.nanmedian(xn, axis=1),
 "nanquantile": lambda m: m.nanquantile(xn, 0.25, axis=1),
 "average": lambda m: m.average(x, axis=1, weights=np.arange(5.)),
 "average returned": lambda m: m.average(x, axis=0, returned=True),
 "ptp": lambda m: m.ptp(x, axis=0),
 "histogram": lambda m: m.histogram(x, bins=4),
 "histogram range dens": lambda m: m.histogram(x, bins=3, range=(-1, 1), density=True),
 "histogram weights": lambda m: m.histogram(x, bins=np.array([-2., 0, 0.5, 2]), weights=np.abs(x)),
 "nansum": lambda m: m.nansum(xn, axis=1),
 "nanmean": lambda m: m.nanmean(xn, axis=1),
 "nanmax": lambda m: m.nanmax(xn, axis=1),
 "nanmin": lambda m: m.nanmin(xn),
 "nanvar": lambda m: m.nanvar(xn, axis=1),
 "nanstd": lambda m: m.nanstd(xn, axis=1, ddof=1),
 "nanprod": lambda m: m.nanprod(xn, axis=1),
 "nanargmax": lambda m: m.nanargmax(xn, axis=1),
 "isclose": lambda m: m.isclose(x, x + 1e-6, rtol=1e-5),
 "isclose inf nan": lambda m: m.isclose(np.array([np.inf, np.nan, 1.0]), np.array([np.inf, np.nan, 1.1]), equal_nan=True),
 "allclose": lambda m: m.allclose(x, x * 1.001),
 "array_equal": lambda m: [m.array_equal(x, x), m.array_equal(x, x[:2]), m.array_equal(xn, xn, equal_nan=True)],
 "array_equiv": lambda m: m.array_equiv(x[0], x),
 "meshgrid": lambda m: m.meshgrid(np.arange(3), np.arange(4.)),
 "meshgrid ij sparse": lambda m: m.meshgrid(np.arange(3), np.arange(4.), np.arange(2), indexing="ij", sparse=True),
 "indices": lambda m: m.indices((2, 3)),
 "tri": lambda m: m.tri(3, 4, 1),
 "tril_indices": lambda m: m.tril_indices(4, -1),
 "triu_indices_from": lambda m: m.triu_indices_from(x),
 "vectorize": lambda m: m.vectorize(lambda a, b: a * 2 + b)(x, x[0]),
 "vectorize sig": lambda m: m.vectorize(lambda a, b: (a * b).sum(), signature="(n),(n)->()")(x, x[0]),
 "vectorize excluded": lambda m: m.vectorize(lambda a, p: a ** p, excluded={1})(x, 2),
}


def _assert_same(got, expected, rtol=1e-5):
    le, lg = jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(got)
    assert len(le) == len(lg)
    for e, g in zip(le, lg):
        e, g = np.asarray(e), np.asarray(g)
        assert (g.shape, g.dtype) == (e.shape, e.dtype)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("name", sorted(cases))
def test_value_matches_jax(name):
    _assert_same(cases[name](inp), cases[name](jjnp))


TRANSFORMED = {
    "jit nonzero size": lambda api, m: api.jit(lambda a: m.nonzero(a > 0, size=4))(x),
    "jit where size": lambda api, m: api.jit(lambda a: m.where(a > 0, size=4,
                                                               fill_value=9))(x),
    "jit unique size": lambda api, m: api.jit(lambda a: m.unique(a, size=6))(v),
    "jit unique size counts": lambda api, m: api.jit(
        lambda a: m.unique(a, size=5, return_counts=True))(v),
    "vmap searchsorted": lambda api, m: api.vmap(
        lambda q: m.searchsorted(np.sort(x[0]), q))(x[1]),
    "vmap quantile": lambda api, m: api.vmap(lambda r: m.quantile(r, 0.3))(x),
    "grad median": lambda api, m: api.grad(lambda a: m.median(a, axis=1).sum())(x),
    "grad quantile": lambda api, m: api.grad(lambda a: m.quantile(a, 0.3))(x),
    "grad percentile": lambda api, m: api.grad(lambda a: m.percentile(a, 75.0))(x),
    "grad interp": lambda api, m: api.grad(lambda q: m.interp(
        q, np.array([-3., 0, 3]), np.array([1., 2, 0])).sum())(x[0]),
    "jit histogram": lambda api, m: api.jit(lambda a: m.histogram(a, bins=4))(x),
    "grad nanmean": lambda api, m: api.grad(lambda a: m.nanmean(a))(xn),
    "grad average": lambda api, m: api.grad(lambda a: m.average(
        a, axis=1, weights=np.arange(5.0)).sum())(x),
    "vmap isclose": lambda api, m: api.vmap(lambda a: m.isclose(a, 0.0, atol=0.5))(x),
    "jit allclose": lambda api, m: api.jit(lambda a: m.allclose(a, a + 1e-7))(x),
    "grad vectorize": lambda api, m: api.grad(lambda a: m.vectorize(
        lambda p, q: (p * q).sum(), signature="(n),(n)->()")(a, x[0]).sum())(x),
    "jit meshgrid": lambda api, m: api.jit(lambda a, b: m.meshgrid(a, b))(x[0], x[1]),
    "jit digitize": lambda api, m: api.jit(lambda a: m.digitize(a, np.array([-1., 0, 1])))(x),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMED))
def test_transformed_matches_jax(name):
    _assert_same(TRANSFORMED[name](impl, inp), TRANSFORMED[name](jax, jjnp), rtol=1e-4)


@pytest.mark.parametrize("call", [
    lambda api, m: api.jit(lambda a: m.nonzero(a))(x),
    lambda api, m: api.jit(lambda a: m.unique(a))(v),
    lambda api, m: api.jit(lambda a: m.where(a > 0))(x),
])
def test_value_dependent_shapes_under_jit_raise_as_jax(call):
    with pytest.raises(jax.errors.ConcretizationTypeError):
        call(jax, jjnp)
    with pytest.raises(impl.errors.ConcretizationTypeError):
        call(impl, inp)
