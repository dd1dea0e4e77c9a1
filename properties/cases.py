"""Cases the laws run on, drawn from ``strategies`` (or the private fallback).

Each case is a small object with ``describe()`` (one line for messages) and
``source()`` (runnable Python reproducing it, for reports).
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field

import jax
import numpy as np
from hypothesis import strategies as st

import strategies as _real
from strategies.source import Case, args_literal, array_literal


def args_source(args):
    return f"args = {args_literal(args)}\n"


def _program_source(program):
    try:
        return program.source()
    except Exception as exc:  # a report must still be written
        return f"# program.source() failed: {exc!r}\n# {program!r}\n"


@dataclass(repr=False)
class ProgramCase(Case):
    """A program returning one array, and its arguments."""
    program: object
    args: tuple

    @property
    def dtype(self):
        return min((np.asarray(a).dtype for a in self.args),
                   key=lambda d: np.finfo(d).bits)

    def describe(self):
        shapes = ", ".join(f"{np.asarray(a).dtype}{list(np.shape(a))}" for a in self.args)
        # the source is in text(): a program's ops name it here
        return f"program {getattr(self.program, 'ops', self.program)!r} on ({shapes})"

    def text(self):
        return _program_source(self.program)

    def example(self):
        return args_source(self.args) + "f = lambda *xs: program(jax, *xs)\n"


#: the vmap cases are strategies' own: one level (``axis_size``) or levels (``axis_sizes``)
VmapCase, NestedVmapCase = _real.VmapCase, _real.NestedVmapCase


@dataclass
class LinearCase:
    """A linear function with a (possibly wrong) custom transpose."""
    linear: object

    @property
    def residuals(self):
        return self.linear.example_args[0]

    @property
    def x(self):
        return self.linear.example_args[1]

    @property
    def dtype(self):
        return np.asarray(jax.tree_util.tree_leaves(self.x)[0]).dtype

    def describe(self):
        return repr(self.linear)

    def source(self):
        src = getattr(self.linear, "source", None)
        return src() if callable(src) else repr(self.linear)


# ---------------------------------------------------------------------------
# strategies for the laws


# ---------------------------------------------------------------------------
# focus: mutation testing restricts the strategies to what reaches one primitive


class Irrelevant(Exception):
    """The focus of a mutation run excludes every case of this strategy."""


@dataclass(frozen=True)
class Focus:
    """What a mutation run keeps of the case strategies (see :func:`focus`)."""
    ops: tuple | None = None
    named: tuple | None = None
    control: tuple | None = None
    families: tuple = ()


#: the focus in effect where a strategy is made (None: every case); a context variable,
#: so a focus holds only inside its ``with`` block, in its own thread or task
_focus: contextvars.ContextVar[Focus | None] = contextvars.ContextVar("focus", default=None)


@contextlib.contextmanager
def focus(*, ops=None, named=None, control=None, families=()):
    """Restrict every case strategy made meanwhile to the cases that exercise
    one primitive (``tools.mutation``). ``ops``: the vocabulary ops of
    program-based strategies (None: those strategies are out of focus);
    ``named``: named-axis ops; ``control``: control-flow kinds; ``families``:
    other strategy families kept whole ("custom", "remat", "prng", "piles").
    A strategy with nothing left in focus raises :class:`Irrelevant`."""
    token = _focus.set(Focus(None if ops is None else tuple(ops), None if named is None else tuple(named),
                             None if control is None else tuple(control), tuple(families)))
    try:
        yield
    finally:
        _focus.reset(token)


def _whole(family):
    f = _focus.get()
    if f is not None and family not in f.families:
        raise Irrelevant(family)


def _program_options(smooth=False, linear=False, **options):
    """program_cases options with the focus applied (ops restricted)."""
    options.update(smooth=smooth, linear=linear)
    f = _focus.get()
    if f is None:
        return options
    if f.ops is None:
        raise Irrelevant("programs")
    vocabulary = _real.VOCABULARY
    allowed = [o for o in f.ops if o in vocabulary and o not in _real.CUSTOM_KINDS
               and (not smooth or vocabulary[o].smooth) and (not linear or vocabulary[o].linear)]
    allowed = [o for o in allowed if o in options.get("ops", allowed)]
    if not allowed:
        raise Irrelevant(f"programs (smooth={smooth}, linear={linear})")
    options["ops"] = tuple(allowed)
    return options


def _program_cases(**options):
    return _real.program_cases(**_program_options(**options))


def programs(*, smooth=False, linear=False, dtype=None, max_ops=6, dense=False, ops=None):
    """(program, args) cases from strategies.program_cases (``dense``: ending
    in a constant non-symmetric matrix, so Jacobians are dense and non-square;
    ``ops``: only these vocabulary ops)."""
    options = {} if ops is None else {"ops": tuple(ops)}
    return _program_cases(
        smooth=smooth, linear=linear, dtype=dtype, max_ops=max_ops, dense=dense, **options).map(
        lambda pa: ProgramCase(pa[0], tuple(pa[1])))


#: ops whose jvp is the derivative wherever finite differences see one: every op
#: but those whose gradient is stopped by definition (stop_gradient; nextafter and
#: zeta, drawn of a stopped gradient: JAX defines no derivative for them)
PIECEWISE_OPS = tuple(o for o in _real.VOCABULARY
                      if o not in ("stop_gradient", "nextafter", "zeta") and o not in _real.CUSTOM_KINDS)


def _out_ndim(program):
    return len(program.output_type[0])


@st.composite
def _batched_axes(draw, args, size):
    """Per-argument batch axis (None = shared) and the batched arguments.

    At least one argument is batched.  Batched arrays come from
    strategies.batched_arrays: every slice differs, so a vmap that mixes up
    batch elements cannot hide behind equal slices.
    """
    axes = [draw(st.one_of(st.none(), st.integers(-(np.ndim(x) + 1), np.ndim(x))))
            for x in args]
    if all(a is None for a in axes):
        axes[draw(st.integers(0, len(args) - 1))] = 0
    batched = []
    for x, ax in zip(args, axes):
        if ax is None:
            batched.append(x)
        else:
            batched.append(draw(_real.batched_arrays(size, np.asarray(x).dtype, np.shape(x),
                                                     axis=ax)))
    return tuple(axes), tuple(batched)


@st.composite
def _vmap_cases(draw, program_cases):
    program, args = draw(program_cases)
    size = draw(st.integers(1, 3))
    in_axes, batched = draw(_batched_axes(args, size))
    nd = _out_ndim(program)
    out_axes = draw(st.integers(-(nd + 1), nd))
    return VmapCase(program, batched, in_axes, out_axes, size)


@dataclass(frozen=True, repr=False)
class ChunkedVmapCase(VmapCase):
    """A vmap case and a chunk size (1 up to one past the batch size)."""
    chunk_size: int = 1

    def describe(self):
        return super().describe() + f" chunk_size={self.chunk_size}"

    def example(self):
        return super().example() + f"chunk_size = {self.chunk_size}\n"


@st.composite
def _chunked_cases(draw, program_cases):
    program, args = draw(program_cases)
    size = draw(st.integers(1, 5))
    in_axes, batched = draw(_batched_axes(args, size))
    nd = _out_ndim(program)
    out_axes = draw(st.integers(-(nd + 1), nd))
    return ChunkedVmapCase(program, batched, in_axes, out_axes, size, chunk_size=draw(st.integers(1, size + 1)))


def chunked_vmaps(*, smooth=True, dtype=None, max_ops=5):
    """vmap cases (batch sizes 1 to 5) with a chunk size from 1 to one past the batch size."""
    return _chunked_cases(_program_cases(smooth=smooth, dtype=dtype, max_ops=max_ops))


@st.composite
def _reduce_axes_cases(draw, program_cases):
    program, args = draw(program_cases)
    size = draw(st.integers(1, 3))
    axes, batched = draw(_batched_axes(args[1:], size))
    return VmapCase(program, (args[0],) + batched, (None,) + axes, 0, size)


def reduce_axes_cases(*, dtype=None, max_ops=5):
    """Smooth programs of 2 or 3 inputs: the first shared (in_axes None), the others batched."""
    return _reduce_axes_cases(st.integers(2, 3).flatmap(lambda n: _program_cases(
        smooth=True, dtype=dtype, max_ops=max_ops, num_inputs=n)))


def vmaps(*, smooth=False, dtype=None, max_ops=6):
    """Programs with batched arguments and a random in_axes / out_axes spec."""
    return _vmap_cases(_program_cases(smooth=smooth, dtype=dtype, max_ops=max_ops))


@st.composite
def _nested_cases(draw, program_cases):
    program, args = draw(program_cases)
    outer_size, inner_size = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    inner_axes, mid = draw(_batched_axes(args, inner_size))
    outer_axes, full = draw(_batched_axes(mid, outer_size))
    nd = _out_ndim(program)
    inner_out = draw(st.integers(-(nd + 1), nd))
    outer_out = draw(st.integers(-(nd + 2), nd + 1))
    return NestedVmapCase(program, full, (outer_axes, inner_axes), (outer_out, inner_out),
                          (outer_size, inner_size))


def nested_vmaps(*, dtype=None, max_ops=5):
    """Programs under two vmaps: axes are given per level as (outer, inner)."""
    return _nested_cases(_program_cases(dtype=dtype, max_ops=max_ops))


def pytree_vmaps(*, max_depth=3):
    """1 to ``max_depth`` nested vmaps over pytree arguments."""
    options = _program_options(max_ops=4)
    return st.integers(1, max_depth).flatmap(
        lambda d: _real.nested_vmap_cases(depth=d, pytree_args=True, **options))


def control_flows(*, kinds=_real.CONTROL_KINDS, smooth=False, dtype=None):
    """strategies.control_flow_cases: bodies are drawn programs, carries pytrees."""
    f = _focus.get()
    if f is not None:
        kinds = tuple(k for k in kinds if k in (f.control or ()))
        if not kinds:
            raise Irrelevant("control flow")
    return _real.control_flow_cases(kinds=kinds, smooth=smooth, dtype=dtype)


#: collectives and elementwise ops JAX can differentiate under vmap (all but pmax/pmin)
NAMED_SMOOTH_OPS = tuple(o for o in _real.COLLECTIVES + _real.named.ELEMENTWISE
                         if o not in ("pmax", "pmin"))


def named_axes(**options):
    """strategies.named_axis_cases: nested vmaps with drawn names and collectives."""
    f = _focus.get()
    if f is not None:
        ops = options.get("ops", _real.COLLECTIVES + _real.named.ELEMENTWISE)
        focused = tuple(o for o in ops if o in (f.named or ()))
        if not focused:
            raise Irrelevant("named axes")
        require = tuple(o for o in options.get("require", focused) if o in focused)
        if not require:
            raise Irrelevant("named axes")
        keep = set(focused) | (set(_real.named.ELEMENTWISE) & set(ops))
        options = dict(options, ops=tuple(o for o in ops if o in keep), require=require)
    return _real.named_axis_cases(**options)


def piles(**options):
    """strategies.pile_cases: ragged lists (lengths 0 to 4) and a per-element function."""
    _whole("piles")
    return _real.pile_cases(**options)


def prngs(**options):
    """strategies.prng_cases: keys, splits, fold_in and draws around a float input."""
    _whole("prng")
    return _real.prng_cases(**options)


def custom_wrappers(**options):
    """strategies.custom_wrapper_cases: custom_jvp/custom_vjp around drawn programs."""
    _whole("custom")
    return _real.custom_wrapper_cases(**options)


def shardings(**options):
    """strategies.sharding_cases: drawn meshes over 8 devices and PartitionSpecs."""
    _whole("sharding")
    return _real.sharding_cases(**options)


def shard_maps(**options):
    """strategies.shard_map_cases (collectives JAX can differentiate: no pmax/pmin)."""
    _whole("sharding")
    options.setdefault("ops", NAMED_SMOOTH_OPS)
    return _real.shard_map_cases(**options)


def remats(**options):
    """strategies.remat_cases: checkpoint with a drawn policy around a drawn body."""
    _whole("remat")
    return _real.remat_cases(**options)


def stacks(**options):
    """strategies.transformation_stacks: up to four transformations with drawn parameters
    over a small smooth program, with dtype and shape corners (``options``: its own)."""
    program = _program_options(smooth=True)
    ops = {"ops": program["ops"]} if "ops" in program else {}
    return _real.transformation_stacks(**options, **ops)


def linear_functions(*, wrong_transpose=False):
    """Linear functions with a transpose for linear_call (pytree kind included)."""
    _whole("custom")
    return _real.linear_functions(wrong_transpose=wrong_transpose,
                                  kinds=_real.LINEAR_KINDS).map(LinearCase)


# ---------------------------------------------------------------------------
# custom-rule cases: F(w, x) = h(w * x) + w with a rule for h'


def _sigmoid(np_, z):
    return 1.0 / (1.0 + np_.exp(-z))


#: name -> (h, true h', a plausible wrong h')
ELEMENTARY = {
    "sin": (lambda np_, z: np_.sin(z), lambda np_, z: np_.cos(z),
            lambda np_, z: np_.cos(z) + 0.5),
    "tanh": (lambda np_, z: np_.tanh(z), lambda np_, z: 1.0 - np_.tanh(z) ** 2,
             lambda np_, z: 1.0 + np_.tanh(z) ** 2),
    "cube": (lambda np_, z: z * z * z, lambda np_, z: 3.0 * z * z,
             lambda np_, z: z * z),
    "softplus": (lambda np_, z: np_.log1p(np_.exp(z)), _sigmoid,
                 lambda np_, z: np_.exp(z)),
    "gauss": (lambda np_, z: np_.exp(-z * z), lambda np_, z: -2.0 * z * np_.exp(-z * z),
              lambda np_, z: np_.exp(-z * z)),
}


@dataclass
class CustomCase:
    """A function F(w, x) = h(w*x) + w with a custom derivative rule.

    ``rule`` is 'true' (the derivative) or 'wrong' (deliberately not);
    ``claims_true`` is what the law is told -- a wrong rule claimed true is
    the broken input the true-rule laws must catch.  ``bad_fwd`` makes a
    custom_vjp fwd return a primal output that is not F's.
    """
    h: str
    rule: str
    w: np.ndarray
    x: np.ndarray
    batch: np.ndarray = None  # a batch of x for vmap laws
    claims_true: bool = None
    bad_fwd: bool = False
    optimize_remat: bool = False   # custom_vjp's defvjp(..., optimize_remat=True)
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.claims_true is None:
            self.claims_true = self.rule == "true"

    @property
    def dtype(self):
        return np.asarray(self.x).dtype

    def primal(self, np_):
        h = ELEMENTARY[self.h][0]
        return lambda w, x: h(np_, w * x) + w

    def dh(self, np_):
        entry = ELEMENTARY[self.h]
        d = entry[1] if self.rule == "true" else entry[2]
        return lambda z: d(np_, z)

    def jvp_rule(self, np_):
        """(primals, tangents) -> (out, tangent_out), computed directly."""
        F, dh = self.primal(np_), self.dh(np_)

        def rule(primals, tangents):
            (w, x), (tw, tx) = primals, tangents
            return F(w, x), dh(w * x) * (x * tw + w * tx) + tw
        return rule

    def fwd(self, np_):
        F = self.primal(np_)

        def fwd(w, x):
            out = F(w, x)
            return (out + 1.0 if self.bad_fwd else out), (w, x)
        return fwd

    def bwd(self, np_):
        dh = self.dh(np_)

        def bwd(res, g):
            w, x = res
            d = dh(w * x)
            return g * (d * x + 1.0), g * d * w
        return bwd

    def describe(self):
        return (f"F(w, x) = {self.h}(w*x) + w with a {self.rule} rule"
                f"{' claimed true' if self.claims_true and self.rule != 'true' else ''}"
                f"{' and a fwd with the wrong primal' if self.bad_fwd else ''}"
                f"{' (custom_vjp with optimize_remat=True)' if self.optimize_remat else ''},"
                f" w={self.w.tolist()}, x={self.x.tolist()}")

    def source(self):
        h = self.h
        return (f"# F(w, x) = {h}(w*x) + w, rule for {h}' is {self.rule}"
                f"{' (bad fwd)' if self.bad_fwd else ''}"
                f"{', custom_vjp with optimize_remat=True' if self.optimize_remat else ''}\nimport numpy as np\n"
                f"w = {array_literal(self.w)}\nx = {array_literal(self.x)}\n"
                + (f"batch = {array_literal(self.batch)}\n" if self.batch is not None else ""))


def custom_cases(*, rules=("true", "wrong"), claims_true=None, bad_fwd=False, dtype=None):
    """Cases F(w, x) = h(w*x) + w with a true or wrong rule for h' (see CustomCase)."""
    _whole("custom")
    return _custom_cases(rules, claims_true, bad_fwd, dtype)


@st.composite
def _custom_cases(draw, rules, claims_true, bad_fwd, dtype):
    dt = np.dtype(dtype) if dtype is not None else np.dtype(
        draw(st.sampled_from(["float32", "float64"])))
    n = draw(st.integers(1, 4))
    def arr(shape):
        return _real.arrays(dt, shape, elements=_real.elements(dt, min_value=-1.5,
                                                                 max_value=1.5))
    w = draw(arr((n,)))
    x = draw(arr((n,)))
    size = draw(st.integers(1, 3))
    batch = draw(arr((size, n)))
    return CustomCase(draw(st.sampled_from(sorted(ELEMENTARY))),
                      draw(st.sampled_from(list(rules))), w, x, batch,
                      claims_true=claims_true, bad_fwd=bad_fwd,
                      optimize_remat=not bad_fwd and draw(st.booleans()))
