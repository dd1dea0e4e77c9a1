"""Histograms: evenly spaced (or given) bin edges and the counts or weights per bin.

Bin membership is a comparison with the edges and the counts a one-hot sum, so a
histogram traces, jits and batches like any other impl function."""
from __future__ import annotations

import numpy as np

from impl.core import get_aval
from impl.numpy import _core as c
from impl.numpy import _indexing as ix
from impl.numpy import _reductions as red
from impl.numpy import _ufuncs as uf
from impl.numpy._arrays import searchsorted
from impl.numpy._util import asarray, broadcast_to

__all__ = ["histogram", "histogram_bin_edges"]


def _inexact(x):
    x = asarray(x)
    if not np.issubdtype(get_aval(x).dtype, np.inexact):
        from impl import core
        x = c.astype(x, core.canonical_dtype(np.float64))
    return x


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
