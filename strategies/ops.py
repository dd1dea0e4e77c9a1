"""The op vocabulary that random programs are drawn from.

Each op states, NNSmith-style, which operand types it accepts
(``Op.accepts``) and, once its parameters are drawn, the type it produces
(``Op.make`` returns a :class:`Node` holding the output :class:`ValueType`).
Programs are therefore well typed by construction: no draw is filtered out,
which keeps drawing cheap and lets hypothesis shrink freely.

Ops emit Python source that uses only ``jnp`` (the backend's numpy), ``lax``
(the backend's lax) and, for custom-rule nodes, helper functions defined at
the top of the program (see :data:`PREAMBLES`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from .types import (
    CONSTANTS,
    MARGIN,
    MAX_RANK,
    MAX_SIZE,
    ValueType,
    broadcast_shapes,
    fits,
    interval_mul,
)

CUSTOM_KINDS = ("custom_jvp", "custom_vjp", "linear_call")

# Strategy objects made once: hypothesis validates and labels each new
# strategy object, which costs more than drawing from an existing one.
_BOOL = st.booleans()
_UPTO = [st.integers(0, n) for n in range(MAX_SIZE + 1)]


def upto(n: int) -> st.SearchStrategy[int]:
    """``st.integers(0, n)``, cached."""
    return _UPTO[n] if n <= MAX_SIZE else st.integers(0, n)


def _power_of_two_below(bound, limit):
    """The largest 2^-k (k >= 0) with ``2^-k * bound <= limit``: an exact scaling."""
    return 2.0 ** -max(0, math.ceil(math.log2(max(bound, 1e-9) / limit)))


@dataclass(frozen=True)
class Node:
    """One op application: ``name = expr`` in the program's source."""

    op: str
    inputs: tuple[int, ...]  # value ids: program inputs first, then nodes
    expr: str
    type: ValueType
    params: tuple = ()
    needs: tuple[str, ...] = ()  # keys of PREAMBLES the expr calls
    wrong: bool = False  # carries a deliberately wrong custom rule


class Context:
    """What an op may look at while it is drawn: the values made so far."""

    def __init__(self, n_inputs, *, smooth, linear):
        self.n_inputs = n_inputs
        self.smooth = smooth
        self.linear = linear
        self.values: list[ValueType] = []

    def name(self, i: int) -> str:
        return f"x{i}" if i < self.n_inputs else f"v{i - self.n_inputs}"

    def recent(self):
        """Value ids, most recent first: index 0 is what shrinking prefers."""
        return range(len(self.values) - 1, -1, -1)

    def pick(self, draw, candidates):
        """Draw one of ``candidates`` (a non-empty list), shrinking to the first."""
        return candidates[draw(upto(len(candidates) - 1))]

    def const_literal(self, draw, shape, dtype):
        """A constant array literal of ``dtype`` (exact binary fractions) and its bound;
        ``dtype`` is the operand's, so mixed-dtype programs do not promote."""
        n = math.prod(shape)
        flat = draw(st.lists(st.sampled_from(CONSTANTS), min_size=n, max_size=n))
        text = repr(np.array(flat).reshape(shape).tolist())
        return f"jnp.asarray({text}, jnp.{dtype})", max(abs(c) for c in flat)


class Op:
    """Base class: an op that accepts any operand and is smooth, not linear."""

    name = ""
    linear = False  # linear in its array operands (constants aside)
    smooth = True  # differentiable on every operand it accepts in smooth mode
    reverse = True  # JAX differentiates it in reverse mode too (else: forward mode only)
    category = ""

    def accepts(self, t: ValueType, ctx: Context) -> bool:
        return True

    def make(self, draw, ctx: Context, a: int) -> Node:  # pragma: no cover
        raise NotImplementedError


# ---------------------------------------------------------------- elementwise


class Unary(Op):
    """An elementwise op given by a source template and a bounds map."""

    category = "elementwise unary"

    def __init__(self, name, template, bounds, *, accepts=None, smooth=True, linear=False):
        self.name, self.template, self.bounds = name, template, bounds
        self._accepts = accepts
        self.smooth, self.linear = smooth, linear

    def accepts(self, t, ctx):
        return self._accepts is None or self._accepts(t, ctx)

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        lo, hi = self.bounds(t.lo, t.hi)
        return Node(self.name, (a,), self.template.format(ctx.name(a)), t.with_(lo=lo, hi=hi))


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def _square_bounds(lo, hi):
    top = max(lo * lo, hi * hi)
    return (0.0 if lo <= 0.0 <= hi else min(lo * lo, hi * hi)), top


def _abs_bounds(lo, hi):
    return (0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))


def _abs_ok(t, ctx):
    return not ctx.smooth or t.away_from_zero()


class Scale(Op):
    """Multiplication by a nonzero constant: linear, so transpose laws apply."""

    name, linear, category = "scale", True, "elementwise unary"

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        c = draw(st.sampled_from(CONSTANTS))
        lo, hi = sorted((t.lo * c, t.hi * c))
        return Node(self.name, (a,), f"{c!r} * {ctx.name(a)}", t.with_(lo=lo, hi=hi), (("c", c),))


class Binary(Op):
    """Broadcasting elementwise binary op; the partner is another value."""

    category = "elementwise binary"

    def __init__(self, name, func, bounds, *, smooth=True, linear=False, partner_ok=None, self_partner=True):
        self.name, self.func, self.bounds = name, func, bounds
        self.smooth, self.linear = smooth, linear
        self.partner_ok = partner_ok
        # x - x and x / x are constants: they would hide every derivative
        # behind them, so they are used only when nothing else fits.
        self.self_partner = self_partner

    def _partner(self, t, u):
        if self.partner_ok is not None and not self.partner_ok(u):
            return None
        shape = broadcast_shapes(t.shape, u.shape)
        if shape is None:
            return None
        lo, hi = self.bounds(t, u)
        return (shape, lo, hi) if fits(shape, lo, hi) else None

    def accepts(self, t, ctx):
        if self.partner_ok is None:  # the operand itself is always a partner
            return self._partner(t, t) is not None
        return any(self._partner(t, u) is not None for u in ctx.values)

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        options = [(b, r) for b in ctx.recent() if (r := self._partner(t, ctx.values[b])) is not None]
        if not self.self_partner and len(options) > 1:
            options = [(b, r) for b, r in options if b != a]
        b, (shape, lo, hi) = ctx.pick(draw, options)
        out = ValueType(shape, t.dtype, lo, hi, t.deps | ctx.values[b].deps)
        return Node(self.name, (a, b), f"jnp.{self.func}({ctx.name(a)}, {ctx.name(b)})", out)


def _div_bounds(t, u):
    return interval_mul(t, ValueType((), t.dtype, 1.0 / u.hi, 1.0 / u.lo))


class Where(Op):
    """``jnp.where``: a constant mask (smooth and linear) or a comparison."""

    name, linear, category = "where", True, "selection"

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        options = []
        for b in ctx.recent():
            u = ctx.values[b]
            shape = broadcast_shapes(t.shape, u.shape)
            if shape is not None and fits(shape):
                options.append((b, shape))
        b, shape = ctx.pick(draw, options)
        u = ctx.values[b]
        deps = t.deps | u.deps
        comparisons = []
        if not (ctx.smooth or ctx.linear):
            comparisons = [c for c in ctx.recent() if broadcast_shapes(shape, ctx.values[c].shape) == shape]
        if comparisons and draw(_BOOL):
            c = ctx.pick(draw, comparisons)
            cond = f"{ctx.name(c)} > 0.0"
            inputs, deps = (c, a, b), deps | ctx.values[c].deps
        else:
            mask_shape = tuple(d if draw(_BOOL) else 1 for d in shape)
            n = math.prod(mask_shape)
            bits = draw(st.lists(_BOOL, min_size=n, max_size=n))
            cond = f"jnp.asarray({np.array(bits).reshape(mask_shape).tolist()!r})"
            inputs = (a, b)
        out = ValueType(shape, t.dtype, min(t.lo, u.lo), max(t.hi, u.hi), deps)
        return Node(self.name, inputs, f"jnp.where({cond}, {ctx.name(a)}, {ctx.name(b)})", out)


# ----------------------------------------------------------------- reductions


class Reduction(Op):
    """``jnp.sum``/``mean``/``max`` over None, one axis or two axes."""

    category = "reduction"

    def __init__(self, name, *, grows, smooth=True, linear=False):
        self.name, self.grows, self.smooth, self.linear = name, grows, smooth, linear

    def _bounds(self, t, count):
        k = count if self.grows else 1
        return k * t.lo, k * t.hi

    def accepts(self, t, ctx):
        return t.rank >= 1 and fits((), *self._bounds(t, min(t.shape)))

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        r = t.rank
        choices = [(i,) for i in range(r)] + [None]
        if r >= 2:
            choices += [(i, j) for i in range(r) for j in range(i + 1, r)]
        choices = [
            c for c in choices
            if fits((), *self._bounds(t, math.prod(t.shape[i] for i in (range(r) if c is None else c))))
        ]
        axes = ctx.pick(draw, choices)
        keepdims = draw(_BOOL)
        if axes is None:
            reduced, axis_text = range(r), "None"
        else:
            reduced = axes
            # Write some axes as negative numbers: both spellings must work.
            signed = tuple(i - r if draw(_BOOL) else i for i in axes)
            axis_text = str(signed[0]) if len(signed) == 1 else repr(signed)
        count = math.prod(t.shape[i] for i in reduced)
        shape = tuple(1 if i in reduced else d for i, d in enumerate(t.shape) if keepdims or i not in reduced)
        lo, hi = self._bounds(t, count)
        kd = ", keepdims=True" if keepdims else ""
        expr = f"jnp.{self.name}({ctx.name(a)}, axis={axis_text}{kd})"
        return Node(self.name, (a,), expr, t.with_(shape=shape, lo=lo, hi=hi), (("axis", axes), ("keepdims", keepdims)))


# -------------------------------------------------------------- linear algebra


def dot_shape(a, b):
    if len(a) in (1, 2) and len(b) in (1, 2) and a[-1] == b[0]:
        return a[:-1] + b[1:]
    return None


def matmul_shape(a, b):
    if not a or not b:
        return None
    if len(b) == 1:
        return a[:-1] if a[-1] == b[0] else None
    if len(a) == 1:
        return b[:-2] + b[-1:] if a[0] == b[-2] else None
    if a[-1] != b[-2]:
        return None
    batch = broadcast_shapes(a[:-2], b[:-2])
    return None if batch is None else batch + (a[-2], b[-1])


class Contraction(Op):
    """``jnp.dot``/``jnp.matmul`` with another value or a constant matrix."""

    category = "linear algebra"
    linear = True  # linear when the partner is a constant; see make()

    def __init__(self, name, shape_rule, ranks):
        self.name, self.shape_rule, self.ranks = name, shape_rule, ranks

    def accepts(self, t, ctx):
        return t.rank in self.ranks and fits((), t.bound * t.shape[-1] * 2.0)

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        k = t.shape[-1]
        partners = []
        if not ctx.linear:
            for b in ctx.recent():
                u = ctx.values[b]
                shape = self.shape_rule(t.shape, u.shape)
                if shape is not None and fits(shape, t.bound * u.bound * k):
                    partners.append((b, shape))
        choice = draw(upto(len(partners)))
        if choice == 0:  # a constant matrix (or vector) on the right
            cshape = (k,) if draw(_BOOL) else (k, draw(st.integers(1, 4)))
            shape = self.shape_rule(t.shape, cshape)
            if not fits(shape):
                cshape, shape = (k,), self.shape_rule(t.shape, (k,))
            text, cmax = ctx.const_literal(draw, cshape, t.dtype)
            b_text, inputs, deps, bound = text, (a,), t.deps, t.bound * cmax * k
        else:
            b, shape = partners[choice - 1]
            u = ctx.values[b]
            b_text, inputs, deps, bound = ctx.name(b), (a, b), t.deps | u.deps, t.bound * u.bound * k
        out = ValueType(shape, t.dtype, -bound, bound, deps)
        return Node(self.name, inputs, f"jnp.{self.name}({ctx.name(a)}, {b_text})", out)


class Mix(Op):
    """A constant non-symmetric matrix applied to the flattened value (to the
    last axis when the value is large): every output depends on many inputs,
    so Jacobians are dense, non-square and non-symmetric."""

    name, linear, category = "mix", True, "linear algebra"
    #: values up to this size are flattened and mixed whole
    FLAT_LIMIT = 16

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        whole = t.size <= self.FLAT_LIMIT
        k = t.size if whole else t.shape[-1]
        lead = () if whole else t.shape[:-1]
        widths = [m for m in range(1, 5) if m != k and fits(lead + (m,))] or [1]
        m = ctx.pick(draw, widths)
        flat = draw(st.lists(st.sampled_from(CONSTANTS), min_size=k * m, max_size=k * m))
        matrix = np.array(flat).reshape(k, m)
        if k >= 2 and m >= 2 and matrix[0, 1] == matrix[1, 0]:
            matrix[0, 1] = -matrix[0, 1]  # never symmetric (constants are nonzero)
        # a power-of-two scale keeps the literal exact and the result within [-4, 4]
        raw = t.bound * float(np.max(np.sum(np.abs(matrix), axis=0)))
        scale = _power_of_two_below(raw, 4.0)
        bound = raw * scale
        text = f"jnp.asarray({matrix.tolist()!r}, jnp.{t.dtype})"
        operand = f"jnp.reshape({ctx.name(a)}, (-1,))" if whole else ctx.name(a)
        expr = f"jnp.matmul({operand}, {text}{'' if scale == 1.0 else f' * {scale!r}'})"
        return Node(self.name, (a,), expr, t.with_(shape=lead + (m,), lo=-bound, hi=bound),
                    (("matrix", tuple(map(tuple, matrix.tolist()))), ("scale", scale)))


# -------------------------------------------------------------- shape changes


class Reshape(Op):
    name, linear, category = "reshape", True, "shape"

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        rest, dims = t.size, []
        for _ in range(draw(st.integers(0, 3)) if t.size > 1 else 0):
            divisors = [d for d in range(1, rest + 1) if rest % d == 0]
            d = ctx.pick(draw, divisors)
            dims.append(d)
            rest //= d
        shape = tuple(dims) + (rest,) if (dims or rest != 1) else ()
        text = list(shape)
        if shape and draw(_BOOL):
            text[draw(st.integers(0, len(shape) - 1))] = -1
        return Node(self.name, (a,), f"jnp.reshape({ctx.name(a)}, {tuple(text)!r})", t.with_(shape=shape))


class Transpose(Op):
    name, linear, category = "transpose", True, "shape"

    def accepts(self, t, ctx):
        return t.rank >= 2

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        perm = tuple(draw(st.permutations(range(t.rank))))
        shape = tuple(t.shape[i] for i in perm)
        return Node(self.name, (a,), f"jnp.transpose({ctx.name(a)}, {perm!r})", t.with_(shape=shape))


class BroadcastTo(Op):
    name, linear, category = "broadcast_to", True, "shape"

    def accepts(self, t, ctx):
        return t.rank < MAX_RANK or 1 in t.shape

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        lead = (draw(st.integers(1, 3)),) if t.rank < MAX_RANK and draw(_BOOL) else ()
        body = tuple(draw(st.integers(1, 3)) if d == 1 else d for d in t.shape)
        shape = lead + body
        if not fits(shape):
            shape = lead + t.shape if fits(lead + t.shape) else t.shape
        return Node(self.name, (a,), f"jnp.broadcast_to({ctx.name(a)}, {shape!r})", t.with_(shape=shape))


# ----------------------------------------------------------- slicing/indexing


def _slice_text(start, stop, step, n):
    text = (str(start) if start else "") + ":" + (str(stop) if stop != n else "")
    return text + (f":{step}" if step != 1 else "")


class Slice(Op):
    """Basic slicing ``x[1:3, ::2]`` with static bounds and steps."""

    name, linear, category = "slice", True, "slicing"

    def accepts(self, t, ctx):
        return t.rank >= 1

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        parts, shape = [], []
        for n in t.shape:
            if draw(_BOOL):
                start = draw(st.integers(0, n - 1))
                stop = draw(st.integers(start + 1, n))
                step = draw(st.integers(1, 2))
            else:
                start, stop, step = 0, n, 1
            parts.append(_slice_text(start, stop, step, n))
            shape.append(len(range(start, stop, step)))
        while len(parts) > 1 and parts[-1] == ":":
            parts.pop()
        expr = f"{ctx.name(a)}[{', '.join(parts)}]"
        return Node(self.name, (a,), expr, t.with_(shape=shape))


class Index(Op):
    """Integer indexing ``x[:, -1]`` (negative indices included)."""

    name, linear, category = "index", True, "slicing"

    def accepts(self, t, ctx):
        return t.rank >= 1

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        axis = draw(upto(t.rank - 1))
        n = t.shape[axis]
        i = draw(st.integers(-n, n - 1))
        expr = f"{ctx.name(a)}[{':, ' * axis}{i}]"
        shape = t.shape[:axis] + t.shape[axis + 1:]
        return Node(self.name, (a,), expr, t.with_(shape=shape), (("axis", axis), ("index", i)))


class Take(Op):
    """Gather with constant (possibly repeated) integer indices."""

    name, linear, category = "take", True, "slicing"

    def accepts(self, t, ctx):
        return t.rank >= 1 and fits(t.shape + (4,))

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        axis = draw(upto(t.rank - 1))
        n = t.shape[axis]
        idx = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=4))
        shape = t.shape[:axis] + (len(idx),) + t.shape[axis + 1:]
        expr = f"jnp.take({ctx.name(a)}, jnp.asarray({idx!r}), axis={axis})"
        return Node(self.name, (a,), expr, t.with_(shape=shape), (("axis", axis), ("indices", tuple(idx))))


class DynamicSlice(Op):
    name, linear, category = "dynamic_slice", True, "slicing"

    def accepts(self, t, ctx):
        return t.rank >= 1

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        sizes = tuple(draw(st.integers(1, n)) for n in t.shape)
        starts = tuple(draw(st.integers(0, n - s)) for n, s in zip(t.shape, sizes))
        expr = f"lax.dynamic_slice({ctx.name(a)}, {starts!r}, {sizes!r})"
        return Node(self.name, (a,), expr, t.with_(shape=sizes))


class DynamicUpdateSlice(Op):
    """``lax.dynamic_update_slice`` of the operand by a leading block of a value of the
    same rank that fits inside it (or a constant block), smaller than the operand where
    it can be (so the operand's own derivative survives somewhere); scalars need no start
    indices. The update never depends on the operand's inputs: XLA's CPU compiler
    miscompiles an update computed from the operand itself (docs/properties.md)."""

    name, linear, category = "dynamic_update_slice", True, "slicing"

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        options = [b for b in ctx.recent() if ctx.values[b].rank == t.rank and not ctx.values[b].deps & t.deps
                   and all(m <= n for m, n in zip(ctx.values[b].shape, t.shape))]
        # a 0-d operand is replaced whole: by another value where there is one (a constant
        # would hide the operand and the update's derivative alike)
        b = ctx.pick(draw, options if t.rank == 0 and options else [None] + options)
        limit = t.shape if b is None else ctx.values[b].shape
        sizes = [draw(st.integers(1, m)) for m in limit]
        if t.size > 1 and tuple(sizes) == t.shape:   # a whole overwrite hides the operand
            j = next(i for i, n in enumerate(t.shape) if n > 1)
            sizes[j] -= 1
        if b is None:   # a constant block (zeros in a linear program)
            if ctx.linear:
                update, u = f"jnp.zeros({tuple(sizes)!r}, {ctx.name(a)}.dtype)", ValueType((), t.dtype, 0.0, 0.0)
            else:
                flat = draw(st.lists(st.sampled_from(CONSTANTS), min_size=math.prod(sizes), max_size=math.prod(sizes)))
                update = f"jnp.asarray({np.array(flat).reshape(sizes).tolist()!r}, {ctx.name(a)}.dtype)"
                u = ValueType((), t.dtype, min(flat), max(flat))
            inputs = (a,)
        else:
            u, update, inputs = ctx.values[b], ctx.name(b), (a, b)
            if tuple(sizes) != u.shape:
                update += "[" + ", ".join(f":{m}" for m in sizes) + "]"
        starts = tuple(draw(st.integers(0, n - m)) for n, m in zip(t.shape, sizes))
        out = ValueType(t.shape, t.dtype, min(t.lo, u.lo), max(t.hi, u.hi), t.deps | u.deps)
        expr = f"lax.dynamic_update_slice({ctx.name(a)}, {update}, {starts!r})"
        return Node(self.name, inputs, expr, out)


class Pad(Op):
    """``lax.pad`` with drawn low/high/interior padding and, as padding value, a constant
    (0.0 in linear programs) or another scalar value of the program (linear in both). A 0-d
    operand takes no padding: the operand and the padding value then have one type."""

    name, linear, category = "pad", True, "shape"

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        config = []
        for n in t.shape:
            lo, hi, interior = draw(upto(2)), draw(upto(2)), draw(upto(1))
            config.append((lo, hi, interior))
        shape = tuple(lo + hi + n + max(n - 1, 0) * i for (lo, hi, i), n in zip(config, t.shape))
        if not fits(shape):
            config, shape = [(0, 0, 0)] * t.rank, t.shape
        scalars = [b for b in ctx.recent() if ctx.values[b].rank == 0 and b != a]
        b = ctx.pick(draw, [None] + scalars)
        if b is None:
            c = 0.0 if ctx.linear else draw(st.sampled_from(CONSTANTS))
            value, inputs, u = f"jnp.asarray({c!r}, {ctx.name(a)}.dtype)", (a,), ValueType((), t.dtype, c, c)
        else:
            value, inputs, u = ctx.name(b), (a, b), ctx.values[b]
        out = ValueType(shape, t.dtype, min(t.lo, u.lo), max(t.hi, u.hi), t.deps | u.deps)
        return Node(self.name, inputs, f"lax.pad({ctx.name(a)}, {value}, {config!r})", out,
                    (("config", tuple(config)),))


class Concatenate(Op):
    name, linear, category = "concatenate", True, "shape"

    def accepts(self, t, ctx):
        return t.rank >= 1 and fits(t.shape + (2,))

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        axis = draw(upto(t.rank - 1))
        options = []
        for b in ctx.recent():
            u = ctx.values[b]
            if u.rank == t.rank and all(x == y for i, (x, y) in enumerate(zip(t.shape, u.shape)) if i != axis):
                shape = t.shape[:axis] + (t.shape[axis] + u.shape[axis],) + t.shape[axis + 1:]
                if fits(shape):
                    options.append((b, shape))
        b, shape = ctx.pick(draw, options)
        u = ctx.values[b]
        shown = axis - t.rank if draw(_BOOL) else axis
        expr = f"jnp.concatenate([{ctx.name(a)}, {ctx.name(b)}], axis={shown})"
        out = ValueType(shape, t.dtype, min(t.lo, u.lo), max(t.hi, u.hi), t.deps | u.deps)
        return Node(self.name, (a, b), expr, out)


# --------------------------------------------------------- custom-rule nodes

PREAMBLES = {
    "custom_sin": """\
    @backend.custom_jvp
    def custom_sin(x):
        return jnp.sin(x)

    @custom_sin.defjvp
    def custom_sin_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return jnp.sin(x), jnp.cos(x) * t
""",
    "custom_sin_wrong": """\
    @backend.custom_jvp
    def custom_sin_wrong(x):
        return jnp.sin(x)

    @custom_sin_wrong.defjvp
    def custom_sin_wrong_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return jnp.sin(x), (jnp.cos(x) + 1.0) * t  # deliberately wrong: off by t
""",
    "custom_tanh": """\
    @backend.custom_vjp
    def custom_tanh(x):
        return jnp.tanh(x)

    def custom_tanh_fwd(x):
        y = jnp.tanh(x)
        return y, y

    def custom_tanh_bwd(y, g):
        return ((1.0 - y * y) * g,)

    custom_tanh.defvjp(custom_tanh_fwd, custom_tanh_bwd)
""",
    "custom_tanh_wrong": """\
    @backend.custom_vjp
    def custom_tanh_wrong(x):
        return jnp.tanh(x)

    def custom_tanh_wrong_fwd(x):
        y = jnp.tanh(x)
        return y, y

    def custom_tanh_wrong_bwd(y, g):
        return ((2.0 - y * y) * g,)  # deliberately wrong: off by g

    custom_tanh_wrong.defvjp(custom_tanh_wrong_fwd, custom_tanh_wrong_bwd)
""",
    "linear_call": """\
    linear_call = getattr(backend, "linear_call", None) or backend.custom_derivatives.linear_call
""",
    "lc_matmul": """\
    def lc_matmul(m, x):
        return jnp.matmul(x, m)

    def lc_matmul_t(m, ct):
        return jnp.matmul(ct, jnp.transpose(m))
""",
    "lc_matmul_wrong": """\
    def lc_matmul_wrong_t(m, ct):
        # deliberately wrong: adds the row sums of the cotangent
        return jnp.matmul(ct, jnp.transpose(m)) + jnp.sum(ct, axis=-1, keepdims=True)
""",
    "lc_scale": """\
    def lc_scale(s, x):
        return x * s

    def lc_scale_t(s, ct):
        return ct * s
""",
    "lc_scale_wrong": """\
    def lc_scale_wrong_t(s, ct):
        return ct * (s + 1.0)  # deliberately wrong: off by ct
""",
}


class CustomUnary(Op):
    """sin under custom_jvp, or tanh under custom_vjp, with a correct or wrong rule."""

    category = "custom rule"

    def __init__(self, name, helper, bounds):
        self.name, self.helper, self.bounds = name, helper, bounds

    def make(self, draw, ctx, a, wrong=False):
        t = ctx.values[a]
        helper = self.helper + ("_wrong" if wrong else "")
        lo, hi = self.bounds(t.lo, t.hi)
        return Node(self.name, (a,), f"{helper}({ctx.name(a)})", t.with_(lo=lo, hi=hi), needs=(helper,), wrong=wrong)


class LinearCall(Op):
    """A constant matrix on the last axis (or a scale) under linear_call."""

    name, linear, category = "linear_call", True, "custom rule"

    def accepts(self, t, ctx):
        return t.rank == 0 or fits((), t.bound * t.shape[-1] * 2.0)

    def make(self, draw, ctx, a, wrong=False):
        t = ctx.values[a]
        if t.rank == 0:
            helper, c = "lc_scale", draw(st.sampled_from(CONSTANTS))
            res = f"jnp.asarray({c!r}, jnp.{t.dtype})"
            shape, bound = (), t.bound * abs(c)
        else:
            helper, k = "lc_matmul", t.shape[-1]
            m = draw(st.integers(1, 4))
            shape = t.shape[:-1] + (m,)
            if not fits(shape):
                m, shape = 1, t.shape[:-1] + (1,)
            res, cmax = ctx.const_literal(draw, (k, m), t.dtype)
            bound = t.bound * cmax * k
        needs = ("linear_call", helper) + ((helper + "_wrong",) if wrong else ())
        transpose = helper + ("_wrong_t" if wrong else "_t")
        expr = f"linear_call({helper}, {transpose}, {res}, {ctx.name(a)})"
        return Node(self.name, (a,), expr, t.with_(shape=shape, lo=-bound, hi=bound), needs=needs, wrong=wrong)


# ------------------------------------------------------- more of the lax surface


class BoundedUnary(Unary):
    """A unary function with a bounded domain |x| <= limit: the operand is first
    scaled by a power of two (exact) that brings it inside."""

    def __init__(self, name, func, limit, fn):
        super().__init__(name, func, None)
        self.limit, self.fn = limit, fn

    def accepts(self, t, ctx):
        return True

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        scale = _power_of_two_below(t.bound, self.limit)
        inner = ctx.name(a) if scale == 1.0 else f"{scale!r} * {ctx.name(a)}"
        ends = [self.fn(t.lo * scale), self.fn(t.hi * scale)]
        return Node(self.name, (a,), f"{self.template}({inner})", t.with_(lo=min(ends), hi=max(ends)))


class Pow(Op):
    """``jnp.power(a, b)`` with a positive base (a >= 0.5) and |b| <= 2."""

    name, category = "pow", "elementwise binary"

    def accepts(self, t, ctx):
        return t.lo >= 0.5 and t.hi <= 4.0 and any(self._ok(t, u) for u in ctx.values)

    @staticmethod
    def _ok(t, u):
        shape = broadcast_shapes(t.shape, u.shape)
        return shape is not None and fits(shape) and u.bound <= 2.0

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        b = ctx.pick(draw, [b for b in ctx.recent() if self._ok(t, ctx.values[b])])
        u = ctx.values[b]
        corners = [t.lo ** u.lo, t.lo ** u.hi, t.hi ** u.lo, t.hi ** u.hi]
        out = ValueType(broadcast_shapes(t.shape, u.shape), t.dtype, min(corners), max(corners), t.deps | u.deps)
        return Node(self.name, (a, b), f"jnp.power({ctx.name(a)}, {ctx.name(b)})", out)


class Cumulative(Op):
    """``lax.cumsum/cumprod/cummax/cummin/cumlogsumexp`` along a drawn axis, forwards or
    reversed; ``bounds(t, n)`` bounds the result over an axis of length n."""

    category = "reduction"

    def __init__(self, name, bounds, *, smooth=True, linear=False):
        self.name, self.bounds, self.smooth, self.linear = name, bounds, smooth, linear

    def accepts(self, t, ctx):
        return t.rank >= 1 and fits((), *self.bounds(t, min(t.shape)))

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        axes = [i for i in range(t.rank) if fits((), *self.bounds(t, t.shape[i]))]
        axis = ctx.pick(draw, axes)
        reverse = draw(_BOOL)
        lo, hi = self.bounds(t, t.shape[axis])
        rev = ", reverse=True" if reverse else ""
        expr = f"lax.{self.name}({ctx.name(a)}, axis={axis}{rev})"
        return Node(self.name, (a,), expr, t.with_(lo=lo, hi=hi), (("axis", axis), ("reverse", reverse)))


def _running_sum_bounds(t, n):
    return n * min(t.lo, 0.0), n * max(t.hi, 0.0)


def _running_product_bounds(t, n):
    top = max(1.0, t.bound) ** n
    return -top, top


def _running_extreme_bounds(t, n):
    return t.lo, t.hi


def _running_logsumexp_bounds(t, n):
    # between the running max and it plus log(n)
    return t.lo, t.hi + math.log(n)


class AlongAxis(Op):
    """An op along one drawn axis: sort, flip, take of the argmax/argmin, prod, min."""

    category = "reduction"

    def __init__(self, name, template, *, smooth=False, linear=False, axis_after="kept", product=False):
        self.name, self.template = name, template
        self.smooth, self.linear, self.product = smooth, linear, product
        self.axis_after = axis_after  # the drawn axis afterwards: "kept", "one" (size 1) or "gone"

    def accepts(self, t, ctx):
        if t.rank < 1:
            return False
        return not self.product or max(1.0, t.bound) ** min(t.shape) <= 100.0

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        axes = [i for i in range(t.rank) if not self.product or max(1.0, t.bound) ** t.shape[i] <= 100.0]
        axis = ctx.pick(draw, axes)
        middle = {"kept": t.shape[axis:axis + 1], "one": (1,), "gone": ()}[self.axis_after]
        shape = t.shape[:axis] + middle + t.shape[axis + 1:]
        lo, hi = t.lo, t.hi
        if self.product:
            top = max(1.0, t.bound) ** t.shape[axis]
            lo, hi = -top, top
        expr = self.template.format(x=ctx.name(a), axis=axis)
        return Node(self.name, (a,), expr, t.with_(shape=shape, lo=lo, hi=hi), (("axis", axis),))


class ExpandDims(Op):
    name, linear, category = "expand_dims", True, "shape"

    def accepts(self, t, ctx):
        return t.rank < MAX_RANK

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        axis = draw(st.integers(-(t.rank + 1), t.rank))
        k = axis % (t.rank + 1)
        shape = t.shape[:k] + (1,) + t.shape[k:]
        return Node(self.name, (a,), f"jnp.expand_dims({ctx.name(a)}, {axis})", t.with_(shape=shape))


class AddIota(Op):
    """``x + 0.25 * broadcasted_iota`` along a drawn axis: an index-dependent offset."""

    name, category = "iota", "elementwise binary"

    def accepts(self, t, ctx):
        return t.rank >= 1 and t.bound + 0.25 * max(t.shape) <= 100.0

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        axis = draw(upto(t.rank - 1))
        expr = (f"{ctx.name(a)} + 0.25 * lax.broadcasted_iota(jnp.{t.dtype}, {t.shape!r}, {axis})")
        return Node(self.name, (a,), expr, t.with_(hi=t.hi + 0.25 * (t.shape[axis] - 1)), (("axis", axis),))


class Select(Op):
    """``where`` on a predicate built from comparisons and logic (<=, !=, >, <, and, or, xor, not)."""

    name, smooth, category = "logic", False, "selection"

    def accepts(self, t, ctx):
        return any(broadcast_shapes(t.shape, u.shape) is not None for u in ctx.values)

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        b = ctx.pick(draw, [b for b in ctx.recent()
                            if (sh := broadcast_shapes(t.shape, ctx.values[b].shape)) is not None and fits(sh)])
        u = ctx.values[b]
        x, y = ctx.name(a), ctx.name(b)
        c = draw(st.sampled_from(CONSTANTS))
        # floor(x - c) != 0: false on [c, c + 1), so it differs between the examples of a batch
        pred = (f"jnp.logical_or(jnp.logical_and({x} <= {y}, jnp.floor({x} - {c!r}) != 0.0), "
                f"jnp.logical_xor({x} > 0.0, jnp.logical_not({y} < {c!r})))")
        out = ValueType(broadcast_shapes(t.shape, u.shape), t.dtype, min(t.lo, u.lo), max(t.hi, u.hi),
                        t.deps | u.deps)
        return Node(self.name, (a, b), f"jnp.where({pred}, {x}, {y})", out)


class AtUpdate(Op):
    """``x.at[indices].<method>(u)`` with constant indices along axis 0 and, as update,
    a constant or another value broadcastable to the indexed slice. ``set`` sometimes
    says its (unique) indices are unique (``unique_indices=True``: differentiated with
    a scatter rather than a scatter-add) and always does in linear programs, as
    ``multiply`` by a value does (JAX requires both); ``add``, ``min`` and ``max`` may
    repeat an index."""

    category = "slicing"

    def __init__(self, name, method, bounds, *, linear=False, smooth=True, unique=False):
        self.name, self.method, self.bounds = name, method, bounds
        self.linear, self.smooth, self.unique = linear, smooth, unique

    def _fits(self, t, u):
        return fits((), *self.bounds(t, u, 1 if self.unique else 3))

    def accepts(self, t, ctx):
        return t.rank >= 1 and self._fits(t, ValueType((), t.dtype, -2.0, 2.0))

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        idx = draw(st.lists(st.integers(0, t.shape[0] - 1), min_size=1, max_size=3, unique=self.unique))
        target = (len(idx),) + t.shape[1:]
        values = [b for b in ctx.recent() if b != a and broadcast_shapes(ctx.values[b].shape, target) == target
                  and self._fits(t, ctx.values[b])]
        if ctx.linear and self.method == "multiply":
            values = []   # x times a value is not linear
        b = ctx.pick(draw, [None] + values)
        if b is None:   # a linear program sets or adds 0.0, or multiplies by a constant
            c = 0.0 if ctx.linear and self.method != "multiply" else draw(st.sampled_from(CONSTANTS))
            u, update, inputs = ValueType((), t.dtype, c, c), repr(c), (a,)
        else:
            u, update, inputs = ctx.values[b], ctx.name(b), (a, b)
        lo, hi = self.bounds(t, u, len(idx))
        # JAX differentiates a multiply's updates, and transposes a set, only when told the
        # indices are unique
        say_unique = ((self.method == "multiply" and b is not None)
                      or (self.method == "set" and (ctx.linear or draw(_BOOL))))
        flag = ", unique_indices=True" if say_unique else ""
        expr = f"jnp.asarray({ctx.name(a)}).at[jnp.asarray({idx!r})].{self.method}({update}{flag})"
        return Node(self.name, inputs, expr, ValueType(t.shape, t.dtype, lo, hi, t.deps | u.deps),
                    (("indices", tuple(idx)), ("unique", bool(flag))))


class AtApply(Op):
    """``x.at[indices].apply(jnp.sin)`` with constant indices along axis 0, of a stopped
    gradient (``apply`` has no derivative, in JAX as in impl): under vmap and jit its
    scatter meets batched and staged values."""

    name, smooth, category = "at_apply", False, "slicing"

    def accepts(self, t, ctx):
        return t.rank >= 1

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        idx = draw(st.lists(st.integers(0, t.shape[0] - 1), min_size=1, max_size=3))
        expr = f"jnp.asarray(lax.stop_gradient({ctx.name(a)})).at[jnp.asarray({idx!r})].apply(jnp.sin)"
        return Node(self.name, (a,), expr, t.with_(lo=min(t.lo, -1.0), hi=max(t.hi, 1.0)),
                    (("indices", tuple(idx)),))


def _at_ops():
    return [
        AtUpdate("at_set", "set", lambda t, u, n: (min(t.lo, u.lo), max(t.hi, u.hi)), linear=True, unique=True),
        AtUpdate("at_add", "add", lambda t, u, n: (t.lo + n * min(u.lo, 0.0), t.hi + n * max(u.hi, 0.0)),
                 linear=True),
        AtUpdate("at_multiply", "multiply",
                 lambda t, u, n: (min(t.lo, *interval_mul(t, u)), max(t.hi, *interval_mul(t, u))), linear=True,
                 unique=True),
        AtUpdate("at_min", "min", lambda t, u, n: (min(t.lo, u.lo), t.hi), smooth=False),
        AtUpdate("at_max", "max", lambda t, u, n: (t.lo, max(t.hi, u.hi)), smooth=False),
    ]


class Clamp(Op):
    """``lax.clamp(lo, x, hi)`` with constant scalar bounds, or bounds made from another
    value of x's shape, so that the bounds' tangents count too. (A traced scalar bound
    of an array x is left out: JAX 0.10.2's jvp of it raises, see docs/properties.md.)"""

    name, smooth, category = "clamp", False, "elementwise unary"

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        x = ctx.name(a)
        b = ctx.pick(draw, [None] + [b for b in ctx.recent() if b != a and ctx.values[b].shape == t.shape])
        if b is None:
            lo, hi, inputs, deps = f"jnp.asarray(-0.5, {x}.dtype)", f"jnp.asarray(1.25, {x}.dtype)", (a,), t.deps
        else:   # lo in [-0.5, 0], hi in [0.75, 1.25]: inside the constant bounds, which keep them
            v = ctx.name(b)
            lo, hi = f"-0.25 + 0.25 * jnp.tanh({v})", f"1.0 + 0.25 * jnp.tanh({v})"
            inputs, deps = (a, b), t.deps | ctx.values[b].deps
        out = ValueType(t.shape, t.dtype, max(-0.5, min(t.lo, 1.25)), min(1.25, max(t.hi, -0.5)), deps)
        return Node(self.name, inputs, f"lax.clamp({lo}, {x}, {hi})", out)


class Astype(Op):
    """Mixed precision, exact, so the dtype conversion's rules meet differentiated,
    batched values: a float32 value scaled in float64 and converted back; a float64 one
    converted to complex128 and its real part taken (no rounding, so tangents and
    cotangents keep float64 precision)."""

    name, linear, category = "astype", True, "elementwise unary"

    def accepts(self, t, ctx):
        return t.dtype in ("float32", "float64")

    def make(self, draw, ctx, a):
        t, x = ctx.values[a], ctx.name(a)
        # the method of the backend's array: an input may be a NumPy array, whose own
        # astype would compute (and promote) with NumPy's rules
        x = f"jnp.asarray({x})"
        if t.dtype == "float32":
            expr = f"(0.5 * {x}.astype(jnp.float64)).astype(jnp.float32)"
            return Node(self.name, (a,), expr, t.with_(lo=0.5 * t.lo, hi=0.5 * t.hi))
        return Node(self.name, (a,), f"jnp.real({x}.astype(jnp.complex128))", t)


def _more_ops():
    """Elementwise functions, cumulative ops, sorting, logic and scatters of the lax surface."""
    return [
        BoundedUnary("tan", "jnp.tan", 1.2, math.tan),
        BoundedUnary("arcsin", "jnp.arcsin", 0.9, math.asin),
        BoundedUnary("arccos", "jnp.arccos", 0.9, math.acos),
        Unary("arctan", "jnp.arctan({})", lambda lo, hi: (math.atan(lo), math.atan(hi))),
        Unary("sinh", "jnp.sinh({})", lambda lo, hi: (math.sinh(lo), math.sinh(hi)),
              accepts=lambda t, ctx: t.bound <= 3.0),
        Unary("cosh", "jnp.cosh({})", lambda lo, hi: (1.0, math.cosh(max(abs(lo), abs(hi)))),
              accepts=lambda t, ctx: t.bound <= 3.0),
        Unary("erf", "lax.erf({})", lambda lo, hi: (math.erf(lo), math.erf(hi))),
        Unary("expm1", "jnp.expm1({})", lambda lo, hi: (math.expm1(lo), math.expm1(hi)),
              accepts=lambda t, ctx: t.hi <= 3.0),
        Unary("log1p", "jnp.log1p({})", lambda lo, hi: (math.log1p(lo), math.log1p(hi)),
              accepts=lambda t, ctx: t.lo >= -0.8),
        Unary("rsqrt", "lax.rsqrt({})", lambda lo, hi: (1.0 / math.sqrt(hi), 1.0 / math.sqrt(lo)),
              accepts=lambda t, ctx: t.lo >= MARGIN),
        Unary("ceil", "jnp.ceil({})", lambda lo, hi: (math.ceil(lo), math.ceil(hi)), smooth=False),
        Unary("round", "jnp.round({})", lambda lo, hi: (round(lo) - 1.0, round(hi) + 1.0), smooth=False),
        Unary("sign", "jnp.sign({})", lambda lo, hi: (-1.0, 1.0), smooth=False),
        Unary("stop_gradient", "lax.stop_gradient({})", lambda lo, hi: (lo, hi), smooth=False),
        Unary("is_finite", "jnp.where(jnp.isfinite({0}), {0}, 0.0)", lambda lo, hi: (min(lo, 0.0), max(hi, 0.0))),
        # the operand where log(max(x, 0)) is finite (x > 0), else 0: is_finite of values
        # that are not all finite (a relu, not smooth at 0)
        Unary("relu_by_is_finite", "jnp.where(jnp.isfinite(jnp.log(jnp.maximum({0}, 0.0))), {0}, 0.0)",
              lambda lo, hi: (max(lo, 0.0), max(hi, 0.0)), smooth=False),
        Unary("copy", "jnp.copy({0})", lambda lo, hi: (lo, hi), linear=True),
        # x, or x flipped where a boolean reduction along the axis says so: the values
        # stay the operand's, their order is chosen by jnp.any / jnp.all
        AlongAxis("flip_unless_any_positive", "jnp.where(jnp.any({x} > 0, axis={axis}, "
                  "keepdims=True), {x}, jnp.flip({x}, axis={axis}))"),
        AlongAxis("flip_unless_all_positive", "jnp.where(jnp.all({x} > 0, axis={axis}, "
                  "keepdims=True), {x}, jnp.flip({x}, axis={axis}))"),
        Clamp(),
        Astype(),
        Binary("arctan2", "arctan2", lambda t, u: (-math.pi / 2, math.pi / 2), partner_ok=lambda u: u.lo >= MARGIN),
        Binary("rem", "remainder", lambda t, u: (-u.bound, u.bound), smooth=False,
               partner_ok=lambda u: u.away_from_zero(0.5), self_partner=False),
        Pow(),
        Cumulative("cumsum", _running_sum_bounds, linear=True),
        Cumulative("cumprod", _running_product_bounds),
        Cumulative("cummax", _running_extreme_bounds, smooth=False),
        Cumulative("cummin", _running_extreme_bounds, smooth=False),
        AlongAxis("sort", "jnp.sort({x}, axis={axis})"),
        SortPair(),
        AlongAxis("flip", "jnp.flip({x}, axis={axis})", smooth=True, linear=True),
        AlongAxis("take_argmax", "jnp.take_along_axis({x}, jnp.argmax({x}, axis={axis}, keepdims=True), "
                  "axis={axis})", axis_after="one"),
        AlongAxis("take_argmin", "jnp.take_along_axis({x}, jnp.argmin({x}, axis={axis}, keepdims=True), "
                  "axis={axis})", axis_after="one"),
        AlongAxis("min", "jnp.min({x}, axis={axis})", axis_after="gone"),
        AlongAxis("prod", "jnp.prod({x}, axis={axis})", smooth=True, axis_after="gone", product=True),
        ExpandDims(),
        AddIota(),
        Select(),
    ]


class SortPair(Op):
    """``lax.sort((x, y), num_keys=1)[1]``: a value of the operand's type (or twice the
    operand) sorted along a drawn axis by the operand's order (not smooth at ties)."""

    name, smooth, category = "sort_pair", False, "reduction"

    def accepts(self, t, ctx):
        return t.rank >= 1

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        partners = [b for b in ctx.recent() if b != a and ctx.values[b].shape == t.shape
                    and ctx.values[b].dtype == t.dtype]
        b = ctx.pick(draw, [None] + partners)
        axis = draw(st.integers(0, t.rank - 1))
        if b is None:   # the values differ from the keys, and so do their tangents
            values, u, inputs = f"2.0 * {ctx.name(a)}", t.with_(lo=2 * t.lo, hi=2 * t.hi), (a,)
        else:
            values, u, inputs = ctx.name(b), ctx.values[b], (a, b)
        expr = f"lax.sort(({ctx.name(a)}, {values}), dimension={axis}, num_keys=1)[1]"
        return Node(self.name, inputs, expr, u.with_(deps=t.deps | u.deps), (("axis", axis),))


class TopK(Op):
    """``lax.top_k(x, k)[0]``: the k largest along the last axis (not smooth at ties)."""

    name, smooth, category = "top_k", False, "reduction"

    def accepts(self, t, ctx):
        return t.rank >= 1

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        k = draw(st.integers(1, t.shape[-1]))
        return Node(self.name, (a,), f"lax.top_k({ctx.name(a)}, {k})[0]", t.with_(shape=t.shape[:-1] + (k,)),
                    (("k", k),))


# ------------------------------------------------------- windows and convolution


def _window_out(n, window, stride, dilation, padding):
    """Output length of a window op along one axis (None: the window does not fit)."""
    span = (window - 1) * dilation + 1
    if padding == "SAME":
        return -(-n // stride)
    lo, hi = (0, 0) if padding == "VALID" else padding
    return (n + lo + hi - span) // stride + 1 if n + lo + hi >= span else None


def _draw_padding(draw, span, same_ok=True, valid_ok=True):
    """'VALID', 'SAME' or an explicit (lo, hi) pair each below ``span``."""
    kind = draw(st.integers(0 if valid_ok else 1, 2 if same_ok else 1))
    if kind == 2:
        return "SAME"
    if kind == 1:
        return (draw(upto(span - 1)), draw(upto(span - 1)))
    return "VALID"


class Pool(Op):
    """``lax.reduce_window`` with add (sum pooling, linear), max or min (not
    smooth at ties) over drawn windows, strides, dilations and padding."""

    category = "window"

    def __init__(self, name, computation, init, *, smooth, linear=False):
        self.name, self.computation, self.init = name, computation, init
        self.smooth, self.linear = smooth, linear

    def accepts(self, t, ctx):
        return t.rank >= 1

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        summing = self.computation == "lax.add"
        window, strides, dilation = [], [], []
        for n in t.shape:
            window.append(draw(st.integers(1, min(n, 3))))
            strides.append(draw(st.integers(1, 2)))
            # max/min pooling has no VJP with window dilation (neither in JAX)
            dilation.append(draw(st.integers(1, 2)) if summing and window[-1] > 1 else 1)
        spans = [(w - 1) * d + 1 for w, d in zip(window, dilation)]
        padding = _draw_padding(draw, min(spans), same_ok=all(d == 1 for d in dilation))
        shape = tuple(_window_out(n, w, s, d, padding) for n, w, s, d in zip(t.shape, window, strides, dilation))
        if None in shape:  # a dilated window longer than the padded axis: undilated, 'SAME'
            padding, dilation = "SAME", [1] * t.rank
            shape = tuple(_window_out(n, w, s, 1, padding) for n, w, s in zip(t.shape, window, strides))
        count = math.prod(window)
        lo, hi = (count * min(t.lo, 0.0), count * max(t.hi, 0.0)) if summing else (t.lo, t.hi)
        pad_text = repr(padding) if isinstance(padding, str) else repr((padding,) * t.rank)
        dil = f", window_dilation={tuple(dilation)!r}" if any(d > 1 for d in dilation) else ""
        # the initial value in the operand's dtype: with float64 on, a bare Python float is
        # float64, which lax.reduce_window accepts only where it recognises the computation
        init = f"{ctx.name(a)}.dtype.type({self.init})"
        expr = (f"lax.reduce_window({ctx.name(a)}, {init}, {self.computation}, {tuple(window)!r}, "
                f"{tuple(strides)!r}, {pad_text}{dil})")
        return Node(self.name, (a,), expr, t.with_(shape=shape, lo=lo, hi=hi),
                    (("window", tuple(window)), ("strides", tuple(strides)), ("padding", padding)))


class Conv(Op):
    """``lax.conv_general_dilated`` of a rank-3 or rank-4 value with a constant
    kernel (so linear; outside linear programs sometimes scaled by a function of the
    operand): drawn dimension numbers, strides, padding, lhs and rhs dilation and
    feature groups."""

    name, linear, category = "conv", True, "linear algebra"

    def accepts(self, t, ctx):
        return t.rank in (3, 4)

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        spatial = "HW"[:t.rank - 2]
        lhs_spec = "".join(draw(st.permutations("NC" + spatial)))
        rhs_spec = "".join(draw(st.permutations("OI" + spatial)))
        out_spec = "".join(draw(st.permutations("NC" + spatial)))
        size = dict(zip(lhs_spec, t.shape))
        channels = size["C"]
        groups = ctx.pick(draw, [g for g in range(1, channels + 1) if channels % g == 0])
        out_features = groups * draw(st.integers(1, 2))
        kernel, strides, lhs_dil, rhs_dil = {}, [], [], []
        for d in spatial:
            kernel[d] = draw(st.integers(1, min(3, size[d])))
            strides.append(draw(st.integers(1, 2)))
            lhs_dil.append(draw(st.integers(1, 2)))
            rhs_dil.append(draw(st.integers(1, 2)) if kernel[d] > 1 else 1)
        spans = [(kernel[d] - 1) * r + 1 for d, r in zip(spatial, rhs_dil)]
        dilated = [(size[d] - 1) * ld + 1 for d, ld in zip(spatial, lhs_dil)]
        # JAX takes string padding only without lhs dilation (a transposed convolution)
        plain = all(ld == 1 for ld in lhs_dil)
        padding = _draw_padding(draw, min(spans), same_ok=plain, valid_ok=plain)
        if padding == "VALID" and any(s > n for s, n in zip(spans, dilated)):
            padding = (min(spans) - 1, min(spans) - 1)
        out_sizes = {}
        for d, n, s, span in zip(spatial, dilated, strides, spans):
            if padding == "SAME":
                out_sizes[d] = -(-size[d] // s)
            else:
                lo, hi = (0, 0) if padding == "VALID" else padding
                out_sizes[d] = max(0, (n + lo + hi - span) // s + 1)
        if any(v < 1 for v in out_sizes.values()):  # the window is longer than the padded input
            padding, out_sizes = "SAME", {d: -(-size[d] // s) for d, s in zip(spatial, strides)}
            lhs_dil = [1] * len(spatial)
        out_sizes.update(N=size["N"], C=out_features)
        shape = tuple(out_sizes[d] for d in out_spec)
        rhs_sizes = dict(kernel, O=out_features, I=channels // groups)
        rhs_shape = tuple(rhs_sizes[d] for d in rhs_spec)
        flat = draw(st.lists(st.sampled_from(CONSTANTS), min_size=math.prod(rhs_shape),
                             max_size=math.prod(rhs_shape)))
        taps = rhs_sizes["I"] * math.prod(kernel.values())
        raw = t.bound * taps * max(abs(c) for c in flat)
        scale = _power_of_two_below(raw, 4.0)
        bound = raw * scale
        # the operand's own dtype: conv takes no mixed dtypes (laws re-run programs in float64)
        kernel_text = f"jnp.asarray({np.array(flat).reshape(rhs_shape).tolist()!r}, {ctx.name(a)}.dtype)"
        if scale != 1.0:
            kernel_text += f" * {scale!r}"
        # outside linear programs, half the kernels are scaled by a factor in [0.75, 1.25] made
        # from the operand: the kernel is then differentiated too
        if not ctx.linear and draw(_BOOL):
            kernel_text = f"({kernel_text}) * (1.0 + 0.25 * jnp.tanh(jnp.mean({ctx.name(a)})))"
            bound *= 1.25
        pad_text = repr(padding) if isinstance(padding, str) else repr((padding,) * len(spatial))
        extras = ""
        if any(ld > 1 for ld in lhs_dil):
            extras += f", lhs_dilation={tuple(lhs_dil)!r}"
        if any(r > 1 for r in rhs_dil):
            extras += f", rhs_dilation={tuple(rhs_dil)!r}"
        if groups > 1:
            extras += f", feature_group_count={groups}"
        expr = (f"lax.conv_general_dilated({ctx.name(a)}, {kernel_text}, {tuple(strides)!r}, {pad_text}"
                f"{extras}, dimension_numbers={(lhs_spec, rhs_spec, out_spec)!r})")
        return Node(self.name, (a,), expr, t.with_(shape=shape, lo=-bound, hi=bound),
                    (("dimension_numbers", (lhs_spec, rhs_spec, out_spec)), ("padding", padding)))


# -------------------------------------------- well-conditioned matrix functions

#: Helpers of the matrix ops: each takes matrices with entries in [-1, 1] and
#: returns a well-conditioned one, so every decomposition is smooth there.
MATRIX_PREAMBLES = {
    "spd": """\
    def spd(m):
        # m m^T + n I: symmetric positive definite, eigenvalues in [n, n + n^2]
        n = m.shape[-1]
        return jnp.matmul(m, jnp.swapaxes(m, -1, -2)) + n * jnp.eye(n, dtype=m.dtype)
""",
    "dominant": """\
    def dominant(m):
        # strictly diagonally dominant by rows and columns (margin >= 1): no pivoting,
        # |inverse| <= 1, positive diagonal kept through Householder steps
        n = m.shape[-1]
        return m + (n + 1) * jnp.eye(n, dtype=m.dtype)
""",
    "reflectable": """\
    def reflectable(m):
        # as dominant(m), plus 1/8 below the diagonal: no column is exactly zero below
        # the diagonal, where LAPACK skips a reflection and QR's factors flip sign
        n = m.shape[-1]
        return m + (n + 1) * jnp.eye(n, dtype=m.dtype) + 0.125 * jnp.tri(n, k=-1, dtype=m.dtype)
""",
    "separated": """\
    def separated(m, symmetric):
        # diag(2, 4, ..., 2n) plus a perturbation of 2-norm <= 0.5: eigenvalues
        # (singular values) at least 1 apart and >= 1.5, so their derivatives exist
        n = m.shape[-1]
        e = (m + jnp.swapaxes(m, -1, -2)) * (0.25 / n) if symmetric else m * (0.5 / n)
        return jnp.eye(n, dtype=m.dtype) * (2 * jnp.arange(1, n + 1, dtype=m.dtype)) + e
""",
}


PREAMBLES.update(MATRIX_PREAMBLES)


def _square_matrix(draw, ctx, a):
    """Source of a batch of n x n matrices with entries in [-1, 1] built from
    value ``a``: the value itself when its last two axes are square, else a
    constant matrix whose rows its last axis scales (so that row pivoting depends
    on the value); with the batch shape and n."""
    t = ctx.values[a]
    x = ctx.name(a)
    if t.rank >= 2 and t.shape[-1] == t.shape[-2]:
        text, batch, raw = x, t.shape[:-2], t.bound
    else:
        n = t.shape[-1]
        const, cmax = ctx.const_literal(draw, (n, n), t.dtype)
        text, batch, raw = f"{x}[..., :, None] * {const}", t.shape[:-1], t.bound * cmax
    scale = _power_of_two_below(raw, 1.0)
    return (text if scale == 1.0 else f"{scale!r} * {text}"), batch, t.shape[-1]


def _matrix_ok(t):
    if t.rank == 0 or t.shape[-1] > 5:
        return False
    return (t.rank >= 2 and t.shape[-1] == t.shape[-2]) or fits(t.shape + t.shape[-1:])


class MatrixOp(Op):
    """A decomposition or solve of a well-conditioned matrix made from the
    operand (see :data:`MATRIX_PREAMBLES`): ``template`` is formatted with the
    matrix ``m`` (entries in [-1, 1]), ``n`` and drawn ``flags``."""

    category = "linear algebra"

    def __init__(self, name, templates, out, bound, helper, *, smooth=True, flags=()):
        self.name, self.templates, self.out, self.bound, self.helper = name, templates, out, bound, helper
        self.smooth, self.flags = smooth, flags

    def accepts(self, t, ctx):
        return _matrix_ok(t)

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        m, batch, n = _square_matrix(draw, ctx, a)
        i = ctx.pick(draw, list(range(len(self.templates))))
        flags = {f: draw(_BOOL) for f in self.flags}
        expr = self.templates[i].format(m=m, n=n, **flags)
        shape = batch + ((n, n) if self.out[i] == "matrix" else (n,))
        lo, hi = self.bound(n, i, flags)
        return Node(self.name, (a,), expr, t.with_(shape=shape, lo=lo, hi=hi), (("variant", i),) + tuple(flags.items()),
                    needs=(self.helper,) if self.helper else ())


def _matrix_ops():
    """Cholesky, triangular solve, LU, solve, QR, eigh and SVD of
    well-conditioned matrices (smooth), and LU pivoting of a general one."""
    tri = ("lax.linalg.triangular_solve(jnp.{{tri}}(dominant({m})), {m}, left_side={left_side}, "
           "lower={lower}, transpose_a={transpose_a}, unit_diagonal={unit_diagonal})")
    return [
        MatrixOp("cholesky", ["jnp.linalg.cholesky(spd({m}))"], ["matrix"],
                 lambda n, i, f: (-math.sqrt(2 * n), math.sqrt(2 * n)), "spd"),
        _TriangularSolve("triangular_solve", [tri], ["matrix"], lambda n, i, f: (-1.0, 1.0), "dominant",
                         flags=("left_side", "lower", "transpose_a", "unit_diagonal")),
        MatrixOp("lu", ["lax.linalg.lu(dominant({m}))[0]"], ["matrix"],
                 lambda n, i, f: (-(2 * n + 4), 2 * n + 4), "dominant"),
        MatrixOp("solve", ["jnp.linalg.solve(dominant({m}), {m})"], ["matrix"], lambda n, i, f: (-1.0, 1.0),
                 "dominant"),
        MatrixOp("qr", ["jnp.linalg.qr(reflectable({m}))[0]", "jnp.linalg.qr(reflectable({m}))[1]"],
                 ["matrix", "matrix"], lambda n, i, f: (-math.sqrt(n) * (n + 2), math.sqrt(n) * (n + 2)),
                 "reflectable"),
        # eigenvectors and singular vectors are defined up to sign: their squares are not
        MatrixOp("eigh", ["jnp.linalg.eigh(separated({m}, True))[0]",
                          "jnp.square(jnp.linalg.eigh(separated({m}, True))[1])"],
                 ["vector", "matrix"], lambda n, i, f: (0.0, 2 * n + 0.5), "separated"),
        MatrixOp("svd", ["jnp.linalg.svd(separated({m}, False), compute_uv=False)",
                         "jnp.square(jnp.linalg.svd(separated({m}, False))[0])"],
                 ["vector", "matrix"], lambda n, i, f: (0.0, 2 * n + 0.5), "separated"),
        # the rows of m in LU's pivot order: piecewise linear, so not smooth
        MatrixOp("lu_pivots", ["jnp.take_along_axis({m}, lax.linalg.lu_pivots_to_permutation("
                               "lax.linalg.lu(lax.stop_gradient({m}))[1], {n})[..., :, None], axis=-2)"],
                 ["matrix"], lambda n, i, f: (-1.0, 1.0), None, smooth=False),
    ]


class _TriangularSolve(MatrixOp):
    """The triangle (lower or upper, as ``lower`` says) of a dominant matrix
    solved against m; with a unit diagonal the inverse may grow to 2^n."""

    def make(self, draw, ctx, a):
        node = super().make(draw, ctx, a)
        flags = dict(node.params[1:])
        expr = node.expr.replace("{tri}", "tril" if flags["lower"] else "triu")
        bound = 2.0 ** ctx.values[a].shape[-1] if flags["unit_diagonal"] else 1.0
        return Node(node.op, node.inputs, expr, node.type.with_(lo=-bound, hi=bound), node.params, node.needs)


# ----------------------------------------------- integer bits, ulps and PRNG draws

#: floor(4 x) as int32: the integer operand of the bit ops
_INT = "lax.convert_element_type(jnp.floor(4.0 * {x}), jnp.int32)"


class Bits(Op):
    """Integer bit operations on an integer made from the operand (``floor(4 x)``
    or the float's own bits), converted back to the program's float dtype.
    Piecewise constant, so not smooth; the derivative is zero."""

    smooth, category = False, "integer bits"

    def __init__(self, name, template, bounds, shifts=(0,)):
        self.name, self.template, self.bounds, self.shifts = name, template, bounds, shifts

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        k = ctx.pick(draw, list(self.shifts))
        int_of = _INT.format(x=ctx.name(a))
        expr = self.template.format(
            x=ctx.name(a), n=int_of, k=k, scale=2.0 ** -(k + 2), up=2.0 ** (k - 2))
        lo, hi = self.bounds(t, k)
        return Node(self.name, (a,), expr, t.with_(lo=lo, hi=hi), (("k", k),))


def _bits_ops():
    back = "lax.convert_element_type({inner}, {{x}}.dtype)"
    return [
        Bits("shift_left", back.format(inner="lax.shift_left({n}, jnp.int32({k}))") + " * {scale!r}",
             lambda t, k: (t.lo - 0.25, t.hi), shifts=(1, 2, 3)),
        Bits("shift_right_arithmetic",
             back.format(inner="lax.shift_right_arithmetic({n}, jnp.int32({k}))") + " * {up!r}",
             lambda t, k: (t.lo - 2.0 ** (k - 2) - 0.25, t.hi), shifts=(1, 2, 3)),
        # of the integer's bits as uint32: XLA folds clz of a negative signed constant
        # wrongly (JAX 0.10.2, docs/properties.md); the same bits, so the same counts
        Bits("clz", back.format(inner="lax.clz(lax.bitcast_convert_type({n}, jnp.uint32))")
             + " * 0.125", lambda t, k: (0.0, 4.0)),
        # the sign and exponent bits of the operand as a float32 (the same bits when a
        # float32 program is re-run in float64)
        Bits("float_bits", back.format(inner="lax.shift_right_logical(lax.bitcast_convert_type("
                                             "lax.convert_element_type({x}, jnp.float32), jnp.int32), "
                                             "jnp.int32(23))") + " * 0.0078125", lambda t, k: (0.0, 4.0)),
    ]


class NextAfter(Op):
    """``lax.nextafter`` towards a constant, one ulp from the operand. JAX gives
    nextafter no derivative, so the operand's gradient is stopped first."""

    name, smooth, category = "nextafter", False, "elementwise unary"

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        c = draw(st.sampled_from(CONSTANTS))
        ulp = 1e-6 * max(1.0, t.bound)
        x = ctx.name(a)
        expr = f"lax.nextafter(lax.stop_gradient({x}), jnp.asarray({c!r}, {x}.dtype))"
        return Node(self.name, (a,), expr, t.with_(lo=t.lo - ulp, hi=t.hi + ulp), (("c", c),))


class CustomVmap(Op):
    """``x * tanh(y)`` of the operand and a value of its type (or the operand again) as a
    ``custom_vmap`` function with a correct batching rule (the same product, batched where
    either operand is). JAX differentiates it in forward mode only."""

    name, reverse, category = "custom_vmap", False, "custom batching"

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        partners = [b for b in ctx.recent() if b != a and ctx.values[b].shape == t.shape
                    and ctx.values[b].dtype == t.dtype]
        b = ctx.pick(draw, partners + [a])
        u = ctx.values[b]
        out = t.with_(lo=-t.bound, hi=t.bound, deps=t.deps | u.deps)
        return Node(self.name, (a, b), f"batched_product({ctx.name(a)}, {ctx.name(b)})", out,
                    needs=("custom_vmap",))


class PureCallback(Op):
    """``cos`` computed by NumPy in a ``pure_callback`` with a drawn ``vmap_method``, of a
    stopped gradient (a host callback has no derivative, in JAX as in impl)."""

    name, smooth, category = "pure_callback", False, "host callback"
    VMAP_METHODS = ("sequential", "expand_dims", "broadcast_all")

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        method = draw(st.sampled_from(self.VMAP_METHODS))
        x = ctx.name(a)
        expr = (f"backend.pure_callback(host_cos, backend.ShapeDtypeStruct({x}.shape, {x}.dtype), "
                f"lax.stop_gradient({x}), vmap_method={method!r})")
        return Node(self.name, (a,), expr, t.with_(lo=-1.0, hi=1.0), (("vmap_method", method),),
                    needs=("host_cos",))


PREAMBLES.update({
    "custom_vmap": """\
    @backend.custom_batching.custom_vmap
    def batched_product(x, y):
        return x * jnp.tanh(y)

    @batched_product.def_vmap
    def batched_product_rule(axis_size, in_batched, x, y):
        # elementwise: an unbatched operand broadcasts against the batched one's leading axis
        return x * jnp.tanh(y), in_batched[0] or in_batched[1]
""",
    "host_cos": """\
    def host_cos(a):
        import numpy   # runs on the host, on NumPy arrays
        return numpy.cos(a).astype(a.dtype)
""",
})


class RandomNoise(Op):
    """The operand plus float32 uniform or normal noise drawn with ``backend.random``
    from a key made of drawn integers (``PRNGKey`` then ``fold_in``: threefry
    hashes and random bits inside the program)."""

    name, category = "random", "prng"
    #: normal noise is scaled by 1/8; a normal made from a float32 uniform stays within 6
    NORMAL_BOUND = 0.75

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        seed, data = draw(st.integers(0, 2 ** 16)), draw(upto(3))
        normal = draw(_BOOL)
        key = f"backend.random.fold_in(backend.random.PRNGKey({seed}), {data})"
        if normal:
            noise = f"0.125 * backend.random.normal({key}, {t.shape!r}, jnp.float32)"
            lo, hi = t.lo - self.NORMAL_BOUND, t.hi + self.NORMAL_BOUND
        else:
            noise = f"0.25 * backend.random.uniform({key}, {t.shape!r}, jnp.float32)"
            lo, hi = t.lo, t.hi + 0.25
        return Node(self.name, (a,), f"{ctx.name(a)} + {noise}", t.with_(lo=lo, hi=hi),
                    (("seed", seed), ("data", data), ("normal", normal)))


def _erf_inv(y):
    """Inverse of math.erf on (-1, 1), by bisection (for bounds only)."""
    lo, hi = -6.0, 6.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if math.erf(mid) < y else (lo, mid)
    return 0.5 * (lo + hi)


def _primitive_ops():
    """Ops that bring in the rest of impl's primitive registry: scatters with
    multiply/min/max, cumlogsumexp, top_k, pooling, convolution, matrix
    decompositions, integer bit operations, nextafter, erf_inv and PRNG draws."""
    return [
        Cumulative("cumlogsumexp", _running_logsumexp_bounds),
        TopK(),
        Pool("sum_pool", "lax.add", "0.0", smooth=True, linear=True),
        Pool("max_pool", "lax.max", "-jnp.inf", smooth=False),
        Pool("min_pool", "lax.min", "jnp.inf", smooth=False),
        Conv(),
        *_matrix_ops(),
        *_bits_ops(),
        NextAfter(),
        RandomNoise(),
        BoundedUnary("erf_inv", "lax.erf_inv", 0.9, _erf_inv),
    ]


# ------------------------------------------- special functions and Fourier transforms


def _digamma(v):
    """digamma for v > 0 (for bounds only): the recurrence up to 6, then the asymptotic series."""
    acc = 0.0
    while v < 6.0:
        acc, v = acc - 1.0 / v, v + 1.0
    return acc + math.log(v) - 1.0 / (2 * v) - 1.0 / (12 * v ** 2) + 1.0 / (120 * v ** 4) - 1.0 / (252 * v ** 6)


#: lgamma is convex on (0, inf) with its minimum here
_LGAMMA_ARGMIN, _LGAMMA_MIN = 1.4616321449683623, -0.12148629053584961


def _lgamma_bounds(lo, hi, c):
    ends = (math.lgamma(lo), math.lgamma(hi))
    return (_LGAMMA_MIN if lo <= _LGAMMA_ARGMIN <= hi else min(ends)), max(ends)


def _polygamma_bounds(lo, hi, m):
    # psi^(m)(v) = (-1)^(m+1) m! sum_k (v+k)^-(m+1): one sign, magnitude falling in v and
    # at most m! (v^-(m+1) + v^-m / m)
    top = math.factorial(int(m)) * (lo ** -(m + 1) + lo ** -m / m)
    return (0.0, top) if m % 2 else (-top, 0.0)


def _zeta_bounds(lo, hi, s):
    # zeta(s, q) = sum_k (q+k)^-s, at most q^-s + q^(1-s) / (s-1), falling in q
    return 0.0, lo ** -s + lo ** (1 - s) / (s - 1)


def _full(field):
    """Template of a constant operand (the drawn constant ``field``, e.g. ``c`` or ``c[1]``)
    of the operand's shape and dtype: lax takes no mixed shapes or dtypes."""
    return "jnp.full({x}.shape, {%s!r}, {x}.dtype)" % field


class DomainFunction(Op):
    """A special function of the operand mapped into an interval inside its domain:
    ``center + 2^-k x``, the power of two (exact) chosen so that |2^-k x| <= radius.
    ``template`` is formatted with the mapped operand ``y``, the operand's name ``x``
    and a constant ``c`` drawn from ``consts`` (the other argument of a binary
    function, an order or a shape parameter); ``bounds(lo, hi, c)`` bounds the
    function on [lo, hi]."""

    category = "special function"

    def __init__(self, name, template, center, radius, bounds, *, consts=(None,), smooth=True):
        self.name, self.template, self.center, self.radius = name, template, center, radius
        self.bounds, self.consts, self.smooth = bounds, consts, smooth

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        x = ctx.name(a)
        scale = _power_of_two_below(t.bound, self.radius)
        y = f"{self.center!r} + {x}" if scale == 1.0 else f"{self.center!r} + {scale!r} * {x}"
        c = ctx.pick(draw, list(self.consts))
        lo, hi = self.bounds(self.center + scale * t.lo, self.center + scale * t.hi, c)
        expr = self.template.format(y=y, x=x, c=c)
        return Node(self.name, (a,), expr, t.with_(lo=lo, hi=hi), (("scale", scale), ("c", c)))


def _cbrt(v):
    return math.copysign(abs(v) ** (1.0 / 3.0), v)


def _special_function_ops():
    """impl.lax's special functions on operands inside their domains, with the
    derivatives finite: smooth except where JAX defines no (second) derivative."""
    return [
        Unary("asinh", "lax.asinh({})", lambda lo, hi: (math.asinh(lo), math.asinh(hi))),
        BoundedUnary("atanh", "lax.atanh", 0.75, math.atanh),
        DomainFunction("acosh", "lax.acosh({y})", 2.25, 1.0,
                       lambda lo, hi, c: (math.acosh(lo), math.acosh(hi))),
        # the cube root's slope is infinite at 0: only operands away from it, smooth or not
        Unary("cbrt", "lax.cbrt({})", lambda lo, hi: (_cbrt(lo), _cbrt(hi)),
              accepts=lambda t, ctx: t.away_from_zero()),
        Unary("exp2", "lax.exp2({})", lambda lo, hi: (2.0 ** lo, 2.0 ** hi), accepts=lambda t, ctx: t.hi <= 4.0),
        Unary("erfc", "lax.erfc({})", lambda lo, hi: (math.erfc(hi), math.erfc(lo))),
        DomainFunction("lgamma", "lax.lgamma({y})", 2.5, 2.0, _lgamma_bounds),
        DomainFunction("digamma", "lax.digamma({y})", 2.5, 2.0, lambda lo, hi, c: (_digamma(lo), _digamma(hi))),
        DomainFunction("polygamma", "lax.polygamma(" + _full("c") + ", {y})", 2.5, 1.5, _polygamma_bounds,
                       consts=(1.0, 2.0)),
        # the regularized incomplete gamma functions in x, of a constant shape a
        DomainFunction("igamma", "lax.igamma(" + _full("c") + ", {y})", 2.5, 2.0, lambda lo, hi, c: (0.0, 1.0),
                       consts=(0.5, 1.5, 2.5)),
        DomainFunction("igammac", "lax.igammac(" + _full("c") + ", {y})", 2.5, 2.0,
                       lambda lo, hi, c: (0.0, 1.0), consts=(0.5, 1.5, 2.5)),
        # ... and in a: their derivative in a is igamma_grad_a, which has no derivative
        # (neither in JAX), so not smooth (no Hessian)
        DomainFunction("igamma_in_a", "lax.{c[0]}({y}, " + _full("c[1]") + ")", 2.0, 1.0,
                       lambda lo, hi, c: (0.0, 1.0),
                       consts=(("igamma", 0.5), ("igammac", 1.5), ("igamma", 2.5)), smooth=False),
        # JAX defines no derivative of zeta: the operand's gradient is stopped first
        DomainFunction("zeta", "lax.zeta(" + _full("c") + ", lax.stop_gradient({y}))", 2.0, 1.0, _zeta_bounds,
                       consts=(2.0, 3.0), smooth=False),
        # betainc(a, b, x) in x only (JAX defines no derivative in a, b)
        DomainFunction("betainc", "lax.betainc(" + _full("c[0]") + ", " + _full("c[1]") + ", {y})",
                       0.5, 0.375, lambda lo, hi, c: (0.0, 1.0),
                       consts=((1.5, 2.0), (2.0, 1.5), (3.0, 3.0))),
        # exp(-|x|) I(x): a kink at 0 in the slope (i0e) or the curvature (i1e)
        Unary("bessel_i0e", "lax.bessel_i0e({})", lambda lo, hi: (0.0, 1.0), accepts=_abs_ok),
        Unary("bessel_i1e", "lax.bessel_i1e({})", lambda lo, hi: (-0.25, 0.25), accepts=_abs_ok),
        Bits("population_count", "lax.convert_element_type(lax.population_count({n}), {x}.dtype) * 0.125",
             lambda t, k: (0.0, 4.0)),
    ]


#: Helpers of the Fourier ops: complex intermediates made real again.
FOURIER_PREAMBLES = {
    "fourier": """\
    def power(z):
        # |z|^2 as the real part of z conj(z): smooth, unlike |z|
        return jnp.real(z * jnp.conj(z))

    def real_plus_imag(w, s):
        # both parts of a complex value in one real value (linear in w)
        return jnp.real(w) + s * jnp.imag(w)
""",
}


PREAMBLES.update(FOURIER_PREAMBLES)


class Fourier(Op):
    """A Fourier transform over 1 to 3 drawn axes inside a real-in, real-out composition:

    * ``rfft_filter`` (linear): ``irfftn(rfftn(x) * H)``, H a constant complex half-spectrum;
    * ``fft_filter`` (linear): ``ifftn(fftn(complex(x, y)) * H)`` of the operand and a value
      of its shape, its real part plus s times its imaginary part;
    * ``power_spectrum`` (smooth): ``real(Z conj(Z))`` of ``Z = rfftn(x)``.

    Each pair of transforms shares a drawn ``norm``; one axis is written with
    ``rfft``/``fft``, more with the ``n``-dimensional names. H is scaled by a power of two
    that keeps the result within [-4, 4] (the transforms pair into an isometry up to H)."""

    category = "fourier"

    def __init__(self, name, *, linear):
        self.name, self.linear = name, linear

    def accepts(self, t, ctx):
        return t.rank >= 1

    def _spectrum(self, draw, x, t, axes, last_half, raw):
        """A constant complex H broadcasting against the (half) spectrum; its source and max |H|."""
        shape = [1] * t.rank
        for i in axes:
            shape[i] = t.shape[i]
        if last_half:
            shape[axes[-1]] = t.shape[axes[-1]] // 2 + 1
        n = math.prod(shape)
        re = draw(st.lists(st.sampled_from(CONSTANTS), min_size=n, max_size=n))
        im = draw(st.lists(st.sampled_from(CONSTANTS), min_size=n, max_size=n))
        peak = max(math.hypot(r, i) for r, i in zip(re, im))
        scale = _power_of_two_below(raw * peak, 4.0)
        parts = [f"jnp.asarray({np.array(v).reshape(shape).tolist()!r}, {x}.dtype)" for v in (re, im)]
        if scale != 1.0:
            parts = [f"{p} * {scale!r}" for p in parts]
        return f"lax.complex({parts[0]}, {parts[1]})", peak * scale

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        x = ctx.name(a)
        axes = sorted(draw(st.lists(upto(t.rank - 1), min_size=1, max_size=min(3, t.rank), unique=True)))
        one = len(axes) == 1
        where = f"axis={axes[0]}" if one else f"axes={tuple(axes)!r}"
        return self._transform(draw, ctx, a, t, x, axes, one, where)


class PowerSpectrum(Fourier):
    """``real(Z conj(Z))`` of ``Z = rfftn(x)``, with a norm that keeps it within bounds."""

    def __init__(self):
        super().__init__("power_spectrum", linear=False)

    def accepts(self, t, ctx):
        return super().accepts(t, ctx) and fits((), t.bound ** 2)

    def _transform(self, draw, ctx, a, t, x, axes, one, where):
        m = math.prod(t.shape[i] for i in axes)
        gains = {"forward": 1.0, "ortho": m, None: m * m}
        norm = ctx.pick(draw, [n for n, gain in gains.items() if fits((), gain * t.bound ** 2)])
        z = f"jnp.fft.{'rfft' if one else 'rfftn'}({x}, {where}, norm={norm!r})"
        shape = tuple(t.shape[i] // 2 + 1 if i == axes[-1] else d for i, d in enumerate(t.shape))
        return Node(self.name, (a,), f"power({z})", t.with_(shape=shape, lo=0.0, hi=gains[norm] * t.bound ** 2),
                    (("axes", tuple(axes)), ("norm", norm)), needs=("fourier",))


class RfftFilter(Fourier):
    """``irfftn(rfftn(x) * H)``, H a constant complex half-spectrum (linear)."""

    def __init__(self):
        super().__init__("rfft_filter", linear=True)

    def _transform(self, draw, ctx, a, t, x, axes, one, where):
        lengths = tuple(t.shape[i] for i in axes)
        norm = ctx.pick(draw, [None, "ortho", "forward"])
        raw = math.sqrt(math.prod(lengths)) * t.bound
        h, peak = self._spectrum(draw, x, t, axes, True, raw)
        size = f"n={lengths[0]}" if one else f"s={lengths!r}"
        forward = f"jnp.fft.{'rfft' if one else 'rfftn'}({x}, {where}, norm={norm!r})"
        expr = f"jnp.fft.{'irfft' if one else 'irfftn'}({forward} * {h}, {size}, {where}, norm={norm!r})"
        bound = raw * peak
        return Node(self.name, (a,), expr, ValueType(t.shape, t.dtype, -bound, bound, t.deps),
                    (("axes", tuple(axes)), ("norm", norm)))


class FftFilter(Fourier):
    """``ifftn(fftn(complex(x, y)) * H)`` of the operand and a value of its shape, its
    real part plus s times its imaginary part (linear)."""

    def __init__(self):
        super().__init__("fft_filter", linear=True)

    def _transform(self, draw, ctx, a, t, x, axes, one, where):
        m = math.prod(t.shape[i] for i in axes)
        norm = ctx.pick(draw, [None, "ortho", "forward"])
        b = ctx.pick(draw, [b for b in ctx.recent() if ctx.values[b].shape == t.shape])
        u = ctx.values[b]
        s = draw(st.sampled_from(CONSTANTS))
        raw = math.sqrt(1 + s * s) * math.sqrt(m) * math.hypot(t.bound, u.bound)
        h, peak = self._spectrum(draw, x, t, axes, False, raw)
        fwd, inv = ("fft", "ifft") if one else ("fftn", "ifftn")
        z = f"lax.complex({x}, {ctx.name(b)})"
        w = f"jnp.fft.{inv}(jnp.fft.{fwd}({z}, {where}, norm={norm!r}) * {h}, {where}, norm={norm!r})"
        bound = raw * peak
        return Node(self.name, (a, b), f"real_plus_imag({w}, {s!r})",
                    ValueType(t.shape, t.dtype, -bound, bound, t.deps | u.deps),
                    (("axes", tuple(axes)), ("norm", norm)), needs=("fourier",))


def _fourier_ops():
    """FFTs of all four kinds (fft, ifft, rfft, irfft) and the complex parts (complex,
    real, imag, conj) inside compositions whose values are real."""
    return [RfftFilter(), FftFilter(), PowerSpectrum()]


# ------------------------------------ compiler controls, general reductions, solvers


def _same_typed_partner(draw, ctx, a):
    """Another value of ``a``'s shape and dtype, preferring recent ones, or ``a`` itself:
    a rule that swaps or drops one of two same-typed operands shows only with two."""
    t = ctx.values[a]
    others = [b for b in ctx.recent() if b != a and ctx.values[b].shape == t.shape
              and ctx.values[b].dtype == t.dtype]
    return ctx.pick(draw, others) if others else a


class OptimizationBarrier(Op):
    """``lax.optimization_barrier`` of the operand and a value of its type (the identity,
    as a pair), then ``p - 0.5 q`` of the pair: linear, each operand weighed differently."""

    name, linear, category = "optimization_barrier", True, "compiler control"

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        b = _same_typed_partner(draw, ctx, a)
        u = ctx.values[b]
        lo, hi = t.lo - 0.5 * u.hi, t.hi - 0.5 * u.lo
        if not fits(t.shape, lo, hi):
            b, u, lo, hi = a, t, 0.5 * t.lo, 0.5 * t.hi
        expr = f"(lambda p, q: p - 0.5 * q)(*lax.optimization_barrier(({ctx.name(a)}, {ctx.name(b)})))"
        return Node(self.name, (a, b), expr, ValueType(t.shape, t.dtype, lo, hi, t.deps | u.deps))


class ReducePrecision(Op):
    """``lax.reduce_precision`` to at least the operand dtype's own exponent and mantissa
    bits (``jnp.finfo`` of the dtype at trace time, so a float32 program re-run in
    float64 keeps float64's): the identity, so smooth and linear, as JAX differentiates
    it. Fewer bits would round: piecewise constant, where JAX's linear derivative is not
    the derivative finite differences see."""

    name, linear, category = "reduce_precision", True, "compiler control"

    def make(self, draw, ctx, a):
        extra_exponent, extra_mantissa = draw(upto(2)), draw(upto(2))
        x = ctx.name(a)
        expr = (f"lax.reduce_precision({x}, exponent_bits=jnp.finfo({x}.dtype).nexp + {extra_exponent}, "
                f"mantissa_bits=jnp.finfo({x}.dtype).nmant + {extra_mantissa})")
        return Node(self.name, (a,), expr, ctx.values[a],
                    (("extra_exponent", extra_exponent), ("extra_mantissa", extra_mantissa)))


SOLVER_PREAMBLES = {
    "complex_product": """\
    def complex_product(re, im, axes):
        # the product of the complex numbers re + i im over axes, as (real, imaginary):
        # lax.reduce with a computation no dedicated reduction has (associative, commutative)
        def times(p, q):
            return p[0] * q[0] - p[1] * q[1], p[0] * q[1] + p[1] * q[0]
        one, zero = jnp.ones((), re.dtype), jnp.zeros((), re.dtype)
        return lax.reduce((re, im), (one, zero), times, axes)
""",
    "linear_solve": """\
    def linear_solve(a, b, symmetric):
        # x with a x = b, differentiated through the equation by lax.custom_linear_solve;
        # the transposed solve is given unless a is symmetric
        def matvec(v):
            return jnp.matmul(a, v)

        def solve(_, r):
            return jnp.linalg.solve(a, r)

        def transpose_solve(_, r):
            return jnp.linalg.solve(jnp.swapaxes(a, -1, -2), r)
        return lax.custom_linear_solve(matvec, b, solve, None if symmetric else transpose_solve,
                                       symmetric=symmetric)
""",
}


PREAMBLES.update(SOLVER_PREAMBLES)


class ComplexProduct(Op):
    """``lax.reduce`` with a computation of its own (the complex product of pairs) over
    drawn axes of ``1 + s x`` and ``s y`` (y another value of x's type, or x), then
    ``real + 0.5 imag``. ``s`` (a power of two) keeps every factor within 1/(2N) of 1 for
    N reduced elements, so the product stays within [-2.1, 2.1]. Smooth, not linear."""

    name, category = "reduce", "reduction"

    def accepts(self, t, ctx):
        return t.rank >= 1

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        b = _same_typed_partner(draw, ctx, a)
        u = ctx.values[b]
        axes = tuple(i for i in range(t.rank) if draw(_BOOL)) or (t.rank - 1,)
        count = math.prod(t.shape[i] for i in axes)
        s = _power_of_two_below(max(t.bound, u.bound), 1.0 / (2 * count))
        shape = tuple(n for i, n in enumerate(t.shape) if i not in axes)
        expr = (f"(lambda p: p[0] + 0.5 * p[1])(complex_product(1.0 + {s!r} * {ctx.name(a)}, "
                f"{s!r} * {ctx.name(b)}, {axes!r}))")
        # |1 + s x + i s y| <= 1 + 1/(sqrt(2) N): the product's modulus is below e^0.71 < 2.1,
        # so real + 0.5 imag within 1.5 * 2.1
        return Node(self.name, (a, b), expr, ValueType(shape, t.dtype, -3.2, 3.2, t.deps | u.deps),
                    (("axes", axes),), needs=("complex_product",))


class TridiagonalSolve(Op):
    """``lax.linalg.tridiagonal_solve`` of the operand (``[..., m, n]``, rank 2 or more)
    for a strictly diagonally dominant tridiagonal matrix (diagonal in [1.75, 2.25],
    off-diagonals within 1/4: |solution| <= |operand|): in linear programs its diagonals
    are constants, otherwise they are made from the operand's first and last columns,
    each diagonal a different multiple so that none stands for another."""

    name, linear, category = "tridiagonal_solve", True, "linear algebra"

    def accepts(self, t, ctx):
        return t.rank >= 2

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        x = ctx.name(a)
        if ctx.linear:
            diagonals = []
            for _ in range(3):
                const, cmax = ctx.const_literal(draw, t.shape[:-1], t.dtype)
                diagonals.append(f"{0.25 / cmax!r} * {const}")
            dl, d, du = diagonals
            d = f"2.0 + {d}"
        else:
            s = _power_of_two_below(t.bound, 0.25)
            first, last = f"{s!r} * {x}[..., 0]", f"{s!r} * {x}[..., -1]"
            dl, d, du = first, f"2.0 - {first}", f"-{last}"
        expr = f"lax.linalg.tridiagonal_solve({dl}, {d}, {du}, {x})"
        return Node(self.name, (a,), expr, t.with_(lo=-t.bound, hi=t.bound))


class LinearSolve(Op):
    """``lax.custom_linear_solve`` of ``A x = m`` (m from the operand, entries in [-1, 1],
    as for ``solve``): A is ``dominant(m)`` or, drawn symmetric, ``spd(m)`` (no transposed
    solve given: the solve is its own transpose); in linear programs A is made from a
    constant matrix instead, so the solution is linear in the operand. |x| <= 1 either way
    (dominant: |A^-1| <= 1 by rows; spd: eigenvalues >= n)."""

    name, linear, category = "custom_linear_solve", True, "linear algebra"

    def accepts(self, t, ctx):
        return _matrix_ok(t)

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        m, batch, n = _square_matrix(draw, ctx, a)
        symmetric = draw(_BOOL)
        helper = "spd" if symmetric else "dominant"
        if ctx.linear:
            const, cmax = ctx.const_literal(draw, (n, n), t.dtype)
            matrix = f"{helper}({1.0 / cmax!r} * {const})"
        else:
            matrix = f"{helper}({m})"
        expr = f"linear_solve({matrix}, {m}, {symmetric})"
        return Node(self.name, (a,), expr, t.with_(shape=batch + (n, n), lo=-1.0, hi=1.0),
                    (("symmetric", symmetric),), needs=(helper, "linear_solve"))


# ----------------------------------------------------------------- vocabulary


class InnerJit(Op):
    """``backend.jit(lambda a, b: ...)(x, y)``: a jitted call inside the program, so the
    transformations meet the call primitive with several differentiated, batched
    operands of possibly equal types (a jit outside the program never does). Each
    body weighs its two operands differently: a rule that drops or swaps one shows."""

    name, linear, category = "jit_call", True, "call"
    BODIES = (("a - 0.5 * b", True), ("a * jnp.sin(b)", False))

    def make(self, draw, ctx, a):
        t = ctx.values[a]
        bodies = [b for b in self.BODIES if b[1] or not ctx.linear]
        body, linear = ctx.pick(draw, bodies)
        options = []
        for b in ctx.recent():
            u = ctx.values[b]
            shape = broadcast_shapes(t.shape, u.shape)
            lo, hi = (t.lo - 0.5 * u.hi, t.hi - 0.5 * u.lo) if linear else (-t.bound, t.bound)
            if shape is not None and fits(shape, lo, hi):
                options.append((b, shape, lo, hi))
        # another value first: with the operand twice, swapping the two changes nothing
        options = [o for o in options if o[0] != a] or options or [(a, t.shape, -t.bound, t.bound)]
        b, shape, lo, hi = ctx.pick(draw, options)
        out = ValueType(shape, t.dtype, lo, hi, t.deps | ctx.values[b].deps)
        expr = f"backend.jit(lambda a, b: {body})({ctx.name(a)}, {ctx.name(b)})"
        return Node(self.name, (a, b), expr, out, (("body", body),))


def base_ops():
    """The vocabulary's ops in drawing order (a program picks ops by index in it)."""
    return [
        Unary("neg", "jnp.negative({})", lambda lo, hi: (-hi, -lo), linear=True),
        Scale(),
        Unary("sin", "jnp.sin({})", lambda lo, hi: (-1.0, 1.0)),
        Unary("cos", "jnp.cos({})", lambda lo, hi: (-1.0, 1.0)),
        Unary("tanh", "jnp.tanh({})", lambda lo, hi: (math.tanh(lo), math.tanh(hi))),
        Unary("logistic", "lax.logistic({})", lambda lo, hi: (_sigmoid(lo), _sigmoid(hi))),
        Unary("exp", "jnp.exp({})", lambda lo, hi: (math.exp(lo), math.exp(hi)),
              accepts=lambda t, ctx: t.hi <= 3.0),
        Unary("log", "jnp.log({})", lambda lo, hi: (math.log(lo), math.log(hi)),
              accepts=lambda t, ctx: t.lo >= MARGIN),
        Unary("sqrt", "jnp.sqrt({})", lambda lo, hi: (math.sqrt(lo), math.sqrt(hi)),
              accepts=lambda t, ctx: t.lo >= MARGIN),
        Unary("square", "jnp.square({})", _square_bounds, accepts=lambda t, ctx: t.bound <= 10.0),
        Unary("integer_pow", "lax.integer_pow({}, 3)", lambda lo, hi: (lo ** 3, hi ** 3),
              accepts=lambda t, ctx: t.bound <= 4.0),
        Unary("abs", "jnp.abs({})", _abs_bounds, accepts=_abs_ok),
        Unary("floor", "jnp.floor({})", lambda lo, hi: (math.floor(lo), math.floor(hi)), smooth=False),
        Binary("add", "add", lambda t, u: (t.lo + u.lo, t.hi + u.hi), linear=True),
        Binary("sub", "subtract", lambda t, u: (t.lo - u.hi, t.hi - u.lo), linear=True, self_partner=False),
        Binary("mul", "multiply", interval_mul),
        Binary("div", "divide", _div_bounds, partner_ok=lambda u: u.away_from_zero(0.5), self_partner=False),
        Binary("maximum", "maximum", lambda t, u: (max(t.lo, u.lo), max(t.hi, u.hi)), smooth=False),
        Binary("minimum", "minimum", lambda t, u: (min(t.lo, u.lo), min(t.hi, u.hi)), smooth=False),
        Where(),
        Reduction("sum", grows=True, linear=True),
        Reduction("mean", grows=False, linear=True),
        Reduction("max", grows=False, smooth=False),
        Contraction("dot", dot_shape, ranks=(1, 2)),
        Contraction("matmul", matmul_shape, ranks=(1, 2, 3, 4)),
        Mix(),
        Reshape(),
        Transpose(),
        BroadcastTo(),
        Slice(),
        Index(),
        Take(),
        DynamicSlice(),
        DynamicUpdateSlice(),
        Concatenate(),
        Pad(),
        CustomUnary("custom_jvp", "custom_sin", lambda lo, hi: (-1.0, 1.0)),
        CustomUnary("custom_vjp", "custom_tanh", lambda lo, hi: (math.tanh(lo), math.tanh(hi))),
        LinearCall(),
        InnerJit(),
    ] + _at_ops() + _more_ops() + _primitive_ops() + _special_function_ops() + _fourier_ops()
