"""The parts of complex numbers: real, imag, conj and complex (building one from two
reals). All four are linear, so each jvp applies the primitive to the tangent; their
transposes follow JAX's convention for complex cotangents (no conjugation except by
conj itself), so gradients through complex intermediates agree with JAX's."""
from __future__ import annotations

import numpy as np
from jax import lax

from impl.core import ShapedArray
from impl.interpreters import ad, batching
from impl.interpreters.ad import Zero, is_undefined_primal
from impl.primitives import _operand_dtypes as dt
from impl.primitives import sharding_rules
from impl.primitives._define import define
from impl.primitives.elementwise import (_result_shape, convert_element_type, neg, unbroadcast,
                                         zeros_like)


def real_dtype_of(dtype):
    """float32 for complex64, float64 for complex128."""
    return np.dtype(np.finfo(np.dtype(dtype)).dtype)


def complex_dtype_of(dtype):
    """complex64 for float32 (and smaller floats), complex128 for float64."""
    return np.dtype(np.complex128 if np.dtype(dtype).itemsize >= 8 else np.complex64)


def _to_real_aval(name):
    def rule(x):
        dt.check_unary(name, dt.COMPLEX, x.dtype)
        return ShapedArray(x.shape, real_dtype_of(x.dtype), x.weak_type)
    return rule


# ------------------------------------------------------------------------ real

def _strong_zeros_like(ct):
    """The zero part of a complex cotangent built from a real one: strongly typed, so
    the cotangent is too, as in JAX (whose zero is a NumPy scalar)."""
    z = zeros_like(ct)
    return convert_element_type(z, z.dtype, weak_type=False)


def _real_transpose(ct, x):
    if type(ct) is Zero:
        return [None]
    return [complex(ct, _strong_zeros_like(ct))]


real_p = define("real", abstract_eval=_to_real_aval("real"), lowering=lax.real,
                jvp=ad.linear_jvp, transpose=_real_transpose, batching=batching.vectorized,
                sharding_rule=sharding_rules.same_as_operand,
                unreduced_rule=sharding_rules.unary_unreduced("real"))


def real(x):
    return real_p.bind(x)


# ------------------------------------------------------------------------ imag

def _imag_transpose(ct, x):
    if type(ct) is Zero:
        return [None]
    return [complex(_strong_zeros_like(ct), neg(ct))]


imag_p = define("imag", abstract_eval=_to_real_aval("imag"), lowering=lax.imag,
                jvp=ad.linear_jvp, transpose=_imag_transpose, batching=batching.vectorized,
                sharding_rule=sharding_rules.same_as_operand,
                unreduced_rule=sharding_rules.unary_unreduced("imag"))


def imag(x):
    return imag_p.bind(x)


# ------------------------------------------------------------------------ conj

# A complex number, or a real float32/float64 one taken as complex (in the order JAX's
# message lists them).
_CONJ_DTYPES = (np.float32, np.complexfloating, np.float64)


def _conj_aval(x):
    dt.check_unary("conj", _CONJ_DTYPES, x.dtype)
    return x if x.dtype.kind == "c" else x.update(dtype=complex_dtype_of(x.dtype))


def _conj_transpose(ct, x):
    if type(ct) is Zero:
        return [None]
    return [conj(ct) if x.aval.dtype.kind == "c" else real(ct)]


conj_p = define("conj", abstract_eval=_conj_aval, lowering=lax.conj, jvp=ad.linear_jvp,
                transpose=_conj_transpose, batching=batching.vectorized,
                sharding_rule=sharding_rules.same_as_operand,
                unreduced_rule=sharding_rules.unary_unreduced("conj"))


def conj(x):
    return conj_p.bind(x)


# --------------------------------------------------------------------- complex

# Two reals of one dtype, float32 or float64 (weakly typed operands get no leeway).
_COMPLEX_DTYPES = dt.OperandDtypes(((np.float32, np.float64),))


def _complex_aval(x, y):
    _COMPLEX_DTYPES.check("complex", [x.dtype, y.dtype])
    return ShapedArray(_result_shape("complex", (x, y)), complex_dtype_of(x.dtype),
                       x.weak_type and y.weak_type)


def _complex_transpose(ct, x, y):
    if type(ct) is Zero:
        return [None, None]
    return [unbroadcast(real(ct), x.aval) if is_undefined_primal(x) else None,
            unbroadcast(neg(imag(ct)), y.aval) if is_undefined_primal(y) else None]


def _complex_batch(axis_data, vals, dims):
    frame = batching.frame_shape(vals, dims)
    x, y = (batching.to_batched_shape(v, d, axis_data.size, frame) for v, d in zip(vals, dims))
    return complex_p.bind(x, y), 0


complex_p = define("complex", abstract_eval=_complex_aval, lowering=lax.complex,
                   jvp=ad.linear_jvp, transpose=_complex_transpose, batching=_complex_batch,
                   sharding_rule=sharding_rules.elementwise("complex"),
                   unreduced_rule=sharding_rules.nary_unreduced("complex"),
                   operand_dtypes=_COMPLEX_DTYPES)


def complex(x, y):  # noqa: A001  (jax.lax's name)
    return complex_p.bind(x, y)
