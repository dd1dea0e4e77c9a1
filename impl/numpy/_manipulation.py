"""Array manipulation of jax.numpy composed from impl's shape and indexing operations:
more ways to split, stack, flip and rotate, the matrix-vector products of the array
API, selection by conditions, and the constructors of constant arrays."""
from __future__ import annotations

import builtins

import numpy as np

from impl import core
from impl.api import vmap
from impl.core import get_aval
from impl.numpy import _core as c
from impl.numpy import _ufuncs as uf
from impl.numpy._indexing import concatenate, flip, joined_arrays, split, take
from impl.numpy import _converters as conv
from impl.numpy._util import asarray, broadcast_to, canonicalize_axis
from impl.primitives import indexing as ix
from impl.primitives import shape as sh

__all__ = ["append", "array_split", "hsplit", "vsplit", "dsplit", "atleast_3d",
           "column_stack", "dstack", "concat", "fliplr", "flipud", "rot90", "rollaxis",
           "diagflat", "ediff1d", "empty_like", "matrix_transpose", "matvec", "vecmat",
           "unstack", "resize", "block", "select", "piecewise", "ix_", "unravel_index",
           "fromfunction", "apply_along_axis", "apply_over_axes", "delete", "fill_diagonal",
           "frombuffer", "fromstring", "load", "mgrid", "ogrid"]


def _concrete(x, what):
    if isinstance(x, core.Tracer):
        raise core.ConcretizationTypeError(
            f"{what} determines the output shape, so it must be concrete (not traced)")
    return np.asarray(x)


# --------------------------------------------------------------- joining and splitting

def append(arr, values, axis=None):
    """arr with values added at the end (both flattened when axis is None)."""
    if axis is None:
        return concatenate([c.ravel(asarray(arr)), c.ravel(asarray(values))], 0)
    return concatenate([asarray(arr), asarray(values)], axis)


def array_split(ary, indices_or_sections, axis=0):
    """split, also into sections of unequal size: the first n % k get one more."""
    x = asarray(ary)
    axis = canonicalize_axis(axis, get_aval(x).ndim)
    if isinstance(indices_or_sections, (int, np.integer)):
        k, n = int(indices_or_sections), get_aval(x).shape[axis]
        if k <= 0:
            raise ValueError(f"array_split: number of sections must be larger than 0, got {k}")
        sizes = [n // k + 1] * (n % k) + [n // k] * (k - n % k)
        indices_or_sections = list(np.cumsum(sizes)[:-1])
    return split(x, indices_or_sections, axis)


def _split_along(name, axis_for_ndim):
    def split_fn(ary, indices_or_sections):
        x = asarray(ary)
        nd = get_aval(x).ndim
        axis = axis_for_ndim(nd)
        if axis is None:
            raise ValueError(f"{name} only works on arrays of "
                             f"{'3 or more' if name == 'dsplit' else '2 or more'} dimensions")
        return split(x, indices_or_sections, axis)
    split_fn.__name__ = name
    return split_fn


hsplit = _split_along("hsplit", lambda nd: 1 if nd > 1 else (0 if nd == 1 else None))
vsplit = _split_along("vsplit", lambda nd: 0 if nd >= 2 else None)
dsplit = _split_along("dsplit", lambda nd: 2 if nd >= 3 else None)


def _atleast_3d(a):
    x = asarray(a)
    shape = get_aval(x).shape
    if len(shape) == 0:
        return sh.reshape(x, (1, 1, 1))
    if len(shape) == 1:
        return sh.reshape(x, (1,) + shape + (1,))
    if len(shape) == 2:
        return sh.reshape(x, shape + (1,))
    return x


def atleast_3d(*arys):
    out = [_atleast_3d(a) for a in arys]
    return out[0] if len(out) == 1 else out


def column_stack(tup):
    """1-d arrays become columns; 2-d ones are joined along their second axis."""
    cols = []
    for a in joined_arrays(tup, "column_stack"):
        x = asarray(a)
        if get_aval(x).ndim < 2:
            x = sh.reshape(x, (get_aval(x).size, 1))
        cols.append(x)
    return concatenate(cols, 1)


def dstack(tup, dtype=None):
    return concatenate([_atleast_3d(a) for a in joined_arrays(tup, "dstack")], 2, dtype)


def concat(arrays, /, *, axis=0):
    return concatenate(arrays, axis)


# ------------------------------------------------------------- flips and rotations

def _at_least(name, x, nd):
    if get_aval(x).ndim < nd:
        raise ValueError(f"{name} requires an array of at least {nd} dimensions, got "
                         f"shape {get_aval(x).shape}")
    return x


def fliplr(m):
    return flip(_at_least("fliplr", asarray(m), 2), 1)


def flipud(m):
    return flip(_at_least("flipud", asarray(m), 1), 0)


def rot90(m, k=1, axes=(0, 1)):
    """Rotate by 90 degrees k times in the plane of `axes` (from the first toward the
    second)."""
    x = asarray(m)
    nd = get_aval(x).ndim
    if len(axes) != 2:
        raise ValueError(f"rot90: axes must name 2 axes, got {axes}")
    a0, a1 = (canonicalize_axis(a, nd) for a in axes)
    if a0 == a1:
        raise ValueError(f"rot90: axes must be different, got {axes}")
    k = int(k) % 4
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, a0), a1)
    if k == 1:
        return c.swapaxes(flip(x, a1), a0, a1)
    return flip(c.swapaxes(x, a0, a1), a1)


def rollaxis(a, axis, start=0):
    """Move `axis` to stand before `start` (NumPy's older moveaxis)."""
    x = asarray(a)
    nd = get_aval(x).ndim
    axis = canonicalize_axis(axis, nd)
    if not -nd <= start <= nd:
        raise ValueError(f"rollaxis: start={start} is out of bounds for an array of "
                         f"dimension {nd}")
    start = start + nd if start < 0 else start
    if axis < start:
        start -= 1
    return c.moveaxis(x, axis, start) if axis != start else x


def diagflat(v, k=0):
    return c.diag(c.ravel(asarray(v)), k)


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of consecutive elements of the flattened array, with extra values."""
    x = c.ravel(asarray(ary))
    n = get_aval(x).shape[0]
    parts = [c.ravel(asarray(to_begin))] if to_begin is not None else []
    parts.append(uf.subtract(ix.slice(x, [1], [max(n, 1)]), ix.slice(x, [0], [max(n - 1, 0)])))
    if to_end is not None:
        parts.append(c.ravel(asarray(to_end)))
    dtype = get_aval(x).dtype
    return concatenate([c.astype(p, dtype) for p in parts], 0) if len(parts) > 1 else parts[0]


def empty_like(prototype, dtype=None, shape=None):
    """Like zeros_like: impl's arrays are never uninitialised."""
    return c.zeros_like(prototype, dtype, shape)


# ------------------------------------------------------------ linear algebra helpers

def matrix_transpose(x, /):
    x = asarray(x)
    nd = get_aval(x).ndim
    if nd < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions; got ndim={nd}")
    return c.swapaxes(x, -1, -2)


def matvec(x1, x2, /):
    """Matrix (last two axes of x1) times vector (last axis of x2), batched."""
    v = c.expand_dims(asarray(x2), -1)
    return c.squeeze(c.matmul(x1, v), -1)


def vecmat(x1, x2, /):
    """Conjugated vector (last axis of x1) times matrix (last two axes of x2), batched."""
    from impl.numpy._math import conj
    v = c.expand_dims(conj(asarray(x1)), -2)
    return c.squeeze(c.matmul(v, x2), -2)


def unstack(x, /, *, axis=0):
    x = asarray(x)
    nd = get_aval(x).ndim
    if nd == 0:
        raise ValueError("unstack requires an array of at least 1 dimension")
    axis = canonicalize_axis(axis, nd)
    return tuple(ix.index_in_dim(x, i, axis, keepdims=False)
                 for i in range(get_aval(x).shape[axis]))


def resize(a, new_shape):
    """The flattened array repeated (or cut) to fill `new_shape`."""
    x = c.ravel(asarray(a))
    shape = (int(new_shape),) if isinstance(new_shape, (int, np.integer)) else \
        tuple(int(d) for d in new_shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"resize: all elements of new_shape must be non-negative, got {shape}")
    size, n = int(np.prod(shape)), get_aval(x).shape[0]
    if size and n == 0:
        x = c.zeros(1, get_aval(x).dtype)
        n = 1
    reps = -(-size // n) if n else 0
    tiled = concatenate([x] * reps, 0) if reps > 1 else x
    return c.reshape(ix.slice(tiled, [0], [size]), shape)


def block(arrays):
    """An array assembled from nested lists of blocks (innermost list: last axis)."""
    def depth(a):
        if isinstance(a, tuple):
            raise ValueError(f"jax.numpy.block does not allow tuples, got {a}")
        if not isinstance(a, list):
            return 0
        depths = {depth(b) for b in a}
        if len(depths) > 1:
            raise ValueError("Mismatched list depths in jax.numpy.block")
        return 1 + (depths.pop() if depths else 0)
    levels = depth(arrays)
    nd = builtins.max([levels] + [get_aval(asarray(b)).ndim for b in _leaves(arrays)])

    def assemble(a, level):
        if not isinstance(a, list):
            x = asarray(a)
            return sh.reshape(x, (1,) * (nd - get_aval(x).ndim) + get_aval(x).shape)
        if not a:
            raise ValueError("block: lists cannot be empty")
        return concatenate([assemble(b, level + 1) for b in a], nd - levels + level)
    return assemble(arrays, 0)


def _leaves(a):
    if isinstance(a, list):
        return [leaf for b in a for leaf in _leaves(b)]
    return [a]


# ------------------------------------------------------------------- selection

def select(condlist, choicelist, default=0):
    """From each position, the choice of the first condition that holds there."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist and choicelist must have the same length, got "
                         f"{len(condlist)} and {len(choicelist)}")
    if not condlist:
        raise ValueError("select: condlist must be non-empty")
    conds = [asarray(cnd) for cnd in condlist]
    for i, cnd in enumerate(conds):
        if get_aval(cnd).dtype != np.bool_:
            raise TypeError(f"select: condlist[{i}] must be boolean, got "
                            f"{get_aval(cnd).dtype}")
    out = default
    for cnd, choice in reversed(list(zip(conds, choicelist))):
        out = uf.where(cnd, choice, out)
    return out


def piecewise(x, condlist, funclist, *args, **kw):
    """funclist[i] (a function of x, given *args and **kw, or a constant) where
    condlist[i] holds, a later condition winning; elsewhere an extra last entry of
    funclist, or 0."""
    x = asarray(x)
    n = len(condlist)
    if len(funclist) not in (n, n + 1):
        raise ValueError(f"piecewise: with {n} conditions, funclist must have {n} or {n + 1} "
                         f"entries, got {len(funclist)}")
    dtype, shape = get_aval(x).dtype, get_aval(x).shape

    def value(fn):
        out = fn(x, *args, **kw) if callable(fn) else fn
        return broadcast_to(c.astype(asarray(out), dtype), shape)
    out = value(funclist[n]) if len(funclist) == n + 1 else c.zeros_like(x)
    for i in range(n):
        out = uf.where(broadcast_to(asarray(condlist[i]), shape), value(funclist[i]), out)
    return out


def ix_(*args):
    """Open-mesh index arrays: the i-th of n has its values along axis i only."""
    out = []
    n = len(args)
    for i, a in enumerate(args):
        x = asarray(a)
        if get_aval(x).ndim != 1:
            raise ValueError(f"ix_: arguments must be 1-dimensional, got shape "
                             f"{get_aval(x).shape}")
        out.append(sh.reshape(x, (1,) * i + get_aval(x).shape + (1,) * (n - i - 1)))
    return tuple(out)


def unravel_index(indices, shape):
    """The coordinates of flat indices in an array of `shape` (out-of-range indices are
    clipped into range, as in JAX)."""
    idx = asarray(indices)
    if get_aval(idx).dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices must be integers, got "
                        f"{get_aval(idx).dtype}")
    shape = tuple(int(d) for d in np.atleast_1d(shape))
    size = int(np.prod(shape))
    idx = uf.clip(idx, -size, size - 1)
    idx = uf.where(uf.less(idx, 0), uf.add(idx, size), idx)
    out = []
    for d in reversed(shape):
        out.append(uf.remainder(idx, d))
        idx = uf.floor_divide(idx, d)
    return tuple(reversed(out))


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """function applied to the index grids of `shape` (as arrays of `dtype`)."""
    from impl.numpy._vectorize import indices
    grids = indices(shape, dtype=dtype)
    return function(*[grids[i] for i in range(len(shape))], **kwargs)


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """func1d applied to every 1-d slice along `axis` (vmapped over the other axes)."""
    x = asarray(arr)
    nd = get_aval(x).ndim
    axis = canonicalize_axis(axis, nd)

    def fn(slice1d):
        return func1d(slice1d, *args, **kwargs)
    for i in range(axis):
        fn = vmap(fn, in_axes=0, out_axes=0)
    for i in range(nd - axis - 1):
        fn = vmap(fn, in_axes=-1, out_axes=-1)
    return fn(x)


def apply_over_axes(func, a, axes):
    """func(a, axis) for each axis in turn, keeping the reduced axes (size 1)."""
    x = asarray(a)
    for axis in axes:
        out = asarray(func(x, axis))
        if get_aval(out).ndim == get_aval(x).ndim - 1:
            out = c.expand_dims(out, axis)
        elif get_aval(out).ndim != get_aval(x).ndim:
            raise ValueError("apply_over_axes: function is not returning an array of the "
                             "correct shape")
        x = out
    return x


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """arr without the entries at the (concrete) indices or slice `obj` along axis."""
    x = asarray(arr)
    if axis is None:
        x, axis = c.ravel(x), 0
    axis = canonicalize_axis(axis, get_aval(x).ndim)
    n = get_aval(x).shape[axis]
    if isinstance(obj, slice):
        drop = np.arange(n)[obj]
    else:
        drop = _concrete(obj, "delete: obj").reshape(-1)
        if drop.dtype.kind not in "iu":
            raise TypeError(f"delete: obj must be integer indices or a slice, got "
                            f"{drop.dtype}")
        if ((drop < -n) | (drop >= n)).any():
            raise IndexError(f"delete: index out of bounds for axis {axis} of size {n}")
        if assume_unique_indices and len(np.unique(drop % n)) != len(drop):
            raise ValueError("delete: assume_unique_indices=True but obj has repeated indices")
    keep = np.setdiff1d(np.arange(n), np.asarray(drop) % n if n else drop)
    return take(x, keep.astype(np.int32), axis=axis)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """a with val (repeated as needed) written on its main diagonal. A new array, so
    inplace must be False; wrap=True (NumPy's wrapping for tall matrices) raises, as in
    JAX."""
    if inplace:
        raise NotImplementedError("JAX arrays are immutable, must use inplace=False")
    if wrap:
        raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
    x = asarray(a)
    shape = get_aval(x).shape
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    n = builtins.min(shape)
    values = c.astype(asarray(val), get_aval(x).dtype)
    if get_aval(values).ndim:
        values = resize(values, (n,))
    diagonal = np.arange(n, dtype=np.int32)
    return x.at[(diagonal,) * len(shape)].set(values)


# ------------------------------------------------------------ constant constructors

def frombuffer(buffer, dtype=float, count=-1, offset=0):
    return conv.asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string, dtype=float, count=-1, *, sep):
    return conv.asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def load(file, *args, **kwargs):
    """np.load, with the arrays it reads as impl (JAX) arrays."""
    out = np.load(file, *args, **kwargs)
    return conv.asarray(out) if isinstance(out, np.ndarray) else out


class _Grid:
    """mgrid[...] (dense) and ogrid[...] (open): the index grids of slices, whose
    bounds are static, so NumPy computes them and they become arrays."""

    def __init__(self, numpy_grid, sparse):
        self._numpy_grid, self._sparse = numpy_grid, sparse

    def __getitem__(self, key):
        out = self._numpy_grid[key]
        if self._sparse and isinstance(out, (list, tuple)):
            return [conv.asarray(o) for o in out]
        return conv.asarray(out)


mgrid = _Grid(np.mgrid, sparse=False)
ogrid = _Grid(np.ogrid, sparse=True)
