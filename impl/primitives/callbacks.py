"""Host callbacks: Python functions called with the runtime values of a program.

`debug_callback` has a side effect and no outputs, so it is `effectful` (dead-code
removal keeps it). `pure_callback` computes outputs of declared types on the host.
Both lower to JAX's own callbacks, which run them eagerly too.
"""
from __future__ import annotations

import jax

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import batching
from impl.primitives._define import define
from impl.primitives.indexing import concatenate, index_in_dim
from impl.primitives.shape import expand_dims


def _unrolled(bind, vals, dims, size):
    """Bind once per index of the mapped axis, on that slice of each batched value."""
    return [bind(*[x if d is None else index_in_dim(x, i, d, keepdims=False)
                   for x, d in zip(vals, dims)]) for i in range(size)]


def _axis_size(vals, dims):
    return next(get_aval(x).shape[d] for x, d in zip(vals, dims) if d is not None)


# ----------------------------------------------------------------- debug_callback

def _debug_callback_lower(*args, callback, ordered, partitioned):
    jax.debug.callback(callback, *args, ordered=ordered, partitioned=partitioned)
    return []


def _debug_callback_batch(axis_data, vals, dims, **params):
    # As JAX's: the callback sees one element of the mapped axis at a time.
    _unrolled(lambda *xs: debug_callback_p.bind(*xs, **params), vals, dims,
              _axis_size(vals, dims))
    return [], []


def _debug_callback_jvp(primals, tangents, **params):
    return debug_callback_p.bind(*primals, **params), []   # tangents are not shown


debug_callback_p = define(
    "debug_callback", abstract_eval=lambda *avals, **params: [],
    lowering=_debug_callback_lower, jvp=_debug_callback_jvp, batching=_debug_callback_batch,
    transpose=lambda cts, *args, **params: [None] * len(args),
    multiple_results=True, effectful=True, vma_rule=core.TYPED_BY_ABSTRACT_EVAL,
    sharding_rule=lambda *avals, **params: [])   # no results: any operands


def debug_callback(flat_callback, leaves, *, ordered=False, partitioned=False):
    """Call `flat_callback(*leaves)` with the runtime values of `leaves`."""
    debug_callback_p.bind(*leaves, callback=flat_callback, ordered=bool(ordered),
                          partitioned=bool(partitioned))


# ---------------------------------------------------------------- inspect_sharding

def _inspect_sharding_lower(x, *, callback):
    # JAX calls back with a concrete array's sharding at once, and with a traced
    # value's when XLA's partitioner has placed it (at compile time).
    jax.debug.inspect_array_sharding(x, callback=callback)
    return []


def _inspect_sharding_batch(axis_data, vals, dims, **params):
    raise NotImplementedError(
        "inspect_array_sharding (visualize_array_sharding) under vmap: the examples of a "
        "batch are not arrays placed on devices; inspect the batched array outside vmap "
        "(JAX 0.10.2 fails with an IndexError)")


inspect_sharding_p = define(
    "inspect_sharding", abstract_eval=lambda x, *, callback: [],
    lowering=_inspect_sharding_lower,
    jvp=lambda primals, tangents, **params: (inspect_sharding_p.bind(*primals, **params), []),
    batching=_inspect_sharding_batch, transpose=lambda cts, x, **params: [None],
    multiple_results=True, effectful=True, vma_rule=core.TYPED_BY_ABSTRACT_EVAL,
    sharding_rule=lambda x, **params: [])


def inspect_sharding(x, callback):
    """Call `callback(sharding)` with the sharding of the array `x` (a traced value's
    as XLA partitions the compiled program)."""
    inspect_sharding_p.bind(x, callback=callback)


# ------------------------------------------------------------------ pure_callback

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized", None)


def _pure_callback_lower(*args, callback, result_avals, vmap_method):
    # impl batches the primitive itself, so JAX never vmaps this call.
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in result_avals]
    return list(jax.pure_callback(callback, shapes, *args, vmap_method="sequential"))


def _batched_avals(size, avals):
    return tuple(ShapedArray((size,) + a.shape, a.dtype) for a in avals)


def _pure_callback_batch(axis_data, vals, dims, *, callback, result_avals, vmap_method):
    size = _axis_size(vals, dims)
    if vmap_method in ("sequential", "sequential_unrolled"):
        per_index = _unrolled(
            lambda *xs: pure_callback_p.bind(*xs, callback=callback,
                                             result_avals=result_avals,
                                             vmap_method=vmap_method),
            vals, dims, size)
        outs = [concatenate([expand_dims(r[k], (0,)) for r in per_index], 0)
                for k in range(len(result_avals))]
        return outs, [0] * len(outs)
    if vmap_method in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        front = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(vals, dims)]
        if vmap_method != "legacy_vectorized":
            fill = size if vmap_method == "broadcast_all" else 1
            front = [batching.broadcast_batch(x, fill, 0) if d is None else x
                     for x, d in zip(front, dims)]
        outs = pure_callback_p.bind(*front, callback=callback,
                                    result_avals=_batched_avals(size, result_avals),
                                    vmap_method=vmap_method)
        return outs, [0] * len(outs)
    raise NotImplementedError(
        "vmap is only supported for the pure_callback primitive when vmap_method is one "
        "of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
        f"'legacy_vectorized'. Got vmap_method={vmap_method!r}.")


def _pure_callback_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to "
                     "use callbacks while taking gradients.")


pure_callback_p = define(
    "pure_callback",
    abstract_eval=lambda *avals, callback, result_avals, vmap_method: list(result_avals),
    lowering=_pure_callback_lower, jvp=_pure_callback_jvp, batching=_pure_callback_batch,
    multiple_results=True)


def pure_callback(flat_callback, leaves, result_avals, vmap_method):
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be one of {list(VMAP_METHODS)}, "
                         f"got {vmap_method!r}")
    return pure_callback_p.bind(*leaves, callback=flat_callback,
                                result_avals=tuple(result_avals), vmap_method=vmap_method)
