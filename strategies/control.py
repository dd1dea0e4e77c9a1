"""Control-flow programs: lax.scan, fori_loop, while_loop, cond, switch and map
whose bodies are drawn programs and whose carries and operands are pytrees.

A :class:`ControlFlowCase` is a small graph: one node per kind (:class:`Scan`,
:class:`ForiLoop`, :class:`WhileLoop`, :class:`Cond`, :class:`Switch`, :class:`Map`)
over its :class:`Step` (or branches), each a drawn straight-line
:class:`~strategies.programs.Program` body and the :class:`Fit` of its output to the
new carry. The case builds from the graph, for any backend (``jax``, ``impl``),
``build`` (the control-flow primitive) and ``reference`` (its meaning in plain
Python: a ``for``/``while`` loop, an ``if``, a list index, calling the *same* steps);
and prints the graph as one runnable module of the same: ``make_step`` (the bodies
and the step or branch functions around them), ``program`` and ``reference``.

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
from .backends import check_backend
from .programs import Program, random_programs
from .source import Case, array_literal, embed
from .types import CONSTANTS, FLOAT_DTYPES

CONTROL_KINDS = ("scan", "fori_loop", "while_loop", "cond", "switch", "map")
#: kinds JAX can differentiate in reverse mode (while_loop is forward-only)
REVERSE_KINDS = ("scan", "fori_loop", "cond", "switch", "map")
#: at most this many elements of a body's output feed the fit matrices
FIT_WIDTH = 6
MAX_TRIPS = 4


# ------------------------------------------------------------------ carry pytrees


def tree_text(tree, leaf) -> str:
    """A carry pytree (tuples and dicts of leaf indices) as Python source, each leaf
    ``i`` written as ``leaf(i)``."""
    if isinstance(tree, int):
        return leaf(tree)
    if isinstance(tree, dict):
        return "{" + ", ".join(f'"{k}": {tree_text(v, leaf)}' for k, v in tree.items()) + "}"
    return "(" + ", ".join(tree_text(v, leaf) for v in tree) + ("," if len(tree) == 1 else "") + ")"


def tree_fill(tree, leaf):
    """The carry pytree ``tree`` with each leaf ``i`` replaced by ``leaf(i)``, made in the
    order :func:`tree_text` prints them."""
    if isinstance(tree, int):
        return leaf(tree)
    if isinstance(tree, dict):
        return {k: tree_fill(v, leaf) for k, v in tree.items()}
    return tuple(tree_fill(v, leaf) for v in tree)


def _tree_paths(tree, path=""):
    """``{leaf index: access path}`` of a carry pytree, e.g. ``{0: '[0]', 1: '[1]["a"]'}``."""
    if isinstance(tree, int):
        return {tree: path}
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    out = {}
    for k, v in items:
        out.update(_tree_paths(v, f'{path}["{k}"]' if isinstance(tree, dict) else f"{path}[{k}]"))
    return out


def _tree_leaves(tree, value):
    """``{leaf index: leaf}`` of ``value``, a pytree shaped like the carry pytree ``tree``."""
    if isinstance(tree, int):
        return {tree: value}
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    out = {}
    for k, v in items:
        out.update(_tree_leaves(v, value[k]))
    return out


# ------------------------------------------------------------------ the graph


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

    def apply(self, jnp, flat):
        """What :meth:`expr` computes, with ``jnp`` the backend's numpy."""
        if self.matrix is None:
            return jnp.tanh(jnp.broadcast_to(self.weight * jnp.sum(flat), self.shape))
        m = jnp.asarray([list(r) for r in self.matrix], getattr(jnp, self.dtype))
        if self.scale != 1.0:
            m = m * self.scale
        return jnp.tanh(jnp.reshape(jnp.matmul(flat, m), self.shape))


@dataclass(frozen=True)
class Step:
    """One step of a loop, one branch, or map's per-element function: the drawn ``body``
    applied to the carry leaves (``carry``: their pytree of leaf indices, None for map),
    the ``n_xs`` per-iteration inputs (``per_iteration == "x"``) or the time
    (``per_iteration == "t"``); each new carry leaf ``i`` is ``0.5 * c_i + 0.5 *
    fits[i](v)`` and ``out_fit`` (scan, map) the per-iteration output. ``closed``: the
    step first mixes the closed-over k0 and k1 into c0."""

    body: Program
    carry: object
    per_iteration: str | None
    n_xs: int
    closed: bool
    fits: tuple[Fit, ...]
    out_fit: Fit | None

    def _params(self):
        return (["carry"] if self.carry is not None else []) + ([self.per_iteration] if self.per_iteration else [])

    def _body_params(self):
        return ([f"c{i}" for i in range(len(self.fits))] + [f"x{i}" for i in range(self.n_xs)]
                + (["t"] if self.per_iteration == "t" else []))

    # ---- printer and builder
    def lines(self, name, body_name) -> list[str]:
        """The step as a function ``name`` nested in ``make_step``, calling ``body_name``."""
        lines = [f"    def {name}({', '.join(self._params())}):"]
        if self.carry is not None:
            lines += [f"        c{i} = carry{path}" for i, path in sorted(_tree_paths(self.carry).items())]
        if self.per_iteration == "x":
            lines += [f"        x{i} = x[{i}]" for i in range(self.n_xs)]
        if self.closed:  # k0, k1 are the loop's first closed-over values: its leading operands
            lines.append("        c0 = 0.75 * c0 + 0.25 * jnp.tanh(c0 + k0 - 0.5 * k1)")
        returned = []
        if self.carry is not None:
            returned.append(tree_text(self.carry, lambda i: f"0.5 * c{i} + 0.5 * {self.fits[i].expr()}"))
        if self.out_fit is not None:
            returned.append(self.out_fit.expr())
        return lines + [f"        v = {body_name}({', '.join(self._body_params())})",
                        f"        flat = jnp.reshape(v, (-1,))[:{FIT_WIDTH}]",
                        f"        return {', '.join(returned)}"]

    def function(self, backend, body, closed_over=()):
        """The step for ``backend``, ``body`` the built body, closing over ``(k0, k1)``."""
        jnp = backend.numpy

        def step(*params):
            params = list(params)
            c = _tree_leaves(self.carry, params.pop(0)) if self.carry is not None else {}
            per = params.pop(0) if self.per_iteration else None
            xs = [per[i] for i in range(self.n_xs)] if self.per_iteration == "x" else []
            if self.closed:
                k0, k1 = closed_over
                c[0] = 0.75 * c[0] + 0.25 * jnp.tanh(c[0] + k0 - 0.5 * k1)
            v = body(*(c[i] for i in range(len(self.fits))), *xs, *([per] if self.per_iteration == "t" else []))
            flat = jnp.reshape(v, (-1,))[:FIT_WIDTH]
            returned = []
            if self.carry is not None:
                returned.append(tree_fill(self.carry, lambda i: 0.5 * c[i] + 0.5 * self.fits[i].apply(jnp, flat)))
            if self.out_fit is not None:
                returned.append(self.out_fit.apply(jnp, flat))
            return returned[0] if len(returned) == 1 else tuple(returned)

        return step


def _xs_text(n_xs):
    xs = [f"xs{i}" for i in range(n_xs)]
    return "(" + ", ".join(xs) + ("," if len(xs) == 1 else "") + ")"


def _time(np_, i, dtype):
    """The time a loop's step sees at trip ``i`` (traced: the loop's index)."""
    return np_.asarray(i, getattr(np_, dtype)) * 0.25 - 0.5


def _python_time(np_, i, dtype):
    """The time of trip ``i`` (a Python int) in the Python loops of the references."""
    return np_.asarray(i * 0.25 - 0.5, getattr(np_, dtype))


class Flow:
    """A node of the graph, one class per kind: it prints the call of its primitive
    (``call_text``) and its Python meaning (``reference_text``) as the lines of
    ``program`` and ``reference`` after ``make_step`` (``init``: the initial carry's
    source, ``dt``: the bodies' dtype), and computes the same with a backend (``call``,
    ``reference``) from the built steps ``fns``, the initial carry ``init``, the
    per-iteration inputs ``xs`` and the other arguments by name ``env`` (pred, index, n).
    ``params()``: its drawn parameters, for ``describe``."""

    kind: str

    @property
    def steps(self) -> tuple[Step, ...]:
        """The loop's step or map's function (the branches of cond and switch)."""
        return (self.step,)

    def params(self) -> dict:
        return {}


@dataclass(frozen=True)
class Scan(Flow):
    step: Step
    length: int
    reverse: bool
    unroll: int
    kind = "scan"

    def params(self):
        return {"length": self.length, "reverse": self.reverse, "unroll": self.unroll}

    def _options(self):
        """lax.scan's keyword arguments past (f, init, xs)."""
        options = {} if self.step.n_xs and self.length else {"length": self.length}
        if self.reverse:
            options["reverse"] = True
        if self.unroll != 1:
            options["unroll"] = self.unroll
        return options

    def _order(self):
        return reversed(range(self.length)) if self.reverse else range(self.length)

    def call_text(self, init, dt):
        xs = _xs_text(self.step.n_xs) if self.step.n_xs else "None"
        options = "".join(f", {k}={v!r}" for k, v in self._options().items())
        return [f"    return backend.lax.scan(step, {init}, {xs}{options})"]

    def reference_text(self, init, dt):
        order = f"reversed(range({self.length}))" if self.reverse else f"range({self.length})"
        x_arg = f"tuple(x[i] for x in {_xs_text(self.step.n_xs)})" if self.step.n_xs else "None"
        return [f"    carry, ys = {init}, [None] * {self.length}",
                f"    for i in {order}:",
                f"        carry, ys[i] = step(carry, {x_arg})",
                f"    return carry, backend.numpy.stack(ys) if ys else "
                f"backend.numpy.zeros((0,) + {self.step.out_fit.shape!r}, backend.numpy.{dt})"]

    def call(self, backend, fns, init, xs, env):
        return backend.lax.scan(fns[0], init, xs if self.step.n_xs else None, **self._options())

    def reference(self, backend, fns, init, xs, env):
        carry, ys = init, [None] * self.length
        for i in self._order():
            carry, ys[i] = fns[0](carry, tuple(x[i] for x in xs) if self.step.n_xs else None)
        np_ = backend.numpy
        return carry, (np_.stack(ys) if ys else
                       np_.zeros((0,) + self.step.out_fit.shape, getattr(np_, self.step.body.dtype)))


@dataclass(frozen=True)
class ForiLoop(Flow):
    step: Step
    lower: int
    upper: int
    kind = "fori_loop"

    def params(self):
        return {"lower": self.lower, "upper": self.upper}

    def call_text(self, init, dt):
        return [f"    return backend.lax.fori_loop({self.lower}, {self.upper}, lambda i, carry: "
                f"step(carry, backend.numpy.asarray(i, backend.numpy.{dt}) * 0.25 - 0.5), {init})"]

    def reference_text(self, init, dt):
        return [f"    carry = {init}",
                f"    for i in range({self.lower}, {self.upper}):",
                f"        carry = step(carry, backend.numpy.asarray(i * 0.25 - 0.5, backend.numpy.{dt}))",
                "    return carry"]

    def call(self, backend, fns, init, xs, env):
        dt = self.step.body.dtype
        return backend.lax.fori_loop(self.lower, self.upper,
                                     lambda i, carry: fns[0](carry, _time(backend.numpy, i, dt)), init)

    def reference(self, backend, fns, init, xs, env):
        carry = init
        for i in range(self.lower, self.upper):
            carry = fns[0](carry, _python_time(backend.numpy, i, self.step.body.dtype))
        return carry


@dataclass(frozen=True)
class WhileLoop(Flow):
    """A while_loop of ``n`` trips (an argument); a closed step carries ``n`` in the loop
    state, so that its cond_fun closes over nothing."""
    step: Step
    kind = "while_loop"

    def call_text(self, init, dt):
        if self.step.closed:
            return ["    def body_fun(state):", "        i, n, carry = state",
                    f"        t = backend.numpy.asarray(i, backend.numpy.{dt}) * 0.25 - 0.5",
                    "        return i + 1, n, step(carry, t)", "",
                    "    return backend.lax.while_loop(lambda state: state[0] < state[1], body_fun, "
                    f"(backend.numpy.asarray(0, backend.numpy.int32), n, {init}))[2]"]
        return ["    def cond_fun(state):", "        return state[0] < n", "",
                "    def body_fun(state):", "        i, carry = state",
                f"        t = backend.numpy.asarray(i, backend.numpy.{dt}) * 0.25 - 0.5",
                "        return i + 1, step(carry, t)", "",
                "    return backend.lax.while_loop(cond_fun, body_fun, "
                f"(backend.numpy.asarray(0, backend.numpy.int32), {init}))[1]"]

    def reference_text(self, init, dt):
        return [f"    i, carry = 0, {init}",
                "    while i < int(n):",
                f"        carry = step(carry, backend.numpy.asarray(i * 0.25 - 0.5, backend.numpy.{dt}))",
                "        i += 1",
                "    return carry"]

    def call(self, backend, fns, init, xs, env):
        np_, dt, n, step = backend.numpy, self.step.body.dtype, env["n"], fns[0]
        zero = np_.asarray(0, np_.int32)
        if self.step.closed:
            def body_fun(state):
                i, n, carry = state
                t = _time(np_, i, dt)
                return i + 1, n, step(carry, t)
            return backend.lax.while_loop(lambda state: state[0] < state[1], body_fun, (zero, n, init))[2]

        def body_fun(state):
            i, carry = state
            t = _time(np_, i, dt)
            return i + 1, step(carry, t)
        return backend.lax.while_loop(lambda state: state[0] < n, body_fun, (zero, init))[1]

    def reference(self, backend, fns, init, xs, env):
        i, carry = 0, init
        while i < int(env["n"]):
            carry = fns[0](carry, _python_time(backend.numpy, i, self.step.body.dtype))
            i += 1
        return carry


@dataclass(frozen=True)
class Cond(Flow):
    branches: tuple[Step, Step]
    kind = "cond"

    @property
    def steps(self):
        return self.branches

    def call_text(self, init, dt):
        return [f"    return backend.lax.cond(pred, branches[0], branches[1], {init})"]

    def reference_text(self, init, dt):
        return [f"    return branches[0]({init}) if bool(pred) else branches[1]({init})"]

    def call(self, backend, fns, init, xs, env):
        return backend.lax.cond(env["pred"], fns[0], fns[1], init)

    def reference(self, backend, fns, init, xs, env):
        return fns[0](init) if bool(env["pred"]) else fns[1](init)


@dataclass(frozen=True)
class Switch(Flow):
    """A switch over ``branches``; its Python meaning clamps the index into range, as JAX does."""
    branches: tuple[Step, ...]
    kind = "switch"

    @property
    def steps(self):
        return self.branches

    def call_text(self, init, dt):
        return [f"    return backend.lax.switch(index, branches, {init})"]

    def reference_text(self, init, dt):
        return [f"    return branches[min(max(int(index), 0), {len(self.branches) - 1})]({init})"]

    def call(self, backend, fns, init, xs, env):
        return backend.lax.switch(env["index"], fns, init)

    def reference(self, backend, fns, init, xs, env):
        return fns[min(max(int(env["index"]), 0), len(self.branches) - 1)](init)


@dataclass(frozen=True)
class Map(Flow):
    step: Step
    length: int
    batch_size: int | None
    kind = "map"

    def params(self):
        return {"batch_size": self.batch_size}

    def call_text(self, init, dt):
        bs = "" if self.batch_size is None else f", batch_size={self.batch_size}"
        return [f"    return backend.lax.map(step, {_xs_text(self.step.n_xs)}{bs})"]

    def reference_text(self, init, dt):
        return [f"    ys = [step(tuple(x[i] for x in {_xs_text(self.step.n_xs)})) for i in range({self.length})]",
                "    return backend.numpy.stack(ys)"]

    def call(self, backend, fns, init, xs, env):
        options = {} if self.batch_size is None else {"batch_size": self.batch_size}
        return backend.lax.map(fns[0], xs, **options)

    def reference(self, backend, fns, init, xs, env):
        return backend.numpy.stack([fns[0](tuple(x[i] for x in xs)) for i in range(self.length)])


@dataclass(frozen=True, repr=False)
class ControlFlowCase(Case):
    """A control-flow program (the node ``flow``), its Python meaning, and arguments.

    ``args`` are numpy arrays, one per parameter in ``arg_names``; the float
    ones (``float_argnums``) are the differentiable inputs. ``batch`` holds a
    batch of every argument (axis 0, ``batch_size`` examples, each slice
    distinct) for vmap laws: predicates, indices and trip counts are batched
    too, so under vmap a cond sees a batched predicate and a while_loop
    batched trip counts.

    ``build`` and ``reference`` make the functions from ``flow`` for a backend; ``text``
    prints the same as the module ``make_step``, ``program``, ``reference``.
    """

    flow: Flow
    arg_names: tuple[str, ...]
    args: tuple
    float_argnums: tuple[int, ...]
    batch: tuple
    batch_size: int

    label = "control"

    @property
    def kind(self) -> str:
        return self.flow.kind

    @property
    def bodies(self) -> tuple[Program, ...]:
        return tuple(s.body for s in self.flow.steps)

    @property
    def closure(self) -> bool:
        """The loop closes over the inputs k0 and k1."""
        return self.flow.steps[0].closed

    @property
    def params(self) -> tuple:
        """The drawn parameters, sorted ``(name, value)`` pairs."""
        params = dict(self.flow.params(), **({"closure": ("k0", "k1")} if self.closure else {}))
        return tuple(sorted(params.items()))

    @property
    def dtype(self):
        return np.dtype(self.bodies[0].dtype)

    # ---- the builder
    def build(self, backend):
        """``program`` for ``backend``: the control-flow primitive, args positional."""
        return self._function(backend, self.flow.call)

    def reference(self, backend):
        """``reference`` for ``backend``: the same steps in a Python loop or branch."""
        return self._function(backend, self.flow.reference)

    def _function(self, backend, run):
        check_backend(backend)
        steps = self.flow.steps
        bodies = [s.body.build(backend) for s in steps]
        carry, n_xs = steps[0].carry, steps[0].n_xs

        def function(*args):
            if len(args) != len(self.arg_names):
                raise TypeError(f"the {self.kind} program takes {len(self.arg_names)} arguments "
                                f"{self.arg_names}, got {len(args)}")
            env = dict(zip(self.arg_names, args))
            closed_over = (env["k0"], env["k1"]) if self.closure else ()
            fns = [s.function(backend, body, closed_over) for s, body in zip(steps, bodies)]
            init = None if carry is None else tree_fill(carry, lambda i: env[f"c{i}"])
            return run(backend, fns, init, tuple(env[f"xs{i}"] for i in range(n_xs)), env)

        function.__name__ = function.__qualname__ = f"{self.kind}_program"
        return function

    # ---- the printer
    def describe(self):
        shapes = ", ".join(f"{n}: {np.asarray(a).dtype}{list(np.shape(a))}" for n, a in zip(self.arg_names, self.args))
        return f"{self.kind} {dict(self.params)} on ({shapes}), bodies {[b.ops for b in self.bodies]}"

    def example(self):
        args = "\n".join(f"{n} = {array_literal(a)}" for n, a in zip(self.arg_names, self.args))
        names = ", ".join(self.arg_names)
        return "\n" + args + f"\nprint(program(jax, {names}))\nprint(reference(jax, {names}))\n"

    def text(self):
        steps, dt = self.flow.steps, self.bodies[0].dtype
        closed = ", k0, k1" if self.closure else ""
        carry = steps[0].carry
        init = "" if carry is None else tree_text(carry, lambda i: f"c{i}")
        branching = isinstance(self.flow, (Cond, Switch))
        names = ["body"] if len(steps) == 1 else [f"body{b}" for b in range(len(steps))]
        lines = [f"def make_step(backend{closed}):", "    jnp, lax = backend.numpy, backend.lax", ""]
        for name, step in zip(names, steps):
            lines += embed(step.body, name) + [""]
        if branching:
            for b, (name, step) in enumerate(zip(names, steps)):
                lines += step.lines(f"branch{b}", name) + [""]
            lines.append(f"    return [{', '.join(f'branch{b}' for b in range(len(steps)))}]")
        else:
            lines += steps[0].lines("step", "body") + ["", "    return step"]
        getter = "branches" if branching else "step"
        params = ", ".join(self.arg_names)
        return ("\n".join(lines) + "\n\n\n"
                + f"def program(backend, {params}):\n    {getter} = make_step(backend{closed})\n"
                + "\n".join(self.flow.call_text(init, dt)) + "\n\n\n"
                + f"def reference(backend, {params}):\n    {getter} = make_step(backend{closed})\n"
                + "\n".join(self.flow.reference_text(init, dt)) + "\n")


# ------------------------------------------------------------------ drawing

#: what each kind's step takes after the carry: per-iteration inputs, the time, or nothing
_PER_ITERATION = {"scan": "x", "map": "x", "fori_loop": "t", "while_loop": "t"}


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
    x_shapes, length = [], 0
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

    def step(body, fits=(), out_fit=None):
        return Step(body, None if kind == "map" else carry, _PER_ITERATION.get(kind), len(x_shapes), closure, fits,
                    out_fit)

    if kind == "map":
        out_fit = _fit(draw, bodies[0], _y_shape(draw), dt)
        flow = Map(step(bodies[0], out_fit=out_fit), length, draw(st.one_of(st.none(), st.integers(1, length))))
        arg_names = [f"xs{i}" for i in range(len(x_shapes))]
    elif kind in ("cond", "switch"):
        steps = tuple(step(body, tuple(fit(draw, body, s, dt) for s in carry_shapes)) for body in bodies)
        flow = Cond(steps) if kind == "cond" else Switch(steps)
        arg_names = ["pred" if kind == "cond" else "index"] + [f"c{i}" for i in range(len(carry_shapes))]
    else:
        fits = tuple(fit(draw, bodies[0], s, dt) for s in carry_shapes)
        if kind == "scan":
            out_fit = fit(draw, bodies[0], _y_shape(draw), dt)
            flow = Scan(step(bodies[0], fits, out_fit), length, draw(st.booleans()), draw(st.sampled_from([1, 2, 3])))
            arg_names = [f"c{i}" for i in range(len(carry_shapes))] + [f"xs{i}" for i in range(len(x_shapes))]
        elif kind == "fori_loop":
            lower = draw(st.integers(0, 2))
            flow = ForiLoop(step(bodies[0], fits), lower, lower + draw(st.integers(0, MAX_TRIPS)))
            arg_names = [f"c{i}" for i in range(len(carry_shapes))]
        else:
            flow = WhileLoop(step(bodies[0], fits))
            arg_names = ["n"] + [f"c{i}" for i in range(len(carry_shapes))]
    if closure:
        arg_names = arg_names + ["k0", "k1"]

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
    return ControlFlowCase(flow, tuple(arg_names), tuple(args), tuple(float_argnums), tuple(batch), size)


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
