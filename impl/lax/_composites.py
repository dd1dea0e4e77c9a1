"""jax.lax functions that are compositions of impl's primitives (shapes, fills,
selection, products, boolean reductions), plus the thin binds of the special
functions' primitives. Each follows jax.lax's signature; parameters impl cannot honour
raise naming themselves."""
from __future__ import annotations

import builtins

import jax
import numpy as np
from jax import dtypes as jax_dtypes

from impl import core
from impl.core import get_aval
from impl.primitives import elementwise as ew
from impl.primitives import special as sp
from impl.lax._checked import bind_checked
from impl.primitives._operand_dtypes import OperandDtypes, check_operand_dtypes
from impl.primitives.indexing import (GatherDimensionNumbers, concatenate,
                                      dynamic_update_slice_in_dim, dynamic_update_slice_p,
                                      gather, slice_in_dim)
from impl.primitives.linalg import dot_general
from impl.primitives import reductions as red
from impl.primitives.shape import broadcast_in_dim, expand_dims, reduce_sum, reshape, squeeze
from impl.primitives.sharding_rules import canonical_out_sharding


def _refuse_accuracy(name, accuracy):
    if accuracy is not None:
        raise NotImplementedError(f"impl.lax.{name}: accuracy= is not supported (got "
                                  f"{accuracy!r})")


# ------------------------------------------------------------------ elementwise

def acosh(x): return sp.acosh_p.bind(x)
def asinh(x): return sp.asinh_p.bind(x)
def atanh(x): return sp.atanh_p.bind(x)
def erfc(x): return sp.erfc_p.bind(x)
def lgamma(x): return sp.lgamma_p.bind(x)
def digamma(x): return sp.digamma_p.bind(x)
polygamma, igamma, igammac, igamma_grad_a, random_gamma_grad, zeta = (
    bind_checked(p) for p in (sp.polygamma_p, sp.igamma_p, sp.igammac_p, sp.igamma_grad_a_p,
                              sp.random_gamma_grad_p, sp.zeta_p))
betainc = bind_checked(sp.regularized_incomplete_beta_p, "betainc")
def bessel_i0e(x): return sp.bessel_i0e_p.bind(x)
def bessel_i1e(x): return sp.bessel_i1e_p.bind(x)
def population_count(x): return sp.population_count_p.bind(x)


def cbrt(x, *, accuracy=None):
    _refuse_accuracy("cbrt", accuracy)
    return sp.cbrt_p.bind(x)


def exp2(x, *, accuracy=None):
    _refuse_accuracy("exp2", accuracy)
    return sp.exp2_p.bind(x)


def reciprocal(x):
    return ew.integer_pow_p.bind(x, y=-1)


def select(pred, on_true, on_false):
    """`on_true` where `pred` holds, else `on_false`."""
    check_operand_dtypes(ew.select_n_p, pred, on_false, on_true)
    return ew.select_n(pred, on_false, on_true)


# ------------------------------------------------------------------ creation

def _fill_scalar(fill_value, dtype):
    if dtype is None:
        aval = get_aval(fill_value)   # Python scalars are weakly typed
        weak, dtype = aval.weak_type, aval.dtype
    else:
        weak, dtype = False, jax_dtypes.canonicalize_dtype(dtype)
    value = fill_value if isinstance(fill_value, core.Tracer) else np.asarray(fill_value)
    if get_aval(value).shape != ():
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape "
                        f"{get_aval(value).shape}.")
    return ew.convert_element_type(value, dtype, weak_type=weak)


def _fill_sharding(sharding, ndim, what):
    """`sharding=` of full and full_like as an equation parameter. JAX also takes other
    shardings there (placing the result on their devices); impl types named ones only."""
    if isinstance(sharding, jax.sharding.Sharding) and not isinstance(sharding, jax.sharding.NamedSharding):
        raise NotImplementedError(f"{what}: impl supports NamedSharding and PartitionSpec here, "
                                  f"not {type(sharding).__name__}")
    return canonical_out_sharding(sharding, ndim, what)


def full(shape, fill_value, dtype=None, *, sharding=None):
    """An array of `shape` filled with `fill_value` (weakly typed for a Python scalar
    without `dtype`, as in JAX)."""
    shape = tuple(int(d) for d in shape)
    return broadcast_in_dim(_fill_scalar(fill_value, dtype), shape, (),
                            out_sharding=_fill_sharding(sharding, len(shape), "full sharding"))


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """Like `x` (its shape and dtype, or `shape` and `dtype`) filled with `fill_value`."""
    aval = get_aval(x)
    value = _fill_scalar(fill_value, dtype if dtype is not None else aval.dtype)
    if dtype is None and aval.weak_type:
        value = ew.convert_element_type(value, aval.dtype, weak_type=True)
    shape = aval.shape if shape is None else tuple(shape)
    return ew.vary_as(broadcast_in_dim(value, shape, (),
                                       out_sharding=_fill_sharding(
                                           sharding, len(shape), "full_like sharding")), aval)


def empty(shape, dtype, *, out_sharding=None):
    """An array of `shape` and `dtype` whose contents do not matter (zeros here)."""
    return full(shape, 0, dtype, sharding=out_sharding)


# ------------------------------------------------------------------ shapes

def broadcast(operand, sizes, *, out_sharding=None):
    """`operand` with leading axes of `sizes` added."""
    aval = get_aval(operand)
    sizes = tuple(int(s) for s in sizes)
    return broadcast_in_dim(operand, sizes + aval.shape,
                            tuple(range(len(sizes), len(sizes) + aval.ndim)),
                            out_sharding=out_sharding)


def broadcast_to_rank(x, rank):
    """`x` with leading axes of size 1 added up to `rank` dimensions."""
    ndim = get_aval(x).ndim
    return x if ndim == rank else broadcast(x, (1,) * (rank - ndim))


def collapse(operand, start_dimension, stop_dimension=None):
    """`operand` with the axes [start_dimension, stop_dimension) merged into one."""
    shape = get_aval(operand).shape
    start, stop, _ = builtins.slice(start_dimension, stop_dimension).indices(len(shape))
    size = int(np.prod(shape[start:stop], dtype=np.int64))
    return reshape(operand, shape[:start] + (size,) + shape[stop:])


def tile(operand, reps):
    """`operand` repeated `reps[i]` times along axis i."""
    shape = get_aval(operand).shape
    reps = tuple(int(r) for r in reps)
    if len(reps) != len(shape):
        raise ValueError(f"tile: reps must have one entry per axis of the operand (shape "
                         f"{shape}), got {reps}")
    wide = broadcast_in_dim(operand, tuple(x for r, d in zip(reps, shape) for x in (r, d)),
                            tuple(range(1, 2 * len(shape), 2)))
    return reshape(wide, tuple(r * d for r, d in zip(reps, shape)))


def split(operand, sizes, axis=0):
    """Consecutive pieces of `operand` along `axis` of the given sizes."""
    shape = get_aval(operand).shape
    axis = int(axis) % len(shape)
    sizes = [int(s) for s in sizes]
    if builtins.sum(sizes) != shape[axis]:
        raise ValueError(f"Sum of sizes {builtins.sum(sizes)} must be equal to dimension "
                         f"{shape[axis]} of the operand shape {shape}")
    starts = np.cumsum([0] + sizes)
    return [slice_in_dim(operand, int(a), int(b), axis=axis)
            for a, b in zip(starts[:-1], starts[1:])]


_STACK_DTYPES = OperandDtypes()   # jax.lax.stack's own contract: one dtype


def stack(operands, axis=0):
    """The operands (of one shape) stacked along a new axis."""
    operands = list(operands)
    if not operands:
        raise ValueError("stack requires at least one operand")
    ndim = get_aval(operands[0]).ndim + 1
    axis = int(axis) % ndim if -ndim <= axis < ndim else axis
    if not 0 <= axis < ndim:
        raise ValueError(f"stack: axis {axis} is out of bounds for arrays of rank {ndim}")
    _STACK_DTYPES.check("stack", [get_aval(x).dtype for x in operands])
    return concatenate([expand_dims(x, (axis,)) for x in operands], axis)


def unstack(x, axis=0):
    """The slices of `x` along `axis`, as a tuple."""
    shape = get_aval(x).shape
    axis = int(axis) % len(shape)
    return tuple(squeeze(slice_in_dim(x, i, i + 1, axis=axis), (axis,))
                 for i in range(shape[axis]))


def dynamic_update_index_in_dim(operand, update, index, axis, *,
                                allow_negative_indices=True):
    """`operand` with the slice at `index` along `axis` replaced by `update`."""
    check_operand_dtypes(dynamic_update_slice_p, operand, update)
    ndim = get_aval(operand).ndim
    axis = int(axis) % ndim
    if get_aval(update).ndim == ndim - 1:
        update = expand_dims(update, (axis,))
    if not allow_negative_indices:
        raise NotImplementedError("impl.lax.dynamic_update_index_in_dim: "
                                  "allow_negative_indices=False is not supported")
    return dynamic_update_slice_in_dim(operand, update, index, axis)


def dtype(x):
    """The dtype `x` (an array, traced or not, or a Python scalar) computes in."""
    return get_aval(x).dtype


# ------------------------------------------------------------------ products

def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    """Vector/matrix products (contracting the last axis of `lhs` with the first of
    `rhs`), or `dot_general` when `dimension_numbers` is given."""
    if dimension_numbers is None:
        ln, rn = get_aval(lhs).ndim, get_aval(rhs).ndim
        if not (1 <= ln <= 2 and 1 <= rn <= 2):
            raise TypeError(f"Incompatible shapes for dot: got {get_aval(lhs).shape} and "
                            f"{get_aval(rhs).shape}.")
        dimension_numbers = (((ln - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision=precision,
                       preferred_element_type=preferred_element_type,
                       out_sharding=out_sharding)


def batch_matmul(lhs, rhs, precision=None):
    """Matrix products over the leading (batch) axes."""
    ln, rn = get_aval(lhs).ndim, get_aval(rhs).ndim
    if ln != rn or ln < 2:
        raise ValueError("Arguments to batch_matmul must be at least 2D and agree on their "
                         f"rank, got {ln} and {rn}.")
    batch = tuple(range(ln - 2))
    return dot_general(lhs, rhs, (((ln - 1,), (rn - 2,)), (batch, batch)),
                       precision=precision)


# ------------------------------------------------------------------ boolean reductions

def _check_bool(name, x):
    if get_aval(x).dtype != np.bool_:
        raise TypeError(f"impl.lax.{name} supports boolean operands only, got "
                        f"{get_aval(x).dtype}")


def reduce_and(operand, axes):
    return red.reduce_and(operand, tuple(axes))


def reduce_or(operand, axes):
    return red.reduce_or(operand, tuple(axes))


def reduce_xor(operand, axes):
    _check_bool("reduce_xor", operand)
    count = reduce_sum(ew.convert_element_type(operand, np.int32), tuple(axes))
    return ew.ne_p.bind(ew.rem_p.bind(count, np.int32(2)), np.int32(0))


def broadcast_like(arr, like_arr):
    """`arr` broadcast (NumPy's rules: aligned on the right) to the shape of `like_arr`."""
    shape, like = get_aval(arr).shape, get_aval(like_arr).shape
    if len(shape) > len(like):
        raise ValueError(f"Cannot broadcast to shape with fewer dimensions: "
                         f"arr_shape={shape} shape={like}")
    lead = len(like) - len(shape)
    if any(d not in (1, t) for d, t in zip(shape, like[lead:])):
        raise ValueError(f"Incompatible types for broadcasting: input shape {shape} and "
                         f"requested shape {like}")
    if shape == like:
        return arr
    return broadcast_in_dim(arr, like, tuple(range(lead, len(like))))


def index_take(src, idxs, axes):
    """`src` at the index arrays `idxs` (one per axis in `axes`, wrapped into range as
    Python's %), as a gather: the other axes are kept whole."""
    shape = get_aval(src).shape
    axes = tuple(int(a) for a in axes)
    columns = []
    for i, ax in zip(idxs, axes):
        if not np.issubdtype(get_aval(i).dtype, np.integer):
            raise ValueError("index_take: indices must have an integer type, got "
                             f"{get_aval(i).dtype}")
        dtype = get_aval(i).dtype
        size = np.asarray(builtins.max(shape[ax], 1), dtype)
        r = ew.rem_p.bind(i, size)
        wrapped = ew.select_n(ew.lt(r, np.zeros((), dtype)), r, ew.add(r, size))
        columns.append(expand_dims(wrapped, (1,)))
    indices = concatenate(columns, 1)
    slice_sizes = tuple(1 if d in axes else n for d, n in enumerate(shape))
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(1, len(shape) - len(axes) + 1)),
                                   collapsed_slice_dims=axes, start_index_map=axes)
    return gather(src, indices, dnums, slice_sizes, mode="promise_in_bounds")
