"""Parameters work as in JAX, or raise naming themselves: holomorphic derivatives, numpy
and lax keyword parameters, and the ones impl refuses.
Every expected value comes from running the same call on JAX."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as ijnp

RNG = np.random.default_rng(0)
Z = (RNG.normal(size=3) + 1j * RNG.normal(size=3)).astype(np.complex64)
X = RNG.normal(size=(2, 3)).astype(np.float32)


def _close(got, expected, rtol=1e-5):
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=rtol, atol=1e-6)


# ------------------------------------------------------------------ holomorphic

HOLOMORPHIC = {
    "grad": lambda api, jnp: api.grad(lambda z: (jnp.sin(z) * z).sum(), holomorphic=True)(Z),
    "value_and_grad": lambda api, jnp: api.value_and_grad(
        lambda z: (z ** 3).sum(), holomorphic=True)(Z),
    "jacrev": lambda api, jnp: api.jacrev(lambda z: jnp.exp(z) * z, holomorphic=True)(Z),
    "jacfwd": lambda api, jnp: api.jacfwd(lambda z: jnp.exp(z) * z, holomorphic=True)(Z),
    "hessian": lambda api, jnp: api.hessian(lambda z: (jnp.sin(z) * z).sum(),
                                            holomorphic=True)(Z),
    "grad argnums": lambda api, jnp: api.grad(lambda a, z: (a * z * z).sum(), argnums=(0, 1),
                                              holomorphic=True)(Z, Z),
}


@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
def test_holomorphic_derivatives_match_jax(name):
    expected = HOLOMORPHIC[name](jax, jjnp)
    got = HOLOMORPHIC[name](impl, ijnp)
    for g, e in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        _close(g, e, rtol=1e-4)


def test_holomorphic_grad_against_the_complex_derivative():
    """Independent reference: d/dz z**3 = 3 z**2 (complex128)."""
    z = Z.astype(np.complex128)
    got = impl.grad(lambda z: (z ** 3).sum(), holomorphic=True)(z)
    np.testing.assert_allclose(np.asarray(got), 3 * z ** 2, rtol=1e-12)


HOLOMORPHIC_MISUSE = {
    "grad real output": lambda api, jnp: api.grad(lambda z: jnp.ones(()),
                                                  holomorphic=True)(Z),
    "jacrev real input": lambda api, jnp: api.jacrev(lambda x: x, holomorphic=True)(X),
    "jacfwd complex input without holomorphic": lambda api, jnp: api.jacfwd(lambda z: z)(Z),
    "jacrev complex output without holomorphic": lambda api, jnp: api.jacrev(
        lambda x: x * (1 + 1j))(X),
    "jacfwd real output with holomorphic": lambda api, jnp: api.jacfwd(
        lambda z: jnp.ones(2), holomorphic=True)(Z),
}


@pytest.mark.parametrize("name", sorted(HOLOMORPHIC_MISUSE))
def test_holomorphic_misuse_raises_as_jax(name):
    with pytest.raises(TypeError) as expected:
        HOLOMORPHIC_MISUSE[name](jax, jjnp)
    with pytest.raises(TypeError) as got:
        HOLOMORPHIC_MISUSE[name](impl, ijnp)
    # the same complaint: both name the API and the dtype rule
    assert str(got.value).split(",")[0].replace("impl", "jax") == \
        str(expected.value).split(",")[0]


# ------------------------------------------------------------------ numpy parameters

NUMPY_CALLS = {
    "einsum optimize=auto": lambda jnp: jnp.einsum("ij,jk,kl->il", X, X.T, X, optimize="auto"),
    "einsum optimize=False": lambda jnp: jnp.einsum("ij,jk,kl->il", X, X.T, X,
                                                    optimize=False),
    "einsum explicit path": lambda jnp: jnp.einsum("ij,jk,kl->il", X, X.T, X,
                                                   optimize=[(1, 2), (0, 1)]),
    "einsum path from einsum_path": lambda jnp: jnp.einsum(
        "ij,jk,kl->il", X, X.T, X,
        optimize=jnp.einsum_path("ij,jk,kl->il", X, X.T, X, optimize="optimal")[0]),
    "einsum four operands greedy": lambda jnp: jnp.einsum(
        "ab,bc,cd,de->ae", X, X.T, X, X.T, optimize="greedy"),
    "reshape order=F": lambda jnp: jnp.reshape(X, (3, 2), order="F"),
    "ravel order=F": lambda jnp: jnp.ravel(X, order="F"),
    "method reshape order=F": lambda jnp: jnp.asarray(X).reshape(6, order="F"),
    "repeat total_repeat_length (cut)": lambda jnp: jnp.repeat(
        X, np.array([3, 1]), axis=0, total_repeat_length=3),
    "repeat total_repeat_length (padded)": lambda jnp: jnp.repeat(
        X, 1, axis=1, total_repeat_length=5),
    "dot preferred_element_type": lambda jnp: jnp.dot(
        X.astype(np.int8), X.T.astype(np.int8), preferred_element_type=np.int32),
    "matmul preferred_element_type": lambda jnp: jnp.matmul(
        X.astype(np.int8), X.T.astype(np.int8), preferred_element_type=np.float32),
    "clip min max": lambda jnp: jnp.clip(X, min=-0.5, max=0.5),
    "round a=": lambda jnp: jnp.round(a=X, decimals=1),
    "array object=": lambda jnp: jnp.array(object=X),
    "broadcast_to array=": lambda jnp: jnp.broadcast_to(array=X[0], shape=(4, 3)),
}


@pytest.mark.parametrize("name", sorted(NUMPY_CALLS))
def test_numpy_parameters_match_jax(name):
    _close(NUMPY_CALLS[name](ijnp), NUMPY_CALLS[name](jjnp))


def test_repeat_with_traced_counts_under_jit_and_grad():
    counts = np.array([1, 2, 0, 1], np.int32)
    x = np.arange(4.0, dtype=np.float32)
    expected = jax.jit(lambda r: jjnp.repeat(x, r, total_repeat_length=6))(counts)
    _close(impl.jit(lambda r: ijnp.repeat(x, r, total_repeat_length=6))(counts), expected)
    g = impl.grad(lambda x: (ijnp.repeat(x, counts, total_repeat_length=3) ** 2).sum())(x)
    _close(g, jax.grad(lambda x: (jjnp.repeat(x, counts, total_repeat_length=3) ** 2).sum())(x))


def test_nn_standardize_where():
    mask = X > 0
    _close(impl.nn.standardize(X, where=mask), jax.nn.standardize(X, where=mask), rtol=1e-3)


def test_lax_parameter_names_as_jax():
    for lax in (jax.lax, impl.lax):
        out = lax.reshape(operand=X, new_sizes=(3, 2))
        assert out.shape == (3, 2)
        assert lax.convert_element_type(operand=X, new_dtype=np.int32).dtype == np.int32
        assert lax.squeeze(array=X[None], dimensions=(0,)).shape == (2, 3)


# ------------------------------------------------------------------ refused parameters

@pytest.mark.parametrize("call, match", [
    (lambda api: api.numpy.einsum("i->i", X[0], out=X[0]), "out"),
    (lambda api: api.numpy.trace(X, out=X), "out"),
    (lambda api: api.numpy.round(X, out=X), "out"),
])
def test_refused_parameters_raise_as_jax(call, match):
    with pytest.raises(NotImplementedError, match=match):
        call(jax)
    with pytest.raises(NotImplementedError, match=match):
        call(impl)
