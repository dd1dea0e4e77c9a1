"""Reductions, shape manipulation, linear algebra and creation functions."""
from __future__ import annotations

import builtins
import operator
import string
import warnings

import jax
import numpy as np
import jax.numpy as jax_jnp
from jax.sharding import NamedSharding, PartitionSpec
import opt_einsum as _opt_einsum

from impl import core
from impl.core import get_aval
from impl.primitives import complex_parts as cp
from impl.primitives import elementwise as ew
from impl.primitives import indexing as ix
from impl.primitives import shape as sh
from impl.primitives import linalg as _lg
from impl.primitives import reductions as _red
from impl.primitives.sharding import reshard
from impl.primitives import sharding_rules
from impl.numpy import _ufuncs as uf
from impl.numpy._jax_calls import staged_as_in_jax
from impl.numpy._util import (asarray, broadcast_shapes, broadcast_to, canonicalize_axes,
                              canonicalize_axis, check_arraylike, check_no_out,
                              keep_reduced_axes, mask_where, promote, result_dtype,
                              staged_constant, strong)


# ------------------------------------------------------------------ reductions

def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
        promote_integers=True):
    check_no_out("sum", out)
    x = asarray(a)
    aval = get_aval(x)
    if dtype is not None:
        dtype = core.user_dtype(dtype, "sum")
        ew.warn_if_complex_to_real(aval.dtype, dtype)
        x = ew.convert_element_type(x, dtype)
    elif promote_integers and (aval.dtype == np.bool_ or aval.dtype.kind in "iu"):
        from impl.numpy._reductions import promoted_integer
        x = ew.convert_element_type(x, promoted_integer(aval.dtype))
    elif aval.dtype == np.bool_:
        x = ew.convert_element_type(x, core.canonical_dtype(np.int32))
    axes = canonicalize_axes(axis, aval.ndim)
    res = sh.reduce_sum(mask_where(x, where, 0), axes)
    if initial is not None:
        res = ew.add(res, initial)
    return strong(keep_reduced_axes(res, aval.shape, axes) if keepdims else res)


def _count(aval, axes, where, keepdims, dtype):
    """How many elements each output of a reduction over `axes` averages."""
    if where is None:
        return np.asarray(int(np.prod([aval.shape[i] for i in axes], dtype=np.int64)), dtype)
    ones = ew.full_like(sh.broadcast_in_dim(np.zeros((), dtype), aval.shape, ()), 1)
    return sum(mask_where(ones, where, 0), axes, keepdims=keepdims)


def _inexact(x, dtype):
    aval = get_aval(x)
    if dtype is not None:
        return ew.convert_element_type(x, dtype)
    if not core.is_float_dtype(aval.dtype):
        return ew.convert_element_type(x, uf.inexact_dtype(aval.dtype))
    return x


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    check_no_out("mean", out)
    x = _inexact(asarray(a), None if dtype is None else core.user_dtype(dtype, "mean"))
    aval = get_aval(x)
    axes = canonicalize_axes(axis, aval.ndim)
    n = _count(aval, axes, where, keepdims, aval.dtype)
    return uf.true_divide(sum(x, axes, keepdims=keepdims, where=where), n)


def _correction(ddof, correction):
    if correction is None:
        return ddof
    if ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


def _optional_axes(axis):
    """An axis argument as a static one: a sequence becomes a tuple."""
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    check_no_out("var", out)
    return _var(asarray(a), axis=_optional_axes(axis), dtype=dtype,
                correction=_correction(ddof, correction), keepdims=keepdims, where=where,
                a_mean=mean)


def _var_dtypes(a_dtype, dtype):
    """The dtype `var` computes in and the one it returns, as JAX's: the given dtype, else
    an inexact one (a complex input's variance is real); half precision computes in
    float32."""
    if dtype is not None:
        dtype = core.user_dtype(dtype, "var")
        if dtype.kind != "c" and np.dtype(a_dtype).kind == "c":
            raise ValueError("jax.numpy.var does not yet support real dtype parameters when "
                             "computing the variance of an array of complex values. The "
                             "semantics of numpy.var seem unclear in this case. Please "
                             "comment on https://github.com/jax-ml/jax/issues/2283 if this "
                             "behavior is important to you.")
        compute = dtype
    elif not core.is_float_dtype(a_dtype):
        dtype = compute = uf.inexact_dtype(a_dtype)
    else:
        dtype, compute = cp.real_dtype_of(a_dtype), np.dtype(a_dtype)
    if compute in (np.dtype(np.float16), np.dtype(jax_jnp.bfloat16)):
        compute = np.dtype(np.float32)
    return compute, np.dtype(dtype)


@staged_as_in_jax
def _var(a, *, axis=None, dtype=None, correction=0, keepdims=False, where=None,
         a_mean=None):
    compute, dtype = _var_dtypes(get_aval(a).dtype, dtype)
    a = ew.convert_element_type(a, compute)
    aval = get_aval(a)
    axes = canonicalize_axes(axis, aval.ndim)
    centre = (_mean(a, axes, dtype=compute, keepdims=True, where=where) if a_mean is None
              else ew.convert_element_type(asarray(a_mean), compute))
    centered = ew.sub(a, centre)
    if compute.kind == "c":
        centered = cp.real(ew.mul(centered, cp.conj(centered)))
        compute = get_aval(centered).dtype
    else:
        centered = ew.square(centered)
    normalizer = ew.sub(_count(aval, axes, where, keepdims, compute),
                        ew.convert_element_type(correction, compute))
    result = sum(centered, axes, dtype=compute, keepdims=keepdims, where=where)
    result = ew.convert_element_type(ew.div(result, normalizer), dtype)
    return uf.staged_where(uf.greater(normalizer, 0), result, np.nan)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    check_no_out("std", out)
    return _std(asarray(a), axis=_optional_axes(axis), dtype=dtype,
                correction=_correction(ddof, correction), keepdims=keepdims, where=where,
                mean=mean)


@staged_as_in_jax
def _std(a, *, axis=None, dtype=None, correction=0, keepdims=False, where=None, mean=None):
    if dtype is not None:
        dtype = core.user_dtype(dtype, "std")
        if not core.is_float_dtype(dtype):
            raise ValueError(f"dtype argument to jnp.std must be inexact; got {dtype}")
    return ew.sqrt(_var(a, axis=axis, dtype=dtype, correction=correction,
                        keepdims=keepdims, where=where, a_mean=mean))


_mean = mean


# --------------------------------------------------------------------- shapes

def shape(a):
    return get_aval(asarray(a)).shape


def ndim(a):
    return get_aval(asarray(a)).ndim


def size(a, axis=None):
    s = get_aval(asarray(a)).shape
    return int(np.prod(s, dtype=np.int64)) if axis is None else s[axis]


def reshape(a, shape, order="C", *, out_sharding=None):
    """NumPy's reshape; order 'F' reads and writes elements in column-major order.
    `out_sharding`: the result's sharding over Explicit mesh axes."""
    x = asarray(a)
    if out_sharding is not None and order == "F":
        raise NotImplementedError("reshape: out_sharding= with order='F' is not supported")
    if order not in ("C", "F", "A"):
        raise ValueError(f"reshape: order must be 'C', 'F' or 'A', got {order!r}")
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    if isinstance(shape, core.Tracer) or any(isinstance(d, core.Tracer) for d in shape):
        shown = [shape] if isinstance(shape, core.Tracer) and not shape.aval.ndim else shape
        raise TypeError("Shapes must be 1D sequences of concrete values of integer type, "
                        f"got {shown}.\nIf using `jit`, try using `static_argnums` or "
                        "applying `jit` to smaller subfunctions.")
    shape = [int(d) for d in shape]
    total = get_aval(x).size
    # JAX reports a bad shape as a TypeError, except for a NumPy array (NumPy's ValueError).
    error = ValueError if isinstance(a, np.ndarray) else TypeError
    old = get_aval(x).shape
    if shape.count(-1) > 1:
        raise error("reshape: can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise error(f"cannot reshape array of shape {old} (size {total}) into shape "
                        f"{tuple(shape)} because the product of specified axis sizes "
                        f"({known}) does not evenly divide {total}")
        shape[shape.index(-1)] = total // known
    if int(np.prod(shape, dtype=np.int64)) != total:
        raise error(f"cannot reshape array of shape {old} (size {total}) into shape "
                    f"{tuple(shape)} (size {int(np.prod(shape, dtype=np.int64))})")
    if order == "F":   # column-major: reverse the axes on both sides of a C-order reshape
        flipped = sh.transpose(x, tuple(reversed(range(len(old)))))
        out = sh.reshape(flipped, tuple(reversed(shape)))
        return sh.transpose(out, tuple(reversed(range(len(shape)))))
    return sh.reshape(x, tuple(shape), out_sharding=out_sharding)


def ravel(a, order="C"):
    return reshape(a, (-1,), order=order)


def transpose(a, axes=None):
    x = asarray(a)
    nd = get_aval(x).ndim
    if axes is None:
        axes = tuple(reversed(range(nd)))
    axes = tuple(canonicalize_axis(ax, nd) for ax in axes)
    return sh.transpose(x, axes)


def permute_dims(a, axes):
    return transpose(a, axes)


def swapaxes(a, axis1, axis2):
    x = asarray(a)
    nd = get_aval(x).ndim
    perm = list(range(nd))
    i, j = canonicalize_axis(axis1, nd), canonicalize_axis(axis2, nd)
    perm[i], perm[j] = perm[j], perm[i]
    return sh.transpose(x, tuple(perm))


def moveaxis(a, source, destination):
    x = asarray(a)
    nd = get_aval(x).ndim
    src = [canonicalize_axis(s, nd) for s in np.atleast_1d(source)]
    dst = [canonicalize_axis(d, nd) for d in np.atleast_1d(destination)]
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return sh.transpose(x, tuple(perm))


def expand_dims(a, axis):
    x = asarray(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return sh.expand_dims(x, axes)


def squeeze(a, axis=None):
    x = asarray(a)
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
    x = asarray(a)
    return reshape(x, (1,)) if get_aval(x).ndim == 0 else x


def atleast_2d(a):
    x = asarray(a)
    nd = get_aval(x).ndim
    return reshape(x, (1,) * (2 - nd) + get_aval(x).shape) if nd < 2 else x


# -------------------------------------------------------------- linear algebra

def _dot_dtype(a, b):
    """jnp's promotion for products: an operand of another dtype is converted to the
    result's, but one that differs only in being weakly typed is left as it is (JAX's
    dot_general takes it so, and its cotangent is then strongly typed, as JAX's is)."""
    dtype, weak = result_dtype(a, b)
    return [x if get_aval(x).dtype == dtype else ew.convert_element_type(x, dtype, weak_type=weak)
            for x in (a, b)]


def _accumulation_dtype(preferred_element_type, fun_name, *operands):
    """The dtype jnp's products ask dot_general for, as JAX's do: the one asked for, or
    else the operands' result dtype (so their equations print it)."""
    if preferred_element_type is not None:
        return core.user_dtype(preferred_element_type, fun_name)
    return result_dtype(*operands)[0]


def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    a, b = _dot_dtype(asarray(a), asarray(b))
    na, nb = get_aval(a).ndim, get_aval(b).ndim
    if na == 0 or nb == 0:   # (the primitive broadcasts a rank-0 operand, as lax.mul)
        out = ew.mul(a, b)
        out = out if preferred_element_type is None else astype(out, preferred_element_type)
        return out if out_sharding is None else reshard(out, out_sharding)
    contract_b = 0 if nb == 1 else nb - 2
    return _lg.dot_general(a, b, (((na - 1,), (contract_b,)), ((), ())),
                           precision=precision, out_sharding=out_sharding,
                           preferred_element_type=_accumulation_dtype(
                               preferred_element_type, "dot", a, b))


def _spec_of(out_sharding):
    """The spec of einsum's `out_sharding=` (a PartitionSpec or a NamedSharding)."""
    if isinstance(out_sharding, PartitionSpec):
        return out_sharding
    if isinstance(out_sharding, NamedSharding):
        return out_sharding.spec
    raise sharding_rules.not_a_named_sharding("`out_sharding` argument of einsum", out_sharding)


def _spec_entries(out_sharding):
    return tuple(_spec_of(out_sharding).partitions)


def _respec(out_sharding, entries):
    """`out_sharding` with other partitions (its unreduced and reduced axes kept)."""
    spec = _spec_of(out_sharding).update(partitions=tuple(entries))
    if isinstance(out_sharding, PartitionSpec):
        return spec
    return out_sharding.update(spec=spec)


def _bcast_pair(a, b):
    from impl.numpy._util import broadcast_promoted
    return broadcast_promoted(a, b)


def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """One dot_general, as JAX stages matmul: a vector operand is contracted as it is;
    the stacked axes are batch axes where both operands have them, axes of size 1 are
    squeezed out (and come back as free axes of the other operand), and the result is
    transposed into NumPy's order (`out_sharding` is dot_general's result sharding)."""
    a, b = _dot_dtype(asarray(a), asarray(b))
    preferred_element_type = _accumulation_dtype(preferred_element_type, "matmul", a, b)
    sa, sb = get_aval(a).shape, get_aval(b).shape
    for i, s in enumerate((sa, sb)):
        if not s:
            raise ValueError(f"matmul input operand {i} must have ndim at least 1, but it "
                             "has ndim 0")
    a_mat, b_mat = len(sa) > 1, len(sb) > 1
    a_stack, b_stack = (sa[:-2] if a_mat else ()), (sb[:-2] if b_mat else ())
    n = max(len(a_stack), len(b_stack))
    a_stack = (None,) * (n - len(a_stack)) + a_stack
    b_stack = (None,) * (n - len(b_stack)) + b_stack
    batch_pos, a_free, b_free, both_squeezed = [], [], [], []
    a_batch, b_batch, a_squeeze, b_squeeze = [], [], [], []
    for i, (da, db) in enumerate(zip(a_stack, b_stack)):
        if da is None:
            b_free.append(i)
        elif db is None:
            a_free.append(i)
        elif da == 1 and db == 1:
            a_squeeze.append(len(batch_pos) + len(a_free) + len(a_squeeze))
            b_squeeze.append(len(batch_pos) + len(b_free) + len(b_squeeze))
            both_squeezed.append(i)
        elif da == 1:
            b_free.append(i)
            a_squeeze.append(len(batch_pos) + len(a_free) + len(a_squeeze))
        elif db == 1:
            a_free.append(i)
            b_squeeze.append(len(batch_pos) + len(b_free) + len(b_squeeze))
        elif da == db:
            a_batch.append(len(batch_pos) + len(a_free))
            b_batch.append(len(batch_pos) + len(b_free))
            batch_pos.append(i)
        else:
            raise ValueError(f"Incompatible types for matmul arguments: {get_aval(a)} and "
                             f"{get_aval(b)}")
    if a_mat:
        a_free.append(n)
    if b_mat:
        b_free.append(n + 1 if a_mat else n)
    a, b = sh.squeeze(a, tuple(a_squeeze)), sh.squeeze(b, tuple(b_squeeze))
    na, nb = get_aval(a).ndim, get_aval(b).ndim
    if get_aval(a).shape[-1] != get_aval(b).shape[nb - 1 - b_mat]:
        raise TypeError(f"dot_general requires contracting dimensions to have the same "
                        f"shape, got ({sa[-1]},) and ({get_aval(b).shape[nb - 1 - b_mat]},) "
                        f"(matmul of shapes {sa} and {sb}).")
    out = _lg.dot_general(a, b, (((na - 1,), (nb - 1 - b_mat,)), (tuple(a_batch),
                                                                 tuple(b_batch))),
                          precision=precision, preferred_element_type=preferred_element_type,
                          out_sharding=out_sharding)
    out = sh.transpose(out, core.argsort(batch_pos + a_free + b_free))
    return sh.expand_dims(out, tuple(both_squeezed)) if both_squeezed else out


def vdot(a, b):
    return dot(ravel(a), ravel(b))


def inner(a, b):
    a, b = _dot_dtype(asarray(a), asarray(b))
    na, nb = get_aval(a).ndim, get_aval(b).ndim
    if na == 0 or nb == 0:
        return ew.mul(*_bcast_pair(a, b))
    return _lg.dot_general(a, b, (((na - 1,), (nb - 1,)), ((), ())),
                           preferred_element_type=_accumulation_dtype(None, "inner", a, b))


def outer(a, b):
    a, b = ravel(a), ravel(b)
    return ew.mul(*_bcast_pair(reshape(a, (-1, 1)), reshape(b, (1, -1))))


def tensordot(a, b, axes=2):
    a, b = _dot_dtype(asarray(a), asarray(b))
    na, nb = get_aval(a).ndim, get_aval(b).ndim
    if isinstance(axes, (int, np.integer)):
        ca, cb = tuple(range(na - axes, na)), tuple(range(axes))
    else:
        ca, cb = axes
        ca = tuple(canonicalize_axis(i, na) for i in np.atleast_1d(ca))
        cb = tuple(canonicalize_axis(i, nb) for i in np.atleast_1d(cb))
    return _lg.dot_general(a, b, ((ca, cb), ((), ())),
                           preferred_element_type=_accumulation_dtype(None, "tensordot", a, b))


# ------------------------------------------------------------------- creation

# Outside every transformation the creation functions make concrete arrays with JAX.
# Inside one they bind primitives as JAX's do (a broadcast constant, an iota), so staged
# programs hold those equations rather than array constants, as JAX's programs do;
# `out_sharding` places the arrays on the mesh, and their type carries it.

def _static_shape(shape):
    """`shape` as a tuple of sizes, or None when it is not plainly one (JAX's creation
    functions then say what is wrong with it)."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        dims = tuple(dims)
    except TypeError:
        return None
    if all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
           for d in dims):
        return tuple(int(d) for d in dims)
    return None


def _staged(device, *shapes):
    """Whether a creation function binds primitives: inside a transformation, unless
    it places the array on a device or its shape is not a plain one (or a scalar,
    which stays a constant, as JAX's literal does)."""
    return (device is None and core.current_trace() is not core.eval_trace
            and all(s is not None and s != () for s in shapes))


def _filled(shape, value, dtype, out_sharding):
    """`value` converted to `dtype` and broadcast to `shape`, as lax.full stages it."""
    return sh.broadcast_in_dim(ew.convert_element_type(value, dtype), shape, (),
                               out_sharding=out_sharding)


def zeros(shape, dtype=None, *, device=None, out_sharding=None):
    return _zeros(shape, dtype, device, out_sharding, "zeros")


def _zeros(shape, dtype, device, out_sharding, fun_name):
    dtype = core.user_dtype(dtype or float, fun_name)
    if _staged(device, _static_shape(shape)):
        return _filled(_static_shape(shape), 0, dtype, out_sharding)
    return staged_constant(jax_jnp.zeros(shape, dtype, device=device,
                                         out_sharding=out_sharding))


def ones(shape, dtype=None, *, device=None, out_sharding=None):
    dtype = core.user_dtype(dtype or float, "ones")
    if _staged(device, _static_shape(shape)):
        return _filled(_static_shape(shape), 1, dtype, out_sharding)
    return staged_constant(jax_jnp.ones(shape, dtype, device=device,
                                        out_sharding=out_sharding))


def full(shape, fill_value, dtype=None, *, device=None, out_sharding=None):
    if isinstance(fill_value, core.Tracer):
        if device is not None:
            raise NotImplementedError("full: device= with a traced fill_value is not "
                                      "supported")
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        v = fill_value if dtype is None else ew.convert_element_type(fill_value, dtype)
        out = broadcast_to(v, shape)
        return out if out_sharding is None else reshard(out, out_sharding)
    if np.ndim(fill_value) == 0 and _staged(device, _static_shape(shape)):
        if dtype is None:   # a Python scalar's weak type kept, as lax.full keeps it
            return sh.broadcast_in_dim(fill_value, _static_shape(shape), (),
                                       out_sharding=out_sharding)
        return _filled(_static_shape(shape), fill_value, core.user_dtype(dtype, "full"),
                       out_sharding)
    return staged_constant(jax_jnp.full(shape, fill_value, dtype, device=device,
                                        out_sharding=out_sharding))


def empty(shape, dtype=None):
    return _zeros(shape, dtype, None, None, "empty")


def eye(N, M=None, k=0, dtype=None):
    return _eye(N, M, k, dtype, "eye")


def _eye(N, M, k, dtype, fun_name):
    dtype = core.user_dtype(dtype or float, fun_name)
    shape = _static_shape((N, N if M is None else M))
    if _staged(None, shape) and isinstance(k, (int, np.integer)):
        # ones where the row index plus k is the column index, as JAX stages it
        index = core.canonical_dtype(np.int64)   # the default integer
        rows = _red.broadcasted_iota(index, shape, 0)
        cols = _red.broadcasted_iota(index, shape, 1)
        return ew.convert_element_type(ew.eq(ew.add(rows, np.array(k, index)), cols), dtype)
    return staged_constant(jax_jnp.eye(N, M, k, dtype=dtype))


def identity(n, dtype=None):
    return _eye(n, None, 0, dtype, "identity")


def arange(start, stop=None, step=None, dtype=None, *, device=None, out_sharding=None):
    for v in (start, stop, step):
        if isinstance(v, core.Tracer):
            raise core.ConcretizationTypeError(
                "arange requires concrete start, stop and step (they determine the shape)")
    given = [v for v in (start, stop, step) if v is not None]
    if (_staged(device) and not isinstance(out_sharding, jax.sharding.Sharding)
            and all(isinstance(v, (int, float, np.integer, np.floating)) for v in given)):
        return _staged_arange(start, stop, step, dtype, out_sharding)
    return staged_constant(jax_jnp.arange(start, stop, step, dtype=dtype, device=device,
                                          out_sharding=out_sharding))


def _staged_arange(start, stop, step, dtype, out_sharding):
    """arange as JAX stages it: an iota, scaled by the step and shifted by the start."""
    dtype = (core.user_dtype(dtype, "arange") if dtype is not None else
             core.canonical_dtype(jax_jnp.result_type(
                 *(v for v in (start, stop, step) if v is not None))))
    if stop is None:
        start, stop = 0, start
    iota = lambda d, n: _red.broadcasted_iota(d, (max(0, n),), 0,  # noqa: E731
                                              out_sharding=out_sharding)
    if step is not None:
        # narrow floats count in float32, as JAX's
        work = (np.dtype(np.float32) if dtype.kind == "f" and dtype.itemsize < 4 else dtype)
        n = int(np.ceil((stop - start) / step))
        out = ew.add(ew.convert_element_type(start, work),
                     ew.mul(ew.convert_element_type(step, work), iota(work, n)))
        return ew.convert_element_type(out, dtype)
    if start == 0:
        return iota(dtype, int(np.ceil(stop)))
    return ew.add(ew.convert_element_type(start, dtype), iota(dtype, int(np.ceil(stop - start))))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    if isinstance(num, core.Tracer) or isinstance(axis, core.Tracer):
        raise core.ConcretizationTypeError(
            "linspace requires concrete num and axis (they determine the shape)")
    return _linspace(start, stop, operator.index(num), endpoint, retstep, dtype,
                     operator.index(axis))


@staged_as_in_jax
def _linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """`num` points from start to stop, computed as JAX's linspace computes them (each
    point a weighted sum of the bounds, so float32 recovers them exactly)."""
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    check_arraylike("linspace", start, stop)
    start, stop = asarray(start), asarray(stop)
    if dtype is None:
        dtype = uf.inexact_dtype(result_dtype(start, stop)[0])
    else:
        dtype = core.user_dtype(dtype, "linspace")
    compute = uf.inexact_dtype(dtype)
    start = ew.convert_element_type(start, compute)
    stop = ew.convert_element_type(stop, compute)
    bounds = list(broadcast_shapes(get_aval(start).shape, get_aval(stop).shape))
    start_b, stop_b = broadcast_to(start, tuple(bounds)), broadcast_to(stop, tuple(bounds))
    axis = len(bounds) + axis + 1 if axis < 0 else axis
    bounds.insert(axis, 1)
    div = num - 1 if endpoint else num
    if num > 1:
        delta = ew.div(ew.sub(stop, start), np.asarray(div, compute))
        iota_shape = [1] * len(bounds)
        iota_shape[axis] = div
        real = cp.real_dtype_of(compute)
        step = ew.convert_element_type(
            ew.div(sh.reshape(_red.broadcasted_iota(real, (div,), 0), tuple(iota_shape)),
                   np.asarray(div, real)), compute)
        out = uf.add(uf.multiply(sh.reshape(start_b, tuple(bounds)), uf.subtract(1, step)),
                     uf.multiply(sh.reshape(stop_b, tuple(bounds)), step))
        if endpoint:
            out = ix.concatenate([out, sh.expand_dims(stop_b, (axis,))], axis)
    elif num == 1:
        delta = (np.asarray(np.nan, compute) if endpoint
                 else ew.convert_element_type(ew.sub(stop, start), compute))
        out = sh.reshape(start_b, tuple(bounds))
    else:
        delta = np.asarray(np.nan, compute)
        bounds[axis] = 0
        out = sh.broadcast_in_dim(np.zeros((), dtype), tuple(bounds), ())
    if dtype.kind in "iu" and get_aval(out).dtype.kind not in "iu":
        out = ew.floor_p.bind(out)
    result = ew.convert_element_type(out, dtype)
    return (result, delta) if retstep else result


def _like(fn, a, dtype, shape):
    return _filled_like(a, {zeros: 0, ones: 1}[fn], dtype, shape, f"{fn.__name__}_like",
                        lambda shape, dtype: fn(shape, dtype))


def _filled_like(a, value, dtype, shape, fun_name, make):
    """An array like `a` filled with `value`: inside a transformation a broadcast
    constant of `a`'s dtype and weak type (or of `dtype`), as lax.full_like stages it;
    else `make(shape, dtype)`."""
    aval = get_aval(asarray(a))
    if dtype is not None:
        dtype = core.user_dtype(dtype, fun_name)
    out_shape = aval.shape if shape is None else _static_shape(shape)
    if (_staged(None, out_shape) and np.ndim(value) == 0
            and not isinstance(value, core.Tracer)):
        if dtype is None and shape is None:
            return ew.full_like(a, value)
        return ew.vary_as(_filled(out_shape, value, dtype or aval.dtype,
                                  aval.explicit_sharding if shape is None else None), aval)
    return _like_prototype(make(aval.shape if shape is None else shape,
                                dtype or aval.dtype), aval, dtype)


def _like_prototype(out, aval, dtype):
    """As in JAX, a `*_like` result without a dtype is weakly typed when its
    prototype is (so `zeros_like(x * 1.0)` still promotes like a Python scalar), and
    varies over the manual mesh axes its prototype does."""
    out = ew.vary_as(out, aval)
    if dtype is None and aval.weak_type:
        return ew.convert_element_type(out, aval.dtype, weak_type=True)
    return out


def zeros_like(a, dtype=None, shape=None):
    return _like(zeros, a, dtype, shape)


def ones_like(a, dtype=None, shape=None):
    return _like(ones, a, dtype, shape)


def full_like(a, fill_value, dtype=None, shape=None):
    return _filled_like(a, fill_value, dtype, shape, "full_like",
                        lambda shape, dtype: full(shape, fill_value, dtype))


def astype(x, dtype):
    x = asarray(x)
    dtype = core.user_dtype(float if dtype is None else dtype, "astype")
    if get_aval(x).dtype.kind == "c":
        if dtype.kind in "iuf":
            warnings.warn("Casting from complex to real dtypes will soon raise a ValueError. "
                          "Please first use jnp.real or jnp.imag to take the real/imaginary "
                          "component of your input.", DeprecationWarning, stacklevel=2)
        elif dtype == np.bool_:   # nonzero, as NumPy: a conversion would drop the imaginary
            return ew.ne_p.bind(x, np.zeros((), get_aval(x).dtype))
    return ew.convert_element_type(x, dtype)


# ---------------------------------------------------------------------- einsum

def _expand_ellipsis(subscripts, ops):
    """Spell each '...' with fresh letters (right-aligned, broadcast as NumPy does:
    an axis of size 1 against a larger one is squeezed out of its operand), so the
    rest of einsum sees plain labels; returns the subscripts, with an explicit
    output, and the operands."""
    subscripts = subscripts.replace(" ", "")
    if "..." not in subscripts:
        return subscripts, ops
    ins, arrow, out = subscripts.partition("->")
    ins = ins.split(",")
    if len(ins) != len(ops):
        raise ValueError(f"einsum: subscripts {subscripts!r} name {len(ins)} operands, but "
                         f"{len(ops)} were given")
    shapes = [get_aval(x).shape for x in ops]
    ranks = []
    for s, shape in zip(ins, shapes):
        named = len(s.replace("...", ""))
        if "..." in s and len(shape) < named:
            raise ValueError(f"einsum: operand of shape {shape} has fewer axes than "
                             f"subscript {s!r} names")
        ranks.append(len(shape) - named if "..." in s else 0)
    fresh = [c for c in string.ascii_letters if c not in subscripts][:max(ranks)]
    sizes = {}
    for s, shape, r in zip(ins, shapes, ranks):
        start = s.index("...") if "..." in s else 0
        for k in range(r):
            label, d = fresh[len(fresh) - r + k], shape[start + k]
            if sizes.get(label, 1) not in (1, d) and d != 1:
                raise ValueError(f"einsum: operands could not be broadcast together over "
                                 f"'...' (sizes {sizes[label]} and {d})")
            sizes[label] = max(sizes.get(label, 1), d)
    new_ins, new_ops = [], []
    for s, x, shape, r in zip(ins, ops, shapes, ranks):
        labels = fresh[len(fresh) - r:]
        start = s.index("...") if "..." in s else 0
        squeeze = [start + k for k, c in enumerate(labels)
                   if shape[start + k] == 1 and sizes[c] > 1]
        kept = "".join(c for k, c in enumerate(labels) if start + k not in squeeze)
        new_ins.append(s.replace("...", kept))
        new_ops.append(sh.squeeze(x, tuple(squeeze)) if squeeze else x)
    if arrow:
        out = out.replace("...", "".join(fresh))
    else:
        flat = "".join(ins).replace(".", "")
        out = "".join(fresh) + "".join(sorted(c for c in set(flat) if flat.count(c) == 1))
    return ",".join(new_ins) + "->" + out, new_ops


def _parse_einsum(subscripts, n_ops):
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        ins, out = subscripts.split("->")
    else:
        ins = subscripts
        flat = ins.replace(",", "")
        out = "".join(sorted(c for c in set(flat) if flat.count(c) == 1))
    ins = ins.split(",")
    if len(ins) != n_ops:
        raise ValueError(f"einsum: subscripts {subscripts!r} name {len(ins)} operands, but "
                         f"{n_ops} were given")
    for s in ins + [out]:
        if not builtins.all(c.isalpha() for c in s):
            raise ValueError(f"einsum: invalid subscript {s!r} (use letters only)")
    if len(set(out)) != len(out):
        raise ValueError(f"einsum: output subscript {out!r} repeats a label")
    for c in out:
        if not builtins.any(c in s for s in ins):
            raise ValueError(f"einsum: output label {c!r} does not appear in the inputs")
    return ins, out


def _einsum_diagonal(x, labels):
    """Collapse repeated labels of one operand (its diagonal), e.g. 'ii' -> 'i'."""
    while True:
        dup = next((c for c in labels if labels.count(c) > 1), None)
        if dup is None:
            return x, labels
        i = labels.index(dup)
        j = labels.index(dup, i + 1)
        shape = get_aval(x).shape
        if shape[i] != shape[j]:
            raise ValueError(f"einsum: label {dup!r} has sizes {shape[i]} and {shape[j]}")
        mask = np.eye(shape[i], dtype=get_aval(x).dtype)
        mask = sh.broadcast_in_dim(mask, shape, (i, j))
        x = sh.reduce_sum(ew.mul(x, mask), (j,))
        labels = labels[:j] + labels[j + 1:]


def _einsum_sum_unneeded(x, labels, keep):
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if axes:
        x = sh.reduce_sum(x, axes)
        labels = "".join(c for c in labels if c in keep)
    return x, labels


def _einsum_pair(a, la, b, lb, keep, precision, preferred_element_type, label_sharding=None):
    """Contract two operands; the result's labels are batch + a's free + b's free.
    `label_sharding`: (a sharding, {label: spec entry}) the result is sharded by."""
    a, la = _einsum_sum_unneeded(a, la, set(lb) | keep)
    b, lb = _einsum_sum_unneeded(b, lb, set(la) | keep)
    batch = [c for c in la if c in lb and c in keep]
    contract = [c for c in la if c in lb and c not in keep]
    for c in batch + contract:
        da, db = get_aval(a).shape[la.index(c)], get_aval(b).shape[lb.index(c)]
        if da != db:
            raise ValueError(f"einsum: label {c!r} has size {da} in one operand and {db} "
                             "in the other")
    dn = ((tuple(la.index(c) for c in contract), tuple(lb.index(c) for c in contract)),
          (tuple(la.index(c) for c in batch), tuple(lb.index(c) for c in batch)))
    labels = ("".join(batch) + "".join(c for c in la if c not in lb)
              + "".join(c for c in lb if c not in la))
    out_sharding = None
    if label_sharding is not None:
        sharding, entries = label_sharding
        out_sharding = _respec(sharding, [entries.get(c) for c in labels])
    out = _lg.dot_general(a, b, dn, precision=precision,
                          preferred_element_type=preferred_element_type,
                          out_sharding=out_sharding)
    return out, labels


def einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None, out_sharding=None):
    """Einstein summation over dot_general, reductions and transposes.

    The operands are contracted pairwise in the order `optimize` gives, as in JAX: a path
    (a list of operand-position tuples, as `einsum_path` returns) or an opt_einsum
    strategy ('auto', 'greedy', 'optimal', ...; True means 'optimal', False contracts
    left to right). Labels are summed out as soon as nothing later needs them; repeated
    labels within one operand take its diagonal; '...' broadcasts as in NumPy.
    `out_sharding` (over Explicit mesh axes) is the last contraction's result sharding."""
    check_no_out("einsum", out)
    if not isinstance(subscripts, str):
        raise TypeError("einsum: only the string form of subscripts is supported")
    if not operands:
        raise ValueError("einsum: at least one operand is required")
    ops = promote(*[asarray(o) for o in operands])
    preferred_element_type = _accumulation_dtype(preferred_element_type, "einsum", *ops)
    subscripts, ops = _expand_ellipsis(subscripts, ops)
    ins, out_labels = _parse_einsum(subscripts, len(ops))
    for x, s in zip(ops, ins):
        if get_aval(x).ndim != len(s):
            raise ValueError(f"einsum: operand of shape {get_aval(x).shape} does not match "
                             f"subscript {s!r}")
    ops = list(ops)
    for step in _einsum_steps(subscripts, [get_aval(x).shape for x in ops], optimize):
        picked = sorted(step, reverse=True)
        step_ops = [ops.pop(i) for i in picked][::-1]
        step_ins = [ins.pop(i) for i in picked][::-1]
        needed = set(out_labels).union(*[set(s) for s in ins])
        step_out = "".join(dict.fromkeys(c for s in step_ins for c in s if c in needed))
        ops.append(_contract(step_ops, step_ins, step_out, precision, preferred_element_type))
        ins.append(step_out)
    return _contract(ops, ins, out_labels, precision, preferred_element_type, out_sharding)


def _einsum_steps(subscripts, shapes, optimize):
    """The contraction path: tuples of positions into the shrinking operand list."""
    if optimize is False or len(shapes) <= 2:
        return []
    if isinstance(optimize, (list, tuple)):
        path = [tuple(int(i) for i in step) for step in optimize if step != "einsum_path"]
    else:
        strategy = "optimal" if optimize is True else optimize
        path, _ = _opt_einsum.contract_path(subscripts, *shapes, shapes=True,
                                           optimize=strategy)
    return path


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """The contraction path `einsum` would follow, and opt_einsum's description of it."""
    shapes = [get_aval(asarray(o)).shape for o in operands]
    strategy = "optimal" if optimize is True else optimize
    if optimize is False:
        strategy = [(0, 1)] * (len(shapes) - 1) if len(shapes) > 1 else [(0,)]
    return _opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize=strategy)


def _contract(ops, ins, out_labels, precision, preferred_element_type, out_sharding=None):
    """Contract `ops` (labelled `ins`) left to right into the labels `out_labels`; the
    last contraction's result is sharded as `out_sharding` says of `out_labels`."""
    ops, ins = list(ops), list(ins)
    for k in range(len(ops)):
        ops[k], ins[k] = _einsum_diagonal(ops[k], ins[k])
    label_sharding = None
    if out_sharding is not None:
        entries = _spec_entries(out_sharding)
        label_sharding = (out_sharding, dict(zip(out_labels, entries)))
    x, lx = ops[0], ins[0]
    for k in range(1, len(ops)):
        keep = set(out_labels).union(*[set(s) for s in ins[k + 1:]])
        x, lx = _einsum_pair(x, lx, ops[k], ins[k], keep, precision, preferred_element_type,
                             label_sharding if k == len(ops) - 1 else None)
    x, lx = _einsum_sum_unneeded(x, lx, set(out_labels))
    x = sh.transpose(x, tuple(lx.index(c) for c in out_labels))
    if out_sharding is not None and len(ops) == 1:
        x = reshard(x, out_sharding)
    return x


# ---------------------------------------------------------- triangles and diagonals

def _tri_mask(x, k, lower):
    shape = get_aval(x).shape
    if len(shape) < 2:
        raise ValueError(f"{'tril' if lower else 'triu'} requires an array of at least 2 "
                         f"dimensions, got shape {shape}")
    n, m = shape[-2:]
    mask = np.tri(n, m, k=k, dtype=bool) if lower else ~np.tri(n, m, k=k - 1, dtype=bool)
    return np.broadcast_to(mask, shape)


def tril(m, k=0):
    """Lower triangle (a concrete mask: shapes are static, so no iota is needed)."""
    return _keep_triangle(m, k, True)


def triu(m, k=0):
    return _keep_triangle(m, k, False)


def _keep_triangle(m, k, lower):
    # the mask sharded as the matrices, as JAX's: a select's predicate must be
    x = asarray(m)
    aval = get_aval(x)
    mask = _tri_mask(x, k, lower)
    if aval.explicit_sharding is not None:
        mask = sh.broadcast_in_dim(mask[(0,) * (aval.ndim - 2)], aval.shape,
                                   (aval.ndim - 2, aval.ndim - 1),
                                   out_sharding=aval.explicit_sharding)
    return ew.select_n(mask, ew.zeros_like(x), x)


def diagonal(a, offset=0, axis1=0, axis2=1):
    x = asarray(a)
    shape = get_aval(x).shape
    nd = len(shape)
    if nd < 2:
        raise ValueError(f"diagonal requires an array of at least 2 dimensions, got shape "
                         f"{shape}")
    i, j = canonicalize_axis(axis1, nd), canonicalize_axis(axis2, nd)
    if i == j:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    rest = [d for d in range(nd) if d not in (i, j)]
    x = sh.transpose(x, tuple(rest + [i, j]))
    n, m = shape[i], shape[j]
    length = builtins.max(0, builtins.min(n + builtins.min(offset, 0),
                                          m - builtins.max(offset, 0)))
    lead = tuple(shape[d] for d in rest)
    if length == 0:
        return jax_jnp.zeros(lead + (0,), get_aval(x).dtype)
    # select [r, r + offset] with a one-hot contraction on a concrete mask
    rows = np.arange(length) + builtins.max(-offset, 0)
    sel_r = np.zeros((length, n), get_aval(x).dtype)
    sel_r[np.arange(length), rows] = 1
    sel_c = np.zeros((length, m), get_aval(x).dtype)
    sel_c[np.arange(length), rows + offset] = 1
    nl = len(lead)
    picked = _lg.dot_general(x, sel_c, (((nl + 1,), (1,)), ((), ())))   # lead, n, L
    mask = sh.broadcast_in_dim(sel_r.T, lead + (n, length), (nl, nl + 1))
    return sh.reduce_sum(ew.mul(picked, mask), (nl,))


def diag(v, k=0):
    x = asarray(v)
    shape = get_aval(x).shape
    if len(shape) == 2:
        return diagonal(x, k)
    if len(shape) != 1:
        raise ValueError(f"diag: input must be 1- or 2-dimensional, got shape {shape}")
    n = shape[0] + builtins.abs(k)
    place = np.zeros((shape[0], n, n), get_aval(x).dtype)
    idx = np.arange(shape[0])
    place[idx, idx + builtins.max(-k, 0), idx + builtins.max(k, 0)] = 1
    return _lg.dot_general(x, place, (((0,), (0,)), ((), ())))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    check_no_out("trace", out)
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)
