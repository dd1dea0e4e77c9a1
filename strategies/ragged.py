"""Ragged piles: lists of arrays that differ in one axis (segment lengths 0
and 1 included), and a per-element function to map over them with
``vmap(f, in_axes=pile_axis, out_axes=pile_axis or 0, axis_size=n)``.

The per-element function is a chain of elementwise steps (which keep the
element ragged) optionally ended by a reduction over the ragged axis that
makes it regular: a sum, a dot of two ragged vectors, or a matrix product
contracting the ragged dimension.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays
from .source import Case, array_literal
from .types import FLOAT_DTYPES

#: each step's statement on ``v``, formatted with its constant ``c``
STEP_TEMPLATES = {"sin": "jnp.sin(v)", "tanh": "jnp.tanh(v)", "scale": "{c!r} * v", "mul_w": "v * w", "add_w": "v + w"}
STEPS = tuple(STEP_TEMPLATES)
#: each reduction's statement, formatted with the ragged ``axis`` (None: the element stays ragged)
REDUCTION_TEMPLATES = {None: None, "sum": "jnp.sum(v, axis={axis})", "dot": "jnp.dot(v, x)",
                       "gram": "jnp.tensordot(v, x, axes=([{axis}], [{axis}]))"}
REDUCTIONS = tuple(REDUCTION_TEMPLATES)


@dataclass(frozen=True, repr=False)
class PileCase(Case):
    """``xs`` (one array per element, ragged along ``axis``) and a function of
    a shared scalar ``w`` and one element."""

    lengths: tuple[int, ...]
    axis: int
    steps: tuple[tuple, ...]
    reduction: str | None
    xs: tuple
    w: np.ndarray

    label = "ragged"
    imports = "import numpy as np\nimport impl as jax\nfrom impl.interpreters.batching import pile_axis\n"

    @property
    def dtype(self):
        return self.w.dtype

    @property
    def ragged_output(self):
        return self.reduction is None

    def text(self):
        lines = ["def make(backend, w):", "    jnp = backend.numpy", "", "    def f(x):", "        v = x"]
        for op, *c in self.steps:
            lines.append("        v = " + STEP_TEMPLATES[op].format(c=c[0] if c else None))
        if self.reduction is not None:
            lines.append("        v = " + REDUCTION_TEMPLATES[self.reduction].format(axis=self.axis))
        lines += ["        return v", "", "    return f"]
        return "\n".join(lines) + "\n"

    def element_fun(self, backend, w=None):
        """f(x) for one element (w defaults to the case's w)."""
        return self.function(backend, "make", self.w if w is None else w)()

    def describe(self):
        return (f"pile of lengths {list(self.lengths)} along axis {self.axis} "
                f"(elements {[list(np.shape(x)) for x in self.xs]}, {self.dtype}), steps {list(self.steps)},"
                f" reduction {self.reduction}")

    def example(self):
        xs = ", ".join(array_literal(x) for x in self.xs)
        return (f"w = {array_literal(self.w)}\nxs = [{xs}]\nf = make(jax, w)\n"
                + f"out = jax.vmap(f, in_axes=pile_axis, out_axes={'pile_axis' if self.ragged_output else 0},"
                + f" axis_size={len(self.xs)})(jax.pile(xs, axis={self.axis}))\n"
                + "print(out, [f(x) for x in xs])\n")


@st.composite
def _pile_case(draw, dtype, max_elements):
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    n = draw(st.integers(1, max_elements))
    lengths = tuple(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)))
    reduction = draw(st.sampled_from(REDUCTIONS))
    rank = 1 if reduction == "dot" else (2 if reduction == "gram" else draw(st.integers(1, 2)))
    axis = draw(st.integers(0, rank - 1))
    other = draw(st.integers(1, 3))
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(STEPS))
        steps.append((op, draw(st.sampled_from([0.5, -0.75, 1.25]))) if op == "scale" else (op,))
    xs = []
    for length in lengths:
        shape = [other] * rank
        shape[axis] = length
        xs.append(draw(_arrays.arrays(dt, tuple(shape))))
    w = np.asarray(draw(_arrays.elements(dt, min_value=0.5, max_value=1.5)), dt)
    return PileCase(lengths, axis, tuple(steps), reduction, tuple(xs), w)


def pile_cases(*, dtype=None, max_elements=4):
    """Draw a :class:`PileCase`: 1 to ``max_elements`` elements whose lengths
    along the ragged axis run 0 to 4 (0 and 1 included)."""
    if not isinstance(max_elements, int) or max_elements < 1:
        raise ValueError(f"max_elements must be a positive int, got {max_elements!r}")
    if dtype is not None and np.dtype(dtype).name not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    return _pile_case(None if dtype is None else np.dtype(dtype).name, max_elements)
