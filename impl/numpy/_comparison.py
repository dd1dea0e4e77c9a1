"""Whole-array equality: array_equal (same shape and elements) and array_equiv
(equal after broadcasting). Shapes are static, so a shape mismatch is a concrete False."""
from __future__ import annotations

import numpy as np

from impl.core import get_aval
from impl.numpy import _reductions as red
from impl.numpy import _ufuncs as uf
from impl.numpy._util import asarray, broadcast_to

__all__ = ["array_equal", "array_equiv"]


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
