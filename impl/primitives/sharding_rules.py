"""Sharding rules shared by many primitives: how results are sharded over Explicit mesh
axes, given the operands' types (`define(..., sharding_rule=...)`).

A rule gets the operands' avals and the primitive's parameters and returns, per result,
a spec: a tuple with one PartitionSpec entry per axis (None: not sharded). Core wraps it
into the result type (over the operands' mesh) and checks it divides the shape. Where
the operands' shardings do not fit the operation a rule raises ShardingTypeError, with
JAX's message. Only primitives given a rule accept explicitly sharded operands.

In a type, an operand without explicit sharding (None) is replicated: over its mesh
(`aval.mesh`), or, without one, a value from outside any mesh, which the rules that
compare their operands' shardings leave out, as JAX's do.
"""
from __future__ import annotations

from jax.sharding import NamedSharding, PartitionSpec, get_abstract_mesh

from impl.core import (ShardingTypeError, common_mesh, cotangent_sharding, current_manual_axes,
                       explicit_sharding_of, get_aval, shape_str, tracked_vma_axes)


def spec(aval):
    """The spec of an aval, one entry per axis (all None when not explicitly sharded)."""
    s = aval.explicit_sharding
    return (None,) * aval.ndim if s is None else tuple(s.spec.partitions)


def mesh_axis_sizes(avals):
    for a in avals:
        if a.explicit_sharding is not None:
            return dict(a.explicit_sharding.mesh.shape)
    return {}


def entry_names(entry):
    return () if entry is None else entry if isinstance(entry, tuple) else (entry,)


def entry_of(names):
    names = tuple(names)
    return None if not names else names[0] if len(names) == 1 else names


def _fmt(specs):
    return ", ".join(str(tuple(s)) for s in specs)


def type_str(aval):
    """A type as JAX's sharding errors write it: float32[8@X,4]."""
    return f"{aval.dtype.name}[{shape_str(aval.shape, aval.explicit_sharding)}]"


def _shardings_str(avals):
    return ", ".join(str(a.sharding) for a in avals)


# ------------------------------------------------------------------ elementwise

def elementwise(name):
    """n-ary elementwise ops: the operands' shardings must agree axis by axis (an
    unsharded axis, or one of size 1, takes the other operands' sharding); scalars
    do not take part."""
    def rule(*avals, **params):
        shaped = [a for a in avals if a.ndim]
        if not shaped:
            return ()
        specs = [spec(a) for a in shaped]
        out = []
        for i, entries in enumerate(zip(*specs)):
            if all(e == entries[0] for e in entries[1:]):
                out.append(entries[0])
                continue
            named = {e for e, a in zip(entries, shaped)
                     if not (e is None and a.shape[i] == 1)}
            named.discard(None)
            if len(named) > 1:
                raise ShardingTypeError(f"{name} got incompatible shardings for "
                                        f"broadcasting: {_fmt(specs)}.")
            out.append(next(iter(named), None))
        return tuple(out)
    return rule


def same_as_operand(aval, *rest, **params):
    """Unary ops that keep the layout (casts, stop_gradient, integer_pow, ...)."""
    return spec(aval)


def select_cases(which, *cases, **params):
    """select_n: the cases on a mesh sharded alike (replicated ones included); a
    non-scalar predicate on a mesh sharded as they are."""
    typed = [spec(c) for c in cases if c.on_mesh]
    if not typed:
        return spec(cases[0])
    out = typed[0]
    if any(s != out for s in typed[1:]):
        raise ShardingTypeError("select cases must have the same shardings, got "
                                f"[{_shardings_str(cases)}].")
    if which.ndim and which.on_mesh and spec(which) != out:
        raise ShardingTypeError(
            "select `which` must be scalar or have the same sharding as cases, got `which` "
            f"sharding {which.sharding} but case sharding {cases[0].sharding}.")
    return out


# ------------------------------------------------------------------ layout

def broadcast_in_dim(x, *, shape, broadcast_dimensions, **params):
    out = [None] * len(shape)
    for entry, d, size in zip(spec(x), broadcast_dimensions, x.shape):
        if size == shape[d]:
            out[d] = entry
    return tuple(out)


def transpose(x, *, permutation):
    s = spec(x)
    return tuple(s[i] for i in permutation)


def squeeze(x, *, dimensions):
    drop = {d % x.ndim for d in dimensions}
    return tuple(e for i, e in enumerate(spec(x)) if i not in drop)


def drop_axes(param):
    """Reductions over the axes named by the parameter `param` (a tuple or one int):
    the reduced axes leave the spec (XLA combines the partial results)."""
    def rule(x, **params):
        axes = params[param]
        axes = {a % x.ndim for a in (axes if isinstance(axes, (tuple, list)) else (axes,))}
        return tuple(e for i, e in enumerate(spec(x)) if i not in axes)
    return rule


def along_unsharded_axis(x, *rest, axis, **params):
    """Cumulative ops: the operand must not be sharded along the scanned axis."""
    s = spec(x)
    if s[axis % x.ndim] is not None:
        raise ShardingTypeError("Input should be unsharded over the axis being reduced. Got "
                                f"input type={type_str(x)} and axis={axis}")
    return s


def alike_along_unsharded_axis(name):
    """Ops of operands of one shape along an axis (the tangent maps and recurrences of
    the cumulative ops): sharded alike, and not along the axis."""
    alike = elementwise(name)

    def rule(*avals, axis, **params):
        out = alike(*avals)
        if out[axis % len(out)] is not None:
            raise ShardingTypeError("Input should be unsharded over the axis being reduced. "
                                    f"Got input type={type_str(avals[0])} and axis={axis}")
        return out
    return rule


def concatenate(*operands, dimension):
    """The operands on a mesh (replicated ones included) sharded alike."""
    typed = [spec(o) for o in operands if o.on_mesh]
    if any(s != typed[0] for s in typed[1:]):
        raise ShardingTypeError("All operands should have the same sharding. Got shardings "
                                f"{_shardings_str(operands)}")
    return typed[0]


def _reshape_error(x, new_sizes):
    return ShardingTypeError(
        "This reshape is not supported. Please specify the sharding of the output via the "
        f"`out_sharding` argument of jax.lax.reshape. Got operand type: {type_str(x)}, "
        f"new sizes: {tuple(new_sizes)}")


def _reshape_groups(old, new):
    """Pair runs of input axes with runs of output axes of the same size: [(in, out)]."""
    groups, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        gi, gj = [i], [j]
        if i >= len(old) or j >= len(new):      # trailing size-1 axes
            groups.append(([i] if i < len(old) else [], [j] if j < len(new) else []))
            i, j = i + (i < len(old)), j + (j < len(new))
            continue
        a, b = old[i], new[j]
        while a != b:
            if a < b:
                i += 1
                gi.append(i)
                a *= old[i]
            else:
                j += 1
                gj.append(j)
                b *= new[j]
        groups.append((gi, gj))
        i, j = i + 1, j + 1
    return groups


def reshape(x, *, new_sizes, dimensions=None, **params):
    """Sizes that split or merge axes keep the sharding when the sharded data stays
    contiguous: merged axes sharded major-first, a split axis's mesh axes going to the
    leading new axes they divide. Anything else must say `out_sharding=`."""
    s, sizes = spec(x), mesh_axis_sizes([x])
    if all(e is None for e in s):
        return (None,) * len(new_sizes)
    if dimensions is not None:
        raise _reshape_error(x, new_sizes)
    out = [None] * len(new_sizes)
    for gi, gj in _reshape_groups(tuple(x.shape), tuple(new_sizes)):
        names = []
        for i in gi:
            if x.shape[i] != 1:   # size-1 axes hold no sharded data
                names.extend(entry_names(s[i]) if s[i] is not None else [None])
        while names and names[-1] is None:
            names.pop()
        if not names:
            continue
        if None in names:
            raise _reshape_error(x, new_sizes)
        if len(gi) == 1 and len(gj) == 1:
            out[gj[0]] = s[gi[0]]
            continue
        axes = iter(names)
        pending = next(axes, None)
        for j in gj:
            size, taken = new_sizes[j], []
            while size > 1 and pending is not None:
                size, rem = divmod(size, sizes[pending])
                if rem:
                    raise _reshape_error(x, new_sizes)
                taken.append(pending)
                pending = next(axes, None)
            out[j] = entry_of(taken)
        if pending is not None:
            raise _reshape_error(x, new_sizes)
    return tuple(out)


# ------------------------------------------------------------------ contraction

def dot_general(lhs, rhs, *, dimension_numbers, out_sharding=None, **params):
    """Batch axes sharded alike; contracted axes sharded alike and not both sharded
    (the result's sharding would be ambiguous) unless `out_sharding` says it; the
    result is [batch, lhs free, rhs free], each keeping its operand's sharding."""
    if out_sharding is not None:
        return out_sharding
    (lc, rc), (lb, rb) = dimension_numbers
    ls, rs = spec(lhs), spec(rhs)
    lbs, rbs = tuple(ls[i] for i in lb), tuple(rs[i] for i in rb)
    lcs, rcs = tuple(ls[i] for i in lc), tuple(rs[i] for i in rc)
    _check_match(lbs, rbs, "dot_general requires lhs batch dimensions and rhs batch "
                 f"dimensions to have the consistent sharding, got {lbs} and {rbs}.")
    _check_match(lcs, rcs, "dot_general requires contracting dimensions to have "
                 f"consistent sharding, got {lcs} and {rcs}.")
    for a, b in zip(lcs, rcs):
        if a is not None and b is not None:
            raise ShardingTypeError(
                "Contracting dimensions are sharded and it is ambiguous how the output "
                "should be sharded. Please specify the output sharding via the "
                f"`out_sharding` parameter. Got lhs_contracting_spec={lcs} and "
                f"rhs_contracting_spec={rcs}")
    lfree = tuple(e for i, e in enumerate(ls) if i not in set(lc) | set(lb))
    rfree = tuple(e for i, e in enumerate(rs) if i not in set(rc) | set(rb))
    return lbs + lfree + rfree


def cotangent_sharding_in_layout(x_aval, layout, *others):
    """With explicit shardings, a cotangent takes its primal's sharding (the contraction
    that computes it may contract sharded axes): the primal's spec in the contraction's
    output layout (`layout`: the primal's axis at each output axis). None when no
    operand is explicitly sharded."""
    if x_aval.explicit_sharding is None and all(
            get_aval(o).explicit_sharding is None for o in others):
        return None
    mesh = common_mesh([x_aval] + [get_aval(o) for o in others])
    x_spec = spec(x_aval)
    entries = tuple(x_spec[i] for i in layout)
    swapped = cotangent_sharding(x_aval)   # unreduced and reduced axes swapped
    return NamedSharding(mesh, PartitionSpec(*entries) if swapped is None
                         else swapped.spec.update(partitions=entries))


def _check_match(a, b, msg):
    for x, y in zip(a, b):
        if x is not None and y is not None and x != y:
            raise ShardingTypeError(msg)



# ------------------------------------------------------------------ linear algebra

def batched_matrices(name, operand_ranks, result_ranks):
    """Decompositions and solves acting on the trailing `operand_ranks[i]` axes of operand
    i and mapping over the leading (batch) ones, as JAX types them: the core axes must be
    unsharded and every operand's batch axes sharded alike; each result keeps the batch
    axes' sharding and has `result_ranks` unsharded core axes (an int for one result, or
    `result_ranks(**params)`, a tuple with one rank per result)."""
    def rule(*avals, **params):
        batches = []
        for i, (a, rank) in enumerate(zip(avals, operand_ranks)):
            s = spec(a)
            if any(e is not None for e in s[a.ndim - rank:]):
                raise ShardingTypeError(f"Input {i} to {name} must be unsharded on non-batch "
                                        f"dimensions, but got {a.sharding.spec}.")
            batches.append(s[:a.ndim - rank])
        if any(b != batches[0] for b in batches[1:]):
            raise ShardingTypeError(f"All inputs to {name} must have the same batch sharding, "
                                    f"but got {batches}.")
        if isinstance(result_ranks, int):
            return batches[0] + (None,) * result_ranks
        return [batches[0] + (None,) * r for r in result_ranks(**params)]
    return rule


def triangular_solve(a, b, *, left_side, transpose_a, **params):
    """op(a) x = b (left side) or x op(a) = b: batch axes sharded alike, the axes the
    solve contracts unsharded; the result's matrix axes are sharded as op(a)'s free axis
    and b's, as in JAX."""
    a_batch, a_spec = spec(a)[:-2], spec(a)[-2:]
    b_batch, b_spec = spec(b)[:-2], spec(b)[-2:]
    if a_batch != b_batch:
        raise ShardingTypeError("All inputs to triangular_solve must have the same batch "
                                f"sharding, but got {a_batch} and {b_batch}.")
    for operand, entry, aval in (("a", a_spec[left_side ^ transpose_a], a),
                                 ("b", b_spec[not left_side], b)):
        if entry is not None:
            raise ShardingTypeError(
                f"triangular solve input `{operand}` must be unsharded on the contracting "
                f"axis, but got {aval.sharding.spec} with left_side={left_side} and "
                f"transpose_a={transpose_a}.")
    if left_side:
        return a_batch + (a_spec[transpose_a], b_spec[1])
    return a_batch + (b_spec[0], a_spec[not transpose_a])


# ------------------------------------------------------------------ out_sharding=

def not_a_named_sharding(what, out_sharding):
    """JAX's TypeError for an `out_sharding=` that is neither a NamedSharding nor a
    PartitionSpec (`what`: how JAX names the parameter, "`out_sharding` argument of f")."""
    return TypeError(f"{what} only supports instances of `NamedSharding` or `PartitionSpec`. "
                     f"Got {out_sharding} of type: {type(out_sharding)}")


def canonical_out_sharding(out_sharding, ndim, what="out_sharding"):
    """A user's `out_sharding=` (a PartitionSpec read against the mesh in context, or a
    NamedSharding) as an equation parameter: a NamedSharding over the user's mesh (the
    abstract one in context for a PartitionSpec) with one entry per result axis, naming
    only Explicit axes. None stays None."""
    if out_sharding is None:
        return None
    if isinstance(out_sharding, PartitionSpec):
        mesh = get_abstract_mesh()
        if mesh.empty:
            raise ValueError("Using PartitionSpec when you are not under a mesh context is "
                             "not allowed. Please pass a NamedSharding instance or enter into "
                             f"a mesh context via `jax.set_mesh`. Got {out_sharding}")
        out_sharding = NamedSharding(mesh, out_sharding)
    if not isinstance(out_sharding, NamedSharding):
        raise not_a_named_sharding(what, out_sharding)
    given = out_sharding.spec
    if len(given.partitions) > ndim:
        raise ValueError(f"{what} {given} has more entries than the result has "
                         f"axes ({ndim})")
    mesh = out_sharding.mesh
    explicit = set(mesh.explicit_axes) if not mesh.empty else set()
    for name in [n for e in given.partitions for n in entry_names(e)
                 if n is not PartitionSpec.UNCONSTRAINED] + sorted(given.unreduced | given.reduced):
        if name not in explicit:   # an Auto or Manual axis: the partitioner's, not a type
            raise ValueError(
                f"PartitionSpec passed to {what} cannot contain axis names that are of type "
                f"Auto or Manual. Got PartitionSpec: {given} with axis name: {name} of type: "
                f"{mesh._name_to_type.get(name)}")
    typed = explicit_sharding_of(out_sharding, ndim)
    entries = PartitionSpec(*[None] * ndim) if typed is None else typed.spec
    # A concrete mesh stays in the parameter (the type holds its abstract mesh): eager
    # evaluation outside any mesh context needs the devices to place the result on.
    return NamedSharding(out_sharding.mesh, entries)


# ------------------------------------------------------------------ slicing

def _keep_if_divisible(name, x, out_shape):
    """Slices and pads keep the operand's sharding; a sharded axis whose size changes
    must stay divisible by its mesh axes."""
    sizes, s = mesh_axis_sizes([x]), spec(x)
    for old, new, entry in zip(x.shape, out_shape, s):
        if old != new and entry is not None:
            parts = 1
            for n in entry_names(entry):
                parts *= sizes[n]
            if new % parts:
                raise ShardingTypeError(
                    f"{name} on sharded dims where out dim ({new}) is not divisible by mesh "
                    f"axes ({parts}) with spec ({entry}) is not implemented. Got input "
                    f"type={x.str_short()} and output shape={tuple(out_shape)}")
    return s


def slice_rule(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    out = [max(0, -(-(hi - lo) // st)) for lo, hi, st in zip(start_indices, limit_indices,
                                                              strides)]
    return _keep_if_divisible("slicing", x, out)


def pad_rule(x, padding_value, *, padding_config):
    out = [lo + hi + d + max(0, d - 1) * interior
           for d, (lo, hi, interior) in zip(x.shape, padding_config)]
    return _keep_if_divisible("padding", x, out)


def windowed(out_shape):
    """Windowed reductions (`out_shape(x, **params)` their result's shape): the
    operand's sharding, kept while the result's axes stay divisible."""
    def rule(x, **params):
        return _keep_if_divisible("reduce_window", x, out_shape(x, **params))
    return rule


def gathered_window(out_shape):
    """select_and_gather_add (a windowed max's tangent): the tangent sharded as the
    operand, the result as a windowed reduction of the operand."""
    window_rule = windowed(out_shape)

    def rule(t, x, **params):
        if t.explicit_sharding != x.explicit_sharding:
            raise ShardingTypeError(
                "select_and_gather_add tangents and operand shardings must match, got "
                f"{t.sharding} and {x.sharding}.")
        return window_rule(x, **params)
    return rule


def scattered_window(source, x, **params):
    """select_and_scatter_add: the result has the operand's shape and sharding."""
    return spec(x)


def convolution(out_shape):
    """conv_general_dilated: `out_sharding=` when given; otherwise the kernel must be
    replicated and the input's feature axis unsharded, and the result takes the input's
    sharding (kept while divisible), as in JAX."""
    def rule(lhs, rhs, *, out_sharding=None, **params):
        if out_sharding is not None:
            return out_sharding
        if (rhs.explicit_sharding is None
                and spec(lhs)[params["dimension_numbers"].lhs_spec[1]] is None):
            return _keep_if_divisible("conv_general_dilated", lhs,
                                      out_shape(lhs, rhs, **params))
        raise ShardingTypeError("Please specify the output sharding via `out_sharding` "
                                "parameter of `conv_general_dilated`")
    return rule


def dynamic_slice(x, *indices, slice_sizes):
    return _keep_if_divisible("dynamic_slice", x, slice_sizes)


def check_update_typed_as_operand(x, update):
    """dynamic_update_slice takes an update typed as its operand, its mesh included (one
    replicated on a mesh differs from one off any mesh), where a mesh with Explicit axes
    is in context or in the types, as JAX's rule; run by its abstract evaluation, since
    values no Explicit axis shards do not reach the sharding rule."""
    if x.sharding == update.sharding:
        return
    meshes = (get_abstract_mesh(), x.sharding.mesh, update.sharding.mesh)
    if any(not m.empty and m._any_axis_explicit for m in meshes):
        raise ShardingTypeError(
            "dynamic_update_slice operand sharding must be equal to update sharding, got "
            f"operand sharding {x.str_short()} and update sharding {update.str_short()}.")


def dynamic_update_slice(x, update, *indices):
    return spec(x)   # the update's type is the operand's (check_update_typed_as_operand)


def _gather_error(operand, indices):
    return ShardingTypeError(
        "Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather "
        "indexing as out sharding could not be resolved unambiguously (or would require "
        f"collectives on inputs). Got operand={operand!r}, indices={indices!r}")


def gather(operand, indices, *, dimension_numbers, slice_sizes, **params):
    """A gather is sharded where no device needs another's data: the operand's axes it
    slices into are unsharded or taken whole, the indices' query axes and index vector
    are unsharded, and batch axes agree between operand and indices. Window axes keep
    the operand's sharding, query and batch axes the indices'."""
    dn = dimension_numbers
    ops, ids = spec(operand), list(spec(indices))
    batch_pairs = list(zip(dn.operand_batching_dims, dn.start_indices_batching_dims))
    if (any(operand.shape[d] != slice_sizes[d] and ops[d] is not None
            for d in dn.start_index_map)
            or any(ops[o] is not None and ids[i] is not None and ops[o] != ids[i]
                   for o, i in batch_pairs)
            or any(e is not None for i, e in enumerate(ids)
                   if i not in dn.start_indices_batching_dims)):
        raise _gather_error(operand, indices)
    for o, i in batch_pairs:
        ids[i] = ids[i] if ids[i] is not None else ops[o]
    windows = iter([ops[d] for d in range(operand.ndim) if d not in dn.collapsed_slice_dims
                    and d not in dn.operand_batching_dims])
    queries = iter(ids)
    return tuple(next(windows) if k in dn.offset_dims else next(queries)
                 for k in range(len(dn.offset_dims) + indices.ndim - 1))


def take_along_axis(x, idx, *, axis):
    """A gather whose other axes are batch axes: those sharded alike in operand and
    indices (an unsharded one takes the other's sharding), the axis gathered along
    unsharded in both."""
    xs, ids = spec(x), spec(idx)
    if (xs[axis] is not None or ids[axis] is not None
            or any(a is not None and b is not None and a != b for a, b in zip(xs, ids))):
        raise _gather_error(x, idx)
    return tuple(b if b is not None else a for a, b in zip(xs, ids))


def scatter_add_along_axis(updates, idx, *, axis, shape):
    """take_along_axis transposed: the result is sharded as the updates and indices,
    under the same conditions."""
    return take_along_axis(updates, idx, axis=axis)


def scatter(operand, indices, updates, *, dimension_numbers, **params):
    """A scatter (a gather in reverse) keeps the operand's sharding where each device
    updates only its own part: windows taken whole are sharded alike in operand and
    updates, partial windows and the inserted axes unsharded, the query axes of indices
    and updates and the index vector unsharded, batch axes agreeing. Unsharded operand
    axes take the updates' (or indices') sharding."""
    dn = dimension_numbers
    ops, ids, ups = spec(operand), spec(indices), spec(updates)
    vector = indices.ndim - 1
    update_queries = [d for d in range(updates.ndim) if d not in dn.update_window_dims]
    update_batch = [update_queries[i] for i in dn.scatter_indices_batching_dims]
    operand_windows = [d for d in range(operand.ndim) if d not in dn.inserted_window_dims
                       and d not in dn.operand_batching_dims]
    batches = list(zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims,
                       update_batch))
    windows = list(zip(dn.update_window_dims, operand_windows))
    resolvable = all(len({e for e in (ops[o], ids[i], ups[u]) if e is not None}) <= 1
                     for o, i, u in batches)
    windows_fit = all(
        (updates.shape[u] == operand.shape[o] and ups[u] == ops[o])
        or (ups[u] is None and ops[o] is None) for u, o in windows)
    if not (resolvable and windows_fit
            and all(ops[d] is None for d in dn.inserted_window_dims)
            and all(ups[d] is None for d in range(updates.ndim)
                    if d not in update_batch and d not in dn.update_window_dims)
            and all(ids[d] is None for d in range(vector)
                    if d not in dn.scatter_indices_batching_dims)
            and ids[vector] is None):
        raise ShardingTypeError(
            "Use `.at[...].set/add/mul/...(out_sharding=)` to provide output PartitionSpec "
            "for the scatter update as out sharding could not be resolved unambiguously (or "
            f"would require collectives on inputs). Got operand={operand!r}, "
            f"indices={indices!r}, updates={updates!r}")
    out = list(ops)
    for o, i, u in batches:
        out[o] = out[o] if out[o] is not None else (ids[i] if ids[i] is not None else ups[u])
    for u, o in windows:
        out[o] = out[o] if out[o] is not None else ups[u]
    return tuple(out)


def sort(*operands, **params):
    """Every result sharded as the operands on a mesh, which must agree."""
    specs = {spec(o) for o in operands if o.on_mesh}
    if len(specs) > 1:
        raise ShardingTypeError("sort operands must have the same shardings, got "
                                f"{_shardings_str(operands)}")
    return [specs.pop()] * len(operands)


def top_k(x, *, k, axis, **params):
    """Values and indices: the operand's sharding, the chosen axis not sharded."""
    out = list(spec(x))
    out[axis % x.ndim] = None
    return [tuple(out)] * 2


# ------------------------------------------------------------ unreduced / reduced
# A value unreduced over mesh axes is, on each device, a part of a sum over those axes
# still to be added up (what a contraction over an axis sharded on them leaves when its
# `out_sharding` says `unreduced=`); one reduced over them is replicated there, and its
# cotangent is unreduced. The rules (`define(..., unreduced_rule=...)`) return the
# results' (unreduced, reduced) axes, or refuse where JAX's do, with JAX's words.

NONE = frozenset()


def keeps_unreduced(x, *rest, **params):
    """Layout changes (transpose, squeeze, slice, pad), casts and sums: the operand's."""
    return x.unreduced, x.reduced


def unary_unreduced(name):
    """Elementwise operations of one operand keep its reduced axes; an unreduced
    operand is refused (f(a + b) is not f(a) + f(b))."""
    def rule(x, *rest, **params):
        if x.unreduced:
            raise NotImplementedError(f"unreduced rule for {name} is not implemented. The "
                                      f"operand {x.str_short()} must be reduced first "
                                      "(reshard it, or psum it inside shard_map).")
        return NONE, x.reduced
    return rule


def _replicated_axes(aval, axis_names):
    return frozenset(axis_names) - (
        frozenset(n for e in spec(aval) for n in entry_names(e))
        | aval.unreduced | aval.reduced | frozenset(aval.vma))


def common_reduced(*avals):
    """The axes the operands of an elementwise operation are reduced over, which must
    be the same for all of them: the others may be neither replicated nor sharded
    (nor varying) there. Over Explicit axes a scalar replicated there takes part as
    reduced (JAX reshards it); inside a shard_map body it does not."""
    reduced = {a.reduced for a in avals if a.reduced}
    if len(reduced) > 1:
        raise ShardingTypeError("All inputs should be reduced across the same mesh axes. Got "
                                f"specs: {reduced}")
    out = reduced.pop() if reduced else NONE
    if not out:
        return out
    manual = out <= frozenset(tracked_vma_axes())
    names = current_manual_axes() if manual else common_mesh(avals).axis_names
    for a in avals:
        if a.reduced == out:
            continue
        if (not manual and a.ndim == 0 and not a.unreduced
                and _replicated_axes(a, names) >= out):
            continue
        if _replicated_axes(a, names) & out:
            raise ShardingTypeError(
                "Inputs cannot be replicated on the same axes that another input is reduced "
                f"on. Got input type: {a} and reduced spec: {out}")
        if (frozenset(n for e in spec(a) for n in entry_names(e)) | frozenset(a.vma)) & out:
            raise ShardingTypeError(
                "Inputs cannot be sharded/varying on the same axes that another input is "
                "reduced on. Reshard the input which is reduced to be sharded on the mesh "
                "axes it is reduced on via `jax.sharding.reshard(inp, jax.P(...))`. Got input "
                f"type: {a} and reduced spec: {out}")
    return out


def nary_unreduced(name):
    """Elementwise operations of several operands: reduced alike; unreduced operands
    refused (but by `add` and `mul`, which have their own rules)."""
    def rule(*avals, **params):
        reduced = common_reduced(*avals)
        if any(a.unreduced for a in avals):
            raise NotImplementedError(
                f"unreduced rule for {name} is not implemented. Got "
                f"{', '.join(a.str_short() for a in avals)}: reduce the unreduced operands "
                "first (reshard them, or psum them inside shard_map).")
        return NONE, reduced
    return rule


def add_unreduced(x, y, **params):
    """A sum of two values unreduced over the same axes is unreduced there; one
    unreduced operand alone would need communication."""
    reduced = common_reduced(x, y)
    if x.unreduced and y.unreduced:
        if x.unreduced != y.unreduced:
            raise ShardingTypeError("lhs and rhs to `add` must be unreduced along the same "
                                    f"mesh axes. Got lhs={set(x.unreduced)}, "
                                    f"rhs={set(y.unreduced)}")
        return x.unreduced, reduced
    if x.unreduced or y.unreduced:
        one, other = ("lhs", "rhs") if x.unreduced else ("rhs", "lhs")
        raise ShardingTypeError(
            f"{one} is unreduced while {other} is not. `add` operation does not allow this "
            "because there will be implicit communication. Please reduce "
            f"{one} via `reshard` before calling `add`.")
    return NONE, reduced


def mul_unreduced(x, y, **params):
    """mul is bilinear: an unreduced operand times one reduced over the same axes is
    unreduced there; two unreduced operands are refused."""
    reduced = common_reduced(x, y)
    if x.unreduced and y.unreduced:
        raise ShardingTypeError("lhs and rhs to `mul` cannot be unreduced since mul is "
                                f"bilinear. Got lhs={set(x.unreduced)}, "
                                f"rhs={set(y.unreduced)}")
    if x.unreduced and x.unreduced != y.reduced:
        raise ShardingTypeError("RHS should be reduced along the same axes LHS is unreduced "
                                f"on. Got lhs={x} and rhs={y}")
    if y.unreduced and y.unreduced != x.reduced:
        raise ShardingTypeError("LHS should be reduced along the same axes RHS is unreduced "
                                f"on. Got lhs={x} and rhs={y}")
    unreduced = x.unreduced | y.unreduced
    return unreduced, NONE if unreduced else reduced


def same_unreduced(what):
    """Operations combining several operands as they are (concatenate, select's cases):
    unreduced alike and reduced alike."""
    def rule(*avals, **params):
        out = []
        for kind in ("unreduced", "reduced"):
            found = {getattr(a, kind) for a in avals if getattr(a, kind)}
            if len(found) > 1:
                raise ShardingTypeError(f"All {what} should be {kind} along the same mesh "
                                        f"axes. Got {kind} specs: {found}")
            out.append(found.pop() if found else NONE)
        return tuple(out)
    return rule


def dynamic_update_slice_unreduced(x, update, *indices):
    """The operand and the update unreduced and reduced alike; the result as they are."""
    for kind in ("unreduced", "reduced"):
        if getattr(x, kind) != getattr(update, kind):
            raise ShardingTypeError(
                f"dynamic_update_slice operand and update must be {kind} along the same axes. "
                f"Got operand sharding {x.str_short()} and update sharding "
                f"{update.str_short()}.")
    return x.unreduced, x.reduced


def _refuse_explicit(name, avals):
    """Operations that keep unreduced or reduced manual axes inside shard_map but whose
    JAX 0.10.2 counterparts fail on Explicit ones, which impl's lowering goes through."""
    for a in avals:
        if (a.unreduced - frozenset(a.manual_unreduced)
                or a.reduced - frozenset(a.manual_reduced)):
            raise NotImplementedError(
                f"{name} of {a.str_short()}: unreduced and reduced Explicit mesh axes are not "
                "supported (JAX 0.10.2 fails on them); reshard the operand first.")


def _reordered_reduced(name, avals):
    """Sorts and top_k move elements around: inside shard_map reduced operands give
    reduced results; an unreduced operand is refused (the sum of the sorted parts is
    not the sorted sum, where JAX 0.10.2 keeps the axes)."""
    _refuse_explicit(name, avals)
    for a in avals:
        if a.unreduced:
            raise NotImplementedError(
                f"unreduced rule for {name} is not implemented: the operand {a.str_short()} "
                "must be reduced first (psum it).")
    return same_unreduced("operands")(*avals)[1]


def sort_unreduced(*avals, **params):
    reduced = _reordered_reduced("sort", avals)
    return [NONE] * len(avals), [reduced] * len(avals)


def top_k_unreduced(x, **params):
    reduced = _reordered_reduced("top_k", (x,))
    return [NONE] * 2, [reduced] * 2


def constraint_unreduced(x, **params):
    """with_sharding_constraint keeps unreduced and reduced manual axes (as JAX's, which
    fails on Explicit ones)."""
    _refuse_explicit("with_sharding_constraint", (x,))
    return x.unreduced, x.reduced


def fft_unreduced(x, **params):
    """An FFT keeps reduced Explicit axes, as JAX's; it refuses unreduced ones (JAX
    0.10.2 types them, then fails to lower the program) and, as JAX's, any unreduced
    or reduced manual axes."""
    if x.manual_unreduced or x.manual_reduced:
        raise NotImplementedError(f"fft of {x.str_short()}: unreduced or reduced manual mesh "
                                  "axes are not supported, as in JAX")
    if x.unreduced:
        raise NotImplementedError(f"unreduced rule for fft is not implemented: the operand "
                                  f"{x.str_short()} must be reduced first (reshard it).")
    return NONE, x.reduced


def host_call_unreduced(*avals, **params):
    """Host callbacks (no results) take reduced values and, inside shard_map, unreduced
    ones (each device shows its part); over Explicit axes an unreduced value must be
    reduced first (JAX 0.10.2's compiler aborts the process on it)."""
    for a in avals:
        if a.unreduced - frozenset(a.manual_unreduced):
            raise NotImplementedError(
                f"a host callback cannot take {a.str_short()}, unreduced over Explicit mesh "
                "axes: reshard it first.")
    return [], []


def no_results_unreduced(*avals, **params):
    return [], []


def created_unreduced(*, out_sharding, **params):
    """Values made from nothing (iota): the axes their `out_sharding` names."""
    return out_sharding.spec.unreduced, out_sharding.spec.reduced


def select_unreduced(which, *cases, **params):
    """select_n: its cases' unreduced and reduced axes (alike)."""
    return same_unreduced("cases")(*cases)


def dot_general_unreduced(lhs, rhs, *, dimension_numbers, out_sharding=None, **params):
    """A contraction's operands may not be unreduced; its result is unreduced over
    exactly the mesh axes its contracted axes are sharded on when `out_sharding` says
    `unreduced=` (the partial sums stay on their devices: no all-reduce)."""
    if lhs.unreduced or rhs.unreduced:
        raise ShardingTypeError("lhs or rhs passed to dot_general cannot be unreduced. Got "
                                f"lhs={lhs!r} and rhs={rhs!r}")
    wanted = NONE if out_sharding is None else out_sharding.spec.unreduced
    if not wanted:
        return NONE, NONE
    (lc, rc), _ = dimension_numbers
    lcs, rcs = tuple(spec(lhs)[i] for i in lc), tuple(spec(rhs)[i] for i in rc)
    if lcs != rcs:
        raise ShardingTypeError(
            "lhs and rhs contracting dims should be sharded identically when out_sharding "
            "provided to dot_general mentions unreduced_axes. Got "
            f"lhs_contracting_spec={lcs}, rhs_contracting_spec={rcs}")
    contracted = frozenset(n for e in lcs for n in entry_names(e))
    if wanted != contracted:
        raise ShardingTypeError("out_sharding's unreduced axes should be equal to the "
                                f"contracting specs. Got unreduced axes={wanted} and "
                                f"contracting spec={lcs}")
    return wanted, NONE


def given_or_kept(x, *rest, out_sharding=None, **params):
    """Operations whose `out_sharding` may name the result's unreduced or reduced axes
    (convert_element_type, broadcast_in_dim): those, else the operand's."""
    given = None if out_sharding is None else out_sharding.spec
    return ((given.unreduced if given is not None and given.unreduced else x.unreduced),
            (given.reduced if given is not None and given.reduced else x.reduced))


def reshape_unreduced(x, *, out_sharding=None, **params):
    """A reshape keeps its operand's unreduced and reduced axes; an `out_sharding`
    must say the same ones."""
    given = None if out_sharding is None else out_sharding.spec
    for kind in ("unreduced", "reduced"):
        have = getattr(x, kind)
        asked = NONE if given is None else getattr(given, kind)
        if have and given is not None and asked != have:
            raise ShardingTypeError(f"out_sharding passed to reshape must be {kind} over the "
                                    f"same mesh axes as the input. Got input={x.str_short()} "
                                    f"and out_sharding={out_sharding}")
        if asked and not have:
            raise ValueError(f"out_sharding passed to reshape cannot introduce {kind} axes. "
                             f"Got {out_sharding}")
    return x.unreduced, x.reduced


def resharded(x, *, out_sharding, **params):
    """reshard: what its `out_sharding` says (reducing unreduced axes it leaves out)."""
    return out_sharding.spec.unreduced, out_sharding.spec.reduced
