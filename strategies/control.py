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
from .backends import check_backend
from .programs import Program, random_programs
from .types import CONSTANTS, FLOAT_DTYPES

CONTROL_KINDS = ("scan", "fori_loop", "while_loop", "cond", "switch", "map")
#: kinds JAX can differentiate in reverse mode (while_loop is forward-only)
REVERSE_KINDS = ("scan", "fori_loop", "cond", "switch", "map")
#: at most this many elements of a body's output feed the fit matrices
FIT_WIDTH = 6
MAX_TRIPS = 4


# ------------------------------------------------------------------ pytrees as text


def _structure(draw, names):
    """A pytree over the leaf names, as Python source: a leaf, tuple, dict or nested."""
    if len(names) == 1 and draw(st.booleans()):
        return names[0]
    how = draw(st.integers(0, 2))
    if how == 0:
        return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
    if how == 1:
        return "{" + ", ".join(f'"{k}": {n}' for k, n in zip("abcdef", names)) + "}"
    head, rest = names[0], names[1:]
    inner = "{" + ", ".join(f'"{k}": {n}' for k, n in zip("abcdef", rest)) + "}" if rest else "()"
    return f"({head}, {inner})"


def _paths(structure, names):
    """Access paths of each leaf name inside a structure written by _structure."""
    tree = eval(structure, {}, {n: n for n in names})  # noqa: S307 - our own text
    out = {}

    def walk(node, path):
        if isinstance(node, str):
            out[node] = path
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, f'{path}["{k}"]')
        else:
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")
    walk(tree, "")
    return [out[n] for n in names]


# ------------------------------------------------------------------ bodies


def _embed(program: Program, name: str) -> list[str]:
    """The program as a nested function ``name(x0, x1, ...)`` (4-space indented)."""
    lines = program.source().rstrip("\n").split("\n")
    params = ", ".join(f"x{i}" for i in range(program.num_inputs))
    body = [ln for ln in lines[1:] if ln.strip() != "jnp, lax = backend.numpy, backend.lax"]
    return [f"    def {name}({params}):"] + ["    " + ln for ln in body]


def _fit(draw, program: Program, shape, dtype):
    """Source of tanh(constant matrix . first elements of v), shaped ``shape``, pre-activation in [-2, 2]."""
    k = min(math.prod(program.output_type[0]), FIT_WIDTH)
    n = math.prod(shape)
    flat = draw(st.lists(st.sampled_from(CONSTANTS), min_size=k * n, max_size=k * n))
    matrix = np.array(flat).reshape(k, n)
    lo, hi = program.output_bounds
    raw = max(abs(lo), abs(hi), 1e-9) * float(np.max(np.sum(np.abs(matrix), axis=0)))
    scale = 2.0 ** -max(0, math.ceil(math.log2(raw / 2.0)))
    scaled = "" if scale == 1.0 else f" * {scale!r}"
    m = f"jnp.asarray({matrix.tolist()!r}, jnp.{dtype}){scaled}"
    return f"jnp.tanh(jnp.reshape(jnp.matmul(flat, {m}), {tuple(shape)!r}))"


def _sum_fit(draw, program: Program, shape):
    """Source of tanh(w * sum of the first elements of v), broadcast to ``shape``: no
    constant array, so a linearized loop body needs no constant residual."""
    k = min(math.prod(program.output_type[0]), FIT_WIDTH)
    w = draw(st.sampled_from(CONSTANTS))
    lo, hi = program.output_bounds
    raw = max(abs(lo), abs(hi), 1e-9) * abs(w) * max(k, 1)
    w *= 2.0 ** -max(0, math.ceil(math.log2(raw / 2.0)))
    return f"jnp.tanh(jnp.broadcast_to({w!r} * jnp.sum(flat), {tuple(shape)!r}))"


@st.composite
def _leaf_shapes(draw, n_min, n_max):
    n = draw(st.integers(n_min, n_max))
    return [tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2)))) for _ in range(n)]


# ------------------------------------------------------------------ the case


@dataclass(frozen=True, repr=False)
class ControlFlowCase:
    """A control-flow program, its Python meaning, and arguments.

    ``args`` are numpy arrays, one per parameter in ``arg_names``; the float
    ones (``float_argnums``) are the differentiable inputs. ``batch`` holds a
    batch of every argument (axis 0, ``batch_size`` examples, each slice
    distinct) for vmap laws: predicates, indices and trip counts are batched
    too, so under vmap a cond sees a batched predicate and a while_loop
    batched trip counts.
    """

    kind: str
    text: str
    arg_names: tuple[str, ...]
    args: tuple
    float_argnums: tuple[int, ...]
    batch: tuple
    batch_size: int
    bodies: tuple[Program, ...]
    params: tuple = ()

    @property
    def dtype(self):
        return np.dtype(self.bodies[0].dtype)

    def _namespace(self):
        namespace: dict = {}
        exec(compile(self.text, f"<strategies.control {self.kind}>", "exec"), namespace)
        return namespace

    def build(self, backend):
        """``program`` for ``backend``: the control-flow primitive, args positional."""
        check_backend(backend)
        fn = self._namespace()["program"]
        return lambda *args: fn(backend, *args)

    def reference(self, backend):
        """``reference`` for ``backend``: the same steps in a Python loop or branch."""
        check_backend(backend)
        fn = self._namespace()["reference"]
        return lambda *args: fn(backend, *args)

    def describe(self):
        shapes = ", ".join(f"{n}: {np.asarray(a).dtype}{list(np.shape(a))}" for n, a in zip(self.arg_names, self.args))
        return f"{self.kind} {dict(self.params)} on ({shapes}), bodies {[b.ops for b in self.bodies]}"

    def source(self):
        """The case as runnable Python: the module, the args, and the two calls."""
        args = "\n".join(f"{n} = {array_literal(a)}" for n, a in zip(self.arg_names, self.args))
        names = ", ".join(self.arg_names)
        return ("import numpy as np\nimport jax  # or: import impl as jax\n\n" + self.text + "\n\n" + args
                + f"\nprint(program(jax, {names}))\nprint(reference(jax, {names}))\n")

    def __repr__(self):
        return f"ControlFlowCase(kind={self.kind!r}, params={dict(self.params)!r}):\n{self.text}"


def array_literal(a) -> str:
    """``np.array(...)`` source for ``a``, keeping the shape of empty arrays."""
    a = np.asarray(a)
    text = f"np.array({a.tolist()!r}, dtype='{a.dtype}')"
    return text + f".reshape({a.shape!r})" if a.size == 0 and a.ndim != 1 else text


def _float_arrays(dtype, shape):
    return _arrays.arrays(dtype, shape, elements=_arrays.elements(dtype))


@st.composite
def _control_case(draw, kinds, smooth, dtype, max_ops, max_batch):
    kind = draw(st.sampled_from(kinds))
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    carry_shapes = draw(_leaf_shapes(1, 3))
    carry_names = [f"c{i}" for i in range(len(carry_shapes))]
    carry_tree = _structure(draw, carry_names)
    carry_paths = _paths(carry_tree, carry_names)
    x_shapes, length, params = [], 0, {}
    if kind in ("scan", "map"):
        length = draw(st.integers(1 if kind == "map" else 0, MAX_TRIPS))
        x_shapes = draw(_leaf_shapes(1 if kind == "map" else 0, 2))
    x_names = [f"xs{i}" for i in range(len(x_shapes))]
    timed = kind in ("fori_loop", "while_loop")
    closure = kind in ("scan", "fori_loop", "while_loop") and draw(st.booleans())
    branches = {"cond": 2, "switch": draw(st.integers(1, 3)) if kind == "switch" else 0}.get(kind, 1)

    body_inputs = ([(s, dt) for s in carry_shapes] if kind != "map" else []) + [(s, dt) for s in x_shapes]
    if timed:
        body_inputs.append(((), dt))
    opts = dict(smooth=smooth, max_ops=max_ops, input_types=tuple(body_inputs))
    bodies = tuple(draw(random_programs(**opts)) for _ in range(branches))

    closed = ", k0, k1" if closure else ""
    lines = [f"def make_step(backend{closed}):", "    jnp, lax = backend.numpy, backend.lax", ""]

    def fit(program, shape):
        return _sum_fit(draw, program, shape) if closure else _fit(draw, program, shape, dt)
    body_params = ([f"c{i}" for i in range(len(carry_shapes))] if kind != "map" else []) + \
        [f"x{i}" for i in range(len(x_shapes))] + (["t"] if timed else [])
    carry_unpack = [f"        c{i} = carry{p}" for i, p in enumerate(carry_paths)]
    leaf_of = "\n".join(carry_unpack)

    def new_carry(program, indent="        "):
        out = [f"{indent}flat = jnp.reshape(v, (-1,))[:{FIT_WIDTH}]"]
        news = [f"0.5 * c{i} + 0.5 * {fit(program, s)}" for i, s in enumerate(carry_shapes)]
        text = carry_tree
        for i in reversed(range(len(carry_shapes))):
            text = text.replace(f"c{i}", f"__n{i}__")
        for i, expr in enumerate(news):
            text = text.replace(f"__n{i}__", expr)
        return out, text

    if kind == "map":
        y_shape = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
        lines += _embed(bodies[0], "body")
        lines += ["", "    def step(x):"]
        lines += [f"        x{i} = x[{i}]" for i in range(len(x_shapes))]
        lines += [f"        v = body({', '.join(f'x{i}' for i in range(len(x_shapes)))})",
                  f"        flat = jnp.reshape(v, (-1,))[:{FIT_WIDTH}]",
                  f"        return {_fit(draw, bodies[0], y_shape, dt)}", "", "    return step"]
        batch_size = draw(st.one_of(st.none(), st.integers(1, length)))
        params["batch_size"] = batch_size
        xs_tuple = "(" + ", ".join(x_names) + ("," if len(x_names) == 1 else "") + ")"
        bs = "" if batch_size is None else f", batch_size={batch_size}"
        call = f"    return backend.lax.map(step, {xs_tuple}{bs})"
        ref = ["    ys = [step(tuple(x[i] for x in " + xs_tuple + ")) for i in range(" + str(length) + ")]",
               "    return backend.numpy.stack(ys)"]
        arg_names = x_names
    else:
        for b, prog in enumerate(bodies):
            name = "body" if branches == 1 else f"body{b}"
            lines += _embed(prog, name)
            lines.append("")
        if kind in ("scan", "fori_loop", "while_loop"):
            if kind == "scan":
                lines.append("    def step(carry, x):")
                lines.append(leaf_of)
                lines += [f"        x{i} = x[{i}]" for i in range(len(x_shapes))]
            else:
                lines.append("    def step(carry, t):")
                lines.append(leaf_of)
            if closure:  # k0, k1 are the loop's first closed-over values: its leading operands
                lines.append("        c0 = 0.75 * c0 + 0.25 * jnp.tanh(c0 + k0 - 0.5 * k1)")
            lines.append(f"        v = body({', '.join(body_params)})")
            flat_line, new_text = new_carry(bodies[0])
            lines += flat_line
            if kind == "scan":
                y_shape = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
                lines.append(f"        return {new_text}, {fit(bodies[0], y_shape)}")
            else:
                lines.append(f"        return {new_text}")
            lines += ["", "    return step"]
        else:
            names = ["body"] if branches == 1 else [f"body{b}" for b in range(branches)]
            for b, name in enumerate(names):
                lines.append(f"    def branch{b}(carry):")
                lines.append(leaf_of)
                lines.append(f"        v = {name}({', '.join(body_params)})")
                flat_line, new_text = new_carry(bodies[b])
                lines += flat_line
                lines.append(f"        return {new_text}")
                lines.append("")
            lines.append(f"    return [{', '.join(f'branch{b}' for b in range(branches))}]")
        init = carry_tree
        if kind == "scan":
            reverse = draw(st.booleans())
            unroll = draw(st.sampled_from([1, 2, 3]))
            params.update(length=length, reverse=reverse, unroll=unroll)
            xs_tuple = "(" + ", ".join(x_names) + ("," if len(x_names) == 1 else "") + ")" if x_names else "None"
            extra = "" if x_names and length else f", length={length}"
            extra += ", reverse=True" if reverse else ""
            extra += f", unroll={unroll}" if unroll != 1 else ""
            call = f"    return backend.lax.scan(step, {init}, {xs_tuple}{extra})"
            order = f"reversed(range({length}))" if reverse else f"range({length})"
            x_arg = ("tuple(x[i] for x in " + xs_tuple + ")") if x_names else "None"
            ref = [f"    carry, ys = {init}, [None] * {length}",
                   f"    for i in {order}:",
                   f"        carry, ys[i] = step(carry, {x_arg})",
                   f"    return carry, backend.numpy.stack(ys) if ys else "
                   f"backend.numpy.zeros((0,) + {y_shape!r}, backend.numpy.{dt})"]
            arg_names = carry_names + x_names
        elif kind == "fori_loop":
            lower = draw(st.integers(0, 2))
            upper = lower + draw(st.integers(0, MAX_TRIPS))
            params.update(lower=lower, upper=upper)
            lines_fori = (f"    return backend.lax.fori_loop({lower}, {upper}, lambda i, carry: "
                          f"step(carry, backend.numpy.asarray(i, backend.numpy.{dt}) * 0.25 - 0.5), {init})")
            call = lines_fori
            ref = [f"    carry = {init}",
                   f"    for i in range({lower}, {upper}):",
                   f"        carry = step(carry, backend.numpy.asarray(i * 0.25 - 0.5, backend.numpy.{dt}))",
                   "    return carry"]
            arg_names = carry_names
        elif kind == "while_loop":
            if closure:  # the trip count in the state: cond_fun closes over nothing
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
            ref = [f"    i, carry = 0, {init}",
                   "    while i < int(n):",
                   f"        carry = step(carry, backend.numpy.asarray(i * 0.25 - 0.5, backend.numpy.{dt}))",
                   "        i += 1",
                   "    return carry"]
            arg_names = ["n"] + carry_names
        elif kind == "cond":
            call = f"    return backend.lax.cond(pred, branches[0], branches[1], {init})"
            ref = [f"    return branches[0]({init}) if bool(pred) else branches[1]({init})"]
            arg_names = ["pred"] + carry_names
        else:  # switch: the index is clamped into range, as JAX does
            call = f"    return backend.lax.switch(index, branches, {init})"
            ref = [f"    return branches[min(max(int(index), 0), {branches - 1})]({init})"]
            arg_names = ["index"] + carry_names
    getter = "branches" if kind in ("cond", "switch") else "step"
    if closure:
        arg_names = arg_names + ["k0", "k1"]
        params["closure"] = ("k0", "k1")
    names = ", ".join(arg_names)
    text = "\n".join(lines) + "\n\n\n" + \
        f"def program(backend, {names}):\n    {getter} = make_step(backend{closed})\n{call}\n\n\n" + \
        f"def reference(backend, {names}):\n    {getter} = make_step(backend{closed})\n" + "\n".join(ref) + "\n"

    # arguments, and a batch of them for vmap laws
    size = draw(st.integers(1, max_batch))
    float_shapes = ([] if kind == "map" else carry_shapes) + \
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
    return ControlFlowCase(kind, text, tuple(arg_names), tuple(args), tuple(float_argnums), tuple(batch),
                           size, bodies, tuple(sorted(params.items())))


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
