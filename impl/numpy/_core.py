"""Reductions, shape manipulation, linear algebra and creation functions."""
from __future__ import annotations

import builtins

import numpy as np
import jax.numpy as jax_jnp

from impl import core
from impl.core import get_aval
from impl.primitives import elementwise as ew
from impl.primitives import shape as sh
from impl.primitives import linalg
from impl.numpy._util import (asarray, broadcast_to, canonicalize_axes, canonicalize_axis,
                              promote, result_dtype)


def _arr(x):
    return x if isinstance(x, core.Tracer) else asarray(x)


# ------------------------------------------------------------------ reductions

def _keepdims(out, x_shape, axes):
    shape = tuple(1 if i in axes else d for i, d in enumerate(x_shape))
    return sh.reshape(out, shape)


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    x = _arr(a)
    aval = get_aval(x)
    if dtype is not None:
        x = ew.convert_element_type(x, dtype)
    elif aval.dtype == np.bool_ or (aval.dtype.kind in "iu" and aval.dtype.itemsize < 4):
        x = ew.convert_element_type(x, core.canonical_dtype(np.int64))
    axes = canonicalize_axes(axis, aval.ndim)
    res = sh.reduce_sum(x, axes)
    if initial is not None:
        res = ew.add(res, initial)
    return _keepdims(res, aval.shape, axes) if keepdims else res


def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    x = _arr(a)
    aval = get_aval(x)
    axes = canonicalize_axes(axis, aval.ndim)
    n = int(np.prod([aval.shape[i] for i in axes], dtype=np.int64))
    if not core.is_float_dtype(aval.dtype):
        x = ew.convert_element_type(x, core.canonical_dtype(dtype or np.float64))
    elif dtype is not None:
        x = ew.convert_element_type(x, dtype)
    return ew.div(sum(x, axes, keepdims=keepdims), n)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    x = _arr(a)
    aval = get_aval(x)
    axes = canonicalize_axes(axis, aval.ndim)
    n = int(np.prod([aval.shape[i] for i in axes], dtype=np.int64))
    centered = ew.sub(x, mean(x, axes, dtype=dtype, keepdims=True))
    sq = ew.mul(centered, centered)
    return ew.div(sum(sq, axes, keepdims=keepdims), n - ddof)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    return ew.sqrt(var(a, axis, dtype, ddof=ddof, keepdims=keepdims))


# --------------------------------------------------------------------- shapes

def shape(a):
    return get_aval(_arr(a)).shape


def ndim(a):
    return get_aval(_arr(a)).ndim


def size(a, axis=None):
    s = get_aval(_arr(a)).shape
    return int(np.prod(s, dtype=np.int64)) if axis is None else s[axis]


def reshape(a, *args, order="C", newshape=None, shape=None):
    x = _arr(a)
    if shape is None:
        shape = newshape if newshape is not None else (args[0] if len(args) == 1 else args)
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = [int(d) for d in shape]
    total = get_aval(x).size
    if shape.count(-1) > 1:
        raise ValueError("reshape: can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape array of shape {get_aval(x).shape} into "
                             f"shape {tuple(shape)}")
        shape[shape.index(-1)] = total // known
    if order != "C":
        raise NotImplementedError("reshape: only order='C' is supported")
    return sh.reshape(x, tuple(shape))


def ravel(a, order="C"):
    return reshape(a, (-1,))


def transpose(a, axes=None):
    x = _arr(a)
    nd = get_aval(x).ndim
    if axes is None:
        axes = tuple(reversed(range(nd)))
    axes = tuple(canonicalize_axis(ax, nd) for ax in axes)
    return sh.transpose(x, axes)


def permute_dims(a, axes):
    return transpose(a, axes)


def swapaxes(a, axis1, axis2):
    x = _arr(a)
    nd = get_aval(x).ndim
    perm = list(range(nd))
    i, j = canonicalize_axis(axis1, nd), canonicalize_axis(axis2, nd)
    perm[i], perm[j] = perm[j], perm[i]
    return sh.transpose(x, tuple(perm))


def moveaxis(a, source, destination):
    x = _arr(a)
    nd = get_aval(x).ndim
    src = [canonicalize_axis(s, nd) for s in np.atleast_1d(source)]
    dst = [canonicalize_axis(d, nd) for d in np.atleast_1d(destination)]
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return sh.transpose(x, tuple(perm))


def expand_dims(a, axis):
    x = _arr(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return sh.expand_dims(x, axes)


def squeeze(a, axis=None):
    x = _arr(a)
    s = get_aval(x).shape
    if axis is None:
        axes = tuple(i for i, d in enumerate(s) if d == 1)
    else:
        axes = canonicalize_axes(axis, len(s))
        for ax in axes:
            if s[ax] != 1:
                raise ValueError(f"cannot select an axis to squeeze out which has size not "
                                 f"equal to one (axis {ax} of shape {s})")
    return sh.squeeze(x, axes)


def atleast_1d(a):
    x = _arr(a)
    return reshape(x, (1,)) if get_aval(x).ndim == 0 else x


def atleast_2d(a):
    x = _arr(a)
    nd = get_aval(x).ndim
    return reshape(x, (1,) * (2 - nd) + get_aval(x).shape) if nd < 2 else x


# -------------------------------------------------------------- linear algebra

def _dot_dtype(a, b):
    a, b = promote(a, b)
    return a, b


def dot(a, b, *, precision=None, preferred_element_type=None):
    a, b = _dot_dtype(_arr(a), _arr(b))
    na, nb = get_aval(a).ndim, get_aval(b).ndim
    if na == 0 or nb == 0:
        return ew.mul(*_bcast_pair(a, b))
    contract_b = 0 if nb == 1 else nb - 2
    return linalg.dot_general(a, b, (((na - 1,), (contract_b,)), ((), ())),
                              precision=precision)


def _bcast_pair(a, b):
    from impl.numpy._util import broadcast_arrays
    return broadcast_arrays(a, b)


def matmul(a, b, *, precision=None, preferred_element_type=None):
    a, b = _dot_dtype(_arr(a), _arr(b))
    sa, sb = get_aval(a).shape, get_aval(b).shape
    if not sa or not sb:
        raise ValueError("matmul: operands must not be scalars (use * for scalars)")
    a_vec, b_vec = len(sa) == 1, len(sb) == 1
    if a_vec:
        a = sh.reshape(a, (1,) + sa)
    if b_vec:
        b = sh.reshape(b, sb + (1,))
    sa, sb = get_aval(a).shape, get_aval(b).shape
    if sa[-1] != sb[-2]:
        raise ValueError(f"matmul: contracting dimensions differ: {sa} @ {sb} "
                         f"({sa[-1]} != {sb[-2]})")
    batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    a = broadcast_to(a, batch + sa[-2:])
    b = broadcast_to(b, batch + sb[-2:])
    nb = len(batch)
    out = linalg.dot_general(a, b, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))),
                             precision=precision)
    if a_vec:
        out = sh.squeeze(out, (nb,))
    if b_vec:
        out = sh.squeeze(out, (get_aval(out).ndim - 1,))
    return out


def vdot(a, b):
    return dot(ravel(a), ravel(b))


def inner(a, b):
    a, b = _dot_dtype(_arr(a), _arr(b))
    na, nb = get_aval(a).ndim, get_aval(b).ndim
    if na == 0 or nb == 0:
        return ew.mul(*_bcast_pair(a, b))
    return linalg.dot_general(a, b, (((na - 1,), (nb - 1,)), ((), ())))


def outer(a, b):
    a, b = ravel(a), ravel(b)
    return ew.mul(*_bcast_pair(reshape(a, (-1, 1)), reshape(b, (1, -1))))


def tensordot(a, b, axes=2):
    a, b = _dot_dtype(_arr(a), _arr(b))
    na, nb = get_aval(a).ndim, get_aval(b).ndim
    if isinstance(axes, (int, np.integer)):
        ca, cb = tuple(range(na - axes, na)), tuple(range(axes))
    else:
        ca, cb = axes
        ca = tuple(canonicalize_axis(i, na) for i in np.atleast_1d(ca))
        cb = tuple(canonicalize_axis(i, nb) for i in np.atleast_1d(cb))
    return linalg.dot_general(a, b, ((ca, cb), ((), ())))


# ------------------------------------------------------------------- creation

def zeros(shape, dtype=None):
    return jax_jnp.zeros(shape, core.canonical_dtype(dtype or np.float64))


def ones(shape, dtype=None):
    return jax_jnp.ones(shape, core.canonical_dtype(dtype or np.float64))


def full(shape, fill_value, dtype=None):
    if isinstance(fill_value, core.Tracer):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        v = fill_value if dtype is None else ew.convert_element_type(fill_value, dtype)
        return broadcast_to(v, shape)
    return jax_jnp.full(shape, fill_value, dtype)


def empty(shape, dtype=None):
    return zeros(shape, dtype)


def eye(N, M=None, k=0, dtype=None):
    return jax_jnp.eye(N, M, k, dtype=core.canonical_dtype(dtype or np.float64))


identity = lambda n, dtype=None: eye(n, dtype=dtype)


def arange(start, stop=None, step=None, dtype=None):
    for v in (start, stop, step):
        if isinstance(v, core.Tracer):
            raise core.ConcretizationTypeError(
                "arange requires concrete start, stop and step (they determine the shape)")
    return jax_jnp.arange(start, stop, step, dtype=dtype)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    if isinstance(start, core.Tracer) or isinstance(stop, core.Tracer):
        dt = core.canonical_dtype(dtype or np.float64)
        div = (num - 1) if endpoint else num
        steps = jax_jnp.arange(num, dtype=dt)
        start_, stop_ = _arr(start), _arr(stop)
        delta = ew.div(ew.sub(stop_, start_), max(div, 1))
        out = ew.add(ew.mul(steps, delta), start_)
        return (out, delta) if retstep else out
    return jax_jnp.linspace(start, stop, num, endpoint, retstep, dtype, axis)


def _like(fn, a, dtype, shape):
    aval = get_aval(_arr(a))
    return fn(aval.shape if shape is None else shape, dtype or aval.dtype)


def zeros_like(a, dtype=None, shape=None):
    return _like(zeros, a, dtype, shape)


def ones_like(a, dtype=None, shape=None):
    return _like(ones, a, dtype, shape)


def full_like(a, fill_value, dtype=None, shape=None):
    aval = get_aval(_arr(a))
    return full(aval.shape if shape is None else shape, fill_value, dtype or aval.dtype)


def array(obj, dtype=None, copy=True):
    return asarray(obj, dtype)


def astype(x, dtype):
    return ew.convert_element_type(_arr(x), dtype)
