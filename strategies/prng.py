"""PRNG programs: drawn keys (raw ``PRNGKey`` or typed ``key``), splits,
``fold_in`` and draws (normal, uniform, bernoulli) combined with a float
input, to be mapped over a batch of split keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays
from .backends import check_backend
from .types import FLOAT_DTYPES, OneArrayCase

DRAWS = ("normal", "uniform", "bernoulli")


@dataclass(frozen=True, repr=False)
class PRNGCase(OneArrayCase):
    """``program(backend, key, x)``; ``keys(backend)`` makes ``num_keys`` keys
    by splitting the key of ``seed``."""

    seed: int
    num_keys: int
    typed: bool
    steps: tuple[tuple, ...]
    x: np.ndarray

    def text(self):
        shape, dt = tuple(self.x.shape), self.x.dtype.name
        lines = ["def program(backend, key, x):", "    jnp, random = backend.numpy, backend.random",
                 "    v = x"]
        for step in self.steps:
            op = step[0]
            if op == "split":
                lines.append("    key, sub = random.split(key)")
            elif op == "fold_in":
                lines.append(f"    key = random.fold_in(key, {step[1]})")
            elif op == "normal":
                lines.append(f"    v = v + random.normal(key, {shape!r}, jnp.{dt})")
            elif op == "uniform":
                lines.append(f"    v = v * random.uniform(key, {shape!r}, jnp.{dt}, minval=0.5, maxval=1.5)")
            elif op == "bernoulli":
                lines.append(f"    v = jnp.where(random.bernoulli(key, {step[1]!r}, {shape!r}), v, -v)")
        lines.append("    return v")
        make = "random.key" if self.typed else "random.PRNGKey"
        lines += ["", "", "def keys(backend):", "    random = backend.random",
                  f"    return random.split({make}({self.seed}), {self.num_keys})"]
        return "\n".join(lines) + "\n"

    def _namespace(self, backend):
        check_backend(backend)
        namespace: dict = {}
        exec(compile(self.text(), "<strategies.prng>", "exec"), namespace)
        return namespace

    def program(self, backend):
        fn = self._namespace(backend)["program"]
        return lambda key, x: fn(backend, key, x)

    def keys(self, backend):
        return self._namespace(backend)["keys"](backend)

    def describe(self):
        return (f"{self.num_keys} keys split from {'key' if self.typed else 'PRNGKey'}({self.seed}), "
                f"steps {list(self.steps)}, x: {self.x.dtype}{list(self.x.shape)}")

    def source(self):
        from .control import array_literal
        return ("import numpy as np\nimport jax  # or: import impl as jax\n\n" + self.text()
                + f"\nx = {array_literal(self.x)}\nks = keys(jax)\n"
                + "print(jax.vmap(lambda k: program(jax, k, x))(ks))\n"
                + "print([program(jax, k, x) for k in ks])\n")

    def __repr__(self):
        return f"PRNGCase({self.describe()}):\n{self.text()}"


@st.composite
def _prng_case(draw, dtype, max_keys):
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    shape = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(("split", "fold_in") + DRAWS))
        if op == "fold_in":
            steps.append((op, draw(st.integers(0, 9))))
        elif op == "bernoulli":
            steps.append((op, draw(st.sampled_from([0.25, 0.5, 0.75]))))
        else:
            steps.append((op,))
    if not any(s[0] in DRAWS for s in steps):
        steps.append(("normal",))
    return PRNGCase(draw(st.integers(0, 2 ** 16)), draw(st.integers(1, max_keys)), draw(st.booleans()),
                    tuple(steps), draw(_arrays.arrays(dt, shape)))


def prng_cases(*, dtype=None, max_keys=4):
    """Draw a :class:`PRNGCase` (at least one draw; keys raw or typed)."""
    if not isinstance(max_keys, int) or max_keys < 1:
        raise ValueError(f"max_keys must be a positive int, got {max_keys!r}")
    if dtype is not None and np.dtype(dtype).name not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    return _prng_case(None if dtype is None else np.dtype(dtype).name, max_keys)
