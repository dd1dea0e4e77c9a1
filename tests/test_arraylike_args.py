"""jax.numpy takes arrays, not Python lists or tuples, for its array arguments:
`jnp.sum([1, 2])` is a TypeError, while the converters (jnp.array, jnp.asarray, the stack
family) take sequences. Every public function of impl.numpy is called with lists where JAX's
is, and must raise TypeError exactly where JAX's check does (and accept what JAX accepts)."""
from __future__ import annotations

import inspect
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import impl.numpy as inp

# Functions that need a callable, a file, a dtype or a format rather than arrays.
_NOT_ARRAY_FUNCTIONS = {
    "printoptions", "set_printoptions", "get_printoptions", "load", "save", "savez",
    "vectorize", "frompyfunc", "fromfunction", "piecewise", "from_dlpack", "fromfile",
    "fromiter", "fromstring", "frombuffer", "einsum_path", "einsum", "isdtype", "issubdtype",
    "result_type", "promote_types", "can_cast", "dtype", "iinfo", "finfo", "broadcast_shapes",
    "ndim", "shape", "size", "apply_along_axis", "apply_over_axes",
}


def _functions():
    return sorted(n for n in dir(jnp) if not n.startswith("_") and hasattr(inp, n)
                  and n not in _NOT_ARRAY_FUNCTIONS and callable(getattr(jnp, n))
                  and not inspect.isclass(getattr(jnp, n)))


def _outcome(fn, args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*args)
        return "ok"
    except Exception as e:  # noqa: BLE001  (the exception type is what is compared)
        return "arraylike" if "requires ndarray or scalar arguments" in str(e) else \
            type(e).__name__


def _lists(n):
    return [[1.0, 2.0]] * n


def test_lists_are_rejected_where_jax_rejects_them():
    wrong, checked, accepted = [], 0, 0
    for name in _functions():
        for n in (1, 2, 3):
            theirs = _outcome(getattr(jnp, name), _lists(n))
            if theirs not in ("arraylike", "ok"):
                continue  # JAX fails for another reason (arity, ...): not this rule
            mine = _outcome(getattr(inp, name), _lists(n))
            if theirs == "arraylike":
                checked += 1
                if mine != "arraylike":
                    wrong.append((name, n, "JAX: TypeError", mine))
            elif mine != "ok":
                accepted += 1
                wrong.append((name, n, "JAX: accepted", mine))
            else:
                accepted += 1
    # the known difference: jnp.select takes lists of conditions that are lists
    assert [w for w in wrong if w[0] != "select"] == []
    assert checked > 300 and accepted > 10


def test_sum_of_a_list_is_a_type_error_with_jaxs_message():
    with pytest.raises(TypeError, match=r"sum requires ndarray or scalar arguments, got "
                                        r"<class 'list'> at position 0\."):
        inp.sum([1, 2])
    with pytest.raises(TypeError):
        inp.sin((1.0, 2.0))
    with pytest.raises(TypeError):
        inp.add(np.ones(2), [1.0, 2.0])
    with pytest.raises(TypeError):
        inp.where([True, False], 1.0, 2.0)


def test_converters_and_shape_arguments_still_take_sequences():
    np.testing.assert_array_equal(inp.sum(inp.array([1, 2])), 3)
    np.testing.assert_array_equal(inp.asarray((1.0, 2.0)), jnp.asarray((1.0, 2.0)))
    assert inp.stack([np.ones(2), np.zeros(2)]).shape == (2, 2)
    assert inp.concatenate([np.ones(2), np.zeros(3)]).shape == (5,)
    assert inp.reshape(np.arange(6), [2, 3]).shape == (2, 3)
    assert inp.transpose(np.ones((2, 3)), [1, 0]).shape == (3, 2)
    assert inp.zeros([2, 3]).shape == (2, 3)
    assert inp.sum(np.ones((2, 3)), axis=(0, 1)) == 6
    assert inp.pad(np.ones(2), [(1, 1)]).shape == (4,)
    assert inp.array_equal([1, 2], np.array([1, 2])) == jnp.array_equal([1, 2], np.array([1, 2]))
