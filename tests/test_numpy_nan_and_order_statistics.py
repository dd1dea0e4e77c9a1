"""The NaN-ignoring reductions, order statistics and array helpers of impl.numpy against
jax.numpy: value, jit, jvp, grad and vmap in one compiled program per side (see
_against_jax.py), several functions per case to keep the compilations few; float64, with
the jvp also checked against finite differences where the inputs hold no NaN."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from _against_jax import check_transforms, rng_for


def normal(*shape, seed=0):
    return rng_for("normal", shape, seed).standard_normal(shape)


def with_nans(*shape, seed=0):
    x = normal(*shape, seed=seed)
    x[rng_for("nans", shape, seed).rand(*shape) < 0.2] = np.nan
    x[-1] = np.nan                        # an all-NaN row
    return x


class Case:
    def __init__(self, name, fn_of_module, args, fd=True, diff=None, batched=None):
        self.name, self.fn, self.args, self.fd, self.diff = name, fn_of_module, args, fd, diff
        self.batched = batched

    def __repr__(self):
        return self.name


CASES = [
    Case("nan_reductions", lambda m: lambda x: (
        m.nansum(x, axis=1), m.nanmean(x, axis=0, keepdims=True), m.nanvar(x, axis=1, ddof=1),
        m.nanstd(x), m.nanmax(x, axis=1), m.nanmin(x, axis=0), m.nanprod(x, axis=1),
        m.nanargmax(x, axis=1), m.nanargmin(x, axis=0)), [with_nans(4, 5)], fd=False),
    Case("quantiles", lambda m: lambda x, q: (
        m.quantile(x, q, axis=1), m.percentile(x, 30.0, axis=0, method="midpoint"),
        m.median(x, axis=1, keepdims=True), m.quantile(x, 0.7, method="nearest"),
        m.quantile(x, q, axis=(0, 1), method="lower"), m.quantile(x, 0.3, method="higher")),
        [normal(4, 5), np.array([0.1, 0.45, 0.95])]),  # q * (n - 1) off the integers
    Case("nan_quantiles", lambda m: lambda x: (
        m.nanquantile(x, 0.4, axis=1), m.nanmedian(x, axis=0),
        m.nanpercentile(x, 75.0, axis=1, keepdims=True)), [with_nans(4, 5)], fd=False),
    Case("summaries", lambda m: lambda x, w: (
        m.average(x, axis=1, weights=w), m.average(x, axis=0, returned=True),
        m.ptp(x, axis=1), m.count_nonzero(x > 0, axis=0)), [normal(4, 5), normal(5) ** 2 + 1]),
    Case("roll_diff", lambda m: lambda x: (
        m.roll(x, 2), m.roll(x, (1, -3), axis=(0, 1)), m.diff(x), m.diff(x, 2, axis=0,
                                                                        prepend=0.5)),
        [normal(4, 5)]),
    Case("roll_traced_shift", lambda m: lambda x, s: m.roll(x, s, axis=1),
         [normal(3, 5), np.int32(7)]),
    Case("searchsorted", lambda m: lambda a, v: (
        m.searchsorted(a, v), m.searchsorted(a, v, side="right")),
        [np.sort(normal(6)), np.concatenate([np.sort(normal(6))[[0, 3]], normal(3)])],
        diff=(), batched=[np.sort(normal(3, 6, seed=2), axis=1), normal(3, 5, seed=3)]),
    Case("closeness_and_float_helpers", lambda m: lambda x, y: (
        m.isclose(x, y, atol=0.5), m.fmax(x, m.where(y > 0.5, np.nan, y)), m.fmin(x, y),
        m.trunc(3 * x), m.degrees(x), m.radians(y)), [normal(3, 4), normal(3, 4, seed=1)],
        fd=False),
    Case("products", lambda m: lambda a, b: (
        m.cross(a, b), m.cross(a[:, :2], b), m.kron(a, b[:2]), m.vecdot(a, b),
        m.vecdot(a, b, axis=0)), [normal(4, 3), normal(4, 3, seed=1)]),
    Case("meshgrid", lambda m: lambda x, y: (
        m.meshgrid(x, y), m.meshgrid(x, y, indexing="ij", sparse=True)),
        [normal(3), normal(4, seed=1)]),
]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_against_jax(case):
    check_transforms(case.name, case.fn(inp), case.fn(jnp), case.args, fd=case.fd,
                     diff=case.diff, batched_args=case.batched)


def test_searchsorted_orders_nan_last_and_uses_sorter():
    a = np.array([-1.0, 0.5, 2.0, np.nan])
    v = np.array([np.nan, 0.5, -3.0, 9.0])
    for side in ("left", "right"):
        np.testing.assert_array_equal(inp.searchsorted(a, v, side=side),
                                      jnp.searchsorted(a, v, side=side))
    unsorted = np.array([3.0, -1.0, 2.0])
    order = np.argsort(unsorted)
    np.testing.assert_array_equal(inp.searchsorted(unsorted, v, sorter=order),
                                  jnp.searchsorted(unsorted, v, sorter=order))


def test_tri_default_dtype_and_copy():
    for got, want in [(inp.tri(3, 4, 1), jnp.tri(3, 4, 1)),
                      (inp.tri(3, dtype=np.int32), jnp.tri(3, dtype=np.int32))]:
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    x = normal(2, 3)
    np.testing.assert_array_equal(inp.copy(x), x)


@pytest.mark.parametrize("call, error, match", [
    (lambda m: m.quantile(np.ones(3), 0.5, method="bogus"), ValueError, "method"),
    (lambda m: m.quantile(np.ones(3), np.ones((2, 2))), ValueError, "rank <= 1"),
    (lambda m: m.searchsorted(np.ones((2, 2)), 1.0), ValueError, "1-dimensional"),
    (lambda m: m.searchsorted(np.ones(2), 1.0, side="middle"), ValueError, "side"),
    (lambda m: m.cross(np.ones(4), np.ones(3)), ValueError, "2 or 3"),
    (lambda m: m.diff(np.float64(1.0)), ValueError, "at least one dimensional"),
    (lambda m: m.average(np.ones((2, 3)), weights=np.ones(3)), ValueError, "Axis must be"),
    (lambda m: m.meshgrid(np.ones((2, 2))), ValueError, "1D"),
])
def test_errors_match_jax(call, error, match):
    with pytest.raises(error, match=match):
        call(jnp)
    with pytest.raises(error, match=match):
        call(inp)


def test_unimplemented_parameters_raise():
    with pytest.raises(NotImplementedError, match="weights"):
        inp.quantile(np.ones(3), 0.5, weights=np.ones(3), method="inverted_cdf")
    with pytest.raises(NotImplementedError, match="out_sharding"):
        inp.percentile(np.ones(3), 50, out_sharding=object())


def test_grad_of_median_under_vmap_and_jit():
    x = normal(3, 5)
    got = impl.jit(impl.vmap(impl.grad(lambda r: inp.median(r) ** 2)))(x)
    want = jax.jit(jax.vmap(jax.grad(lambda r: jnp.median(r) ** 2)))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
