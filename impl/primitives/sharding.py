"""Sharding annotations: with_sharding_constraint, and how a sharding gains a batch axis.

impl never places data on devices itself. A sharding is a `jax.sharding` object
(`NamedSharding`, or a `PartitionSpec` read against the mesh in context) carried as a
parameter of the IR and handed to XLA's SPMD partitioner when the program is lowered
through `jax.jit`. Under vmap a sharding gains an entry for the batch axis: the mesh
axes named by `vmap(..., spmd_axis_name=...)`, or otherwise none (jit's shardings) or
an unconstrained one (a sharding constraint leaves the batch axis to the partitioner).
"""
from __future__ import annotations

import jax
from jax.sharding import NamedSharding, PartitionSpec, Sharding

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
    """`spec` with `entry` inserted at array axis `dim` (padded with None to reach it)."""
    entries = tuple(spec) + (None,) * max(0, dim - len(spec))
    return P(*entries[:dim], entry, *entries[dim:])


def spec_of(sharding):
    """The PartitionSpec of a NamedSharding or PartitionSpec, else None."""
    if isinstance(sharding, PartitionSpec):
        return sharding
    if isinstance(sharding, NamedSharding):
        return sharding.spec
    return None


def check_spmd_unused(spmd_name, spec, what):
    used = {n for entry in spec for n in spec_names(entry)}
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
    new = batch_sharding(sharding, d, axis_data.spmd_name, what="with_sharding_constraint",
                         unmapped_entry=P.UNCONSTRAINED)
    return sharding_constraint_p.bind(x, sharding=new), d


sharding_constraint_p = define(
    "sharding_constraint", abstract_eval=_constraint_aval,
    lowering=lambda x, *, sharding: jax.lax.with_sharding_constraint(x, sharding),
    jvp=ad.linear_jvp, transpose=_constraint_transpose, batching=_constraint_batch,
    sharding_rule=sharding_rules.same_as_operand)


# ----------------------------------------------------------------------- reshard

def _reshard_rule(x, *, out_sharding):
    return out_sharding


def _reshard_transpose(ct, x, *, out_sharding):
    """The cotangent goes back to the operand's sharding."""
    if type(ct) is Zero:
        return [None]
    back = x.aval.explicit_sharding
    if back is None:
        back = NamedSharding(out_sharding.mesh, P(*[None] * x.aval.ndim))
    return [reshard_p.bind(ct, out_sharding=back)]


def _reshard_batch(axis_data, vals, dims, *, out_sharding):
    (x,), (d,) = vals, dims
    entries = list(out_sharding.spec)
    entries.insert(d, sharding_rules.spec(get_aval(x))[d] if axis_data.spmd_name is None
                   else spec_entry(axis_data.spmd_name))
    return reshard_p.bind(x, out_sharding=out_sharding.update(spec=P(*entries))), d


def _reshard_lower(x, *, out_sharding):
    return jax.sharding.reshard(x, out_sharding)


reshard_p = define(
    "reshard", abstract_eval=lambda x, *, out_sharding: x.update(),
    lowering=_reshard_lower, jvp=ad.linear_jvp, transpose=_reshard_transpose,
    batching=_reshard_batch, sharding_rule=_reshard_rule)


def reshard(xs, out_shardings):
    """`xs` (a pytree) with their types' shardings changed to `out_shardings` (a
    PartitionSpec read against the mesh in context, or a NamedSharding, or a pytree
    prefix of `xs` with those as leaves): XLA moves the data between devices."""
    leaves, tree = jax.tree_util.tree_flatten(xs)
    flat = broadcast_prefix(out_shardings, tree, "reshard out_shardings")
    outs = []
    for x, s in zip(leaves, flat):
        s = sharding_rules.canonical_out_sharding(
            check_sharding_leaf(s, "reshard"), get_aval(x).ndim, "reshard out_shardings")
        outs.append(reshard_p.bind(x, out_sharding=s))
    return jax.tree_util.tree_unflatten(tree, outs)


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
