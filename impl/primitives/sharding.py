"""Sharding annotations: with_sharding_constraint, and how a sharding gains a batch axis.

impl never places data on devices itself. A sharding is a `jax.sharding` object
(`NamedSharding`, or a `PartitionSpec` read against the mesh in context) carried as a
parameter of the IR and handed to XLA's SPMD partitioner when the program is lowered
through `jax.jit`. Under vmap a sharding gains an entry for the batch axis: the mesh
axes named by `vmap(..., spmd_axis_name=...)`, or otherwise none (jit's shardings) or
an unconstrained one (a sharding constraint leaves the batch axis to the partitioner).
"""
from __future__ import annotations

import functools

import jax
from jax.sharding import NamedSharding, PartitionSpec, Sharding

from impl import core
from impl.core import get_aval
from impl.interpreters import ad
from impl.interpreters.ad import Zero
from impl.primitives import sharding_rules
from impl.primitives._define import define

P = PartitionSpec


# ------------------------------------------------------------ specs and batch axes

def spec_names(entry):
    """The mesh axis names one entry of a PartitionSpec refers to."""
    if entry is None or entry is P.UNCONSTRAINED:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def spec_entry(names):
    """The PartitionSpec entry sharding one array axis over the mesh axes `names`."""
    names = tuple(names)
    return names[0] if len(names) == 1 else names


def insert_spec_entry(spec, dim, entry):
    """`spec` with `entry` inserted at array axis `dim` (padded with None to reach it);
    its unreduced and reduced axes kept."""
    entries = tuple(spec.partitions) + (None,) * max(0, dim - len(spec))
    return P(*entries[:dim], entry, *entries[dim:], unreduced=spec.unreduced,
             reduced=spec.reduced)


def spec_of(sharding):
    """The PartitionSpec of a NamedSharding or PartitionSpec, else None."""
    if isinstance(sharding, PartitionSpec):
        return sharding
    if isinstance(sharding, NamedSharding):
        return sharding.spec
    return None


def check_spmd_unused(spmd_name, spec, what):
    used = {n for entry in spec.partitions for n in spec_names(entry)}
    if set(spmd_name) & used:
        raise ValueError(f"vmap spmd_axis_name {spmd_name} cannot appear in {what} spec, "
                         f"but got spec {spec}")


def batch_sharding(sharding, dim, spmd_name, *, what, unmapped_entry=None):
    """The sharding of a value that gained a batch axis at `dim`: that axis is sharded
    over the mesh axes `spmd_name` (a tuple) or, without them, gets `unmapped_entry`.
    None (no sharding requested) stays None."""
    if sharding is None:
        return None
    spec = spec_of(sharding)
    if spec is None:
        if spmd_name is None and sharding.is_fully_replicated:
            return sharding      # replicated over its devices whatever the rank
        raise NotImplementedError(
            f"vmap of {what} with a {type(sharding).__name__} is not supported"
            + (" with spmd_axis_name" if spmd_name is not None else " unless it is fully "
               "replicated") + "; use a jax.sharding.NamedSharding or a PartitionSpec")
    if spmd_name is not None:
        check_spmd_unused(spmd_name, spec, what)
        entry = spec_entry(spmd_name)
    else:
        entry = unmapped_entry
    new_spec = insert_spec_entry(spec, dim, entry)
    if isinstance(sharding, PartitionSpec):
        return new_spec
    return NamedSharding(sharding.mesh, new_spec, memory_kind=sharding.memory_kind)


def check_vmap_explicit_axes(args, in_axes, spmd_axis_name):
    """vmap's mapped axes must be sharded alike over Explicit mesh axes, and
    `spmd_axis_name` may only repeat those axes (JAX's errors)."""
    mapped = None
    for n, (x, d) in enumerate((x, d) for x, d in zip(args, in_axes)
                               if isinstance(d, int) and hasattr(x, "aval")):
        aval = get_aval(x)
        entry = sharding_rules.spec(aval)[d] if aval.ndim else None
        if n and entry != mapped:
            raise ValueError("Mapped away dimension of inputs passed to vmap should be "
                             f"sharded the same. Got inconsistent axis specs: {mapped} vs "
                             f"{entry}")
        mapped = entry
    mapped = None if mapped is None else tuple(sharding_rules.entry_names(mapped))
    if spmd_axis_name is not None and mapped is not None and tuple(spmd_axis_name) != mapped:
        raise ValueError("Only one of spmd_axis_name or arrays sharded on `Explicit` mesh "
                         f"axis type is allowed. Got spmd_axis_name={tuple(spmd_axis_name)} "
                         f"and arrays sharded on explicit_mesh_axis={mapped}")


def check_sharding_leaf(s, what, allow_none=False):
    """A sharding given by the user: a jax Sharding or a PartitionSpec (or None)."""
    if s is None and allow_none:
        return s
    if s is None:
        raise ValueError(f"One of {what} arguments got sharding None which is not "
                         "allowed. Please only pass `jax.sharding.Sharding` instances.")
    if not isinstance(s, (Sharding, PartitionSpec)):
        raise TypeError(f"{what} leaf specifications are expected to be "
                        f"jax.sharding.Sharding or PartitionSpec instances"
                        f"{' or None' if allow_none else ''}, but got {s!r}")
    return s


def check_rank(sharding, aval, what):
    spec = spec_of(sharding)
    if spec is not None and len(spec) > aval.ndim:
        raise ValueError(f"One of {what} arguments is incompatible with its sharding "
                         f"annotation {sharding}: it is only valid for values of rank at "
                         f"least {len(spec)}, but was applied to a value of rank {aval.ndim} "
                         f"(shape {aval.shape}).")


# ----------------------------------------------------------- with_sharding_constraint

def _constraint_aval(x, *, sharding):
    check_rank(sharding, x, "with_sharding_constraint")
    return x


def _constraint_transpose(ct, x, *, sharding):
    if type(ct) is Zero:
        return [None]
    return [sharding_constraint_p.bind(ct, sharding=sharding)]


def _constraint_batch(axis_data, vals, dims, *, sharding):
    (x,), (d,) = vals, dims
    unmapped = P.UNCONSTRAINED
    mesh = getattr(sharding, "mesh", None) or jax.sharding.get_abstract_mesh()
    if d is not None and jax.sharding.AxisType.Auto not in mesh.axis_types:
        # UNCONSTRAINED needs an Auto axis; without one (the constraint asserts the
        # type) the batch axis keeps the sharding the operand's type gives it
        unmapped = sharding_rules.spec(get_aval(x))[d]
    new = batch_sharding(sharding, d, axis_data.spmd_name, what="with_sharding_constraint",
                         unmapped_entry=unmapped)
    return sharding_constraint_p.bind(x, sharding=new), d


sharding_constraint_p = define(
    "sharding_constraint", abstract_eval=_constraint_aval,
    lowering=lambda x, *, sharding: jax.lax.with_sharding_constraint(x, sharding),
    jvp=ad.linear_jvp, transpose=_constraint_transpose, batching=_constraint_batch,
    sharding_rule=sharding_rules.same_as_operand,
    unreduced_rule=sharding_rules.constraint_unreduced)


# ----------------------------------------------------------------------- reshard

def _reshard_rule(x, *, out_sharding):
    return out_sharding


def _reshard_transpose(ct, x, *, out_sharding):
    """The cotangent goes back to the operand's sharding: replicated over the operand's
    mesh, or off any mesh as the operand is (so a jit without a mesh in context can
    return it, as JAX's)."""
    if type(ct) is Zero:
        return [None]
    back = core.cotangent_sharding(x.aval)
    if back is None:
        mesh = out_sharding.mesh if x.aval.on_mesh else core.EMPTY_MESH
        back = NamedSharding(mesh, P(*[None] * x.aval.ndim))
    return [reshard_p.bind(ct, out_sharding=back)]


def _reshard_batch(axis_data, vals, dims, *, out_sharding):
    (x,), (d,) = vals, dims
    entries = list(out_sharding.spec.partitions)
    # the batch axis keeps the mapped inputs' Explicit axes (not spmd_axis_name), as in JAX
    entries.insert(d, sharding_rules.spec(get_aval(x))[d])
    return reshard_p.bind(x, out_sharding=out_sharding.update(
        spec=out_sharding.spec.update(partitions=entries))), d


try:  # JAX's own reshard primitive: its API refuses the empty mesh its transpose uses
    from jax._src.pjit import reshard_p as _jax_reshard_p
except ImportError:  # pragma: no cover
    _jax_reshard_p = None


def _reshard_lower(x, *, out_sharding):
    if out_sharding.mesh.empty and _jax_reshard_p is not None:
        # off any mesh: the type drops the mesh, the value stays where XLA put it
        with jax.sharding.use_abstract_mesh(out_sharding.mesh):
            return _jax_reshard_p.bind(x, dst_sharding=out_sharding, concrete_mesh=None)
    return jax.sharding.reshard(x, out_sharding)


reshard_p = define(
    "reshard", abstract_eval=lambda x, *, out_sharding: x.update(),
    lowering=_reshard_lower, jvp=ad.linear_jvp, transpose=_reshard_transpose,
    batching=_reshard_batch, sharding_rule=_reshard_rule,
    unreduced_rule=sharding_rules.resharded)


def reshard(xs, out_shardings):
    """`xs` (a pytree) with their types' shardings changed to `out_shardings` (a
    PartitionSpec read against the mesh in context, or a NamedSharding, or a pytree
    prefix of `xs` with those as leaves): XLA moves the data between devices."""
    leaves, tree = jax.tree_util.tree_flatten(xs)
    flat = broadcast_prefix(out_shardings, tree, "reshard out_shardings")
    outs = []
    for x, s in zip(leaves, flat):
        s = sharding_rules.canonical_out_sharding(
            check_sharding_leaf(s, "reshard"), get_aval(x).ndim, "`out_sharding` argument of reshard")
        outs.append(reshard_p.bind(x, out_sharding=s))
    return jax.tree_util.tree_unflatten(tree, outs)


class _MeshSwitch:
    """The mesh in context (or the shardings' mesh) with `axes` turned to another
    axis type, for auto_axes and explicit_axes."""

    def __init__(self, axes, axis_type, what, shardings=None):
        context = jax.sharding.get_abstract_mesh()
        named = {s.mesh.abstract_mesh for s in jax.tree_util.tree_leaves(shardings)
                 if isinstance(s, NamedSharding)}
        if len(named) > 1:
            raise ValueError(f"Shardings passed to {what} should have the same mesh. Got "
                             f"meshes {sorted(map(str, named))}")
        given = next(iter(named), None)
        if given is not None and not context.empty and given != context:
            raise ValueError(f"Context mesh {context} must match the mesh passed to "
                             f"shardings {given}. Recommended approach is to use "
                             "`jax.set_mesh` context manager.")
        self.prev = context if not context.empty else given
        if self.prev is None:
            self.new = None
            return
        axes = self.prev.axis_names if axes is None else axes
        self.axes = axes if isinstance(axes, tuple) else (axes,)
        if any(self.prev._name_to_type[a] == jax.sharding.AxisType.Manual
               for a in self.axes):
            raise NotImplementedError("Going from `Manual` AxisType to `Auto` or `Explicit` "
                                      "AxisType is not allowed.")
        self.new = self.prev.update_axis_types({a: axis_type for a in self.axes})


def _explicit_spec(x, mesh):
    """x's type's spec keeping only the axes that are Explicit on `mesh`."""
    explicit = set(mesh.explicit_axes)
    return PartitionSpec(*[sharding_rules.entry_of(
        n for n in sharding_rules.entry_names(e) if n in explicit)
        for e in sharding_rules.spec(get_aval(x))])


def _keyword(kwargs, name, given):
    if given is not None:
        return given
    if name not in kwargs:
        raise TypeError(f"Missing required keyword argument: '{name}'")
    return kwargs.pop(name)


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    """`f` run with the mesh axes `axes` (all by default) of the mesh in context taken
    out of the types: its arguments lose those axes from their types, and its results
    are resharded to `out_sharding` (given here or as a keyword of the call).

    Where JAX leaves the values inside to the partitioner (the axes turned Auto), impl
    types them as replicated over those axes, and lowers them so: the same values and
    result types, with XLA free only where the types leave it free."""
    if f is None:
        return lambda g: auto_axes(g, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        target = _keyword(kwargs, "out_sharding", out_sharding)
        switch = _MeshSwitch(axes, jax.sharding.AxisType.Auto, "auto_axes", target)
        if switch.new is None or set(switch.prev.auto_axes) == set(switch.axes):
            return f(*args, **kwargs)
        args = reshard(args, jax.tree_util.tree_map(
            lambda a: NamedSharding(switch.prev, _explicit_spec(a, switch.new)), args))
        return reshard(f(*args, **kwargs), target)
    return wrapped


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    """`f` run with the mesh axes `axes` (all by default) of the mesh in context turned
    Explicit: its arguments are resharded to `in_sharding` (given here or as a keyword of
    the call), and the results keep only the axes Explicit outside."""
    if f is None:
        return lambda g: explicit_axes(g, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        source = _keyword(kwargs, "in_sharding", in_sharding)
        switch = _MeshSwitch(axes, jax.sharding.AxisType.Explicit, "explicit_axes")
        if switch.new is None:
            raise ValueError("Context mesh cannot be empty. Please use `jax.set_mesh` API to "
                             "enter into a mesh context when using `explicit_axes` API.")
        with jax.sharding.use_abstract_mesh(switch.new):
            args = reshard(args, source)
            out = f(*args, **kwargs)
        return reshard(out, jax.tree_util.tree_map(
            lambda o: _explicit_spec(o, switch.prev), out))
    return wrapped


def with_sharding_constraint(x, shardings):
    """Ask XLA's partitioner to shard `x` (a pytree) as `shardings` (a Sharding or
    PartitionSpec, or a pytree prefix of `x` with those as leaves)."""
    leaves, tree = jax.tree_util.tree_flatten(x)
    flat = broadcast_prefix(shardings, tree, "with_sharding_constraint shardings")
    outs = [sharding_constraint_p.bind(v, sharding=check_sharding_leaf(
        s, "with_sharding_constraint")) for v, s in zip(leaves, flat)]
    return jax.tree_util.tree_unflatten(tree, outs)


def _is_sharding_leaf(s):
    return s is None or isinstance(s, (Sharding, PartitionSpec))


def broadcast_prefix(prefix, tree, what):
    """One entry of the pytree `prefix` (shardings or specs, None counting as a leaf) per
    leaf of the structure `tree`."""
    proxy = jax.tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
    out = []
    try:
        jax.tree_util.tree_map(lambda s, sub: out.extend([s] * len(jax.tree_util.tree_leaves(sub))),
                               prefix, proxy, is_leaf=_is_sharding_leaf)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{what} must be a tree prefix of the corresponding value "
                         f"(structure {tree}), got {prefix!r}") from e
    return out


def prefix_key_paths(prefix, tree):
    """For each leaf of the structure `tree`, where in `prefix` its entry is (as
    `keystr` writes a key path: `[0]`, `['a']`, or empty for the root)."""
    paths = jax.tree_util.tree_map_with_path(lambda p, _: jax.tree_util.keystr(p), prefix,
                                             is_leaf=_is_sharding_leaf)
    return broadcast_prefix(paths, tree, "prefix")
