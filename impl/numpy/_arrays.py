"""More of jax.numpy that real programs call: rolling and differencing, searchsorted,
closeness tests, cross and Kronecker products, grids, and a few float helpers; each is
composed from impl's primitives, so it transforms like them."""
from __future__ import annotations

import builtins

import numpy as np

from impl import core
from impl.core import get_aval
from impl.lax import fori_loop
from impl.numpy import _core as c
from impl.numpy import _ufuncs as uf
from impl.numpy._indexing import concatenate, stack, take
from impl.numpy import _converters as conv
from impl.numpy._util import (asarray, broadcast_shapes, broadcast_to, canonicalize_axis,
                              promote)
from impl.primitives import elementwise as ew
from impl.primitives import indexing as ix

__all__ = ["roll", "diff", "searchsorted", "isclose", "allclose", "cross", "kron",
           "meshgrid", "tri", "fmax", "fmin", "trunc", "degrees", "radians", "deg2rad",
           "rad2deg", "copy", "vecdot"]


def _slice_axis(x, axis, start, stop):
    shape = get_aval(x).shape
    starts = [0] * len(shape)
    limits = list(shape)
    starts[axis], limits[axis] = start, stop
    return ix.slice(x, starts, limits)


# ------------------------------------------------------------ roll and diff

def _roll_one(x, shift, axis):
    n = get_aval(x).shape[axis]
    if n == 0:
        return x
    if isinstance(shift, (int, np.integer)):
        k = int(shift) % n
        if k == 0:
            return x
        return concatenate([_slice_axis(x, axis, n - k, n), _slice_axis(x, axis, 0, n - k)],
                           axis)
    # A traced shift: read n elements of the array repeated twice, from (-shift) mod n.
    start = uf.remainder(uf.negative(shift), n)
    return ix.dynamic_slice_in_dim(concatenate([x, x], axis), start, n, axis)


def roll(a, shift, axis=None):
    """Elements shifted along `axis` with wrap-around (of the flattened array if None)."""
    x = asarray(a)
    if axis is None:
        return c.reshape(roll(c.ravel(x), shift, 0), get_aval(x).shape)
    shape = get_aval(x).shape
    if isinstance(shift, core.Tracer) and get_aval(shift).ndim == 0:
        shifts = [shift]
    else:
        shifts = list(np.atleast_1d(np.asarray(shift))) if not isinstance(shift, core.Tracer) \
            else [shift[i] for i in range(get_aval(shift).shape[0])]
    axes = list(np.atleast_1d(axis))
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift ({len(shifts)} values) and axis ({len(axes)} values) "
                         "must broadcast")
    for s, ax in zip(shifts, axes):
        x = _roll_one(x, s, canonicalize_axis(int(ax), len(shape)))
    return x


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th discrete difference along `axis` (after adding prepend/append)."""
    x = asarray(a)
    nd = get_aval(x).ndim
    if nd == 0:
        raise ValueError(f"diff requires input that is at least one dimensional; got {a}")
    n = operator_index(n, "diff", "n")
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    axis = canonicalize_axis(axis, nd)
    parts = [_edge(e, x, axis) for e in (prepend,) if e is not None] + [x] + \
        [_edge(e, x, axis) for e in (append,) if e is not None]
    if len(parts) > 1:
        x = concatenate(parts, axis)
    for _ in range(n):
        m = get_aval(x).shape[axis]
        later, earlier = _slice_axis(x, axis, 1, m), _slice_axis(x, axis, 0, m - 1)
        x = uf.not_equal(later, earlier) if get_aval(x).dtype == np.bool_ else \
            uf.subtract(later, earlier)
    return x


def _edge(extra, x, axis):
    """prepend/append for diff: a scalar becomes one slice along `axis`."""
    e = asarray(extra)
    if get_aval(e).ndim == 0:
        shape = list(get_aval(x).shape)
        shape[axis] = 1
        e = broadcast_to(e, tuple(shape))
    return e


def operator_index(value, fn, name):
    try:
        return int(np.asarray(value).__index__()) if not isinstance(value, int) else value
    except (TypeError, AttributeError):
        raise TypeError(f"{fn}: {name} must be an integer, got {value!r}") from None


# -------------------------------------------------------------- searchsorted

def _total_less(x, y):
    """x < y in the total order sorting uses (NaN after every number)."""
    if not core.is_float_dtype(get_aval(x).dtype):
        return uf.less(x, y)
    return uf.logical_or(uf.less(x, y),
                         uf.logical_and(uf.isnan(y), uf.logical_not(uf.isnan(x))))


_SEARCH_METHODS = ("compare_all", "scan", "scan_unrolled", "sort")


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Where the elements of v would be inserted into the sorted 1-d `a` to keep it
    sorted. `method` picks the algorithm, as in JAX: 'scan' (a binary search in a loop),
    'scan_unrolled' (the same search unrolled), 'sort' (ranks in a joint sort) or
    'compare_all' (count the elements of `a` before each v)."""
    if side not in ("left", "right"):
        raise ValueError(f"{side!r} is an invalid value for keyword 'side'. Expected one "
                         "of ['left', 'right']")
    if method not in _SEARCH_METHODS:
        raise ValueError(f"invalid argument method={method!r}, expected one of "
                         f"{list(_SEARCH_METHODS)}")
    a, v = asarray(a), asarray(v)
    if get_aval(a).ndim != 1:
        raise ValueError("a should be 1-dimensional")
    if sorter is not None:
        a = take(a, asarray(sorter), axis=0)
    n = get_aval(a).shape[0]
    dtype = np.int32 if n <= np.iinfo(np.int32).max // 2 else np.int64
    common = np.result_type(get_aval(a).dtype, get_aval(v).dtype)
    a, v = c.astype(a, common), c.astype(v, common)
    if method == "compare_all":
        vs = c.reshape(v, get_aval(v).shape + (1,))
        # left: count a < v; right: count a <= v, i.e. not (v < a).
        before = _total_less(a, vs) if side == "left" else uf.logical_not(_total_less(vs, a))
        return c.sum(before, axis=-1, dtype=dtype)
    if method == "sort":
        return _search_by_sorting(a, v, side, dtype)
    return _binary_search(a, v, side, dtype, unrolled=method == "scan_unrolled")


def _binary_search(a, v, side, dtype, unrolled):
    """ceil(log2(n + 1)) halvings of [low, high), for every query at once: the query
    goes left of a[mid] when v <= a[mid] (side='left') or v < a[mid] (side='right')."""
    n = get_aval(a).shape[0]
    low, high = c.zeros(get_aval(v).shape, dtype), c.full(get_aval(v).shape, n, dtype)
    if n == 0:
        return high

    def halve(_, bounds):
        low, high = bounds
        mid = uf.add(low, uf.floor_divide(uf.subtract(high, low), 2))
        pivot = take(a, mid, mode="clip")
        left = uf.logical_not(_total_less(pivot, v)) if side == "left" else \
            _total_less(v, pivot)
        return uf.where(left, low, mid), uf.where(left, mid, high)
    levels = int(np.ceil(np.log2(n + 1)))
    if unrolled:
        bounds = (low, high)
        for i in range(levels):
            bounds = halve(i, bounds)
    else:
        bounds = fori_loop(0, levels, halve, (low, high))
    return bounds[1]


def _search_by_sorting(a, v, side, dtype):
    """The insertion index of each query is its rank among the queries and `a` sorted
    together (queries first for side='left', last for 'right') minus its rank among the
    queries alone."""
    from impl.numpy._reductions import argsort
    queries = c.ravel(v)
    nq, n = get_aval(queries).shape[0], get_aval(a).shape[0]

    def rank(x):  # the inverse of the sorting permutation
        return argsort(argsort(x, stable=True), stable=True)
    if side == "left":
        joint = ix.slice(rank(concatenate([queries, a], 0)), [0], [nq])
    else:
        joint = ix.slice(rank(concatenate([a, queries], 0)), [n], [n + nq])
    return c.reshape(c.astype(uf.subtract(joint, rank(queries)), dtype), get_aval(v).shape)


# ------------------------------------------------------------------ closeness

def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| elementwise (infinities equal only to themselves)."""
    a, b = asarray(a), asarray(b)
    dtype = np.result_type(get_aval(a).dtype, get_aval(b).dtype)
    if not (core.is_float_dtype(dtype) or np.issubdtype(dtype, np.complexfloating)):
        return uf.equal(a, b)
    a, b = promote(a, b)
    out = uf.less_equal(uf.absolute(uf.subtract(a, b)),
                        uf.add(atol, uf.multiply(rtol, uf.absolute(b))))
    inf_a, inf_b = uf.isinf(a), uf.isinf(b)
    any_inf = uf.logical_or(inf_a, inf_b)
    out = uf.where(any_inf, uf.logical_and(uf.logical_and(inf_a, inf_b), uf.equal(a, b)),
                   out)
    if equal_nan:
        out = uf.logical_or(out, uf.logical_and(uf.isnan(a), uf.isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element pair is close (see isclose)."""
    from impl.numpy._reductions import all as all_
    return all_(isclose(a, b, rtol, atol, equal_nan))


# ------------------------------------------------------------------ products

def _component(x, i, axis):
    return c.squeeze(_slice_axis(x, axis, i, i + 1), axis)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 2- or 3-vectors along the given axes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = asarray(a), asarray(b)
    a = c.moveaxis(a, axisa, -1)
    b = c.moveaxis(b, axisb, -1)
    na, nb = get_aval(a).shape[-1], get_aval(b).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("Dimension must be either 2 or 3 for cross product")
    if na == 2 and nb == 2:
        a0, a1 = (_component(a, i, -1) for i in range(2))
        b0, b1 = (_component(b, i, -1) for i in range(2))
        return uf.subtract(uf.multiply(a0, b1), uf.multiply(a1, b0))
    zero = np.zeros((), np.result_type(get_aval(a).dtype, get_aval(b).dtype))
    a0, a1 = _component(a, 0, -1), _component(a, 1, -1)
    a2 = _component(a, 2, -1) if na == 3 else zero
    b0, b1 = _component(b, 0, -1), _component(b, 1, -1)
    b2 = _component(b, 2, -1) if nb == 3 else zero
    parts = [uf.subtract(uf.multiply(a1, b2), uf.multiply(a2, b1)),
             uf.subtract(uf.multiply(a2, b0), uf.multiply(a0, b2)),
             uf.subtract(uf.multiply(a0, b1), uf.multiply(a1, b0))]
    shape = broadcast_shapes(*[get_aval(asarray(p)).shape for p in parts])
    out = stack([broadcast_to(p, shape) for p in parts], -1)
    return c.moveaxis(out, -1, axisc)


def kron(a, b):
    """The Kronecker product: blocks a[i, j] * b."""
    a, b = asarray(a), asarray(b)
    sa, sb = get_aval(a).shape, get_aval(b).shape
    nd = builtins.max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    a = c.reshape(a, tuple(d for s in sa for d in (s, 1)))
    b = c.reshape(b, tuple(d for s in sb for d in (1, s)))
    return c.reshape(uf.multiply(a, b), tuple(x * y for x, y in zip(sa, sb)))


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """Dot products of the vectors along `axis` (batched over the broadcast others)."""
    x1, x2 = asarray(x1), asarray(x2)
    n1, n2 = get_aval(x1).ndim, get_aval(x2).ndim
    if n1 == 0 or n2 == 0:
        raise ValueError("vecdot: arguments must be at least one-dimensional")
    x1 = c.moveaxis(x1, canonicalize_axis(axis, n1) if axis < 0 else axis, -1)
    x2 = c.moveaxis(x2, canonicalize_axis(axis, n2) if axis < 0 else axis, -1)
    if get_aval(x1).shape[-1] != get_aval(x2).shape[-1]:
        raise ValueError(f"vecdot: axes have different sizes: {get_aval(x1).shape[-1]} "
                         f"and {get_aval(x2).shape[-1]}")
    out = c.matmul(c.expand_dims(x1, -2), c.expand_dims(x2, -1), precision=precision,
                   preferred_element_type=preferred_element_type)
    return c.squeeze(out, (-2, -1))


# ---------------------------------------------------------- grids and masks

def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-d coordinate vectors ('xy': Cartesian, 'ij': matrix)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
    # `copy` has no observable effect: arrays are immutable, a copy equals a view.
    xs = [asarray(x) for x in xi]
    for i, x in enumerate(xs):
        if get_aval(x).ndim != 1:
            raise ValueError(f"Arguments to jax.numpy.meshgrid must be 1D, got shape "
                             f"{get_aval(x).shape}")
    shape = [get_aval(x).shape[0] for x in xs]
    if indexing == "xy" and len(xs) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        where = i if indexing == "ij" or len(xs) < 2 else {0: 1, 1: 0}.get(i, i)
        target = [1] * len(xs)
        target[where] = get_aval(x).shape[0]
        g = c.reshape(x, tuple(target))
        out.append(g if sparse else broadcast_to(g, tuple(shape)))
    return out


def tri(N, M=None, k=0, dtype=None):
    """Ones at and below the k-th diagonal of an N x M array."""
    M = N if M is None else M
    # JAX's default here is float32, also with x64 enabled.
    dtype = core.canonical_dtype(np.float32 if dtype is None else dtype)
    return conv.asarray(np.tri(operator_index(N, "tri", "N"), operator_index(M, "tri", "M"),
                               operator_index(k, "tri", "k"), dtype=dtype))


# ----------------------------------------------------------- float helpers

def fmax(x1, x2):
    """The larger of x1, x2 elementwise, ignoring a NaN when the other is not NaN."""
    x1, x2 = asarray(x1), asarray(x2)
    return uf.where(uf.logical_or(uf.greater(x1, x2), uf.isnan(x2)), x1, x2)


def fmin(x1, x2):
    """The smaller of x1, x2 elementwise, ignoring a NaN when the other is not NaN."""
    x1, x2 = asarray(x1), asarray(x2)
    return uf.where(uf.logical_or(uf.less(x1, x2), uf.isnan(x2)), x1, x2)


def trunc(x):
    """Round towards zero."""
    x = asarray(x)
    if not core.is_float_dtype(get_aval(x).dtype):
        return x
    return uf.where(uf.less(x, 0), uf.ceil(x), uf.floor(x))


def degrees(x, /):
    """Radians to degrees."""
    x = uf._float_operand(x)
    return ew.mul(x, ew.constant_like(x, 180 / np.pi))


def radians(x, /):
    """Degrees to radians."""
    x = uf._float_operand(x)
    return ew.mul(x, ew.constant_like(x, np.pi / 180))


rad2deg = degrees
deg2rad = radians


def copy(a, order=None):
    """A copy of `a` (arrays are immutable, so the same values)."""
    if order not in (None, "K", "C"):
        raise NotImplementedError(f"copy: order={order!r} is not supported")
    return conv.array(a, copy=True)
