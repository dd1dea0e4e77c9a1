"""More of jax.numpy, composed from impl.numpy's own functions: insertion and scatter
by index (insert, put, place, put_along_axis), index helpers (r_, c_, ravel_multi_index,
mask_indices), integer math (gcd, lcm, bitwise_count, packbits), partial sorts, set
operations with JAX's static `size=`, polynomial division and fitting, numerical
gradients, Bessel's i0 and the Kaiser window, and 2-D/N-D histograms.

Output shapes that depend on values need concrete input (or `size=`), as in JAX."""
from __future__ import annotations

import builtins
import operator
from typing import NamedTuple

import numpy as np

from impl import core
from impl.core import Tracer, get_aval
from impl.lax import _composites as lc
from impl.lax._control_flow import while_loop
from impl.numpy import _core as c
from impl.numpy import _indexing as ix
from impl.numpy import _reductions as red
from impl.numpy import _ufuncs as uf
from impl.numpy._arrays import searchsorted
from impl.numpy._histogram import histogram_bin_edges
from impl.numpy._math import copysign, left_shift, nextafter, right_shift
from impl.numpy import _searching
from impl.numpy._searching import _first_true_positions, isin, unique
from impl.numpy._util import (asarray, broadcast_shapes, broadcast_to, canonicalize_axis,
                              promote)
from impl.primitives import elementwise as ew

__all__ = ["insert", "gcd", "lcm", "r_", "c_", "put_along_axis", "ravel_multi_index",
           "frexp", "partition", "argpartition", "choose", "compress", "gradient", "i0",
           "kaiser", "intersect1d", "setdiff1d", "setxor1d", "unique_inverse", "unique_all",
           "poly", "polydiv", "polyfit", "sort_complex", "spacing", "trim_zeros",
           "bitwise_count", "place", "put", "packbits", "unpackbits", "mask_indices",
           "histogram2d", "histogramdd"]


def _set(x, index, values, mode=None):
    """x.at[index].set(values) with impl's scatter (also for concrete x)."""
    return ix._IndexUpdateRef(asarray(x), index).set(values, mode=mode)


def _static(value, what):
    if isinstance(value, Tracer):
        raise core.ConcretizationTypeError(f"{what} must be concrete (not traced)")
    return value


def _concrete_or_error(x, name, hint=""):
    """The NumPy value of x; JAX's ConcretizationTypeError when x is traced."""
    return _searching._concrete_or_error(
        x, name, f"The error arose in jnp.{name}(), whose result depends on this value{hint}.")


_RAISE_HINT = " (mode='raise' checks the values; use mode='wrap' or mode='clip' under jit)"
_SIZE_HINT = " (pass a static size= to use it under jit)"


def _broadcast_all(*xs):
    """xs broadcast to their common shape, each keeping its dtype."""
    shape = broadcast_shapes(*(get_aval(x).shape for x in xs))
    return [broadcast_to(x, shape) for x in xs]


def _no_sequences(name, *args):
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at "
                            f"position {i}.")


def _default_int():
    return core.canonical_dtype(np.int64)


# ------------------------------------------------------------- insert / scatter

def insert(arr, obj, values, axis=None):
    """arr with values placed before the given indices (obj may be traced: only its
    shape fixes the output shape)."""
    _no_sequences("insert", arr, 0 if isinstance(obj, slice) else obj, values)
    a = asarray(arr)
    if axis is None:
        a, axis = c.ravel(a), 0
    axis = canonicalize_axis(_static(axis, "axis argument of jnp.insert()"),
                             get_aval(a).ndim)
    n = get_aval(a).shape[axis]
    if isinstance(obj, slice):
        where_ = asarray(np.arange(*obj.indices(n)))
    else:
        where_ = asarray(obj)
    if get_aval(where_).ndim > 1:
        raise ValueError("jnp.insert(): obj must be a slice, a one-dimensional array, or a "
                         f"scalar; got {obj}")
    if get_aval(where_).dtype.kind not in "iu":
        if get_aval(where_).size == 0 and not isinstance(obj, Tracer):
            where_ = c.astype(where_, _default_int())
        else:
            raise ValueError(f"jnp.insert(): index array must be integer typed; got {obj}")
    vals = c.astype(asarray(values), get_aval(a).dtype)
    while get_aval(vals).ndim < get_aval(a).ndim:
        vals = c.expand_dims(vals, 0)
    if get_aval(where_).size == 1:
        scalar = get_aval(where_).ndim == 0
        first = c.ravel(where_)[0]
        if scalar:
            vals = c.moveaxis(vals, 0, axis)
        where_ = c.full((get_aval(vals).shape[axis],), first)
    m = int(np.broadcast_shapes(get_aval(where_).shape, (get_aval(vals).shape[axis],))[0])
    where_ = c.astype(broadcast_to(where_, (m,)), np.int32)
    where_ = uf.clip(uf.where(uf.less(where_, 0), uf.add(where_, n), where_), 0, n)
    # New entry j lands at where_[j] plus its rank among the inserted entries.
    order = red.argsort(where_, stable=True)
    rank = _set(np.zeros(m, np.int32), order, np.arange(m, dtype=np.int32))
    new_pos = uf.add(where_, rank)
    is_old = _set(np.ones(n + m, bool), new_pos, False)
    old_pos = _first_true_positions(is_old, n)[0]
    out_shape = list(get_aval(a).shape)
    out_shape[axis] = n + m
    lead = (slice(None),) * axis
    out = _set(c.zeros(tuple(out_shape), get_aval(a).dtype), lead + (new_pos,), vals)
    return _set(out, lead + (old_pos,), a)


def _inplace_error(name, inplace):
    if inplace:
        raise ValueError(f"jax.numpy.{name} cannot modify arrays in-place, because JAX "
                         f"arrays are immutable. Pass inplace=False to instead return an "
                         f"updated array.")


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """arr with values written at the positions take_along_axis would read."""
    _inplace_error("put_along_axis", inplace)
    a, idx = asarray(arr), asarray(indices)
    shape = get_aval(a).shape
    if axis is None:
        if get_aval(idx).ndim != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        a, axis = c.ravel(a), 0
    nd = get_aval(a).ndim
    axis = canonicalize_axis(axis, nd)
    if get_aval(idx).ndim != nd:
        raise ValueError("indices and arr must have the same number of dimensions; "
                         f"{get_aval(idx).ndim} vs. {nd}")
    grids = []
    for i in range(nd):
        if i == axis:
            grids.append(idx)
        else:
            g = np.arange(get_aval(a).shape[i], dtype=np.int32).reshape(
                [-1 if j == i else 1 for j in range(nd)])
            grids.append(asarray(g))
    return c.reshape(_set(a, tuple(_broadcast_all(*grids)), values, mode=mode), shape)


def put(a, ind, v, mode=None, *, inplace=True):
    """a (flattened indices ind) with the values v written there; v repeats as needed."""
    _inplace_error("put", inplace)
    x = asarray(a)
    ind, v = c.ravel(asarray(ind)), c.ravel(asarray(v))
    n_ind = get_aval(ind).shape[0]
    if not n_ind:
        return x
    if get_aval(v).shape[0] == 0:
        raise ValueError("Cannot broadcast empty values array to non-empty indices")
    v = ix.take(v, np.arange(n_ind) % get_aval(v).shape[0])
    size = get_aval(x).size
    if mode is None:
        scatter_mode = None
    elif mode == "wrap":
        ind, scatter_mode = uf.remainder(ind, size), "clip"
    elif mode == "clip":
        ind, scatter_mode = uf.clip(ind, 0, size - 1), "clip"
    else:
        raise ValueError(f"mode should be one of 'wrap' or 'clip'; got {mode=}")
    flat = _set(c.ravel(x), ind, v, mode=scatter_mode)
    return c.reshape(flat, get_aval(x).shape)


def place(arr, mask, vals, *, inplace=True):
    """arr with its entries where mask holds replaced by vals in order (repeating vals
    as needed): the k-th selected entry takes vals[k % len(vals)], so mask may be traced."""
    _inplace_error("place", inplace)
    x = asarray(arr)
    m = c.ravel(broadcast_to(c.astype(asarray(mask), bool), get_aval(x).shape))
    v = c.ravel(c.astype(asarray(vals), get_aval(x).dtype))
    nv = get_aval(v).shape[0]
    if nv == 0:
        if not isinstance(m, Tracer) and not np.asarray(m).any():
            return x
        raise ValueError("Cannot place empty values into a non-empty selection")
    rank = uf.subtract(red.cumsum(c.astype(m, np.int32)), 1)
    picked = ix.take(v, uf.remainder(uf.maximum(rank, 0), nv))
    return c.reshape(uf.where(m, picked, c.ravel(x)), get_aval(x).shape)


# ------------------------------------------------------------------ integer math

def _integers(name, *xs):
    xs = promote(*[asarray(x) for x in xs])
    if get_aval(xs[0]).dtype.kind not in "iu":
        raise ValueError(f"Arguments to jax.numpy.{name} must be integers.")
    return xs


def gcd(x1, x2, /):
    """Greatest common divisor (Euclid's algorithm on the absolute values, elementwise,
    looping until every remainder is zero)."""
    a, b = _broadcast_all(*(uf.absolute(x) for x in _integers("gcd", x1, x2)))

    def step(pair):
        x, y = pair
        nonzero = uf.not_equal(y, 0)
        safe = uf.where(nonzero, y, 1)
        return uf.where(nonzero, y, x), uf.where(nonzero, uf.remainder(x, safe), 0)

    return while_loop(lambda pair: red.any(uf.not_equal(pair[1], 0)), step, (a, b))[0]


def lcm(x1, x2, /):
    """Least common multiple: |x1 * (x2 // gcd)|, and 0 where either is 0."""
    a, b = _integers("lcm", x1, x2)
    d = gcd(a, b)
    return uf.where(uf.equal(d, 0), 0,
                    uf.absolute(uf.multiply(a, uf.floor_divide(b, uf.where(uf.equal(d, 0),
                                                                           1, d)))))


def bitwise_count(x, /):
    """The number of 1 bits in |x|, as uint8 (NumPy's convention)."""
    x = asarray(x)
    if get_aval(x).dtype.kind not in "iub":
        raise TypeError(f"bitwise_count requires an integer or boolean input, got "
                        f"{get_aval(x).dtype}")
    if get_aval(x).dtype.kind == "b":
        x = c.astype(x, np.int32)
    return c.astype(lc.population_count(uf.absolute(x)), np.uint8)


def _check_bitorder(bitorder):
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    weights = np.arange(8, dtype=np.uint8)
    return weights[::-1] if bitorder == "big" else weights


def packbits(a, axis=None, bitorder="big"):
    """Groups of 8 truth values along axis packed into uint8 bytes (zero-padded)."""
    x = asarray(a)
    if get_aval(x).dtype.kind not in "iub":
        raise TypeError("Expected an input array of integer or boolean data type")
    shifts = _check_bitorder(bitorder)
    bits = c.astype(uf.not_equal(x, 0), np.uint8)
    if axis is None:
        bits, axis = c.ravel(bits), 0
    bits = c.moveaxis(bits, axis, -1)
    n = get_aval(bits).shape[-1]
    if n % 8:
        bits = ix.pad(bits, [(0, 0)] * (get_aval(bits).ndim - 1) + [(0, 8 - n % 8)])
    bits = c.reshape(bits, get_aval(bits).shape[:-1] + (-1, 8))
    packed = c.sum(left_shift(bits, shifts), axis=-1, dtype=np.uint8)
    return c.moveaxis(packed, -1, axis)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of uint8 bytes along axis, 8 per byte (the first `count` of them)."""
    x = asarray(a)
    if get_aval(x).dtype != np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    shifts = _check_bitorder(bitorder)
    bits = uf.bitwise_and(right_shift(c.expand_dims(x, -1), shifts), np.uint8(1))
    if axis is None:
        bits, axis = c.ravel(bits), 0
    else:
        axis = canonicalize_axis(axis, get_aval(x).ndim)
        bits = c.moveaxis(bits, axis, -2)
        bits = c.reshape(bits, get_aval(bits).shape[:-2] + (-1,))
        bits = c.moveaxis(bits, -1, axis)
    if count is not None:
        n = get_aval(bits).shape[axis]
        count = operator.index(count)
        keep = count if count >= 0 else n + count
        if keep > n:
            pad = [(0, 0)] * get_aval(bits).ndim
            pad[axis] = (0, keep - n)
            bits = ix.pad(bits, pad)
        else:
            bits = ix.take(bits, np.arange(max(keep, 0)), axis=axis)
    return bits


# ------------------------------------------------------------ floating-point bits

def frexp(x, /):
    """Mantissa in [0.5, 1) (in magnitude) and int32 exponent with x = m * 2**e,
    read from the bits; subnormals are first scaled into the normal range."""
    x = uf._float_operand(asarray(x))
    dtype = get_aval(x).dtype
    if dtype.kind == "c":
        raise TypeError("frexp does not support complex-valued inputs")
    info = np.finfo(dtype)
    nmant, width = info.nmant, dtype.itemsize * 8
    uint = np.dtype(f"uint{width}")
    bias = -int(info.minexp) + 1          # exponent field of 1.0 is bias - 1
    scale_bits = nmant + 1
    subnormal = uf.less(uf.absolute(x), info.tiny)
    scaled = uf.where(subnormal, uf.multiply(x, np.array(2.0 ** scale_bits, dtype)), x)
    bits = ew.bitcast_convert_type(scaled, uint)
    exp_mask = uint.type((1 << (width - 1 - nmant)) - 1)
    field = uf.bitwise_and(right_shift(bits, uint.type(nmant)), exp_mask)
    exponent = uf.subtract(c.astype(field, np.int32), np.int32(bias - 1))
    exponent = uf.subtract(exponent, uf.where(subnormal, np.int32(scale_bits), np.int32(0)))
    keep = uint.type(~(int(exp_mask) << nmant) & ((1 << width) - 1))
    half = uint.type((bias - 1) << nmant)
    mantissa = ew.bitcast_convert_type(uf.bitwise_or(uf.bitwise_and(bits, keep), half), dtype)
    special = uf.logical_or(uf.equal(x, 0), uf.logical_not(uf.isfinite(x)))
    return uf.where(special, x, mantissa), uf.where(special, np.int32(0), exponent)


def spacing(x, /):
    """The distance from x to the next representable number away from zero."""
    x = uf._float_operand(asarray(x))
    dtype = get_aval(x).dtype
    if dtype.kind == "c":
        raise ValueError("jnp.spacing is not defined for complex inputs.")
    inf = np.array(np.inf, dtype)
    if dtype == np.float16:
        return uf.subtract(nextafter(x, inf), x)
    gap = uf.subtract(nextafter(x, copysign(inf, x)), x)
    smallest = np.array(np.finfo(dtype).smallest_subnormal, dtype)
    return uf.where(uf.equal(gap, 0), copysign(smallest, x), gap)


# ------------------------------------------------------------------ index helpers

def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """Flat indices of the coordinate arrays in an array of shape dims."""
    if len(multi_index) != len(dims):
        raise ValueError(f"len(multi_index)={len(multi_index)} != len(dims)={len(dims)}")
    dims = tuple(operator.index(_static(d, "dims argument of ravel_multi_index()"))
                 for d in dims)
    coords = [asarray(i) for i in multi_index]
    if dtype is None:
        from impl.numpy._util import result_dtype
        dtype = result_dtype(1, *coords)[0] if coords else _default_int()
    dtype = np.dtype(core.canonical_dtype(dtype))
    if dtype.kind not in "iu":
        raise ValueError(f"dtype={dtype} is not an integer type.")
    if int(np.prod(dims)) - 1 > np.iinfo(dtype).max:
        raise ValueError(f"jnp.ravel_multi_index: dtype={dtype} not large enough to hold "
                         f"flattened index for dims={dims}.")
    for i in coords:
        if get_aval(i).dtype.kind not in "iu":
            raise TypeError("only int indices permitted")
    if mode == "raise":
        for i, d in zip(coords, dims):
            v = _concrete_or_error(i, "ravel_multi_index", _RAISE_HINT)
            if ((v < 0) | (v >= d)).any():
                raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        coords = [uf.clip(i, 0, d - 1) for i, d in zip(coords, dims)]
    elif mode == "wrap":
        coords = [uf.remainder(i, d) for i, d in zip(coords, dims)]
    else:
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', or 'clip'")
    if order == "F":
        coords, dims = coords[::-1], dims[::-1]
    elif order != "C":
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
    out = c.zeros((), dtype)
    stride = 1
    for i, d in zip(coords[::-1], dims[::-1]):
        out = uf.add(out, uf.multiply(c.astype(i, dtype), np.array(stride, dtype)))
        stride *= d
    return out


def mask_indices(n, mask_func, k=0, *, size=None):
    """The indices where mask_func(ones((n, n)), k) is nonzero."""
    from impl.numpy._searching import nonzero
    return nonzero(mask_func(c.ones((n, n), _default_int()), k), size=size)


class _Concatenator:
    """r_[...] / c_[...]: the items (arrays, scalars, slices as ranges) joined along an
    axis, each first given at least `ndmin` dimensions; a leading string
    'axis[,ndmin[,trans1d]]' changes these settings."""

    def __init__(self, axis, ndmin, trans1d):
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        if items and isinstance(items[0], str):
            directive = items[0]
            if directive in ("r", "c"):
                joined = ix.concatenate([self._part(i, ndmin, trans1d) for i in items[1:]],
                                        axis=axis)
                row = c.atleast_2d(joined)
                return c.transpose(row) if directive == "c" else row
            try:
                settings = [int(s) for s in directive.split(",")]
            except ValueError:
                raise ValueError(f"could not understand directive {directive!r}") from None
            items = items[1:]
            if len(settings) > 3:
                raise ValueError(f"could not understand directive {directive!r}")
            axis, ndmin, trans1d = settings + [ndmin, trans1d][len(settings) - 1:]
        parts = [self._part(item, ndmin, trans1d) for item in items]
        return ix.concatenate(parts, axis=axis)

    @staticmethod
    def _part(item, ndmin, trans1d):
        if isinstance(item, slice):
            start = 0 if item.start is None else item.start
            step = 1 if item.step is None else item.step
            if isinstance(step, complex):
                x = c.linspace(start, item.stop, int(abs(step)))
            else:
                x = c.arange(start, item.stop, step)
        elif isinstance(item, str):
            raise ValueError("string directive must be placed at the beginning")
        else:
            x = asarray(item)
        nd = get_aval(x).ndim
        if nd < ndmin:
            x = c.reshape(x, (1,) * (ndmin - nd) + get_aval(x).shape)
            if trans1d != -1:
                lead = ndmin - nd
                k1 = trans1d + lead + 1 if trans1d < 0 else trans1d
                axes = list(range(ndmin))
                x = c.transpose(x, axes[:k1] + axes[lead:] + axes[k1:lead])
        return x


r_ = _Concatenator(0, 1, -1)
c_ = _Concatenator(-1, 2, 0)


# ------------------------------------------------------------------ selection

def choose(a, choices, out=None, mode="raise"):
    """Elementwise, the entry of choices[a] (after broadcasting all of them)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    which = asarray(a)
    options = [asarray(ch) for ch in choices]
    if get_aval(which).dtype.kind not in "iu":
        raise ValueError("`a` array must be integer typed")
    n = len(options)
    if mode == "raise":
        v = _concrete_or_error(which, "choose", _RAISE_HINT)
        if ((v < 0) | (v >= n)).any():
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        which = uf.remainder(which, n)
    elif mode == "clip":
        which = uf.clip(which, 0, n - 1)
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    which, *options = _broadcast_all(which, *options)
    stacked = ix.stack(options, axis=0)   # strongly typed, as JAX's jnp.array(choices)
    stacked = ew.convert_element_type(stacked, get_aval(stacked).dtype, weak_type=False)
    return ix.take_along_axis(stacked, c.expand_dims(which, 0), axis=0)[0]


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of a along axis where the 1-D condition holds."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    cond = asarray(condition)
    if get_aval(cond).ndim != 1:
        raise ValueError("condition must be a 1D array")
    x = asarray(a)
    if axis is None:
        x, axis = c.ravel(x), 0
    axis = canonicalize_axis(axis, get_aval(x).ndim)
    x = c.moveaxis(x, axis, 0)
    n, m = get_aval(x).shape[0], get_aval(cond).shape[0]
    cond = c.astype(cond, bool)
    if m > n:
        if size is None or not isinstance(cond, Tracer):
            extra = _concrete_or_error(cond[n:], "compress", _SIZE_HINT)
            if extra.any():
                raise ValueError("condition contains entries that are out of bounds")
        cond = cond[:n]
    elif m < n:
        x = x[:m]
    if size is None:
        keep = np.flatnonzero(_concrete_or_error(cond, "compress", _SIZE_HINT)).astype(np.int32)
        picked = ix.take(x, keep, axis=0)
    else:
        position, filled = _first_true_positions(cond, operator.index(size))
        picked = ix.take(x, position, axis=0, mode="clip")
        filled = c.reshape(filled, (-1,) + (1,) * (get_aval(x).ndim - 1))
        picked = uf.where(filled, picked, c.astype(asarray(fill_value), get_aval(x).dtype))
    return c.moveaxis(picked, 0, axis)


def trim_zeros(filt, trim="fb"):
    """The 1-D (concrete) filt without its leading ('f') and/or trailing ('b') zeros."""
    return _trimmed(filt, trim, "trim_zeros", lambda v: v == 0)


def _trimmed(filt, trim, name, is_zero):
    x = asarray(filt)
    v = _concrete_or_error(x, name)
    if v.ndim != 1:
        raise ValueError(f"{name} requires a 1-D input, got shape {v.shape}")
    nz = np.flatnonzero(~is_zero(v))
    trim = trim.lower()
    start = (nz[0] if nz.size else v.size) if "f" in trim else 0
    stop = (nz[-1] + 1 if nz.size else 0) if "b" in trim else v.size
    return ix.take(x, np.arange(start, max(start, stop), dtype=np.int32))


def _partition_setup(name, a, kth, axis):
    x = asarray(a)
    if get_aval(x).dtype.kind == "c":
        raise NotImplementedError(f"jnp.{name} for complex dtype is not implemented.")
    axis = canonicalize_axis(axis, get_aval(x).ndim)
    x = c.moveaxis(x, axis, -1)
    n = get_aval(x).shape[-1]
    kth = canonicalize_axis(operator.index(kth), n, "kth")
    return x, axis, n, kth


def partition(a, kth, axis=-1):
    """a with the kth smallest entry at index kth along axis: the kth + 1 smallest
    first (ascending), then the others (descending), as JAX's top_k-based version."""
    x, axis, n, kth = _partition_setup("partition", a, kth, axis)
    s = red.sort(x, axis=-1)
    out = ix.concatenate([s[..., :kth + 1], ix.flip(s[..., kth + 1:], axis=-1)], axis=-1)
    return c.moveaxis(out, -1, axis)


def argpartition(a, kth, axis=-1):
    """Indices that partition a: those of the kth + 1 smallest (ascending, ties by
    position), then the remaining positions in increasing order; int32 as in JAX."""
    x, axis, n, kth = _partition_setup("argpartition", a, kth, axis)
    order = red.argsort(x, axis=-1, stable=True)
    rank = red.argsort(order, axis=-1, stable=True)
    rest = red.argsort(c.astype(uf.less_equal(rank, kth), np.int32), axis=-1, stable=True)
    out = ix.concatenate([order[..., :kth + 1], rest[..., :n - kth - 1]], axis=-1)
    return c.moveaxis(c.astype(out, np.int32), -1, axis)


def sort_complex(a):
    """a sorted (along its last axis) as complex numbers."""
    x = red.sort(asarray(a))
    dtype = get_aval(x).dtype
    if dtype.kind != "c":
        dtype = np.complex64 if dtype.itemsize <= 4 else np.complex128
    return c.astype(x, core.canonical_dtype(dtype))


# ------------------------------------------------------------ calculus, Bessel

def gradient(f, *varargs, axis=None, edge_order=None):
    """Second-order central differences inside, first-order one-sided at the ends, per
    axis; spacing is 1, one scalar, or one scalar or coordinate array per axis."""
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not "
                                  "supported.")
    from impl.numpy._polynomials import _inexact
    (y,) = _inexact(f)
    nd = get_aval(y).ndim
    axes = list(range(nd)) if axis is None else [
        canonicalize_axis(a, nd) for a in (axis if isinstance(axis, (tuple, list)) else
                                           (axis,))]
    if not axes:
        return []
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError("Invalid number of spacing arguments")
    out = [_gradient_along(y, h, ax) for h, ax in zip(spacings, axes)]
    return out[0] if len(out) == 1 and (axis is None or not isinstance(axis, (tuple, list))) \
        else out


def _gradient_along(y, h, axis):
    n = get_aval(y).shape[axis]
    if n < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, "
                         "at least (edge_order + 1) elements are required.")
    sl = lambda lo, hi: ix.take(y, np.arange(lo, hi % n if hi < 0 else hi),  # noqa: E731
                                axis=axis)
    h = asarray(h)
    if get_aval(h).ndim == 0:
        inner = uf.true_divide(uf.subtract(sl(2, n), sl(0, n - 2)), uf.multiply(2, h))
        first = uf.true_divide(uf.subtract(sl(1, 2), sl(0, 1)), h)
        last = uf.true_divide(uf.subtract(sl(n - 1, n), sl(n - 2, n - 1)), h)
    else:
        if get_aval(h).ndim != 1 or get_aval(h).shape[0] != n:
            raise ValueError("Spacing arrays must be 1D arrays of the same length as the "
                             "dimension along which the gradient is taken.")
        d = uf.subtract(h[1:], h[:-1])
        shape = [1] * get_aval(y).ndim
        shape[axis] = -1
        d1, d2 = c.reshape(d[:-1], shape), c.reshape(d[1:], shape)
        a = uf.true_divide(uf.negative(d2), uf.multiply(d1, uf.add(d1, d2)))
        b = uf.true_divide(uf.subtract(d2, d1), uf.multiply(d1, d2))
        cc = uf.true_divide(d1, uf.multiply(d2, uf.add(d1, d2)))
        inner = uf.add(uf.add(uf.multiply(a, sl(0, n - 2)), uf.multiply(b, sl(1, n - 1))),
                       uf.multiply(cc, sl(2, n)))
        first = uf.true_divide(uf.subtract(sl(1, 2), sl(0, 1)), d[0])
        last = uf.true_divide(uf.subtract(sl(n - 1, n), sl(n - 2, n - 1)), d[-1])
    return ix.concatenate([first, inner, last], axis=axis)


def i0(x):
    """The modified Bessel function of the first kind, order 0: exp(|x|) * i0e(x)."""
    x = uf._float_operand(asarray(x))
    if get_aval(x).dtype.kind == "c":
        raise ValueError("i0 does not support complex-valued inputs")
    return uf.multiply(uf.exp(uf.absolute(x)), lc.bessel_i0e(x))


def kaiser(M, beta):
    """The Kaiser window of M points with shape parameter beta."""
    M = operator.index(_static(M, "M argument of jnp.kaiser"))
    dtype = core.canonical_dtype(np.float64)
    if M <= 1:
        return c.ones(max(M, 0), dtype)
    alpha = 0.5 * (M - 1)
    t = ((np.arange(M) - alpha) / alpha).astype(dtype)
    beta = c.astype(asarray(beta), dtype)
    return uf.true_divide(i0(uf.multiply(beta, uf.sqrt(uf.subtract(1, uf.multiply(t, t))))),
                          i0(beta))


# --------------------------------------------------------------- set operations
# Without size the result comes from the concrete values; with size, sorted values are
# marked for keeping and the first `size` kept ones are gathered (padded with fill).

def _first_of_runs(s):
    """True at the first entry of each run of equal values of the sorted 1-D s."""
    return ix.concatenate([np.ones(min(get_aval(s).shape[0], 1), bool),
                           uf.not_equal(s[1:], s[:-1])])


def _gather_kept(s, keep, size, fill_value, default_fill):
    position, filled = _first_true_positions(keep, size)
    values = ix.take(s, position, mode="clip") if get_aval(s).shape[0] else \
        c.zeros(size, get_aval(s).dtype)
    if fill_value is None:
        fill_value = default_fill(values, filled)
    return uf.where(filled, values, c.astype(asarray(fill_value), get_aval(s).dtype))


def _smallest_kept(values, filled):
    return red.min(uf.where(filled, values, red.max(values)))


def _flat_pair(ar1, ar2):
    return promote(c.ravel(asarray(ar1)), c.ravel(asarray(ar2)))


def _static_size(size, name):
    return None if size is None else operator.index(_static(size, f"size of {name}"))


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted unique values of ar1 that are not in ar2."""
    size = _static_size(size, "setdiff1d")
    a, b = c.ravel(asarray(ar1)), c.ravel(asarray(ar2))
    if size is None:
        va = _concrete_or_error(a, "setdiff1d", _SIZE_HINT)
        out = np.setdiff1d(va, np.asarray(b) if not isinstance(b, Tracer) else
                           _concrete_or_error(b, "setdiff1d", _SIZE_HINT), assume_unique)
        return c.astype(asarray(out), get_aval(a).dtype)
    s = red.sort(a)
    keep = uf.logical_not(isin(s, b))
    if not assume_unique:
        keep = uf.logical_and(keep, _first_of_runs(s))
    return _gather_kept(s, keep, size, 0 if fill_value is None else fill_value, None)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """The sorted unique values in both arrays (and with return_indices, where each is
    first found in ar1 and ar2)."""
    size = _static_size(size, "intersect1d")
    a, b = _flat_pair(ar1, ar2)
    if size is None:
        res = np.intersect1d(_concrete_or_error(a, "intersect1d", _SIZE_HINT),
                             _concrete_or_error(b, "intersect1d", _SIZE_HINT), assume_unique,
                             return_indices)
        if not return_indices:
            return c.astype(asarray(res), get_aval(a).dtype)
        return (c.astype(asarray(res[0]), get_aval(a).dtype),
                *(asarray(r.astype(_default_int())) for r in res[1:]))
    perm = red.argsort(a, stable=True)
    s = ix.take(a, perm)
    keep = isin(s, b)
    if not assume_unique:
        keep = uf.logical_and(keep, _first_of_runs(s))
    values = _gather_kept(s, keep, size, fill_value, _smallest_kept)
    if not return_indices:
        return values
    position, filled = _first_true_positions(keep, size)
    perm_b = red.argsort(b, stable=True)
    in_b = uf.minimum(searchsorted(ix.take(b, perm_b), values), get_aval(b).shape[0] - 1)
    idx_a = uf.where(filled, ix.take(perm, position, mode="clip"), get_aval(a).shape[0])
    idx_b = uf.where(filled, ix.take(perm_b, in_b, mode="clip"), get_aval(b).shape[0])
    return values, c.astype(idx_a, _default_int()), c.astype(idx_b, _default_int())


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted values found in exactly one of the arrays."""
    size = _static_size(size, "setxor1d")
    a, b = _flat_pair(ar1, ar2)
    if size is None:
        out = np.setxor1d(_concrete_or_error(a, "setxor1d", _SIZE_HINT),
                          _concrete_or_error(b, "setxor1d", _SIZE_HINT), assume_unique)
        return c.astype(asarray(out), get_aval(a).dtype)
    sa, sb = red.sort(a), red.sort(b)
    keep_a, keep_b = uf.logical_not(isin(sa, sb)), uf.logical_not(isin(sb, sa))
    if not assume_unique:
        keep_a = uf.logical_and(keep_a, _first_of_runs(sa))
        keep_b = uf.logical_and(keep_b, _first_of_runs(sb))
    joined = ix.concatenate([sa, sb])
    order = red.argsort(joined, stable=True)
    keep = ix.take(ix.concatenate([keep_a, keep_b]), order)
    return _gather_kept(ix.take(joined, order), keep, size, fill_value, _smallest_kept)


class _UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


class _UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


def _unique_parts(x, size, fill_value):
    """values, first indices, inverse (x's shape) and counts of the unique values of x,
    traceable with a static size."""
    flat = c.ravel(x)
    n = get_aval(flat).shape[0]
    if size is None:
        _concrete_or_error(flat, "unique_all", _SIZE_HINT)
        values, index, inverse, counts = unique(flat, return_index=True, return_inverse=True,
                                                return_counts=True)
        return values, index, c.reshape(inverse, get_aval(x).shape), counts
    if n == 0:
        raise ValueError("unique with size= of an empty array")
    perm = red.argsort(flat, stable=True)
    s = ix.take(flat, perm)
    first = _first_of_runs(s)
    group = uf.subtract(red.cumsum(c.astype(first, np.int32)), 1)
    inverse = _set(np.zeros(n, np.int32), perm, group)
    position, filled = _first_true_positions(first, size)
    fill = red.min(s) if fill_value is None else fill_value
    values = uf.where(filled, ix.take(s, position, mode="clip"),
                      c.astype(asarray(fill), get_aval(s).dtype))
    index = ix.take(perm, position, mode="clip")
    index = uf.where(filled, index, index[0])
    starts = uf.where(filled, position, n)
    ends = ix.concatenate([starts[1:], np.full(1, n, np.int32)])
    counts = uf.where(filled, uf.subtract(uf.minimum(ends, n), starts), 0)
    as_int = lambda v: c.astype(v, _default_int())  # noqa: E731
    return values, as_int(index), as_int(c.reshape(inverse, get_aval(x).shape)), \
        as_int(counts)


def unique_inverse(x, /, *, size=None, fill_value=None):
    """The unique values of x and, for each entry of x, the index of its value."""
    values, _, inverse, _ = _unique_parts(asarray(x), _static_size(size, "unique_inverse"),
                                          fill_value)
    return _UniqueInverseResult(values, inverse)


def unique_all(x, /, *, size=None, fill_value=None):
    """Unique values, first indices, inverse indices and counts (the array API)."""
    return _UniqueAllResult(*_unique_parts(asarray(x), _static_size(size, "unique_all"),
                                           fill_value))


# ------------------------------------------------------------------ polynomials

def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots (1-D input)."""
    from impl.numpy._polynomials import _inexact, polymul
    (z,) = _inexact(seq_of_zeros)
    if get_aval(z).ndim == 2:
        raise NotImplementedError("poly of a square matrix (its characteristic "
                                  "polynomial) needs eigvals, which impl lacks")
    if get_aval(z).ndim != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    p = c.ones(1, get_aval(z).dtype)
    for k in range(get_aval(z).shape[0]):
        p = polymul(p, ix.concatenate([c.ones(1, get_aval(z).dtype),
                                       c.reshape(uf.negative(z[k]), (1,))]))
    return p


def polydiv(u, v, *, trim_leading_zeros=False):
    """Quotient and remainder of the polynomial division u / v (long division)."""
    from impl.numpy._polynomials import _inexact
    u, v = _inexact(u, v)
    m, n = get_aval(u).shape[0] - 1, get_aval(v).shape[0] - 1
    scale = uf.true_divide(1, v[0])
    q = c.zeros(max(m - n + 1, 1), get_aval(u).dtype)
    r = u
    for k in range(m - n + 1):
        d = uf.multiply(scale, r[k])
        q = _set(q, k, d)
        r = ix._IndexUpdateRef(r, slice(k, k + n + 1)).add(uf.negative(uf.multiply(d, v)))
    if trim_leading_zeros:      # entries below sqrt(eps) count as zero (cf. NumPy)
        tol = np.sqrt(np.finfo(get_aval(r).dtype).eps)
        r = _trimmed(r, "f", "polydiv", lambda v: np.abs(v) < tol)
    return q, r


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares coefficients (highest power first) of a degree-deg polynomial."""
    from impl.numpy import linalg
    from impl.numpy._polynomials import _inexact, vander
    if w is None:
        x, y = _inexact(x, y)
    else:
        x, y, w = _inexact(x, y, w)
    deg = operator.index(_static(deg, "deg argument of jnp.polyfit"))
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if get_aval(x).ndim != 1:
        raise TypeError("expected 1D vector for x")
    if get_aval(x).size == 0:
        raise TypeError("expected non-empty vector for x")
    if get_aval(y).ndim not in (1, 2):
        raise TypeError("expected 1D or 2D array for y")
    if get_aval(x).shape[0] != get_aval(y).shape[0]:
        raise TypeError("expected x and y to have same length")
    order = deg + 1
    if rcond is None:
        rcond = get_aval(x).shape[0] * float(np.finfo(get_aval(x).dtype).eps)
    lhs, rhs = vander(x, order), y
    if w is not None:
        if get_aval(w).ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if get_aval(w).shape[0] != get_aval(y).shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = uf.multiply(lhs, c.expand_dims(w, 1))
        rhs = uf.multiply(rhs, w if get_aval(rhs).ndim == 1 else c.expand_dims(w, 1))
    scale = uf.sqrt(c.sum(uf.multiply(lhs, lhs), axis=0))
    lhs = uf.true_divide(lhs, scale)
    coef, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    coef = c.transpose(uf.true_divide(c.transpose(coef), scale))
    if full:
        return coef, resids, rank, s, asarray(float(rcond))
    if cov:
        base = linalg.inv(c.matmul(c.transpose(lhs), lhs))
        base = uf.true_divide(base, c.outer(scale, scale))
        if cov == "unscaled":
            factor = 1.0
        else:
            if get_aval(x).shape[0] <= order:
                raise ValueError("the number of data points must exceed order to scale "
                                 "the covariance matrix")
            factor = uf.true_divide(resids, get_aval(x).shape[0] - order)
        if get_aval(y).ndim == 1:
            return coef, uf.multiply(base, factor)
        return coef, uf.multiply(c.expand_dims(base, -1), factor)
    return coef


# ------------------------------------------------------------------ histograms

def histogramdd(sample, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """Counts (or weights) of the N points of sample (N, D) in a D-dimensional grid of
    bins; the last bin of each dimension includes its right edge."""
    from impl.numpy._histogram import _inexact
    x = _inexact(sample)
    if get_aval(x).ndim != 2:
        raise ValueError(f"histogramdd: sample must have shape (N, D), got "
                         f"{get_aval(x).shape}")
    n, d = get_aval(x).shape
    if isinstance(bins, (int, np.integer)):
        bins = [bins] * d
    if len(bins) != d:
        raise ValueError(f"should be a bin for each dimension. Got {len(bins)} bins and "
                         f"{d} dimensions")
    if range is None:
        range = [None] * d  # noqa: A001
    if len(range) != d:
        raise ValueError("range argument must have one entry per dimension")
    edges, flat, inside, shape = [], c.zeros(n, np.int32), c.ones(n, bool), []
    for k in builtins.range(d):
        col = x[:, k]
        e = histogram_bin_edges(col, bins[k], range[k])
        nb = get_aval(e).shape[0] - 1
        which = uf.subtract(searchsorted(e, col, side="right"), 1)
        which = uf.where(uf.equal(col, e[-1]), nb - 1, which)
        inside = uf.logical_and(inside, uf.logical_and(uf.greater_equal(col, e[0]),
                                                       uf.less_equal(col, e[-1])))
        flat = uf.add(uf.multiply(flat, nb), uf.clip(c.astype(which, np.int32), 0, nb - 1))
        edges.append(e)
        shape.append(nb)
    total = int(np.prod(shape))
    count_dtype = _default_int() if weights is None else get_aval(asarray(weights)).dtype
    w = np.ones((), count_dtype) if weights is None else c.ravel(asarray(weights))
    w = uf.where(inside, w, np.zeros((), count_dtype))
    onehot = uf.equal(c.reshape(flat, (-1, 1)), np.arange(total, dtype=np.int32))
    w = c.reshape(broadcast_to(w, (n,)), (-1, 1))
    counts = c.sum(uf.where(onehot, w, np.zeros((), count_dtype)), axis=0)
    hist = c.reshape(counts, tuple(shape))
    if density:
        hist = uf.true_divide(hist, c.sum(hist))
        for k, e in enumerate(edges):
            widths = uf.subtract(e[1:], e[:-1])
            hist = uf.true_divide(hist, c.reshape(widths, [-1 if j == k else 1
                                                           for j in builtins.range(d)]))
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """The 2-D histogram of the points (x, y) and the edges along x and y."""
    from impl.numpy._histogram import _inexact
    xs, ys = promote(_inexact(x), _inexact(y))
    try:
        n_bins = len(bins)
    except TypeError:
        n_bins = 1
    if n_bins != 1 and n_bins != 2:
        bins = [bins, bins]
    hist, edges = histogramdd(ix.stack([xs, ys], axis=1), bins, range, weights, density)
    return hist, edges[0], edges[1]

