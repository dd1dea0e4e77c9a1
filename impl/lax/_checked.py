"""impl.lax's functions as jax.lax's: strict about their operands' dtypes.

impl's own functions (impl.primitives.*) let a weakly typed operand take the other
operands' dtype, which impl's rules and impl.numpy rely on. The functions impl.lax
exports first check the contract each primitive declares in its `define` block
(`check_operand_dtypes`), so they raise where jax.lax does: `lax.add(x, 2)` for a
float32 `x`, `lax.pad(x, 0.0, ...)` under x64.
"""
from __future__ import annotations

import functools
import inspect

from impl.primitives._operand_dtypes import check_operand_dtypes


def bind_checked(prim, name=None):
    """jax.lax's function of `prim` whose arguments are all operands."""
    def fn(*operands):
        check_operand_dtypes(prim, *operands)
        return prim.bind(*operands)
    fn.__name__ = fn.__qualname__ = name or prim.name
    return fn


def checked(fn, prim, *operands):
    """`fn` checking, before it runs, the arguments it binds `prim` to: `operands` names
    them in order ("*name": an argument that is a sequence of operands)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def public(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return fn(*args, **kwargs)   # raises as the function does
        values = []
        for name in operands:
            if name.startswith("*"):   # read once: it may be an iterator
                bound.arguments[name[1:]] = sequence = tuple(bound.arguments.get(name[1:], ()))
                values.extend(sequence)
            else:
                values.append(bound.arguments[name])
        check_operand_dtypes(prim, *values)
        return fn(*bound.args, **bound.kwargs)
    return public
