"""NaN-ignoring reductions, order statistics (quantile, percentile, median) and other
summaries, composed from impl.numpy's reductions so they inherit every transformation:
a NaN is replaced by the reduction's identity (its tangent is then zero), an order
statistic is read out of a sort (its derivative flows to the elements it selects)."""
from __future__ import annotations

import numpy as np

from impl import core
from impl.core import get_aval
from impl.numpy import _core as c
from impl.numpy import _reductions as red
from impl.numpy import _ufuncs as uf
from impl.numpy._indexing import take_along_axis
from impl.numpy._util import asarray, broadcast_to, canonicalize_axes, check_no_out, strong

__all__ = ["nansum", "nanprod", "nanmax", "nanmin", "nanargmax", "nanargmin", "nanmean",
           "nanvar", "nanstd", "quantile", "percentile", "median", "nanquantile",
           "nanpercentile", "nanmedian", "average", "ptp", "count_nonzero"]


def _floating(x):
    return core.is_float_dtype(get_aval(x).dtype) or np.issubdtype(get_aval(x).dtype,
                                                                   np.complexfloating)


def _nan_to(x, value):
    """x with its NaNs replaced by `value` (integers have none)."""
    if not _floating(x):
        return x
    return uf.where(uf.isnan(x), np.asarray(value, get_aval(x).dtype), x)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """The sum treating NaNs as zero."""
    check_no_out("nansum", out)
    return c.sum(_nan_to(asarray(a), 0), axis, dtype, None, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """The product treating NaNs as one."""
    check_no_out("nanprod", out)
    return red.prod(_nan_to(asarray(a), 1), axis, dtype, None, keepdims, initial, where)


def _nan_extremum(name, reduce_fn, fill, a, axis, out, keepdims, initial, where):
    check_no_out(name, out)
    x = asarray(a)
    if not _floating(x):
        return reduce_fn(x, axis, None, keepdims, initial, where)
    nan = uf.isnan(x)
    res = reduce_fn(_nan_to(x, fill), axis, None, keepdims, initial, where)
    # All-NaN slices stay NaN (as with no `initial`, where every element was NaN).
    all_nan = red.all(nan, axis=axis, keepdims=keepdims, where=where)
    return uf.where(all_nan if initial is None else False, np.nan, res)


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """The largest non-NaN element (NaN where every element is NaN)."""
    return _nan_extremum("nanmax", red.max, -np.inf, a, axis, out, keepdims, initial, where)


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """The smallest non-NaN element (NaN where every element is NaN)."""
    return _nan_extremum("nanmin", red.min, np.inf, a, axis, out, keepdims, initial, where)


def _nan_arg_extremum(name, arg_fn, fill, a, axis, out, keepdims):
    check_no_out(name, out)
    x = asarray(a)
    if not _floating(x):
        return arg_fn(x, axis, None, keepdims)
    nan = uf.isnan(x)
    res = arg_fn(_nan_to(x, fill), axis, None, keepdims)
    return uf.where(red.all(nan, axis=axis, keepdims=bool(keepdims)), -1, res)


def nanargmax(a, axis=None, out=None, keepdims=None):
    """The index of the largest non-NaN element (-1 where every element is NaN)."""
    return _nan_arg_extremum("nanargmax", red.argmax, -np.inf, a, axis, out, keepdims)


def nanargmin(a, axis=None, out=None, keepdims=None):
    """The index of the smallest non-NaN element (-1 where every element is NaN)."""
    return _nan_arg_extremum("nanargmin", red.argmin, np.inf, a, axis, out, keepdims)


def _not_nan_count(x, axis, keepdims, where, dtype):
    return c.sum(uf.logical_not(uf.isnan(x)), axis, dtype, None, keepdims, None, where)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """The mean of the non-NaN elements."""
    check_no_out("nanmean", out)
    x = asarray(a)
    if not _floating(x):
        return c.mean(x, axis, dtype, None, keepdims, where=where)
    x = c._inexact(x, dtype)
    total = c.sum(_nan_to(x, 0), axis, None, None, keepdims, None, where)
    return uf.true_divide(total, _not_nan_count(x, axis, keepdims, where,
                                                get_aval(total).dtype))


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None,
           mean=None):
    """The variance of the non-NaN elements, divided by (count - ddof); `mean` (with
    keepdims' shape) saves recomputing the mean."""
    check_no_out("nanvar", out)
    x = c._inexact(asarray(a), dtype)
    if mean is None:
        mean = nanmean(x, axis, None, None, True, where)
    # NaNs go before squaring: their cotangent is then exactly zero, not 0 * NaN.
    centred = _nan_to(uf.subtract(x, mean), 0)
    squares = uf.multiply(centred, centred)
    total = c.sum(squares, axis, None, None, keepdims, None, where)
    dof = uf.subtract(_not_nan_count(x, axis, keepdims, where, get_aval(total).dtype), ddof)
    # No degrees of freedom: NaN, divided by one so that no 0/0 reaches the derivatives.
    empty = uf.less_equal(dof, 0)
    return uf.true_divide(uf.where(empty, np.nan, total), uf.where(empty, 1, dof))


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None,
           mean=None):
    """The standard deviation of the non-NaN elements."""
    return uf.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where, mean))


# ---------------------------------------------------------- order statistics

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, a, q, axis, method, keepdims, ignore_nan):
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    x = c._inexact(asarray(a), None)
    q = asarray(q)
    if get_aval(q).ndim > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {get_aval(q).shape}")
    q = c.astype(q, get_aval(x).dtype)   # the result has a's dtype whatever q's, as in JAX
    shape = get_aval(x).shape
    axes = canonicalize_axes(axis, len(shape))
    kept = [i for i in range(len(shape)) if i not in axes]
    # Move the reduced axes to the end and flatten them into one.
    x = c.reshape(c.transpose(x, kept + list(axes)),
                  tuple(shape[i] for i in kept) + (-1,))
    n = get_aval(x).shape[-1]
    x = red.sort(x, axis=-1)                       # NaNs sort last
    if ignore_nan:
        count = c.sum(uf.logical_not(uf.isnan(x)), axis=-1, keepdims=True)
    else:
        count = np.asarray(n)
    last = c.astype(uf.subtract(count, 1), get_aval(x).dtype)
    qshape, xshape = get_aval(q).shape, get_aval(x).shape
    pos = broadcast_to(uf.multiply(c.reshape(q, qshape + (1,) * len(xshape)), last),
                       qshape + xshape[:-1] + (1,))
    low, high = uf.floor(pos), uf.ceil(pos)
    high_weight = uf.subtract(pos, low)

    def at(i):
        i = c.astype(uf.clip(i, 0, n - 1), np.int32)
        return take_along_axis(broadcast_to(x, qshape + xshape), i, -1)

    if method == "lower":
        out = at(low)
    elif method == "higher":
        out = at(high)
    elif method == "nearest":
        out = uf.where(uf.less_equal(high_weight, 0.5), at(low), at(high))
    elif method == "midpoint":
        out = uf.multiply(uf.add(at(low), at(high)), 0.5)
    else:
        out = uf.add(uf.multiply(at(low), uf.subtract(1, high_weight)),
                     uf.multiply(at(high), high_weight))
    out = c.squeeze(out, -1)
    if not ignore_nan:
        out = uf.where(red.any(uf.isnan(x), axis=-1), np.nan, out)
    elif get_aval(count).ndim:
        out = uf.where(c.squeeze(count, -1) == 0, np.nan, out)
    if keepdims:
        out = c.reshape(out, qshape + tuple(
            1 if i in axes else d for i, d in enumerate(shape)))
    return strong(out)


def _check_quantile_args(name, out, overwrite_input, weights):
    check_no_out(name, out)
    if overwrite_input:
        raise ValueError(f"{name}: overwrite_input=True is not supported (arrays are "
                         "immutable)")
    if weights is not None:
        raise NotImplementedError(f"{name}: weights= (method='inverted_cdf') is not "
                                  "implemented in impl")


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """The q-th quantiles (q in [0, 1]) along `axis`, interpolated by `method`."""
    _check_quantile_args("quantile", out, overwrite_input, weights)
    return _quantile("quantile", a, q, axis, method, keepdims, ignore_nan=False)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    """quantile of the non-NaN elements."""
    _check_quantile_args("nanquantile", out, overwrite_input, weights)
    return _quantile("nanquantile", a, q, axis, method, keepdims, ignore_nan=True)


def _percent(q):
    return uf.true_divide(asarray(q), 100.0)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, out_sharding=None):
    """The q-th percentiles (q in [0, 100])."""
    if out_sharding is not None:
        raise NotImplementedError("percentile: out_sharding= is not implemented in impl")
    return quantile(a, _percent(q), axis, out, overwrite_input, method, keepdims,
                    weights=weights)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    """percentile of the non-NaN elements."""
    return nanquantile(a, _percent(q), axis, out, overwrite_input, method, keepdims,
                       weights=weights)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The middle value (the mean of the two middle values for an even count)."""
    return quantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """median of the non-NaN elements."""
    return nanquantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)


# ------------------------------------------------------------------ summaries

def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """The (weighted) mean; with `returned`, also the sum of the weights."""
    x = asarray(a)
    if weights is None:
        avg = c.mean(x, axis, keepdims=keepdims)
        count = np.prod([get_aval(x).shape[i] for i in
                         canonicalize_axes(axis, get_aval(x).ndim)], dtype=np.int64)
        total = c.full_like(avg, count)
    else:
        w = asarray(weights)
        xs, ws = get_aval(x).shape, get_aval(w).shape
        if xs != ws:
            if axis is None:
                raise ValueError("Axis must be specified when shapes of a and weights "
                                 "differ.")
            if len(ws) != 1:
                raise ValueError("1D weights expected when shapes of a and weights differ.")
            ax = canonicalize_axes(axis, len(xs))
            if len(ax) != 1 or ws[0] != xs[ax[0]]:
                raise ValueError("Length of weights not compatible with specified axis.")
            w = c.reshape(w, tuple(ws[0] if i == ax[0] else 1 for i in range(len(xs))))
        x = c._inexact(x, None)
        total = c.sum(broadcast_to(w, get_aval(x).shape), axis, keepdims=keepdims)
        avg = uf.true_divide(c.sum(uf.multiply(x, w), axis, keepdims=keepdims), total)
    if returned:
        return avg, c.astype(total, get_aval(avg).dtype)
    return avg


def ptp(a, axis=None, out=None, keepdims=False):
    """The range (maximum minus minimum) along `axis`."""
    check_no_out("ptp", out)
    x = asarray(a)
    return uf.subtract(red.max(x, axis, keepdims=keepdims), red.min(x, axis,
                                                                    keepdims=keepdims))


def count_nonzero(a, axis=None, keepdims=False):
    """How many elements along `axis` are not zero (in the default integer type)."""
    x = asarray(a)
    nonzero = uf.not_equal(x, np.zeros((), get_aval(x).dtype))
    return c.sum(nonzero, axis, core.canonical_dtype(np.int64), keepdims=keepdims)

