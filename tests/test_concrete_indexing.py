"""A concrete array indexed (or updated) by a traced value works as in JAX.

Each program is run on JAX and on impl; the values must agree. The tables are concrete
arrays made outside the transformation; only the indices or update values are traced."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as ijnp

TABLE = np.arange(12, dtype=np.float32).reshape(4, 3)
IDX = np.array([0, 2, 3, 1], np.int32)


def _programs():
    def gather_rows(api, jnp):
        t = jnp.asarray(TABLE)
        return api.vmap(lambda i: t[i])(IDX)

    def gather_row_slice(api, jnp):
        t = jnp.asarray(TABLE)
        return api.vmap(lambda i: t[i, 1:])(IDX)

    def gather_pairs(api, jnp):
        t = jnp.asarray(TABLE)
        return api.vmap(lambda i, j: t[i, j])(IDX, IDX % 3)

    def jit_scalar_index(api, jnp):
        t = jnp.asarray(TABLE)
        return api.jit(lambda i: t[i, 2])(np.int32(1))

    def jit_array_index(api, jnp):
        t = jnp.asarray(TABLE)
        return api.jit(lambda i: t[i])(IDX)

    def grad_through_lookup(api, jnp):
        t = jnp.asarray(TABLE)
        return api.grad(lambda x, i: (t[i] * x).sum())(np.float32(2.0), np.int32(3))

    def jvp_through_lookup(api, jnp):
        t = jnp.asarray(TABLE)
        return api.jvp(lambda x: t[IDX[0] + 1] * x, (np.float32(2.0),), (np.float32(1.0),))

    def grad_of_at_set(api, jnp):
        return api.grad(lambda x: (jnp.zeros(3).at[0].set(x) * np.arange(3.0)).sum()
                        + jnp.zeros(3).at[1].set(x).sum() * 3)(np.float32(1.0))

    def vmap_at_add(api, jnp):
        return api.vmap(lambda i: jnp.zeros(4).at[i].add(2.0))(IDX)

    def jit_at_set_traced_value(api, jnp):
        return api.jit(lambda v: jnp.ones((2, 3)).at[1].set(v))(np.arange(3.0, dtype=np.float32))

    def vmap_at_get(api, jnp):
        t = jnp.asarray(TABLE)
        return api.vmap(lambda i: t.at[i].get())(IDX)

    return {f.__name__: f for f in (gather_rows, gather_row_slice, gather_pairs,
                                    jit_scalar_index, jit_array_index, grad_through_lookup,
                                    jvp_through_lookup, grad_of_at_set, vmap_at_add,
                                    jit_at_set_traced_value, vmap_at_get)}


PROGRAMS = _programs()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_concrete_array_with_traced_index_matches_jax(name):
    expected = PROGRAMS[name](jax, jjnp)
    got = PROGRAMS[name](impl, ijnp)
    for e, g in zip(jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(got)):
        assert np.shape(g) == np.shape(e)
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-6)


def test_plain_jax_indexing_is_untouched():
    """Programs that use JAX directly keep JAX's behaviour (and JAX's own tracers)."""
    t = jjnp.asarray(TABLE)
    np.testing.assert_array_equal(jax.vmap(lambda i: t[i])(IDX), TABLE[IDX])
    np.testing.assert_array_equal(t.at[1].set(0.0)[1], np.zeros(3))
    np.testing.assert_array_equal(t[1:3], TABLE[1:3])


def test_numpy_table_indexed_by_tracer_raises_as_jax():
    """A NumPy (not jax) array indexed by a tracer cannot work: the same error as JAX."""
    with pytest.raises(jax.errors.TracerArrayConversionError):
        jax.jit(lambda i: TABLE[i])(1)
    with pytest.raises(impl.errors.TracerArrayConversionError):
        impl.jit(lambda i: TABLE[i])(1)
