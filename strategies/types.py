"""Abstract values: the types that program ops check and produce.

A program is valid by construction because every op looks only at these
abstract values (shape, dtype, a bound on the elements, which inputs they
depend on) when it decides whether it accepts an operand and what it makes.
The element bounds are interval arithmetic: they let ops such as ``log`` or
``div`` refuse operands that could leave their domain, and keep every value
small enough that float32 results and float64 finite differences stay sane.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FLOAT_DTYPES = ("float32", "float64")

class OneArrayCase:
    """Mixin of the drawn cases whose program takes one array, the field ``x``."""

    @property
    def args(self):
        return (self.x,)

    @property
    def dtype(self):
        return self.x.dtype


#: Program inputs are drawn from [-INPUT_BOUND, INPUT_BOUND] ...
INPUT_BOUND = 2.0
#: ... or, for inputs marked positive (so log, sqrt and div apply), from here.
POSITIVE_RANGE = (0.5, 2.0)
#: A value whose elements may exceed this in magnitude feeds no further op.
MAX_ABS = 100.0
#: Largest number of elements (and rank) a program value may have.
MAX_SIZE = 256
MAX_RANK = 4
#: Distance a value must keep from a kink or a pole (abs at 0, 1/x at 0, ...).
MARGIN = 0.1

#: Constants that appear in programs: exact in binary, so source() is exact.
CONSTANTS = (0.25, 0.5, 0.75, 1.25, 1.5, 2.0, -0.25, -0.5, -0.75, -1.25, -1.5, -2.0)


@dataclass(frozen=True)
class ValueType:
    """Shape, dtype and element bounds of one program value."""

    shape: tuple[int, ...]
    dtype: str
    lo: float
    hi: float
    deps: frozenset = frozenset()  # indices of the program inputs it depends on

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def bound(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    def away_from_zero(self, margin: float = MARGIN) -> bool:
        """True when no element can be within ``margin`` of zero."""
        return self.lo >= margin or self.hi <= -margin

    def with_(self, shape=None, lo=None, hi=None, deps=None) -> "ValueType":
        return ValueType(
            self.shape if shape is None else tuple(shape),
            self.dtype,
            self.lo if lo is None else float(lo),
            self.hi if hi is None else float(hi),
            self.deps if deps is None else deps,
        )


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy broadcasting of two shapes, or None when they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and da != 1 and db != 1:
            return None
        out.append(max(da, db))
    return tuple(reversed(out))


def interval_mul(a: ValueType, b: ValueType) -> tuple[float, float]:
    corners = (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
    return min(corners), max(corners)


def fits(shape: tuple[int, ...], lo: float = 0.0, hi: float = 0.0) -> bool:
    """Whether a value of this shape and bounds is small enough to keep."""
    return (
        len(shape) <= MAX_RANK
        and math.prod(shape) <= MAX_SIZE
        and max(abs(lo), abs(hi)) <= MAX_ABS
    )
