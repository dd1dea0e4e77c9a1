"""Finding elements: nonzero, argwhere, digitize, unique, interp, isin, extract.

Functions whose output shape depends on the values (nonzero, unique, one-argument where)
need concrete input, or a static `size=` under a transformation, as in JAX: with `size`,
the result is cut or padded (with `fill_value`) to that length."""
from __future__ import annotations

import numpy as np

from impl import core
from impl.core import Tracer, get_aval
from impl.numpy import _core as c
from impl.numpy import _indexing as ix
from impl.numpy import _reductions as red
from impl.numpy import _ufuncs as uf
from impl.numpy._arrays import searchsorted
from impl.numpy._util import asarray, broadcast_to

__all__ = ["where", "nonzero", "flatnonzero", "argwhere", "digitize",
           "unique", "unique_values", "unique_counts", "interp", "isin", "extract"]


def _concrete_or_error(x, name, reason=None):
    """The NumPy value of `x`, or JAX's error when it is only known abstractly (its
    second line `reason`, by default that `name` needs a static size)."""
    if isinstance(x, Tracer):
        v = x.concrete_value()
        if v is None:
            reason = reason or (f"The size argument of jnp.{name} must be statically "
                                f"specified to use jnp.{name} within transformations.")
            raise core.ConcretizationTypeError(
                f"Abstract tracer value encountered where concrete value is expected: "
                f"traced array with shape {x.aval.str_short()}\n{reason}")
        return np.asarray(v)
    return np.asarray(x)


def _index_dtype():
    """JAX's default integer: int64 with x64 enabled, else int32."""
    return core.canonical_dtype(np.int64)


def _first_true_positions(mask, size):
    """Flat positions of the first `size` True entries of the 1-D boolean `mask`, and
    which of the `size` slots are filled (a fixed-shape, traceable nonzero)."""
    n = get_aval(mask).shape[0]
    as_int = c.astype(mask, np.int32)
    rank = uf.subtract(red.cumsum(as_int), 1)              # slot of each True entry
    slots = np.arange(size, dtype=np.int32)[:, None]
    hit = uf.logical_and(uf.equal(broadcast_to(rank, (size, n)), slots), mask)
    position = c.sum(uf.multiply(c.astype(hit, np.int32), np.arange(n, dtype=np.int32)),
                     axis=1)
    return position, red.any(hit, axis=1)


def nonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero elements, one array per dimension."""
    x = asarray(a)
    shape = get_aval(x).shape
    if not shape:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                         "jnp.atleast_1d(scalar).nonzero() instead.")
    if size is None:
        return tuple(asarray(i.astype(_index_dtype())) for i in
                     np.nonzero(_concrete_or_error(x, "nonzero")))
    flat = uf.not_equal(c.ravel(x), 0)
    position, filled = _first_true_positions(flat, int(size))
    coords = np.unravel_index(np.arange(int(np.prod(shape, dtype=np.int64))), shape)
    fills = (fill_value,) * len(shape) if np.ndim(fill_value) == 0 else tuple(fill_value)
    out = []
    for coord, fill in zip(coords, fills):
        idx = ix.take(asarray(coord.astype(_index_dtype())), position, mode="clip") if \
            coord.size else asarray(np.zeros(int(size), _index_dtype()))
        out.append(uf.where(filled, idx, 0 if fill is None else fill))
    return tuple(out)


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """NumPy's where: with one argument, `nonzero(condition)`; with three, a select."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("Either both or neither of the x and y arguments should be "
                         f"provided to jax.numpy.where, got {x} and {y}.")
    if size is not None or fill_value is not None:
        raise ValueError("size and fill_value arguments cannot be used in three-term "
                         "where function.")
    return uf.staged_where(condition, x, y)


def flatnonzero(a, *, size=None, fill_value=None):
    return nonzero(c.ravel(asarray(a)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    x = asarray(a)
    if not get_aval(x).shape:
        x = c.reshape(x, (1,))
        return c.reshape(nonzero(x, size=size, fill_value=fill_value)[0], (-1, 0))
    return ix.stack(nonzero(x, size=size, fill_value=fill_value), axis=1)


def digitize(x, bins, right=False):
    bins = asarray(bins)
    if get_aval(bins).ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got {bins}")
    if get_aval(bins).shape[0] == 0:
        return c.astype(uf.multiply(asarray(x), 0), np.int32)
    side = "left" if right else "right"
    up = searchsorted(bins, x, side=side)
    down = uf.subtract(get_aval(bins).shape[0], searchsorted(ix.flip(bins), x,
                                                                side="left" if side == "right"
                                                                else "right"))
    return uf.where(uf.less_equal(bins[-1], bins[0]), down, up)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           *, equal_nan=True, size=None, fill_value=None):
    """Sorted unique elements (of the flattened array); with `size`, traceable."""
    if axis is not None:
        raise NotImplementedError("unique: axis is not supported by impl yet")
    x = c.ravel(asarray(ar))
    if size is None:
        value = _concrete_or_error(x, "unique")
        res = np.unique(value, return_index=return_index, return_inverse=return_inverse,
                        return_counts=return_counts, equal_nan=equal_nan)
        if not isinstance(res, tuple):
            return asarray(res)
        values, *rest = res
        return (asarray(values), *(asarray(r.astype(core.canonical_dtype(np.int64)))
                                   for r in rest))
    if return_index or return_inverse:
        raise NotImplementedError("unique with size= supports return_counts only")
    size = int(size)
    s = red.sort(x)
    n = get_aval(s).shape[0]
    if n == 0:
        raise ValueError("unique with size= of an empty array")
    first = ix.concatenate([np.ones(1, bool), uf.not_equal(s[1:], s[:-1])])
    if equal_nan and np.issubdtype(get_aval(s).dtype, np.inexact):
        nan_dup = ix.concatenate([np.zeros(1, bool), uf.logical_and(uf.isnan(s[1:]),
                                                                   uf.isnan(s[:-1]))])
        first = uf.logical_and(first, uf.logical_not(nan_dup))
    position, filled = _first_true_positions(first, size)
    values = ix.take(s, position, mode="clip")
    fill = red.min(s) if fill_value is None else fill_value
    values = uf.where(filled, values, fill)
    if not return_counts:
        return values
    starts = uf.where(filled, position, n)
    ends = ix.concatenate([starts[1:], np.full(1, n, np.int32)])
    counts = uf.where(filled, uf.subtract(uf.minimum(ends, n), starts), 0)
    return values, c.astype(counts, core.canonical_dtype(np.int64))


def unique_values(x, *, size=None, fill_value=None):
    return unique(x, size=size, fill_value=fill_value)


def unique_counts(x, *, size=None, fill_value=None):
    return unique(x, return_counts=True, size=size, fill_value=fill_value)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of (xp, fp) at x; xp increasing."""
    if period is not None:
        raise NotImplementedError("interp: period is not supported by impl yet")
    x, xp, fp = asarray(x), asarray(xp), asarray(fp)
    if get_aval(xp).ndim != 1 or get_aval(fp).ndim != 1:
        raise ValueError("xp and fp must be one-dimensional arrays")
    if get_aval(xp).shape != get_aval(fp).shape:
        raise ValueError("xp and fp must have the same length")
    dtype = np.result_type(core.canonical_dtype(np.float32), get_aval(x).dtype,
                           get_aval(xp).dtype, get_aval(fp).dtype) \
        if not np.issubdtype(get_aval(fp).dtype, np.complexfloating) else get_aval(fp).dtype
    dtype = core.canonical_dtype(dtype)
    x, xp, fp = (c.astype(v, dtype) for v in (x, xp, fp))
    n = get_aval(xp).shape[0]
    i = uf.clip(searchsorted(xp, x, side="right"), 1, n - 1)
    x0, x1 = ix.take(xp, uf.subtract(i, 1)), ix.take(xp, i)
    f0, f1 = ix.take(fp, uf.subtract(i, 1)), ix.take(fp, i)
    dx = uf.subtract(x1, x0)
    t = uf.true_divide(uf.subtract(x, x0), uf.where(uf.equal(dx, 0), 1, dx))
    out = uf.add(f0, uf.multiply(t, uf.subtract(f1, f0)))
    out = uf.where(uf.equal(dx, 0), f0, out)
    out = uf.where(uf.less(x, xp[0]), fp[0] if left is None else left, out)
    return uf.where(uf.greater(x, xp[-1]), fp[-1] if right is None else right, out)


def isin(element, test_elements, invert=False):
    e = asarray(element)
    t = c.ravel(asarray(test_elements))
    shape = get_aval(e).shape
    flat = c.reshape(e, (-1, 1))
    found = red.any(uf.equal(flat, t), axis=1)
    found = c.reshape(found, shape)
    return uf.logical_not(found) if invert else found


def extract(condition, arr, *, size=None, fill_value=0):
    arr = c.ravel(asarray(arr))
    cond = c.ravel(asarray(condition))
    if size is None:
        return asarray(np.extract(_concrete_or_error(cond, "extract"),
                                  _concrete_or_error(arr, "extract")))
    (idx,) = nonzero(cond, size=size, fill_value=get_aval(arr).shape[0])
    return ix.take(arr, idx, mode="fill", fill_value=fill_value)
