"""Sharding cases over 8 devices: drawn meshes and PartitionSpecs for
``jit(in_shardings=, out_shardings=)``, ``with_sharding_constraint``,
``vmap(spmd_axis_name=)``, ``shard_map(in_specs=, out_specs=)`` and explicit
sharding (inputs placed by their specs on a mesh mixing ``Explicit`` and ``Auto``
axes, so their types carry the Explicit ones, the result resharded, then given to
an operation taking ``out_sharding=``).

Building a case needs no devices (specs are plain data); running one needs 8
(``XLA_FLAGS=--xla_force_host_platform_device_count=8`` set before JAX is
imported). Meshes use ``AxisType.Auto`` axes, the semantics of
``with_sharding_constraint`` and of XLA's SPMD partitioner, but for the
``explicit`` kind.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays
from .named import COLLECTIVES, ELEMENTWISE, Step, _apply, _step
from .programs import Program, program_args, random_programs
from .source import IMPORTS, Case, args_literal, array_literal
from .types import FLOAT_DTYPES, OneArrayCase

DEVICES = 8
#: mesh shapes over 8 devices and their axis names
MESHES = (((8,), ("x",)), ((2, 4), ("x", "y")), ((4, 2), ("x", "y")), ((2, 2, 2), ("x", "y", "z")),
          ((1, 8), ("x", "y")))
#: how each kind but the explicit one runs the program ``f``: formatted with the input
#: shardings ``ins``, the output sharding ``out`` and the batch's mesh axis ``axis``
SHARDING_CALLS = {
    "jit": "g = jax.jit(f, in_shardings={ins}, out_shardings={out})",
    "constraint": "g = jax.jit(lambda *xs: jax.lax.with_sharding_constraint(f(*xs), {out}))",
    "spmd": "g = jax.jit(jax.vmap(lambda *xs: jax.lax.with_sharding_constraint(f(*xs), {out}), "
            "spmd_axis_name={axis!r}))",
}
#: the kinds of case; the explicit kind's text says how it runs
SHARDING_KINDS = tuple(SHARDING_CALLS) + ("explicit",)
#: the operations taking ``out_sharding=`` that the explicit kind applies to the program's
#: resharded result ``y`` (``w``: the contractions' second operand), as source
OUT_SHARDING_OPS = {
    "dot": "jnp.dot(y, w, out_sharding=out_sharding)",
    "matmul": "jnp.matmul(y, w, out_sharding=out_sharding)",
    "einsum": "jnp.einsum({subscripts!r}, y, w, out_sharding=out_sharding)",
    "dot_general": "lax.dot_general(y, w, ((({last},), (0,)), ((), ())), out_sharding=out_sharding)",
    "reshape": "jnp.reshape(y, {shape!r}, out_sharding=out_sharding)",
    "zeros": "y + jnp.zeros(y.shape, y.dtype, out_sharding=out_sharding)",
    "ones": "y * jnp.ones(y.shape, y.dtype, out_sharding=out_sharding)",
    "full": "y - jnp.full(y.shape, 0.5, y.dtype, out_sharding=out_sharding)",
    "at_set": "jnp.asarray(y).at[0].set(0.5, out_sharding=out_sharding)",
    "at_add": "jnp.asarray(y).at[0].add(1.0, out_sharding=out_sharding)",
    "at_multiply": "jnp.asarray(y).at[0].multiply(2.0, out_sharding=out_sharding)",
}
#: those contracting y's last axis with w's first
CONTRACTIONS = ("dot", "matmul", "einsum", "dot_general")
#: those combining y with an array created with out_sharding (any rank)
CREATIONS = ("zeros", "ones", "full")
#: the imports of a reproducing module, with 8 host devices
MULTIDEVICE_IMPORTS = ("import os\nos.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=8'\n"
                       + IMPORTS)


def make_mesh(shape, names):
    """A ``jax.sharding.Mesh`` with Auto axes (impl takes JAX's sharding objects)."""
    import jax
    from jax.sharding import AxisType
    return jax.make_mesh(tuple(shape), tuple(names), axis_types=(AxisType.Auto,) * len(shape))


def spec_text(spec):
    def entry(e):
        return repr(e) if not isinstance(e, tuple) else repr(tuple(e))
    return "P(" + ", ".join(entry(e) for e in spec) + ")"


@st.composite
def _spec(draw, shape, mesh_shape, names):
    """A PartitionSpec (as a tuple) for ``shape``: each dim None, a mesh axis or
    a tuple of axes whose sizes multiply to a divisor of the dim; each axis at most once."""
    free = list(names)
    spec = []
    for d in shape:
        options = [None]
        for k in (1, 2):
            for combo in itertools.permutations(free, k):
                size = math.prod(mesh_shape[names.index(a)] for a in combo)
                if d % size == 0 and size > 1:
                    options.append(combo[0] if k == 1 else combo)
        e = options[draw(st.integers(0, len(options) - 1))]
        spec.append(e)
        for a in (e if isinstance(e, tuple) else (e,)):
            if a is not None:
                free.remove(a)
    while spec and spec[-1] is None:
        spec.pop()
    return tuple(spec)


@dataclass(frozen=True)
class OutShardingStep:
    """An operation of OUT_SHARDING_OPS given ``out_sharding=spec`` (a PartitionSpec as a
    tuple); a contraction's second operand and its spec; reshape's new shape."""

    op: str
    spec: tuple
    operand: np.ndarray | None = None
    operand_spec: tuple = ()
    shape: tuple = ()

    def expr(self, ndim):
        """The source of the operation on ``y`` of rank ``ndim``."""
        letters = "abc"[:ndim - 1]
        return OUT_SHARDING_OPS[self.op].format(
            subscripts=f"{letters}j,jk->{letters}k", last=ndim - 1, shape=self.shape)

    def describe(self, ndim):
        on = "" if self.operand is None else (f", w: {list(self.operand.shape)} placed "
                                              f"{spec_text(self.operand_spec)}")
        return f"{self.expr(ndim)} with out_sharding={spec_text(self.spec)}{on}"


@dataclass(frozen=True, repr=False)
class ShardingCase(Case):
    """A program, a mesh, and the shardings to run it with.

    kinds: ``jit`` (in_shardings per input, out_shardings for the output),
    ``constraint`` (``with_sharding_constraint`` on the output inside jit),
    ``spmd`` (``vmap(..., spmd_axis_name=batch_axis)`` of the program with a
    constraint ``out_spec`` inside; the batch axis lands on that mesh axis),
    ``explicit`` (on a mesh in context whose axes are ``axis_types``, inputs placed
    by their specs, the jitted program's result resharded to ``out_spec``, then given
    to ``then``, an operation taking ``out_sharding=``, when there is one). Its text
    defines ``run(backend, *run_args)``, that whole computation returning the result
    and its type, and ``unsharded(backend, *run_args)``, the same without a mesh.
    """

    kind: str
    mesh_shape: tuple[int, ...]
    mesh_names: tuple[str, ...]
    program: Program
    in_specs: tuple
    out_spec: tuple
    args: tuple
    batch_axis: str | None = None
    axis_types: tuple[str, ...] = ()        # "Explicit" or "Auto" per mesh axis
    then: OutShardingStep | None = None

    label = "sharding"
    imports = MULTIDEVICE_IMPORTS + "from jax.sharding import AxisType, NamedSharding, PartitionSpec as P\n"

    @property
    def dtype(self):
        return np.dtype(self.program.dtype)

    @property
    def run_args(self):
        """The arguments of the explicit kind's ``run`` and ``unsharded``: the program's,
        then the second operand of ``then`` when it has one."""
        return self.args + (() if self.then is None or self.then.operand is None
                            else (self.then.operand,))

    def describe(self):
        mesh = dict(zip(self.mesh_names, zip(self.mesh_shape, self.axis_types))
                    if self.axis_types else zip(self.mesh_names, self.mesh_shape))
        then = ("" if self.then is None else
                f", then {self.then.describe(len(self.program.output_type[0]))}")
        return (f"{self.kind} on mesh {mesh}, in_specs "
                f"{[spec_text(s) for s in self.in_specs]}, out {spec_text(self.out_spec)}"
                f"{f', spmd_axis_name={self.batch_axis!r}' if self.batch_axis else ''}, program {self.program.ops}"
                f" on {[list(np.shape(a)) for a in self.args]}{then}")

    def text(self):
        if self.kind != "explicit":
            return self.program.source()
        inputs = ", ".join(f"x{i}" for i in range(len(self.args)))
        params = ", ".join([inputs] + ["w"] * (len(self.run_args) - len(self.args)))
        w = "w" if len(self.run_args) > len(self.args) else "None"
        then = self.then
        specs = [spec_text(s) for s in self.in_specs]
        if w == "w":
            specs.append(spec_text(then.operand_spec))
        types = "".join(f"AxisType.{t}, " for t in self.axis_types).rstrip(" ")
        return self.program.source() + "\n".join([
            "", "",
            "def then(backend, y, w, out_sharding):",
            '    """After the program: an operation taking out_sharding= (None: unsharded)."""',
            "    jnp, lax = backend.numpy, backend.lax",
            f"    return {'y' if then is None else then.expr(len(self.program.output_type[0]))}",
            "", "",
            f"def unsharded(backend, {params}):",
            f"    return then(backend, program(backend, {inputs}), {w}, None)",
            "", "",
            f"def run(backend, {params}):",
            '    """On the mesh in context, the inputs placed by their specs, the program jitted, '
            'its result',
            '    resharded and given to then() with out_sharding: (the result, its type)."""',
            "    from jax.sharding import AxisType, PartitionSpec as P",
            f"    mesh = backend.make_mesh({self.mesh_shape!r}, {self.mesh_names!r}, "
            f"axis_types=({types}))",
            "    with backend.set_mesh(mesh):",
            f"        args = [backend.device_put(a, s) for a, s in zip(({params},), "
            f"({', '.join(specs)},))]",
            "",
            f"        def f({params}):",
            f"            y = backend.sharding.reshard(program(backend, {inputs}), "
            f"{spec_text(self.out_spec)})",
            f"            return then(backend, y, {w}, "
            f"{'None' if then is None else spec_text(then.spec)})",
            "        out = backend.jit(f)(*args)",
            "        return out, backend.typeof(out)", ""])

    def example(self):
        if self.kind == "explicit":
            return (f"out, out_type = run(jax, *{args_literal(self.run_args)})\n"
                    "print(out, out_type)\n")
        ins = "(" + ", ".join(f"sharding({spec_text(s)})" for s in self.in_specs) + ",)"
        call = SHARDING_CALLS[self.kind].format(ins=ins, out=f"sharding({spec_text(self.out_spec)})",
                                                axis=self.batch_axis)
        return "\n".join([
            f"mesh = jax.make_mesh({self.mesh_shape!r}, {self.mesh_names!r}, "
            f"axis_types=(AxisType.Auto,) * {len(self.mesh_shape)})",
            "sharding = lambda spec: NamedSharding(mesh, spec)", f"args = {args_literal(self.args)}",
            "f = lambda *xs: program(jax, *xs)", call, "out = g(*args)", "print(out, out.sharding)"]) + "\n"


@st.composite
def _sharding_case(draw, kinds, dtype, max_ops):
    kind = draw(st.sampled_from(kinds))
    mesh_shape, names = draw(st.sampled_from(MESHES))
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    n = draw(st.integers(1, 2))
    base = tuple(draw(st.sampled_from([1, 2, 4, 8])) for _ in range(draw(st.integers(1, 2))))
    input_types = tuple((base, dt) for _ in range(n))
    program = draw(random_programs(input_types=input_types, max_ops=max_ops, smooth=True))
    batch_axis = None
    if kind == "spmd":
        batch_axis = draw(st.sampled_from(names))
        size = mesh_shape[names.index(batch_axis)]
        rest = tuple(a for a in names if a != batch_axis)
        rest_shape = tuple(mesh_shape[names.index(a)] for a in rest)
        out_spec = draw(_spec(program.output_type[0], rest_shape, rest)) if rest else ()
        batch = size * draw(st.integers(1, 2))
        args = tuple(draw(_arrays.batched_arrays(batch, dt, base)) for _ in range(n))
        in_specs = tuple(() for _ in args)
    elif kind == "explicit":
        # at least one Explicit axis; the others Auto or Explicit
        forced = draw(st.integers(0, len(names) - 1))
        axis_types = tuple("Explicit" if k == forced or draw(st.booleans()) else "Auto"
                           for k in range(len(names)))
        explicit = tuple(a for a, t in zip(names, axis_types) if t == "Explicit")
        explicit_shape = tuple(mesh_shape[names.index(a)] for a in explicit)
        in_specs = tuple(draw(_spec(base, mesh_shape, names)) for _ in range(n))
        if draw(st.booleans()):
            # inputs sharded alike: programs a type system accepts more often
            in_specs = (in_specs[0],) * n
        # reshard and out_sharding name Explicit axes only (JAX refuses Auto ones)
        shape = program.output_type[0]
        out_spec = draw(_spec(shape, explicit_shape, explicit))
        then = draw(_out_sharding_step(shape, dt, out_spec, explicit_shape, explicit))
        args = tuple(draw(program_args(program)))
        return ShardingCase(kind, mesh_shape, names, program, in_specs, out_spec, args,
                            axis_types=axis_types, then=then)
    else:
        in_specs = tuple(draw(_spec(base, mesh_shape, names)) for _ in range(n))
        out_spec = draw(_spec(program.output_type[0], mesh_shape, names))
        args = tuple(draw(program_args(program)))
    return ShardingCase(kind, mesh_shape, names, program, in_specs, out_spec, args, batch_axis)


@st.composite
def _out_sharding_step(draw, shape, dtype, y_spec, mesh_shape, names):
    """None, or an operation taking out_sharding= for the program's result ``y`` of
    ``shape`` typed by ``y_spec`` over the Explicit axes ``names``, drawn so that JAX
    mostly accepts it: contractions and reshape take any out_sharding; a created array
    combined with y is sharded as y or over axes y leaves free; at[] takes any."""
    ops = list(CREATIONS)
    if shape:
        ops += list(CONTRACTIONS) + ["reshape", "at_set", "at_add", "at_multiply"]
    op = draw(st.sampled_from(ops + [None]))
    if op is None:
        return None
    if op in CONTRACTIONS:
        k = draw(st.sampled_from([2, 4, 8]))
        w_shape = (shape[-1], k)
        w = draw(_arrays.arrays(dtype, w_shape))
        return OutShardingStep(op, draw(_spec(shape[:-1] + (k,), mesh_shape, names)), w,
                               draw(_spec(w_shape, mesh_shape, names)))
    if op == "reshape":
        size = math.prod(shape)
        new = draw(st.sampled_from(sorted({(size,), tuple(reversed(shape)), shape + (1,)}
                                          | ({(2, size // 2)} if size % 2 == 0 else set()))))
        return OutShardingStep(op, draw(_spec(new, mesh_shape, names)), shape=new)
    if op in CREATIONS:
        return OutShardingStep(op, draw(_compatible_spec(shape, y_spec, mesh_shape, names)))
    return OutShardingStep(op, draw(_spec(shape, mesh_shape, names)))


@st.composite
def _compatible_spec(draw, shape, y_spec, mesh_shape, names):
    """A spec for an operand combined elementwise with one typed ``y_spec``: on each
    axis y's entry or None where y is sharded, else None or a mesh axis y leaves free."""
    used = {a for e in y_spec for a in (e if isinstance(e, tuple) else (e,)) if a is not None}
    free = [a for a in names if a not in used]
    spec = []
    for d, mine in itertools.zip_longest(shape, y_spec):
        if mine is not None:
            options = [None, mine]
        else:
            options = [None] + [a for a in free if d % mesh_shape[names.index(a)] == 0
                                and mesh_shape[names.index(a)] > 1]
        e = draw(st.sampled_from(options))
        spec.append(e)
        if e is not None and e in free:
            free.remove(e)
    while spec and spec[-1] is None:
        spec.pop()
    return tuple(spec)


def sharding_cases(*, kinds=SHARDING_KINDS, dtype=None, max_ops=4):
    """Draw a :class:`ShardingCase` (inputs with sides 1, 2, 4 or 8 so specs divide them)."""
    if isinstance(kinds, str) or not kinds or any(k not in SHARDING_KINDS for k in kinds):
        raise ValueError(f"kinds must come from {SHARDING_KINDS}, got {kinds!r}")
    return _sharding_case(tuple(kinds), dtype, max_ops)


# ------------------------------------------------------------------ shard_map


@dataclass(frozen=True, repr=False)
class ShardMapCase(OneArrayCase, Case):
    """``shard_map(body, mesh, in_specs=P(<one mesh axis per leading dim>),
    out_specs=P(<all mesh axes on dim 0>))`` with a body of named-axis steps
    (collectives over mesh axis names and tuples of them); ``reference(x)``
    computes it block by block with NumPy."""

    mesh_shape: tuple[int, ...]
    mesh_names: tuple[str, ...]
    dims: tuple[str, ...]          # the mesh axis of each leading dim of x
    steps: tuple[Step, ...]
    x: np.ndarray

    label = "shard_map"
    imports = MULTIDEVICE_IMPORTS + "from jax.sharding import AxisType\n"

    @property
    def in_spec(self):
        return tuple(self.dims)

    @property
    def out_spec(self):
        return (tuple(self.mesh_names),)

    def text(self):
        lines = ["def program(backend, mesh, x):", "    jnp, lax = backend.numpy, backend.lax",
                 "    from jax.sharding import PartitionSpec as P", "", "    def body(v):"]
        lines += [f"        v = {s.expr()}" for s in self.steps]
        lines += ["        return v", "",
                  f"    return backend.shard_map(body, mesh=mesh, in_specs={spec_text(self.in_spec)}, "
                  f"out_specs={spec_text(self.out_spec)})(x)"]
        return "\n".join(lines) + "\n"

    def program(self, backend):
        return self.function(backend, "program", make_mesh(self.mesh_shape, self.mesh_names))

    def _block_shape(self):
        shape = list(self.x.shape)
        for k, a in enumerate(self.dims):
            shape[k] //= self.mesh_shape[self.mesh_names.index(a)]
        return tuple(shape)

    def reference(self, x, gaps=None):
        """The body block by block: collectives over the blocks of their group."""
        x = np.asarray(x)
        sizes = self.mesh_shape
        level_of = {n: l for l, n in enumerate(self.mesh_names)}
        block = self._block_shape()
        values = {}
        for idx in itertools.product(*(range(s) for s in sizes)):
            sl = [slice(None)] * x.ndim
            for k, a in enumerate(self.dims):
                i = idx[level_of[a]]
                sl[k] = slice(i * block[k], (i + 1) * block[k])
            values[idx] = x[tuple(sl)]
        for step in self.steps:
            values = _apply(step, values, sizes, level_of, gaps)
        return np.concatenate([values[idx] for idx in itertools.product(*(range(s) for s in sizes))], axis=0)

    def describe(self):
        return (f"shard_map on mesh {dict(zip(self.mesh_names, self.mesh_shape))}, in_specs "
                f"{spec_text(self.in_spec)}, x: {self.x.dtype}{list(self.x.shape)}, body "
                f"{[s.expr() for s in self.steps]}")

    def example(self):
        return (f"mesh = jax.make_mesh({self.mesh_shape!r}, {self.mesh_names!r}, "
                f"axis_types=(AxisType.Auto,) * {len(self.mesh_shape)})\nx = {array_literal(self.x)}\n"
                "print(program(jax, mesh, x))\n")


@st.composite
def _shard_map_case(draw, dtype, max_steps, ops):
    mesh_shape, names = draw(st.sampled_from(MESHES))
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    dims = tuple(draw(st.permutations(names)))
    block = tuple(draw(st.integers(1, 2)) for _ in dims) + \
        tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 1))))
    steps, shape, invariant = [], block, set()
    for _ in range(draw(st.integers(1, max_steps))):
        got = draw(_step(shape, names, mesh_shape, invariant, True, ops, varying_only=True))
        if got is None:
            break
        step, new_shape, new_invariant = got
        if not new_shape:  # out_specs put every mesh axis on dim 0: blocks keep rank >= 1
            continue
        steps.append(step)
        shape, invariant = new_shape, new_invariant
    full = tuple(b * (mesh_shape[names.index(a)] if k < len(dims) else 1)
                 for k, (b, a) in enumerate(itertools.zip_longest(block, dims)))
    x = draw(_arrays.arrays(dt, full, unique=True))
    return ShardMapCase(mesh_shape, names, dims, tuple(steps), x)


def shard_map_cases(*, dtype=None, max_steps=3, ops=None):
    """Draw a :class:`ShardMapCase`: a drawn mesh over 8 devices, each mesh
    axis splitting one leading dim of x, and 1 to ``max_steps`` named-axis
    steps (all collectives, over mesh axes and tuples of them)."""
    ops = tuple(ops) if ops is not None else COLLECTIVES + ELEMENTWISE
    if dtype is not None and np.dtype(dtype).name not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    return _shard_map_case(None if dtype is None else np.dtype(dtype).name, max_steps, ops)


