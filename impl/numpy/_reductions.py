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
from impl.numpy._jax_calls import staged_as_in_jax
from impl.numpy import _ufuncs as uf
from impl.numpy._util import (asarray, keep_reduced_axes, canonicalize_axes, canonicalize_axis, check_no_out,
                              flat_or_axis, mask_where, strong)

__all__ = ["max", "amax", "min", "amin", "prod", "argmax", "argmin", "cumsum", "cumprod",
           "sort", "argsort", "all", "any", "nancumsum", "nancumprod", "cumulative_sum",
           "cumulative_prod", "lexsort"]


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
    x = asarray(a)
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
    return strong(keep_reduced_axes(res, aval.shape, axes) if keepdims else res)


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
    x = asarray(a)
    aval = get_aval(x)
    if dtype is not None:
        dtype = core.user_dtype(dtype, "prod")
        ew.warn_if_complex_to_real(aval.dtype, dtype)
        x = ew.convert_element_type(x, dtype)
    elif promote_integers:
        x = ew.convert_element_type(x, promoted_integer(aval.dtype))
    axes = canonicalize_axes(axis, aval.ndim)
    res = red.reduce_prod(mask_where(x, where, 1), axes)
    if initial is not None:
        res = ew.mul(res, np.asarray(initial, get_aval(res).dtype))
    return keep_reduced_axes(res, aval.shape, axes) if keepdims else res


# ------------------------------------------------------------ argmax / argmin

def _arg_extremum(fn, a, axis, keepdims):
    x = asarray(a)
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
    return keep_reduced_axes(res, aval.shape, (ax,)) if keepdims else res


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

def _cumulative(name, fn, a, axis, dtype, out=None, nan_to=None, promote_integers=False):
    """A running reduction along `axis` (of the flattened array if None), with JAX's
    dtypes: bools accumulate as integers, dtype=bool means 'is any so far nonzero'."""
    check_no_out(name, out)
    x = asarray(a)
    if axis is None or get_aval(x).ndim == 0:
        x = sh.reshape(x, (get_aval(x).size,))
    axis = canonicalize_axis(0 if axis is None else axis, get_aval(x).ndim)
    aval = get_aval(x)
    if nan_to is not None and core.is_float_dtype(aval.dtype):
        x = uf.staged_where(ew.ne_p.bind(x, x), np.asarray(nan_to, aval.dtype), x)
    if dtype is None:
        result = (promoted_integer(aval.dtype) if promote_integers or aval.dtype == np.bool_
                  else aval.dtype)
        compute = result
    elif np.dtype(dtype) == np.bool_:
        result = np.dtype(np.bool_)
        if aval.dtype != np.bool_:
            x = ew.ne_p.bind(x, np.zeros((), aval.dtype))
        compute = promoted_integer(result)
    else:
        result = compute = core.user_dtype(dtype, name)
    out = fn(ew.convert_element_type(x, compute), axis)
    return ew.convert_element_type(out, result)


@staged_as_in_jax
def cumsum(a, axis=None, dtype=None, out=None):
    """Running sums along `axis` (of the flattened array if None)."""
    return _cumulative("cumsum", red.cumsum, a, axis, dtype, out)


@staged_as_in_jax
def cumprod(a, axis=None, dtype=None, out=None):
    """Running products along `axis` (of the flattened array if None)."""
    return _cumulative("cumprod", red.cumprod, a, axis, dtype, out)


@staged_as_in_jax
def nancumsum(a, axis=None, dtype=None, out=None):
    """Running sums with NaNs counted as zero."""
    return _cumulative("nancumsum", red.cumsum, a, axis, dtype, out, nan_to=0)


@staged_as_in_jax
def nancumprod(a, axis=None, dtype=None, out=None):
    """Running products with NaNs counted as one."""
    return _cumulative("nancumprod", red.cumprod, a, axis, dtype, out, nan_to=1)


def _array_api_cumulative(name, fn, x, axis, dtype, include_initial, initial, promote):
    x = asarray(x)
    nd = get_aval(x).ndim
    what = "sum" if initial == 0 else "product"
    if nd == 0:
        raise ValueError(f"The input must be non-scalar to take a cumulative {what}, however "
                         "a scalar value or scalar array was given.")
    if axis is None:
        if nd > 1:
            raise ValueError(f"The input array has rank {nd}, however axis was not set to an "
                             "explicit value. The axis argument is only optional for "
                             "one-dimensional arrays.")
        axis = 0
    axis = canonicalize_axis(axis, nd)
    out = _cumulative(name, fn, x, axis, dtype, promote_integers=promote)
    if not include_initial:
        return out
    from impl.primitives.indexing import concatenate
    aval = get_aval(out)
    first = aval.shape[:axis] + (1,) + aval.shape[axis + 1:]
    start = sh.broadcast_in_dim(np.asarray(initial, aval.dtype), first, ())
    return concatenate([start, out], axis)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array-API running sum (small integers accumulate in the default integer)."""
    return _array_api_cumulative("cumulative_sum", red.cumsum, x, axis, dtype,
                                 include_initial, 0, True)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array-API running product."""
    return _array_api_cumulative("cumulative_prod", red.cumprod, x, axis, dtype,
                                 include_initial, 1, False)


# ------------------------------------------------------------ sort / argsort

def _sort_axis(name, a, axis, kind, order):
    if kind is not None:
        raise TypeError(f"'kind' argument to {name} is not supported. Use stable=True or "
                        "stable=False to specify sort stability.")
    if order is not None:
        raise TypeError(f"'order' argument to {name} is not supported.")
    return flat_or_axis(asarray(a), axis)


def _rev(x, axis):
    from impl.primitives.indexing import rev
    return rev(x, (axis,))


def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """The elements sorted along `axis` (of the flattened array if None)."""
    x, axis = _sort_axis("sort", a, axis, kind, order)
    out = red.sort(x, axis, is_stable=stable)
    return _rev(out, axis) if descending else out


def _index_dtype(dtype):
    index_dtype = core.canonical_dtype(np.int64 if dtype is None else dtype)
    if not np.issubdtype(index_dtype, np.integer):
        raise ValueError(f"index dtype must be an integer dtype, got {index_dtype}")
    return index_dtype


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False, dtype=None):
    """The indices that sort `a` along `axis`; with `stable`, equal elements keep their
    order (also when descending)."""
    x, axis = _sort_axis("argsort", a, axis, kind, order)
    positions = red.broadcasted_iota(_index_dtype(dtype), get_aval(x).shape, axis,
                                     out_sharding=get_aval(x).explicit_sharding)
    if descending and stable:
        # An ascending sort of the reversed array, reversed back: descending, with ties
        # in their original order.
        x, positions = _rev(x, axis), _rev(positions, axis)
    _, idx = red.sort((x, positions), axis, is_stable=stable, num_keys=1)
    return _rev(idx, axis) if descending else idx


def lexsort(keys, axis=-1):
    """The indices that sort by the last key, then by the one before it, and so on."""
    keys = [asarray(k) for k in keys]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    if len({get_aval(k).shape for k in keys}) > 1:
        raise ValueError("all keys need to be the same shape")
    shape = get_aval(keys[0]).shape
    index_dtype = _index_dtype(None)
    if not shape:
        return np.zeros((), index_dtype)
    axis = canonicalize_axis(axis, len(shape))
    positions = red.broadcasted_iota(index_dtype, shape, axis)
    return red.sort((*keys[::-1], positions), axis, num_keys=len(keys))[-1]


# ----------------------------------------------------------------- all / any

def _as_bool(x):
    aval = get_aval(x)
    if aval.dtype == np.bool_:
        return x
    return ew.ne_p.bind(x, np.zeros((), aval.dtype))


def _logical(reduce_fn, name, a, axis, out, keepdims, where):
    check_no_out(name, out)
    x = _as_bool(asarray(a))
    aval = get_aval(x)
    axes = canonicalize_axes(axis, aval.ndim)
    res = reduce_fn(mask_where(x, where, name == "all"), axes)
    return keep_reduced_axes(res, aval.shape, axes) if keepdims else res


def all(a, axis=None, out=None, keepdims=False, *, where=None):
    """Whether every element along `axis` is true."""
    return _logical(red.reduce_and, "all", a, axis, out, keepdims, where)


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    """Whether some element along `axis` is true."""
    return _logical(red.reduce_or, "any", a, axis, out, keepdims, where)
