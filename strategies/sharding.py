"""Sharding cases over 8 devices: drawn meshes and PartitionSpecs for
``jit(in_shardings=, out_shardings=)``, ``with_sharding_constraint``,
``vmap(spmd_axis_name=)``, ``shard_map(in_specs=, out_specs=)`` and explicit
sharding (inputs placed by their specs on a mesh of ``Explicit`` axes, so their
types carry them, and the result resharded).

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
#: how each kind runs the program ``f``: formatted with the input shardings ``ins``, the
#: output sharding ``out`` and the batch's mesh axis ``axis``
SHARDING_CALLS = {
    "jit": "g = jax.jit(f, in_shardings={ins}, out_shardings={out})",
    "constraint": "g = jax.jit(lambda *xs: jax.lax.with_sharding_constraint(f(*xs), {out}))",
    "spmd": "g = jax.jit(jax.vmap(lambda *xs: jax.lax.with_sharding_constraint(f(*xs), {out}), "
            "spmd_axis_name={axis!r}))",
    "explicit": "g = jax.jit(lambda *xs: jax.sharding.reshard(f(*xs), {out}))",
}
SHARDING_KINDS = tuple(SHARDING_CALLS)
#: the imports of a reproducing module, with 8 host devices
MULTIDEVICE_IMPORTS = ("import os\nos.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=8'\n"
                       + IMPORTS)


def make_mesh(shape, names, explicit=False):
    """A ``jax.sharding.Mesh`` with Auto axes, or Explicit ones (impl takes JAX's sharding
    objects)."""
    import jax
    from jax.sharding import AxisType
    kind = AxisType.Explicit if explicit else AxisType.Auto
    return jax.make_mesh(tuple(shape), tuple(names), axis_types=(kind,) * len(shape))


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


@dataclass(frozen=True, repr=False)
class ShardingCase(Case):
    """A program, a mesh, and the shardings to run it with.

    kinds: ``jit`` (in_shardings per input, out_shardings for the output),
    ``constraint`` (``with_sharding_constraint`` on the output inside jit),
    ``spmd`` (``vmap(..., spmd_axis_name=batch_axis)`` of the program with a
    constraint ``out_spec`` inside; the batch axis lands on that mesh axis),
    ``explicit`` (on a mesh of Explicit axes in context, inputs placed by their
    specs, the jitted program's result resharded to ``out_spec``).
    """

    kind: str
    mesh_shape: tuple[int, ...]
    mesh_names: tuple[str, ...]
    program: Program
    in_specs: tuple
    out_spec: tuple
    args: tuple
    batch_axis: str | None = None

    label = "sharding"
    imports = MULTIDEVICE_IMPORTS + "from jax.sharding import AxisType, NamedSharding, PartitionSpec as P\n"

    @property
    def dtype(self):
        return np.dtype(self.program.dtype)

    def describe(self):
        return (f"{self.kind} on mesh {dict(zip(self.mesh_names, self.mesh_shape))}, in_specs "
                f"{[spec_text(s) for s in self.in_specs]}, out {spec_text(self.out_spec)}"
                f"{f', spmd_axis_name={self.batch_axis!r}' if self.batch_axis else ''}, program {self.program.ops}"
                f" on {[list(np.shape(a)) for a in self.args]}")

    def text(self):
        return self.program.source()

    def example(self):
        if self.kind == "explicit":
            call = SHARDING_CALLS["explicit"].format(out=spec_text(self.out_spec))
            return "\n".join([
                f"mesh = jax.make_mesh({self.mesh_shape!r}, {self.mesh_names!r}, "
                f"axis_types=(AxisType.Explicit,) * {len(self.mesh_shape)})",
                "with jax.set_mesh(mesh):",
                f"    args = [jax.device_put(a, s) for a, s in zip({args_literal(self.args)}, "
                f"[{', '.join(spec_text(s) for s in self.in_specs)}])]",
                "    f = lambda *xs: program(jax, *xs)", f"    {call}", "    out = g(*args)",
                "    print(out, jax.typeof(out))"]) + "\n"
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
    else:
        in_specs = tuple(draw(_spec(base, mesh_shape, names)) for _ in range(n))
        if kind == "explicit" and draw(st.booleans()):
            # inputs sharded alike: programs a type system accepts more often
            in_specs = (in_specs[0],) * n
        out_spec = draw(_spec(program.output_type[0], mesh_shape, names))
        args = tuple(draw(program_args(program)))
    return ShardingCase(kind, mesh_shape, names, program, in_specs, out_spec, args, batch_axis)


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


