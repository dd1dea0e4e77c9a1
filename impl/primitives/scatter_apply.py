"""`scatter_apply`: XLA's scatter whose combiner applies a user's unary function to the
operand's element (what `x.at[idx].apply(func)` and `lax.scatter_apply` bind).

The primitive takes the operand, the indices and an updates operand of zeros that only
gives the windows their shape (as JAX's does), and holds `func` staged on one scalar of
the operand's type as `update_jaxpr`. An index that repeats applies `func` once per
occurrence.

* jvp: none, as in JAX (NotImplementedError with JAX's message).
* batching: the scatters' rule (the batch axis becomes a window or batching axis).
* lowering: jax.lax.scatter_apply running the program.
"""
from __future__ import annotations

import weakref

import jax
import numpy as np

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import lowering
from impl.interpreters import partial_eval as pe
from impl.primitives import indexing as ix
from impl.primitives import sharding_rules
from impl.primitives._define import define

_check_scatter = ix._scatter_aval_rule("scatter_apply")


def _scatter_apply_aval(operand, indices, updates, *, update_jaxpr, **params):
    return _check_scatter(operand, indices, updates, **params)


def _lowered_function(update_jaxpr):
    """`func` as jax.lax.scatter_apply calls it, made once per program (so that JAX's
    own caches, keyed on the function, hit)."""
    fn = update_jaxpr._cache.get("scatter-apply")
    if fn is None:
        def fn(x):
            return lowering.eval_jaxpr_lowered(update_jaxpr.jaxpr, update_jaxpr.consts, [x])[0]
        update_jaxpr._cache["scatter-apply"] = fn
    return fn


def _scatter_apply_lower(operand, indices, updates, *, update_jaxpr, dimension_numbers,
                         indices_are_sorted, unique_indices, mode):
    return jax.lax.scatter_apply(operand, indices, _lowered_function(update_jaxpr),
                                 dimension_numbers, update_shape=get_aval(updates).shape,
                                 indices_are_sorted=indices_are_sorted,
                                 unique_indices=unique_indices, mode=mode)


_scatter_apply_jvp = core.always_raises(NotImplementedError, "scatter_apply JVP not implemented")


# (No operand dtype contract to declare: the updates are made of the operand's dtype.)
scatter_apply_p = define(
    "scatter_apply", abstract_eval=_scatter_apply_aval, lowering=_scatter_apply_lower,
    jvp=_scatter_apply_jvp, batching=ix._scatter_batch, sharding_rule=sharding_rules.scatter)


# ------------------------------------------------------------ the function

_programs = weakref.WeakKeyDictionary()   # func -> {scalar type: program}
core.register_cache(_programs.clear)


def _trace_update(func, aval):
    """`func` staged on one scalar of type `aval`; cached per function and type."""
    per_fn = pe.programs_of(_programs, func)
    program = per_fn.get(aval)
    if program is not None:
        return program

    def checked_func(x):
        out = func(x)
        if not (isinstance(out, core.Tracer) or core.valid_jaxtype(out)):
            raise ValueError(f"Invalid return type from reduction function: {type(out)}\n"
                             "Reduction functions should only return an array.\n"
                             f"Full return value: {out}")
        return [out]

    program = pe.make_closed_jaxpr(checked_func, [aval])
    if any(isinstance(c, core.Tracer) for c in program.consts):
        raise NotImplementedError("Reduction computations can't close over Tracers.")
    (out,) = program.out_avals
    if out.shape != () or out.dtype != aval.dtype:
        raise ValueError(f"scatter_apply: the function must return a scalar of the "
                         f"operand's type {aval.str_short()}, got {out.str_short()}")
    per_fn[aval] = program
    return program


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """lax.scatter_apply: `func` applied to `operand` at the scattered windows, once per
    occurrence of an index."""
    aval = get_aval(operand)
    program = _trace_update(func, ShapedArray((), aval.dtype, aval.weak_type))
    unused = np.zeros(tuple(int(d) for d in update_shape), aval.dtype)
    return scatter_apply_p.bind(operand, scatter_indices, unused, update_jaxpr=program,
                                **ix._scatter_params(dimension_numbers, indices_are_sorted,
                                                     unique_indices, mode))
