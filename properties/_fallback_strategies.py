"""Private stand-in for the ``strategies`` package's contract.

Used only while ``strategies`` lacks a name the laws need (see cases.py).
Programs are straight-line: inputs share one shape, every op preserves it,
and the result is the last value.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

# name -> (arity, smooth, linear, source template); ``np_`` is the numpy
# namespace of the backend, a/b are operands.
OPS = {
    "sin": (1, True, False, "np_.sin({a})"),
    "cos": (1, True, False, "np_.cos({a})"),
    "tanh": (1, True, False, "np_.tanh({a})"),
    "square": (1, True, False, "{a} * {a}"),
    "log1p_sq": (1, True, False, "np_.log1p({a} * {a})"),
    "sqrt1p_sq": (1, True, False, "np_.sqrt(1.0 + {a} * {a})"),
    "sigmoid": (1, True, False, "1.0 / (1.0 + np_.exp(-{a}))"),
    "neg": (1, True, True, "-{a}"),
    "scale": (1, True, True, "0.5 * {a}"),
    "cumsum": (1, True, True, "np_.cumsum({a}, axis=-1)"),
    "flip": (1, True, True, "np_.flip({a}, axis=-1)"),
    "center": (1, True, True, "{a} - np_.mean({a}, axis=-1, keepdims=True)"),
    "abs": (1, False, False, "np_.abs({a})"),
    "relu": (1, False, False, "np_.maximum({a}, 0.0)"),
    "add": (2, True, True, "{a} + {b}"),
    "sub": (2, True, True, "{a} - {b}"),
    "mul": (2, True, False, "{a} * {b}"),
    "mul_sin": (2, True, False, "{a} * np_.sin({b})"),
    "matmul": (2, True, False, "np_.matmul({a}, {b})"),
}


class Program:
    """A straight-line program over arrays of one shape."""

    def __init__(self, num_inputs, ops):
        self.num_inputs = num_inputs
        self.ops = list(ops)  # (name, (operand indices))

    def _lines(self, np_name):
        lines = []
        for i, (name, operands) in enumerate(self.ops):
            names = [f"v{j}" for j in operands]
            expr = OPS[name][3].replace("np_", np_name).format(
                a=names[0], b=names[1] if len(names) > 1 else None)
            lines.append(f"v{self.num_inputs + i} = {expr}")
        return lines

    def _params(self):
        return ", ".join(f"v{i}" for i in range(self.num_inputs))

    def build(self, backend):
        """Callable running the program with ``backend.numpy``."""
        body = "\n".join("    " + line for line in self._lines("np_"))
        last = self.num_inputs + len(self.ops) - 1
        src = f"def program({self._params()}):\n{body}\n    return v{last}\n"
        scope = {"np_": backend.numpy}
        exec(compile(src, "<program>", "exec"), scope)
        return scope["program"]

    def source(self):
        """Runnable source defining ``f`` with jax.numpy."""
        body = "\n".join("    " + line for line in self._lines("jnp"))
        last = self.num_inputs + len(self.ops) - 1
        return (f"import jax.numpy as jnp\n\ndef f({self._params()}):\n{body}\n"
                f"    return v{last}\n")

    def __repr__(self):
        return f"Program({' -> '.join(name for name, _ in self.ops)})"


SHAPES = [(3,), (2, 3), (3, 3), (1,), (4,)]


@st.composite
def _programs(draw, smooth, linear, min_ops, max_ops, num_inputs, shape):
    allowed = [n for n, (ar, sm, li, _) in OPS.items()
               if (sm or not smooth) and (li or not linear)
               and (n != "matmul" or (len(shape) == 2 and shape[0] == shape[1]))]
    n_in = num_inputs or draw(st.integers(1, 3))
    n_ops = draw(st.integers(min_ops, max_ops))
    ops = []
    for i in range(n_ops):
        name = draw(st.sampled_from(sorted(allowed)))
        arity = OPS[name][0]
        latest = n_in + i - 1
        if arity == 1:
            operands = (latest,)
        else:
            other = draw(st.integers(0, latest))
            operands = (latest, other)
        ops.append((name, operands))
    # every input should reach the output: fold unused inputs in with "add"
    used = {j for _, ops_ in ops for j in ops_}
    for j in range(n_in):
        if j not in used:
            ops.append(("add", (n_in + len(ops) - 1, j)))
    return Program(n_in, ops)


def arrays(dtype, shape, lo=-2.0, hi=2.0):
    """Finite arrays of moderate magnitude."""
    elements = st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=64)
    return st.lists(elements, min_size=int(np.prod(shape)),
                    max_size=int(np.prod(shape))).map(
        lambda xs: np.asarray(xs, dtype=np.float64).astype(dtype).reshape(shape))


@st.composite
def program_cases(draw, *, smooth=False, linear=False, custom_rules=False,
                  wrong_rules=False, dtype=None, min_ops=1, max_ops=8, num_inputs=None,
                  shape=None):
    """(program, args) with args a tuple of numpy arrays."""
    dt = np.dtype(dtype) if dtype is not None else np.dtype(
        draw(st.sampled_from(["float32", "float64"])))
    shp = shape if shape is not None else draw(st.sampled_from(SHAPES))
    program = draw(_programs(smooth, linear, min_ops, max_ops, num_inputs, shp))
    args = tuple(draw(arrays(dt, shp)) for _ in range(program.num_inputs))
    return program, args


def _insert_batch(draw, x, axis, size, dtype):
    """Batched version of example ``x`` with a batch of ``size`` at ``axis``."""
    shape = list(x.shape)
    shape.insert(axis, size)
    return draw(arrays(dtype, tuple(shape)))


@st.composite
def vmap_cases(draw, *, smooth=False, dtype=None, max_ops=6):
    """(program, args, in_axes, out_axes, axis_size); args batched per in_axes."""
    program, example = draw(program_cases(smooth=smooth, dtype=dtype, max_ops=max_ops))
    size = draw(st.integers(1, 4))
    in_axes, args = [], []
    for x in example:
        axis = draw(st.one_of(st.none(), st.integers(-(x.ndim + 1), x.ndim)))
        in_axes.append(axis)
        if axis is None:
            args.append(x)
        else:
            pos = axis if axis >= 0 else axis + x.ndim + 1
            args.append(_insert_batch(draw, x, pos, size, x.dtype))
    if all(a is None for a in in_axes):
        in_axes[0] = 0
        args[0] = _insert_batch(draw, example[0], 0, size, example[0].dtype)
    out_ndim = example[0].ndim  # ops preserve shape
    out_axes = draw(st.integers(-(out_ndim + 1), out_ndim))
    return program, tuple(args), tuple(in_axes), out_axes, size


@st.composite
def nested_vmap_cases(draw, *, smooth=False, dtype=None, max_ops=5):
    """(program, args, (outer_in_axes, inner_in_axes), (outer_out, inner_out), (outer_size, inner_size)).

    Inner and outer axes index each level's own view of the arrays.
    """
    program, example = draw(program_cases(smooth=smooth, dtype=dtype, max_ops=max_ops))
    sizes = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    inner_axes, outer_axes, args = [], [], []
    for x in example:
        inner = draw(st.one_of(st.none(), st.integers(0, x.ndim)))
        mid = x if inner is None else _insert_batch(draw, x, inner, sizes[1], x.dtype)
        outer = draw(st.one_of(st.none(), st.integers(0, mid.ndim)))
        full = mid if outer is None else _insert_batch(draw, mid, outer, sizes[0], x.dtype)
        inner_axes.append(inner)
        outer_axes.append(outer)
        args.append(full)
    if all(a is None for a in inner_axes):
        inner_axes[0] = 0
        mid = _insert_batch(draw, example[0], 0, sizes[1], example[0].dtype)
        outer_axes[0] = 0
        args[0] = _insert_batch(draw, mid, 0, sizes[0], example[0].dtype)
    if all(a is None for a in outer_axes):
        x = args[0]
        outer_axes[0] = 0
        args[0] = _insert_batch(draw, x, 0, sizes[0], x.dtype)
    out_ndim = example[0].ndim
    inner_out = draw(st.integers(0, out_ndim))
    outer_out = draw(st.integers(0, out_ndim + 1))
    return (program, tuple(args), (tuple(outer_axes), tuple(inner_axes)),
            (outer_out, inner_out), sizes)


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
