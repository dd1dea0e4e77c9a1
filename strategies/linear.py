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
from .types import CONSTANTS, FLOAT_DTYPES

LINEAR_KINDS = ("matvec", "scale", "pytree", "pair")


@dataclass(frozen=True, repr=False)
class LinearFunction:
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

    @property
    def example_args(self):
        """``(residual_args, linear_args)`` for ``linear_call``."""
        return self.residual_args, self.linear_args

    def fun(self, backend):
        jnp = backend.numpy
        if self.kind == "matvec":
            return lambda r, x: jnp.matmul(r, x)
        if self.kind == "scale":
            return lambda r, x: x * r
        if self.kind == "pair":
            a, b = self.coefficients
            return lambda r, x: a * x[0] + b * x[1]
        return lambda r, x: (jnp.matmul(r["A"], x.first), r["c"] * x.second["y"])

    def transpose(self, backend):
        jnp = backend.numpy
        k = 2.0 if self.wrong_transpose else 1.0
        if self.kind == "matvec":
            if self.wrong_transpose and self._square_nonsymmetric():
                return lambda r, ct: jnp.matmul(r, ct)  # wrong: forgot to transpose
            return lambda r, ct: k * jnp.matmul(jnp.transpose(r), ct)
        if self.kind == "scale":
            return lambda r, ct: k * (ct * r)
        if self.kind == "pair":
            a, b = self.coefficients
            return lambda r, ct: (k * a * ct, k * b * ct)
        return lambda r, ct: Pair(k * jnp.matmul(jnp.transpose(r["A"]), ct[0]), {"y": r["c"] * ct[1]})

    def call(self, backend):
        """``lambda linear_args: linear_call(fun, transpose, residual_args, linear_args)``."""
        check_backend(backend)
        lc = linear_call_of(backend)
        fun, transpose, res = self.fun(backend), self.transpose(backend), self.residual_args
        return lambda lin: lc(fun, transpose, res, lin)

    def source(self) -> str:
        """Runnable Python defining ``residual_args, linear_args, fun, fun_transpose``."""
        res, lin = self.example_args
        wrong = "  # deliberately wrong" if self.wrong_transpose else ""
        k = "2.0 * " if self.wrong_transpose else ""
        if self.kind == "matvec":
            t = ("jnp.matmul(r, ct)" if self.wrong_transpose and self._square_nonsymmetric()
                 else f"{k}jnp.matmul(jnp.transpose(r), ct)")
            fun, tr = "jnp.matmul(r, x)", t
        elif self.kind == "scale":
            fun, tr = "x * r", f"{k}(ct * r)"
        elif self.kind == "pair":
            a, b = self.coefficients
            fun, tr = f"{a!r} * x[0] + {b!r} * x[1]", f"({k}{a!r} * ct, {k}{b!r} * ct)"
        else:
            fun = '(jnp.matmul(r["A"], x.first), r["c"] * x.second["y"])'
            tr = f'Pair({k}jnp.matmul(jnp.transpose(r["A"]), ct[0]), {{"y": r["c"] * ct[1]}})'
        return (
            "import numpy as np\nimport jax.numpy as jnp  # or impl.numpy\n"
            "from strategies import Pair\n"
            f"residual_args = {_tree_source(res)}\nlinear_args = {_tree_source(lin)}\n"
            f"fun = lambda r, x: {fun}\nfun_transpose = lambda r, ct: {tr}{wrong}\n"
        )

    def _square_nonsymmetric(self):
        a = self.residual_args
        return a.ndim == 2 and a.shape[0] == a.shape[1] and not np.array_equal(a, a.T)

    def __repr__(self):
        shapes = lambda t: _tree_shapes(t)  # noqa: E731
        return (f"LinearFunction(kind={self.kind!r}, wrong_transpose={self.wrong_transpose}, "
                f"residual_args={self.residual_args!r}, linear_shapes={shapes(self.linear_args)!r}"
                + (f", coefficients={self.coefficients!r})" if self.coefficients else ")"))


def _tree_source(t):
    if isinstance(t, np.ndarray):
        return f"np.array({t.tolist()!r}, dtype='{t.dtype}')"
    if isinstance(t, Pair):
        return f"Pair({_tree_source(t.first)}, {_tree_source(t.second)})"
    if isinstance(t, dict):
        return "{" + ", ".join(f"{k!r}: {_tree_source(v)}" for k, v in t.items()) + "}"
    if isinstance(t, tuple):
        return "(" + "".join(f"{_tree_source(v)}, " for v in t).rstrip(" ") + ")"
    return repr(t)


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
