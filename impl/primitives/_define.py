"""`define`: the one way a primitive and all of its rules come into being.

A primitive module writes each primitive as one block: the rule functions, then a single
`define(...)` call that creates the `Primitive` and fills every transformation's table
(core's evaluation and abstract evaluation, lowering, ad's jvp and transpose, batching,
partial evaluation). Nothing is registered anywhere else, so reading one block tells a
newcomer everything impl knows about the primitive.

Rules that need their own primitive to be built (a linear primitive's jvp applies the
primitive to the tangents; a vectorized batching rule re-binds it) are given as
`RuleMaker`s such as `ad.linear_jvp` or `batching.vectorized`; `define` builds them once
the primitive exists.
"""
from __future__ import annotations

import inspect
import sys
from typing import Callable

import jax
import numpy as np

from impl import core
from impl.core import RuleMaker, ShapedArray, get_aval
from impl.interpreters import ad
from impl.interpreters import batching as _batching
from impl.interpreters import lowering as _lowering
from impl.interpreters import partial_eval as pe
from impl.primitives import _operand_dtypes

# Every primitive impl defines, by name: the harness draws programs from it.
registry: dict[str, core.Primitive] = {}
# The module that defined each primitive: tests and user programs call `define` too.
defined_in: dict[str, str] = {}
# How many array operands each primitive takes; None: any number (concatenate, sort, calls).
operand_counts: dict[str, int | None] = {}


def _hashable(params):
    try:
        key = tuple(sorted(params.items()))
        hash(key)
        return key
    except TypeError:
        return None


def _shape_from_lowering(prim, lower_fn):
    """Abstract evaluation by asking JAX for the shape of the lowering (cached)."""
    cache = {}
    core.register_cache(cache.clear)

    def rule(*avals, **params):
        pkey = _hashable(params)
        key = None if pkey is None else (tuple(avals), pkey)
        hit = cache.get(key) if key is not None else None
        if hit is not None:
            return hit
        # Shapes and dtypes only: shardings are the sharding rule's business.
        shape_params = {k: v for k, v in params.items() if k != "out_sharding"}
        out = jax.eval_shape(lambda *xs: lower_fn(*xs, **shape_params),
                             *[jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                               for a in avals])
        if prim.multiple_results:
            res = [ShapedArray(o.shape, o.dtype, getattr(o, "weak_type", False)) for o in out]
        else:
            res = ShapedArray(out.shape, out.dtype, getattr(out, "weak_type", False))
        if key is not None:
            cache[key] = res
        return res
    return rule


class _ShapeFromLowering:
    """Marker for `abstract_eval=`: derive the output types from the lowering."""

    def __repr__(self):
        return "SHAPE_FROM_LOWERING"


SHAPE_FROM_LOWERING = _ShapeFromLowering()


def _checked_eager(prim, run):
    """Eager evaluation type-checks first (shardings included), so bad input gets impl's
    clear error with or without a transformation (never an error from deep inside
    jax.lax)."""
    def impl(*args, **params):
        core.abstract_eval(prim, [get_aval(a) for a in args], params)
        return run(*args, **params)
    return impl


def _positional_count(fn):
    """The positional parameters of ``fn``; None when it takes ``*args`` or has no signature."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _build(rule, prim):
    return rule.make(prim) if isinstance(rule, RuleMaker) else rule


def define(name: str, *, abstract_eval, lowering: Callable | None, jvp, batching,
           transpose=None, partial_eval=None, staging=None, dce=None, dce_fully_used=False,
           recomputed_known=None, impl=None, multiple_results=False,
           collective=False, effectful=False, operands=None,
           sharding_rule=None, unreduced_rule=None, vma_rule=None, operand_dtypes=None,
           on_context_mesh=False, replayed_by_remat=False) -> core.Primitive:
    """Create the primitive `name` and register every one of its rules.

    abstract_eval: `(*avals, **params) -> aval` (a list when multiple_results),
        SHAPE_FROM_LOWERING, or None (the primitive cannot be staged).
    lowering: `(*args, **params) -> out` calling jax.lax; it also evaluates eagerly,
        after the abstract evaluation has checked the arguments, unless `impl` is given.
    jvp: `(primals, tangents, **params) -> (out, tangent_out)`, a RuleMaker from
        `impl.interpreters.ad`, or None (the primitive cannot be differentiated).
    batching: `(axis_data, vals, dims, **params) -> (out, out_dims)`, a RuleMaker from
        `impl.interpreters.batching`, or None (the primitive cannot be vmapped).
    transpose: `(cts, *args, **params) -> cotangent per arg`, for primitives linear in
        some arguments.
    partial_eval: `(trace, args, **params) -> outs` for call-like primitives that must
        be split, not staged whole, when some inputs are known.
    staging: `(trace, args, **params) -> outs or None`, how staging answers the
        primitive without an equation where JAX's forwarding or constant folding does.
    dce: `(used_outputs, eqn) -> eqn`, for equations that dead-code removal may rewrite
        when only some of their outputs are used (also when all are, if
        `dce_fully_used`).
    recomputed_known: `(trace, args, **params) -> outs`, how a checkpoint's known half
        evaluates the primitive when the policy saves none of its outputs (those the
        recomputation needs are computed again there anyway); None from it: as usual.
    impl: eager evaluation when it differs from the lowering (a call primitive compiles
        its program; a collective outside vmap raises).
    collective: the primitive names vmap axes (`axis_name=`); its batching rule also
        runs when no operand is batched, to find out whether its axis is the one mapped.
    effectful: the primitive has a side effect (a host callback), so dead-code removal
        keeps its equations even when nothing reads their outputs.
    replayed_by_remat: an effectful primitive that a checkpoint's recomputation of the
        forward pass runs again, unless the policy saves it (debug prints and callbacks,
        which then show the recomputed values, as JAX's do).
    operands: how many array operands it takes, when the abstract evaluation's signature
        does not say (one shared by primitives of different arities takes ``*avals``);
        otherwise its positional parameters (None for ``*avals``: any number).
    sharding_rule: `(*avals, **params) -> spec` (per result, a tuple with one
        PartitionSpec entry per axis, or a NamedSharding), how the results are sharded
        over Explicit mesh axes given the operands' types; it raises ShardingTypeError
        where they do not fit. `core.TYPED_BY_ABSTRACT_EVAL` when the abstract
        evaluation already types the results; None: the primitive refuses operands
        sharded over Explicit axes. Rules shared by many primitives are in
        `impl.primitives.sharding_rules`.
    unreduced_rule: `(*avals, **params) -> (unreduced, reduced)` (per result, lists
        of them, when multiple_results), the Explicit mesh axes the results are
        unreduced and reduced over (JAX's `ur_rule`), consulted when an operand or
        `out_sharding=` is unreduced or reduced; None: the primitive refuses those.
    on_context_mesh: the results of the (one-operand) primitive applied to a value
        without a mesh are on the mesh in context (broadcast_in_dim, as in JAX), where
        those of the others stay off any mesh.
    vma_rule: `(*avals, **params) -> axis names` (per result, a list, when
        multiple_results), the manual mesh axes the results vary over inside a shard_map
        body with check_vma=True (collectives, casts). None: the standard rule, under
        which the operands are cast to vary alike and the results vary as they do.
        `core.TYPED_BY_ABSTRACT_EVAL` when the abstract evaluation's results carry
        their vma (calls and control flow: the types of their programs).
    operand_dtypes: an `OperandDtypes` (impl/primitives/_operand_dtypes.py), the dtypes
        jax.lax lets its operands have: which each accepts and which must be equal.
        impl.lax's function checks it before binding (the primitive itself lets weakly
        typed operands take the others' dtype, for impl's own callers).
    """
    if name in registry:
        raise ValueError(f"primitive {name!r} is already defined")
    prim = core.Primitive(name, multiple_results, collective=collective)
    operands = operands if operands is not None else _positional_count(
        lowering if abstract_eval is SHAPE_FROM_LOWERING else abstract_eval)
    if abstract_eval is SHAPE_FROM_LOWERING:
        abstract_eval = _shape_from_lowering(prim, lowering)
    if abstract_eval is not None:
        core.abstract_eval_rules[prim] = abstract_eval
    if lowering is not None:
        _lowering.lowering_rules[prim] = lowering
    if sharding_rule is not None:
        core.sharding_rules[prim] = sharding_rule
    if unreduced_rule is not None:
        core.unreduced_rules[prim] = unreduced_rule
    if vma_rule is not None:
        core.vma_rules[prim] = vma_rule
    if on_context_mesh:
        core.results_on_context_mesh.add(prim)
    if impl is not None:
        core.impl_rules[prim] = impl
    elif lowering is not None:
        core.impl_rules[prim] = (lowering if abstract_eval is None
                                 else _checked_eager(prim, lowering))
    for table, rule in ((ad.jvp_rules, jvp), (ad.transpose_rules, transpose),
                        (_batching.batching_rules, batching),
                        (pe.partial_eval_rules, partial_eval), (pe.staging_rules, staging),
                        (pe.dce_rules, dce)):
        if rule is not None:
            table[prim] = _build(rule, prim)
    if dce_fully_used:
        pe.dce_fully_used.add(prim)
    if recomputed_known is not None:
        pe.recomputed_known_rules[prim] = recomputed_known
    if effectful:
        pe.effectful.add(prim)
    if replayed_by_remat:
        pe.replayed_by_remat.add(prim)
    if operand_dtypes is not None:
        _operand_dtypes.declared[name] = operand_dtypes
    defined_in[name] = sys._getframe(1).f_globals.get("__name__", "")
    operand_counts[name] = operands
    registry[name] = prim
    return prim


def cast_to(x, dtype):
    """Cast a jax value to `dtype` inside a lowering rule, if it differs."""
    if isinstance(x, (int, float, complex, bool)):
        return np.asarray(x, dtype)
    if np.dtype(x.dtype) != dtype:
        return jax.lax.convert_element_type(x, dtype)
    return x
