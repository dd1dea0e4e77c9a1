"""The dtypes a primitive's operands may have at impl.lax's surface, as jax.lax states
them: which dtypes each operand accepts and which operands must share one dtype.

impl's primitives are lenient: a weakly typed operand (a Python scalar) takes the dtype
of the others, so impl's own rules and impl.numpy may write `mul(t, 2.0)` (JAX's jnp
promotes before calling lax to the same effect). jax.lax is strict: a Python scalar has
its default dtype (int32, float32; int64, float64 with x64) and must match the other
operands exactly, weak or not. Each primitive declares its contract in its `define`
block (`operand_dtypes=`); impl.lax's functions check it with `check_operand_dtypes`
before binding, so they raise where and as jax.lax does, under any transformation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from jax import dtypes as jax_dtypes

from impl.core import float0, get_aval

# Dtype categories, as JAX's messages name them (the NumPy abstract types).
INTEGER = (np.integer,)
FLOATING = (np.floating,)
COMPLEX = (np.complexfloating,)
BOOL = (np.bool_,)
INEXACT = FLOATING + COMPLEX
NUMBER = INTEGER + FLOATING + COMPLEX
ORDERED = INTEGER + FLOATING + BOOL
INT_OR_BOOL = INTEGER + BOOL
ANY = INTEGER + FLOATING + COMPLEX + BOOL
SIGNED = FLOATING + COMPLEX + (np.signedinteger,)   # abs

_FLOAT0_TEXT = ("float0s do not support any operations by design, because they are not "
                "compatible with non-trivial vector spaces. No implicit dtype conversion is "
                "done. You can use np.zeros_like(arr, dtype=np.float) to cast a float0 array "
                "to a regular zeros array. \nIf you didn't expect to get a float0 you might "
                "have accidentally taken a gradient with respect to an integer argument.")


def accepts(category, dtype) -> bool:
    """Whether `dtype` is a subtype of one of the types of `category`."""
    return any(jax_dtypes.issubdtype(dtype, t) for t in category)


# The (name, category, dtype) triples `check_unary` has accepted: tracing checks the
# same few over and over, and each check asks NumPy's type hierarchy several times.
_unary_accepted: set = set()


def check_unary(name, category, dtype):
    """Raise TypeError, in JAX's words, unless the one operand's `dtype` is in
    `category`."""
    key = (name, category, dtype)
    if key in _unary_accepted:
        return
    if dtype == float0:
        raise TypeError(f"Called {name} with a float0 array. {_FLOAT0_TEXT}")
    if not accepts(category, dtype):
        raise TypeError(f"{name} does not accept dtype {dtype}. Accepted dtypes are subtypes "
                        f"of {_names(category)}.")
    _unary_accepted.add(key)


def _names(category):
    return ", ".join(t.__name__ for t in category)


def same_dtypes_message(name, dtypes, jnp_name=None):
    """JAX's words for operands of lax.`name` whose dtypes differ."""
    text = (f"lax.{name} requires arguments to have the same dtypes, got "
            f"{', '.join(str(d) for d in dtypes)}.")
    if jnp_name is not None:
        text += (f" (Tip: jnp.{jnp_name} is a similar function that does automatic type "
                 "promotion on inputs).")
    return text


def _is_extended(dtype):
    return jax_dtypes.issubdtype(dtype, jax_dtypes.extended)


@dataclass(frozen=True)
class OperandDtypes:
    """One primitive's contract on its operands' dtypes.

    accepted: per operand, the category its dtype must belong to; the last entry also
        covers any further operands (variadic primitives); empty: no constraint.
    same: the operands that must all have one dtype (a slice of the operands; None:
        all of them).
    name: the name JAX's messages give the operation (the primitive's by default).
    jnp_name: the jax.numpy function a mismatch message recommends, if JAX names one.
    agree: `(dtypes of the same operands) -> bool` where equality is not the rule
        (pow's integer exponent); `mismatch`: `(name, dtypes) -> message` where JAX
        words a mismatch its own way (pad, pow).
    """
    accepted: tuple = ()
    same: slice | None = None
    name: str | None = None
    jnp_name: str | None = None
    agree: Callable | None = None
    mismatch: Callable | None = None
    # (name, dtypes) this contract accepted, and lenient's (and check_lenient's, keyed
    # with the name) result per operand (dtype, weak type): a primitive is typed with
    # the same few combinations over and over
    _accepted: set = field(default_factory=set, init=False, repr=False, compare=False)
    _lenient: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def _same(self):
        return slice(None) if self.same is None else self.same

    def category(self, position):
        if not self.accepted:
            return None
        return self.accepted[min(position, len(self.accepted) - 1)]

    def lenient(self, avals):
        """The operands' dtypes as impl's primitives take them: among the operands that
        share a dtype, each weakly typed one takes the first strongly typed one's dtype
        (all weak: the widest of theirs); and whether those are all weak."""
        dtypes = [a.dtype for a in avals]
        group = range(len(avals))[self._same]
        strong = next((dtypes[i] for i in group if not avals[i].weak_type), None)
        all_weak = strong is None
        if all_weak and group:
            strong = max((dtypes[i] for i in group),
                         key=lambda d: (d.kind == "c", d.kind == "f", d.itemsize))
        for i in group:
            if avals[i].weak_type:
                dtypes[i] = strong
        return dtypes, all_weak

    def check_lenient(self, name, avals):
        """`check` on the dtypes `lenient` gives, which it returns with their weakness."""
        key = (name, *[(a.dtype, a.weak_type) for a in avals])
        known = self._lenient.get(key)
        if known is None:
            dtypes, all_weak = self.lenient(avals)
            self.check(name, dtypes)
            known = self._lenient[key] = (tuple(dtypes), all_weak)
        return list(known[0]), known[1]

    def check(self, name, dtypes):
        """Raise TypeError, in JAX's words, unless `dtypes` (one per operand) keep the
        contract."""
        name = self.name or name
        key = (name, tuple(dtypes))
        if key in self._accepted:
            return
        for i, dtype in enumerate(dtypes):
            category = self.category(i)
            if category is None or _is_extended(dtype):
                continue
            if dtype == float0:
                raise TypeError(f"Called {name} with a float0 at position {i}. {_FLOAT0_TEXT}")
            if not accepts(category, dtype):
                raise TypeError(
                    f"{name} does not accept dtype {dtype} at position {i}. Accepted dtypes "
                    f"at position {i} are subtypes of {_names(category)}.")
        shared = dtypes[self._same]
        if any(_is_extended(d) for d in shared):
            return
        agreed = (self.agree(*shared) if self.agree is not None
                  else all(d == shared[0] for d in shared[1:]))
        if not agreed:
            raise TypeError(self.mismatch(name, shared) if self.mismatch is not None
                            else same_dtypes_message(name, shared, self.jnp_name))
        self._accepted.add(key)


# What each primitive declares, by primitive name (filled by `define`).
declared: dict[str, OperandDtypes] = {}


def check_operand_dtypes(prim, *operands):
    """Check `operands` (what impl.lax is about to bind to `prim`) against the
    primitive's declared contract, as jax.lax would: Python scalars count with their
    default dtype and weakly typed values get no leeway."""
    contract = declared.get(prim.name)
    if contract is not None:
        contract.check(prim.name, [get_aval(x).dtype for x in operands])
