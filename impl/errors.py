"""impl's exception classes, with the names and hierarchy of `jax.errors`.

A program that catches `jax.errors.ConcretizationTypeError` (or its base `TypeError`)
catches the same error from impl after `import impl as jax`. This module imports nothing
from impl, so every layer (core included) can raise these classes.
"""
from __future__ import annotations

from jax.errors import JaxRuntimeError  # noqa: F401  (XLA's runtime errors: they come from JAX)
# Operands whose shardings over Explicit mesh axes do not fit the operation. JAX's own
# class (JAX 0.10 does not export it from jax.errors), so code catching JAX's catches impl's.
from jax._src.core import ShardingTypeError  # noqa: F401

__all__ = ["ConcretizationTypeError", "InconclusiveDimensionOperation", "JAXIndexError",
           "JAXTypeError", "JaxRuntimeError", "JaxprTypeError", "KeyReuseError",
           "NonConcreteBooleanIndexError", "TracerArrayConversionError",
           "TracerBoolConversionError", "TracerIntegerConversionError",
           "UnexpectedTracerError"]


class _ImplErrorMixin:
    """Marks impl's own errors (as JAX's mixin marks JAX's)."""


class JAXTypeError(_ImplErrorMixin, TypeError):
    """A TypeError raised by impl's transformation machinery."""


class JAXIndexError(_ImplErrorMixin, IndexError):
    """An IndexError raised by impl's transformation machinery."""


class ConcretizationTypeError(JAXTypeError):
    """A traced value was used where Python needs a concrete value (a shape, a Python
    int or float, a branch condition)."""


class TracerBoolConversionError(ConcretizationTypeError):
    """`bool()` of a traced value: Python control flow (`if`, `while`, `and`, `or`)
    on a value that is only known abstractly."""


class TracerIntegerConversionError(JAXTypeError):
    """`__index__` of a traced value: a tracer used as a Python integer (an index into
    a list, a range bound, an axis)."""


class TracerArrayConversionError(JAXTypeError):
    """`numpy.asarray` of a traced value: NumPy code called on an impl tracer."""


class UnexpectedTracerError(JAXTypeError):
    """A tracer was used outside the transformation that created it."""


class NonConcreteBooleanIndexError(JAXIndexError):
    """Indexing by a traced boolean mask: the result's shape would depend on values."""


class KeyReuseError(JAXTypeError):
    """A PRNG key was used twice where key-reuse checking is on."""


class JaxprTypeError(TypeError):
    """A program of impl's IR is ill-typed."""


class InconclusiveDimensionOperation(Exception):
    """A comparison of symbolic dimensions has no definite answer."""
