"""shard_map over a mesh of one device: the manual axis's casts and collectives.

Inside a shard_map body with ``check_vma=True`` a value is, over the manual mesh axis
``x``, *varying*, *invariant*, *unreduced* (each device holds a part of a sum) or
*reduced* (replicated, its cotangent unreduced). A :class:`ManualAxisCase` is a body
that walks these states with ``lax.pcast``, psum, ``all_gather(to=...)``,
psum_scatter, pbroadcast and elementwise steps, over two inputs: ``a``, split over
``x`` (``in_specs=P('x')``; on an Explicit mesh resharded there first), and ``w``,
replicated (``P()``). With one device every collective is a reshaping at most, so
:meth:`ManualAxisCase.reference` is plain NumPy, and the cases run in any process:
no 8 host devices needed (``strategies.sharding`` draws those meshes). Unreduced and
reduced axes need an Explicit mesh, and vmap refuses them (as JAX's does): cases with
them carry no batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays
from .source import Case, array_literal
from .types import FLOAT_DTYPES

AXIS = "x"
AXIS_TYPES = ("Auto", "Explicit")
#: the states of a value over the manual axis
VARYING, INVARIANT, UNREDUCED, REDUCED = "varying", "invariant", "unreduced", "reduced"
MAX_RANK = 3


def _same(v, w):
    return v


def _gather_draw(draw, shape, w_shape):
    tiled = bool(shape) and draw(st.booleans())
    if not tiled and len(shape) >= MAX_RANK:
        return None
    axis = draw(st.integers(0, len(shape) - 1 if tiled else len(shape)))
    return (("axis", axis), ("tiled", tiled))


def _gather_ref(v, w, axis, tiled):
    return v if tiled else np.expand_dims(v, axis)


def _gather_shape(shape, axis, tiled):
    return shape if tiled else shape[:axis] + (1,) + shape[axis:]


def _scatter_draw(draw, shape, w_shape):
    if not shape:
        return None
    # untiled: the scattered dimension has the axis's size, 1 (such dimensions first: only
    # there does the dimension scattered show, with one device)
    dim = draw(st.sampled_from(sorted(range(len(shape)), key=lambda d: shape[d] != 1)))
    tiled = shape[dim] != 1 or draw(st.booleans())
    return (("dim", dim), ("tiled", tiled))


def _scatter_ref(v, w, dim, tiled):
    return v if tiled else np.squeeze(v, dim)


def _scatter_shape(shape, dim, tiled):
    return shape if tiled else shape[:dim] + shape[dim + 1:]


def _scale_draw(draw, shape, w_shape):
    return (("c", draw(st.sampled_from((0.5, 0.75, 1.25, -0.5, 1.5)))),)


def _needs_w_shape(draw, shape, w_shape):
    return () if shape == w_shape else None


@dataclass(frozen=True)
class ManualOp:
    """A step of the body: ``template`` formatted with its params (``v`` the value,
    ``w`` the replicated input); ``sources``: the states it accepts, ``target`` the state
    after (None: unchanged); ``explicit``: needs an Explicit mesh; ``vmappable``: vmap
    takes it; ``draw(draw, shape, w_shape)``: its params, None when it does not apply;
    ``reference(v, w, **params)``: its NumPy meaning on one device; ``shape(shape, **params)``."""

    template: str
    sources: tuple[str, ...]
    reference: Callable
    target: str | None = None
    explicit: bool = False
    vmappable: bool = True
    draw: Callable = lambda draw, shape, w_shape: ()
    shape: Callable = lambda shape, **params: shape


#: the steps, in drawing order (elementwise first: shrinking prefers them)
MANUAL_OPS: dict[str, ManualOp] = {
    "sin": ManualOp("jnp.sin(v)", (VARYING, INVARIANT, REDUCED), lambda v, w: np.sin(v)),
    # JAX refuses a Python scalar times an unreduced or reduced value (a ShardingTypeError)
    "scale": ManualOp("{c!r} * v", (VARYING, INVARIANT), lambda v, w, c: c * v, draw=_scale_draw),
    # w is invariant: with a varying value, Primitive.bind casts it to varying (pvary)
    "times_w": ManualOp("v * w", (VARYING, INVARIANT), lambda v, w: v * w, draw=_needs_w_shape),
    "plus_w": ManualOp("v + w", (VARYING, INVARIANT), lambda v, w: v + w, draw=_needs_w_shape),
    "pvary": ManualOp(f"lax.pcast(v, {AXIS!r}, to='varying')", (INVARIANT,), _same, VARYING),
    "psum": ManualOp(f"lax.psum(v, {AXIS!r})", (VARYING,), _same, INVARIANT),
    "all_gather_invariant": ManualOp(
        f"lax.all_gather(v, {AXIS!r}, axis={{axis}}, tiled={{tiled}}, to='invarying')", (VARYING,),
        _gather_ref, INVARIANT, draw=_gather_draw, shape=_gather_shape),
    "pbroadcast": ManualOp(f"lax.pbroadcast(v, {AXIS!r}, source=0)", (VARYING,), _same),
    "preduced": ManualOp(f"lax.pcast(v, {AXIS!r}, to='reduced')", (INVARIANT,), _same, REDUCED,
                         explicit=True, vmappable=False),
    "reduced_to_varying": ManualOp(f"lax.pcast(v, {AXIS!r}, to='varying')", (REDUCED,), _same,
                                   VARYING, explicit=True, vmappable=False),
    "to_unreduced": ManualOp(f"lax.pcast(v, {AXIS!r}, to='unreduced')", (VARYING,), _same,
                             UNREDUCED, explicit=True, vmappable=False),
    "unreduced_psum": ManualOp(f"lax.psum(v, {AXIS!r})", (UNREDUCED,), _same, INVARIANT,
                               explicit=True, vmappable=False),
    "unreduced_psum_scatter": ManualOp(
        f"lax.psum_scatter(v, {AXIS!r}, scatter_dimension={{dim}}, tiled={{tiled}})", (UNREDUCED,),
        _scatter_ref, VARYING, explicit=True, vmappable=False, draw=_scatter_draw,
        shape=_scatter_shape),
    "all_gather_reduced": ManualOp(
        f"lax.all_gather(v, {AXIS!r}, axis={{axis}}, tiled={{tiled}}, to='reduced')", (VARYING,),
        _gather_ref, REDUCED, explicit=True, vmappable=False, draw=_gather_draw,
        shape=_gather_shape),
}
MANUAL_OP_NAMES = tuple(MANUAL_OPS)
#: how a body starts: its source and the state of the value (a + 0.5 * w first: a body linear in
#: both inputs gives shard_map's transpose two cotangents, of one type on an Auto mesh)
STARTS = {"a + 0.5 * w": VARYING, "a": VARYING, "w": INVARIANT, "a * w": VARYING}
#: the step that ends a body in each state whose value no out_specs here takes
CLOSING = {UNREDUCED: "unreduced_psum", REDUCED: "reduced_to_varying"}


@dataclass(frozen=True)
class ManualStep:
    op: str
    params: tuple = ()

    @property
    def kw(self):
        return dict(self.params)

    def expr(self):
        return MANUAL_OPS[self.op].template.format(**self.kw)


@dataclass(frozen=True, repr=False)
class ManualAxisCase(Case):
    """``shard_map(body, mesh, in_specs=(P('x'), P()), out_specs=...)(a, w)`` on a mesh of
    one device whose axis ``x`` is ``axis_type`` (Auto or Explicit); ``reference(a, w)``
    computes it with NumPy. ``batch``: ``(A, W)`` to vmap over (``W`` None: w unbatched),
    or None when the body takes unreduced or reduced values, which vmap refuses."""

    axis_type: str
    start: str
    steps: tuple[ManualStep, ...]
    a: np.ndarray
    w: np.ndarray
    batch: tuple | None = None

    label = "manual"

    @property
    def args(self):
        return (self.a, self.w)

    @property
    def dtype(self):
        return self.a.dtype

    @property
    def ops(self):
        return tuple(s.op for s in self.steps)

    @property
    def out_state(self):
        state = STARTS[self.start]
        for s in self.steps:
            state = MANUAL_OPS[s.op].target or state
        return state

    @property
    def out_spec(self):
        return f"P({AXIS!r})" if self.out_state == VARYING else "P()"

    def text(self):
        lines = ["def program(backend, a, w):", "    jnp, lax, S = backend.numpy, backend.lax, backend.sharding",
                 "    P = S.PartitionSpec",
                 f"    mesh = backend.make_mesh((1,), ({AXIS!r},), axis_types=(S.AxisType.{self.axis_type},))"]
        if self.axis_type == "Explicit":   # a's type says where it is: on the mesh, split over x
            lines.append(f"    a = S.reshard(a, S.NamedSharding(mesh, P({AXIS!r})))")
        lines += ["", "    def body(a, w):", f"        v = {self.start}"]
        lines += [f"        v = {s.expr()}" for s in self.steps]
        lines += ["        return v", "",
                  f"    out = backend.shard_map(body, mesh=mesh, in_specs=(P({AXIS!r}), P()), "
                  f"out_specs={self.out_spec})(a, w)"]
        # read out replicated, as the plain arrays of the laws' cotangents are
        lines.append("    return S.reshard(out, S.NamedSharding(mesh, P()))" if self.axis_type == "Explicit"
                     else "    return out")
        return "\n".join(lines) + "\n"

    def program(self, backend):
        """``(a, w) -> output`` for ``backend``."""
        return self.function(backend, "program")

    def reference(self, a, w):
        """The body with NumPy: on one device each collective is a reshaping at most."""
        a, w = np.asarray(a), np.asarray(w)
        v = {"a + 0.5 * w": a + 0.5 * w, "a": a, "w": w, "a * w": a * w}[self.start]
        for s in self.steps:
            v = MANUAL_OPS[s.op].reference(v, w, **s.kw)
        return np.asarray(v)

    def describe(self):
        batch = "" if self.batch is None else (
            f", vmapped over {self.batch[0].shape[0]} (w {'batched' if self.batch[1] is not None else 'not'})")
        return (f"shard_map on a one-device {self.axis_type} mesh, a, w: {self.a.dtype}{list(self.a.shape)}, "
                f"body {[self.start] + [s.expr() for s in self.steps]}{batch}")

    def example(self):
        return (f"a = {array_literal(self.a)}\nw = {array_literal(self.w)}\n"
                "print(program(jax, a, w))\n")


def _route(state, wanted, explicit):
    """The first step of a shortest walk from ``state`` to a state where one of the
    ``wanted`` ops applies (None: one applies already, or none can)."""
    usable = {n: op for n, op in MANUAL_OPS.items() if explicit or not op.explicit}
    goal = {src for n in wanted if n in usable for src in usable[n].sources}
    frontier, first = [state], {state: None}
    while frontier:
        here = frontier.pop(0)
        if here in goal:
            return first[here]
        for n, op in usable.items():
            if here in op.sources and op.target and op.target not in first:
                first[op.target] = first[here] or n
                frontier.append(op.target)
    return None


@st.composite
def _manual_case(draw, dtype, max_steps, ops, batched, require):
    explicit = any(MANUAL_OPS[n].explicit for n in require) or draw(st.booleans())
    axis_type = "Explicit" if explicit else "Auto"
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    # two axes, sides above one first: where a gather's axis lands, or a batch axis, shows
    shape = tuple(draw(st.sampled_from((2, 1, 3))) for _ in range(draw(st.sampled_from((2, 1)))))
    start = draw(st.sampled_from(tuple(STARTS)))
    state, cur, steps = STARTS[start], shape, []
    pending = set(require)
    budget = draw(st.integers(1, max_steps))
    while budget > 0 or pending:
        budget -= 1
        ready = [n for n in pending if state in MANUAL_OPS[n].sources]
        if pending and not ready:   # walk towards a state where a required op applies
            name = _route(state, pending, explicit)
            if name is None:
                break
            names = [name]
        else:
            names = ready or [n for n, op in MANUAL_OPS.items() if n in ops and state in op.sources
                              and (explicit or not op.explicit)]
        if not names or len(steps) >= max_steps + 2 * len(require) + 2:
            break
        name = draw(st.sampled_from(sorted(names)))
        op = MANUAL_OPS[name]
        params = op.draw(draw, cur, shape)
        if params is None:
            pending.discard(name)   # it does not fit this value (times_w after a gather)
            continue
        pending.discard(name)
        steps.append(ManualStep(name, params))
        cur, state = op.shape(cur, **dict(params)), op.target or state
    while state in CLOSING or (state == VARYING and not cur):
        # out_specs P('x') splits dim 0 of a varying value; others end invariant
        name = CLOSING.get(state, "psum")
        steps.append(ManualStep(name))
        cur, state = MANUAL_OPS[name].shape(cur), MANUAL_OPS[name].target
    a = draw(_arrays.arrays(dt, shape, unique=True))
    w = draw(_arrays.arrays(dt, shape, unique=True))
    batch = None
    if batched and all(MANUAL_OPS[s.op].vmappable for s in steps):
        # three first (hypothesis' simplest draw): a batch of two hides a batching rule
        # that shifts its examples by one wherever the program applies it twice
        size = draw(st.sampled_from((3, 2)))
        big_a = draw(_arrays.batched_arrays(size, dt, shape))
        big_w = draw(_arrays.batched_arrays(size, dt, shape)) if draw(st.booleans()) else None
        batch = (big_a, big_w)
    return ManualAxisCase(axis_type, start, tuple(steps), a, w, batch)


def manual_axis_cases(*, dtype=None, max_steps=4, ops=MANUAL_OP_NAMES, batched=True, require=()):
    """Draw a :class:`ManualAxisCase`: a one-device mesh with an Auto or Explicit axis, a
    start (``a + 0.5 * w``, ``a``, ``w`` or ``a * w``) and 1 to ``max_steps`` steps of ``ops``
    (names of :data:`MANUAL_OPS`), closed by a cast or psum where the state needs one; with
    ``batched``, a batch of 2 or 3 examples for the cases vmap takes. ``require``: ops
    the body applies (the steps that lead to a state where each applies come first;
    an op on an Explicit mesh only makes the mesh Explicit)."""
    unknown = [o for o in tuple(ops) + tuple(require) if o not in MANUAL_OPS]
    if isinstance(ops, str) or isinstance(require, str) or unknown:
        raise ValueError(f"unknown ops {unknown or ops!r}; choose from {MANUAL_OP_NAMES}")
    if not set(require) <= set(ops):
        raise ValueError(f"require={require!r} names ops outside ops={ops!r}")
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    if dtype is not None and np.dtype(dtype).name not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    return _manual_case(None if dtype is None else np.dtype(dtype).name, max_steps, tuple(ops),
                        bool(batched), tuple(require))
