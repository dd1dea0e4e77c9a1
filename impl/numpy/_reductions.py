"""jax.numpy reductions over impl's reduction primitives: max/min, prod, argmax/argmin,
cumsum/cumprod, sort/argsort, all/any."""
from __future__ import annotations

import builtins

import numpy as np

from impl import core
from impl.core import get_aval
from impl.primitives import elementwise as ew
from impl.primitives import shape as sh
from impl.primitives import reductions as red
from impl.numpy._util import (asarray, canonicalize_axes, canonicalize_axis, check_no_out,
                              mask_where)

__all__ = ["max", "amax", "min", "amin", "prod", "argmax", "argmin", "cumsum", "cumprod",
           "sort", "argsort", "all", "any"]


def _arr(x):
    return x if isinstance(x, core.Tracer) else asarray(x)


def _keepdims(out, shape, axes):
    return sh.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(shape)))


# ----------------------------------------------------------------- max / min

def _lowest(dtype, largest):
    """The identity of max (largest=False) or min (largest=True) for `dtype`."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return largest
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.max if largest else info.min
    return np.inf if largest else -np.inf


def _extremum(name, reduce_fn, combine_prim, a, axis, out, keepdims, initial, where):
    check_no_out(name, out)
    x = _arr(a)
    aval = get_aval(x)
    axes = canonicalize_axes(axis, aval.ndim)
    if initial is None and builtins.any(aval.shape[i] == 0 for i in axes):
        raise ValueError(f"zero-size array to reduction operation {name} which has no "
                         "identity (pass initial=)")
    if where is not None:
        if initial is None:
            raise ValueError(f"reduction operation {name} does not have an identity, so to "
                             "use a where mask one has to specify 'initial'")
        x = mask_where(x, where, _lowest(aval.dtype, name == "min"))
    res = reduce_fn(x, axes)
    if initial is not None:
        res = combine_prim.bind(res, np.asarray(initial, aval.dtype))
    return _keepdims(res, aval.shape, axes) if keepdims else res


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """The largest element along `axis` (all axes if None)."""
    return _extremum("max", red.reduce_max, ew.max_p, a, axis, out, keepdims, initial, where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """The smallest element along `axis` (all axes if None)."""
    return _extremum("min", red.reduce_min, ew.min_p, a, axis, out, keepdims, initial, where)


amax = max
amin = min


# ---------------------------------------------------------------------- prod

def promoted_integer(dtype):
    """Sums and products of small integers and bools accumulate in the default int."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_ or dtype.kind == "i":
        return core.canonical_dtype(np.int64)
    if dtype.kind == "u":
        return core.canonical_dtype(np.uint64)
    return dtype


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
    """The product of the elements along `axis` (all axes if None)."""
    check_no_out("prod", out)
    x = _arr(a)
    aval = get_aval(x)
    if dtype is not None:
        x = ew.convert_element_type(x, dtype)
    elif promote_integers:
        x = ew.convert_element_type(x, promoted_integer(aval.dtype))
    axes = canonicalize_axes(axis, aval.ndim)
    res = red.reduce_prod(mask_where(x, where, 1), axes)
    if initial is not None:
        res = ew.mul(res, np.asarray(initial, get_aval(res).dtype))
    return _keepdims(res, aval.shape, axes) if keepdims else res


# ------------------------------------------------------------ argmax / argmin

def _arg_extremum(fn, a, axis, keepdims):
    x = _arr(a)
    aval = get_aval(x)
    index_dtype = core.canonical_dtype(np.int64)
    if axis is None:
        if aval.size == 0:
            raise ValueError("attempt to get argmax/argmin of an empty sequence")
        res = fn(sh.reshape(x, (aval.size,)), 0, index_dtype)
        return sh.reshape(res, (1,) * aval.ndim) if keepdims else res
    ax = canonicalize_axis(axis, aval.ndim)
    if aval.shape[ax] == 0:
        raise ValueError("attempt to get argmax/argmin of an empty sequence")
    res = fn(x, ax, index_dtype)
    return _keepdims(res, aval.shape, (ax,)) if keepdims else res


def argmax(a, axis=None, out=None, keepdims=None):
    """The index of the (first) largest element along `axis` (of the flattened array
    if None)."""
    check_no_out("argmax", out)
    return _arg_extremum(red.argmax, a, axis, keepdims)


def argmin(a, axis=None, out=None, keepdims=None):
    """The index of the (first) smallest element along `axis` (of the flattened array
    if None)."""
    check_no_out("argmin", out)
    return _arg_extremum(red.argmin, a, axis, keepdims)


# ---------------------------------------------------------- cumsum / cumprod

def _cumulative(fn, a, axis, dtype):
    x = _arr(a)
    if axis is None:
        x = sh.reshape(x, (get_aval(x).size,))
        axis = 0
    aval = get_aval(x)
    axis = canonicalize_axis(axis, aval.ndim)
    if dtype is not None:
        x = ew.convert_element_type(x, dtype)
    elif aval.dtype == np.bool_:
        x = ew.convert_element_type(x, core.canonical_dtype(np.int64))
    return fn(x, axis)


def cumsum(a, axis=None, dtype=None, out=None):
    """Running sums along `axis` (of the flattened array if None)."""
    check_no_out("cumsum", out)
    return _cumulative(red.cumsum, a, axis, dtype)


def cumprod(a, axis=None, dtype=None, out=None):
    """Running products along `axis` (of the flattened array if None)."""
    check_no_out("cumprod", out)
    return _cumulative(red.cumprod, a, axis, dtype)


# ------------------------------------------------------------ sort / argsort

def _sort_axis(a, axis, kind, order):
    if order is not None:
        raise NotImplementedError("sort: order= (structured arrays) is not supported")
    x = _arr(a)
    if axis is None:
        x = sh.reshape(x, (get_aval(x).size,))
        axis = 0
    return x, canonicalize_axis(axis, get_aval(x).ndim)


def _rev(x, axis):
    from impl.primitives.indexing import rev
    return rev(x, (axis,))


def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """The elements sorted along `axis` (of the flattened array if None)."""
    x, axis = _sort_axis(a, axis, kind, order)
    out = red.sort(x, axis, is_stable=stable)
    return _rev(out, axis) if descending else out


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """The indices that sort `a` along `axis`; equal elements keep their order."""
    x, axis = _sort_axis(a, axis, kind, order)
    shape = get_aval(x).shape
    positions = red.broadcasted_iota(core.canonical_dtype(np.int64), shape, axis)
    if not descending:
        return red.sort((x, positions), axis, is_stable=stable, num_keys=1)[1]
    # Ascending sort of the reversed array puts ties in reverse order; reversing the
    # result gives descending order with ties back in their original order.
    _, idx = red.sort((_rev(x, axis), _rev(positions, axis)), axis, is_stable=stable,
                      num_keys=1)
    return _rev(idx, axis)


# ----------------------------------------------------------------- all / any

def _as_bool(x):
    aval = get_aval(x)
    if aval.dtype == np.bool_:
        return x
    return ew.ne_p.bind(x, np.zeros((), aval.dtype))


def _logical(reduce_fn, name, a, axis, out, keepdims, where):
    check_no_out(name, out)
    x = _as_bool(_arr(a))
    aval = get_aval(x)
    axes = canonicalize_axes(axis, aval.ndim)
    res = reduce_fn(mask_where(x, where, name == "all"), axes)
    return _keepdims(res, aval.shape, axes) if keepdims else res


def all(a, axis=None, out=None, keepdims=False, *, where=None):
    """Whether every element along `axis` is true (the minimum of the booleans)."""
    return _logical(red.reduce_min, "all", a, axis, out, keepdims, where)


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    """Whether some element along `axis` is true (the maximum of the booleans)."""
    return _logical(red.reduce_max, "any", a, axis, out, keepdims, where)
