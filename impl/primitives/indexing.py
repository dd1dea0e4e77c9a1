"""Indexing primitives: concatenate, pad, slice, rev, dynamic_slice,
dynamic_update_slice, gather, scatter_add, scatter, scatter_mul, scatter_min and
scatter_max, each with all of its rules.

All of them are linear in their array operand(s) (indices are never differentiated).
Their transposes pair up: slice <-> pad, dynamic_slice <-> dynamic_update_slice,
gather <-> scatter_add. Batching a gather or scatter adds the vmapped axis either as a
window dimension (only the operand is batched) or as an operand/indices *batching
dimension* (the indices are batched), so no iota or per-example loop is needed; the
same trick turns dynamic_slice / dynamic_update_slice with batched indices into a
gather / scatter.
"""
from __future__ import annotations

import builtins

import numpy as np
from jax import lax

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import ad, batching
from impl.interpreters.ad import Zero, is_undefined_primal
from impl.primitives import _operand_dtypes as dt
from impl.primitives import elementwise as ew
from impl.primitives import shape as sh
from impl.primitives import sharding_rules
from impl.primitives._define import cast_to, define

GatherDimensionNumbers = lax.GatherDimensionNumbers
ScatterDimensionNumbers = lax.ScatterDimensionNumbers
GatherScatterMode = lax.GatherScatterMode


# ------------------------------------------------------------------ helpers

def _ints(xs):
    return tuple(int(x) for x in xs)


def _is_int_dtype(dtype):
    return np.dtype(dtype).kind in "iu"


def _zeros(aval):
    return core.ops.zeros(aval.strip_weak_type())


def _zeros_like_val(x):
    return core.ops.zeros(get_aval(x))


def _pad_mismatch(name, dtypes):
    return f"pad operand and padding_value must be same dtype: got {dtypes[0]} and {dtypes[1]}."


# Which operands share one dtype, in JAX's words (its scatters all say "scatter").
_CONCATENATE_DTYPES = dt.OperandDtypes(jnp_name="concatenate")
_PAD_DTYPES = dt.OperandDtypes(same=builtins.slice(0, 2), mismatch=_pad_mismatch)
_DYNAMIC_UPDATE_SLICE_DTYPES = dt.OperandDtypes(same=builtins.slice(0, 2))
_SCATTER_DTYPES = dt.OperandDtypes(same=builtins.slice(0, 3, 2), name="scatter")


def _check_scalar_indices(prim_name, idx_avals):
    for i, a in enumerate(idx_avals):
        if a.shape != () or not _is_int_dtype(a.dtype):
            raise TypeError(f"{prim_name}: start index {i} must be a scalar integer, got "
                            f"{a.str_short()}")


def _common_int_dtype(vals):
    dts = [get_aval(v).dtype for v in vals]
    return np.dtype(np.result_type(*dts)) if dts else np.dtype(np.int32)


# ----------------------------------------------------------------- concatenate

def _concatenate_aval(*operands, dimension):
    if not operands:
        raise TypeError("concatenate: needs at least one operand")
    nd = operands[0].ndim
    if nd == 0:
        raise TypeError("concatenate: operands must have rank >= 1, got scalars")
    if not 0 <= dimension < nd:
        raise TypeError(f"concatenate: dimension {dimension} out of range for operands of "
                        f"rank {nd}")
    for o in operands:
        if o.ndim != nd or any(a != b for i, (a, b) in enumerate(zip(o.shape, operands[0].shape))
                               if i != dimension):
            raise TypeError(f"concatenate: operand shapes must agree except along dimension "
                            f"{dimension}, got {', '.join(str(x.shape) for x in operands)}")
    (dtype, *_), weak = _CONCATENATE_DTYPES.check_lenient("concatenate", operands)
    shape = list(operands[0].shape)
    shape[dimension] = sum(o.shape[dimension] for o in operands)
    return ShapedArray(shape, dtype, weak)


def _concatenate_lower(*operands, dimension):
    dtypes, _ = _CONCATENATE_DTYPES.lenient([get_aval(o) for o in operands])
    return lax.concatenate([cast_to(o, d) for o, d in zip(operands, dtypes)], dimension)


def concatenate(operands, dimension):
    operands = tuple(operands)
    if len(operands) == 1:
        return operands[0]
    return concatenate_p.bind(*operands, dimension=int(dimension))


def _concatenate_transpose(ct, *operands, dimension):
    if type(ct) is Zero:
        return [None] * len(operands)
    outs, start = [], 0
    shape = get_aval(ct).shape
    for o in operands:
        size = (o.aval if is_undefined_primal(o) else get_aval(o)).shape[dimension]
        if is_undefined_primal(o):
            lo = [0] * len(shape)
            hi = list(shape)
            lo[dimension], hi[dimension] = start, start + size
            outs.append(slice(ct, lo, hi))
        else:
            outs.append(None)
        start += size
    return outs


def _concatenate_batch(axis_data, vals, dims, *, dimension):
    vals = [batching.matchaxis(axis_data.size, d, 0, v) for v, d in zip(vals, dims)]
    return concatenate_p.bind(*vals, dimension=dimension + 1), 0


concatenate_p = define(
    "concatenate", abstract_eval=_concatenate_aval, lowering=_concatenate_lower,
    jvp=ad.linear_jvp, transpose=_concatenate_transpose, batching=_concatenate_batch,
    sharding_rule=sharding_rules.concatenate, operand_dtypes=_CONCATENATE_DTYPES,
    unreduced_rule=sharding_rules.same_unreduced("operands"))


# ------------------------------------------------------------------------ pad

def _pad_aval(operand, padding_value, *, padding_config):
    if padding_value.shape != ():
        raise TypeError(f"pad: padding_value must be a scalar, got {padding_value.str_short()}")
    _PAD_DTYPES.check_lenient("pad", (operand, padding_value))
    if len(padding_config) != operand.ndim:
        raise TypeError(f"pad: padding_config {padding_config} needs one (lo, hi, interior) "
                        f"triple per axis of the operand of shape {operand.shape}")
    shape = []
    for d, (lo, hi, interior) in zip(operand.shape, padding_config):
        if interior < 0:
            raise TypeError(f"pad: interior padding must be >= 0, got {padding_config}")
        n = lo + hi + d + max(d - 1, 0) * interior
        if n < 0:
            raise TypeError(f"pad: padding_config {padding_config} gives a negative size for "
                            f"an operand of shape {operand.shape}")
        shape.append(n)
    return ShapedArray(shape, operand.dtype, operand.weak_type)


def _pad_lower(operand, padding_value, *, padding_config):
    return lax.pad(operand, cast_to(padding_value, get_aval(operand).dtype), padding_config)


def pad(operand, padding_value, padding_config):
    config = tuple(_ints(c) for c in padding_config)
    return pad_p.bind(operand, padding_value, padding_config=config)


def _pad_transpose(ct, operand, padding_value, *, padding_config):
    if type(ct) is Zero:
        return [None, None]
    ct_op = None
    if is_undefined_primal(operand) or is_undefined_primal(padding_value):
        # Undo the edges (negated lo/hi: a cropped edge comes back as zeros), then
        # take every (interior+1)-th element.
        unpad = tuple((-lo, -hi, 0) for lo, hi, _ in padding_config)
        t = pad(ct, np.zeros((), get_aval(ct).dtype), unpad)
        shape = get_aval(t).shape
        ct_op = slice(t, (0,) * len(shape), shape, tuple(i + 1 for _, _, i in padding_config))
    ct_pv = None
    if is_undefined_primal(padding_value):
        total = sh.reduce_sum(ct, tuple(range(get_aval(ct).ndim)))
        ct_pv = ew.sub(total, sh.reduce_sum(ct_op, tuple(range(get_aval(ct_op).ndim))))
    return [ct_op if is_undefined_primal(operand) else None, ct_pv]


def _pad_batch(axis_data, vals, dims, *, padding_config):
    x, pv = vals
    xd, pd = dims
    config = ((0, 0, 0),) + tuple(padding_config)
    if pd is None:
        x = batching.moveaxis(x, xd, 0)
        return pad_p.bind(x, pv, padding_config=config), 0
    # A batched padding value: pad with zeros, then select the padding value where a
    # padded mask of ones is False.
    x = batching.matchaxis(axis_data.size, xd, 0, x)
    zero = np.zeros((), get_aval(x).dtype)
    padded = pad_p.bind(x, zero, padding_config=config)
    out_shape = get_aval(padded).shape
    ones = np.ones(get_aval(x).shape[1:], np.bool_)
    mask = pad_p.bind(ones, np.zeros((), np.bool_), padding_config=tuple(padding_config))
    mask = sh.broadcast_in_dim(mask, out_shape, tuple(range(1, len(out_shape))))
    pv = batching.moveaxis(pv, pd, 0)
    pv = sh.broadcast_in_dim(ew.convert_element_type(pv, get_aval(x).dtype)
                             if get_aval(pv).dtype != get_aval(x).dtype else pv,
                             out_shape, (0,))
    return ew.select_n(mask, pv, padded), 0


pad_p = define("pad", abstract_eval=_pad_aval, lowering=_pad_lower, jvp=ad.linear_jvp,
               transpose=_pad_transpose, batching=_pad_batch,
               sharding_rule=sharding_rules.pad_rule, operand_dtypes=_PAD_DTYPES,
               unreduced_rule=sharding_rules.keeps_unreduced)


# ---------------------------------------------------------------------- slice

def _slice_aval(operand, *, start_indices, limit_indices, strides):
    n = operand.ndim
    if len(start_indices) != n or len(limit_indices) != n or (strides is not None and
                                                              len(strides) != n):
        raise TypeError(f"slice: start_indices {start_indices}, limit_indices "
                        f"{limit_indices} and strides {strides} must each have one entry per "
                        f"axis of the operand of shape {operand.shape}")
    strides = strides or (1,) * n
    shape = []
    for i, (d, s, l, st) in enumerate(zip(operand.shape, start_indices, limit_indices,
                                          strides)):
        if not 0 <= s <= l <= d:
            raise TypeError(f"slice: indices out of bounds on axis {i}: start_indices "
                            f"{start_indices}, limit_indices {limit_indices} must satisfy "
                            f"0 <= start <= limit <= size for operand shape {operand.shape}")
        if st < 1:
            raise TypeError(f"slice: strides must be positive, got {strides}")
        shape.append(-(-(l - s) // st))
    return ShapedArray(shape, operand.dtype, operand.weak_type)


def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001
    start_indices, limit_indices = _ints(start_indices), _ints(limit_indices)
    strides = None if strides is None else _ints(strides)   # as given: JAX prints them
    shape = get_aval(operand).shape
    if strides is None and start_indices == (0,) * len(shape) and limit_indices == shape:
        return operand
    return slice_p.bind(operand, start_indices=start_indices, limit_indices=limit_indices,
                        strides=strides)


def _slice_transpose(ct, operand, *, start_indices, limit_indices, strides):
    if type(ct) is Zero:
        return [None]
    in_shape = operand.aval.shape
    out_shape = get_aval(ct).shape
    strides = strides or (1,) * len(in_shape)
    if any(n == 0 for n in out_shape):
        return [_zeros(operand.aval)]
    config = []
    for d, s, n, st in zip(in_shape, start_indices, out_shape, strides):
        last = s + (n - 1) * st
        config.append((s, d - last - 1, st - 1))
    return [pad(ct, np.zeros((), get_aval(ct).dtype), config)]


def _slice_batch(axis_data, vals, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = vals, dims
    size = get_aval(x).shape[d]
    start = start_indices[:d] + (0,) + start_indices[d:]
    limit = limit_indices[:d] + (size,) + limit_indices[d:]
    st = None if strides is None else strides[:d] + (1,) + strides[d:]
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=st), d


slice_p = define(
    "slice", abstract_eval=_slice_aval,
    lowering=lambda x, *, start_indices, limit_indices, strides:
        lax.slice(x, start_indices, limit_indices, strides),
    jvp=ad.linear_jvp, transpose=_slice_transpose, batching=_slice_batch,
    sharding_rule=sharding_rules.slice_rule, unreduced_rule=sharding_rules.keeps_unreduced)


# ------------------------------------------------------------------------ rev

def _rev_aval(operand, *, dimensions):
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < operand.ndim
                                                      for d in dimensions):
        raise TypeError(f"rev: dimensions {dimensions} must be distinct axes of the operand "
                        f"of shape {operand.shape}")
    return operand


def rev(operand, dimensions):
    nd = get_aval(operand).ndim
    dims = tuple(sorted(int(d) % nd if nd else int(d) for d in dimensions))
    if not dims:
        return operand
    return rev_p.bind(operand, dimensions=dims)


def _rev_batch(axis_data, vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    return rev_p.bind(x, dimensions=tuple(a + (a >= d) for a in dimensions)), d


rev_p = define(
    "rev", abstract_eval=_rev_aval, lowering=lambda x, *, dimensions: lax.rev(x, dimensions),
    jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, dimensions:
        [None if type(ct) is Zero else rev_p.bind(ct, dimensions=dimensions)],
    batching=_rev_batch,
    sharding_rule=sharding_rules.same_as_operand)


# -------------------------------------------------------------- dynamic_slice

def _dynamic_slice_aval(operand, *indices, slice_sizes):
    if len(indices) != operand.ndim or len(slice_sizes) != operand.ndim:
        raise TypeError(f"dynamic_slice: got {len(indices)} start indices and slice_sizes "
                        f"{slice_sizes} for an operand of shape {operand.shape}; both need "
                        f"one entry per axis")
    _check_scalar_indices("dynamic_slice", indices)
    for d, s in zip(operand.shape, slice_sizes):
        if not 0 <= s <= d:
            raise TypeError(f"dynamic_slice: slice_sizes {slice_sizes} must fit in the "
                            f"operand shape {operand.shape}")
    return ShapedArray(slice_sizes, operand.dtype, operand.weak_type)


def _same_int_type(indices):
    """jax.lax wants start indices of one integer type."""
    dtype = _common_int_dtype(indices)
    return [cast_to(i, dtype) for i in indices]


def _dynamic_slice_lower(operand, *indices, slice_sizes):
    return lax.dynamic_slice(operand, _same_int_type(indices), slice_sizes,
                             allow_negative_indices=False)


def _dynamic_slice_transpose(ct, operand, *indices, slice_sizes):
    if any(is_undefined_primal(i) for i in indices):
        raise TypeError("dynamic_slice is not linear in its start indices")
    if type(ct) is Zero:
        return [None] * (1 + len(indices))
    zeros = _zeros(operand.aval)
    return [dynamic_update_slice_p.bind(zeros, ct, *indices)] + [None] * len(indices)


def _stack_scalar_indices(indices, idims, size):
    """The per-axis scalar indices as one (size, n) integer array (batch axis first)."""
    dtype = _common_int_dtype(indices)
    cols = []
    for i, d in zip(indices, idims):
        if get_aval(i).dtype != dtype:
            i = ew.convert_element_type(i, dtype)
        i = batching.matchaxis(size, d, 0, i)
        cols.append(sh.reshape(i, (size, 1)))
    return concatenate(cols, 1) if len(cols) > 1 else cols[0]


def _dynamic_slice_batch(axis_data, vals, dims, *, slice_sizes):
    x, *indices = vals
    xd, *idims = dims
    n = len(indices)
    size = axis_data.size
    if all(d is None for d in idims):
        x = batching.moveaxis(x, xd, 0)
        zero = np.zeros((), _common_int_dtype(indices))
        return dynamic_slice_p.bind(x, zero, *indices,
                                    slice_sizes=(size,) + tuple(slice_sizes)), 0
    idx = _stack_scalar_indices(indices, idims, size)
    if xd is None:
        dnums = GatherDimensionNumbers(offset_dims=tuple(range(1, n + 1)),
                                       collapsed_slice_dims=(),
                                       start_index_map=tuple(range(n)))
        sizes = tuple(slice_sizes)
    else:
        x = batching.moveaxis(x, xd, 0)
        dnums = GatherDimensionNumbers(offset_dims=tuple(range(1, n + 1)),
                                       collapsed_slice_dims=(),
                                       start_index_map=tuple(range(1, n + 1)),
                                       operand_batching_dims=(0,),
                                       start_indices_batching_dims=(0,))
        sizes = (1,) + tuple(slice_sizes)
    out = gather_p.bind(x, idx, dimension_numbers=dnums, slice_sizes=sizes,
                        indices_are_sorted=False, unique_indices=False,
                        mode=GatherScatterMode.CLIP, fill_value=None)
    return out, 0


dynamic_slice_p = define(
    "dynamic_slice", abstract_eval=_dynamic_slice_aval, lowering=_dynamic_slice_lower,
    jvp=ad.linear_in_jvp((0,)), transpose=_dynamic_slice_transpose,
    batching=_dynamic_slice_batch,
    sharding_rule=sharding_rules.dynamic_slice,
    unreduced_rule=sharding_rules.unary_unreduced("dynamic_slice"))


# -------------------------------------------------------- dynamic_update_slice

def _dynamic_update_slice_aval(operand, update, *indices):
    if len(indices) != operand.ndim or update.ndim != operand.ndim:
        raise TypeError(f"dynamic_update_slice: got {len(indices)} start indices and an "
                        f"update of shape {update.shape} for an operand of shape "
                        f"{operand.shape}; both need one entry per operand axis")
    _check_scalar_indices("dynamic_update_slice", indices)
    if any(u > d for u, d in zip(update.shape, operand.shape)):
        raise TypeError(f"dynamic_update_slice: update shape {update.shape} must fit in the "
                        f"operand shape {operand.shape}")
    _DYNAMIC_UPDATE_SLICE_DTYPES.check_lenient("dynamic_update_slice",
                                               (operand, update, *indices))
    sharding_rules.check_update_typed_as_operand(operand, update)
    return ShapedArray(operand.shape, operand.dtype, operand.weak_type)


def _dynamic_update_slice_lower(operand, update, *indices):
    return lax.dynamic_update_slice(operand, cast_to(update, get_aval(operand).dtype),
                                    _same_int_type(indices), allow_negative_indices=False)


def _dynamic_update_slice_transpose(ct, operand, update, *indices):
    if any(is_undefined_primal(i) for i in indices):
        raise TypeError("dynamic_update_slice is not linear in its start indices")
    if type(ct) is Zero:
        return [None] * (2 + len(indices))
    ct_op = ct_up = None
    if is_undefined_primal(operand):
        upd_aval = update.aval if is_undefined_primal(update) else get_aval(update)
        ct_op = dynamic_update_slice_p.bind(ct, _zeros(upd_aval.update(dtype=get_aval(ct).dtype)),
                                            *indices)
    if is_undefined_primal(update):
        ct_up = dynamic_slice_p.bind(ct, *indices, slice_sizes=update.aval.shape)
    return [ct_op, ct_up] + [None] * len(indices)


def _dynamic_update_slice_batch(axis_data, vals, dims):
    x, upd, *indices = vals
    xd, ud, *idims = dims
    size = axis_data.size
    x = batching.matchaxis(size, xd, 0, x)
    upd = batching.matchaxis(size, ud, 0, upd)
    if all(d is None for d in idims):
        zero = np.zeros((), _common_int_dtype(indices))
        return dynamic_update_slice_p.bind(x, upd, zero, *indices), 0
    n = len(indices)
    idx = _stack_scalar_indices(indices, idims, size)
    dnums = ScatterDimensionNumbers(update_window_dims=tuple(range(1, n + 1)),
                                    inserted_window_dims=(),
                                    scatter_dims_to_operand_dims=tuple(range(1, n + 1)),
                                    operand_batching_dims=(0,),
                                    scatter_indices_batching_dims=(0,))
    out = scatter_p.bind(x, idx, upd, dimension_numbers=dnums, indices_are_sorted=True,
                         unique_indices=True, mode=GatherScatterMode.CLIP)
    return out, 0


dynamic_update_slice_p = define(
    "dynamic_update_slice", abstract_eval=_dynamic_update_slice_aval,
    lowering=_dynamic_update_slice_lower, jvp=ad.linear_in_jvp((0, 1)),
    transpose=_dynamic_update_slice_transpose, batching=_dynamic_update_slice_batch,
    sharding_rule=sharding_rules.dynamic_update_slice,
    unreduced_rule=sharding_rules.dynamic_update_slice_unreduced,
    operand_dtypes=_DYNAMIC_UPDATE_SLICE_DTYPES)


# --------------------------------------------------------------------- gather

def _sorted_unique_in(prim, what, dims, n, shape):
    if tuple(sorted(set(dims))) != tuple(dims) or any(not 0 <= d < n for d in dims):
        raise TypeError(f"{prim}: {what} {tuple(dims)} must be sorted, distinct and in "
                        f"range for shape {shape}")


def _check_index_vectors(name, operand, indices, dn, map_name, batch_name):
    """What gather and scatter both require of their dimension numbers `dn`: the last axis
    of `indices` holds vectors indexing the operand axes `dn.<map_name>` (distinct, not
    batching axes), and the indices' axes `dn.<batch_name>` pair with the operand's
    batching axes, of equal sizes."""
    index_map, indices_batching = getattr(dn, map_name), getattr(dn, batch_name)
    nd = operand.ndim
    if indices.shape[-1] != len(index_map):
        raise TypeError(f"{name}: the last axis of indices (shape {indices.shape}) must have "
                        f"size len({map_name}) = {len(index_map)}")
    if len(set(index_map)) != len(index_map) or any(
            not 0 <= d < nd or d in dn.operand_batching_dims for d in index_map):
        raise TypeError(f"{name}: {map_name} {index_map} must be distinct operand axes "
                        f"(shape {operand.shape}) outside operand_batching_dims")
    if len(indices_batching) != len(dn.operand_batching_dims):
        raise TypeError(f"{name}: operand_batching_dims and {batch_name} must have the same "
                        f"length")
    for od, idim in zip(dn.operand_batching_dims, indices_batching):
        if not 0 <= idim < indices.ndim - 1 or operand.shape[od] != indices.shape[idim]:
            raise TypeError(f"{name}: batching dims do not match: operand shape "
                            f"{operand.shape} dims {dn.operand_batching_dims}, indices shape "
                            f"{indices.shape} dims {indices_batching}")


def _gather_aval(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                 unique_indices, mode, fill_value):
    dn = dimension_numbers
    name = "gather"
    if not _is_int_dtype(indices.dtype):
        raise TypeError(f"{name}: indices must be integers, got {indices.str_short()}")
    if indices.ndim < 1:
        raise TypeError(f"{name}: indices must have rank >= 1 (the last axis holds the "
                        f"index vectors), got shape {indices.shape}")
    nd = operand.ndim
    if len(slice_sizes) != nd:
        raise TypeError(f"{name}: slice_sizes {slice_sizes} needs one entry per axis of the "
                        f"operand of shape {operand.shape}")
    for i, (s, d) in enumerate(zip(slice_sizes, operand.shape)):
        if not 0 <= s <= d:
            raise TypeError(f"{name}: slice_sizes {slice_sizes} must fit in the operand "
                            f"shape {operand.shape} (axis {i})")
    _sorted_unique_in(name, "collapsed_slice_dims", dn.collapsed_slice_dims, nd, operand.shape)
    _sorted_unique_in(name, "operand_batching_dims", dn.operand_batching_dims, nd,
                      operand.shape)
    for d in dn.collapsed_slice_dims + dn.operand_batching_dims:
        if slice_sizes[d] > 1:
            raise TypeError(f"{name}: slice_sizes {slice_sizes} must be <= 1 on collapsed "
                            f"and batching dims {dn.collapsed_slice_dims + dn.operand_batching_dims}")
    if set(dn.collapsed_slice_dims) & set(dn.operand_batching_dims):
        raise TypeError(f"{name}: collapsed_slice_dims and operand_batching_dims overlap")
    _check_index_vectors(name, operand, indices, dn, "start_index_map",
                         "start_indices_batching_dims")
    window = [slice_sizes[i] for i in range(nd)
              if i not in dn.collapsed_slice_dims and i not in dn.operand_batching_dims]
    if len(dn.offset_dims) != len(window):
        raise TypeError(f"{name}: offset_dims {dn.offset_dims} must have one entry per "
                        f"operand axis that is neither collapsed nor batching "
                        f"({len(window)} for operand shape {operand.shape})")
    batch = list(indices.shape[:-1])
    out_rank = len(window) + len(batch)
    _sorted_unique_in(name, "offset_dims", dn.offset_dims, out_rank, f"rank {out_rank} output")
    shape = []
    wi = bi = 0
    for i in range(out_rank):
        if i in dn.offset_dims:
            shape.append(window[wi])
            wi += 1
        else:
            shape.append(batch[bi])
            bi += 1
    return ShapedArray(shape, operand.dtype, operand.weak_type)


def _gather_lower(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                  unique_indices, mode, fill_value):
    return lax.gather(operand, indices, dimension_numbers, slice_sizes,
                      indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                      mode=mode, fill_value=fill_value)


def _mode(mode):
    mode = GatherScatterMode.from_any(mode)
    if mode == GatherScatterMode.ONE_HOT:
        raise NotImplementedError("gather/scatter mode 'one_hot' is not supported by impl")
    return mode


def _gather_dnums(dn):
    if not isinstance(dn, GatherDimensionNumbers):
        raise TypeError(f"gather: dimension_numbers must be a jax.lax.GatherDimensionNumbers, "
                        f"got {type(dn).__name__}")
    return GatherDimensionNumbers(_ints(dn.offset_dims), _ints(dn.collapsed_slice_dims),
                                  _ints(dn.start_index_map), _ints(dn.operand_batching_dims),
                                  _ints(dn.start_indices_batching_dims))


def _scatter_dnums(dn):
    if not isinstance(dn, ScatterDimensionNumbers):
        raise TypeError(f"scatter: dimension_numbers must be a "
                        f"jax.lax.ScatterDimensionNumbers, got {type(dn).__name__}")
    return ScatterDimensionNumbers(_ints(dn.update_window_dims), _ints(dn.inserted_window_dims),
                                   _ints(dn.scatter_dims_to_operand_dims),
                                   _ints(dn.operand_batching_dims),
                                   _ints(dn.scatter_indices_batching_dims))


def _fill(fill_value):
    if fill_value is None:
        return None
    if isinstance(fill_value, core.Tracer):
        raise TypeError("gather: fill_value must be a static Python scalar, not a traced value")
    v = np.asarray(fill_value).item()
    return v


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    return gather_p.bind(operand, start_indices, dimension_numbers=_gather_dnums(dimension_numbers),
                         slice_sizes=_ints(slice_sizes),
                         indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices), mode=_mode(mode),
                         fill_value=_fill(fill_value))


def _gather_to_scatter_dnums(dn):
    return ScatterDimensionNumbers(update_window_dims=dn.offset_dims,
                                   inserted_window_dims=dn.collapsed_slice_dims,
                                   scatter_dims_to_operand_dims=dn.start_index_map,
                                   operand_batching_dims=dn.operand_batching_dims,
                                   scatter_indices_batching_dims=dn.start_indices_batching_dims)


def _scatter_to_gather(dn, operand_shape, updates_shape):
    """Gather dimension numbers and slice sizes that read back what a scatter writes."""
    gdn = GatherDimensionNumbers(offset_dims=dn.update_window_dims,
                                 collapsed_slice_dims=dn.inserted_window_dims,
                                 start_index_map=dn.scatter_dims_to_operand_dims,
                                 operand_batching_dims=dn.operand_batching_dims,
                                 start_indices_batching_dims=dn.scatter_indices_batching_dims)
    sizes, pos = [], 0
    for i in range(len(operand_shape)):
        if i in dn.inserted_window_dims or i in dn.operand_batching_dims:
            sizes.append(1)
        else:
            sizes.append(updates_shape[dn.update_window_dims[pos]])
            pos += 1
    return gdn, tuple(sizes)


def _gather_jvp(primals, tangents, *, dimension_numbers, slice_sizes, indices_are_sorted,
                unique_indices, mode, fill_value):
    x, idx = primals
    tx = tangents[0]
    params = dict(dimension_numbers=dimension_numbers, slice_sizes=slice_sizes,
                  indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                  mode=mode)
    out = gather_p.bind(x, idx, fill_value=fill_value, **params)
    if type(tx) is Zero:
        return out, Zero(ad.tangent_aval(get_aval(out)))
    # The fill value is a constant: out-of-bounds windows have zero tangent.
    return out, gather_p.bind(tx, idx, fill_value=0, **params)


def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes,
                      indices_are_sorted, unique_indices, mode, fill_value):
    if is_undefined_primal(indices):
        raise TypeError("gather is not linear in its indices")
    if type(ct) is Zero or not is_undefined_primal(operand):
        return [None, None]
    zeros = _zeros(operand.aval.update(dtype=get_aval(ct).dtype))
    out = scatter_add_p.bind(zeros, indices, ct,
                             dimension_numbers=_gather_to_scatter_dnums(dimension_numbers),
                             indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices, mode=mode)
    return [out, None]


def _shift(dims, k=1):
    return tuple(d + k for d in dims)


def _gather_batch(axis_data, vals, dims, *, dimension_numbers, slice_sizes,
                  indices_are_sorted, unique_indices, mode, fill_value):
    x, idx = vals
    xd, idd = dims
    dn = dimension_numbers
    params = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                  mode=mode, fill_value=fill_value)
    if idd is None:
        # The batch axis of the operand becomes a (leading) window axis.
        x = batching.moveaxis(x, xd, 0)
        new = GatherDimensionNumbers(offset_dims=(0,) + _shift(dn.offset_dims),
                                     collapsed_slice_dims=_shift(dn.collapsed_slice_dims),
                                     start_index_map=_shift(dn.start_index_map),
                                     operand_batching_dims=_shift(dn.operand_batching_dims),
                                     start_indices_batching_dims=dn.start_indices_batching_dims)
        sizes = (axis_data.size,) + tuple(slice_sizes)
        return gather_p.bind(x, idx, dimension_numbers=new, slice_sizes=sizes, **params), 0
    idx = batching.moveaxis(idx, idd, 0)
    if xd is None:
        # A leading batch axis of the indices is the first batch axis of the output.
        new = GatherDimensionNumbers(offset_dims=_shift(dn.offset_dims),
                                     collapsed_slice_dims=dn.collapsed_slice_dims,
                                     start_index_map=dn.start_index_map,
                                     operand_batching_dims=dn.operand_batching_dims,
                                     start_indices_batching_dims=_shift(
                                         dn.start_indices_batching_dims))
        return gather_p.bind(x, idx, dimension_numbers=new, slice_sizes=slice_sizes,
                             **params), 0
    x = batching.moveaxis(x, xd, 0)
    new = GatherDimensionNumbers(offset_dims=_shift(dn.offset_dims),
                                 collapsed_slice_dims=_shift(dn.collapsed_slice_dims),
                                 start_index_map=_shift(dn.start_index_map),
                                 operand_batching_dims=(0,) + _shift(dn.operand_batching_dims),
                                 start_indices_batching_dims=(0,) + _shift(
                                     dn.start_indices_batching_dims))
    sizes = (1,) + tuple(slice_sizes)
    return gather_p.bind(x, idx, dimension_numbers=new, slice_sizes=sizes, **params), 0


gather_p = define("gather", abstract_eval=_gather_aval, lowering=_gather_lower,
                  jvp=_gather_jvp, transpose=_gather_transpose, batching=_gather_batch,
                  sharding_rule=sharding_rules.gather)


# ------------------------------------------------------- scatter_add / scatter

def _scatter_aval_rule(name):
    def rule(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
             unique_indices, mode):
        dn = dimension_numbers
        if not _is_int_dtype(indices.dtype) or indices.ndim < 1:
            raise TypeError(f"{name}: indices must be an integer array of rank >= 1 (the "
                            f"last axis holds the index vectors), got {indices.str_short()}")
        _SCATTER_DTYPES.check_lenient(name, (operand, indices, updates))
        nd = operand.ndim
        _sorted_unique_in(name, "inserted_window_dims", dn.inserted_window_dims, nd,
                          operand.shape)
        _sorted_unique_in(name, "operand_batching_dims", dn.operand_batching_dims, nd,
                          operand.shape)
        if set(dn.inserted_window_dims) & set(dn.operand_batching_dims):
            raise TypeError(f"{name}: inserted_window_dims and operand_batching_dims overlap")
        _check_index_vectors(name, operand, indices, dn, "scatter_dims_to_operand_dims",
                             "scatter_indices_batching_dims")
        window_axes = [i for i in range(nd) if i not in dn.inserted_window_dims
                       and i not in dn.operand_batching_dims]
        batch = list(indices.shape[:-1])
        expect_rank = len(window_axes) + len(batch)
        if updates.ndim != expect_rank or len(dn.update_window_dims) != len(window_axes):
            raise TypeError(f"{name}: updates of shape {updates.shape} do not match: expected "
                            f"rank {expect_rank} with {len(window_axes)} window dims for "
                            f"operand shape {operand.shape} and indices shape {indices.shape}")
        _sorted_unique_in(name, "update_window_dims", dn.update_window_dims, updates.ndim,
                          updates.shape)
        bi = wi = 0
        for i, u in enumerate(updates.shape):
            if i in dn.update_window_dims:
                d = operand.shape[window_axes[wi]]
                wi += 1
                if u > d:
                    raise TypeError(f"{name}: update window of shape {updates.shape} is "
                                    f"larger than the operand of shape {operand.shape}")
            else:
                if u != batch[bi]:
                    raise TypeError(f"{name}: updates shape {updates.shape} does not match "
                                    f"the scatter dims of indices shape {indices.shape}")
                bi += 1
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type)
    return rule


def _scatter_lower_with(lax_fn):
    def lower(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
              unique_indices, mode):
        return lax_fn(operand, indices, cast_to(updates, get_aval(operand).dtype),
                      dimension_numbers, indices_are_sorted=indices_are_sorted,
                      unique_indices=unique_indices, mode=mode)
    return lower


def _scatter_params(dimension_numbers, indices_are_sorted, unique_indices, mode):
    return dict(dimension_numbers=_scatter_dnums(dimension_numbers),
                indices_are_sorted=bool(indices_are_sorted),
                unique_indices=bool(unique_indices), mode=_mode(mode))


def scatter_add(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return scatter_add_p.bind(operand, scatter_indices, updates,
                              **_scatter_params(dimension_numbers, indices_are_sorted,
                                                unique_indices, mode))


def scatter(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
            unique_indices=False, mode=None):
    return scatter_p.bind(operand, scatter_indices, updates,
                          **_scatter_params(dimension_numbers, indices_are_sorted,
                                            unique_indices, mode))


def _read_back(ct, indices, updates_aval, dimension_numbers, indices_are_sorted,
               unique_indices, mode):
    """gather(ct) at the windows a scatter with these indices writes (0 where dropped)."""
    gdn, sizes = _scatter_to_gather(dimension_numbers, get_aval(ct).shape, updates_aval.shape)
    return gather_p.bind(ct, indices, dimension_numbers=gdn, slice_sizes=sizes,
                         indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                         mode=mode, fill_value=0)


def _scatter_add_transpose(ct, operand, indices, updates, *, dimension_numbers,
                           indices_are_sorted, unique_indices, mode):
    if is_undefined_primal(indices):
        raise TypeError("scatter_add is not linear in its indices")
    if type(ct) is Zero:
        return [None, None, None]
    ct_op = ct if is_undefined_primal(operand) else None
    ct_up = None
    if is_undefined_primal(updates):
        ct_up = _read_back(ct, indices, updates.aval, dimension_numbers, indices_are_sorted,
                           unique_indices, mode)
    return [ct_op, None, ct_up]


def _make_scatter_batch(prim):
    def rule(axis_data, vals, dims, *, dimension_numbers, **params):
        x, idx, upd = vals
        xd, idd, ud = dims
        dn = dimension_numbers
        size = axis_data.size
        x = batching.matchaxis(size, xd, 0, x)
        upd = batching.matchaxis(size, ud, 0, upd)
        if idd is None:
            # The batch axis is a leading window axis of operand and updates.
            new = ScatterDimensionNumbers(
                update_window_dims=(0,) + _shift(dn.update_window_dims),
                inserted_window_dims=_shift(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_shift(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=_shift(dn.operand_batching_dims),
                scatter_indices_batching_dims=dn.scatter_indices_batching_dims)
            return prim.bind(x, idx, upd, dimension_numbers=new, **params), 0
        idx = batching.moveaxis(idx, idd, 0)
        new = ScatterDimensionNumbers(
            update_window_dims=_shift(dn.update_window_dims),
            inserted_window_dims=_shift(dn.inserted_window_dims),
            scatter_dims_to_operand_dims=_shift(dn.scatter_dims_to_operand_dims),
            operand_batching_dims=(0,) + _shift(dn.operand_batching_dims),
            scatter_indices_batching_dims=(0,) + _shift(dn.scatter_indices_batching_dims))
        return prim.bind(x, idx, upd, dimension_numbers=new, **params), 0
    return rule


_scatter_batch = core.RuleMaker(_make_scatter_batch)

scatter_add_p = define(
    "scatter_add", abstract_eval=_scatter_aval_rule("scatter_add"),
    lowering=_scatter_lower_with(lax.scatter_add), jvp=ad.linear_in_jvp((0, 2)),
    transpose=_scatter_add_transpose, batching=_scatter_batch,
    sharding_rule=sharding_rules.scatter,
    operand_dtypes=_SCATTER_DTYPES)


def _scatter_winners(indices, operand_shape, updates_shape, dimension_numbers,
                     indices_are_sorted, mode):
    """For an overwriting scatter: which operand entries get overwritten, and which
    update elements are the ones that land (one per overwritten entry, even when
    indices repeat). Found by scattering distinct element ids and reading them back."""
    n = int(np.prod(updates_shape, dtype=np.int64))
    ids = np.arange(n, dtype=np.int32).reshape(updates_shape)
    init = np.full(operand_shape, -1, np.int32)
    written = scatter_p.bind(init, indices, ids, dimension_numbers=dimension_numbers,
                             indices_are_sorted=indices_are_sorted, unique_indices=False,
                             mode=mode)
    gdn, sizes = _scatter_to_gather(dimension_numbers, operand_shape, updates_shape)
    back = gather_p.bind(written, indices, dimension_numbers=gdn, slice_sizes=sizes,
                         indices_are_sorted=indices_are_sorted, unique_indices=False,
                         mode=mode, fill_value=-1)
    overwritten = ew.ne_p.bind(written, np.int32(-1))
    winners = ew.eq(back, ids)
    return overwritten, winners


def _scatter_jvp(primals, tangents, *, dimension_numbers, indices_are_sorted,
                 unique_indices, mode):
    x, idx, upd = primals
    tx, _, tu = tangents
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    out = scatter_p.bind(x, idx, upd, **params)
    if type(tx) is Zero and type(tu) is Zero:
        return out, Zero(ad.tangent_aval(get_aval(out)))
    if unique_indices:
        return out, scatter_p.bind(ad.instantiate_zeros(tx), idx, ad.instantiate_zeros(tu),
                                   **params)
    x_shape, u_shape = get_aval(x).shape, get_aval(upd).shape
    overwritten, winners = _scatter_winners(idx, x_shape, u_shape, dimension_numbers,
                                            indices_are_sorted, mode)
    t_out = Zero(ad.tangent_aval(get_aval(out)))
    if type(tu) is not Zero:
        landed = ew.select_n(winners, _zeros_like_val(tu), tu)
        zeros = core.ops.zeros(ad.tangent_aval(get_aval(out)))   # (weak as the result)
        t_out = scatter_add_p.bind(zeros, idx, landed, **params)
    if type(tx) is not Zero:
        kept = ew.select_n(overwritten, tx, _zeros_like_val(tx))
        t_out = ad.add_tangents(t_out, kept)
    return out, t_out


def _scatter_transpose(ct, operand, indices, updates, *, dimension_numbers,
                       indices_are_sorted, unique_indices, mode):
    if is_undefined_primal(indices):
        raise TypeError("scatter is not linear in its indices")
    if type(ct) is Zero:
        return [None, None, None]
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    u_aval = updates.aval if is_undefined_primal(updates) else get_aval(updates)
    ct_op = ct_up = None
    if is_undefined_primal(operand):
        zeros = core.ops.zeros(u_aval.update(dtype=get_aval(ct).dtype, weak_type=False))
        ct_op = scatter_p.bind(ct, indices, zeros, **params)
    if is_undefined_primal(updates):
        ct_up = _read_back(ct, indices, u_aval, dimension_numbers, indices_are_sorted,
                           unique_indices, mode)
        if not unique_indices:
            _, winners = _scatter_winners(indices, get_aval(ct).shape, u_aval.shape,
                                          dimension_numbers, indices_are_sorted, mode)
            ct_up = ew.select_n(winners, _zeros_like_val(ct_up), ct_up)
    return [ct_op, None, ct_up]


scatter_p = define("scatter", abstract_eval=_scatter_aval_rule("scatter"),
                   lowering=_scatter_lower_with(lax.scatter), jvp=_scatter_jvp,
                   transpose=_scatter_transpose, batching=_scatter_batch,
    sharding_rule=sharding_rules.scatter,
    operand_dtypes=_SCATTER_DTYPES)


# ------------------------------------------- scatter_mul / scatter_min / scatter_max

def _scatter_mul_jvp(primals, tangents, **params):
    # out = x * (product of the updates landing on each element): linear in x, and, with
    # unique indices, x * (the one update landing there).
    (x, idx, upd), (tx, _, tu) = primals, tangents
    out = scatter_mul_p.bind(x, idx, upd, **params)
    t_out = Zero(ad.tangent_aval(get_aval(out)))
    if type(tx) is not Zero:
        t_out = scatter_mul_p.bind(tx, idx, upd, **params)
    if type(tu) is not Zero:
        if not params["unique_indices"]:
            raise NotImplementedError("scatter_mul gradients are only implemented if "
                                      "`unique_indices=True`")
        zeros = core.ops.zeros(get_aval(tu).update(shape=get_aval(x).shape, weak_type=False))
        landed = scatter_add_p.bind(zeros, idx, tu, **params)
        t_out = ad.add_tangents(t_out, ew.mul(x, landed))
    return out, t_out


def _scatter_mul_transpose(ct, operand, indices, updates, **params):
    if is_undefined_primal(indices) or is_undefined_primal(updates):
        raise TypeError("scatter_mul is only linear in its operand")
    if type(ct) is Zero:
        return [None, None, None]
    # Scaling each element by the product of its updates is its own transpose.
    return [scatter_mul_p.bind(ct, indices, updates, **params), None, None]


scatter_mul_p = define(
    "scatter_mul", abstract_eval=_scatter_aval_rule("scatter_mul"),
    lowering=_scatter_lower_with(lax.scatter_mul), jvp=_scatter_mul_jvp,
    transpose=_scatter_mul_transpose, batching=_scatter_batch,
    sharding_rule=sharding_rules.scatter,
    operand_dtypes=_SCATTER_DTYPES)


def _make_scatter_extremum_jvp(prim):
    # The result at each element is the extremum of the operand and the updates landing
    # there; its tangent is the mean of the tangents of every contender that equals it
    # (ties share, as for reduce_max). Written as JAX's rule is, over the windows the
    # updates land in, so that tangents and cotangents get JAX's types too.
    def rule(primals, tangents, **params):
        (x, idx, upd), (tx, _, tu) = primals, tangents
        out = prim.bind(x, idx, upd, **params)
        if type(tx) is Zero and type(tu) is Zero:
            return out, Zero(ad.tangent_aval(get_aval(out)))
        tx, tu = ad.instantiate_zeros(tx), ad.instantiate_zeros(tu)
        u_aval = get_aval(upd)

        def landing(v):   # v's values in the windows the updates land in
            return _read_back(v, idx, u_aval, **params)

        def landed_sum(v):   # per window, the sum of v over the updates landing there
            return landing(scatter_add_p.bind(ew.zeros_like(x), idx, v, **params))

        target = landing(out)
        won = ew.eq(upd, target)
        kept = ew.eq(landing(x), target)
        zeros_u, ones_u = ew.zeros_like(upd), ew.full_like(upd, 1)
        winners = landed_sum(ew.select_n(won, zeros_u, ones_u))
        references = landed_sum(ones_u)
        shared = ew.div(1.0, ew.add(winners, 1.0))
        updates_coef = ew.select_n(won, zeros_u,
                                   ew.select_n(kept, ew.div(1.0, winners), shared))
        operand_coef = ew.div(ew.add(-1.0, ew.select_n(kept, ew.zeros_like(winners), shared)),
                              references)
        t_updates = ew.add(ew.mul(landing(tx), operand_coef), ew.mul(tu, updates_coef))
        return out, scatter_add_p.bind(tx, idx, t_updates, **params)
    return rule


_scatter_extremum_jvp = core.RuleMaker(_make_scatter_extremum_jvp)

scatter_min_p = define(
    "scatter_min", abstract_eval=_scatter_aval_rule("scatter_min"),
    lowering=_scatter_lower_with(lax.scatter_min), jvp=_scatter_extremum_jvp,
    batching=_scatter_batch, sharding_rule=sharding_rules.scatter,
    operand_dtypes=_SCATTER_DTYPES)
scatter_max_p = define(
    "scatter_max", abstract_eval=_scatter_aval_rule("scatter_max"),
    lowering=_scatter_lower_with(lax.scatter_max), jvp=_scatter_extremum_jvp,
    batching=_scatter_batch, sharding_rule=sharding_rules.scatter,
    operand_dtypes=_SCATTER_DTYPES)


def _scatter_fn(prim, name):
    def fn(operand, scatter_indices, updates, dimension_numbers, *,
           indices_are_sorted=False, unique_indices=False, mode=None):
        return prim.bind(operand, scatter_indices, updates,
                         **_scatter_params(dimension_numbers, indices_are_sorted,
                                           unique_indices, mode))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"lax.{name}: combine `updates` into `operand` at the scattered windows."
    return fn


scatter_mul = _scatter_fn(scatter_mul_p, "scatter_mul")
scatter_min = _scatter_fn(scatter_min_p, "scatter_min")
scatter_max = _scatter_fn(scatter_max_p, "scatter_max")


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """lax.scatter_sub: subtract `updates` from `operand` at the scattered windows."""
    return scatter_add(operand, scatter_indices, ew.neg(updates), dimension_numbers,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       mode=mode)


# ---------------------------------------------------------- lax-level wrappers

def _wrap_index(i, size):
    """A start index with negative values counted from the end (as jax.lax does)."""
    if isinstance(i, (int, np.integer)):
        i = int(i)
        return np.int32(i + size if i < 0 else i) if -2**31 <= i < 2**31 else np.int64(
            i + size if i < 0 else i)
    aval = get_aval(i)
    if aval.shape != ():
        raise TypeError(f"start indices must be scalars, got {aval.str_short()}")
    if not _is_int_dtype(aval.dtype):
        raise TypeError(f"start indices must be integers, got {aval.str_short()}")
    if aval.dtype.kind == "u":
        return i
    return ew.select_n(ew.lt(i, np.zeros((), aval.dtype)), i,
                       ew.add(i, np.asarray(size, aval.dtype)))


def _split_start_indices(start_indices, n, what):
    if isinstance(start_indices, (core.Tracer,)) or (
            hasattr(start_indices, "shape") and not isinstance(start_indices, (list, tuple))):
        shape = get_aval(start_indices).shape
        if shape == ():
            start_indices = [start_indices]
        else:
            if len(shape) != 1:
                raise TypeError(f"{what}: start_indices must be a sequence of scalars or a "
                                f"1-D array, got shape {shape}")
            start_indices = [sh.reshape(slice(start_indices, (k,), (k + 1,)), ())
                             for k in range(shape[0])]
    start_indices = list(start_indices)
    if len(start_indices) != n:
        raise TypeError(f"{what}: got {len(start_indices)} start indices for an operand of "
                        f"rank {n}; need one per axis")
    return start_indices


def _prep_indices(start_indices, shape, what, allow_negative_indices):
    idx = _split_start_indices(start_indices, len(shape), what)
    if isinstance(allow_negative_indices, bool):
        allow_negative_indices = [allow_negative_indices] * len(idx)
    out = []
    for i, d, neg in zip(idx, shape, allow_negative_indices):
        if neg:
            out.append(_wrap_index(i, d))
        elif isinstance(i, (int, np.integer)):
            out.append(np.int32(i))
        else:
            out.append(i)
    return out


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    shape = get_aval(operand).shape
    idx = _prep_indices(start_indices, shape, "dynamic_slice", allow_negative_indices)
    return dynamic_slice_p.bind(operand, *idx, slice_sizes=_ints(slice_sizes))


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    shape = get_aval(operand).shape
    idx = _prep_indices(start_indices, shape, "dynamic_update_slice", allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *idx)


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """`slice` along one axis; None and negative bounds as in Python slicing."""
    shape = get_aval(operand).shape
    axis = int(axis) % len(shape) if shape else int(axis)
    d = shape[axis]
    start = 0 if start_index is None else int(start_index)
    limit = d if limit_index is None else int(limit_index)
    start = start + d if start < 0 else start
    limit = limit + d if limit < 0 else limit
    starts = [0] * len(shape)
    limits = list(shape)
    strides = [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, int(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """Static index along one axis (negative counts from the end)."""
    shape = get_aval(operand).shape
    axis = int(axis) % len(shape)
    index = int(index)
    if not -shape[axis] <= index < shape[axis]:
        raise IndexError(f"index_in_dim: index {index} is out of bounds for axis {axis} of "
                         f"size {shape[axis]}")
    index %= shape[axis]
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else sh.squeeze(out, (axis,))


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *,
                         allow_negative_indices=True):
    shape = get_aval(operand).shape
    axis = int(axis) % len(shape)
    starts = [np.int32(0)] * len(shape)
    sizes = list(shape)
    starts[axis], sizes[axis] = start_index, int(slice_size)
    neg = [False] * len(shape)
    neg[axis] = bool(allow_negative_indices)
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=neg)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True, *,
                         allow_negative_indices=True):
    shape = get_aval(operand).shape
    axis = int(axis) % len(shape)
    out = dynamic_slice_in_dim(operand, index, 1, axis,
                               allow_negative_indices=allow_negative_indices)
    return out if keepdims else sh.squeeze(out, (axis,))


def dynamic_update_slice_in_dim(operand, update, start_index, axis):
    shape = get_aval(operand).shape
    axis = int(axis) % len(shape)
    starts = [np.int32(0)] * len(shape)
    starts[axis] = start_index
    neg = [False] * len(shape)
    neg[axis] = True
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=neg)


# Structural operations the interpreters use without importing primitives (vmap's
# element-by-element rule for ragged piles).
core.ops.slice_in_dim = slice_in_dim
core.ops.concatenate = concatenate
