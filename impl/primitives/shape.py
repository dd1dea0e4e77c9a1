"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, expand_dims,
and the structural operations the interpreters need (registered in `core.ops`)."""
from __future__ import annotations

import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import ad, batching
from impl.interpreters.ad import Zero
from impl.primitives import sharding_rules
from impl.primitives._define import define


# ----------------------------------------------------------- broadcast_in_dim

def _broadcast_in_dim_aval(x, *, shape, broadcast_dimensions, out_sharding=None):
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"broadcast_in_dim: broadcast_dimensions {broadcast_dimensions} must "
                        f"have one entry per operand axis (operand shape {x.shape})")
    for i, d in enumerate(broadcast_dimensions):
        if not 0 <= d < len(shape) or x.shape[i] not in (1, shape[d]):
            raise TypeError(f"broadcast_in_dim: operand shape {x.shape} cannot be broadcast "
                            f"to {shape} along dimensions {broadcast_dimensions}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def broadcast_in_dim(operand, shape, broadcast_dimensions, *, out_sharding=None):
    """`out_sharding`: the result's explicit sharding (a PartitionSpec or NamedSharding),
    when the operand's does not say it; the parameter is left out of the equation
    otherwise."""
    shape = tuple(int(d) for d in shape)
    out_sharding = sharding_rules.canonical_out_sharding(out_sharding, len(shape))
    broadcast_dimensions = tuple(int(d) for d in broadcast_dimensions)
    aval = get_aval(operand)
    if (aval.shape == shape and broadcast_dimensions == tuple(range(len(shape)))
            and out_sharding is None):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape,
                                   broadcast_dimensions=broadcast_dimensions,
                                   **_sharding_param(out_sharding))


def _sharding_param(out_sharding):
    return {} if out_sharding is None else {"out_sharding": out_sharding}


def _broadcast_in_dim_sharding(x, *, shape, broadcast_dimensions, out_sharding=None):
    if out_sharding is not None:
        return out_sharding
    return sharding_rules.broadcast_in_dim(x, shape=shape,
                                           broadcast_dimensions=broadcast_dimensions)


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions, out_sharding=None):
    if type(ct) is Zero:
        return [None]
    in_shape = x.aval.shape
    if x.aval.explicit_sharding is None:
        # As JAX transposes it: summed over every axis but the operand's axes of other
        # sizes than 1, those of size 1 put back as a broadcast.
        unit = tuple(i for i, n in enumerate(in_shape) if n == 1)
        kept = {d for i, d in enumerate(broadcast_dimensions) if i not in unit}
        summed = reduce_sum(ct, tuple(d for d in range(len(shape)) if d not in kept))
        return [expand_dims(summed, unit) if unit else summed]
    new_axes = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    stretched = tuple(d for i, d in enumerate(broadcast_dimensions)
                      if in_shape[i] == 1 and shape[d] != 1)
    summed = reduce_sum(ct, tuple(sorted(new_axes + stretched)))
    return [reshape(summed, in_shape, out_sharding=core.cotangent_sharding(x.aval))]


def _broadcast_in_dim_batch(axis_data, vals, dims, *, shape, broadcast_dimensions,
                            out_sharding=None):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    new_shape = (axis_data.size,) + tuple(shape)
    new_dims = (0,) + tuple(b + 1 for b in broadcast_dimensions)
    return broadcast_in_dim_p.bind(
        x, shape=new_shape, broadcast_dimensions=new_dims,
        **_sharding_param(batch_explicit_sharding(out_sharding, axis_data, x, 0))), 0


def batch_explicit_sharding(sharding, axis_data, batched, batch_dim, dim=0):
    """A result's explicit sharding (an `out_sharding` parameter) under vmap: the batch
    axis at `dim`, sharded as the batched operand is along its batch axis `batch_dim`
    (as in JAX, types take the mapped inputs' Explicit axes, not `spmd_axis_name`)."""
    if sharding is None:
        return None
    entry = sharding_rules.spec(get_aval(batched))[batch_dim]
    entries = list(sharding.spec.partitions)
    entries.insert(dim, entry)
    return sharding.update(spec=sharding.spec.update(partitions=entries))


broadcast_in_dim_p = define(
    "broadcast_in_dim", abstract_eval=_broadcast_in_dim_aval,
    lowering=lambda x, *, shape, broadcast_dimensions, out_sharding=None:
        lax.broadcast_in_dim(x, shape, broadcast_dimensions, out_sharding=out_sharding),
    jvp=ad.linear_jvp, transpose=_broadcast_in_dim_transpose,
    batching=_broadcast_in_dim_batch, sharding_rule=_broadcast_in_dim_sharding,
    unreduced_rule=sharding_rules.given_or_kept, on_context_mesh=True)


def _broadcast_in_dim_printed_params(eqn, namer):
    """As JAX prints it: the shape and sharding are the result's type, and no
    broadcast_dimensions when there are none."""
    dims = eqn.params["broadcast_dimensions"]
    return [("broadcast_dimensions", dims)] if dims else []


core.pp_params_rules[broadcast_in_dim_p] = _broadcast_in_dim_printed_params


# -------------------------------------------------------------------- reshape

def _reshape_aval(x, *, new_sizes, out_sharding=None):
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise TypeError(f"reshape: cannot reshape array of shape {x.shape} (size {x.size}) "
                        f"into shape {new_sizes}")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def reshape(operand, new_sizes, dimensions=None, *, out_sharding=None):
    """`out_sharding`: the result's explicit sharding (a PartitionSpec or NamedSharding),
    for reshapes whose sharding does not follow from the operand's."""
    if dimensions is not None:
        raise NotImplementedError("impl.lax.reshape: dimensions= is not supported "
                                  f"(got {dimensions!r}); transpose first")
    new_sizes = tuple(int(d) for d in new_sizes)
    out_sharding = sharding_rules.canonical_out_sharding(out_sharding, len(new_sizes),
                                                         "`out_sharding` argument of reshape")
    aval = get_aval(operand)
    if aval.shape == new_sizes and (out_sharding is None
                                    or out_sharding == aval.explicit_sharding):
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes, **_sharding_param(out_sharding))


def _reshape_batch(axis_data, vals, dims, *, new_sizes, out_sharding=None):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return reshape_p.bind(x, new_sizes=(axis_data.size,) + tuple(new_sizes),
                          **_sharding_param(batch_explicit_sharding(out_sharding,
                                                                    axis_data, x, 0))), 0


def _reshape_sharding(x, *, new_sizes, out_sharding=None):
    if out_sharding is not None:
        return out_sharding
    return sharding_rules.reshape(x, new_sizes=new_sizes)


def _operand_layout(ct, x, **params):
    """Transpose of a layout change: the cotangent takes the operand's shape and type."""
    return [reshape(ct, x.aval.shape, out_sharding=core.cotangent_sharding(x.aval))]


def _reshape_lower(x, *, new_sizes, out_sharding=None):
    aval = get_aval(x)
    if out_sharding is None and aval.explicit_sharding is not None:
        # impl's rule follows more reshapes than JAX's (several axes split or merged at
        # once): tell JAX the result's sharding rather than let it refuse.
        out_sharding = NamedSharding(aval.explicit_sharding.mesh, PartitionSpec(
            *sharding_rules.reshape(aval, new_sizes=new_sizes), unreduced=aval.unreduced,
            reduced=aval.reduced))
    return lax.reshape(x, new_sizes, out_sharding=out_sharding)


reshape_p = define(
    "reshape", abstract_eval=_reshape_aval,
    lowering=_reshape_lower,
    jvp=ad.linear_jvp, transpose=_operand_layout, batching=_reshape_batch,
    sharding_rule=_reshape_sharding, unreduced_rule=sharding_rules.reshape_unreduced)


def _reshape_printed_params(eqn, namer):
    """As JAX prints reshape: its parameters `dimensions` (None: impl's reshape takes
    none), `new_sizes` and `sharding` (the requested result sharding, or None)."""
    return [("dimensions", None), ("new_sizes", eqn.params["new_sizes"]),
            ("sharding", eqn.params.get("out_sharding"))]


core.pp_params_rules[reshape_p] = _reshape_printed_params


# ------------------------------------------------------------------ transpose

def _transpose_aval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"transpose: permutation {permutation} is not a permutation of the "
                        f"axes of an array of rank {x.ndim}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


def transpose(operand, permutation):
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(permutation))):
        return operand
    return transpose_p.bind(operand, permutation=permutation)


def _transpose_batch(axis_data, vals, dims, *, permutation):
    (x,), (d,) = vals, dims
    perm = (d,) + tuple(p + (p >= d) for p in permutation)
    return transpose_p.bind(x, permutation=perm), 0


transpose_p = define(
    "transpose", abstract_eval=_transpose_aval,
    lowering=lambda x, *, permutation: lax.transpose(x, permutation),
    jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, permutation: [transpose(ct, core.argsort(permutation))],
    batching=_transpose_batch, sharding_rule=sharding_rules.transpose,
    unreduced_rule=sharding_rules.keeps_unreduced)


# ------------------------------------------------------ squeeze / expand_dims

def _squeeze_aval(x, *, dimensions):
    for d in dimensions:
        if not 0 <= d < x.ndim or x.shape[d] != 1:
            raise TypeError(f"squeeze: dimension {d} of shape {x.shape} is not of size 1")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions),
                       x.dtype, x.weak_type)


def squeeze(array, dimensions):
    ndim = get_aval(array).ndim
    dimensions = tuple(sorted(int(d) % ndim if ndim else int(d) for d in dimensions))
    if not dimensions:
        return array
    return squeeze_p.bind(array, dimensions=dimensions)


def _squeeze_batch(axis_data, vals, dims, *, dimensions):
    """The batch axis moved to the front, every squeezed axis shifted past it."""
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return squeeze_p.bind(x, dimensions=tuple(a + 1 for a in dimensions)), 0


squeeze_p = define(
    "squeeze", abstract_eval=_squeeze_aval,
    lowering=lambda x, *, dimensions: lax.squeeze(x, dimensions),
    jvp=ad.linear_jvp, transpose=_operand_layout, batching=_squeeze_batch,
    sharding_rule=sharding_rules.squeeze, unreduced_rule=sharding_rules.keeps_unreduced)


def expand_dims(array, dimensions):
    """`array` with axes of size 1 inserted at `dimensions`: a broadcast_in_dim, as
    jax.lax.expand_dims stages it."""
    aval = get_aval(array)
    out_ndim = aval.ndim + len(dimensions)
    dimensions = sorted(int(d) % out_ndim for d in dimensions)
    shape = list(aval.shape)
    for d in dimensions:
        shape.insert(d, 1)
    kept = tuple(i for i in range(out_ndim) if i not in dimensions)
    return broadcast_in_dim(array, tuple(shape), kept)


# ------------------------------------------------------------------ reduce_sum

def _reduce_aval(x, *, axes):
    for a in axes:
        if not 0 <= a < x.ndim:
            raise TypeError(f"reduction axis {a} out of range for shape {x.shape}")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in axes),
                       x.dtype, x.weak_type)


def reduce_sum(operand, axes):
    axes = tuple(sorted(int(a) for a in axes))
    if not axes:
        return operand
    return reduce_sum_p.bind(operand, axes=axes)


def _reduce_sum_transpose(ct, x, *, axes):
    if type(ct) is Zero:
        return [None]
    shape = x.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [broadcast_in_dim(ct, shape, kept, out_sharding=core.cotangent_sharding(x.aval))]


reduce_sum_p = define(
    "reduce_sum", abstract_eval=_reduce_aval,
    lowering=lambda x, *, axes: lax.reduce_sum(x, axes),
    jvp=ad.linear_jvp, transpose=_reduce_sum_transpose, batching=batching.reducer,
    sharding_rule=sharding_rules.drop_axes("axes"), unreduced_rule=sharding_rules.keeps_unreduced)
# As JAX prints it, with its parameter out_sharding (impl's reduce_sum takes none: its
# result's sharding follows from the operand's)
core.pp_params_rules[reduce_sum_p] = lambda eqn, namer: [("axes", eqn.params["axes"]),
                                                         ("out_sharding", None)]


# --------------------------------------------------- ops for the interpreters

core.ops.broadcast_in_dim = broadcast_in_dim
core.ops.transpose = transpose
core.ops.reshape = reshape
core.ops.reduce_sum = reduce_sum
