"""Private stand-in for names the ``strategies`` package does not have yet.

Only ``linear_functions`` is still needed (see cases.py); delete this module
once strategies provides it.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

def arrays(dtype, shape, lo=-2.0, hi=2.0):
    """Finite arrays of moderate magnitude."""
    elements = st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=64)
    return st.lists(elements, min_size=int(np.prod(shape)),
                    max_size=int(np.prod(shape))).map(
        lambda xs: np.asarray(xs, dtype=np.float64).astype(dtype).reshape(shape))


class LinearFunction:
    """A linear map ``x -> A @ (r * x)`` with residuals (A, r) and its transpose."""

    def __init__(self, A, r, x, wrong_transpose=False):
        self.A, self.r = A, r
        self.example_args = ((A, r), x)
        self.wrong_transpose = wrong_transpose

    def fun(self, backend):
        np_ = backend.numpy

        def fun(res, x):
            A, r = res
            return np_.matmul(A, r * x)
        return fun

    def transpose(self, backend):
        np_ = backend.numpy
        if self.wrong_transpose:
            def wrong(res, ct):
                A, r = res
                # "the transpose is the function itself" (A is square here)
                return np_.matmul(A, r * ct)
            return wrong

        def transpose(res, ct):
            A, r = res
            return r * np_.matmul(np_.transpose(A), ct)
        return transpose

    def source(self):
        (A, r), x = self.example_args
        t = ("lambda A, r, ct: A @ (r * ct)  # wrong: the function itself" if self.wrong_transpose
             else "lambda A, r, ct: r * (A.T @ ct)")
        return (f"import numpy as np\nA = np.array({A.tolist()!r}, dtype='{A.dtype}')\n"
                f"r = np.array({r.tolist()!r}, dtype='{r.dtype}')\n"
                f"x = np.array({x.tolist()!r}, dtype='{x.dtype}')\n"
                f"fun = lambda res, x: res[0] @ (res[1] * x)\nfun_transpose = {t}\n")


@st.composite
def linear_functions(draw, wrong_transpose=False, dtype=None):
    dt = np.dtype(dtype) if dtype is not None else np.dtype(
        draw(st.sampled_from(["float32", "float64"])))
    n = draw(st.integers(1, 4))
    m = n if wrong_transpose else draw(st.integers(1, 4))
    A = draw(arrays(dt, (m, n)))
    r = draw(arrays(dt, (n,), 0.5, 2.0))
    x = draw(arrays(dt, (n,)))
    return LinearFunction(A, r, x, wrong_transpose)
