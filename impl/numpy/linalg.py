"""numpy.linalg over impl's primitives: norms, solves, inverses, determinants and the
decompositions (from `impl.lax.linalg`), with JAX's signatures and result types.

Derivatives come from the decomposition primitives' rules (e.g. `solve` and `det`
differentiate through `lu`), so every function here works under jvp, grad, vmap and jit.
"""
from __future__ import annotations

import builtins
import operator
from typing import NamedTuple

import numpy as np

from impl import core
from impl.core import get_aval
from impl.numpy import _arrays
from impl.numpy import _core as c
from impl.numpy import _reductions as red
from impl.numpy import _ufuncs as uf
from impl.numpy._jax_calls import staged_as_in_jax
from impl.numpy._util import asarray, broadcast_shapes, broadcast_to, canonicalize_axes, promote
from impl.primitives import elementwise as ew
from impl.primitives import indexing as ix
from impl.primitives import linalg_decompositions as dec
from impl.primitives import shape as sh
from impl.primitives.reductions import take_along_axis

__all__ = ["norm", "vector_norm", "matrix_norm", "solve", "inv", "det", "slogdet",
           "cholesky", "eigh", "eigvalsh", "qr", "svd", "svdvals", "pinv", "lstsq",
           "matrix_power", "multi_dot", "matrix_rank", "matrix_transpose",
           "EighResult", "QRResult", "SlogdetResult", "SVDResult",
           "cond", "cross", "outer", "trace", "diagonal", "vecdot", "matmul", "tensordot"]


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class QRResult(NamedTuple):
    Q: object
    R: object


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


def _float(x):
    return uf._float_operand(x)


def _floats(*xs):
    xs = promote(*[_float(x) for x in xs])
    return [_float(x) for x in xs]


def _shape(x):
    return get_aval(x).shape


def _square(name, a):
    shape = _shape(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"{name}: argument must have shape [..., n, n], got {shape}")


def matrix_transpose(x):
    """Swap the last two axes."""
    x = asarray(x)
    nd = get_aval(x).ndim
    if nd < 2:
        raise ValueError(f"matrix_transpose: x must be at least two-dimensional, got shape "
                         f"{_shape(x)}")
    return dec._mT(x)


# --------------------------------------------------------------------- norms

def _sum_of_squares(x, axis, keepdims):
    return uf.sqrt(c.sum(uf.multiply(x, x), axis=axis, keepdims=keepdims))


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """Vector norms over `axis` (all axes flattened if None)."""
    x = _float(x)
    if ord is None or ord == 2:
        return _sum_of_squares(x, axis, keepdims)
    absx = uf.absolute(x)
    if ord == 1:
        return c.sum(absx, axis=axis, keepdims=keepdims)
    if ord == np.inf:
        return red.max(absx, axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return red.min(absx, axis=axis, keepdims=keepdims)
    if ord == 0:
        return c.sum(c.astype(uf.not_equal(x, 0), get_aval(x).dtype), axis=axis,
                     keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"Invalid order '{ord}' for vector norm.")
    p = float(ord)
    return uf.power(c.sum(uf.power(absx, p), axis=axis, keepdims=keepdims), 1.0 / p)


def _matrix_norm_axes(x, ord, axes, keepdims):
    row, col = axes
    if ord is None or ord in ("f", "fro"):
        return _sum_of_squares(x, axes, keepdims)
    absx = uf.absolute(x)
    if ord in (1, -1, np.inf, -np.inf):
        # 1: largest column sum (sum over rows); inf: largest row sum (sum over columns).
        summed, other = (row, col) if ord in (1, -1) else (col, row)
        if not keepdims and other > summed:
            other -= 1
        sums = c.sum(absx, axis=summed, keepdims=keepdims)
        if ord in (1, np.inf):
            return red.max(sums, axis=other, keepdims=keepdims, initial=0)
        return red.min(sums, axis=other, keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        s = svdvals(c.moveaxis(x, axes, (-2, -1)))
        if ord == 2:
            out = red.max(s, axis=-1, initial=0)
        elif ord == -2:
            out = red.min(s, axis=-1)
        else:
            out = c.sum(s, axis=-1)
        return c.expand_dims(out, axes) if keepdims else out
    raise ValueError(f"Invalid order '{ord}' for matrix norm.")


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Matrix norms of the last two axes ('fro', 'nuc', 1, -1, 2, -2, inf, -inf)."""
    x = _float(x)
    nd = get_aval(x).ndim
    if nd < 2:
        raise ValueError(f"matrix_norm: x must be at least two-dimensional, got shape "
                         f"{_shape(x)}")
    return _matrix_norm_axes(x, ord, (nd - 2, nd - 1), keepdims)


@staged_as_in_jax
def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norms (one axis) and matrix norms (two axes), as numpy.linalg.norm."""
    x = _float(x)
    nd = get_aval(x).ndim
    if axis is None:
        if ord is None:
            return _sum_of_squares(x, None, keepdims)
        axes = tuple(range(nd))
    else:
        axes = canonicalize_axes(axis, nd)
    if len(axes) == 1:
        return vector_norm(x, axis=axes, keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) == 2:
        return _matrix_norm_axes(x, ord, axes, keepdims)
    raise ValueError(f"Improper number of axes for norm: axis={axis!r}. Pass one axis to "
                     "compute a vector-norm, or two axes to compute a matrix-norm.")


# ------------------------------------------------------------------- solves

def _lu_solve(lu, perm, b):
    """x with A x = b from A's factors P A = L U (b: (..., n, k), batched like lu)."""
    y = dec.triangular_solve(lu, dec.permute_rows(b, perm), left_side=True, lower=True,
                             unit_diagonal=True)
    return dec.triangular_solve(lu, y, left_side=True, lower=False)


def solve(a, b):
    """x with a @ x = b; b is (n,) or (..., n, k), and leading axes broadcast."""
    a, b = _floats(a, b)
    sa, sb = _shape(a), _shape(b)
    if len(sa) < 2:
        raise ValueError(f"left hand array must be at least two dimensional; got a.shape={sa}")
    _square("solve", a)
    if len(sb) > 1 and len(sa) == len(sb) + 1 and sa[-1] == sb[-1] and sa[-1] != sb[-2]:
        raise ValueError(f"Invalid shapes for solve: {sa}, {sb}. Prior to JAX v0.5.0, this "
                         "would have been treated as a batched 1-dimensional solve. To "
                         "recover this behavior, use solve(a, b[..., None]).squeeze(-1).")
    vector = len(sb) == 1
    if vector:
        b = sh.reshape(b, sb + (1,))
        sb = _shape(b)
    if sb[-2] != sa[-1]:
        raise ValueError(f"solve: a of shape {sa} and b of shape "
                         f"{sb[:-1] if vector else sb} do not match (a has {sa[-1]} columns)")
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    a = broadcast_to(a, batch + sa[-2:])
    b = broadcast_to(b, batch + sb[-2:])
    lu, _, perm = dec.lu(a)
    x = _lu_solve(lu, perm, b)
    return sh.squeeze(x, (len(batch) + 1,)) if vector else x


def inv(a):
    """The inverse of square matrices (NaN or inf where singular)."""
    a = _float(a)
    shape = _shape(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"Argument to inv must have shape [..., n, n], got {shape}.")
    eye = dec._eye_like(a)
    return solve(a, eye)


# -------------------------------------------------------------- determinants

def _entry(a, i, j):
    shape = _shape(a)
    nb = len(shape) - 2
    return sh.reshape(dec._slice_last2(a, (i, i + 1), (j, j + 1)), shape[:nb])


def _det_small(a):
    """Cofactor expansion for 1x1, 2x2 and 3x3 matrices (differentiable everywhere)."""
    n = _shape(a)[-1]
    e = lambda i, j: _entry(a, i, j)  # noqa: E731
    if n == 1:
        return e(0, 0)
    if n == 2:
        return ew.sub(ew.mul(e(0, 0), e(1, 1)), ew.mul(e(0, 1), e(1, 0)))
    total = None
    for (i, j, k), sign in (((0, 1, 2), 1), ((1, 2, 0), 1), ((2, 0, 1), 1),
                            ((2, 1, 0), -1), ((0, 2, 1), -1), ((1, 0, 2), -1)):
        term = ew.mul(ew.mul(e(0, i), e(1, j)), e(2, k))
        total = term if total is None else (ew.add(total, term) if sign > 0
                                            else ew.sub(total, term))
    return total


def _slogdet_lu(a):
    lu, pivots, _ = dec.lu(a)
    diag = dec._diagonal(lu)
    dtype = get_aval(a).dtype
    n = _shape(a)[-1]
    swaps = c.sum(uf.not_equal(pivots, np.arange(n, dtype=np.int32)), axis=-1)
    negatives = c.sum(uf.less(diag, 0), axis=-1)
    odd = uf.equal(uf.remainder(ew.add(swaps, negatives), 2), 1)
    is_zero = red.any(uf.equal(diag, 0), axis=-1)
    sign = uf.where(is_zero, np.asarray(0, dtype),
                    uf.where(odd, np.asarray(-1, dtype), np.asarray(1, dtype)))
    logdet = uf.where(is_zero, np.asarray(-np.inf, dtype),
                      c.sum(uf.log(uf.absolute(diag)), axis=-1))
    return sign, logdet


def slogdet(a, *, method=None):
    """(sign, log|det|) of square matrices, through the LU decomposition."""
    a = _float(a)
    shape = _shape(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"Argument to slogdet() must have shape [..., n, n], got {shape}")
    if method not in (None, "lu"):
        if method == "qr":
            raise NotImplementedError("slogdet: method='qr' is not supported by impl; use "
                                      "method='lu' (the default)")
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                         "(`None`), and 'qr'.")
    if shape[-1] <= 2:
        d = _det_small(a)
        return SlogdetResult(uf.sign(d), uf.log(uf.absolute(d)))
    return SlogdetResult(*_slogdet_lu(a))


def det(a):
    """The determinant of square matrices."""
    a = _float(a)
    shape = _shape(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"Argument to _det() must have shape [..., n, n], got {shape}")
    if shape[-1] <= 3:
        return _det_small(a)
    sign, logdet = _slogdet_lu(a)
    return ew.mul(sign, uf.exp(logdet))


# ------------------------------------------------------------ decompositions

def cholesky(a, *, upper=False, symmetrize_input=True):
    """The lower (or, with upper, the upper) Cholesky factor of positive definite a."""
    a = _float(a)
    _square("cholesky", a)
    L = dec.cholesky(a, symmetrize_input=symmetrize_input)
    return dec._mH(L) if upper else L


def _uplo(UPLO):
    if UPLO is None or UPLO == "L":
        return True
    if UPLO == "U":
        return False
    raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")


def eigh(a, UPLO=None, symmetrize_input=True):
    """Eigenvalues (ascending) and eigenvectors of symmetric matrices."""
    a = _float(a)
    v, w = dec.eigh(a, lower=_uplo(UPLO), symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    """Eigenvalues (ascending) of symmetric matrices."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def qr(a, mode="reduced"):
    """QR decomposition: mode 'reduced', 'complete' or 'r' ('raw' is not supported)."""
    a = _float(a)
    if mode in ("reduced", "r", "full"):
        full = False
    elif mode == "complete":
        full = True
    elif mode == "raw":
        raise NotImplementedError("qr: mode='raw' (LAPACK's Householder representation) is "
                                  "not supported by impl")
    else:
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r = dec.qr(a, full_matrices=full)
    return r if mode == "r" else QRResult(q, r)


def _hermitian_svd(a, compute_uv, subset_by_index):
    # For symmetric a = V diag(w) V^T: the singular values are |w| (sorted descending),
    # u the eigenvectors in that order and vh = (u * sign(w))^T.
    v, w = dec.eigh(a, subset_by_index=subset_by_index)
    s = uf.absolute(w)
    last = get_aval(s).ndim - 1
    order = red.argsort(s, axis=-1, descending=True)
    s = take_along_axis(s, order, last)
    if not compute_uv:
        return s
    signs = take_along_axis(uf.sign(w), order, last)
    u = take_along_axis(v, dec._rows_like(order, _shape(v)), last + 1)
    vh = dec._mT(ew.mul(u, dec._rows_like(signs, _shape(u))))
    return SVDResult(u, s, vh)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    """Singular value decomposition (u, s, vh), or s alone without compute_uv."""
    a = _float(a)
    if hermitian:
        return _hermitian_svd(a, compute_uv, subset_by_index)
    if not compute_uv:
        return dec.svd(a, full_matrices=full_matrices, compute_uv=False,
                       subset_by_index=subset_by_index)
    return SVDResult(*dec.svd(a, full_matrices=full_matrices, compute_uv=True,
                              subset_by_index=subset_by_index))


def svdvals(x, /):
    """The singular values, in descending order."""
    return svd(x, compute_uv=False)


def _default_rtol(a):
    return 10.0 * builtins.max(_shape(a)[-2:]) * np.finfo(get_aval(a).dtype).eps


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse; singular values at most rtol times the largest
    are treated as zero."""
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    a = _float(a)
    shape = _shape(a)
    dtype = get_aval(a).dtype
    if len(shape) < 2:
        raise ValueError(f"pinv: a must be at least two-dimensional, got shape {shape}")
    m, n = shape[-2:]
    if m == 0 or n == 0:
        return c.zeros(shape[:-2] + (n, m), dtype)
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    rtol = np.asarray(_default_rtol(a), dtype) if rtol is None else c.astype(asarray(rtol),
                                                                             dtype)
    if get_aval(rtol).ndim:
        rtol = c.expand_dims(rtol, -1)
    cutoff = uf.multiply(rtol, _largest(s))
    safe = uf.where(uf.greater(s, cutoff), s, np.asarray(np.inf, dtype))
    ut = dec._mT(u)
    return c.matmul(dec._mT(vh), ew.div(ut, dec._cols_like(safe, _shape(ut))))


def _largest(s):
    """The largest singular value, kept as a trailing axis of length 1 (s is sorted)."""
    last = get_aval(s).ndim - 1
    return ix.slice_in_dim(s, 0, 1, axis=last)


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """Least-squares solution of a @ x = b through the SVD: (x, residuals, rank, s)."""
    a, b = _floats(a, b)
    sa, sb = _shape(a), _shape(b)
    if sa[0] != sb[0]:
        raise ValueError("Leading dimensions of input arrays must match")
    vector = len(sb) == 1
    if vector:
        b = sh.reshape(b, sb + (1,))
    if len(sa) != 2:
        raise TypeError(f"{len(sa)}-dimensional array given. Array must be two-dimensional")
    if get_aval(b).ndim != 2:
        raise TypeError(f"{len(sb)}-dimensional array given. Array must be one or "
                        "two-dimensional")
    m, n = sa
    dtype = get_aval(a).dtype
    eps = np.asarray(np.finfo(dtype).eps, dtype)
    if rcond is None:
        rcond = eps * builtins.max(n, m)
    else:
        rcond = c.astype(uf.where(uf.less(rcond, 0), eps, rcond), dtype)
    u, s, vt = svd(a, full_matrices=False)
    mask = uf.logical_and(uf.greater(s, 0), uf.greater_equal(s, uf.multiply(rcond,
                                                                         _largest(s))))
    rank = c.sum(mask)
    safe = uf.where(mask, s, np.asarray(1, dtype))
    s_inv = uf.where(mask, ew.div(np.asarray(1, dtype), safe), np.asarray(0, dtype))
    utb = c.matmul(dec._mT(u), b)
    x = c.matmul(dec._mT(vt), ew.mul(utb, dec._cols_like(s_inv, _shape(utb))))
    if numpy_resid and (int(rank) < n or m <= n):
        resid = c.zeros((0,), dtype)
    else:
        resid = uf.square(norm(uf.subtract(b, c.matmul(a, x)), axis=0))
    if vector:
        x = c.ravel(x)
    return x, resid, rank, s


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):
    """The number of singular values above rtol times the largest (or above tol)."""
    M = _float(M)
    shape = _shape(M)
    if len(shape) < 2:
        return c.astype(red.any(uf.not_equal(M, 0)), np.int32)
    s = svd(M, compute_uv=False, hermitian=hermitian)
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of rtol and tol may be specified.")
        cutoff = asarray(tol)
    else:
        rtol = _default_rtol(M) if rtol is None else rtol
        cutoff = uf.multiply(red.max(s, axis=-1), rtol)
    if get_aval(cutoff).ndim:
        cutoff = c.expand_dims(cutoff, -1)
    return c.sum(uf.greater(s, cutoff), axis=-1)


def matrix_power(a, n):
    """a raised to the integer power n (n < 0: powers of the inverse)."""
    a = asarray(a)
    _square("matrix_power", a)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}") from None
    if n == 0:
        return broadcast_to(c.eye(_shape(a)[-1], dtype=get_aval(a).dtype), _shape(a))
    if n < 0:
        a, n = inv(a), -n
    result, power = None, a
    while True:
        if n & 1:
            result = power if result is None else c.matmul(result, power)
        n >>= 1
        if not n:
            return result
        power = c.matmul(power, power)


def multi_dot(arrays, *, precision=None):
    """The chained product of the arrays, multiplied in the cheapest order (the first
    and last may be vectors)."""
    arrays = [asarray(x) for x in arrays]
    if len(arrays) < 2:
        raise ValueError(f"multi_dot requires at least two arrays, got {len(arrays)}")
    first_vec = get_aval(arrays[0]).ndim == 1
    last_vec = get_aval(arrays[-1]).ndim == 1
    if first_vec:
        arrays[0] = sh.reshape(arrays[0], (1,) + _shape(arrays[0]))
    if last_vec:
        arrays[-1] = sh.reshape(arrays[-1], _shape(arrays[-1]) + (1,))
    for x in arrays:
        if get_aval(x).ndim != 2:
            raise ValueError("multi_dot: all arrays but the first and last must be "
                             f"two-dimensional, got shapes {[_shape(y) for y in arrays]}")
    dims = [_shape(arrays[0])[0]] + [_shape(x)[1] for x in arrays]
    order = _chain_order(dims)

    def product(i, j):
        if i == j:
            return arrays[i]
        k = order[i][j]
        return c.matmul(product(i, k), product(k + 1, j), precision=precision)

    out = product(0, len(arrays) - 1)
    if first_vec:
        out = sh.squeeze(out, (0,))
    if last_vec:
        out = sh.squeeze(out, (get_aval(out).ndim - 1,))
    return out


def _chain_order(dims):
    """The split points of the cheapest parenthesisation of a matrix chain."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or q < cost[i][j]:
                    cost[i][j], split[i][j] = q, k
    return split


# ------------------------------------------- condition number, array-API aliases

def cond(x, p=None):
    """The condition number in the `p` norm (the ratio of extreme singular values for
    None, 2 and -2); inf where x is singular and holds no NaN."""
    x = _float(x)
    shape = _shape(x)
    if len(shape) < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D; got "
                         f"arr.shape={shape}")
    if shape[-1] == 0 or shape[-2] == 0:
        raise ValueError(f"jnp.linalg.cond: input array must not be empty; got "
                         f"arr.shape={shape}")
    if p is None or p == 2 or p == -2:
        s = svdvals(x)
        first = ix.slice_in_dim(s, 0, 1, axis=-1)
        last = ix.slice_in_dim(s, _shape(s)[-1] - 1, _shape(s)[-1], axis=-1)
        top, bottom = (first, last) if p != -2 else (last, first)
        r = c.squeeze(uf.true_divide(top, bottom), -1)
        if p != -2:
            return r
    else:
        if shape[-2] != shape[-1]:
            raise ValueError(f"jnp.linalg.cond: for p={p!r}, array must be square; got "
                             f"arr.shape={shape}")
        r = uf.multiply(norm(x, ord=p, axis=(-2, -1)), norm(inv(x), ord=p, axis=(-2, -1)))
    has_nan = red.any(uf.isnan(x), axis=(-2, -1))
    return uf.where(uf.logical_and(uf.isnan(r), uf.logical_not(has_nan)), np.inf, r)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along `axis`."""
    x1, x2 = asarray(x1), asarray(x2)
    n1, n2 = _shape(x1)[axis], _shape(x2)[axis]
    if n1 != 3 or n2 != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they have x1.shape[axis]={n1} and x2.shape[axis]={n2}")
    return _arrays.cross(x1, x2, axis=axis)


def outer(x1, x2, /):
    """The outer product of two vectors."""
    x1, x2 = asarray(x1), asarray(x2)
    if get_aval(x1).ndim != 1 or get_aval(x2).ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={get_aval(x1).ndim} and x2.ndim={get_aval(x2).ndim}")
    return c.outer(x1, x2)


def trace(x, /, *, offset=0, dtype=None):
    """The sums of the (offset) diagonals of the trailing matrices."""
    return c.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x, /, *, offset=0):
    """The (offset) diagonals of the trailing matrices."""
    return c.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """Dot products of the vectors along `axis`."""
    return _arrays.vecdot(x1, x2, axis=axis, precision=precision,
                     preferred_element_type=preferred_element_type)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """The matrix product (array-API spelling)."""
    return c.matmul(x1, x2, precision=precision, preferred_element_type=preferred_element_type)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None,
              out_sharding=None):
    """The tensor contraction over `axes` (array-API spelling)."""
    if out_sharding is not None:
        raise NotImplementedError("tensordot: out_sharding= is not implemented in impl")
    if precision is not None or preferred_element_type is not None:
        raise NotImplementedError("tensordot: precision= and preferred_element_type= are "
                                  "not implemented in impl's tensordot")
    return c.tensordot(x1, x2, axes)
