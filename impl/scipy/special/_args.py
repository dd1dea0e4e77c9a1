"""Argument handling shared by the jax.scipy.special functions: JAX's
promote_args_inexact (common dtype, integers to floats, weak types kept, shapes
broadcast)."""
from __future__ import annotations

from impl.core import get_aval
from impl.primitives import elementwise as ew
from impl.numpy._ufuncs import inexact_dtype
from impl.numpy._util import asarray, broadcast_promoted, result_dtype


def inexact_args(*args):
    """The arguments broadcast together, in their common floating dtype."""
    return promote_inexact(*broadcast_promoted(*args))


def promote_inexact(*args):
    """The arguments (arrays, unbroadcast) in their common floating dtype."""
    args = [asarray(a) for a in args]
    dtype, weak = result_dtype(*args)
    dtype = inexact_dtype(dtype)
    out = []
    for a in args:
        aval = get_aval(a)
        if aval.dtype != dtype or (aval.weak_type and not weak):
            a = ew.convert_element_type(a, dtype, weak_type=weak)
        out.append(a)
    return out


def inexact_arg(x):
    return inexact_args(x)[0]


def dtype_of(x):
    return get_aval(x).dtype


def reject_complex(name, x):
    if dtype_of(x).kind == "c":
        raise ValueError(f"{name} does not support complex-valued inputs.")
