"""Remat cases: a drawn program wrapped in ``checkpoint`` with a drawn policy.

``make(backend, remat=True)`` applies ``backend.checkpoint(body, policy=...,
prevent_cse=...)`` to the inputs and feeds tanh of the result to a drawn
outer program; ``make(backend, remat=False)`` is the same without
``checkpoint``. Some body values are tagged with
``checkpoint_name`` so the name-based policies have something to save;
without remat the tags are the identity they stand for, so the program
without remat binds neither checkpoint nor name (a reference independent
of both).

A third of the bodies are linear programs whose first two inputs have one
type: their linearized checkpoint then has no residual operand, its leading
operands are those two inputs' tangents, and a transpose rule that mixes up
their cotangents changes the gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.ad_checkpoint  # noqa: F401  (makes jax.ad_checkpoint an attribute of jax)
from hypothesis import strategies as st

from .programs import Program, program_args, random_programs
from .source import IMPORTS, Case, args_literal, embed
from .types import FLOAT_DTYPES

#: policies from ``checkpoint_policies`` (None: the default, save nothing but inputs)
POLICIES = (None, "everything_saveable", "nothing_saveable", "dots_saveable",
            "dots_with_no_batch_dims_saveable", "save_only_these_names",
            "save_anything_except_these_names")
TAGS = ("a", "b")


@dataclass(frozen=True, repr=False)
class RematCase(Case):
    """``checkpoint(body)`` followed by an outer program, with and without remat."""

    body: Program
    outer: Program
    policy: str | None
    prevent_cse: bool
    tagged: tuple[int, ...]      # body nodes whose values get checkpoint_name
    tags: tuple[str, ...]        # their names
    saved: tuple[str, ...]       # the names the policy is given
    args: tuple

    @property
    def dtype(self):
        return min((a.dtype for a in self.args), key=lambda d: d.itemsize)

    label = "remat"
    imports = IMPORTS + "import jax.ad_checkpoint\n"

    def text(self):
        lines = ["def make(backend, remat):", "    jnp, lax = backend.numpy, backend.lax",
                 "    # without remat, checkpoint_name is the identity it stands for",
                 "    checkpoint_name = backend.ad_checkpoint.checkpoint_name if remat else (lambda x, name: x)",
                 ""]
        lines += embed(self.body, "body", tuple(zip(self.tagged, self.tags)))
        lines.append("")
        lines += embed(self.outer, "outer")
        if self.policy is None:
            policy = "None"
        elif self.policy in ("save_only_these_names", "save_anything_except_these_names"):
            policy = f"backend.checkpoint_policies.{self.policy}({', '.join(map(repr, self.saved))})"
        else:
            policy = f"backend.checkpoint_policies.{self.policy}"
        n = self.body.num_inputs
        params = ", ".join(f"x{i}" for i in range(n))
        lines += ["", "    if remat:",
                  f"        body = backend.checkpoint(body, policy={policy}, prevent_cse={self.prevent_cse})",
                  "", f"    def program({params}):",
                  f"        return outer(jnp.tanh(body({params})))", "", "    return program"]
        return "\n".join(lines) + "\n"

    def build(self, backend, remat=True):
        """The program for ``backend``; ``remat=False`` leaves checkpoint out."""
        return self.function(backend, "make", remat)()

    def describe(self):
        return (f"checkpoint(policy={self.policy}{self.saved if self.saved else ''}, "
                f"prevent_cse={self.prevent_cse}) of {self.body.ops}, then {self.outer.ops}")

    def example(self):
        return f"args = {args_literal(self.args)}\nprint(make(jax, True)(*args), make(jax, False)(*args))\n"


@st.composite
def _remat_case(draw, smooth, dtype, max_ops):
    if draw(st.integers(0, 2)) == 0:   # linear, its leading inputs of one type
        dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
        shape = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
        inputs = ((shape, dt),) * draw(st.integers(2, 3))
        body = draw(random_programs(linear=True, input_types=inputs, min_ops=1, max_ops=max_ops))
    else:
        body = draw(random_programs(smooth=smooth, dtype=dtype, min_ops=1, max_ops=max_ops))
    outer = draw(random_programs(smooth=smooth, max_ops=2, min_ops=0,
                                 input_types=(body.output_type,)))
    policy = draw(st.sampled_from(POLICIES))
    k = draw(st.integers(0, min(2, len(body.nodes))))
    tagged = tuple(sorted(draw(st.lists(st.integers(0, len(body.nodes) - 1), min_size=k, max_size=k,
                                        unique=True)))) if body.nodes else ()
    tags = tuple(TAGS[i] for i in range(len(tagged)))
    saved = ()
    if policy in ("save_only_these_names", "save_anything_except_these_names"):
        saved = tuple(draw(st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True)))
    args = draw(program_args(body))
    return RematCase(body, outer, policy, draw(st.booleans()), tagged, tags, saved, tuple(args))


def remat_cases(*, smooth=True, dtype=None, max_ops=5):
    """Draw a :class:`RematCase`: ``checkpoint`` with a drawn policy (one of
    :data:`POLICIES`, name-based ones with drawn names) and ``prevent_cse``
    around a drawn body, some of whose values carry ``checkpoint_name`` tags.
    """
    if not isinstance(smooth, bool):
        raise TypeError(f"smooth must be a bool, got {smooth!r}")
    return _remat_case(smooth, dtype, max_ops)
