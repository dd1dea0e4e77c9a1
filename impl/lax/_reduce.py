"""jax.lax.reduce: a dedicated reduction when the computation is a known monoid with its
identity as the initial value (lax.add with 0, lax.max with -inf, ...), as JAX; the
general `reduce` primitive (impl/primitives/general_reduce.py) otherwise."""
from __future__ import annotations

import numpy as np
from jax import lax as jax_lax
from jax import tree_util

from impl.core import get_aval
from impl.lax._composites import reduce_and, reduce_or, reduce_xor
from impl.primitives import elementwise as ew
from impl.primitives.general_reduce import canonical_dimensions, reduce_general
from impl.primitives.reductions import reduce_max, reduce_min, reduce_prod
from impl.primitives.shape import reduce_sum
from impl.primitives.windows import concrete_scalar


def _max_identity(dtype):
    if np.issubdtype(dtype, np.inexact):
        return np.array(-np.inf, dtype)
    return np.array(np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else False, dtype)


def _min_identity(dtype):
    if np.issubdtype(dtype, np.inexact):
        return np.array(np.inf, dtype)
    return np.array(np.iinfo(dtype).max if np.issubdtype(dtype, np.integer) else True, dtype)


def _bool_only(reducer):
    """impl's and/or/xor reductions take booleans; integers use the general reduce."""
    return lambda dtype: reducer if dtype == np.bool_ else None


# monoid name -> (identity of a dtype, the dedicated reduction for a dtype or None)
_MONOIDS = {
    "add": (lambda dt: np.array(0, dt), lambda dt: reduce_sum),
    "mul": (lambda dt: np.array(1, dt), lambda dt: reduce_prod),
    "max": (_max_identity, lambda dt: reduce_max),
    "min": (_min_identity, lambda dt: reduce_min),
    "bitwise_and": (lambda dt: np.array(-1).astype(dt), _bool_only(reduce_and)),
    "bitwise_or": (lambda dt: np.array(0, dt), _bool_only(reduce_or)),
    "bitwise_xor": (lambda dt: np.array(0, dt), _bool_only(reduce_xor)),
}
_BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor")
# The functions recognised as each monoid: JAX's, and impl.lax's (added by impl.lax).
monoid_functions = {getattr(jax_lax, name): name for name in _MONOIDS}


def _monoid_reducer(computation, inits):
    """The dedicated reduction for `computation` and the single initial value in `inits`,
    or None when they are not a known monoid with its identity."""
    try:
        name = monoid_functions.get(computation)
    except TypeError:   # unhashable computation
        return None
    if name is None or len(inits) != 1:
        return None
    init = concrete_scalar(inits[0])
    if init is None:
        return None
    dtype = get_aval(inits[0]).dtype
    intlike = dtype == np.bool_ or np.issubdtype(dtype, np.integer)
    if name in _BITWISE and not intlike:
        return None
    identity, reducer = _MONOIDS[name]
    if not np.equal(init, identity(dtype)):
        return None
    return reducer(dtype)


def reduce(operands, init_values, computation, dimensions):
    """Reduce `operands` (a pytree of arrays of one shape) over `dimensions` with
    `computation`, starting from `init_values` (scalars, in the same pytree)."""
    flat_ops, op_tree = tree_util.tree_flatten(operands)
    flat_inits, init_tree = tree_util.tree_flatten(init_values)
    if op_tree != init_tree:
        raise ValueError("Operands must have the same tree structure as init_values: "
                         f"{op_tree} vs. {init_tree}")
    if len(flat_ops) != len(flat_inits):
        raise ValueError("Must have same total number of operands as init_values: "
                         f"{len(flat_ops)} vs. {len(flat_inits)}")
    dims = canonical_dimensions(dimensions, get_aval(flat_ops[0]).ndim) if flat_ops else ()
    reducer = _monoid_reducer(computation, flat_inits)
    if reducer is not None:
        weak = get_aval(flat_ops[0]).weak_type and get_aval(flat_inits[0]).weak_type
        out = reducer(flat_ops[0], dims)
        return ew.convert_element_type(out, get_aval(out).dtype, weak_type=weak)
    outs = reduce_general(flat_ops, flat_inits, computation, init_tree, dims)
    return tree_util.tree_unflatten(init_tree, outs)
