"""Derivatives in bfloat16 inputs run as in JAX (found by the stack law
stack_matches_reference: impl's grad and jacfwd refused bfloat16, which NumPy's issubdtype
does not know to be floating).  Expected values and dtypes come from JAX."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest

import impl
import impl.numpy as ijnp

X = np.array([0.5, 1.5, -1.0], dtype=ml_dtypes.bfloat16)


def _scalar(np_):
    return lambda x: (np_.sin(x) * x).sum()


def _vector(np_):
    return lambda x: np_.sin(x) * x


CASES = {"grad": _scalar, "value_and_grad": _scalar,
         "jacfwd": _vector, "jacrev": _vector}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bfloat16_derivatives_match_jax(name):
    got = getattr(impl, name)(CASES[name](ijnp))(X)
    want = getattr(jax, name)(CASES[name](jjnp))(X)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype == np.dtype(ml_dtypes.bfloat16)
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=2e-2, atol=1e-2)
