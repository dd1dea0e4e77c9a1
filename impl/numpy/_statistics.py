"""Order statistics, histograms, NaN-ignoring reductions and closeness tests.

Quantiles sort along the reduced axes and interpolate between neighbouring order
statistics, so they differentiate and batch through sort and gather like any other
impl function."""
from __future__ import annotations

import builtins

import numpy as np

from impl import core
from impl.core import get_aval
from impl.numpy import _core as c
from impl.numpy import _indexing as ix
from impl.numpy import _reductions as red
from impl.numpy import _ufuncs as uf
from impl.numpy._searching import searchsorted
from impl.numpy._util import (asarray, broadcast_to, canonicalize_axes, check_no_out,
                              promote)

__all__ = ["quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian",
           "average", "ptp", "histogram", "histogram_bin_edges", "nansum", "nanprod",
           "nanmean", "nanmax", "nanmin", "nanvar", "nanstd", "nanargmax", "nanargmin",
           "isclose", "allclose", "array_equal", "array_equiv"]

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _inexact(x):
    x = asarray(x)
    if not np.issubdtype(get_aval(x).dtype, np.inexact):
        x = c.astype(x, core.canonical_dtype(np.float64))
    return x


def _to_last_axis(x, axis):
    """Move the reduced axes of `x` to one trailing axis; also the shape to restore."""
    shape = get_aval(x).shape
    axes = tuple(range(len(shape))) if axis is None else canonicalize_axes(axis, len(shape))
    rest = [d for d in range(len(shape)) if d not in axes]
    x = c.transpose(x, rest + list(axes))
    kept = tuple(shape[d] for d in rest)
    size = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    keep_shape = tuple(1 if d in axes else shape[d] for d in range(len(shape)))
    return c.reshape(x, kept + (size,)), kept, keep_shape


def quantile(a, q, axis=None, out=None, method="linear", keepdims=False):
    """The q-th quantiles of `a` along `axis` (NumPy's methods for continuous data)."""
    check_no_out("quantile", out)
    return _quantile(a, q, axis, method, keepdims, "quantile", ignore_nan=False)


def nanquantile(a, q, axis=None, out=None, method="linear", keepdims=False):
    check_no_out("nanquantile", out)
    return _quantile(a, q, axis, method, keepdims, "nanquantile", ignore_nan=True)


def _quantile(a, q, axis, method, keepdims, name, ignore_nan):
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    x = _inexact(a)
    q = asarray(q)
    if get_aval(q).ndim > 1:
        raise ValueError(f"q must be zero- or one-dimensional, got shape {get_aval(q).shape}")
    x, kept, keep_shape = _to_last_axis(x, axis)
    x = red.sort(x, axis=-1)               # NaNs sort last
    n = get_aval(x).shape[-1]
    if ignore_nan:
        count = c.sum(uf.logical_not(uf.isnan(x)), axis=-1, keepdims=True)
    else:
        count = np.full(kept + (1,), n, np.int32)
    q = c.astype(q, get_aval(x).dtype)
    qs = c.reshape(q, (-1,))
    m = get_aval(qs).shape[0]
    pos = uf.multiply(c.reshape(qs, (1,) * len(kept) + (m,)),
                      uf.subtract(c.astype(count, get_aval(x).dtype), 1))
    pos = uf.clip(pos, 0, n - 1)
    lo, hi = uf.floor(pos), uf.ceil(pos)
    take = lambda i: ix.take_along_axis(  # noqa: E731
        x, broadcast_to(c.astype(i, np.int32), kept + (m,)), axis=-1)
    lo_v, hi_v = take(lo), take(hi)
    if method == "lower":
        res = lo_v
    elif method == "higher":
        res = hi_v
    elif method == "nearest":
        res = take(uf.round(pos))
    elif method == "midpoint":
        res = uf.multiply(uf.add(lo_v, hi_v), 0.5)
    else:
        res = uf.add(lo_v, uf.multiply(uf.subtract(pos, lo), uf.subtract(hi_v, lo_v)))
    if not ignore_nan:   # any NaN makes the quantile NaN, as in NumPy
        has_nan = red.any(uf.isnan(x), axis=-1, keepdims=True)
        res = uf.where(has_nan, np.nan, res)
    else:
        res = uf.where(uf.equal(count, 0), np.nan, res)
    res = c.moveaxis(res, -1, 0)           # q's axis first
    res = c.reshape(res, get_aval(q).shape + (keep_shape if keepdims else kept))
    return res


def percentile(a, q, axis=None, out=None, method="linear", keepdims=False):
    check_no_out("percentile", out)
    return _quantile(a, uf.true_divide(q, 100.0), axis, method, keepdims, "percentile",
                     ignore_nan=False)


def nanpercentile(a, q, axis=None, out=None, method="linear", keepdims=False):
    check_no_out("nanpercentile", out)
    return _quantile(a, uf.true_divide(q, 100.0), axis, method, keepdims, "nanpercentile",
                     ignore_nan=True)


def median(a, axis=None, out=None, keepdims=False):
    check_no_out("median", out)
    return _quantile(a, 0.5, axis, "midpoint", keepdims, "median", ignore_nan=False)


def nanmedian(a, axis=None, out=None, keepdims=False):
    check_no_out("nanmedian", out)
    return _quantile(a, 0.5, axis, "midpoint", keepdims, "nanmedian", ignore_nan=True)


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    x = _inexact(a)
    if weights is None:
        avg = c.mean(x, axis=axis, keepdims=keepdims)
        total = uf.multiply(uf.true_divide(c.size(x), builtins.max(c.size(avg), 1)),
                            c.astype(np.ones((), get_aval(avg).dtype), get_aval(avg).dtype))
        total = broadcast_to(total, get_aval(avg).shape)
    else:
        x, w = promote(x, _inexact(weights))
        xs, ws = get_aval(x).shape, get_aval(w).shape
        if xs != ws:
            if axis is None:
                raise ValueError("Axis must be specified when shapes of a and weights "
                                 "differ.")
            if len(ws) != 1:
                raise ValueError("1D weights expected when shapes of a and weights differ.")
            ax = canonicalize_axes(axis, len(xs))[0]
            if ws[0] != xs[ax]:
                raise ValueError("Length of weights not compatible with specified axis.")
            w = c.reshape(w, tuple(ws[0] if d == ax else 1 for d in range(len(xs))))
            w = broadcast_to(w, xs)
        total = c.sum(w, axis=axis, keepdims=keepdims)
        avg = uf.true_divide(c.sum(uf.multiply(x, w), axis=axis, keepdims=keepdims), total)
    return (avg, total) if returned else avg


def ptp(a, axis=None, out=None, keepdims=False):
    check_no_out("ptp", out)
    return uf.subtract(red.max(a, axis=axis, keepdims=keepdims),
                       red.min(a, axis=axis, keepdims=keepdims))


def histogram_bin_edges(a, bins=10, range=None):  # noqa: A002
    """`bins + 1` evenly spaced edges over `range` (default: the data's min and max)."""
    x = _inexact(a)
    if not isinstance(bins, (int, np.integer)):   # explicit edges, in the data's dtype
        return c.astype(asarray(bins), get_aval(x).dtype)
    if range is None:
        lo, hi = red.min(x), red.max(x)
    else:
        lo, hi = (asarray(r, get_aval(x).dtype) for r in range)
    same = uf.equal(lo, hi)
    lo, hi = uf.where(same, uf.subtract(lo, 0.5), lo), uf.where(same, uf.add(hi, 0.5), hi)
    steps = np.linspace(0.0, 1.0, int(bins) + 1)[:-1].astype(get_aval(x).dtype)
    inner = uf.add(lo, uf.multiply(uf.subtract(hi, lo), steps))
    return ix.concatenate([inner, c.reshape(hi, (1,))])   # the last edge is exactly hi


def histogram(a, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """Counts (or weights) per bin; the last bin includes its right edge."""
    count_dtype = get_aval(asarray(a if weights is None else weights)).dtype
    x = c.ravel(_inexact(a))
    edges = histogram_bin_edges(x, bins, range)
    nbins = get_aval(edges).shape[0] - 1
    which = uf.subtract(searchsorted(edges, x, side="right"), 1)
    which = uf.where(uf.equal(x, edges[-1]), nbins - 1, which)
    inside = uf.logical_and(uf.greater_equal(x, edges[0]), uf.less_equal(x, edges[-1]))
    w = np.ones((), count_dtype) if weights is None else c.ravel(asarray(weights))
    w = uf.where(inside, w, np.zeros((), count_dtype))
    onehot = uf.equal(c.reshape(which, (-1, 1)), np.arange(nbins, dtype=np.int32))
    counts = c.sum(uf.multiply(c.astype(onehot, count_dtype), c.reshape(
        broadcast_to(w, get_aval(x).shape), (-1, 1))), axis=0, dtype=count_dtype)
    if density:
        widths = uf.subtract(edges[1:], edges[:-1])
        counts = uf.true_divide(uf.true_divide(counts, c.sum(counts)), widths)
    return counts, edges


# ------------------------------------------------------------- NaN-ignoring reductions

def _nan_to(a, value):
    x = asarray(a)
    if not np.issubdtype(get_aval(x).dtype, np.inexact):
        return x
    return uf.where(uf.isnan(x), value, x)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    check_no_out("nansum", out)
    return c.sum(_nan_to(a, 0), axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                 where=where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    check_no_out("nanprod", out)
    return red.prod(_nan_to(a, 1), axis=axis, dtype=dtype, keepdims=keepdims,
                    initial=initial, where=where)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    check_no_out("nanmean", out)
    x = _inexact(a)
    valid = uf.logical_not(uf.isnan(x))
    if where is not None:
        valid = uf.logical_and(valid, where)
    total = c.sum(_nan_to(x, 0), axis=axis, dtype=dtype, keepdims=keepdims, where=valid)
    count = c.sum(valid, axis=axis, keepdims=keepdims, dtype=get_aval(total).dtype)
    return uf.true_divide(total, count)


def _nan_extremum(fn, a, axis, out, keepdims, initial, where, name):
    check_no_out(name, out)
    x = asarray(a)
    if not np.issubdtype(get_aval(x).dtype, np.inexact):
        return fn(x, axis=axis, keepdims=keepdims, initial=initial, where=where)
    fill = -np.inf if fn is red.max else np.inf
    res = fn(_nan_to(x, fill), axis=axis, keepdims=keepdims, initial=initial, where=where)
    all_nan = red.all(uf.isnan(x), axis=axis, keepdims=keepdims)
    return uf.where(all_nan, np.nan, res)


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _nan_extremum(red.max, a, axis, out, keepdims, initial, where, "nanmax")


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _nan_extremum(red.min, a, axis, out, keepdims, initial, where, "nanmin")


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    check_no_out("nanvar", out)
    x = _inexact(a)
    valid = uf.logical_not(uf.isnan(x))
    if where is not None:
        valid = uf.logical_and(valid, where)
    mean = nanmean(x, axis=axis, keepdims=True, where=valid)
    centered = _nan_to(uf.subtract(x, mean), 0)
    sq = c.sum(uf.multiply(centered, centered), axis=axis, dtype=dtype, keepdims=keepdims,
               where=valid)
    count = c.sum(valid, axis=axis, keepdims=keepdims, dtype=get_aval(sq).dtype)
    return uf.true_divide(sq, uf.maximum(uf.subtract(count, ddof), 0))


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    check_no_out("nanstd", out)
    return uf.sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
                          where=where))


def nanargmax(a, axis=None, out=None, keepdims=None):
    check_no_out("nanargmax", out)
    x = asarray(a)
    return red.argmax(_nan_to(x, -np.inf), axis=axis, keepdims=keepdims)


def nanargmin(a, axis=None, out=None, keepdims=None):
    check_no_out("nanargmin", out)
    x = asarray(a)
    return red.argmin(_nan_to(x, np.inf), axis=axis, keepdims=keepdims)


# ----------------------------------------------------------------- closeness tests

def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b|, with infinities equal only to themselves."""
    a, b = promote(asarray(a), asarray(b))
    dtype = get_aval(a).dtype
    if not np.issubdtype(dtype, np.inexact):
        return uf.equal(a, b)
    close = uf.less_equal(uf.absolute(uf.subtract(a, b)),
                          uf.add(atol, uf.multiply(rtol, uf.absolute(b))))
    finite = uf.logical_and(uf.isfinite(a), uf.isfinite(b))
    out = uf.where(finite, close, uf.equal(a, b))
    if equal_nan:
        out = uf.logical_or(out, uf.logical_and(uf.isnan(a), uf.isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return red.all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def array_equal(a1, a2, equal_nan=False):
    a1, a2 = asarray(a1), asarray(a2)
    if get_aval(a1).shape != get_aval(a2).shape:
        return asarray(False)
    eq = uf.equal(a1, a2)
    if equal_nan and np.issubdtype(np.result_type(get_aval(a1).dtype, get_aval(a2).dtype),
                                   np.inexact):
        eq = uf.logical_or(eq, uf.logical_and(uf.isnan(a1), uf.isnan(a2)))
    return red.all(eq)


def array_equiv(a1, a2):
    a1, a2 = asarray(a1), asarray(a2)
    try:
        shape = np.broadcast_shapes(get_aval(a1).shape, get_aval(a2).shape)
    except ValueError:
        return asarray(False)
    return red.all(uf.equal(broadcast_to(a1, shape), broadcast_to(a2, shape)))
