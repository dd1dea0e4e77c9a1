"""jnp.array and jnp.asarray: conversions whose results belong to the current
transformation, as JAX's do.

JAX's converters bind primitives, so inside jit an array made from a list, a NumPy
array or a Python scalar is a value of the program (a literal or a constant; printed
as a tracer, its methods and operators staged), and `jnp.array(x)` copies `x` with a
`copy` equation. impl's functions convert their arguments with `_util.asarray`, which
keeps concrete values concrete (they read static shapes and values from them); the
public converters hand their result to the current transformation.
"""
from __future__ import annotations

import jax

from impl import core
from impl.core import Tracer
from impl.primitives import elementwise as ew
from impl.numpy._util import staged_constant, to_array


def _converted(x, dtype, fun_name):
    if core.current_trace() is core.eval_trace or isinstance(x, Tracer):
        return to_array(x, dtype, fun_name)
    if isinstance(x, jax.Array):
        # the array itself, or its conversion staged as an equation on it, as JAX's
        return x if dtype is None else ew.convert_element_type(
            x, core.user_dtype(dtype, fun_name))
    return staged_constant(to_array(x, dtype, fun_name))


def asarray(a, dtype=None):
    return _converted(a, dtype, "asarray")


def array(object, dtype=None, copy=True):  # noqa: A002  (JAX's parameter name)
    if copy and isinstance(object, (Tracer, jax.Array)):
        object = ew.copy(object)
    return _converted(object, dtype, "array")
