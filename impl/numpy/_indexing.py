"""Joining, splitting, padding, taking and NumPy-style indexing over impl's primitives.

`getitem` implements `x[idx]` for traced arrays: static slices become `slice`/`rev`,
integer scalars with no array index become a (dynamic) slice and a squeeze, and any
integer-array index becomes one `gather` (advanced indices broadcast together and their
result axes go where NumPy puts them). `x.at[idx].set/add/apply/...` finds the flat
positions that `x[idx]` reads (by indexing an array of element ids) and scatters there, so
every indexing form that reads also writes.
"""
from __future__ import annotations

import builtins

import numpy as np
import jax

from impl import core
from impl.core import Tracer, get_aval
from impl.errors import NonConcreteBooleanIndexError
from impl.primitives import elementwise as ew
from impl.primitives import shape as sh
from impl.primitives import indexing as ix
from impl.primitives.scatter_apply import scatter_apply
from impl.primitives.sharding import auto_axes
from impl.numpy._core import ones_like
from impl.numpy._ufuncs import divide, negative, power
from impl.numpy._util import (asarray, broadcast_shapes, broadcast_to, canonicalize_axis,
                              canonicalize_axes, check_arraylike, flat_or_axis, promote)

__all__ = ["concatenate", "stack", "hstack", "vstack", "split", "pad", "take",
           "take_along_axis", "flip", "tile", "repeat"]

_CLIP = ix.GatherScatterMode.CLIP
_FILL = ix.GatherScatterMode.FILL_OR_DROP


def _cast(x, dtype):
    return x if get_aval(x).dtype == dtype else ew.convert_element_type(x, dtype)


def _promote_all(arrays):
    """To the common dtype, weakly typed when every operand is (as JAX joins them)."""
    return promote(*[asarray(a) for a in arrays])


# ------------------------------------------------------------ join and split

def joined_arrays(arrays, fun_name):
    """The arrays a joining function takes: one array's slices along its first axis, or
    a sequence of arrays and scalars (a nested list or tuple raises TypeError, as JAX)."""
    if isinstance(arrays, (Tracer, jax.Array, np.ndarray)):
        return [arrays[i] for i in range(get_aval(asarray(arrays)).shape[0])]
    arrays = list(arrays)
    check_arraylike(fun_name, *arrays)
    return arrays


def _arrays_to_join(arrays, verb):
    """The arrays `concatenate` or `stack` joins, promoted to one dtype."""
    arrays = joined_arrays(arrays, verb)
    if not arrays:
        raise ValueError(f"{verb}: need at least one array to {verb}")
    return _promote_all(arrays)


def concatenate(arrays, axis=0, dtype=None):
    """Join arrays along an existing axis (axis=None: flatten them first)."""
    arrays = _arrays_to_join(arrays, "concatenate")
    if dtype is not None:
        arrays = [_cast(a, core.canonical_dtype(dtype)) for a in arrays]
    if axis is None:
        arrays = [sh.reshape(a, (get_aval(a).size,)) for a in arrays]
        axis = 0
    nd = get_aval(arrays[0]).ndim
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    if any(get_aval(a).ndim != nd for a in arrays):
        raise ValueError(f"concatenate: all arrays must have the same number of dimensions, "
                         f"got shapes {[get_aval(a).shape for a in arrays]}")
    axis = canonicalize_axis(axis, nd)
    shapes = [get_aval(a).shape for a in arrays]
    if any(s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:] for s in shapes):
        raise TypeError(f"Cannot concatenate arrays with shapes that differ in dimensions "
                        f"other than the one being concatenated: concatenating along "
                        f"dimension {axis} for shapes {', '.join(map(str, shapes))}.")
    return ix.concatenate(arrays, axis)


def stack(arrays, axis=0, dtype=None):
    """Join arrays along a new axis."""
    arrays = _arrays_to_join(arrays, "stack")
    shapes = {get_aval(a).shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"stack: all input arrays must have the same shape, got "
                         f"{[get_aval(a).shape for a in arrays]}")
    nd = get_aval(arrays[0]).ndim + 1
    axis = canonicalize_axis(axis, nd)
    out = concatenate([sh.expand_dims(a, (axis,)) for a in arrays], axis)
    return out if dtype is None else _cast(out, core.canonical_dtype(dtype))


def _atleast(a, n):
    a = asarray(a)
    shape = get_aval(a).shape
    if len(shape) >= n:
        return a
    if n == 2 and len(shape) == 1:
        return sh.reshape(a, (1,) + shape)
    return sh.reshape(a, (1,) * (n - len(shape)) + shape)


def hstack(tup, dtype=None):
    arrays = [_atleast(a, 1) for a in joined_arrays(tup, "hstack")]
    axis = 0 if arrays and get_aval(arrays[0]).ndim == 1 else 1
    return concatenate(arrays, axis, dtype)


def vstack(tup, dtype=None):
    return concatenate([_atleast(a, 2) for a in joined_arrays(tup, "vstack")], 0, dtype)


def split(ary, indices_or_sections, axis=0):
    """Split into equal sections (an int) or at the given indices (a sequence)."""
    x = asarray(ary)
    shape = get_aval(x).shape
    axis = canonicalize_axis(axis, len(shape))
    n = shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError(f"split: array split does not result in an equal division "
                             f"({n} elements along axis {axis} into {k} sections)")
        bounds = [i * (n // k) for i in range(k + 1)]
    else:
        if isinstance(indices_or_sections, Tracer):
            raise core.ConcretizationTypeError(
                "split: the split indices determine the output shapes, so they must be "
                "concrete (not traced)")
        pts = [int(i) for i in np.asarray(indices_or_sections).reshape(-1)]
        pts = [min(max(p + n if p < 0 else p, 0), n) for p in pts]
        bounds = [0] + pts + [n]
    return [ix.slice_in_dim(x, lo, max(lo, hi), 1, axis) for lo, hi in zip(bounds[:-1],
                                                                         bounds[1:])]


# -------------------------------------------------------------------- pad

def _pad_width(pad_width, nd):
    pw = np.asarray(pad_width)
    if pw.dtype.kind not in "iu":
        raise TypeError(f"pad: pad_width must be integers, got {pad_width!r}")
    try:
        pw = np.broadcast_to(pw, (nd, 2))
    except ValueError:
        raise ValueError(f"pad: pad_width {pad_width!r} cannot be broadcast to one "
                         f"(before, after) pair for each of {nd} axes") from None
    if (pw < 0).any():
        raise ValueError(f"pad: pad_width must be non-negative, got {pad_width!r}")
    return [(int(a), int(b)) for a, b in pw]


def pad(array, pad_width, mode="constant", constant_values=0):
    """Constant padding (the only mode supported)."""
    if mode != "constant":
        raise NotImplementedError(f"pad: only mode='constant' is supported, got {mode!r}")
    x = asarray(array)
    aval = get_aval(x)
    widths = _pad_width(pad_width, aval.ndim)
    cv = constant_values
    if not isinstance(cv, Tracer) and np.ndim(cv) > 0:
        vals = np.asarray(cv).reshape(-1)
        if (vals != vals[0]).any():
            raise NotImplementedError("pad: only a single scalar constant_values is supported")
        cv = vals[0]
    if isinstance(cv, Tracer):
        if get_aval(cv).shape != ():
            raise NotImplementedError("pad: only a scalar constant_values is supported")
        cv = _cast(cv, aval.dtype)
    else:
        cv = np.asarray(cv, aval.dtype)
    return ix.pad(x, cv, [(lo, hi, 0) for lo, hi in widths])


# ------------------------------------------------------------ take & friends

def _index_dtype(*idx):
    return np.dtype(np.int32)


def _normalize_index_array(i, size):
    """Integer index array with negative entries counted from the end."""
    if isinstance(i, Tracer):
        aval = get_aval(i)
        if aval.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got {aval.str_short()}")
        if aval.dtype.kind == "u":
            return i
        zero = np.zeros((), aval.dtype)
        return ew.select_n(ew.lt_p.bind(i, zero), i, ew.add(i, np.asarray(size, aval.dtype)))
    a = np.asarray(i)
    if a.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, got an array of dtype {a.dtype}")
    a = np.where(a < 0, a + size, a)
    return a.astype(np.int32) if a.size == 0 or (-2**31 <= a.min() and a.max() < 2**31) \
        else a.astype(np.int64)


def _take_mode(mode):
    if mode is None or mode == "fill":
        return _FILL
    if mode == "clip":
        return _CLIP
    if mode in ("promise_in_bounds",):
        return ix.GatherScatterMode.PROMISE_IN_BOUNDS
    raise ValueError(f"take: invalid mode {mode!r} (use 'fill' or 'clip')")


def take(a, indices, axis=None, mode=None, fill_value=None, unique_indices=False,
         indices_are_sorted=False):
    """Elements of `a` at `indices` along `axis` (default mode 'fill', like jax.numpy)."""
    x, axis = flat_or_axis(asarray(a), axis)
    shape = get_aval(x).shape
    if mode == "wrap":
        idx = asarray(indices)
        idx = ew.rem(ew.add(ew.rem(idx, shape[axis]), shape[axis]), shape[axis]) \
            if isinstance(idx, Tracer) else np.asarray(idx) % shape[axis]
        mode = "clip"
    idx = indices if not isinstance(indices, jax.Array) else np.asarray(indices)
    if mode is None or mode == "fill":
        # like jax.numpy.take: negative indices count from the end only in 'fill' mode
        idx = _normalize_index_array(idx, shape[axis])
    elif not isinstance(idx, Tracer):
        idx = np.asarray(idx)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"take: indices must be integers, got dtype {idx.dtype}")
    ishape = get_aval(idx).shape
    idx = sh.reshape(idx, ishape + (1,))
    ni = len(ishape)
    offset = tuple(range(axis)) + tuple(range(axis + ni, len(shape) - 1 + ni))
    dn = ix.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=(axis,),
                                   start_index_map=(axis,))
    sizes = tuple(1 if i == axis else d for i, d in enumerate(shape))
    return ix.gather(x, idx, dn, sizes, mode=_take_mode(mode), fill_value=fill_value,
                     unique_indices=unique_indices, indices_are_sorted=indices_are_sorted)


def take_along_axis(arr, indices, axis, mode=None, fill_value=None):
    """out[..., j, ...] = arr[..., indices[..., j, ...], ...] along `axis`."""
    x = asarray(arr)
    if axis is None:
        x = sh.reshape(x, (get_aval(x).size,))
        indices = indices if isinstance(indices, Tracer) else np.asarray(indices).reshape(-1)
        if isinstance(indices, Tracer):
            indices = sh.reshape(indices, (get_aval(indices).size,))
        axis = 0
    shape = get_aval(x).shape
    nd = len(shape)
    axis = canonicalize_axis(axis, nd)
    idx = _normalize_index_array(indices if not isinstance(indices, jax.Array)
                                 else np.asarray(indices), shape[axis])
    ishape = get_aval(idx).shape
    if len(ishape) != nd:
        raise ValueError(f"take_along_axis: indices (shape {ishape}) and arr (shape {shape}) "
                         f"must have the same number of dimensions")
    # the other axes broadcast against each other
    xs, js = list(shape), list(ishape)
    for i in range(nd):
        if i == axis:
            continue
        d = broadcast_shapes((shape[i],), (ishape[i],))[0]
        xs[i], js[i] = d, d
    x = broadcast_to(x, tuple(xs))
    idx = broadcast_to(idx, tuple(js)) if isinstance(idx, Tracer) else np.broadcast_to(idx, js)
    idx = sh.reshape(idx, tuple(js) + (1,))
    batch = tuple(i for i in range(nd) if i != axis)
    dn = ix.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                   start_index_map=(axis,), operand_batching_dims=batch,
                                   start_indices_batching_dims=batch)
    return ix.gather(x, idx, dn, (1,) * nd, mode=_take_mode(mode), fill_value=fill_value)


def flip(m, axis=None):
    x = asarray(m)
    return ix.rev(x, canonicalize_axes(axis, get_aval(x).ndim))


def tile(A, reps):
    """Repeat the whole array `reps` times along each axis (static reps)."""
    x = asarray(A)
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    shape = get_aval(x).shape
    d = max(len(reps), len(shape))
    shape = (1,) * (d - len(shape)) + shape
    reps = (1,) * (d - len(reps)) + reps
    x = sh.reshape(x, shape)
    big = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    x = sh.broadcast_in_dim(x, big, tuple(range(1, 2 * d, 2)))
    return sh.reshape(x, tuple(r * s for r, s in zip(reps, shape)))


def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """Repeat each element `repeats` times along `axis`. Traced repeat counts need a
    static `total_repeat_length` (the output length), as in JAX: longer results are cut,
    shorter ones padded with the last element."""
    x, axis = flat_or_axis(asarray(a), axis)
    shape = get_aval(x).shape
    if total_repeat_length is not None:
        return _repeat_to_length(x, repeats, axis, int(total_repeat_length))
    if isinstance(repeats, Tracer):
        raise core.ConcretizationTypeError(
            "repeat: the repeat counts determine the output shape, so they must be concrete "
            "(not traced) unless total_repeat_length is given")
    r = np.asarray(repeats)
    if r.dtype.kind not in "iu" or (r < 0).any():
        raise ValueError(f"repeat: repeats must be non-negative integers, got {repeats!r}")
    if r.ndim == 0 or r.size == 1:
        k = int(r.reshape(-1)[0])
        x = sh.expand_dims(x, (axis + 1,))
        big = shape[:axis + 1] + (k,) + shape[axis + 1:]
        x = sh.broadcast_in_dim(x, big, tuple(range(len(big))))
        return sh.reshape(x, shape[:axis] + (shape[axis] * k,) + shape[axis + 1:])
    if r.shape != (shape[axis],):
        raise ValueError(f"repeat: repeats of shape {r.shape} must be a scalar or have one "
                         f"entry per element along axis {axis} ({shape[axis]})")
    src = np.repeat(np.arange(shape[axis], dtype=np.int32), r)
    return take(x, src, axis=axis, mode="clip")


def _repeat_to_length(x, repeats, axis, length):
    """repeat with the output length fixed: output position p reads the element whose
    cumulative repeat count first exceeds p (clamped to the last element)."""
    from impl.numpy._reductions import cumsum
    from impl.numpy._core import sum as _sum
    n = get_aval(x).shape[axis]
    counts = broadcast_to(asarray(repeats), (n,))
    ends = cumsum(counts)
    positions = np.broadcast_to(np.arange(length)[:, None], (length, n))
    passed = ew.le_p.bind(sh.broadcast_in_dim(ends, (length, n), (1,)),
                          positions.astype(get_aval(ends).dtype))
    src = _sum(ew.convert_element_type(passed, np.int32), axis=1)
    return take(x, src, axis=axis, mode="clip")


# ---------------------------------------------------------------- indexing

def _is_int_scalar_like(i):
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _concrete_bool(i):
    if isinstance(i, Tracer):
        v = i.concrete_value()
        if v is None:
            raise NonConcreteBooleanIndexError(
                f"Array boolean indices must be concrete; got a traced {i.aval.str_short()}. "
                "A boolean mask determines the shape of the result, which must be known "
                "while tracing; use impl.numpy.where instead.")
        return np.asarray(v)
    return np.asarray(i)


def _expand_index(x_shape, idx):
    """Normalise an index to a list of entries, one per axis of the (None-expanded)
    array: ('slice', slice) | ('int', int) | ('dyn', traced scalar) | ('arr', array).
    Returns (entries, new_axes) where new_axes are the positions where None inserts."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    items = []
    for i in idx:
        if i is None or i is Ellipsis or isinstance(i, builtins.slice):
            items.append(i)
        elif isinstance(i, (bool, np.bool_)):
            raise TypeError("indexing with a Python/NumPy boolean scalar is not supported; "
                            "use None to add an axis or a boolean array mask")
        elif _is_int_scalar_like(i):
            items.append(("int", int(i)))
        elif isinstance(i, (Tracer, jax.Array, np.ndarray, list)):
            dtype = get_aval(i).dtype if isinstance(i, Tracer) else np.asarray(i).dtype
            if isinstance(i, list) and np.asarray(i).size == 0:
                dtype = np.dtype(np.int32)
            if dtype == np.bool_:
                mask = _concrete_bool(i)
                if mask.ndim == 0:
                    raise TypeError("indexing with a 0-d boolean array is not supported")
                items.extend(("arr", nz) for nz in np.nonzero(mask))
            elif dtype.kind in "iu":
                if isinstance(i, Tracer):
                    items.append(("dyn", i) if i.aval.shape == () else ("arr", i))
                else:
                    a = np.asarray(i)
                    items.append(("int", int(a)) if a.ndim == 0 else ("arr", a))
            else:
                raise TypeError(f"Indexer must have integer or boolean type, got indexer "
                                f"with dtype {dtype}")
        else:
            raise TypeError(f"Indexing with {type(i).__name__} ({i!r}) is not supported; "
                            "use integers, slices, None, Ellipsis or integer/boolean arrays")
    n_ell = sum(1 for i in items if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if used > len(x_shape):
        raise IndexError(f"Too many indices: array is {len(x_shape)}-dimensional, but {used} "
                         f"were indexed")
    if n_ell:
        k = items.index(Ellipsis)
        items[k:k + 1] = [builtins.slice(None)] * (len(x_shape) - used)
    else:
        items += [builtins.slice(None)] * (len(x_shape) - used)
    new_axes = tuple(k for k, i in enumerate(items) if i is None)
    entries = [("slice", builtins.slice(None)) if i is None else
               (("slice", i) if isinstance(i, builtins.slice) else i) for i in items]
    return entries, new_axes


def _static_slices(x, entries):
    """Apply every slice entry with `slice` (then `rev` for negative steps); returns the
    sliced array."""
    shape = get_aval(x).shape
    revs, starts, limits, strides = [], [], [], []
    for k, (kind, v) in enumerate(entries):
        d = shape[k]
        if kind != "slice" or (v.start is None and v.stop is None and v.step is None):
            starts.append(0), limits.append(d), strides.append(1)
            continue
        for part in (v.start, v.stop, v.step):
            if part is not None and not _is_int_scalar_like(part) and not (
                    hasattr(part, "__index__") and not isinstance(part, Tracer)):
                raise IndexError(f"slice bounds must be static integers (or None), got "
                                 f"{v!r}; use lax.dynamic_slice for traced starts")
        start, stop, step = v.indices(d)
        if step > 0:
            starts.append(start), limits.append(max(start, stop)), strides.append(step)
        else:   # the elements taken, in increasing order, then reversed (as JAX does)
            first = min(d, stop + 1 + abs(start - stop - 1) % -step)
            starts.append(first), limits.append(max(first, start + 1))
            strides.append(-step)
            revs.append(k)
    x = ix.slice(x, starts, limits, None if all(s == 1 for s in strides) else strides)
    return ix.rev(x, revs) if revs else x


def getitem(x, idx, mode=None, fill_value=None, *, indices_are_sorted=False,
            unique_indices=False, normalize=True):
    """NumPy indexing `x[idx]` built on slice / rev / dynamic_slice / gather.

    `mode` governs out-of-bound integer indices: None or 'clip' clamps (what jax.numpy
    does when reading); 'fill' gives `fill_value` for them (used by `.at[]` updates).
    `normalize=False` leaves negative indices as they are (out of bounds) instead of
    counting them from the end; the two promises about array indices are passed on
    to the gather."""
    x = asarray(x)
    gmode = _CLIP if mode is None else ix._mode(mode)
    entries, new_axes = _expand_index(get_aval(x).shape, idx)
    if new_axes:
        x = sh.expand_dims(x, new_axes)
    shape = get_aval(x).shape
    x = _static_slices(x, entries)
    shape = get_aval(x).shape
    entries = [("slice", None) if kind == "slice" else (kind, v) for kind, v in entries]
    has_arr = any(kind == "arr" for kind, _ in entries)
    scalar_dims = [k for k, (kind, _) in enumerate(entries) if kind in ("int", "dyn")]
    if not has_arr and not scalar_dims:
        return x
    if not has_arr and gmode == _CLIP:
        starts, sizes = [], list(shape)
        for k, (kind, v) in enumerate(entries):
            if kind == "int":
                d = shape[k]
                if d == 0:
                    raise IndexError(f"index {v} is out of bounds for axis {k} with size 0")
                starts.append(np.int32(min(max(v + d if v < 0 and normalize else v, 0),
                                           d - 1)))
                sizes[k] = 1
            elif kind == "dyn":
                starts.append(_normalize_index_array(v, shape[k]) if normalize else v)
                sizes[k] = 1
            else:
                starts.append(np.int32(0))
        if all(kind != "dyn" for kind, _ in entries):
            out = ix.slice(x, [int(s) for s in starts], [int(s) + z for s, z in
                                                         zip(starts, sizes)])
        else:
            dtype = _common_index_dtype(starts)
            starts = [_cast(s, dtype) if isinstance(s, Tracer) else np.asarray(s, dtype)
                      for s in starts]
            out = ix.dynamic_slice_p.bind(x, *starts, slice_sizes=tuple(sizes))
        return sh.squeeze(out, scalar_dims)
    return _gather_index(x, entries, gmode, fill_value, normalize, indices_are_sorted,
                         unique_indices)


def _common_index_dtype(vals):
    dts = [get_aval(v).dtype for v in vals if isinstance(v, Tracer)]
    return np.dtype(np.result_type(*dts)) if dts else np.dtype(np.int32)


def _gather_index(x, entries, mode, fill_value, normalize=True, indices_are_sorted=False,
                  unique_indices=False):
    shape = get_aval(x).shape
    adv = [k for k, (kind, _) in enumerate(entries) if kind != "slice"]
    arrays = []
    for k in adv:
        kind, v = entries[k]
        if kind == "int":
            v = np.asarray(v)
        arrays.append(_normalize_index_array(v, shape[k]) if normalize
                      else _integer_index(v))
    bshape = broadcast_shapes(*[get_aval(a).shape for a in arrays])
    if all(not isinstance(a, Tracer) for a in arrays):
        dtype = np.result_type(*[a.dtype for a in arrays])
        idx = np.stack([np.broadcast_to(a, bshape).astype(dtype) for a in arrays], -1)
    else:
        dtype = _common_index_dtype(arrays)
        cols = [sh.reshape(broadcast_to(_cast(a, dtype) if isinstance(a, Tracer)
                                        else np.asarray(a, dtype), bshape), bshape + (1,))
                for a in arrays]
        idx = ix.concatenate(cols, len(bshape)) if len(cols) > 1 else cols[0]
    rest = [k for k in range(len(shape)) if k not in adv]
    contiguous = adv == list(range(adv[0], adv[-1] + 1))
    nb = len(bshape)
    if contiguous:
        before = [k for k in rest if k < adv[0]]
        offset = tuple(range(len(before))) + tuple(
            len(before) + nb + j for j in range(len(rest) - len(before)))
    else:
        offset = tuple(nb + j for j in range(len(rest)))
    dn = ix.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=tuple(adv),
                                   start_index_map=tuple(adv))
    sizes = tuple(1 if k in adv else d for k, d in enumerate(shape))
    return ix.gather(x, idx, dn, sizes, mode=mode, fill_value=fill_value,
                     indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)


def _integer_index(i):
    """An index array left as given (no wrapping of negative entries)."""
    if isinstance(i, Tracer):
        return i
    a = np.asarray(i)
    return a.astype(np.int32) if a.dtype.kind in "iu" and (
        a.size == 0 or (-2**31 <= a.min() and a.max() < 2**31)) else a


def _has_array_index(idx):
    """Whether idx has an array index (then positions may repeat)."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    for i in idx:
        if isinstance(i, Tracer):
            if i.aval.shape != ():
                return True
        elif isinstance(i, (jax.Array, np.ndarray, list)) and np.ndim(i) > 0:
            return True
    return False


def _keeps_order(x_shape, idx):
    """Whether the flat positions that `x[idx]` reads are ascending whenever its array
    index is: at most one integer-array index, 1-D, and no reversing slice."""
    try:
        entries, _ = _expand_index(x_shape, idx)
    except (IndexError, TypeError):
        return False
    arrays = [v for kind, v in entries if kind == "arr"]
    if len(arrays) > 1 or any(np.ndim(v) != 1 if not isinstance(v, Tracer)
                              else v.aval.ndim != 1 for v in arrays):
        return False
    return all(kind != "slice" or v.step is None or v.step > 0 for kind, v in entries)


class _IndexUpdateHelper:
    """`x.at`: `x.at[idx]` gives an object whose methods update or read x[idx]."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, idx):
        return _IndexUpdateRef(self.array, idx)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"


def _update_method(name, prim, transform_values=None, apply_to=None):
    """A method of x.at[idx] that scatters the values with `prim`. With `apply_to`, the
    values are first multiplied into ones at the indexed positions, and
    apply_to(x, that) is the result (x / ... for divide, x ** ... for power)."""
    def update(x, values, idx, mode, indices_are_sorted, unique_indices, normalize):
        if transform_values is not None:
            values = transform_values(values)
        base = x if apply_to is None else ones_like(x)
        out = _scatter_update(name, prim, base, idx, values, mode, indices_are_sorted,
                              unique_indices, normalize)
        return out if apply_to is None else apply_to(x, out)

    def method(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
               out_sharding=None, wrap_negative_indices=True):
        x = asarray(self.array)
        run = lambda x, values: update(x, values, self.index, mode,  # noqa: E731
                                       indices_are_sorted, unique_indices,
                                       wrap_negative_indices)
        return _with_explicit_sharding(run, x, self.index, out_sharding, "scatter")(x, values)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"x.at[idx].{name}(values): x with the values combined in by {name}."
    return method


def _indexed_axes(ndim, idx):
    """The axes of an array of rank `ndim` that `idx` indexes into (anything but a
    whole-axis `:`)."""
    entries = list(idx) if isinstance(idx, tuple) else [idx]
    consumed = [np.ndim(e) if getattr(e, "dtype", None) == np.bool_ else 1
                for e in entries if e is not None and e is not Ellipsis]
    out, axis = set(), 0
    for e in entries:
        if e is None:
            continue
        if e is Ellipsis:
            axis += ndim - builtins.sum(consumed)
            continue
        width = np.ndim(e) if getattr(e, "dtype", None) == np.bool_ else 1
        if not (isinstance(e, slice) and e == slice(None)):
            out.update(range(axis, axis + width))
        axis += width
    return out


def _with_explicit_sharding(run, x, idx, out_sharding, what):
    """`run(x, ...)` for an `.at[]` access of an explicitly sharded `x`: as JAX does,
    the access is refused when it indexes into a sharded axis unless `out_sharding=`
    says the result's sharding; impl computes it on replicated operands (XLA moves the
    data) and gives the result `out_sharding` or x's sharding."""
    if out_sharding is not None:
        return auto_axes(run, out_sharding=out_sharding)
    sharding = get_aval(x).explicit_sharding
    if sharding is None:
        return run
    if what == "gather" or sharding.spec.unreduced or sharding.spec.reduced:
        return run        # the primitive's own rules decide (and refuse those axes)
    if any(sharding.spec.partitions[a] is not None
           for a in _indexed_axes(get_aval(x).ndim, idx)):
        raise core.ShardingTypeError(
            "Use `.at[...].set/add/mul/...(out_sharding=)` to provide output PartitionSpec "
            "for the scatter update as out sharding could not be resolved unambiguously (or "
            f"would require collectives on inputs). Got operand={get_aval(x)!r}")
    return auto_axes(run, out_sharding=sharding)


class _IndexUpdateRef:
    """x.at[idx]: pure versions of x[idx] = v, x[idx] += v, ... (repeated indices
    accumulate for add/multiply/min/max; for set one of the writes wins)."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None, out_sharding=None, wrap_negative_indices=True):
        run = lambda x: getitem(x, self.index, mode=mode,  # noqa: E731
                                fill_value=fill_value, indices_are_sorted=indices_are_sorted,
                                unique_indices=unique_indices, normalize=wrap_negative_indices)
        return _with_explicit_sharding(run, self.array, self.index, out_sharding, "gather")(
            self.array)

    set = _update_method("set", ix.scatter_p)
    add = _update_method("add", ix.scatter_add_p)
    subtract = _update_method("subtract", ix.scatter_add_p, transform_values=negative)
    multiply = mul = _update_method("multiply", ix.scatter_mul_p)
    divide = _update_method("divide", ix.scatter_mul_p, apply_to=divide)
    power = _update_method("power", ix.scatter_mul_p, apply_to=power)
    min = _update_method("min", ix.scatter_min_p)
    max = _update_method("max", ix.scatter_max_p)

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """x with the unary `func` applied at x[idx], once per occurrence of an index
        (so a repeated index applies it repeatedly); not differentiable, as in JAX."""
        return _scatter_apply(self.array, self.index, func, mode, indices_are_sorted,
                              unique_indices, wrap_negative_indices)


_FLAT_SCATTER = ix.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                           scatter_dims_to_operand_dims=(0,))


def _flat_positions(shape, idx, mode, normalize):
    """The flat positions (into an array of `shape`) that `x[idx]` reads, found by
    indexing an array of element ids the same way, so an update supports every indexing
    form getitem does; out-of-bounds integer indices become -1, which the scatter drops
    (mode 'fill'/'drop', the default), or are clamped (mode 'clip')."""
    gmode = _FILL if mode is None else ix._mode(mode)
    ids = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    return getitem(ids, idx, mode=gmode if gmode != _CLIP else None,
                   fill_value=-1 if gmode != _CLIP else None, normalize=normalize)


def _scatter_at(x, idx, mode, normalize, indices_are_sorted, unique_indices, scatter):
    """`scatter(positions, shape, promises)` of the flat positions x[idx] reads (as
    scatter indices, and their shape), reshaped to x's shape; x when it reads none. The
    promises hold for the flat positions: unique when told or when no array index can
    repeat one, sorted when told and the indexing keeps their order."""
    shape = get_aval(x).shape
    pos = _flat_positions(shape, idx, mode, normalize)
    pshape = get_aval(pos).shape
    if 0 in pshape:
        return x
    promises = dict(unique_indices=bool(unique_indices) or not _has_array_index(idx),
                    indices_are_sorted=bool(indices_are_sorted) and _keeps_order(shape, idx))
    return sh.reshape(scatter(sh.reshape(pos, pshape + (1,)), pshape, promises), shape)


def _scatter_update(method, prim, x, idx, values, mode, indices_are_sorted, unique_indices,
                    normalize):
    """Combine `values` (broadcast to the shape of x[idx]) into the positions x[idx]
    reads, computing in the common dtype of x and values and returning x's dtype."""
    x = asarray(x)
    aval = get_aval(x)

    def scatter(positions, pshape, promises):
        v = values
        if isinstance(v, int) and not isinstance(v, bool) and aval.dtype.kind in "iu" and \
                np.iinfo(aval.dtype).min <= v <= np.iinfo(aval.dtype).max:
            v = np.asarray(v, aval.dtype)
        xv, v = promote(x, asarray(v))
        try:
            v = broadcast_to(v, pshape)
        except ValueError:
            raise ValueError(f"at[].{method}: values of shape {get_aval(v).shape} cannot be "
                             f"broadcast to the indexed shape {pshape}") from None
        return prim.bind(sh.reshape(xv, (aval.size,)), positions, v,
                         dimension_numbers=_FLAT_SCATTER, mode=_FILL, **promises)

    out = _scatter_at(x, idx, mode, normalize, indices_are_sorted, unique_indices, scatter)
    return ew.convert_element_type(out, aval.dtype, weak_type=aval.weak_type)


def _scatter_apply(x, idx, func, mode, indices_are_sorted, unique_indices, normalize):
    """`func` applied at the positions x[idx] reads, once per occurrence of each."""
    x = asarray(x)

    def scatter(positions, pshape, promises):
        return scatter_apply(sh.reshape(x, (get_aval(x).size,)), positions, func,
                             _FLAT_SCATTER, update_shape=pshape, mode=_FILL, **promises)

    return _scatter_at(x, idx, mode, normalize, indices_are_sorted, unique_indices, scatter)
