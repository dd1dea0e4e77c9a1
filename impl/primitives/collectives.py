"""Collectives over named axes: psum, pmean, pmax, pmin, axis_index, all_gather,
psum_scatter, all_to_all, ppermute, pbroadcast (and pshuffle, pswapaxes, axis_size), plus
the cotangent reduction behind `grad(..., reduce_axes=...)`, and `pcast`, the cast of a
value's type to vary over manual mesh axes.

`vmap(f, axis_name='i')` names its batch axis; inside `f` each example sees one "device"
of that axis, and `psum(x, 'i')` sums `x` over all of them. A collective names one axis
or a tuple of axes; over a tuple the devices are numbered row-major in the tuple's order
(`axis_index(('i', 'j')) == axis_index('i') * axis_size('j') + axis_index('j')`).

Under vmap each BatchTrace acts on the collectives naming its own axis: it does its
part with ordinary array operations on the batch axis and binds the collective again
over the remaining names, which the enclosing traces (outer vmaps, staging, or JAX's own
`shard_map`/`vmap` through the lowering) handle. A collective that names no axis of its
trace is bound again unchanged, its batch axis moved out of the way.

Each collective is a `collective=True` primitive lowered to the `jax.lax` collective of
the same name, which is what runs when impl's program is lowered inside a JAX
`shard_map`. The abstract evaluation checks that every name is bound (NameError
otherwise, naming the axis and the function called).

Inside a shard_map body with check_vma=True, types say which manual mesh axes a value
varies over (`ShapedArray.vma`), as JAX's do. `pvary` casts a value to vary over more
axes (a no-op on values; its transpose sums the cotangent over them), and the
collectives' `vma_rule`s say how they change the axes: `psum_invariant` (psum there),
`pmax` and `pmin` make their result invariant over the axes they reduce; all_gather,
psum_scatter, all_to_all, ppermute and pbroadcast need an operand varying over their
axes and keep its type; `axis_index` varies over its axis. As in JAX, the API functions
first cast an invariant operand to vary over the collective's axes. Over vmap axes (no
types to track) psum is `psum`, whose transpose is itself. Values may also be unreduced
or reduced over manual axes (the section "unreduced and reduced manual axes" below):
`pcast` casts to and from those states, psum and psum_scatter of an unreduced value add
its parts up, and all_gather gathers to an invarying or a reduced value when asked.
"""
from __future__ import annotations

import math

import jax
import numpy as np

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import ad, batching
from impl.interpreters.ad import Zero, is_undefined_primal
from impl.primitives import elementwise as ew
from impl.primitives import indexing as ix
from impl.primitives import reductions as red
from impl.primitives import shape as sh
from impl.primitives._define import define


# --------------------------------------------------------------------- helpers

def _axes(axis_name, api_name, axis_index_groups=None):
    """`axis_name` as a tuple of names, each checked to be bound."""
    if axis_index_groups is not None:
        raise NotImplementedError(f"{api_name}: axis_index_groups is not supported by impl "
                                  "(JAX does not support it under vmap either)")
    axes = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{api_name}: axis names must be distinct, got {axis_name!r}")
    for name in axes:
        batching.axis_size(name, api_name)
    return axes


def _canonical_axis(axis, ndim):
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def _size(axes, api_name):
    return math.prod(batching.axis_size(n, api_name) for n in axes)


def _split(axes, own):
    """The names before and after `own` in `axes`."""
    k = axes.index(own)
    return axes[:k], axes[k + 1:]


def _rearrange(x, src, dst, sizes):
    """Regroup the axes of `x`. `src` lists, for each axis of `x`, the labels whose
    row-major product it is; `dst` does the same for the result, using every label once.
    `sizes` maps labels to sizes."""
    flat_src = [label for group in src for label in group]
    flat_dst = [label for group in dst for label in group]
    x = sh.reshape(x, tuple(sizes[label] for label in flat_src))
    x = sh.transpose(x, tuple(flat_src.index(label) for label in flat_dst))
    return sh.reshape(x, tuple(math.prod(sizes[label] for label in group) for group in dst))


def _labels(shape):
    """One label per axis of an array of `shape`, and their sizes."""
    groups = [(f"e{i}",) for i in range(len(shape))]
    return groups, {f"e{i}": int(d) for i, d in enumerate(shape)}


def _outward(prim, x, d, params, positional=()):
    """Bind `prim` again for the enclosing traces (the axes it names are theirs). Our
    batch axis goes first; the `positional` parameters (axis numbers) move past it."""
    if d is None:
        return prim.bind(x, **params), None
    if not positional:
        return prim.bind(x, **params), d
    shifted = {k: v + 1 if k in positional else v for k, v in params.items()}
    return prim.bind(batching.moveaxis(x, d, 0), **shifted), 0


def _same_type(api_name):
    def rule(x, *, axes, **params):
        for name in axes:
            batching.axis_size(name, api_name)
        return x
    return rule


# ------------------------------------------------------ varying manual axes (vma)

def _tracked(axes):
    """The names among `axes` whose variation the types track here: the manual mesh
    axes of a shard_map body with check_vma=True."""
    tracked = core.tracked_vma_axes()
    return tuple(a for a in axes if a in tracked)


def _axis_state(aval, axis):
    if axis in aval.vma:
        return "varying"
    if axis in aval.manual_unreduced:
        return "unreduced"
    if axis in aval.manual_reduced:
        return "reduced"
    return "invarying"


def _manual_state(aval, axes, api_name):
    """'varying', 'unreduced', 'reduced' or 'invarying': the state of `aval` over every
    manual axis of `axes` (JAX refuses axes in different states)."""
    states = {_axis_state(aval, a) for a in axes}
    if len(states) > 1:
        raise ValueError(
            f"{api_name} can only accept axis_name which corresponds to one of varying, "
            "unreduced, reduced or invarying state of the input. Got input type: "
            f"{aval}, axes: {axes} and input state: {states}")
    return states.pop()


def _pvary(x, axes):
    """`x` cast to vary over the manual axes `axes` too (JAX's `pvary`). Inside a
    shard_map with check_vma=False, over its manual axes, there is nothing to cast."""
    if not axes:
        return x
    if not core.tracked_vma_axes() and all(a in core.current_manual_axes() for a in axes):
        return x
    return pvary_p.bind(x, axes=core.ordered_vma(axes))


def _vary_over(x, axes):
    """`x` cast to vary over the tracked axes of `axes` it does not vary over yet: what
    JAX does to the operand of a collective."""
    missing = tuple(a for a in _tracked(axes) if a not in get_aval(x).vma)
    return pvary_p.bind(x, axes=core.ordered_vma(missing)) if missing else x


def _check_manual_axes(axes, api_name):
    """Each of `axes` is bound (a manual mesh axis: the casts have no meaning over vmap
    axes), else JAX's NameError."""
    for name in axes:
        try:
            batching.axis_size(name, api_name)
        except NameError:
            raise NameError(f"Found an unbound axis name: {name}. To fix this, please call "
                            f"{api_name} under `jax.shard_map`.") from None


def _pvary_aval(x, *, axes):
    _check_manual_axes(axes, "pvary")
    return x


def _pvary_vma(x, *, axes):
    # Binds cast only over axes `x` does not vary over (pcast refuses the others, and
    # the batching rule drops them); vmap type-checks one example before that.
    return x.vma + tuple(a for a in axes if a not in x.vma)


def _not_unreduced(api_name):
    """The unreduced rule of a collective (or cast) over `axes`: its operand may be
    neither unreduced nor reduced over them (JAX's ValueError), and its other
    unreduced and reduced axes stay, as in JAX."""
    def rule(x, *, axes, **params):
        for kind in ("unreduced", "reduced"):
            if getattr(x, f"manual_{kind}") and set(getattr(x, f"manual_{kind}")) & set(axes):
                raise ValueError(f"{api_name} cannot accept args which are {kind}. Got "
                                 f"{x.str_short()} and axes={set(axes)}")
        return x.unreduced, x.reduced
    return rule


def _pvary_lower(x, *, axes):
    # The value is unchanged; JAX's type is cast where JAX tracks types too.
    have = jax.typeof(x).mat.varying
    missing = tuple(a for a in axes if a not in have)
    return jax.lax.pcast(x, missing, to="varying") if missing else x


def _pvary_eager(x, *, axes):
    if isinstance(x, jax.core.Tracer):   # impl code running inside JAX's own shard_map
        return _pvary_lower(x, axes=axes)
    raise ValueError("pvary should be called under jax.shard_map.")


def _pvary_batch(axis_data, vals, dims, *, axes):
    # Batching may make the operand vary over more axes than it did (a cond on a
    # batched predicate selects between its branches' values): cast over the rest.
    (x,), (d,) = vals, dims
    rest = tuple(a for a in axes if a not in get_aval(x).vma)
    return (pvary_p.bind(x, axes=rest) if rest else x), d


pvary_p = define(
    "pvary", abstract_eval=_pvary_aval, vma_rule=_pvary_vma,
    unreduced_rule=_not_unreduced("pvary"), lowering=_pvary_lower,
    impl=_pvary_eager, jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, axes: [
        None if type(ct) is Zero else psum_invariant_p.bind(ct, axes=axes)],
    batching=_pvary_batch)


def _implicit_pvary(x, axes):
    return pvary_p.bind(x, axes=tuple(axes))


core.ops.pvary = _implicit_pvary   # Primitive.bind's casts of operands varying less


def _reduced_vma(x, *, axes):
    """pmax, pmin and psum_invariant: invariant over the axes they reduce, which the
    operand must vary over."""
    tracked = _tracked(axes)
    if tracked and not set(tracked) & set(x.vma):
        raise ValueError(
            "psum is a variant->invariant collective. This means that the axis names "
            "mentioned in `axes` passed to `psum` must be present in "
            f"`jax.typeof(inp).mat.varying`. Got axes={axes} and "
            f"jax.typeof(inp).mat.varying={frozenset(x.vma)}")
    return tuple(a for a in x.vma if a not in axes)


def _collective_vma(api_name):
    """all_gather, psum_scatter, all_to_all, ppermute, pbroadcast: the operand varies
    over every axis they name, and so does the result."""
    def rule(x, *, axes, **params):
        if any(a not in x.vma for a in _tracked(axes)):
            raise ValueError(
                f"Collective {api_name} must be applied to a device-varying type, but got "
                f"{frozenset(x.vma)} for collective acting over axis name {axes}. As a "
                "workaround pass the check_vma=False argument to `jax.shard_map`")
        return x.vma
    return rule


# ------------------------------------------------------------ psum / pmax / pmin

def _allreduce_batch(prim, reduce_mapped, reduce_unmapped):
    """Reduce over our own axis (mapped: along the batch axis; unmapped: every element
    holds the same value), then over the remaining names."""
    def rule(axis_data, vals, dims, *, axes):
        (x,), (d,) = vals, dims
        if axis_data.name not in axes:
            return _outward(prim, x, d, dict(axes=axes))
        y = reduce_unmapped(x, axis_data.size) if d is None else reduce_mapped(x, (d,))
        rest = tuple(a for a in axes if a != axis_data.name)
        return (prim.bind(y, axes=rest) if rest else y), None
    return rule


psum_p = define(
    "psum", collective=True,
    unreduced_rule=_not_unreduced("psum"), abstract_eval=_same_type("psum"),
    lowering=lambda x, *, axes: jax.lax.psum(x, axes),
    jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, axes: [None if type(ct) is Zero else psum_p.bind(ct, axes=axes)],
    batching=core.RuleMaker(lambda p: _allreduce_batch(p, sh.reduce_sum, ew.mul)))

# psum where types track varying manual axes: from varying to invariant over the axes,
# so its transpose casts the (invariant) cotangent back to varying.
psum_invariant_p = define(
    "psum_invariant", collective=True,
    unreduced_rule=_not_unreduced("psum"), abstract_eval=_same_type("psum"),
    vma_rule=_reduced_vma, lowering=lambda x, *, axes: jax.lax.psum(x, axes),
    jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, axes: [
        None if type(ct) is Zero else pvary_p.bind(ct, axes=axes)],
    batching=core.RuleMaker(lambda p: _allreduce_batch(p, sh.reduce_sum, ew.mul)))


def _psum_bind(x, axes):
    """The sum of `x` over `axes`: psum_invariant over tracked manual axes (`x` cast to
    vary over them first), psum otherwise."""
    if axes and _tracked(axes) == axes:
        return psum_invariant_p.bind(_vary_over(x, axes), axes=axes)
    return psum_p.bind(x, axes=axes)


def _make_pchooser_jvp(prim):
    """The derivative of a max/min over the axes: the tangent of the chosen element,
    shared equally between ties (as JAX differentiates `max` along an array axis)."""
    def rule(primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axes=axes)
        if type(t) is Zero:
            return out, Zero(ad.tangent_aval(get_aval(out)))
        hit = ew.convert_element_type(ew.eq(x, out), get_aval(t).dtype)
        picked = _psum_bind(ew.mul(t, hit), axes)
        return out, ew.div(picked, _psum_bind(hit, axes))
    return rule


_pchooser_jvp = core.RuleMaker(_make_pchooser_jvp)


pmax_p = define(
    "pmax", collective=True,
    unreduced_rule=_not_unreduced("pmax"), abstract_eval=_same_type("pmax"), vma_rule=_reduced_vma,
    lowering=lambda x, *, axes: jax.lax.pmax(x, axes),
    jvp=_pchooser_jvp,
    batching=core.RuleMaker(lambda p: _allreduce_batch(p, red.reduce_max, lambda x, n: x)))

pmin_p = define(
    "pmin", collective=True,
    unreduced_rule=_not_unreduced("pmin"), abstract_eval=_same_type("pmin"), vma_rule=_reduced_vma,
    lowering=lambda x, *, axes: jax.lax.pmin(x, axes),
    jvp=_pchooser_jvp,
    batching=core.RuleMaker(lambda p: _allreduce_batch(p, red.reduce_min, lambda x, n: x)))


# ----------------------------------------------------------------- axis_index

def _axis_index_batch(axis_data, vals, dims, *, axis_name):
    if axis_name != axis_data.name:
        return axis_index_p.bind(axis_name=axis_name), None
    return batching.make_iota(axis_data.size), 0


def _axis_index_aval(*, axis_name):
    batching.axis_size(axis_name, "axis_index")
    return ShapedArray((), np.int32)


axis_index_p = define(
    "axis_index", collective=True, abstract_eval=_axis_index_aval,
    vma_rule=lambda *, axis_name: _tracked((axis_name,)),
    lowering=lambda *, axis_name: jax.lax.axis_index(axis_name),
    jvp=ad.zero_jvp, batching=_axis_index_batch)


# ----------------------------------------------------------------- all_gather

def _all_gather_aval(x, *, axes, axis, tiled):
    n = _size(axes, "all_gather")
    shape = list(x.shape)
    if tiled:
        shape[axis] *= n
    else:
        shape.insert(axis, n)
    return x.update(shape=tuple(shape))


def _all_gather_batch(axis_data, vals, dims, *, axes, axis, tiled):
    (x,), (d,) = vals, dims
    own, n = axis_data.name, axis_data.size
    if own not in axes:
        return _outward(all_gather_p, x, d, dict(axes=axes, axis=axis, tiled=tiled), ("axis",))
    # Every element gets the whole batch: our batch axis, moved to `axis`, unmapped.
    g = batching.moveaxis(batching.bdim_at_front(x, d, n), 0, axis)
    before, after = _split(axes, own)
    if before or after:
        # The other devices' copies arrive first along `axis` (rest-major); interleave
        # them so the devices appear in the tuple's row-major order.
        g = all_gather_p.bind(g, axes=before + after, axis=axis, tiled=False)
        groups, sizes = _labels(get_aval(g).shape)
        sizes.update(B=_size(before, "all_gather"), A=_size(after, "all_gather"), n=n)
        src = groups[:axis] + [("B", "A"), ("n",)] + groups[axis + 2:]
        g = _rearrange(g, src, groups[:axis] + [("B", "n", "A")] + groups[axis + 2:], sizes)
    if tiled:
        shape = get_aval(g).shape
        g = sh.reshape(g, shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:])
    return g, None


def _lower_all_gather(x, *, axes, axis, tiled):
    # also all_gather_invariant's and all_gather_reduced's: the same data moves
    return jax.lax.all_gather(x, axes, axis=axis, tiled=tiled)


all_gather_p = define(
    "all_gather", collective=True,
    unreduced_rule=_not_unreduced("all_gather"), abstract_eval=_all_gather_aval,
    vma_rule=_collective_vma("all_gather"),
    lowering=_lower_all_gather,
    jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, axes, axis, tiled: [
        None if type(ct) is Zero else
        psum_scatter_p.bind(ct, axes=axes, scatter_dimension=axis, tiled=tiled)],
    batching=_all_gather_batch)


# --------------------------------------------------------------- psum_scatter

def _psum_scatter_aval(x, *, axes, scatter_dimension, tiled):
    n = _size(axes, "psum_scatter")
    shape = list(x.shape)
    size = shape[scatter_dimension]
    if tiled:
        if size % n:
            raise ValueError(f"tiled reduce_scatter operand scatter dimension size {size} "
                             f"must be divisible by shard_count {n}")
        shape[scatter_dimension] = size // n
    else:
        if size != n:
            raise ValueError(f"reduce_scatter operand scatter dimension size {size} must "
                             f"match shard count {n}")
        del shape[scatter_dimension]
    return x.update(shape=tuple(shape))


def _psum_scatter_batch(axis_data, vals, dims, *, axes, scatter_dimension, tiled):
    (x,), (d,) = vals, dims
    own, n, sd = axis_data.name, axis_data.size, scatter_dimension
    if own not in axes:
        return _outward(psum_scatter_p, x, d, dict(axes=axes, scatter_dimension=sd,
                                                   tiled=tiled), ("scatter_dimension",))
    # Sum over our axis, then element k keeps block k of the scatter dimension, which
    # splits as (devices before us, us, devices after us, block size).
    y = ew.mul(x, n) if d is None else sh.reduce_sum(x, (d,))
    before, after = _split(axes, own)
    shape = get_aval(y).shape
    groups, sizes = _labels(shape)
    sizes.update(B=_size(before, "psum_scatter"), A=_size(after, "psum_scatter"), n=n)
    sizes["c"] = shape[sd] // (sizes["B"] * n * sizes["A"])
    src = groups[:sd] + [("B", "n", "A", "c")] + groups[sd + 1:]
    y = _rearrange(y, src, [("n",)] + groups[:sd] + [("B", "A", "c")] + groups[sd + 1:], sizes)
    if before or after:
        y = psum_scatter_p.bind(y, axes=before + after, scatter_dimension=sd + 1, tiled=tiled)
    elif not tiled:
        y = sh.squeeze(y, (sd + 1,))
    return y, 0


def _lower_psum_scatter(x, *, axes, scatter_dimension, tiled):
    # also unreduced_reduce_scatter's: the same sums
    return jax.lax.psum_scatter(x, axes, scatter_dimension=scatter_dimension, tiled=tiled)


psum_scatter_p = define(
    "reduce_scatter", collective=True,   # JAX's name, as programs print it
    unreduced_rule=_not_unreduced("reduce_scatter"), abstract_eval=_psum_scatter_aval,
    vma_rule=_collective_vma("reduce_scatter"),
    lowering=_lower_psum_scatter,
    jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, axes, scatter_dimension, tiled: [
        None if type(ct) is Zero else
        all_gather_p.bind(ct, axes=axes, axis=scatter_dimension, tiled=tiled)],
    batching=_psum_scatter_batch)


# ----------------------------------------------------------------- all_to_all
# The primitive is the tiled form (rank preserved): `split_axis` is cut into one block
# per device, block k goes to device k, and the blocks received are concatenated along
# `concat_axis` in device order. The untiled API adds and removes the axes around it.

def _all_to_all_aval(x, *, axes, split_axis, concat_axis):
    n = _size(axes, "all_to_all")
    shape = list(x.shape)
    if shape[split_axis] % n:
        raise ValueError(f"The size of all_to_all split_axis ({shape[split_axis]}) has to be "
                         f"divisible by the size of the named axis {axes} ({n})")
    shape[split_axis] //= n
    shape[concat_axis] *= n
    return ShapedArray(shape, x.dtype)   # not weakly typed, as in JAX


def _all_to_all_batch(axis_data, vals, dims, *, axes, split_axis, concat_axis):
    (x,), (d,) = vals, dims
    own, n = axis_data.name, axis_data.size
    sa, ca = split_axis + 1, concat_axis + 1   # positions once the batch axis is first
    if own not in axes:
        return _outward(all_to_all_p, x, d, dict(axes=axes, split_axis=split_axis,
                                                 concat_axis=concat_axis),
                        ("split_axis", "concat_axis"))
    before, after = _split(axes, own)
    xs = batching.bdim_at_front(x, d, n)
    shape = get_aval(xs).shape
    groups, sizes = _labels(shape)        # e0: the element the data comes from
    sizes.update(n=n, B=_size(before, "all_to_all"), A=_size(after, "all_to_all"))
    sizes["m"] = shape[sa] // (sizes["B"] * n * sizes["A"])
    # Our part: block k of our chunk of the split axis goes to element k; the element
    # it came from (e0) joins the concat axis, in front of its data.
    src, dst = list(groups), list(groups)
    src[sa], dst[0] = ("B", "n", "A", "m"), ("n",)
    if sa == ca:
        dst[sa] = ("B", "A", "e0", "m")
    else:
        dst[sa], dst[ca] = ("B", "A", "m"), ("e0",) + groups[ca]
    y = _rearrange(xs, src, dst, sizes)
    if before or after:
        # The other devices' part; their blocks arrive rest-major along the concat axis:
        # interleave so the sources appear in the tuple's row-major order.
        y = all_to_all_p.bind(y, axes=before + after, split_axis=sa, concat_axis=ca)
        groups2, sizes2 = _labels(get_aval(y).shape)
        sizes2.update(B=sizes["B"], A=sizes["A"], n=n)
        sizes2["c"] = get_aval(y).shape[ca] // (sizes["B"] * sizes["A"] * n)
        src2 = groups2[:ca] + [("B", "A", "n", "c")] + groups2[ca + 1:]
        dst2 = groups2[:ca] + [("B", "n", "A", "c")] + groups2[ca + 1:]
        y = _rearrange(y, src2, dst2, sizes2)
    return y, 0


all_to_all_p = define(
    "all_to_all", collective=True,
    unreduced_rule=_not_unreduced("all_to_all"), abstract_eval=_all_to_all_aval,
    vma_rule=_collective_vma("all_to_all"),
    lowering=lambda x, *, axes, split_axis, concat_axis: jax.lax.all_to_all(
        x, axes, split_axis, concat_axis, tiled=True),
    jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, axes, split_axis, concat_axis: [
        None if type(ct) is Zero else
        all_to_all_p.bind(ct, axes=axes, split_axis=concat_axis, concat_axis=split_axis)],
    batching=_all_to_all_batch)


# ------------------------------------------------------------------- ppermute

def _ppermute_aval(x, *, axes, perm):
    n = _size(axes, "ppermute")
    srcs, dsts = [s for s, _ in perm], [t for _, t in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got {perm}.")
    if any(not 0 <= i < n for i in srcs + dsts):
        raise ValueError(f"ppermute: indices in perm {perm} must lie in [0, {n}) for the "
                         f"axis {axes} of size {n}")
    return x


def _source_table(perm, n):
    """For each destination device, the device it receives from (n: none, so zeros)."""
    table = np.full(n, n, np.int32)
    for s, t in perm:
        table[t] = s
    return table


def _take_rows(x, rows):
    """x[rows] along axis 0; rows equal to len(x) give zeros."""
    shape = get_aval(x).shape
    dnums = ix.GatherDimensionNumbers(offset_dims=tuple(range(1, len(shape))),
                                      collapsed_slice_dims=(0,), start_index_map=(0,))
    idx = rows[:, None] if isinstance(rows, np.ndarray) else sh.reshape(rows, (len(rows), 1))
    return ix.gather(x, idx, dnums, (1,) + shape[1:], mode="fill", fill_value=0)


def _ppermute_batch(axis_data, vals, dims, *, axes, perm):
    (x,), (d,) = vals, dims
    own, n = axis_data.name, axis_data.size
    if own not in axes:
        return _outward(ppermute_p, x, d, dict(axes=axes, perm=perm))
    xs = batching.bdim_at_front(x, d, n)
    before, after = _split(axes, own)
    if not before and not after:
        return _take_rows(xs, _source_table(perm, n)), 0
    # Over several names a device may receive from any other: gather everything over
    # the other names (ordered row-major), then each element picks its source.
    rest = before + after
    b, a = _size(before, "ppermute"), _size(after, "ppermute")
    g = all_gather_p.bind(xs, axes=rest, axis=0, tiled=False)
    groups, sizes = _labels(get_aval(g).shape[2:])
    sizes.update(B=b, A=a, n=n)
    g = _rearrange(g, [("B", "A"), ("n",)] + groups, [("B", "n", "A")] + groups, sizes)
    r = _linear_index(rest)   # our position among the other names: (b, a) row-major
    base = ew.add(ew.mul(ew.div(r, np.int32(a)), np.int32(n * a)),
                  ew.rem_p.bind(r, np.int32(a)))
    me = ew.add(sh.broadcast_in_dim(base, (n,), ()), np.arange(n, dtype=np.int32) * np.int32(a))
    table = _source_table(perm, b * n * a)
    return _take_rows(g, _take_rows(table, me)), 0


ppermute_p = define(
    "ppermute", collective=True,
    unreduced_rule=_not_unreduced("ppermute"), abstract_eval=_ppermute_aval,
    vma_rule=_collective_vma("ppermute"),
    lowering=lambda x, *, axes, perm: jax.lax.ppermute(x, axes, perm),
    jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, axes, perm: [
        None if type(ct) is Zero else
        ppermute_p.bind(ct, axes=axes, perm=tuple((t, s) for s, t in perm))],
    batching=_ppermute_batch)


# ----------------------------------------------------------------- pbroadcast

def _pbroadcast_aval(x, *, axes, source):
    n = _size(axes, "pbroadcast")
    if not 0 <= source < n:
        raise ValueError(f"pbroadcast: source {source} is out of range for the axis {axes} "
                         f"of size {n}")
    return x


def _pbroadcast_batch(axis_data, vals, dims, *, axes, source):
    (x,), (d,) = vals, dims
    own, n = axis_data.name, axis_data.size
    if own not in axes:
        return _outward(pbroadcast_p, x, d, dict(axes=axes, source=source))
    before, after = _split(axes, own)
    a = _size(after, "pbroadcast")
    mine = (source // a) % n                          # source = (b, mine, a) row-major
    rest_source = source // (n * a) * a + source % a
    y = x if d is None else ix.index_in_dim(x, mine, d, keepdims=False)
    if before or after:
        y = pbroadcast_p.bind(y, axes=before + after, source=rest_source)
    return y, None


def _pbroadcast_lower(x, *, axes, source):
    # JAX lowers its pbroadcast on GPU only; this is its documented equivalent.
    me = jax.lax.axis_index(axes)
    return jax.lax.psum(jax.numpy.where(me == source, x, jax.numpy.zeros_like(x)), axes)


def _pbroadcast_transpose(ct, x, *, axes, source):
    if type(ct) is Zero:
        return [None]
    total = _psum_bind(ct, axes)
    return [ew.select_n(ew.eq(_linear_index(axes), np.int32(source)),
                        ew.zeros_like(total), total)]


pbroadcast_p = define(
    "pbroadcast", collective=True,
    unreduced_rule=_not_unreduced("pbroadcast"), abstract_eval=_pbroadcast_aval,
    lowering=_pbroadcast_lower,
    vma_rule=_collective_vma("pbroadcast"),
    jvp=ad.linear_jvp, transpose=_pbroadcast_transpose, batching=_pbroadcast_batch)


# ------------------------------------------- unreduced and reduced manual axes
# Inside a shard_map body with check_vma=True a value may be, over a manual mesh axis,
# varying, unreduced (each device holds its part of a sum over the axis, still to be
# added up), reduced (replicated, with a cotangent that is unreduced) or invarying
# (replicated). As JAX's, the casts between these states move no data (but
# `unreduced_psum`, which adds the parts up) and transpose into one another:
#   pvary (invarying -> varying)          <-> psum_invariant (varying -> invarying)
#   preduced (invarying -> reduced)       <-> unreduced_psum (unreduced -> invarying)
#   vary_unreduced_cast (varying -> unreduced) <-> reduced_vary_cast (reduced -> varying)
#   all_gather_reduced (varying -> reduced) <-> unreduced_reduce_scatter (unreduced -> varying)
# and all_gather_invariant gathers varying blocks into an invarying value (its
# transpose takes each device's block of the cotangent). vmap refuses the casts and
# the collectives of unreduced and reduced values, as JAX's does.

_STATE_FIELD = {"varying": "vma", "unreduced": "manual_unreduced",
                "reduced": "manual_reduced"}
# how JAX's messages name the casts
_JAX_CAST_NAMES = {"vary_unreduced_cast_p": "vary_unreduced_cast",
                   "reduced_vary_cast_p": "reduced_vary_cast",
                   "unreduced_reduce_scatter": "unreduced_psum_scatter"}


def _moved(name, x, axes, source, target):
    """The fields of `x`'s type with the manual axes `axes`, all in state `source`
    (else JAX's ValueError), moved to state `target`."""
    _check_manual_axes(axes, name)
    shown = _JAX_CAST_NAMES.get(name, name)
    field = _STATE_FIELD.get(source)
    if field and not getattr(x, field):
        raise ValueError(f"{shown} only accepts inputs that are {source}. Got "
                         f"{x.str_short()}")
    if {_axis_state(x, a) for a in axes} != {source}:
        raise ValueError(f"{name} casts manual axes from {source} to {target}: the axes "
                         f"{axes} must all be {source} in its operand's type, got "
                         f"{x.str_short()}")
    fields = {}
    if source in _STATE_FIELD:
        field = _STATE_FIELD[source]
        fields[field] = tuple(n for n in getattr(x, field) if n not in axes)
    if target in _STATE_FIELD:
        field = _STATE_FIELD[target]
        fields[field] = core.ordered_vma(getattr(x, field) + tuple(axes))
    return fields


def _cast_aval(name, source, target):
    return lambda x, *, axes: x.update(**_moved(name, x, axes, source, target))


def _refuse_vmap(name):
    return core.always_raises(NotImplementedError, f"vmap of {name} (a collective of unreduced "
                              "or reduced manual axes) is not supported, as in JAX")


def _define_cast(name, source, target, lowering=None):
    """A cast between states of manual axes: no data moves unless `lowering` says."""
    lowering = lowering or (lambda x, *, axes: x)

    def eager(x, *, axes):
        if isinstance(x, jax.core.Tracer):   # impl code running inside JAX's own shard_map
            return lowering(x, axes=axes)
        raise ValueError(f"{name.removesuffix('_p')} should be called under jax.shard_map.")
    return define(
        name, abstract_eval=_cast_aval(name, source, target),
        vma_rule=core.TYPED_BY_ABSTRACT_EVAL, lowering=lowering, impl=eager,
        jvp=ad.linear_jvp, batching=_refuse_vmap(name))


preduced_p = _define_cast("preduced", "invarying", "reduced")
unreduced_psum_p = _define_cast("unreduced_psum", "unreduced", "invarying",
                                lowering=lambda x, *, axes: jax.lax.psum(x, axes))
# JAX's names, as programs print them
vary_unreduced_cast_p = _define_cast("vary_unreduced_cast_p", "varying", "unreduced")
reduced_vary_cast_p = _define_cast("reduced_vary_cast_p", "reduced", "varying")


def _cast_transpose(inverse):
    return lambda ct, x, *, axes: [None if type(ct) is Zero else inverse.bind(ct, axes=axes)]


for _prim, _inverse in ((preduced_p, unreduced_psum_p), (unreduced_psum_p, preduced_p),
                        (vary_unreduced_cast_p, reduced_vary_cast_p),
                        (reduced_vary_cast_p, vary_unreduced_cast_p)):
    ad.transpose_rules[_prim] = _cast_transpose(_inverse)


def _implicit_reduced_vary_cast(x, axes):
    return reduced_vary_cast_p.bind(x, axes=tuple(axes))


core.ops.reduced_vary_cast = _implicit_reduced_vary_cast   # Primitive.bind's casts


def _all_gather_invariant_aval(x, *, axes, axis, tiled):
    _not_unreduced("all_gather_invariant")(x, axes=axes)
    return _all_gather_aval(x, axes=axes, axis=axis, tiled=tiled).update(
        vma=tuple(n for n in x.vma if n not in axes))


def _all_gather_reduced_aval(x, *, axes, axis, tiled):
    """JAX's conditions: the operand varies over some of the axes and is reduced over
    none of them; the result is reduced over all of them. (Over vmap axes, whose
    variation no type tracks, vmap refuses it first, as JAX's.)"""
    out = _all_gather_aval(x, axes=axes, axis=axis, tiled=tiled)
    if not set(axes) <= set(core.current_manual_axes()):
        return out
    if not x.vma:
        raise ValueError(f"all_gather_reduced only accepts inputs that are varying. Got "
                         f"{x.str_short()}")
    if not set(x.vma) & set(axes):
        raise ValueError(
            "all_gather_reduced is a Varying -> Reduced collective. This means that the "
            f"axis_name={axes} passed to `all_gather_reduced` must be present in "
            f"jax.typeof(x).mat.varying={frozenset(x.vma)}")
    if set(x.manual_reduced) & set(axes):
        raise ValueError("all_gather_reduced's input cannot be reduced across the axis_name "
                         f"provided. Got x={x.str_short()} and axis_name={axes}")
    return out.update(vma=tuple(n for n in x.vma if n not in axes),
                      manual_reduced=core.ordered_vma(x.manual_reduced + axes))


def _all_gather_invariant_transpose(ct, x, *, axes, axis, tiled):
    """Each device takes its own block of the (invarying) cotangent."""
    if type(ct) is Zero:
        return [None]
    shape = get_aval(ct).shape
    size = shape[axis] // _size(axes, "all_gather")
    starts = [np.int32(0)] * len(shape)
    starts[axis] = ew.mul(_linear_index(axes), np.int32(size))
    block = ix.dynamic_slice(ct, starts, shape[:axis] + (size,) + shape[axis + 1:])
    return [block if tiled else sh.squeeze(block, (axis,))]


def _all_gather_invariant_batch(axis_data, vals, dims, *, axes, axis, tiled):
    """Over another axis than the vmapped one, as all_gather. Over the vmapped axis it
    is refused: no type says the cotangent is the same in every element, which its
    transpose (taking each element's own block) needs."""
    if axis_data.name in axes:
        raise NotImplementedError(
            f"all_gather(..., to='invarying') over the vmap axis {axis_data.name!r} is not "
            "supported (JAX 0.10.2 fails inside): use to='varying'")
    (x,), (d,) = vals, dims
    return _outward(all_gather_invariant_p, x, d, dict(axes=axes, axis=axis, tiled=tiled),
                    ("axis",))


all_gather_invariant_p = define(
    "all_gather_invariant", collective=True,
    abstract_eval=_all_gather_invariant_aval,
    vma_rule=core.TYPED_BY_ABSTRACT_EVAL,
    lowering=_lower_all_gather,
    jvp=ad.linear_jvp, transpose=_all_gather_invariant_transpose,
    batching=_all_gather_invariant_batch)

all_gather_reduced_p = define(
    "all_gather_reduced", collective=True,
    abstract_eval=_all_gather_reduced_aval,
    vma_rule=core.TYPED_BY_ABSTRACT_EVAL,
    lowering=_lower_all_gather,
    jvp=ad.linear_jvp, batching=_refuse_vmap("all_gather_reduced"))


def _unreduced_scatter_aval(x, *, axes, scatter_dimension, tiled):
    return _psum_scatter_aval(x, axes=axes, scatter_dimension=scatter_dimension,
                              tiled=tiled).update(**_moved("unreduced_reduce_scatter", x, axes,
                                                           "unreduced", "varying"))


unreduced_reduce_scatter_p = define(
    "unreduced_reduce_scatter", collective=True, abstract_eval=_unreduced_scatter_aval,
    vma_rule=core.TYPED_BY_ABSTRACT_EVAL,
    lowering=_lower_psum_scatter,
    jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, axes, scatter_dimension, tiled: [
        None if type(ct) is Zero else
        all_gather_reduced_p.bind(ct, axes=axes, axis=scatter_dimension, tiled=tiled)],
    batching=_refuse_vmap("unreduced_reduce_scatter"))

ad.transpose_rules[all_gather_reduced_p] = lambda ct, x, *, axes, axis, tiled: [
    None if type(ct) is Zero else
    unreduced_reduce_scatter_p.bind(ct, axes=axes, scatter_dimension=axis, tiled=tiled)]


# ----------------------------------------------------- printed as JAX prints them
# JAX's collectives name their parameters otherwise (and carry the axes' size and
# axis_index_groups, which impl does not support): programs print JAX's names, the
# size read off the operand's and result's shapes.

def _gathered_size(eqn, axis, tiled):
    """How many blocks a gather joined along `axis` (a scatter: how many it split into)."""
    small, big = eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape
    if eqn.primitive in (psum_scatter_p, unreduced_reduce_scatter_p):
        small, big = big, small
    return big[axis] // small[axis] if tiled else big[axis]


def _printed_gather(groups):
    def rule(eqn, namer):
        p = eqn.params
        groups_param = [("axis_index_groups", None)] if groups else []
        return [("all_gather_dimension", p["axis"]), *groups_param,
                ("axis_name", p["axes"]),
                ("axis_size", _gathered_size(eqn, p["axis"], p["tiled"])), ("tiled", p["tiled"])]
    return rule


def _printed_scatter(groups):
    def rule(eqn, namer):
        p = eqn.params
        groups_param = [("axis_index_groups", None)] if groups else []
        return [*groups_param, ("axis_name", p["axes"]),
                ("axis_size", _gathered_size(eqn, p["scatter_dimension"], p["tiled"])),
                ("scatter_dimension", p["scatter_dimension"]), ("tiled", p["tiled"])]
    return rule


def _printed_all_to_all(eqn, namer):
    # JAX keeps the axis name as given: one name prints bare (a tuple of one, given
    # so, prints bare too in impl); the primitive is the tiled form.
    axes = eqn.params["axes"]
    return [("axis_index_groups", None), ("axis_name", axes[0] if len(axes) == 1 else axes),
            ("concat_axis", eqn.params["concat_axis"]),
            ("split_axis", eqn.params["split_axis"]), ("tiled", True)]


def _printed_with_groups(eqn, namer):
    return [("axes", eqn.params["axes"]), ("axis_index_groups", None)]


for _prim, _rule in (
        (psum_p, _printed_with_groups), (pmax_p, _printed_with_groups),
        (pmin_p, _printed_with_groups),
        (all_gather_p, _printed_gather(groups=True)),
        (all_gather_invariant_p, _printed_gather(groups=False)),
        (all_gather_reduced_p, _printed_gather(groups=False)),
        (psum_scatter_p, _printed_scatter(groups=True)),
        (unreduced_reduce_scatter_p, _printed_scatter(groups=False)),
        (all_to_all_p, _printed_all_to_all),
        (ppermute_p, lambda eqn, namer: [("axis_name", eqn.params["axes"]),
                                         ("perm", eqn.params["perm"])]),
        (pbroadcast_p, lambda eqn, namer: [
            ("axis_name", eqn.params["axes"][0] if len(eqn.params["axes"]) == 1
             else eqn.params["axes"]), ("source", eqn.params["source"])])):
    core.pp_params_rules[_prim] = _rule


# ------------------------------------------------ reduce_axes: cotangent sums

def _psum_unmapped_aval(primal, ct, *, axes):
    for name in axes:
        batching.axis_size(name, "reduce_axes")
    return ct


def _psum_unmapped_batch(axis_data, vals, dims, *, axes):
    (p, ct), (pd, cd) = vals, dims
    if axis_data.name in axes:
        rest = tuple(a for a in axes if a != axis_data.name)
        if pd is None:   # the primal was broadcast over our axis: sum its cotangent
            ct = ew.mul(ct, axis_data.size) if cd is None else sh.reduce_sum(ct, (cd,))
            cd = None
        if not rest:
            return ct, cd
        axes = rest
    return psum_unmapped_p.bind(p, ct, axes=axes), cd


def _psum_unmapped_lower(primal, ct, *, axes):
    raise NotImplementedError(
        f"reduce_axes={axes}: summing cotangents over axes that JAX itself binds "
        "(jax.vmap, shard_map) is not supported; use impl.vmap for those axes")


def _psum_unmapped_jvp(primals, tangents, *, axes):
    (p, ct), (_, t) = primals, tangents
    out = psum_unmapped_p.bind(p, ct, axes=axes)
    if type(t) is Zero:
        return out, Zero(ad.tangent_aval(get_aval(out)))
    return out, psum_unmapped_p.bind(p, t, axes=axes)


def _psum_unmapped_transpose(ct, primal, x, *, axes):
    if is_undefined_primal(primal):
        raise TypeError("reduce_axes: the cotangent sum is linear in the cotangent only")
    return [None, None if type(ct) is Zero else psum_unmapped_p.bind(primal, ct, axes=axes)]


# psum_unmapped(primal, ct): `ct` summed over each named axis along which `primal` is
# not mapped (was broadcast in the forward pass), unchanged along the others.
psum_unmapped_p = define(
    "psum_unmapped", collective=True, abstract_eval=_psum_unmapped_aval,
    lowering=_psum_unmapped_lower, jvp=_psum_unmapped_jvp,
    transpose=_psum_unmapped_transpose, batching=_psum_unmapped_batch)


def sum_cotangent(primal, ct, reduce_axes):
    """The cotangent `ct` of `primal`, summed over the axes of `reduce_axes` along which
    `primal` is broadcast (what grad(..., reduce_axes=...) returns)."""
    if type(ct) is Zero or not reduce_axes:
        return ct
    return psum_unmapped_p.bind(primal, ct, axes=_axes(reduce_axes, "reduce_axes"))


# ------------------------------------------------------------------- the API

def _leafwise(fn, x):
    return jax.tree_util.tree_map(fn, x)


def _int_if_bool(v):
    return ew.convert_element_type(v, np.int32) if get_aval(v).dtype == np.bool_ else v


def _is_traced(v):
    return isinstance(v, (core.Tracer, jax.core.Tracer))


def _psum_leaf(v, axes, api_name):
    if not axes:
        return v
    if _tracked(axes) and _manual_state(get_aval(v), axes, "jax.lax.psum") == "unreduced":
        return unreduced_psum_p.bind(v, axes=core.ordered_vma(axes))
    if not _is_traced(v):
        # A constant is the same in every element: its sum is known now, as in JAX
        # (so `psum(1, 'i')` is the axis size, a Python int, even under jit).
        n = _size(axes, api_name)
        if isinstance(v, (bool, int, float, complex)):
            return int(v) * n if isinstance(v, bool) else v * n
        v = jax.numpy.asarray(v)
        return _int_if_bool(v) * np.asarray(n, _int_if_bool(v).dtype)
    return _psum_bind(_int_if_bool(v), axes)


def psum(x, axis_name, *, axis_index_groups=None):
    """Sum `x` over the named axis (or tuple of axes), for each leaf of a pytree."""
    axes = _axes(axis_name, "psum", axis_index_groups)
    return _leafwise(lambda v: _psum_leaf(v, axes, "psum"), x)


def pmean(x, axis_name, *, axis_index_groups=None):
    """The mean of `x` over the named axis (or tuple of axes)."""
    axes = _axes(axis_name, "pmean", axis_index_groups)
    n = _size(axes, "pmean")

    def one(v):
        total = _psum_leaf(v, axes, "pmean")
        if isinstance(total, (int, float, complex)):
            return total / n
        aval = get_aval(total)
        if not core.is_float_dtype(aval.dtype):   # JAX's true division of integers
            wide = np.float64 if aval.dtype.itemsize >= 8 else np.float32
            total = ew.convert_element_type(total, core.canonical_dtype(wide),
                                            weak_type=aval.weak_type)
        return ew.div(total, n)
    return _leafwise(one, x)


def pmax(x, axis_name, *, axis_index_groups=None):
    """The maximum of `x` over the named axis (or tuple of axes)."""
    axes = _axes(axis_name, "pmax", axis_index_groups)
    return _leafwise(lambda v: pmax_p.bind(_vary_over(v, axes), axes=axes) if axes else v, x)


def pmin(x, axis_name, *, axis_index_groups=None):
    """The minimum of `x` over the named axis (or tuple of axes)."""
    axes = _axes(axis_name, "pmin", axis_index_groups)
    return _leafwise(lambda v: pmin_p.bind(_vary_over(v, axes), axes=axes) if axes else v, x)


def axis_size(axis_name):
    """The size of the named axis (the product of the sizes, for a tuple)."""
    return _size(_axes(axis_name, "axis_size"), "axis_size")


def _linear_index(axes):
    index = None
    for name in axes:
        i = axis_index_p.bind(axis_name=name)
        index = i if index is None else ew.add(
            ew.mul(index, np.int32(batching.axis_size(name, "axis_index"))), i)
    return np.int32(0) if index is None else index


def axis_index(axis_name):
    """The position of this element along the named axis; over a tuple of axes, the
    row-major (linearised) position."""
    return _linear_index(_axes(axis_name, "axis_index"))


_ALL_GATHER_TO = {"varying", "reduced", "invarying"}


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False, to="varying"):
    """Every device's `x`, stacked along a new axis `axis` (concatenated along the
    existing `axis` when `tiled`), in device order."""
    if to not in _ALL_GATHER_TO:
        raise ValueError("Got unexpected `to` value for `jax.lax.all_gather`. Allowed `to` "
                         f"values are: {_ALL_GATHER_TO}")
    axes = _axes(axis_name, "all_gather", axis_index_groups)

    def one(v):
        if not axes:
            return v
        ndim = get_aval(v).ndim
        a = _canonical_axis(axis, ndim if tiled else ndim + 1)
        if to == "reduced":
            return all_gather_reduced_p.bind(v, axes=axes, axis=a, tiled=bool(tiled))
        prim = all_gather_p if to == "varying" else all_gather_invariant_p
        return prim.bind(_vary_over(v, axes), axes=axes, axis=a, tiled=bool(tiled))
    return _leafwise(one, x)


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """The psum of `x`, of which device k keeps block k along `scatter_dimension`."""
    axes = _axes(axis_name, "psum_scatter", axis_index_groups)

    def one(v):
        if not axes:
            return v
        sd = _canonical_axis(scatter_dimension, get_aval(v).ndim)
        if (_tracked(axes) and _manual_state(get_aval(v), axes, "jax.lax.psum_scatter")
                == "unreduced"):
            return unreduced_reduce_scatter_p.bind(v, axes=axes, scatter_dimension=sd,
                                                   tiled=bool(tiled))
        return psum_scatter_p.bind(_vary_over(v, axes), axes=axes, scatter_dimension=sd,
                                   tiled=bool(tiled))
    return _leafwise(one, x)


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None,
               tiled=False):
    """Block k of `split_axis` goes to device k; the blocks received are concatenated
    along `concat_axis` (untiled: `split_axis` has one entry per device, which becomes
    a new axis at `concat_axis`)."""
    axes = _axes(axis_name, "all_to_all", axis_index_groups)
    n = _size(axes, "all_to_all")

    def one(v):
        shape = get_aval(v).shape
        sa = _canonical_axis(split_axis, len(shape))
        if tiled:
            ca = _canonical_axis(concat_axis, len(shape))
            if shape[sa] % n:
                raise ValueError(f"The size of all_to_all split_axis ({shape[sa]}) has to be "
                                 f"divisible by the size of the named axis {axis_name} ({n})")
            return all_to_all_p.bind(_vary_over(v, axes), axes=axes, split_axis=sa,
                                     concat_axis=ca)
        ca = _canonical_axis(concat_axis, len(shape))
        if shape[sa] != n:
            raise ValueError("all_to_all requires the size of the mapped axis axis_name to "
                             f"equal x.shape[split_axis], but they are {n} and {shape[sa]} "
                             "respectively.")
        if sa == ca:
            return all_to_all_p.bind(_vary_over(v, axes), axes=axes, split_axis=sa,
                                     concat_axis=ca)
        if sa < ca:
            ca += 1   # concat_axis counts positions after split_axis is removed
        else:
            sa += 1
        v = _vary_over(sh.expand_dims(v, (ca,)), axes)
        out = all_to_all_p.bind(v, axes=axes, split_axis=sa, concat_axis=ca)
        return sh.squeeze(out, (sa,))
    return _leafwise(one, x)


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """all_to_all with split_axis = concat_axis = axis."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


def ppermute(x, axis_name, perm):
    """Device dst receives `x` from device src for each pair (src, dst) of `perm`;
    devices that receive nothing get zeros."""
    axes = _axes(axis_name, "ppermute")
    try:
        perm = tuple((int(s), int(t)) for s, t in perm)
    except (TypeError, ValueError):
        raise TypeError(f"ppermute: perm must be a sequence of (source, destination) pairs "
                        f"of ints, got {perm!r}") from None
    return _leafwise(lambda v: ppermute_p.bind(_vary_over(v, axes), axes=axes, perm=perm), x)


def pshuffle(x, axis_name, perm):
    """ppermute where device i receives from device perm[i]."""
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"`perm` does not represent a permutation: {perm}")
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


def pbroadcast(x, axis_name, source):
    """Every device gets device `source`'s `x`."""
    axes = _axes(axis_name, "pbroadcast")
    return _leafwise(lambda v: pbroadcast_p.bind(v, axes=axes, source=int(source)), x)


# sets, as JAX's (its messages print them)
_PCAST_TO = {"unreduced", "reduced", "varying"}


def pcast(x, axis_name, *, to):
    """Cast the type of `x` (each leaf of a pytree) over the manual mesh axes
    `axis_name` inside a shard_map body (no data moves): from invarying to `'varying'`
    (under differentiation the cotangent is summed over the axes) or to `'reduced'`
    (the cotangent stays unreduced), from varying to `'unreduced'` (each device's value
    becomes its part of a sum), from reduced to `'varying'`."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name}")
    axes = axis_name if isinstance(axis_name, tuple) else (axis_name,)
    if not axis_name:
        return x
    if to not in _PCAST_TO:
        raise ValueError(f"Got unexpected `to` value. Allowed `to` values are: {_PCAST_TO}")

    def one(v):
        state = _manual_state(get_aval(v), axes, "jax.lax.pcast")
        if state == "invarying" and to == "varying":
            return _pvary(v, axes)
        casts = {("invarying", "reduced"): preduced_p, ("varying", "unreduced"):
                 vary_unreduced_cast_p, ("reduced", "varying"): reduced_vary_cast_p}
        prim = casts.get((state, to))
        if prim is None:
            raise ValueError(f"Unsupported pcast from={state}, to={to!r}")
        if not core.tracked_vma_axes() and all(a in core.current_manual_axes() for a in axes):
            return v      # check_vma=False: types do not track these axes
        return prim.bind(v, axes=core.ordered_vma(axes))
    return _leafwise(one, x)
