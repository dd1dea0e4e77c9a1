"""Custom-rule wrappers around drawn programs: ``custom_jvp`` / ``custom_vjp``
with a true rule (the backend's own derivative of the program), a scaled
rule (exactly ``scale`` times it: a rule that is not the derivative, which
the custom-rule machinery must still use), or a symbolic-zero rule
(``symbolic_zeros=True``: the rule records which tangents arrive as
``SymbolicZero`` / which primals are ``perturbed``).

Some cases wrap no drawn program but a weighted sum ``w0 * x0 + w1 * x1`` of
two same-typed inputs (``weights``; ``w0 != w1``): its custom_vjp fwd saves no
residual and bwd returns ``(w0 * g, w1 * g)``, so the custom-rule machinery's
operands are the two input tangents alone and mixing them up is visible.

``make(backend, seen)`` returns the wrapped function and the rule's parts;
``seen`` is a list the symbolic-zero rules append their observations to.

Some cases call the custom function through a staging transformation (``staging``: a
``jit``, a ``checkpoint`` or both branches of a ``cond``): differentiating that stages the
custom function into a program first, and then the program's custom-rule call is
differentiated, which is another path than differentiating the function called directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays
from .programs import Program, program_args, random_programs
from .source import Case, args_literal, embed
from .types import CONSTANTS, FLOAT_DTYPES

CUSTOM_WRAPPER_KINDS = ("custom_jvp", "custom_vjp")
RULES = ("true", "scaled", "symbolic_zeros")
#: how the wrapped function is called: directly (""), or staged by a transformation first
STAGINGS = ("", "jit", "checkpoint", "cond")


@dataclass(frozen=True, repr=False)
class CustomWrapperCase(Case):
    """A drawn program (or, with ``weights``, ``w0 * x0 + w1 * x1``) wrapped in
    a custom rule, with args and the inputs to differentiate (``perturbed``; at
    least one)."""

    program: Program | None
    kind: str
    rule: str
    scale: float
    args: tuple
    perturbed: tuple[bool, ...]
    claims_true: bool
    optimize_remat: bool = False  # custom_vjp's defvjp(..., optimize_remat=True)
    weights: tuple[float, ...] = ()  # (w0, w1): the body is w0 * x0 + w1 * x1, no residual
    staging: str = ""  # a STAGINGS entry: the transformation the custom function is called through

    label = "custom_rules"

    @property
    def dtype(self):
        return np.asarray(self.args[0]).dtype

    def _body_lines(self):
        if self.weights:
            w0, w1 = self.weights
            return ["    def body(x0, x1):",
                    f"        return {w0!r} * x0 {'-' if w1 < 0 else '+'} {abs(w1)!r} * x1"]
        return embed(self.program, "body")

    def text(self):
        n = len(self.args)
        params = ", ".join(f"x{i}" for i in range(n))
        symbolic = self.rule == "symbolic_zeros"
        k = "" if self.scale == 1.0 else f"{self.scale!r} * "
        lines = ["def make(backend, seen):", "    jnp, lax = backend.numpy, backend.lax", ""]
        lines += self._body_lines()
        lines += ["", f"    f = backend.{self.kind}(body)", ""]
        if self.kind == "custom_jvp":
            lines.append("    def f_jvp(primals, tangents):")
            if symbolic:
                lines += ['        seen.append(tuple(type(t).__name__ == "SymbolicZero" for t in tangents))',
                          '        tangents = tuple(jnp.zeros(t.shape, t.dtype) if type(t).__name__ == '
                          '"SymbolicZero" else t for t in tangents)']
            lines += ["        out, t = backend.jvp(body, primals, tangents)",
                      f"        return out, {k}t", "",
                      f"    f.defjvp(f_jvp{', symbolic_zeros=True' if symbolic else ''})"]
            lines += self._staging_lines(params)
            lines.append("    return f, f_jvp")
        else:
            lines.append(f"    def f_fwd({params}):")
            if symbolic:
                lines += [f"        seen.append(tuple(x.perturbed for x in ({params},)))",
                          f"        {params} = " + ", ".join(f"x{i}.value" for i in range(n))]
            if self.weights:   # linear: the cotangents need no residual
                lines += [f"        return body({params}), None", "",
                          "    def f_bwd(res, g):",
                          "        return (" + ", ".join(f"{self.scale * w!r} * g" for w in self.weights) + ")",
                          ""]
            else:
                lines += [f"        return body({params}), ({params},)", "",
                          "    def f_bwd(res, g):",
                          "        cts = backend.vjp(body, *res)[1](g)",
                          f"        return tuple({k}c for c in cts)", ""]
            lines += [f"    f.defvjp(f_fwd, f_bwd{', symbolic_zeros=True' if symbolic else ''}"
                      f"{', optimize_remat=True' if self.optimize_remat else ''})"]
            lines += self._staging_lines(params)
            lines.append("    return f, (f_fwd, f_bwd)")
        return "\n".join(lines) + "\n"

    def _staging_lines(self, params):
        """``f`` rebound to the custom function called through the staging transformation."""
        if self.staging == "jit":
            return ["    f = backend.jit(f)"]
        if self.staging == "checkpoint":
            return ["    f = backend.checkpoint(f)"]
        if self.staging == "cond":
            # a traced predicate, true unless x0 holds a NaN; of no input where the body is
            # linear, as linear_transpose takes only linear uses of its inputs
            pred = "jnp.asarray(True)" if self.weights else "jnp.all(x0 == x0)"
            return ["    custom = f", "",
                    f"    def f({params}):",
                    f"        return lax.cond({pred}, custom, custom, " + params + ")"]
        return []

    def make(self, backend, seen=None):
        """(wrapped function, rule): the rule is f_jvp, or (f_fwd, f_bwd)."""
        return self.function(backend, "make", [] if seen is None else seen)()

    def describe(self):
        shapes = ", ".join(f"{np.asarray(a).dtype}{list(np.shape(a))}" for a in self.args)
        staged = f", called through {self.staging}" if self.staging else ""
        return (f"{self.kind}{' (optimize_remat)' if self.optimize_remat else ''} with a {self.rule} rule (scale {self.scale}"
                f"{', claimed true' if self.claims_true and self.rule == 'scaled' else ''}) around "
                f"{self._body_text()} on ({shapes}), perturbed {self.perturbed}{staged}")

    def _body_text(self):
        if self.weights:
            return f"{self.weights[0]!r} * x0 + {self.weights[1]!r} * x1 (no residual)"
        return repr(self.program.ops)

    def example(self):
        return f"args = {args_literal(self.args)}\nf, rule = make(jax, [])\nprint(f(*args))\n"


@st.composite
def _weighted_sum(draw, dtype):
    """(weights, args) of ``w0 * x0 + w1 * x1``: distinct weights, same-typed inputs."""
    w0 = draw(st.sampled_from(CONSTANTS))
    w1 = draw(st.sampled_from([c for c in CONSTANTS if c != w0]))
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    shape = draw(_arrays.shapes(max_dims=2, max_side=4))
    x = _arrays.arrays(dt, shape, elements=_arrays.elements(dt))
    return (w0, w1), (draw(x), draw(x))


@st.composite
def _wrapper_case(draw, kinds, rules, claims_true, dtype, max_ops):
    kind = draw(st.sampled_from(kinds))
    rule = draw(st.sampled_from(rules))
    scale = 2.0 if rule == "scaled" else 1.0
    # a third of the cases (and the simplest) wrap a weighted sum whose custom_vjp saves no residual
    if draw(st.integers(0, 2)) == 0:
        program, (weights, args) = None, draw(_weighted_sum(dtype))
    else:
        program, weights = draw(random_programs(smooth=True, dtype=dtype, max_ops=max_ops)), ()
        args = tuple(draw(program_args(program)))
    n = len(args)
    perturbed = tuple(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    if not any(perturbed):
        perturbed = (True,) + perturbed[1:]
    claims = rule != "scaled" if claims_true is None else claims_true
    # JAX's optimize_remat takes no symbolic-zero rule
    optimize_remat = kind == "custom_vjp" and rule != "symbolic_zeros" and draw(st.booleans())
    staging = draw(st.sampled_from(STAGINGS))
    return CustomWrapperCase(program, kind, rule, scale, args, perturbed, claims, optimize_remat, weights,
                             staging)


def custom_wrapper_cases(*, kinds=CUSTOM_WRAPPER_KINDS, rules=RULES, claims_true=None, dtype=None,
                         max_ops=4):
    """Draw a :class:`CustomWrapperCase` (smooth programs, and one case in
    three a residual-free weighted sum of two same-typed inputs; called directly or
    through a drawn staging transformation, ``STAGINGS``;
    ``claims_true`` defaults to whether the rule is the derivative, so a law
    told a scaled rule is true must catch it)."""
    bad = [k for k in kinds if k not in CUSTOM_WRAPPER_KINDS] + [r for r in rules if r not in RULES]
    if bad or not kinds or not rules or isinstance(kinds, str) or isinstance(rules, str):
        raise ValueError(f"kinds must come from {CUSTOM_WRAPPER_KINDS} and rules from {RULES}; got "
                         f"{kinds!r}, {rules!r}")
    if claims_true is not None and not isinstance(claims_true, bool):
        raise TypeError(f"claims_true must be a bool or None, got {claims_true!r}")
    return _wrapper_case(tuple(kinds), tuple(rules), claims_true, dtype, max_ops)
