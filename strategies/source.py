"""One printer and one builder for every drawn case.

Each case is plain data (the ops, bodies, axes and constants that were drawn) whose
``text()`` prints it as Python definitions taking a ``backend`` first. This module
turns that text into runnable functions for any backend (:meth:`Case.function`, the
one builder: the text is compiled once and registered with ``linecache``, so
tracebacks and ``inspect`` show it) and prints a case as one runnable module
(:meth:`Case.source`: imports, definitions, the drawn arguments, the calls that
reproduce it). So what a failure report shows is exactly what ran. (A control-flow
case builds its functions from its graph instead; its printed module computes the
same, which tests/test_strategies.py checks.)
"""

from __future__ import annotations

import functools
import linecache

import numpy as np

from .backends import check_backend
from .pytree_strategies import Pair

#: the imports of a reproducing module
IMPORTS = "import numpy as np\nimport jax  # or: import impl as jax\n"


def array_literal(a) -> str:
    """``np.array(...)`` source for ``a``, keeping the shape of empty arrays."""
    a = np.asarray(a)
    text = f"np.array({a.tolist()!r}, dtype='{a.dtype}')"
    return text + f".reshape({a.shape!r})" if a.size == 0 and a.ndim != 1 else text


def args_literal(args) -> str:
    """``(a0, a1, ...)`` source for a tuple of arrays."""
    return "(" + ", ".join(array_literal(a) for a in args) + ",)"


def tree_literal(tree) -> str:
    """Source of a pytree of numpy arrays (tuples, lists, dicts, ``Point``, ``Pair``, None)."""
    if isinstance(tree, Pair):
        return f"Pair({tree_literal(tree.first)}, {tree_literal(tree.second)})"
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return f"{type(tree).__name__}(" + ", ".join(tree_literal(c) for c in tree) + ")"
    if isinstance(tree, tuple):
        return "(" + "".join(f"{tree_literal(c)}, " for c in tree).rstrip(" ") + ")"
    if isinstance(tree, list):
        return "[" + ", ".join(tree_literal(c) for c in tree) + "]"
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k!r}: {tree_literal(v)}" for k, v in tree.items()) + "}"
    return "None" if tree is None else array_literal(tree)


@functools.lru_cache(maxsize=512)
def compile_text(text: str, label: str) -> dict:
    """The namespace ``text`` defines, compiled once per text."""
    filename = f"<strategies.{label} {abs(hash(text)):x}>"
    # Registering the text lets tracebacks and inspect show the program.
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(text, filename, "exec"), namespace)
    return namespace


def embed(program, name: str, tags=()) -> list[str]:
    """A drawn :class:`~strategies.programs.Program` as a nested function
    ``name(x0, x1, ...)`` (4-space indented) of an enclosing ``f(backend, ...)`` that
    has set ``jnp`` and ``lax``; ``tags``: ``(node, tag)`` pairs whose values are
    wrapped in ``checkpoint_name(value, tag)``."""
    params = ", ".join(f"x{i}" for i in range(program.num_inputs))
    return [f"    def {name}({params}):"] + ["    " + ln for ln in program.body_lines(tags)]


class Case:
    """What every drawn case shares: its data prints as definitions (``text()``), which
    build into functions for a backend (``function``) and, with the drawn arguments and
    the calls of ``example()``, into one runnable module (``source()``).

    A subclass sets ``label`` and defines ``text()``, ``describe()`` (one line) and
    ``example()`` (the lines after the definitions); ``imports`` when it needs more.
    """

    label = "case"
    imports = IMPORTS

    def text(self) -> str:  # pragma: no cover - every case defines it
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover
        raise NotImplementedError

    def example(self) -> str:  # pragma: no cover
        raise NotImplementedError

    def function(self, backend, name: str, *bound):
        """The function ``name`` of ``text()`` with ``backend`` (and ``bound``) as its
        first arguments."""
        check_backend(backend)
        return functools.partial(compile_text(self.text(), self.label)[name], backend, *bound)

    def source(self) -> str:
        """The case as one runnable module: imports, definitions, arguments and calls."""
        return self.imports + "\n" + self.text() + "\n" + self.example()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()}):\n{self.text()}"
