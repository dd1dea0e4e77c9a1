"""Host callbacks: Python functions called with the runtime values of a program.

`debug_callback` and `debug_print` have a side effect and no outputs, so they are
`effectful` (dead-code removal keeps them); `debug_print` holds its format and the
print options as parameters, as JAX 0.10 stages it. `pure_callback` computes outputs of
declared types on the host. All lower to JAX's own callbacks, which run them eagerly
too.
"""
from __future__ import annotations

import string
import sys

import jax
import numpy as np
from jax import tree_util

from impl import core
from impl.core import RuleMaker, ShapedArray, get_aval
from impl.interpreters import batching
from impl.primitives import sharding_rules
from impl.primitives._define import define
from impl.primitives.indexing import concatenate, index_in_dim
from impl.primitives.shape import expand_dims


def _unrolled(bind, vals, dims, size):
    """Bind once per index of the mapped axis, on that slice of each batched value."""
    return [bind(*[x if d is None else index_in_dim(x, i, d, keepdims=False)
                   for x, d in zip(vals, dims)]) for i in range(size)]


def _axis_size(vals, dims):
    return next(get_aval(x).shape[d] for x, d in zip(vals, dims) if d is not None)


# ---------------------------------------------------- debug_callback, debug_print
# Both call the host with the primal values (tangents are not shown), once per element
# of a mapped axis (as JAX's), and transpose to nothing.

def _host_call_jvp(prim):
    return lambda primals, tangents, **params: (prim.bind(*primals, **params), [])


def _host_call_batch(prim):
    def rule(axis_data, vals, dims, **params):
        _unrolled(lambda *xs: prim.bind(*xs, **params), vals, dims, _axis_size(vals, dims))
        return [], []
    return rule


def _define_host_call(name, lowering):
    return define(
        name, abstract_eval=core.no_results, lowering=lowering,
        jvp=RuleMaker(_host_call_jvp), batching=RuleMaker(_host_call_batch),
        transpose=lambda cts, *args, **params: [None] * len(args),
        multiple_results=True, effectful=True, replayed_by_remat=True,
        vma_rule=core.TYPED_BY_ABSTRACT_EVAL,
        sharding_rule=lambda *avals, **params: [],   # no results: any operands
        unreduced_rule=sharding_rules.host_call_unreduced)


def split_static(args, kwargs):
    """(tree, dynamic leaves, static leaves by position) of the pytree (args, kwargs):
    the leaves that are arrays (traced or not) are operands, the rest stay static."""
    leaves, tree = tree_util.tree_flatten((args, kwargs))
    static = {i: x for i, x in enumerate(leaves) if not core.valid_jaxtype(x)}
    return tree, [x for i, x in enumerate(leaves) if i not in static], static


def flat_call(fn, tree, static):
    """`fn` as a function of the dynamic leaves only: it calls `fn(*args, **kwargs)`."""
    def flat(*values):
        it = iter(values)
        leaves = [static[i] if i in static else next(it)
                  for i in range(len(static) + len(values))]
        args, kwargs = tree_util.tree_unflatten(tree, leaves)
        fn(*args, **kwargs)
    return flat


def _debug_callback_lower(*args, callback, ordered, partitioned):
    jax.debug.callback(callback, *args, ordered=ordered, partitioned=partitioned)
    return []


debug_callback_p = _define_host_call("debug_callback", _debug_callback_lower)


def debug_callback(flat_callback, leaves, *, ordered=False, partitioned=False):
    """Call `flat_callback(*leaves)` with the runtime values of `leaves`."""
    debug_callback_p.bind(*leaves, callback=flat_callback, ordered=bool(ordered),
                          partitioned=bool(partitioned))


def _debug_print_lower(*args, fmt, has_placeholders, in_tree, logging_record,
                       np_printoptions, ordered, partitioned, static_args):
    if logging_record is not None:
        raise NotImplementedError("debug_print: logging_record (jax.debug.log) is not "
                                  "supported by impl")

    def write(*values, **named):
        if has_placeholders:
            with np.printoptions(**dict(np_printoptions)):
                text = fmt.format(*values, **named)
        else:
            text = " ".join([fmt, *(str(v) for v in values)])
        sys.stdout.write(text + "\n")
    jax.debug.callback(flat_call(write, in_tree, dict(static_args)), *args,
                       ordered=ordered, partitioned=partitioned)
    return []


debug_print_p = _define_host_call("debug_print", _debug_print_lower)


def debug_print(fmt, args, kwargs, *, ordered=False, partitioned=False):
    """Print `fmt.format(*args, **kwargs)` with the runtime values of the arrays among
    them, with NumPy's print options of now. As JAX's, a format whose first field has
    no placeholder prints the format and then the values (`"{{x}} {}"` too)."""
    tree, dynamic, static = split_static(args, kwargs)
    first = next(iter(string.Formatter().parse(fmt)), (None, None))
    debug_print_p.bind(*dynamic, fmt=fmt, has_placeholders=first[1] is not None,
                       in_tree=tree, logging_record=None,
                       np_printoptions=tuple(np.get_printoptions().items()),
                       ordered=bool(ordered), partitioned=bool(partitioned),
                       static_args=tuple(static.items()))


# ---------------------------------------------------------------- inspect_sharding

def _inspect_sharding_lower(x, *, callback):
    # JAX calls back with a concrete array's sharding at once, and with a traced
    # value's when XLA's partitioner has placed it (at compile time).
    jax.debug.inspect_array_sharding(x, callback=callback)
    return []


_inspect_sharding_batch = core.always_raises(
    NotImplementedError,
    "inspect_array_sharding (visualize_array_sharding) under vmap: the examples of a "
    "batch are not arrays placed on devices; inspect the batched array outside vmap "
    "(JAX 0.10.2 fails with an IndexError)")


inspect_sharding_p = define(
    "inspect_sharding", abstract_eval=core.no_results, operands=1,
    lowering=_inspect_sharding_lower,
    jvp=lambda primals, tangents, **params: (inspect_sharding_p.bind(*primals, **params), []),
    batching=_inspect_sharding_batch, transpose=lambda cts, x, **params: [None],
    multiple_results=True, effectful=True, vma_rule=core.TYPED_BY_ABSTRACT_EVAL,
    sharding_rule=lambda x, **params: [], unreduced_rule=sharding_rules.no_results_unreduced)


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


_pure_callback_jvp = core.always_raises(
    ValueError, "Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use "
    "callbacks while taking gradients.")


pure_callback_p = define(
    "pure_callback",
    abstract_eval=lambda *avals, callback, result_avals, vmap_method: list(result_avals),
    lowering=_pure_callback_lower, jvp=_pure_callback_jvp, batching=_pure_callback_batch,
    multiple_results=True)


# ------------------------------------------------------------------ io_callback
# An impure host call with results: effectful (kept when unread), and under vmap called
# once per element in order, which an ordered one refuses, as JAX's.

def _io_callback_lower(*args, callback, result_avals, ordered):
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in result_avals]
    from jax.experimental import io_callback
    return list(io_callback(callback, shapes, *args, ordered=ordered))


def _io_callback_batch(axis_data, vals, dims, *, callback, result_avals, ordered):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    per_index = _unrolled(
        lambda *xs: io_callback_p.bind(*xs, callback=callback, result_avals=result_avals,
                                       ordered=False),
        vals, dims, _axis_size(vals, dims))
    outs = [concatenate([expand_dims(r[k], (0,)) for r in per_index], 0)
            for k in range(len(result_avals))]
    return outs, [0] * len(outs)


_io_callback_jvp = core.always_raises(ValueError, "IO callbacks do not support JVP.")
_io_callback_transpose = core.always_raises(ValueError, "IO callbacks do not support transpose.")


io_callback_p = define(
    "io_callback",
    abstract_eval=lambda *avals, callback, result_avals, ordered: list(result_avals),
    lowering=_io_callback_lower, jvp=_io_callback_jvp, batching=_io_callback_batch,
    transpose=_io_callback_transpose, multiple_results=True, effectful=True,
    vma_rule=core.TYPED_BY_ABSTRACT_EVAL)


def io_callback(flat_callback, leaves, result_avals, ordered):
    return io_callback_p.bind(*leaves, callback=flat_callback,
                              result_avals=tuple(result_avals), ordered=bool(ordered))


def pure_callback(flat_callback, leaves, result_avals, vmap_method):
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be one of {list(VMAP_METHODS)}, "
                         f"got {vmap_method!r}")
    return pure_callback_p.bind(*leaves, callback=flat_callback,
                                result_avals=tuple(result_avals), vmap_method=vmap_method)
