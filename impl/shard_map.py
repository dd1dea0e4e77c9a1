"""shard_map: a per-device program over a mesh, lowered to JAX's shard_map.

`shard_map(f, mesh=, in_specs=, out_specs=)` stages `f` for one device's block of each
argument (the array split along the mesh axes its PartitionSpec names) into a
`shard_map` primitive that holds the block program. Lowering calls `jax.shard_map` over
a function evaluating the block program with the lowering rules, so XLA's SPMD
partitioner runs it and collectives over mesh axes become XLA collectives: impl never
schedules devices itself. The rules transform the block program (jvp, vmap, partial
evaluation, transposition), keeping the result one shard_map.

With check_vma=True (the default) the block program's types say which manual mesh
axes each value varies over (`ShapedArray.vma`, JAX's `mat.varying`): a block varies
over the axes its in_spec names, operations combining values cast those varying over
fewer axes with `pvary`, collectives change the axes as JAX's do, and each output must
vary over no axis its out_spec leaves out (JAX's ValueError otherwise); it is cast to
vary over the axes the out_spec names. Differentiation then needs no convention at the
boundary: the transpose of `pvary` sums the cotangent over its axes and that of psum
(`psum_invariant`) casts it back to varying, so cotangents have their primals' types.

With check_vma=False nothing is tracked and differentiation follows JAX's convention
without replication checks: the transpose of psum is psum, so the cotangent of an
output replicated over mesh axes (not named in its out_spec) is divided among them, and
the cotangent of an input replicated over mesh axes is summed over them.

impl types the programs itself, so they are lowered to JAX's shard_map with its check
off (the values do not depend on it).
"""
from __future__ import annotations

import contextlib
import functools
import math

import jax
import numpy as np
from jax import tree_util
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from impl import core
from impl.api import flatten_fun, _check_leaf, _fun_name
from impl.core import Tracer, get_aval
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero
from impl.primitives import collectives
from impl.primitives import elementwise as ew
from impl.primitives import shape as sh
from impl.primitives import sharding_rules
from impl.primitives._define import define
from impl.primitives.sharding import (broadcast_prefix, check_spmd_unused, insert_spec_entry,
                                      prefix_key_paths, spec_entry, spec_names)

P = PartitionSpec


# ------------------------------------------------------------- mesh axes in scope

@contextlib.contextmanager
def _mesh_axes(mesh, axis_names, check_vma):
    """Bind the manual mesh axes while the block program is staged or transformed, so
    collectives and axis_size inside it find them, and (check_vma) track in the types
    which of them each value varies over."""
    manual = _all_manual(mesh, axis_names)
    with batching.extend_axis_env([(n, mesh.shape[n]) for n in manual]), \
            core.manual_axes(manual, check_vma):
        yield


# ------------------------------------------------------------------ block shapes

def _axes_size(mesh, names):
    return math.prod(mesh.shape[n] for n in names)


def _spec_vma(mesh, spec):
    """The mesh axes `spec` splits over (in mesh order): those a block varies over."""
    named = {n for entry in spec.partitions for n in spec_names(entry)}
    return tuple(n for n in mesh.axis_names if n in named)


def _block_aval(mesh, spec, aval, check_vma):
    """One device's block of a value of type `aval` split as `spec` (divisibility and
    rank are checked by the caller). A block is not sharded over the mesh: its type
    keeps no explicit sharding; with check_vma it varies over the axes of `spec`, and
    is unreduced and reduced over its unreduced and reduced axes."""
    shape = list(aval.shape)
    for i, entry in enumerate(spec.partitions):
        shape[i] //= _axes_size(mesh, spec_names(entry))
    if not check_vma:
        return aval.update(shape=tuple(shape), explicit_sharding=None, vma=(),
                           manual_unreduced=(), manual_reduced=())
    return aval.update(shape=tuple(shape), explicit_sharding=None, vma=_spec_vma(mesh, spec),
                       manual_unreduced=_in_mesh_order(mesh, spec.unreduced),
                       manual_reduced=_in_mesh_order(mesh, spec.reduced))


def _in_mesh_order(mesh, names):
    return tuple(n for n in mesh.axis_names if n in names)


def _global_aval(mesh, spec, aval):
    """The value the blocks of type `aval` make together, split as `spec`; on a mesh
    with Explicit axes its type is sharded as `spec` says over them (unreduced and
    reduced axes included)."""
    shape = list(aval.shape)
    for i, entry in enumerate(spec.partitions):
        shape[i] *= _axes_size(mesh, spec_names(entry))
    return aval.update(shape=tuple(shape), explicit_sharding=core.explicit_sharding_of(
        NamedSharding(mesh, spec), aval.ndim), vma=(), manual_unreduced=(), manual_reduced=())


def _cast_as_spec(x, mesh, spec, manual):
    """An output `x` of the block program cast to vary over the manual axes its
    out_spec names, then to be unreduced over its unreduced axes (as JAX does before
    checking it)."""
    missing = tuple(n for n in _spec_vma(mesh, spec) if n in manual
                    and n not in get_aval(x).vma)
    if missing:
        x = collectives.pvary_p.bind(x, axes=missing)
    missing = tuple(n for n in _in_mesh_order(mesh, spec.unreduced)
                    if n not in get_aval(x).manual_unreduced)
    return collectives.vary_unreduced_cast_p.bind(x, axes=missing) if missing else x


def _cotangent_spec(spec):
    """The spec of a cotangent of a value split as `spec`: unreduced and reduced axes
    swapped, as its type's."""
    if not (spec.unreduced or spec.reduced):
        return spec
    return spec.update(unreduced=spec.reduced, reduced=spec.unreduced)


def _unmentioned(mesh, axis_names, spec):
    """The manual mesh axes (in mesh order) that `spec` does not name (nor as unreduced
    axes, whose values are parts of sums, not copies)."""
    named = {n for entry in spec.partitions for n in spec_names(entry)} | spec.unreduced
    return tuple(n for n in mesh.axis_names if n in axis_names and n not in named)


def _all_manual(mesh, axis_names):
    return tuple(n for n in mesh.axis_names if n in axis_names)


def _nonzero(values, mask):
    return tuple(v for v, m in zip(values, mask) if m)


# --------------------------------------------------------------- the primitive

def _shard_map_aval(*avals, jaxpr, mesh, in_specs, out_specs, axis_names, check_vma):
    blocks = [_block_aval(mesh, s, a, check_vma) for s, a in zip(in_specs, avals)]
    expected = jaxpr.in_avals
    if len(blocks) != len(expected) or any(
            b.shape != e.shape or b.dtype != e.dtype or b.vma != e.vma
            or b.manual_unreduced != e.manual_unreduced or b.manual_reduced != e.manual_reduced
            for b, e in zip(blocks, expected)):
        raise TypeError(f"shard_map: argument blocks {[b.str_short() for b in blocks]} do "
                        f"not match the block program's {[e.str_short() for e in expected]}")
    return [_global_aval(mesh, s, a) for s, a in zip(out_specs, jaxpr.out_avals)]


def _jax_spec(mesh, spec):
    """`spec` as JAX's shard_map takes it: its unreduced and reduced axes only where
    they are Explicit (values inside a program may be unreduced over Auto axes, which
    JAX's specs refuse; the data is the same)."""
    if not (spec.unreduced or spec.reduced):
        return spec
    explicit = set(mesh.explicit_axes)
    return spec.update(unreduced=spec.unreduced & explicit, reduced=spec.reduced & explicit)


def _shard_map_lowering(*args, jaxpr, mesh, in_specs, out_specs, axis_names, check_vma,
                        staged=True):
    def block(*xs):
        return tuple(lowering.eval_jaxpr_lowered(jaxpr.jaxpr, jaxpr.consts, xs))
    if staged:
        # JAX's shard_map primitive, unlike its API, takes an operand whose sharding type
        # differs from its in_spec (a transformation's cotangent, say) and places it as
        # the spec says; eagerly JAX's API check applies (staged=False), as in JAX.
        args = [_placed_as_spec(mesh, axis_names, s, x) for s, x in zip(in_specs, args)]
    mapped = jax.shard_map(block, mesh=mesh, in_specs=tuple(_jax_spec(mesh, s) for s in in_specs),
                           out_specs=tuple(_jax_spec(mesh, s) for s in out_specs),
                           axis_names=set(axis_names), check_vma=False)
    return list(mapped(*args))


def _arguments_typed_by_specs(mesh, manual):
    """Whether an argument's sharding type must be its in_spec (JAX's API checks it): on
    a mesh whose axes are all Explicit and all manual."""
    return (frozenset(mesh.axis_names) == frozenset(manual)
            and all(t == jax.sharding.AxisType.Explicit for t in mesh.axis_types))


def _full_rank_spec(spec, ndim):
    """`spec` with one entry per dimension, as a type's spec has."""
    return P(*spec.partitions + (None,) * (ndim - len(spec)), unreduced=spec.unreduced,
             reduced=spec.reduced)


def _placed_as_spec(mesh, axis_names, spec, x):
    if not _arguments_typed_by_specs(mesh, axis_names):
        return x
    want = _jax_spec(mesh, spec)
    have = jax.typeof(x).sharding.spec
    if (want.unreduced or want.reduced or have.unreduced or have.reduced
            or have == _full_rank_spec(want, x.ndim)):
        return x   # (a cast to or from unreduced or reduced is not a placement)
    return jax.reshard(x, NamedSharding(mesh, want))


def _shard_map_impl(*args, jaxpr, **params):
    key = ("shard_map",) + tuple(sorted(params.items()))
    fn = jaxpr._cache.get(key)
    if fn is None:
        mesh, out_specs = params["mesh"], params["out_specs"]
        placed = {}
        if set(params["axis_names"]) == set(mesh.axis_names):
            # The results placed by their out_specs as written, as JAX's eager shard_map
            # places them (P(None,) where a jitted program would say P())
            placed["out_shardings"] = [NamedSharding(mesh, _jax_spec(mesh, s))
                                       for s in out_specs]
        fn = jaxpr._cache[key] = jax.jit(
            functools.partial(_shard_map_lowering, jaxpr=jaxpr, staged=False, **params),
            **placed)
    return fn(*args)


def _shard_map_jvp(primals, tangents, *, jaxpr, mesh, in_specs, out_specs, axis_names,
                   check_vma):
    nonzeros = [type(t) is not Zero for t in tangents]
    with _mesh_axes(mesh, axis_names, check_vma):
        new, out_nonzero = ad.jvp_jaxpr(jaxpr, nonzeros)
    outs = shard_map_p.bind(
        *primals, *[t for t in tangents if type(t) is not Zero], jaxpr=new, mesh=mesh,
        in_specs=in_specs + _nonzero(in_specs, nonzeros),
        out_specs=out_specs + _nonzero(out_specs, out_nonzero), axis_names=axis_names,
        check_vma=check_vma)
    n = len(out_specs)
    t_iter = iter(outs[n:])
    return outs[:n], [next(t_iter) if nz else Zero(ad.tangent_aval(get_aval(o)))
                      for nz, o in zip(out_nonzero, outs[:n])]


def _residual_spec(mesh, axis_names, check_vma, aval):
    """How a residual of type `aval` leaves the known program, with a new leading axis
    of one block per device it may differ on: every manual axis, or with check_vma the
    axes it varies over (so it keeps its type), and reaches the unknown program's
    device unchanged."""
    if not check_vma:
        return P(spec_entry(_all_manual(mesh, axis_names)))
    return P(spec_entry(aval.vma), unreduced=frozenset(aval.manual_unreduced),
             reduced=frozenset(aval.manual_reduced))


def _split_block_program(jaxpr, unknowns, mesh, axis_names, check_vma):
    """Partial evaluation of the block program; residuals carry a leading axis of one
    block per device (see `_residual_spec`)."""
    key = ("shard_map_pe", tuple(unknowns))
    hit = jaxpr._cache.get(key)
    if hit is not None:
        return hit
    with _mesh_axes(mesh, axis_names, check_vma):
        known, unknown, out_unknowns, num_res = pe.partial_eval_jaxpr(jaxpr, unknowns)
        n_out = len(known.out_avals) - num_res

        def known_with_blocks(*xs):
            outs = core.eval_jaxpr(known.jaxpr, known.consts, *xs)
            return outs[:n_out] + [sh.expand_dims(r, (0,)) for r in outs[n_out:]]

        def unknown_from_blocks(*xs):
            res = [sh.squeeze(r, (0,)) for r in xs[:num_res]]
            return core.eval_jaxpr(unknown.jaxpr, unknown.consts, *res, *xs[num_res:])

        res_avals = [a.update(shape=(1,) + a.shape) for a in unknown.in_avals[:num_res]]
        known = pe.make_closed_jaxpr(known_with_blocks, known.in_avals)
        unknown = pe.make_closed_jaxpr(unknown_from_blocks,
                                       res_avals + unknown.in_avals[num_res:])
    jaxpr._cache[key] = result = (known, unknown, out_unknowns, num_res)
    return result


def _shard_map_partial_eval(trace, args, *, jaxpr, mesh, in_specs, out_specs, axis_names,
                            check_vma):
    unknowns = [trace.is_own(x) for x in args]
    known, unknown, out_unknowns, num_res = _split_block_program(jaxpr, unknowns, mesh,
                                                                 axis_names, check_vma)
    res_specs = tuple(_residual_spec(mesh, axis_names, check_vma, a)
                      for a in known.out_avals[len(known.out_avals) - num_res:])
    knowns, out_knowns = [not u for u in unknowns], [not u for u in out_unknowns]
    with core.set_current_trace(trace.parent):
        known_outs = shard_map_p.bind(
            *_nonzero(args, knowns), jaxpr=known, mesh=mesh,
            in_specs=_nonzero(in_specs, knowns),
            out_specs=_nonzero(out_specs, out_knowns) + res_specs, axis_names=axis_names,
            check_vma=check_vma)
    n_known = len(known_outs) - num_res
    invars = [trace.get_var(x) for x in list(known_outs[n_known:])
              + list(_nonzero(args, unknowns))]
    params = dict(jaxpr=unknown, mesh=mesh, in_specs=res_specs + _nonzero(in_specs, unknowns),
                  out_specs=_nonzero(out_specs, out_unknowns), axis_names=axis_names,
                  check_vma=check_vma)
    out_avals = _shard_map_aval(*[v.aval for v in invars], **params)
    staged = trace.add_eqn(shard_map_p, invars, out_avals, params)
    k_iter, u_iter = iter(known_outs[:n_known]), iter(staged)
    return [next(u_iter) if u else next(k_iter) for u in out_unknowns]


def _transpose_block_program(jaxpr, linear, ct_nonzero, mesh, in_specs, out_specs,
                             axis_names, check_vma):
    """The transposed block program. With check_vma the cotangents have their primals'
    types (cast to vary as the input's spec says where less varying, as a zero is);
    without, the replication convention of the module docstring: output cotangents
    divided over the mesh axes their spec leaves out, input cotangents summed over the
    axes theirs leaves out."""
    key = ("shard_map_transpose", tuple(linear), tuple(ct_nonzero))
    hit = jaxpr._cache.get(key)
    if hit is not None:
        return hit
    with _mesh_axes(mesh, axis_names, check_vma):
        transposed, in_nonzero = ad.transpose_jaxpr(jaxpr, linear, ct_nonzero)
        num_res = sum(not lin for lin in linear)
        ct_specs = _nonzero(out_specs, ct_nonzero)
        lin_specs = [_cotangent_spec(s) for s in _nonzero(_nonzero(in_specs, linear),
                                                          in_nonzero)]

        def fun(*xs):
            if check_vma:
                outs = core.eval_jaxpr(transposed.jaxpr, transposed.consts, *xs)
                return [_cast_as_spec(ct, mesh, s, axis_names)
                        for ct, s in zip(outs, lin_specs)]
            cts = [_divide(ct, _axes_size(mesh, _unmentioned(mesh, axis_names, s)))
                   for ct, s in zip(xs[num_res:], ct_specs)]
            outs = core.eval_jaxpr(transposed.jaxpr, transposed.consts, *xs[:num_res], *cts)
            return [_psum_over(ct, _unmentioned(mesh, axis_names, s))
                    for ct, s in zip(outs, lin_specs)]

        new = pe.make_closed_jaxpr(fun, transposed.in_avals)
    jaxpr._cache[key] = result = (new, in_nonzero)
    return result


def _divide(x, n):
    return x if n == 1 else ew.div(x, np.asarray(n, get_aval(x).dtype))


def _psum_over(x, names):
    return collectives.psum(x, names) if names else x


def _shard_map_transpose(cts, *args, jaxpr, mesh, in_specs, out_specs, axis_names,
                         check_vma):
    linear = [ad.is_undefined_primal(x) for x in args]
    ct_nonzero = [type(ct) is not Zero for ct in cts]
    new, in_nonzero = _transpose_block_program(jaxpr, linear, ct_nonzero, mesh, in_specs,
                                               out_specs, axis_names, check_vma)
    outs = iter(shard_map_p.bind(
        *[x for x, lin in zip(args, linear) if not lin],
        *[ct for ct in cts if type(ct) is not Zero], jaxpr=new, mesh=mesh,
        in_specs=_nonzero(in_specs, [not lin for lin in linear])
        + tuple(map(_cotangent_spec, _nonzero(out_specs, ct_nonzero))),
        out_specs=tuple(map(_cotangent_spec, _nonzero(_nonzero(in_specs, linear), in_nonzero))),
        axis_names=axis_names, check_vma=check_vma))
    nonzero = iter(in_nonzero)
    return [(next(outs) if next(nonzero) else None) if lin else None for lin in linear]


def _shard_map_batch(axis_data, vals, dims, *, jaxpr, mesh, in_specs, out_specs,
                     axis_names, check_vma):
    spmd = axis_data.spmd_name
    inner, entry = axis_data, None
    if spmd is not None:
        # The batch axis is itself split over the mesh axes spmd_axis_name: each device
        # maps over its part of the batch.
        for spec in in_specs:
            check_spmd_unused(spmd, spec, "shard_map in_specs")
        for spec in out_specs:
            check_spmd_unused(spmd, spec, "shard_map out_specs")
        n = _axes_size(mesh, spmd)
        if axis_data.size % n:
            raise ValueError(f"vmap of shard_map with spmd_axis_name={spmd}: the batch size "
                             f"{axis_data.size} is not divisible by the size {n} of those "
                             "mesh axes")
        inner = batching.AxisData(axis_data.name, axis_data.size // n, spmd)
        entry = spec_entry(spmd)
    new_in = tuple(s if d is None else insert_spec_entry(s, d, entry)
                   for s, d in zip(in_specs, dims))
    blocks = [_block_aval(mesh, s, get_aval(v), check_vma) for s, v in zip(new_in, vals)]
    with _mesh_axes(mesh, axis_names, check_vma):
        new, out_dims = batching.batch_jaxpr(jaxpr, inner, blocks, dims)
    new_out = tuple(s if d is None else insert_spec_entry(s, d, entry)
                    for s, d in zip(out_specs, out_dims))
    outs = shard_map_p.bind(*vals, jaxpr=new, mesh=mesh, in_specs=new_in, out_specs=new_out,
                            axis_names=axis_names, check_vma=check_vma)
    return outs, out_dims


shard_map_p = define(
    "shard_map", multiple_results=True, abstract_eval=_shard_map_aval,
    lowering=_shard_map_lowering, impl=_shard_map_impl, jvp=_shard_map_jvp,
    transpose=_shard_map_transpose, batching=_shard_map_batch,
    partial_eval=_shard_map_partial_eval, sharding_rule=core.TYPED_BY_ABSTRACT_EVAL,
    vma_rule=core.TYPED_BY_ABSTRACT_EVAL)


# ------------------------------------------------------------------------ the API

class _InferSpecs:
    """The default of in_specs, as JAX's `Infer`: specs from the arguments' shardings."""

    def __repr__(self):
        return "Infer"


_INFER = _InferSpecs()


def _resolve_mesh(mesh):
    if mesh is None:
        mesh = jax.sharding.get_abstract_mesh()
        if mesh.empty:
            raise ValueError("shard_map: mesh=None needs a mesh in context, but the context "
                             "mesh is empty. Pass mesh= or use `jax.set_mesh(mesh)` to "
                             "enter into a mesh context")
    if not isinstance(mesh, (Mesh, AbstractMesh)):
        raise TypeError(f"shard_map requires a `jax.sharding.Mesh` (or AbstractMesh) as "
                        f"mesh, got {mesh!r} of type {type(mesh).__name__}")
    return mesh


def _manual_axes(mesh, axis_names):
    names = frozenset(axis_names)
    unknown = names - set(mesh.axis_names)
    if unknown:
        raise ValueError(f"shard_map axis_names {sorted(unknown)} are not axes of the mesh "
                         f"(axes {mesh.axis_names})")
    return names or frozenset(mesh.axis_names)


def _check_spec(spec, aval, where, what, mesh, manual, fname, divisible=True):
    """The errors JAX's shard_map gives for a bad in_specs/out_specs entry."""
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"shard_map {what} argument must be a pytree of "
                        f"`jax.sharding.PartitionSpec` instances, but:\n  {where} is "
                        f"{spec!r} of type {type(spec).__name__}\nCheck the {what} values "
                        "passed to shard_map.")
    for entry in spec.partitions:
        for name in spec_names(entry):
            if name not in manual:
                raise ValueError(f"shard_map {what} argument must refer to an axis marked as "
                                 f"manual ({set(manual)}), but:\n  {what} refers to "
                                 f"{name!r}\nCheck the {what} values passed to shard_map.")
    if len(spec) > aval.ndim:
        raise ValueError(f"shard_map applied to the function {fname!r} was given an {what} "
                         f"entry which is too long to be compatible with the corresponding "
                         f"value: {what} is {spec} which has length {len(spec)}, but "
                         f"{where} has shape {aval.str_short()}, which has rank {aval.ndim} "
                         f"(and {aval.ndim} < {len(spec)})")
    if divisible:
        for i, entry in enumerate(spec.partitions):
            n = _axes_size(mesh, spec_names(entry))
            if aval.shape[i] % n:
                raise ValueError(
                    f"shard_map applied to the function {fname!r} was given argument arrays "
                    f"with axis sizes that are not evenly divisible by the corresponding "
                    f"mesh axis sizes: {where} of shape {aval.str_short()} corresponds to "
                    f"{what} of value {spec}, which maps array axis {i} (of size "
                    f"{aval.shape[i]}) to mesh axes {spec_names(entry)} (of total size {n}), "
                    f"but {n} does not evenly divide {aval.shape[i]}. The mesh has shape "
                    f"{tuple(mesh.shape.values())} with axis names {mesh.axis_names}.")


def shard_map(f=None, /, *, out_specs, in_specs=_INFER, mesh=None, axis_names=frozenset(),
              check_vma=True):
    """Map `f` over blocks of its arguments on a mesh of devices (see jax.shard_map).

    Each argument is split along the mesh axes its PartitionSpec in `in_specs` names;
    `f` runs on one block per device, collectives over those mesh axes communicate
    between devices, and the blocks of the outputs are joined as `out_specs` says.
    `axis_names` makes `f` manual over a subset of the mesh axes (the rest stay with
    the partitioner); `check_vma` is JAX's replication check of the outputs."""
    if f is None:
        return lambda g: shard_map(g, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                   axis_names=axis_names, check_vma=check_vma)
    if not callable(f):
        raise TypeError(f"shard_map requires a callable, got {type(f).__name__}")
    if in_specs is None:
        raise NotImplementedError(
            "impl.shard_map: in_specs=None (static arguments) is not supported")
    infer = in_specs is _INFER or type(in_specs).__name__ == "InferFromArgs"
    fname = _fun_name(f)
    programs = {}

    @functools.wraps(f)
    def mapped(*args, **kwargs):
        if kwargs:
            raise TypeError(f"shard_map of {fname} takes positional arguments only, got "
                            f"keyword arguments {sorted(kwargs)}")
        m = _resolve_mesh(mesh)
        manual = _manual_axes(m, axis_names)
        flat, in_tree = tree_util.tree_flatten(args)
        for x in flat:
            _check_leaf(x, "shard_map arguments")
        avals = [get_aval(x) for x in flat]
        if infer:
            specs = _specs_from_types(m, manual, avals)
        else:
            specs = tuple(broadcast_prefix(in_specs, in_tree, "shard_map in_specs"))
            _check_unreduced_specs(m, manual, specs, "in")
        _check_unreduced_specs(m, manual, jax.tree_util.tree_leaves(out_specs), "out")
        for i, (s, a) in enumerate(zip(specs, avals)):
            _check_spec(s, a, f"args leaf {i}", "in_specs", m, manual, fname)
        _check_specs_match_types(m, manual, specs, avals)
        key = (in_tree, tuple(avals), m, manual)
        hit = programs.get(key)
        if hit is None:
            hit = _stage_blocks(f, fname, in_tree, avals, specs, out_specs, m, manual,
                                bool(check_vma))
            if not any(isinstance(c, Tracer) for c in hit[1]):
                programs[key] = hit
        program, consts, out_tree, flat_out_specs = hit
        outs = shard_map_p.bind(*consts, *flat, jaxpr=program, mesh=m,
                                in_specs=(P(),) * len(consts) + specs,
                                out_specs=flat_out_specs, axis_names=manual,
                                check_vma=bool(check_vma))
        return tree_util.tree_unflatten(out_tree, outs)

    return mapped


def _specs_from_types(mesh, manual, avals):
    """in_specs read from the arguments' types (the default, Infer): each argument is
    split as its type is sharded over the manual axes, which must all be Explicit."""
    types = {n: mesh._name_to_type[n] for n in mesh.axis_names if n in manual}
    if any(t != jax.sharding.AxisType.Explicit for t in types.values()):
        raise TypeError(
            "shard_map in_specs argument must be a pytree of `jax.sharding.PartitionSpec` "
            f"instances, but it was `None` when axis_names={frozenset(manual)} are of type "
            f"{', '.join(map(str, types.values()))}")
    return tuple(P(*[sharding_rules.entry_of(n for n in spec_names(e) if n in manual)
                     for e in sharding_rules.spec(a)], unreduced=a.unreduced, reduced=a.reduced)
                 for a in avals)


def _check_unreduced_specs(mesh, manual, specs, prefix):
    """JAX's conditions on unreduced and reduced axes in specs: a shard_map manual over
    the whole mesh, the axes Explicit."""
    for s in specs:
        if not isinstance(s, P) or not (s.unreduced or s.reduced):
            continue
        if frozenset(mesh.axis_names) != frozenset(manual):
            raise NotImplementedError(
                f"unreduced/reduced can only be passed to {prefix}_specs when shard_map is "
                f"in full manual mode. Got mesh axis names {mesh.axis_names}, manual_axes: "
                f"{frozenset(manual)}, specs: {s}.")
        for kind in ("unreduced", "reduced"):
            if any(mesh._name_to_type[n] != jax.sharding.AxisType.Explicit
                   for n in getattr(s, kind)):
                raise ValueError(f"{kind} in {prefix}_specs {s} can only be used when the mesh "
                                 "passed to shard_map contains axis names all of type "
                                 f"`Explicit`. Got mesh {mesh}")


def _check_specs_match_types(mesh, manual, specs, avals):
    """On a mesh whose axes are all Explicit and all manual, each argument must be
    sharded (unreduced and reduced axes included) as its in_spec says (JAX's
    ValueError): shard_map does not reshard."""
    if not _arguments_typed_by_specs(mesh, manual):
        return
    for spec, aval in zip(specs, avals):
        want = _full_rank_spec(spec, aval.ndim)
        have = aval.sharding.spec
        if have != want:
            raise ValueError(
                f"in_specs passed to shard_map: {want} does not match the specs of the input: "
                f"{have} for arg: {aval}. `in_specs` is an optional argument so you can omit "
                "specifying it and shard_map will infer the in_specs from the arguments. If "
                "you want to reshard your inputs, you can use `jax.reshard` on the arguments "
                "and then pass those args to shard_map.")


def _stage_blocks(fun, name, in_tree, avals, specs, out_specs, m, manual, check_vma):
    """Stage `fun` on one device's blocks: (block program with its constants as leading
    inputs, constants, output tree, one out_spec per output leaf). With check_vma each
    output is cast to vary over the axes its out_spec names, and must not vary over
    others."""
    flat_fun, store = flatten_fun(fun, in_tree, name=f"shard_map of {name}")
    blocks = [_block_aval(m, s, a, check_vma) for s, a in zip(specs, avals)]
    seen = {}

    def typed_fun(*xs):
        outs = flat_fun(*xs)
        flat_out = broadcast_prefix(out_specs, store["out_tree"], "shard_map out_specs")
        seen["types"] = [get_aval(o) for o in outs]
        return [_cast_as_spec(o, m, s, manual) if isinstance(s, P) else o
                for o, s in zip(outs, flat_out)]

    with _mesh_axes(m, manual, check_vma):
        closed = pe.make_closed_jaxpr(typed_fun if check_vma else flat_fun, blocks)
    out_tree = store["out_tree"]
    flat_out = tuple(broadcast_prefix(out_specs, out_tree, "shard_map out_specs"))
    for i, (s, a) in enumerate(zip(flat_out, closed.out_avals)):
        _check_spec(s, a, f"output leaf {i} of {name}", "out_specs", m, manual, name,
                    divisible=False)
    if check_vma:
        _check_out_vma(name, m, out_specs, out_tree, flat_out, seen["types"],
                       closed.out_avals)
    program, consts = pe.convert_constvars_to_invars(closed)
    return program, consts, out_tree, flat_out


def _check_out_vma(name, mesh, out_specs, out_tree, flat_specs, types, cast_types):
    """JAX's errors for outputs varying (or unreduced or reduced) over mesh axes their
    out_specs leave out, and for outputs unreduced or reduced over other axes than
    their out_specs say (once cast as they say)."""
    msgs = []
    for key, spec, aval in zip(prefix_key_paths(out_specs, out_tree), flat_specs, types):
        vma = aval.vma
        need = _spec_vma(mesh, spec)
        mentioned = set(need) | spec.unreduced | spec.reduced
        if set(vma + aval.manual_unreduced + aval.manual_reduced) <= mentioned:
            continue
        unmentioned = [n for n in mesh.axis_names if n not in mentioned]
        if len(unmentioned) > 1:
            diff = ",".join(n for n in unmentioned if n in vma)
            msgs.append(f"* out_specs{key} is {spec} which implies that the corresponding "
                        f"output value is only varying across mesh axes {{{','.join(need)}}} "
                        f"and not {{{diff}}}, but it was inferred to be possibly varying "
                        f"over {{{','.join(vma)}}}")
        else:
            msgs.append(f"* out_specs{key} is {spec} which implies that the corresponding "
                        f"output value is replicated across mesh axis '{unmentioned[0]}', "
                        "but could not infer replication over any axes")
    if not msgs:
        for spec, aval in zip(flat_specs, cast_types):
            for kind in ("unreduced", "reduced"):
                if getattr(spec, kind) != frozenset(getattr(aval, f"manual_{kind}")):
                    raise ValueError(
                        f"out_specs passed to shard_map should be equal to the {kind} "
                        f"present on the out_aval. Got out_specs={spec} and "
                        f"out_aval={aval.str_short()}")
        return
    if len(msgs) == 1:
        msgs = [msgs[0][2:]]
    raise ValueError(
        f"shard_map applied to the function '{name}' was given out_specs which require "
        "replication which can't be statically inferred given the mesh:\n\n"
        f"The mesh given has shape {tuple(mesh.shape.values())} with corresponding axis "
        f"names {mesh.axis_names}.\n\n" + "\n\n".join(msgs) + "\n\n"
        "Check if these output values are meant to be replicated over those mesh axes. If "
        "not, consider revising the corresponding out_specs entries. If so, consider "
        "disabling the check by passing the check_vma=False argument to `jax.shard_map`.")
