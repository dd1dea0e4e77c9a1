"""PRNG programs: drawn keys (raw ``PRNGKey`` or typed ``key``), splits,
``fold_in`` and draws (normal, uniform, bernoulli; on request the rejection
samplers gamma, poisson, binomial and gamma's derivative) combined with a float
input, to be mapped over a batch of split keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays
from .source import Case, array_literal
from .types import FLOAT_DTYPES, OneArrayCase

#: each step's statement, formatted with the step's argument ``arg`` and the operand's
#: ``shape`` and ``dtype``
STEP_TEMPLATES = {
    "split": "key, sub = random.split(key)",
    "fold_in": "key = random.fold_in(key, {arg})",
    "normal": "v = v + random.normal(key, {shape!r}, jnp.{dtype})",
    "uniform": "v = v * random.uniform(key, {shape!r}, jnp.{dtype}, minval=0.5, maxval=1.5)",
    "bernoulli": "v = jnp.where(random.bernoulli(key, {arg!r}, {shape!r}), v, -v)",
}
#: the rejection samplers (and gamma's derivative in its shape, by implicit
#: reparameterization): JAX compiles each in seconds, so they are drawn only on request
#: (``prng_cases(samplers=...)``); the shape parameters come from the value, so that
#: they too are batched once an earlier draw made the value depend on the key
SAMPLER_TEMPLATES = {
    "gamma": "v = v + 0.25 * random.gamma(key, 1.0 + 0.5 * jnp.tanh(v), dtype=jnp.{dtype})",
    "gamma_grad": ("v = v + backend.grad(lambda a: jnp.sum(random.gamma(key, a, dtype=jnp.{dtype})))"
                   "(1.0 + 0.5 * jnp.tanh(v))"),
    "poisson": "v = v + 0.25 * random.poisson(key, {arg!r}, {shape!r}).astype(jnp.{dtype})",
    "binomial": "v = v + 0.25 * random.binomial(key, {arg[0]!r}, {arg[1]!r}, {shape!r}, jnp.{dtype})",
}
#: Poisson means below and above 10, binomial (n, p) with n p below and above 10: each
#: sampler's two algorithms
SAMPLER_ARGS = {"poisson": (3.0, 12.0), "binomial": ((4.0, 0.25), (20.0, 0.75))}
#: the families of sampler cases (a focus names one, see properties.cases.prngs): the
#: samplers each draws, the first of which every case of the family holds
SAMPLER_FAMILIES = {"prng_gamma": ("gamma_grad", "gamma"), "prng_poisson": ("poisson",),
                    "prng_binomial": ("binomial",)}
DRAWS = ("normal", "uniform", "bernoulli") + tuple(SAMPLER_TEMPLATES)


@dataclass(frozen=True, repr=False)
class PRNGCase(OneArrayCase, Case):
    """``program(backend, key, x)``; ``keys(backend)`` makes ``num_keys`` keys
    by splitting the key of ``seed``."""

    seed: int
    num_keys: int
    typed: bool
    steps: tuple[tuple, ...]
    x: np.ndarray

    label = "prng"

    def text(self):
        shape, dt = tuple(self.x.shape), self.x.dtype.name
        lines = ["def program(backend, key, x):", "    jnp, random = backend.numpy, backend.random",
                 "    v = x"]
        for op, *arg in self.steps:
            template = STEP_TEMPLATES.get(op) or SAMPLER_TEMPLATES[op]
            lines.append("    " + template.format(arg=arg[0] if arg else None, shape=shape, dtype=dt))
        lines.append("    return v")
        make = "random.key" if self.typed else "random.PRNGKey"
        lines += ["", "", "def keys(backend):", "    random = backend.random",
                  f"    return random.split({make}({self.seed}), {self.num_keys})"]
        return "\n".join(lines) + "\n"

    def program(self, backend):
        return self.function(backend, "program")

    def keys(self, backend):
        return self.function(backend, "keys")()

    def describe(self):
        return (f"{self.num_keys} keys split from {'key' if self.typed else 'PRNGKey'}({self.seed}), "
                f"steps {list(self.steps)}, x: {self.x.dtype}{list(self.x.shape)}")

    def example(self):
        return (f"x = {array_literal(self.x)}\nks = keys(jax)\n"
                + "print(jax.vmap(lambda k: program(jax, k, x))(ks))\n"
                + "print([program(jax, k, x) for k in ks])\n")


@st.composite
def _prng_case(draw, dtype, max_keys, samplers):
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    shape = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
    steps = []
    kinds = tuple(STEP_TEMPLATES) + samplers
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(kinds))
        if op == "fold_in":
            steps.append((op, draw(st.integers(0, 9))))
        elif op == "bernoulli":
            steps.append((op, draw(st.sampled_from([0.25, 0.5, 0.75]))))
        elif op in SAMPLER_ARGS:
            steps.append((op, draw(st.sampled_from(SAMPLER_ARGS[op]))))
        else:
            steps.append((op,))
    if samplers and not any(s[0] in samplers for s in steps):
        first = samplers[0]
        steps.append((first, SAMPLER_ARGS[first][0]) if first in SAMPLER_ARGS else (first,))
    if not any(s[0] in DRAWS for s in steps):
        steps.append(("normal",))
    return PRNGCase(draw(st.integers(0, 2 ** 16)), draw(st.integers(1, max_keys)), draw(st.booleans()),
                    tuple(steps), draw(_arrays.arrays(dt, shape)))


def prng_cases(*, dtype=None, max_keys=4, samplers=()):
    """Draw a :class:`PRNGCase` (at least one draw; keys raw or typed); ``samplers``:
    rejection samplers (names of :data:`SAMPLER_TEMPLATES`) the steps may use too, at
    least one of them."""
    if not isinstance(max_keys, int) or max_keys < 1:
        raise ValueError(f"max_keys must be a positive int, got {max_keys!r}")
    if dtype is not None and np.dtype(dtype).name not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    samplers = tuple(samplers)
    unknown = [s for s in samplers if s not in SAMPLER_TEMPLATES]
    if unknown:
        raise ValueError(f"unknown samplers {unknown}; choose from {tuple(SAMPLER_TEMPLATES)}")
    return _prng_case(None if dtype is None else np.dtype(dtype).name, max_keys, samplers)
