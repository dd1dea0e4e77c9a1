"""Concrete arrays indexed or updated with impl's traced values.

impl's eager values are `jax.Array`s, so `jnp.asarray(table)[i]` with `i` an impl tracer
(inside vmap, jit or grad) reaches jax.Array's own `__getitem__`, and
`jnp.zeros(3).at[0].set(x)` reaches JAX's `.at` helper, neither of which knows impl's
tracers (one raises, the other reads the tracer's concrete value and loses its
derivative). Python offers no reflected `__getitem__`, so the two entry points are
wrapped: when the index or the update values hold an impl tracer, the operation is
handed to impl's indexing (whose primitives carry every transformation); otherwise
JAX's method runs unchanged, so programs using JAX directly see no difference.
"""
from __future__ import annotations

from jax import tree_util
from jax._src.array import ArrayImpl as _ArrayImpl
from jax._src.numpy import array_methods as _jax_array_methods

from impl import core
from impl.core import Tracer
from impl.numpy import _indexing

_UPDATE_METHODS = ("get", "set", "add", "subtract", "multiply", "divide", "power", "min",
                   "max", "apply")


def _holds_tracer(tree) -> bool:
    leaves = tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, slice))
    for leaf in leaves:
        parts = (leaf.start, leaf.stop, leaf.step) if isinstance(leaf, slice) else (leaf,)
        if any(isinstance(p, Tracer) for p in parts):
            return True
    return False


def _getitem_deferring_to_impl(jax_getitem):
    def __getitem__(self, idx):
        if _holds_tracer(idx):
            return _indexing.getitem(self, idx)
        return jax_getitem(self, idx)
    return __getitem__


def _update_deferring_to_impl(name, jax_method):
    def method(self, *args, **kwargs):
        # apply's function may close over impl tracers no argument shows, so inside
        # any impl transformation it is impl's (which stages the function and refuses
        # such closures, as JAX does).
        if _holds_tracer((self.index, args, kwargs)) or (
                name == "apply" and core.current_trace() is not core.eval_trace):
            return getattr(_indexing._IndexUpdateRef(self.array, self.index), name)(
                *args, **kwargs)
        return jax_method(self, *args, **kwargs)
    method.__name__ = name
    return method


def install():
    """Wrap jax.Array's `__getitem__` and the methods of its `.at[...]` (once)."""
    # The class itself, not the type of an array made here: making one would initialise
    # JAX's backends at import time, after which its device flags can no longer be set.
    array_type = _ArrayImpl
    if not getattr(array_type.__getitem__, "_defers_to_impl", False):
        wrapped = _getitem_deferring_to_impl(array_type.__getitem__)
        wrapped._defers_to_impl = True
        array_type.__getitem__ = wrapped
    ref_type = _jax_array_methods._IndexUpdateRef
    for name in _UPDATE_METHODS:
        jax_method = getattr(ref_type, name, None)
        if jax_method is not None and not getattr(jax_method, "_defers_to_impl", False):
            wrapped = _update_deferring_to_impl(name, jax_method)
            wrapped._defers_to_impl = True
            setattr(ref_type, name, wrapped)


install()
