"""Control-flow programs: lax.scan, fori_loop, while_loop, cond, switch and map
whose bodies are drawn programs and whose carries and operands are pytrees.

A :class:`ControlFlowCase` prints as one runnable module: ``make_step``
defines the drawn bodies (straight-line :class:`~strategies.programs.Program`
objects) and the step or branch functions around them; ``program`` calls the
control-flow primitive; ``reference`` is its meaning in plain Python (a
``for``/``while`` loop, an ``if``, a list index), calling the *same* step
functions. Both are built for any backend (``jax``, ``impl``).

Every new carry leaf is ``0.5 * c + 0.5 * tanh(fit(v))``, where ``v`` is the
body's output and ``fit`` a constant matrix mapping it to the leaf's shape:
carries stay in [-2, 2] however many iterations run, the body's domain, and
every leaf depends on every body input (derivatives flow through all of it).

Loops (scan, fori_loop, while_loop) sometimes *close over* two more program
inputs ``k0`` and ``k1`` (``make_step(backend, k0, k1)``), shaped like the
first carry leaf: the step starts with ``c0 = 0.75 * c0 + 0.25 * tanh(c0 + k0
- 0.5 * k1)``, so the loop primitive's two leading constant operands are
differentiated inputs of one type, and a rule that mixes up their tangents
or cotangents changes the result. In those loops the fits use no constant
matrix (``tanh(w * sum(v))``) and the while_loop's trip count rides in the
loop state: the linearized loop then has no constant residual operand ahead
of ``k0`` and ``k1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays
from .programs import Program, random_programs
from .source import Case, array_literal, embed
from .types import CONSTANTS, FLOAT_DTYPES

CONTROL_KINDS = ("scan", "fori_loop", "while_loop", "cond", "switch", "map")
#: kinds JAX can differentiate in reverse mode (while_loop is forward-only)
REVERSE_KINDS = ("scan", "fori_loop", "cond", "switch", "map")
#: at most this many elements of a body's output feed the fit matrices
FIT_WIDTH = 6
MAX_TRIPS = 4


# ------------------------------------------------------------------ the case as data


def tree_text(tree, leaf) -> str:
    """A carry pytree (tuples and dicts of leaf indices) as Python source, each leaf
    ``i`` written as ``leaf(i)``."""
    if isinstance(tree, int):
        return leaf(tree)
    if isinstance(tree, dict):
        return "{" + ", ".join(f'"{k}": {tree_text(v, leaf)}' for k, v in tree.items()) + "}"
    return "(" + ", ".join(tree_text(v, leaf) for v in tree) + ("," if len(tree) == 1 else "") + ")"


def _tree_paths(tree, path=""):
    """``{leaf index: access path}`` of a carry pytree, e.g. ``{0: '[0]', 1: '[1]["a"]'}``."""
    if isinstance(tree, int):
        return {tree: path}
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    out = {}
    for k, v in items:
        out.update(_tree_paths(v, f'{path}["{k}"]' if isinstance(tree, dict) else f"{path}[{k}]"))
    return out


@dataclass(frozen=True)
class Fit:
    """A body's output ``v`` mapped to one carry leaf or output of shape ``shape``, with
    its pre-activation in [-2, 2]: ``tanh(flat . matrix * scale)`` (``flat``: the first
    elements of v), or with ``matrix`` None ``tanh(weight * sum(flat))`` broadcast."""

    shape: tuple[int, ...]
    dtype: str
    matrix: tuple | None = None
    scale: float = 1.0
    weight: float = 0.0

    def expr(self) -> str:
        if self.matrix is None:
            return f"jnp.tanh(jnp.broadcast_to({self.weight!r} * jnp.sum(flat), {self.shape!r}))"
        scaled = "" if self.scale == 1.0 else f" * {self.scale!r}"
        m = f"jnp.asarray({[list(r) for r in self.matrix]!r}, jnp.{self.dtype}){scaled}"
        return f"jnp.tanh(jnp.reshape(jnp.matmul(flat, {m}), {self.shape!r}))"


def _fit(draw, program: Program, shape, dtype):
    """tanh(constant matrix . first elements of v), shaped ``shape``, pre-activation in [-2, 2]."""
    k = min(math.prod(program.output_type[0]), FIT_WIDTH)
    n = math.prod(shape)
    flat = draw(st.lists(st.sampled_from(CONSTANTS), min_size=k * n, max_size=k * n))
    matrix = np.array(flat).reshape(k, n)
    lo, hi = program.output_bounds
    raw = max(abs(lo), abs(hi), 1e-9) * float(np.max(np.sum(np.abs(matrix), axis=0)))
    scale = 2.0 ** -max(0, math.ceil(math.log2(raw / 2.0)))
    return Fit(tuple(shape), dtype, tuple(map(tuple, matrix.tolist())), scale)


def _sum_fit(draw, program: Program, shape, dtype):
    """tanh(w * sum of the first elements of v), broadcast to ``shape``: no constant
    array, so a linearized loop body needs no constant residual."""
    k = min(math.prod(program.output_type[0]), FIT_WIDTH)
    w = draw(st.sampled_from(CONSTANTS))
    lo, hi = program.output_bounds
    raw = max(abs(lo), abs(hi), 1e-9) * abs(w) * max(k, 1)
    w *= 2.0 ** -max(0, math.ceil(math.log2(raw / 2.0)))
    return Fit(tuple(shape), dtype, weight=w)


@dataclass(frozen=True, repr=False)
class ControlFlowCase(Case):
    """A control-flow program, its Python meaning, and arguments.

    The drawn data: ``kind``, the carry pytree ``carry`` (tuples and dicts of leaf
    indices) with leaf shapes ``carry_shapes``, the per-iteration inputs' shapes
    ``x_shapes`` (scan, map) and their ``length``, the ``bodies`` (one per branch), the ``fits`` of each body
    (one per carry leaf: how its output becomes the new carry) and ``out_fit`` (scan's
    and map's per-iteration output), ``closure`` (loops closing over k0, k1) and
    ``params`` (length, reverse, unroll, bounds, batch_size).

    ``args`` are numpy arrays, one per parameter in ``arg_names``; the float
    ones (``float_argnums``) are the differentiable inputs. ``batch`` holds a
    batch of every argument (axis 0, ``batch_size`` examples, each slice
    distinct) for vmap laws: predicates, indices and trip counts are batched
    too, so under vmap a cond sees a batched predicate and a while_loop
    batched trip counts.
    """

    kind: str
    carry: object
    carry_shapes: tuple
    x_shapes: tuple
    length: int
    bodies: tuple[Program, ...]
    fits: tuple[tuple[Fit, ...], ...]
    out_fit: Fit | None
    closure: bool
    params: tuple
    arg_names: tuple[str, ...]
    args: tuple
    float_argnums: tuple[int, ...]
    batch: tuple
    batch_size: int

    label = "control"

    @property
    def dtype(self):
        return np.dtype(self.bodies[0].dtype)

    def build(self, backend):
        """``program`` for ``backend``: the control-flow primitive, args positional."""
        return self.function(backend, "program")

    def reference(self, backend):
        """``reference`` for ``backend``: the same steps in a Python loop or branch."""
        return self.function(backend, "reference")

    def describe(self):
        shapes = ", ".join(f"{n}: {np.asarray(a).dtype}{list(np.shape(a))}" for n, a in zip(self.arg_names, self.args))
        return f"{self.kind} {dict(self.params)} on ({shapes}), bodies {[b.ops for b in self.bodies]}"

    def example(self):
        args = "\n".join(f"{n} = {array_literal(a)}" for n, a in zip(self.arg_names, self.args))
        names = ", ".join(self.arg_names)
        return "\n" + args + f"\nprint(program(jax, {names}))\nprint(reference(jax, {names}))\n"

    def __repr__(self):
        return f"ControlFlowCase(kind={self.kind!r}, params={dict(self.params)!r}):\n{self.text()}"

    # ---- the printer
    def text(self):
        kind, p = self.kind, dict(self.params)
        dt = self.bodies[0].dtype
        closed = ", k0, k1" if self.closure else ""
        init = tree_text(self.carry, lambda i: f"c{i}")
        lines = [f"def make_step(backend{closed}):", "    jnp, lax = backend.numpy, backend.lax", ""]
        lines += self._map_step() if kind == "map" else self._steps()
        call, ref = _CALLS[kind](self, p, init, dt)
        getter = "branches" if kind in ("cond", "switch") else "step"
        names = ", ".join(self.arg_names)
        return ("\n".join(lines) + "\n\n\n"
                + f"def program(backend, {names}):\n    {getter} = make_step(backend{closed})\n{call}\n\n\n"
                + f"def reference(backend, {names}):\n    {getter} = make_step(backend{closed})\n"
                + "\n".join(ref) + "\n")

    def _xs_tuple(self):
        xs = [f"xs{i}" for i in range(len(self.x_shapes))]
        return "(" + ", ".join(xs) + ("," if len(xs) == 1 else "") + ")"

    def _map_step(self):
        n = len(self.x_shapes)
        return (embed(self.bodies[0], "body") + ["", "    def step(x):"]
                + [f"        x{i} = x[{i}]" for i in range(n)]
                + [f"        v = body({', '.join(f'x{i}' for i in range(n))})",
                   f"        flat = jnp.reshape(v, (-1,))[:{FIT_WIDTH}]",
                   f"        return {self.out_fit.expr()}", "", "    return step"])

    def _steps(self):
        """The bodies, then the loop step or the branches around them."""
        kind = self.kind
        timed = kind in ("fori_loop", "while_loop")
        body_params = [f"c{i}" for i in range(len(self.carry_shapes))] + \
            [f"x{i}" for i in range(len(self.x_shapes))] + (["t"] if timed else [])
        unpack = "\n".join(f"        c{i} = carry{path}" for i, path in sorted(_tree_paths(self.carry).items()))
        one = len(self.bodies) == 1
        names = ["body"] if one else [f"body{b}" for b in range(len(self.bodies))]
        lines = []
        for name, prog in zip(names, self.bodies):
            lines += embed(prog, name)
            lines.append("")

        def new_carry(fits):
            return tree_text(self.carry, lambda i: f"0.5 * c{i} + 0.5 * {fits[i].expr()}")
        flat = f"        flat = jnp.reshape(v, (-1,))[:{FIT_WIDTH}]"
        if kind in ("cond", "switch"):
            for b, name in enumerate(names):
                lines += [f"    def branch{b}(carry):", unpack, f"        v = {name}({', '.join(body_params)})",
                          flat, f"        return {new_carry(self.fits[b])}", ""]
            return lines + [f"    return [{', '.join(f'branch{b}' for b in range(len(names)))}]"]
        if kind == "scan":
            lines += ["    def step(carry, x):", unpack] + [f"        x{i} = x[{i}]" for i in range(len(self.x_shapes))]
        else:
            lines += ["    def step(carry, t):", unpack]
        if self.closure:  # k0, k1 are the loop's first closed-over values: its leading operands
            lines.append("        c0 = 0.75 * c0 + 0.25 * jnp.tanh(c0 + k0 - 0.5 * k1)")
        lines += [f"        v = body({', '.join(body_params)})", flat]
        out = f", {self.out_fit.expr()}" if kind == "scan" else ""
        return lines + [f"        return {new_carry(self.fits[0])}{out}", "", "    return step"]

    def _map_calls(self, p, init, dt):
        xs = self._xs_tuple()
        bs = "" if p["batch_size"] is None else f", batch_size={p['batch_size']}"
        return (f"    return backend.lax.map(step, {xs}{bs})",
                [f"    ys = [step(tuple(x[i] for x in {xs})) for i in range({self.length})]",
                 "    return backend.numpy.stack(ys)"])

    def _scan_calls(self, p, init, dt):
        length, has_xs = p["length"], bool(self.x_shapes)
        xs = self._xs_tuple() if has_xs else "None"
        extra = "" if has_xs and length else f", length={length}"
        extra += ", reverse=True" if p["reverse"] else ""
        extra += f", unroll={p['unroll']}" if p["unroll"] != 1 else ""
        order = f"reversed(range({length}))" if p["reverse"] else f"range({length})"
        x_arg = ("tuple(x[i] for x in " + xs + ")") if has_xs else "None"
        return (f"    return backend.lax.scan(step, {init}, {xs}{extra})",
                [f"    carry, ys = {init}, [None] * {length}",
                 f"    for i in {order}:",
                 f"        carry, ys[i] = step(carry, {x_arg})",
                 f"    return carry, backend.numpy.stack(ys) if ys else "
                 f"backend.numpy.zeros((0,) + {self.out_fit.shape!r}, backend.numpy.{dt})"])

    def _fori_loop_calls(self, p, init, dt):
        lower, upper = p["lower"], p["upper"]
        return (f"    return backend.lax.fori_loop({lower}, {upper}, lambda i, carry: "
                f"step(carry, backend.numpy.asarray(i, backend.numpy.{dt}) * 0.25 - 0.5), {init})",
                [f"    carry = {init}",
                 f"    for i in range({lower}, {upper}):",
                 f"        carry = step(carry, backend.numpy.asarray(i * 0.25 - 0.5, backend.numpy.{dt}))",
                 "    return carry"])

    def _while_loop_calls(self, p, init, dt):
        if self.closure:  # the trip count in the state: cond_fun closes over nothing
            call = ("    def body_fun(state):\n        i, n, carry = state\n"
                    f"        t = backend.numpy.asarray(i, backend.numpy.{dt}) * 0.25 - 0.5\n"
                    "        return i + 1, n, step(carry, t)\n\n"
                    "    return backend.lax.while_loop(lambda state: state[0] < state[1], body_fun, "
                    f"(backend.numpy.asarray(0, backend.numpy.int32), n, {init}))[2]")
        else:
            call = ("    def cond_fun(state):\n        return state[0] < n\n\n"
                    "    def body_fun(state):\n        i, carry = state\n"
                    f"        t = backend.numpy.asarray(i, backend.numpy.{dt}) * 0.25 - 0.5\n"
                    "        return i + 1, step(carry, t)\n\n"
                    f"    return backend.lax.while_loop(cond_fun, body_fun, "
                    f"(backend.numpy.asarray(0, backend.numpy.int32), {init}))[1]")
        return call, [f"    i, carry = 0, {init}",
                      "    while i < int(n):",
                      f"        carry = step(carry, backend.numpy.asarray(i * 0.25 - 0.5, backend.numpy.{dt}))",
                      "        i += 1",
                      "    return carry"]

    def _cond_calls(self, p, init, dt):
        return (f"    return backend.lax.cond(pred, branches[0], branches[1], {init})",
                [f"    return branches[0]({init}) if bool(pred) else branches[1]({init})"])

    def _switch_calls(self, p, init, dt):
        # the index is clamped into range, as JAX does
        return (f"    return backend.lax.switch(index, branches, {init})",
                [f"    return branches[min(max(int(index), 0), {len(self.bodies) - 1})]({init})"])


#: per kind, the printer of ``program``'s call of the primitive and of ``reference``'s Python
_CALLS = {"scan": ControlFlowCase._scan_calls, "fori_loop": ControlFlowCase._fori_loop_calls,
          "while_loop": ControlFlowCase._while_loop_calls, "cond": ControlFlowCase._cond_calls,
          "switch": ControlFlowCase._switch_calls, "map": ControlFlowCase._map_calls}


# ------------------------------------------------------------------ drawing


def _structure(draw, n):
    """A carry pytree over leaves 0..n-1: a leaf, tuple, dict or nested."""
    if n == 1 and draw(st.booleans()):
        return 0
    how = draw(st.integers(0, 2))
    if how == 0:
        return tuple(range(n))
    if how == 1:
        return dict(zip("abcdef", range(n)))
    return (0, dict(zip("abcdef", range(1, n))) if n > 1 else ())


@st.composite
def _leaf_shapes(draw, n_min, n_max):
    n = draw(st.integers(n_min, n_max))
    return [tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2)))) for _ in range(n)]


def _float_arrays(dtype, shape):
    return _arrays.arrays(dtype, shape, elements=_arrays.elements(dtype))


def _y_shape(draw):
    return tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))


@st.composite
def _control_case(draw, kinds, smooth, dtype, max_ops, max_batch):
    kind = draw(st.sampled_from(kinds))
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    carry_shapes = draw(_leaf_shapes(1, 3))
    carry = _structure(draw, len(carry_shapes))
    x_shapes, length, params = [], 0, {}
    if kind in ("scan", "map"):
        length = draw(st.integers(1 if kind == "map" else 0, MAX_TRIPS))
        x_shapes = draw(_leaf_shapes(1 if kind == "map" else 0, 2))
    timed = kind in ("fori_loop", "while_loop")
    closure = kind in ("scan", "fori_loop", "while_loop") and draw(st.booleans())
    branches = {"cond": 2, "switch": draw(st.integers(1, 3)) if kind == "switch" else 0}.get(kind, 1)

    body_inputs = ([(s, dt) for s in carry_shapes] if kind != "map" else []) + [(s, dt) for s in x_shapes]
    if timed:
        body_inputs.append(((), dt))
    opts = dict(smooth=smooth, max_ops=max_ops, input_types=tuple(body_inputs))
    bodies = tuple(draw(random_programs(**opts)) for _ in range(branches))
    fit = _sum_fit if closure else _fit

    fits, out_fit = (), None
    if kind == "map":
        out_fit = _fit(draw, bodies[0], _y_shape(draw), dt)
        params.update(batch_size=draw(st.one_of(st.none(), st.integers(1, length))))
        arg_names = [f"xs{i}" for i in range(len(x_shapes))]
    elif kind in ("cond", "switch"):
        fits = tuple(tuple(fit(draw, body, s, dt) for s in carry_shapes) for body in bodies)
        arg_names = ["pred" if kind == "cond" else "index"] + [f"c{i}" for i in range(len(carry_shapes))]
    else:
        fits = (tuple(fit(draw, bodies[0], s, dt) for s in carry_shapes),)
        if kind == "scan":
            out_fit = fit(draw, bodies[0], _y_shape(draw), dt)
            params.update(length=length, reverse=draw(st.booleans()), unroll=draw(st.sampled_from([1, 2, 3])))
            arg_names = [f"c{i}" for i in range(len(carry_shapes))] + [f"xs{i}" for i in range(len(x_shapes))]
        elif kind == "fori_loop":
            lower = draw(st.integers(0, 2))
            params.update(lower=lower, upper=lower + draw(st.integers(0, MAX_TRIPS)))
            arg_names = [f"c{i}" for i in range(len(carry_shapes))]
        else:
            arg_names = ["n"] + [f"c{i}" for i in range(len(carry_shapes))]
    if closure:
        arg_names = arg_names + ["k0", "k1"]
        params["closure"] = ("k0", "k1")

    # arguments, and a batch of them for vmap laws
    size = draw(st.integers(1, max_batch))
    float_shapes = ([] if kind == "map" else list(carry_shapes)) + \
        [(length,) + s for s in x_shapes] + [carry_shapes[0]] * (2 if closure else 0)
    args, batch, float_argnums = [], [], []
    for name in arg_names:
        if name == "pred":
            args.append(np.asarray(draw(st.booleans())))
            flags = draw(st.lists(st.booleans(), min_size=size, max_size=size))
            batch.append(np.asarray(flags))
        elif name == "index":
            args.append(np.asarray(draw(st.integers(-1, branches)), np.int32))
            batch.append(np.asarray(draw(st.lists(st.integers(-1, branches), min_size=size, max_size=size)),
                                    np.int32))
        elif name == "n":
            args.append(np.asarray(draw(st.integers(0, MAX_TRIPS)), np.int32))
            batch.append(np.asarray(draw(st.lists(st.integers(0, MAX_TRIPS), min_size=size, max_size=size)),
                                    np.int32))
        else:
            shape = float_shapes.pop(0)
            float_argnums.append(len(args))
            args.append(draw(_float_arrays(dt, shape)))
            batch.append(draw(_arrays.batched_arrays(size, dt, shape, axis=0)))
    return ControlFlowCase(kind, carry, tuple(carry_shapes), tuple(x_shapes), length, bodies, fits, out_fit, closure,
                           tuple(sorted(params.items())), tuple(arg_names), tuple(args), tuple(float_argnums),
                           tuple(batch), size)


def control_flow_cases(*, kinds=CONTROL_KINDS, smooth=False, dtype=None, max_ops=4, max_batch=3):
    """Draw a :class:`ControlFlowCase` of one of ``kinds``.

    ``smooth=True`` draws smooth bodies (for derivative laws). Scan lengths
    run 0 to 4 (``reverse`` and ``unroll`` drawn), fori_loop bounds are
    concrete, while_loop trip counts and cond/switch predicates are
    arguments (switch indices run one past each end, where JAX clamps).

    >>> @given(control_flow_cases(kinds=("scan",)))
    ... def test_scan(case):
    ...     np.testing.assert_allclose(case.build(jax)(*case.args)[0], case.reference(jax)(*case.args)[0])
    """
    if isinstance(kinds, str) or not all(k in CONTROL_KINDS for k in kinds) or not kinds:
        raise ValueError(f"kinds must be a non-empty collection of {CONTROL_KINDS}, got {kinds!r}")
    if not isinstance(smooth, bool):
        raise TypeError(f"smooth must be a bool, got {smooth!r}")
    if dtype is not None and np.dtype(dtype).name not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    if not isinstance(max_ops, int) or max_ops < 0:
        raise ValueError(f"max_ops must be a non-negative int, got {max_ops!r}")
    if not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(f"max_batch must be a positive int, got {max_batch!r}")
    return _control_case(tuple(kinds), smooth, None if dtype is None else np.dtype(dtype).name, max_ops,
                         max_batch)
