"""Named-axis programs: nested vmaps with drawn axis names, sizes and in/out
axes, whose body applies drawn collectives (psum, pmean, pmax, pmin,
axis_index, all_gather, psum_scatter, all_to_all, ppermute) over one name or
a tuple of names, mixed with elementwise ops.

Each case carries an explicit reference: :meth:`NamedAxisCase.reference`
evaluates the body with NumPy on the stacked batch, one member (one
combination of batch indices) at a time, computing every collective from
the values of the members of its group (the members that differ only in the
named axes, in the linear order of the tuple of names). No vmap, no JAX.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays
from .backends import check_backend
from .source import Case, compile_text
from .types import FLOAT_DTYPES, OneArrayCase

NAME_POOL = ("i", "j", "batch")
MAX_MEMBERS = 12
MAX_ELEMENT_SIZE = 36


def _names_text(names):
    return repr(names[0]) if len(names) == 1 else repr(names)


@dataclass(frozen=True)
class Elementwise:
    """An op of each member alone: ``template`` formatted with the step's params,
    ``apply(v, **params)`` its NumPy meaning; ``consts``: the values drawn for ``c``."""

    template: str
    apply: Callable
    consts: tuple = ()


@dataclass(frozen=True)
class Collective:
    """A collective over a group of members (one axis name or a tuple of them).

    ``expr(names, **params)``: its source (``names`` already written as Python);
    ``draw(draw, shape, n)``: ``(params, output shape)`` for an operand of ``shape`` over
    ``n`` members; ``reference(xs, r, v, gaps, **params)``: member ``r``'s result from
    the values ``xs`` of its group (``gaps`` collects how close pmax/pmin came to a tie);
    ``fits(shape, n)``: whether it applies; ``effect``: what it does to the value's
    invariance along the group (``"join"``: invariant after, ``"split"``: varying after,
    ``"keep"``); ``tuples``: JAX's vmap takes it over a tuple of names; ``varying``: only
    over names the value varies along (a tie across members has no derivative);
    ``on_invariant``: shard_map's type system accepts it over names the value is invariant along.
    """

    expr: Callable
    draw: Callable
    reference: Callable
    effect: str
    tuples: bool = True
    fits: Callable = lambda shape, n: True
    varying: bool = False
    on_invariant: bool = False


def _same(draw, shape, n):
    return (), shape


def _all_gather_draw(draw, shape, n):
    r = len(shape)
    tiled = r >= 1 and draw(st.booleans())
    axis = draw(st.integers(0, r - 1 if tiled else r))
    new = list(shape)
    if tiled:
        new[axis] *= n
    else:
        new.insert(axis, n)
    return (("axis", axis), ("tiled", tiled)), tuple(new)


def _psum_scatter_draw(draw, shape, n):
    d = draw(st.sampled_from([d for d in range(len(shape)) if shape[d] % n == 0]))
    tiled = shape[d] != n or draw(st.booleans())
    new = list(shape)
    if tiled:
        new[d] //= n
    else:
        del new[d]
    return (("dim", d), ("tiled", tiled)), tuple(new)


def _all_to_all_draw(draw, shape, n):
    r = len(shape)
    s = draw(st.sampled_from([d for d in range(r) if shape[d] % n == 0]))
    tiled = shape[s] != n or draw(st.booleans())
    new = list(shape)
    c = draw(st.integers(0, r - 1))
    if tiled:
        new[s] //= n
        new[c] *= n
    else:
        del new[s]
        new.insert(c, n)
    return (("split", s), ("concat", c), ("tiled", tiled)), tuple(new)


def _ppermute_draw(draw, shape, n):
    # a full permutation of the group (vmap needs every position to receive)
    perm = draw(st.permutations(range(n)))
    return (("perm", tuple((src, int(dst)) for src, dst in enumerate(perm))),), shape


def _extreme(pick):
    def reference(xs, r, v, gaps):
        stacked = np.sort(np.asarray(xs), axis=0)
        if gaps is not None and len(xs) > 1:
            gap = stacked[-1] - stacked[-2] if pick == -1 else stacked[1] - stacked[0]
            gaps.append(float(np.min(gap)) if gap.size else np.inf)
        return stacked[pick]
    return reference


def _psum_scatter_ref(xs, r, v, gaps, dim, tiled):
    total = np.sum(xs, axis=0)
    return np.split(total, len(xs), axis=dim)[r] if tiled else np.take(total, r, axis=dim)


def _all_to_all_ref(xs, r, v, gaps, split, concat, tiled):
    if tiled:
        return np.concatenate([np.split(x, len(xs), axis=split)[r] for x in xs], axis=concat)
    return np.stack([np.take(x, r, axis=split) for x in xs], axis=concat)


def _ppermute_ref(xs, r, v, gaps, perm):
    sources = {dst: src for src, dst in perm}
    return xs[sources[r]] if r in sources else np.zeros_like(v)


def _divides_an_axis(shape, n):
    return any(d % n == 0 for d in shape)


#: the collectives, in drawing order
COLLECTIVE_TABLE: dict[str, Collective] = {
    "psum": Collective(lambda n: f"lax.psum(v, {n})", _same, lambda xs, r, v, gaps: np.sum(xs, axis=0), "join"),
    "pmean": Collective(lambda n: f"lax.pmean(v, {n})", _same, lambda xs, r, v, gaps: np.mean(xs, axis=0),
                        "join"),
    "pmax": Collective(lambda n: f"lax.pmax(v, {n})", _same, _extreme(-1), "join", varying=True),
    "pmin": Collective(lambda n: f"lax.pmin(v, {n})", _same, _extreme(0), "join", varying=True),
    "axis_index": Collective(lambda n: f"v + 0.25 * lax.axis_index({n})", _same,
                             lambda xs, r, v, gaps: v + 0.25 * r, "split", on_invariant=True),
    "all_gather": Collective(
        lambda n, axis, tiled: f"lax.all_gather(v, {n}, axis={axis}, tiled={tiled})", _all_gather_draw,
        lambda xs, r, v, gaps, axis, tiled: (np.concatenate if tiled else np.stack)(xs, axis=axis), "join",
        tuples=False, fits=lambda shape, n: math.prod(shape) * n <= MAX_ELEMENT_SIZE),
    "psum_scatter": Collective(
        lambda n, dim, tiled: f"lax.psum_scatter(v, {n}, scatter_dimension={dim}, tiled={tiled})",
        _psum_scatter_draw, _psum_scatter_ref, "split", tuples=False, fits=_divides_an_axis),
    "all_to_all": Collective(
        lambda n, split, concat, tiled: f"lax.all_to_all(v, {n}, {split}, {concat}, tiled={tiled})",
        _all_to_all_draw, _all_to_all_ref, "split", fits=_divides_an_axis),
    "ppermute": Collective(lambda n, perm: f"lax.ppermute(v, {n}, perm={list(perm)!r})", _ppermute_draw,
                           _ppermute_ref, "keep", tuples=False),
}
COLLECTIVES = tuple(COLLECTIVE_TABLE)
#: collectives JAX's vmap accepts over a tuple of axis names
TUPLE_COLLECTIVES = tuple(k for k, c in COLLECTIVE_TABLE.items() if c.tuples)

ELEMENTWISE_TABLE: dict[str, Elementwise] = {
    "sin": Elementwise("jnp.sin(v)", lambda v: np.sin(v)),
    "tanh": Elementwise("jnp.tanh(v)", lambda v: np.tanh(v)),
    "scale": Elementwise("{c!r} * v", lambda v, c: c * v, consts=(0.5, 0.75, 1.25, -0.5, 1.5)),
}
ELEMENTWISE = tuple(ELEMENTWISE_TABLE)


@dataclass(frozen=True)
class Step:
    """One statement of the body: ``v = <expr>``."""

    op: str
    names: tuple[str, ...] = ()  # axis names of a collective (one, or a tuple)
    params: tuple = ()           # (key, value) pairs: axis, tiled, perm, c, ...

    @property
    def kw(self):
        return dict(self.params)

    def expr(self):
        if self.op in ELEMENTWISE_TABLE:
            return ELEMENTWISE_TABLE[self.op].template.format(**self.kw)
        if self.op in COLLECTIVE_TABLE:
            return COLLECTIVE_TABLE[self.op].expr(_names_text(self.names), **self.kw)
        raise ValueError(f"unknown step {self.op!r}")


# ------------------------------------------------------------------ reference


def _group(idx, levels, sizes):
    """Members of idx's group over ``levels`` (in that order) and idx's rank in it."""
    members, rank = [], 0
    for k, combo in enumerate(itertools.product(*(range(sizes[l]) for l in levels))):
        m = list(idx)
        for l, c in zip(levels, combo):
            m[l] = c
        members.append(tuple(m))
        if tuple(m) == tuple(idx):
            rank = k
    return members, rank


def _apply(step, values, sizes, level_of, gaps=None):
    """One step on every member: values maps batch index -> numpy array.

    For pmax/pmin, ``gaps`` (a list) collects the smallest distance between
    the extreme member and the next one: near 0 the result has a kink."""
    if step.op in ELEMENTWISE_TABLE:
        apply = ELEMENTWISE_TABLE[step.op].apply
        return {i: apply(v, **step.kw) for i, v in values.items()}
    if step.op not in COLLECTIVE_TABLE:
        raise ValueError(f"unknown step {step.op!r}")
    reference = COLLECTIVE_TABLE[step.op].reference
    levels = [level_of[n] for n in step.names]
    out = {}
    for idx, v in values.items():
        members, r = _group(idx, levels, sizes)
        out[idx] = reference([values[m] for m in members], r, v, gaps, **step.kw)
    return out


def _layout(front, axes, depth):
    """Arrange a (sizes..., elem...) array as nested vmaps see it: level l's
    batch axis at ``axes[l]`` of the array that level slices (None: absent)."""
    def build(level, arr):
        if level == depth:
            return arr
        parts = [build(level + 1, arr[i]) for i in range(arr.shape[0])]
        if axes[level] is None:
            return parts[0]
        return np.stack(parts, axis=axes[level])
    return build(0, front)


def _front(x, axes, sizes):
    """Inverse of _layout: the (sizes..., elem...) array of x (unbatched levels broadcast)."""
    def take(level, arr):
        if level == len(sizes):
            return arr
        parts = [take(level + 1, arr if axes[level] is None else np.take(arr, i, axis=axes[level]))
                 for i in range(sizes[level])]
        return np.stack(parts)
    return take(0, np.asarray(x))


# ------------------------------------------------------------------ the case


@dataclass(frozen=True, repr=False)
class NamedAxisCase(OneArrayCase, Case):
    """Nested vmaps over named axes (outermost first) around a body of steps.

    ``program(backend)(x)`` is ``vmap(... vmap(body, in_axes[-1], out_axes[-1],
    axis_name=names[-1]) ..., in_axes[0], out_axes[0], axis_name=names[0])(x)``;
    ``reference(x)`` computes the same with NumPy, member by member.
    """

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    in_axes: tuple
    out_axes: tuple[int, ...]
    steps: tuple[Step, ...]
    x: np.ndarray
    elem_shape: tuple[int, ...]

    label = "named"

    @property
    def collectives(self):
        return tuple(s.op for s in self.steps if s.names)

    @property
    def uses_tuples(self):
        return any(len(s.names) > 1 for s in self.steps)

    def _printed(self, params, inner, axes, call):
        """``program(backend, <params>)``: the body, ``f = <inner>``, the named vmaps
        around f (``axes(in_axes, out_axes)`` of each level: their ``in_axes=..., out_axes=...``)
        innermost first, and ``return <call>``."""
        lines = [f"def program(backend, {params}):", "    jnp, lax = backend.numpy, backend.lax", "",
                 "    def body(v):"]
        lines += [f"        v = {s.expr()}" for s in self.steps]
        lines += ["        return v", "", f"    f = {inner}"]
        for name, size, ia, oa in reversed(list(zip(self.names, self.sizes, self.in_axes, self.out_axes))):
            extra = f", axis_size={size}" if ia is None else ""
            lines.append(f"    f = backend.vmap(f, {axes(ia, oa)}, axis_name={name!r}{extra})")
        lines.append(f"    return {call}")
        return "\n".join(lines) + "\n"

    def text(self):
        return self._printed("x", "body", lambda ia, oa: f"in_axes={ia}, out_axes={oa}", "f(x)")

    def program(self, backend):
        return self.function(backend, "program")

    #: per mode: the derivative each member takes, and the axes of its vmaps
    MEMBER_DERIVATIVES = {
        "jvp": ("lambda v, w: backend.jvp(body, (v,), (w,))",
                lambda ia, oa: f"in_axes=({ia}, {ia}), out_axes=({oa}, {oa})"),
        "vjp": ("lambda v, w: backend.vjp(body, v)[1](w)[0]", lambda ia, oa: f"in_axes=({ia}, {oa}), out_axes={ia}"),
    }

    def member_derivative_text(self, mode):
        """Source of ``program(backend, x, w)``: ``jvp`` (w: the tangent, laid out as x)
        or ``vjp`` (w: the cotangent, laid out as the output) of the body taken by each
        member *inside* the named vmaps, so the collectives' own jvp and transpose rules
        run (outside, as in ``jvp(program)``, vmap rewrites them away first). ``vjp``
        needs every level batched (see :meth:`batched_everywhere`)."""
        if mode not in self.MEMBER_DERIVATIVES:
            raise ValueError(f"mode must be 'jvp' or 'vjp', got {mode!r}")
        if mode == "vjp" and None in self.in_axes:
            raise ValueError("vjp per member needs every level batched: use batched_everywhere()")
        inner, axes = self.MEMBER_DERIVATIVES[mode]
        return self._printed("x, w", inner, axes, "f(x, w)")

    def member_derivative_program(self, backend, mode):
        """``(x, w) -> jvp pair or cotangent``: see :meth:`member_derivative_text`."""
        check_backend(backend)
        return functools.partial(compile_text(self.member_derivative_text(mode), self.label)["program"], backend)

    def batched_everywhere(self):
        """The same case with every unbatched level (in_axes None) batched along
        axis 0, its input broadcast there: same members, same reference."""
        if None not in self.in_axes:
            return self
        axes = tuple(0 if a is None else a for a in self.in_axes)
        front = _front(self.x, self.in_axes, self.sizes)
        x = _layout(front, [a % (r + 1) for a, r in zip(axes, _ranks(self.elem_shape, axes))], len(self.sizes))
        return dataclasses.replace(self, in_axes=axes, x=np.asarray(x, self.x.dtype))

    def reference(self, x, gaps=None):
        """The body on the stacked batch with NumPy, member by member (``gaps``:
        a list that collects how close each pmax/pmin came to a tie)."""
        level_of = {n: l for l, n in enumerate(self.names)}
        front = _front(x, self.in_axes, self.sizes)
        values = {idx: front[idx] for idx in itertools.product(*(range(s) for s in self.sizes))}
        for step in self.steps:
            values = _apply(step, values, self.sizes, level_of, gaps)
        stacked = np.stack([values[idx] for idx in sorted(values)]).reshape(
            self.sizes + np.shape(next(iter(values.values()))))
        return _layout(stacked, self.out_axes, len(self.sizes))

    def describe(self):
        return (f"vmaps {list(zip(self.names, self.sizes))} in_axes={self.in_axes} out_axes={self.out_axes}"
                f" over x: {self.x.dtype}{list(self.x.shape)}, body {[s.expr() for s in self.steps]}")

    def example(self):
        return f"x = np.array({self.x.tolist()!r}, dtype='{self.x.dtype}')\nprint(program(jax, x))\n"


def _choices(shape, names, sizes, invariant, tuples, varying_only=False):
    """Steps that fit the current element shape (one option per kind).

    ``varying_only``: no collective (but axis_index) over a name the value is
    invariant along -- shard_map's type system rejects those."""
    groups = [(n,) for n in names]
    if tuples and len(names) >= 2:
        groups += [tuple(p) for p in itertools.permutations(names, 2)]
    opts = []
    for op, c in COLLECTIVE_TABLE.items():
        for g in groups:
            if len(g) > 1 and not c.tuples:
                continue
            n = math.prod(sizes[names.index(a)] for a in g)
            if c.varying and set(g) & invariant:
                continue  # ties across members: max is not differentiable there
            if varying_only and not c.on_invariant and set(g) & invariant:
                continue
            if not c.fits(shape, n):
                continue
            opts.append((op, g, n))
    return opts


_EFFECT = {"join": lambda inv, g: inv | set(g), "split": lambda inv, g: inv - set(g), "keep": lambda inv, g: inv}


@st.composite
def _step(draw, shape, names, sizes, invariant, tuples, ops, varying_only=False):
    options = [o for o in _choices(shape, names, sizes, invariant, tuples, varying_only) if o[0] in ops]
    elementwise = [e for e in ELEMENTWISE if e in ops]
    pick = draw(st.integers(0, len(options) + len(elementwise) - 1)) if options or elementwise else None
    if pick is None:
        return None
    if pick < len(elementwise):
        op = elementwise[pick]
        consts = ELEMENTWISE_TABLE[op].consts
        params = (("c", draw(st.sampled_from(list(consts)))),) if consts else ()
        return Step(op, (), params), shape, invariant
    op, g, n = options[pick - len(elementwise)]
    c = COLLECTIVE_TABLE[op]
    params, new_shape = c.draw(draw, shape, n)
    return Step(op, g, params), new_shape, _EFFECT[c.effect](invariant, g)


@st.composite
def _named_case(draw, max_depth, dtype, max_steps, tuples, ops):
    depth = draw(st.integers(1, max_depth))
    names = tuple(draw(st.permutations(NAME_POOL))[:depth])
    sizes = []
    for _ in range(depth):
        room = MAX_MEMBERS // max(1, math.prod(sizes))
        sizes.append(draw(st.integers(1, max(1, min(3, room)))))
    sizes = tuple(sizes)
    dt = dtype or draw(st.sampled_from(FLOAT_DTYPES))
    elem = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
    # in_axes: drawn innermost first, over the rank each level sees
    in_axes, rank = [None] * depth, len(elem)
    for level in reversed(range(depth)):
        if draw(st.integers(0, 4)) == 0:
            in_axes[level] = None
        else:
            in_axes[level] = draw(st.integers(-(rank + 1), rank))
            rank += 1
    invariant = {n for n, a in zip(names, in_axes) if a is None}
    steps, shape = [], elem
    for _ in range(draw(st.integers(1, max_steps))):
        got = draw(_step(shape, names, sizes, invariant, tuples, ops))
        if got is None:
            break
        step, shape, invariant = got
        steps.append(step)
    out_axes, rank = [0] * depth, len(shape)
    for level in reversed(range(depth)):
        out_axes[level] = draw(st.integers(-(rank + 1), rank))
        rank += 1
    # the stacked input: every element distinct (collectives see distinct members)
    front = draw(_arrays.arrays(dt, sizes + elem, unique=True))
    x = _layout(front, [a % (r + 1) if a is not None else None
                        for a, r in zip(in_axes, _ranks(elem, in_axes))], depth)
    return NamedAxisCase(names, sizes, tuple(in_axes), tuple(out_axes), tuple(steps), np.asarray(x, dt), elem)


def _ranks(elem, in_axes):
    """The rank each level's input has, before that level's axis is inserted."""
    out, rank = [0] * len(in_axes), len(elem)
    for level in reversed(range(len(in_axes))):
        out[level] = rank
        rank += in_axes[level] is not None
    return out


def named_axis_cases(*, max_depth=2, dtype=None, max_steps=3, tuples=True, ops=COLLECTIVES + ELEMENTWISE,
                     require=()):
    """Draw a :class:`NamedAxisCase`: 1 to ``max_depth`` nested vmaps with
    drawn names, sizes (1 to 3), in_axes (None included, then ``axis_size``)
    and out_axes, over a body of 1 to ``max_steps`` steps drawn from ``ops``
    (collectives over one name or, with ``tuples``, a tuple of two names;
    ppermute with drawn permutations; elementwise sin/tanh/scale).
    ``require``: ops of which the body must contain at least one.

    >>> @given(named_axis_cases())
    ... def test_collectives(case):
    ...     np.testing.assert_allclose(case.program(jax)(case.x), case.reference(case.x), rtol=1e-5)
    """
    if not isinstance(max_depth, int) or not 1 <= max_depth <= 3:
        raise ValueError(f"max_depth must be 1, 2 or 3, got {max_depth!r}")
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    if not isinstance(tuples, bool):
        raise TypeError(f"tuples must be a bool, got {tuples!r}")
    unknown = [o for o in ops if o not in COLLECTIVES + ELEMENTWISE]
    if isinstance(ops, str) or unknown:
        raise ValueError(f"unknown ops {unknown or ops!r}; choose from {COLLECTIVES + ELEMENTWISE}")
    if dtype is not None and np.dtype(dtype).name not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    if not set(require) <= set(ops):
        raise ValueError(f"require={require!r} names ops outside ops={ops!r}")
    cases = _named_case(max_depth, None if dtype is None else np.dtype(dtype).name, max_steps, tuples,
                        tuple(ops))
    if require:
        cases = cases.filter(lambda c: any(s.op in require for s in c.steps))
    return cases
