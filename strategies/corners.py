"""Dtype and shape corners: one extra argument ``c`` joined to a drawn program's output.

The vocabulary's programs are float32 or float64 throughout.  A :class:`Corner` adds
what they never draw, where bugs of transformations live: bfloat16 and float16 values,
integers and bools (whose tangents and gradients are ``float0``, ``stop_gradient`` of an
integer), complex values, empty arrays and zero-size axes, scalars, and out-of-bounds
indices in every index mode of ``jnp.take`` and ``x.at[i].get/set/add``.  Its ``expr`` is
the base function's return value over the program's output ``y`` and ``c``; ``out`` its
abstract type, so the transformation stacks above it (``strategies.stacks``) are drawn
valid by construction.

Each corner names what it reaches (``events``: "dtype bfloat16", "shape zero-size axis",
"index take.fill out-of-bounds"), which the laws report as hypothesis events.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from hypothesis import strategies as st


@dataclass(frozen=True)
class Leaf:
    """The abstract type of one array: ``dtype`` is a NumPy name or ``"float0"`` (the
    tangent type of integers and bools)."""
    shape: tuple
    dtype: str

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def rank(self):
        return len(self.shape)

    @property
    def kind(self):
        """'float' (real floating), 'complex', 'int' (integer or bool) or 'float0'."""
        if self.dtype == "float0":
            return "float0"
        k = np.dtype(DTYPES.get(self.dtype, self.dtype)).kind
        return {"f": "float", "V": "float", "c": "complex"}.get(k, "int")


#: dtypes NumPy does not name: ml_dtypes' (JAX's own bfloat16)
DTYPES = {"bfloat16": ml_dtypes.bfloat16}


def np_dtype(name):
    return np.dtype(DTYPES.get(name, name))


def leaves(tree):
    """The leaves of an abstract tree (a Leaf or nested tuples of them), in order."""
    if isinstance(tree, Leaf):
        return [tree]
    return [leaf for t in tree for leaf in leaves(t)]


def literal(a) -> str:
    """Source of a corner argument (bfloat16 through float32, which holds it exactly)."""
    a = np.asarray(a)
    if a.dtype == np_dtype("bfloat16"):
        return (f"np.array({a.astype(np.float32).tolist()!r}, dtype='float32')"
                f".reshape({a.shape!r}).astype(ml_dtypes.bfloat16)")
    return f"np.array({a.tolist()!r}, dtype='{a.dtype}').reshape({a.shape!r})"


@dataclass(frozen=True)
class Corner:
    """The base function returns ``expr`` (over ``y``, the program's output, and the
    argument ``c``); ``out`` is its abstract type."""
    name: str
    arg: np.ndarray
    expr: str
    out: object
    events: tuple

    @property
    def arg_type(self):
        return Leaf(tuple(self.arg.shape), "bfloat16" if self.arg.dtype == np_dtype("bfloat16")
                    else self.arg.dtype.name)


def _values(draw, shape, dtype, lo=-2.0, hi=2.0):
    """An array of ``shape``; floats on a grid of 1/8 (exact in bfloat16 and float16)."""
    n = int(np.prod(shape, dtype=np.int64))
    dt = np_dtype(dtype)
    if dt.kind == "b":
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool).reshape(shape)
    if dt.kind in "iu":
        lo_i = 0 if dt.kind == "u" else -3
        return np.array(draw(st.lists(st.integers(lo_i, 3), min_size=n, max_size=n)), dtype=dt).reshape(shape)
    grid = st.integers(int(lo * 8), int(hi * 8)).map(lambda k: k / 8)
    re = np.array(draw(st.lists(grid, min_size=n, max_size=n)), dtype=np.float64).reshape(shape)
    if dt.kind == "c":
        im = np.array(draw(st.lists(grid, min_size=n, max_size=n)), dtype=np.float64).reshape(shape)
        return (re + 1j * im).astype(dt)
    return re.astype(dt)


LOW_PRECISION = ("bfloat16", "float16")
INTEGERS = ("int32", "int8", "uint8", "bool")
COMPLEX = ("complex64", "complex128")
#: index modes: jnp.take's (its 'raise' is refused under jit: not drawn), gather's and scatter's
TAKE_MODES = ("fill", "clip", "wrap")
GET_MODES = ("fill", "clip", "promise_in_bounds")
SCATTER_MODES = ("drop", "clip", "promise_in_bounds")
#: the corner kinds, in shrinking order (the simplest first)
KINDS = ("scalar", "low_precision_in", "low_precision_out", "integer", "complex_in", "complex_out",
         "empty", "take", "get", "scatter")


def _indices(draw, m, mode):
    """Constant indices into a length-``m`` axis: in bounds (negative ones too) and, unless
    the mode promises them in bounds, out of bounds on either side."""
    inb = st.integers(-m, m - 1)
    k = draw(st.integers(1, 4))
    if mode == "promise_in_bounds":
        return draw(st.lists(inb, min_size=k, max_size=k)), False
    idx = draw(st.lists(st.one_of(inb, st.integers(m, 2 * m + 2), st.integers(-2 * m - 2, -m - 1)),
                        min_size=k, max_size=k))
    return idx, any(not -m <= i < m for i in idx)


def _unique_positions(idx, m):
    """True when the in-bounds indices name distinct positions (a set is deterministic)."""
    pos = [i % m for i in idx if -m <= i < m]
    return len(pos) == len(set(pos))


def _unnan(expr):
    """``expr`` with its NaNs (the default fill of mode 'fill') replaced: a NaN would make
    every derivative above it NaN, and the comparisons vacuous."""
    return f"jnp.where(jnp.isnan({expr}), -3.0, {expr})"


@st.composite
def corners(draw, y: Leaf, kinds=KINDS):
    """A :class:`Corner` for a program whose output has type ``y``."""
    kind = draw(st.sampled_from(kinds))
    S, P = y.shape, y.dtype
    if kind == "scalar":
        c = _values(draw, (), P)
        return Corner("scalar", c, "y * c", Leaf(S, P), ("shape scalar",))
    if kind in ("low_precision_in", "low_precision_out"):
        dt = draw(st.sampled_from(LOW_PRECISION))
        c = _values(draw, S, dt)
        if kind == "low_precision_in":
            return Corner(f"{dt} in", c, "y + c.astype(y.dtype)", Leaf(S, P), (f"dtype {dt}",))
        return Corner(f"{dt} out", c, "y.astype(c.dtype) * c", Leaf(S, dt), (f"dtype {dt}",))
    if kind == "integer":
        dt = draw(st.sampled_from(INTEGERS))
        c = _values(draw, S, dt)
        if dt == "bool":
            return Corner("bool", c, "jnp.where(c, y, -y)", Leaf(S, P), ("dtype bool",))
        if draw(st.booleans()):
            return Corner(f"{dt} stopped", c, "y * lax.stop_gradient(c).astype(y.dtype)", Leaf(S, P),
                          (f"dtype {dt}", "param lax.stop_gradient.x"))
        return Corner(dt, c, "y * c.astype(y.dtype)", Leaf(S, P), (f"dtype {dt}",))
    if kind in ("complex_in", "complex_out"):
        dt = draw(st.sampled_from(COMPLEX))
        c = _values(draw, S, dt, -1.0, 1.0)
        if kind == "complex_in":
            real = "float32" if dt == "complex64" else "float64"
            return Corner(f"{dt} in", c, "jnp.real(c * y.astype(c.dtype))", Leaf(S, real),
                          (f"dtype {dt}",))
        return Corner(f"{dt} out", c, "c * y.astype(c.dtype)", Leaf(S, dt), (f"dtype {dt}", "complex output"))
    if kind == "empty":
        shape = draw(st.sampled_from([(0,), (2, 0), (0, 3)]))
        c = _values(draw, shape, P)
        return Corner(f"empty {shape}", c, "(y, jnp.sin(c) * 2.0)", (Leaf(S, P), Leaf(shape, P)),
                      ("shape zero-size axis" if len(shape) > 1 else "shape empty array",))
    m = draw(st.integers(1, 4))
    c = _values(draw, (m,), P)
    if kind == "take":
        mode = draw(st.sampled_from(TAKE_MODES))
        idx, oob = _indices(draw, m, mode)
        fill = ", fill_value=-1.5" if mode == "fill" and draw(st.booleans()) else ""
        taken = f"jnp.take(c, jnp.asarray({idx!r}, jnp.int32), mode={mode!r}{fill})"
        expr = f"(y, {_unnan(taken)} * jnp.sum(y))"
        return Corner(f"take {mode}", c, expr, (Leaf(S, P), Leaf((len(idx),), P)),
                      (f"index take.{mode}" + (" out-of-bounds" if oob else " in-bounds"),))
    if kind == "get":
        mode = draw(st.sampled_from(GET_MODES))
        idx, oob = _indices(draw, m, mode)
        fill = ", fill_value=2.5" if mode == "fill" and draw(st.booleans()) else ""
        got = f"jnp.asarray(c).at[jnp.asarray({idx!r}, jnp.int32)].get(mode={mode!r}{fill})"
        expr = f"(y, {_unnan(got)} * jnp.sum(y))"
        return Corner(f"at.get {mode}", c, expr, (Leaf(S, P), Leaf((len(idx),), P)),
                      (f"index at.get.{mode}" + (" out-of-bounds" if oob else " in-bounds"),))
    mode = draw(st.sampled_from(SCATTER_MODES))
    idx, oob = _indices(draw, m, mode)
    # set only where the written positions are distinct (else which write wins is unspecified)
    how = "set" if mode != "clip" and _unique_positions(idx, m) and draw(st.booleans()) else "add"
    expr = (f"(y, jnp.asarray(c).at[jnp.asarray({idx!r}, jnp.int32)].{how}(jnp.sum(y) * 0.5, mode={mode!r}))")
    return Corner(f"at.{how} {mode}", c, expr, (Leaf(S, P), Leaf((m,), P)),
                  (f"index at.{how}.{mode}" + (" out-of-bounds" if oob else " in-bounds"),))
