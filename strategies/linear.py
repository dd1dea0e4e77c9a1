"""Linear functions with known transposes, for ``linear_call`` laws.

A :class:`LinearFunction` holds plain NumPy data (a matrix, a scale) and
hands out ``fun``/``transpose`` for a backend, shaped for
``backend.linear_call(fun, transpose, residual_args, linear_args)``: both
take ``(residual_args, linear_args)``. The ``pair`` kind has no residual at
all: its coefficients are Python floats inside ``fun`` and ``transpose``, so
the call's only operands are its two same-typed linear arguments. With ``wrong_transpose=True`` the
transpose is deliberately wrong, for negative tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays
from .backends import check_backend, linear_call_of
from .pytree_strategies import Pair
from .source import Case, tree_literal
from .types import CONSTANTS, FLOAT_DTYPES

#: each kind's ``fun`` and true ``transpose`` of ``(r, x)`` / ``(r, ct)`` as source, formatted
#: with ``k`` (``"2.0 * "`` for the deliberately wrong transpose, else empty) and the pair
#: kind's coefficients ``a``, ``b``
KIND_TEMPLATES = {
    "matvec": ("jnp.matmul(r, x)", "{k}jnp.matmul(jnp.transpose(r), ct)"),
    "scale": ("x * r", "{k}(ct * r)"),
    "pytree": ('(jnp.matmul(r["A"], x.first), r["c"] * x.second["y"])',
               'Pair({k}jnp.matmul(jnp.transpose(r["A"]), ct[0]), {{"y": r["c"] * ct[1]}})'),
    "pair": ("{a!r} * x[0] + {b!r} * x[1]", "({k}{a!r} * ct, {k}{b!r} * ct)"),
}
LINEAR_KINDS = tuple(KIND_TEMPLATES)


@dataclass(frozen=True, repr=False)
class LinearFunction(Case):
    """A linear map ``linear_args -> output`` with residuals and its transpose.

    kinds: ``matvec`` (``A @ x``; transpose ``A.T @ ct``), ``scale``
    (``x * c``), ``pytree`` (``Pair(x, {"y": y}) -> (A @ x, c * y)``),
    ``pair`` (``(x, y) -> a * x + b * y`` with ``coefficients`` ``(a, b)``,
    ``a != b``, and no residual; transpose ``(a * ct, b * ct)``).
    Wrong transposes: the untransposed ``A @ ct`` for a square
    non-symmetric ``A``, otherwise the true transpose times 2.
    """

    kind: str
    residual_args: object
    linear_args: object
    example_cotangent: object
    wrong_transpose: bool = False
    coefficients: tuple[float, ...] = ()  # the pair kind's (a, b)

    label = "linear"
    imports = "import numpy as np\nimport jax  # or: import impl as jax\nfrom strategies import Pair\n"

    @property
    def example_args(self):
        """``(residual_args, linear_args)`` for ``linear_call``."""
        return self.residual_args, self.linear_args

    def fun(self, backend):
        return self.function(backend, "fun")

    def transpose(self, backend):
        return self.function(backend, "fun_transpose")

    def call(self, backend):
        """``lambda linear_args: linear_call(fun, transpose, residual_args, linear_args)``."""
        check_backend(backend)
        lc = linear_call_of(backend)
        fun, transpose, res = self.fun(backend), self.transpose(backend), self.residual_args
        return lambda lin: lc(fun, transpose, res, lin)

    def text(self) -> str:
        """``fun(backend, r, x)`` and ``fun_transpose(backend, r, ct)``."""
        a, b = self.coefficients or (None, None)
        k = "2.0 * " if self.wrong_transpose else ""
        fun, tr = (t.format(k=k, a=a, b=b) for t in KIND_TEMPLATES[self.kind])
        if self.kind == "matvec" and self.wrong_transpose and self._square_nonsymmetric():
            tr = "jnp.matmul(r, ct)"   # forgot to transpose
        wrong = "  # deliberately wrong" if self.wrong_transpose else ""
        return ("from strategies.pytree_strategies import Pair\n\n\n"
                f"def fun(backend, r, x):\n    jnp = backend.numpy\n    return {fun}\n\n\n"
                f"def fun_transpose(backend, r, ct):\n    jnp = backend.numpy\n    return {tr}{wrong}\n")

    def describe(self):
        shapes = lambda t: _tree_shapes(t)  # noqa: E731
        return (f"kind={self.kind!r}, wrong_transpose={self.wrong_transpose}, "
                f"residual_args={self.residual_args!r}, linear_shapes={shapes(self.linear_args)!r}"
                + (f", coefficients={self.coefficients!r}" if self.coefficients else ""))

    def example(self):
        res, lin = self.example_args
        return (f"residual_args = {tree_literal(res)}\nlinear_args = {tree_literal(lin)}\n"
                "print(fun(jax, residual_args, linear_args))\n")

    def _square_nonsymmetric(self):
        a = self.residual_args
        return a.ndim == 2 and a.shape[0] == a.shape[1] and not np.array_equal(a, a.T)


def _tree_shapes(t):
    import jax.tree_util as tu

    return tu.tree_map(np.shape, t)


@st.composite
def _matrix(draw, m, n, dtype, square_nonsymmetric=False):
    flat = draw(st.lists(st.sampled_from(CONSTANTS), min_size=m * n, max_size=m * n))
    a = np.array(flat, dtype=dtype).reshape(m, n)
    if square_nonsymmetric and m == n and m >= 2 and np.array_equal(a, a.T):
        a[0, 1] += 1.0  # make the "forgot to transpose" variant really differ
    return a


def _vec(shape, dtype):
    # Elements of magnitude in [0.5, 2]: no near-zero cotangent can hide a
    # wrong transpose.
    magnitude = _arrays.elements(dtype, min_value=0.5, max_value=2.0)
    signed = st.tuples(magnitude, st.booleans()).map(lambda mb: -mb[0] if mb[1] else mb[0])
    return _arrays.arrays(dtype, shape, elements=signed)


@st.composite
def _linear_function(draw, kinds, wrong, dtype):
    kind = draw(st.sampled_from(kinds))
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    side = st.integers(1, 4)
    if kind == "matvec":
        m, n = draw(side), draw(side)
        a = draw(_matrix(m, n, dt, square_nonsymmetric=wrong))
        return LinearFunction(kind, a, draw(_vec((n,), dt)), draw(_vec((m,), dt)), wrong)
    if kind == "scale":
        c = np.asarray(draw(st.sampled_from(CONSTANTS)), dtype=dt)
        shape = draw(_arrays.shapes(max_dims=2, max_side=4))
        return LinearFunction(kind, c, draw(_vec(shape, dt)), draw(_vec(shape, dt)), wrong)
    if kind == "pair":
        a = draw(st.sampled_from(CONSTANTS))
        b = draw(st.sampled_from([c for c in CONSTANTS if c != a]))
        shape = draw(_arrays.shapes(max_dims=2, max_side=4))
        lin = (draw(_vec(shape, dt)), draw(_vec(shape, dt)))
        return LinearFunction(kind, (), lin, draw(_vec(shape, dt)), wrong, (a, b))
    m, n, k = draw(side), draw(side), draw(side)
    res = {"A": draw(_matrix(m, n, dt)), "c": np.asarray(draw(st.sampled_from(CONSTANTS)), dtype=dt)}
    lin = Pair(draw(_vec((n,), dt)), {"y": draw(_vec((k,), dt))})
    ct = (draw(_vec((m,), dt)), draw(_vec((k,), dt)))
    return LinearFunction(kind, res, lin, ct, wrong)


def linear_functions(*, wrong_transpose=False, kinds=("matvec", "scale"), dtype=None) -> st.SearchStrategy[LinearFunction]:
    """Draw a :class:`LinearFunction`: ``matvec`` and ``scale`` by default,
    ``kinds=LINEAR_KINDS`` adds ``pytree`` (Pair/dict in, tuple out) and
    ``pair`` (two same-typed linear arguments, no residual).

    >>> @given(linear_functions())
    ... def test_linear_call_transpose(lf):
    ...     res, lin = lf.example_args
    ...     f = lf.call(jax)
    ...     (got,) = jax.linear_transpose(f, lin)(lf.example_cotangent)
    ...     want = lf.transpose(jax)(res, lf.example_cotangent)
    ...     # got and want agree leaf by leaf
    """
    if not isinstance(wrong_transpose, bool):
        raise TypeError(f"wrong_transpose must be a bool, got {wrong_transpose!r}")
    if isinstance(kinds, str) or not hasattr(kinds, "__iter__"):
        raise TypeError(f"kinds must be a collection of {LINEAR_KINDS}, got {kinds!r}")
    kinds = tuple(kinds)
    if not kinds or any(k not in LINEAR_KINDS for k in kinds):
        raise ValueError(f"kinds must be a non-empty subset of {LINEAR_KINDS}, got {kinds!r}")
    if dtype is not None:
        dtype = _arrays._check_dtype(dtype).name
        if dtype not in FLOAT_DTYPES:
            raise ValueError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    return _linear_function(kinds, wrong_transpose, dtype)
