"""jax.numpy's scalar types, abstract type hierarchy and dtype predicates.

The abstract hierarchy (generic, number, floating, ...), the index helpers s_ and
index_exp, and the printing and saving functions are NumPy's own objects, as in
jax.numpy. The concrete types are NumPy's where NumPy has them and JAX's (from
ml_dtypes) for the narrow floats and integers NumPy lacks; either kind names a dtype
impl's functions accept (without x64, 64-bit requests become 32-bit as in JAX).
"""
from __future__ import annotations

import jax
import jax.numpy as _jax_jnp
import numpy as np
from numpy import (generic, number, integer, signedinteger, unsignedinteger,  # noqa: F401
                   inexact, floating, complexfloating, character, flexible, object_,
                   can_cast, iterable, array_repr, array_str, index_exp, s_,
                   euler_gamma, save, savez, get_printoptions, set_printoptions,
                   printoptions)
from numpy.exceptions import ComplexWarning  # noqa: F401

from impl import core

__all__ = ["generic", "number", "integer", "signedinteger", "unsignedinteger", "inexact",
           "floating", "complexfloating", "character", "flexible", "object_", "can_cast", "iterable", "array_repr", "array_str", "index_exp", "s_",
           "euler_gamma", "save", "savez", "get_printoptions", "set_printoptions",
           "printoptions", "ComplexWarning", "bool", "int_", "uint", "single", "double",
           "csingle", "cdouble", "complex_", "isdtype", "issubdtype", "ndarray", "isscalar",
           "iscomplexobj", "isrealobj"]

class _ScalarMeta(type):
    """A jax.numpy scalar type: it names a dtype (NumPy reads its `dtype`; it hashes and
    compares as the NumPy scalar type), and calling it makes a rank-0 array of that dtype
    (traced when its argument is), as JAX's scalar types do, not a NumPy scalar."""

    @property
    def __numpy_dtype__(cls):
        return cls.dtype

    def __hash__(cls):
        return hash(cls.dtype.type)

    def __eq__(cls, other):
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other):
        return not cls == other

    def __call__(cls, x):
        from impl.numpy._converters import asarray
        return asarray(x, cls.dtype)

    def __instancecheck__(cls, instance):
        return isinstance(instance, cls.dtype.type)


def _scalar_type(dtype):
    scalar_type = _ScalarMeta(np.dtype(dtype).name, (object,), {"dtype": np.dtype(dtype)})
    scalar_type.__module__ = "impl.numpy"
    return scalar_type


_SCALAR_TYPES = {name: _scalar_type(getattr(_jax_jnp, name).dtype) for name in (
    "bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "bfloat16", "float16", "float32", "float64", "complex64", "complex128", "float4_e2m1fn",
    "float6_e2m3fn", "float6_e3m2fn", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "int1", "int2", "int4", "uint1", "uint2", "uint4") if hasattr(_jax_jnp, name)}
globals().update(_SCALAR_TYPES)
# jax.numpy's other names of them
_SCALAR_TYPES.update(bool=_SCALAR_TYPES["bool_"], int_=_SCALAR_TYPES["int64"],
                     uint=_SCALAR_TYPES["uint64"], float_=_SCALAR_TYPES["float64"],
                     single=_SCALAR_TYPES["float32"], double=_SCALAR_TYPES["float64"],
                     csingle=_SCALAR_TYPES["complex64"], cdouble=_SCALAR_TYPES["complex128"],
                     complex_=_SCALAR_TYPES["complex128"])
globals().update(_SCALAR_TYPES)
__all__ = sorted(set(__all__) | set(_SCALAR_TYPES))

# Predicates on dtypes (not arrays): JAX's own, which also know its extended dtypes.
isdtype, issubdtype = _jax_jnp.isdtype, _jax_jnp.issubdtype


class _ArrayType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, (jax.Array, core.Tracer))


class ndarray(metaclass=_ArrayType):  # noqa: N801  (jax.numpy's name)
    """The type of impl's arrays, for isinstance checks: concrete arrays and tracers."""

    def __init__(self, *args, **kwargs):
        raise TypeError("jax.numpy.ndarray cannot be instantiated; use impl.numpy.array")


def _dtype_of(x):
    return core.get_aval(x).dtype if isinstance(x, core.Tracer) else np.result_type(x)


def isscalar(element):
    """A Python or NumPy scalar, or a rank-0 array (concrete or traced)."""
    if isinstance(element, core.Tracer):
        return core.get_aval(element).ndim == 0
    if isinstance(element, (jax.Array, np.ndarray)):
        return element.ndim == 0
    return np.isscalar(element)


def iscomplexobj(x):
    """Whether x's dtype is complex (whatever its values)."""
    if x is None:
        return False
    try:
        return np.issubdtype(_dtype_of(x), np.complexfloating)
    except (TypeError, ValueError):
        return np.iscomplexobj(x)


def isrealobj(x):
    return not iscomplexobj(x)
