"""`where=`, `initial=`, `out=` and the other reduction parameters of impl.numpy, against
jax.numpy: every masked reduction gives JAX's values, dtypes and errors."""
import jax
import jax.numpy as J
import numpy as np
import pytest

import impl
import impl.numpy as I

rng = np.random.RandomState(0)
X = rng.randn(3, 4).astype(np.float32)
XI = rng.randint(-5, 5, (3, 4)).astype(np.int8)
MASK = rng.rand(3, 4) > 0.4
ROW_MASK = np.array([True, False, True, True])


def _same(f):
    want, got = np.asarray(f(J)), np.asarray(f(I))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fn", ["sum", "mean", "var", "std", "prod", "all", "any"])
@pytest.mark.parametrize("where", [MASK, ROW_MASK], ids=["full", "broadcast"])
@pytest.mark.parametrize("axis", [None, 0, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_where_mask(fn, where, axis, keepdims):
    _same(lambda M: getattr(M, fn)(X, axis=axis, where=where, keepdims=keepdims))


@pytest.mark.parametrize("fn", ["sum", "mean", "var", "prod", "all", "any"])
def test_where_mask_integers(fn):
    _same(lambda M: getattr(M, fn)(XI, axis=0, where=MASK))


@pytest.mark.parametrize("fn,initial", [("max", -1.0), ("min", 1.0)])
@pytest.mark.parametrize("axis", [None, 1])
def test_extremum_where_needs_initial(fn, initial, axis):
    _same(lambda M: getattr(M, fn)(X, axis=axis, where=MASK, initial=initial))
    _same(lambda M: getattr(M, fn)(XI, axis=axis, where=MASK, initial=0))
    for M in (J, I):
        with pytest.raises(ValueError, match="initial"):
            getattr(M, fn)(X, where=MASK)


@pytest.mark.parametrize("case", [
    lambda M: M.sum(XI), lambda M: M.sum(XI.astype(np.uint8)), lambda M: M.sum(MASK),
    lambda M: M.sum(XI, promote_integers=False), lambda M: M.sum(X, where=MASK, initial=2.0),
    lambda M: M.var(X, axis=0, correction=1),
    lambda M: M.std(X, axis=1, mean=M.mean(X, axis=1, keepdims=True)),
    lambda M: M.var(X, axis=1, ddof=1, keepdims=True),
], ids=["int8", "uint8", "bool", "no-promote", "initial", "correction", "mean", "ddof"])
def test_reduction_parameters(case):
    _same(case)


def test_where_under_grad_vmap_jit():
    def loss(M, grad, vmap, jit):
        return jit(vmap(grad(lambda y: M.sum(M.mean(y, axis=0, where=MASK) ** 2))))
    x = np.stack([X, 2 * X])
    np.testing.assert_allclose(loss(I, impl.grad, impl.vmap, impl.jit)(x),
                               loss(J, jax.grad, jax.vmap, jax.jit)(x), rtol=1e-6)


@pytest.mark.parametrize("fn", ["sum", "mean", "var", "std", "max", "min", "prod", "all",
                                "any", "argmax", "argmin", "cumsum", "cumprod"])
def test_out_argument_refused_as_in_jax(fn):
    for M in (J, I):
        with pytest.raises(NotImplementedError, match=f"'out' argument to jnp.{fn}"):
            getattr(M, fn)(X, out=X)


def test_var_ddof_and_correction_conflict():
    for M in (J, I):
        with pytest.raises(ValueError, match="ddof and correction"):
            M.var(X, ddof=1, correction=1)
