"""numpy.linalg functions built on impl's primitives (basic norms)."""
from __future__ import annotations

import numpy as np

from impl.core import get_aval
from impl.numpy import _core as c
from impl.numpy import _ufuncs as uf
from impl.numpy._util import canonicalize_axes

__all__ = ["norm", "vector_norm", "matrix_norm"]


def _float(x):
    return uf._float_operand(x)


def vector_norm(x, axis=None, keepdims=False, ord=2):
    x = _float(x)
    if ord is None or ord == 2:
        return uf.sqrt(c.sum(uf.multiply(x, x), axis=axis, keepdims=keepdims))
    absx = uf.absolute(x)
    if ord == 1:
        return c.sum(absx, axis=axis, keepdims=keepdims)
    if ord == np.inf:
        from impl.numpy._reductions import max as _max
        return _max(absx, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        from impl.numpy._reductions import min as _min
        return _min(absx, axis=axis, keepdims=keepdims)
    if ord == 0:
        return c.sum(c.astype(uf.not_equal(x, 0), get_aval(x).dtype), axis=axis,
                     keepdims=keepdims)
    if isinstance(ord, (int, float)):
        p = float(ord)
        return uf.power(c.sum(uf.power(absx, p), axis=axis, keepdims=keepdims), 1.0 / p)
    raise ValueError(f"norm: invalid ord {ord!r} for a vector norm")


def matrix_norm(x, ord="fro", keepdims=False, axis=(-2, -1)):
    x = _float(x)
    if ord in ("fro", None):
        return uf.sqrt(c.sum(uf.multiply(x, x), axis=axis, keepdims=keepdims))
    a0, a1 = canonicalize_axes(axis, get_aval(x).ndim)
    absx = uf.absolute(x)
    if ord in (1, -1, np.inf, -np.inf):
        from impl.numpy._reductions import max as _max, min as _min
        pick = _max if ord in (1, np.inf) else _min
        if ord in (1, -1):   # max over columns of the column sums
            s = c.sum(absx, axis=a0, keepdims=True)
            out = pick(s, axis=a1, keepdims=True)
        else:
            s = c.sum(absx, axis=a1, keepdims=True)
            out = pick(s, axis=a0, keepdims=True)
        return out if keepdims else c.squeeze(out, (a0, a1))
    raise NotImplementedError(f"norm: matrix ord={ord!r} (needs singular values) is not "
                              "supported")


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norms (2, 1, inf, 0, p) and matrix norms (Frobenius, 1, inf)."""
    x = _float(x)
    nd = get_aval(x).ndim
    if axis is None:
        if ord is None:
            return uf.sqrt(c.sum(uf.multiply(x, x), axis=None, keepdims=keepdims))
        if nd == 1:
            return vector_norm(x, None, keepdims, ord)
        if nd == 2:
            return matrix_norm(x, ord, keepdims, (0, 1))
        raise ValueError(f"norm: improper number of dimensions ({nd}) to norm with ord="
                         f"{ord!r}; give axis")
    axes = canonicalize_axes(axis, nd)
    if len(axes) == 1:
        return vector_norm(x, axes, keepdims, ord)
    if len(axes) == 2:
        return matrix_norm(x, "fro" if ord is None else ord, keepdims, axes)
    raise ValueError(f"norm: axis {axis!r} must name one or two axes")
