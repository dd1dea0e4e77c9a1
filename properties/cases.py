"""Cases the laws run on, drawn from ``strategies`` (or the private fallback).

Each case is a small object with ``describe()`` (one line for messages) and
``source()`` (runnable Python reproducing it, for reports).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from dataclasses import dataclass, field

import jax
import numpy as np
from hypothesis import strategies as st

import strategies as _real
from strategies.source import Case, args_literal, array_literal, compile_text


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


#: the vmap cases are strategies' own: one type for one level or nested levels
VmapCase = _real.VmapCase


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
        return self.linear.describe()

    def source(self):
        return self.linear.source()

    def text(self):
        return self.linear.text()


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
    manual: tuple | None = None


#: the focus in effect where a strategy is made (None: every case); a context variable,
#: so a focus holds only inside its ``with`` block, in its own thread or task
_focus: contextvars.ContextVar[Focus | None] = contextvars.ContextVar("focus", default=None)


@contextlib.contextmanager
def focus(*, ops=None, named=None, control=None, families=(), manual=None):
    """Restrict every case strategy made meanwhile to the cases that exercise
    one primitive (``tools.mutation``). ``ops``: the vocabulary ops of
    program-based strategies (None: those strategies are out of focus);
    ``named``: named-axis ops; ``control``: control-flow kinds; ``families``:
    other strategy families kept whole ("custom", "remat", "prng", the samplers' "prng_gamma",
    "prng_poisson" and "prng_binomial", "piles", "sharding"),
    and the wrappers of programs of any ops ("chunked": vmap's chunk_size, "reduce_axes":
    grad's reduce_axes), which bind primitives of their own; ``manual``: the steps of the
    one-device shard_map cases (``strategies.manual``).
    A strategy with nothing left in focus raises :class:`Irrelevant`."""
    token = _focus.set(Focus(None if ops is None else tuple(ops), None if named is None else tuple(named),
                             None if control is None else tuple(control), tuple(families),
                             None if manual is None else tuple(manual)))
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
               and (not smooth or vocabulary[o].smooth) and (not linear or vocabulary[o].linear)
               and (options.get("forward_only_ops") or vocabulary[o].reverse)]
    allowed = [o for o in allowed if o in options.get("ops", allowed)]
    if not allowed:
        raise Irrelevant(f"programs (smooth={smooth}, linear={linear})")
    options["ops"] = tuple(allowed)
    return options


def _program_cases(**options):
    return _real.program_cases(**_program_options(**options))


def _wrapped_program_cases(wrapper, **options):
    """The program cases of a law that wraps each program in something binding primitives
    of its own (``wrapper``, a focus family): with the wrapper in focus, programs of every
    op, since it is the wrapper that reaches the primitive; otherwise as focused."""
    f = _focus.get()
    if f is not None and wrapper in f.families:
        return _real.program_cases(**options)
    return _program_cases(**options)


def programs(*, smooth=False, linear=False, dtype=None, max_ops=6, dense=False, ops=None,
             forward_only_ops=False):
    """(program, args) cases from strategies.program_cases (``dense``: ending
    in a constant non-symmetric matrix, so Jacobians are dense and non-square;
    ``ops``: only these vocabulary ops; ``forward_only_ops``: also the ops without
    reverse mode, for laws that never take it)."""
    options = {} if ops is None else {"ops": tuple(ops)}
    return _program_cases(
        smooth=smooth, linear=linear, dtype=dtype, max_ops=max_ops, dense=dense,
        forward_only_ops=forward_only_ops, **options).map(
        lambda pa: ProgramCase(pa[0], tuple(pa[1])))


#: ops whose jvp is the derivative wherever finite differences see one: every op
#: but those whose gradient is stopped by definition (stop_gradient; nextafter, zeta,
#: pure_callback and `.at[].apply`, drawn of a stopped gradient: JAX defines no
#: derivative for them)
PIECEWISE_OPS = tuple(o for o in _real.VOCABULARY
                      if o not in ("stop_gradient", "nextafter", "zeta", "pure_callback",
                                   "scatter_apply")
                      and o not in _real.CUSTOM_KINDS)


#: the piecewise ops whose jvp JAX differentiates again: igamma's derivative in a
#: (igamma_grad_a) has no derivative, in JAX as in impl
SECOND_ORDER_PIECEWISE_OPS = tuple(o for o in PIECEWISE_OPS if o != "igamma_in_a")


def _out_ndim(program):
    return len(program.output_type[0])


def _input_bounds(program, first=0):
    """The ranges the program's inputs are drawn from, from input ``first`` on."""
    return [program.bounds_of_input(i) for i in range(first, program.num_inputs)]


def _batched(x, size, axis, bounds):
    """strategies.batched_arrays like ``x`` with a batch axis, within ``bounds`` (lo, hi)."""
    dtype = np.asarray(x).dtype
    lo, hi = bounds
    return _real.batched_arrays(size, dtype, np.shape(x), axis=axis,
                                elements=_real.elements(dtype, min_value=lo, max_value=hi))


@st.composite
def _batched_axes(draw, args, size, bounds):
    """Per-argument batch axis (None = shared) and the batched arguments.

    At least one argument is batched.  Batched arrays come from
    strategies.batched_arrays: every slice differs, so a vmap that mixes up
    batch elements cannot hide behind equal slices; their elements stay in the range the
    program's input is drawn from (``bounds``: (lo, hi) per argument), so ops that need
    positive operands (log, sqrt) see them batched too.
    """
    axes = [draw(st.one_of(st.none(), st.integers(-(np.ndim(x) + 1), np.ndim(x))))
            for x in args]
    if all(a is None for a in axes):
        axes[draw(st.integers(0, len(args) - 1))] = 0
    batched = []
    for x, ax, b in zip(args, axes, bounds):
        batched.append(x if ax is None else draw(_batched(x, size, ax, b)))
    return tuple(axes), tuple(batched)


@st.composite
def _vmap_cases(draw, program_cases):
    program, args = draw(program_cases)
    size = draw(st.integers(1, 3))
    in_axes, batched = draw(_batched_axes(args, size, _input_bounds(program)))
    nd = _out_ndim(program)
    out_axes = draw(st.integers(-(nd + 1), nd))
    return VmapCase(program, batched, (in_axes,), (out_axes,), (size,))


@dataclass(frozen=True, repr=False)
class ChunkedVmapCase(VmapCase):
    """A vmap case of one level and a chunk size (1 up to one past the batch size)."""
    chunk_size: int = 1

    def describe(self):
        return super().describe() + f" chunk_size={self.chunk_size}"

    def example(self):
        return super().example() + f"chunk_size = {self.chunk_size}\n"


@st.composite
def _chunked_cases(draw, program_cases, paired_cases):
    # one case in three: a linear program of two same-typed inputs batched along one axis,
    # so the chunked map's two leading operands have one type, and so do those of its
    # linearization, which has no residual (a rule mixing them up shows)
    paired = paired_cases is not None and draw(st.integers(0, 2)) == 0
    program, args = draw(paired_cases if paired else program_cases)
    size = draw(st.integers(2 if paired else 1, 5))
    # a paired case maps in two chunks or more (one chunk is a plain vmap)
    chunk_size = draw(st.integers(1, size - 1 if paired else size + 1))
    if paired:
        axis = draw(st.integers(-(np.ndim(args[0]) + 1), np.ndim(args[0])))
        in_axes = (axis, axis)
        batched = tuple(draw(_batched(a, size, axis, b)) for a, b in zip(args, _input_bounds(program)))
    else:
        in_axes, batched = draw(_batched_axes(args, size, _input_bounds(program)))
    nd = _out_ndim(program)
    out_axes = draw(st.integers(-(nd + 1), nd))
    return ChunkedVmapCase(program, batched, (in_axes,), (out_axes,), (size,), chunk_size=chunk_size)


@st.composite
def _paired_input_types(draw, dtype):
    shape = draw(_real.shapes(max_dims=2, max_side=3))
    dt = dtype or draw(st.sampled_from(_real.array_strategies.FLOAT_DTYPES))
    return ((shape, dt), (shape, dt))


def chunked_vmaps(*, smooth=True, dtype=None, max_ops=5):
    """vmap cases (batch sizes 1 to 5) with a chunk size from 1 to one past the batch size;
    one in three maps a linear program of two same-typed inputs, both batched along one axis."""
    options = dict(dtype=dtype, max_ops=max_ops)
    try:   # a focus may leave no linear program
        _wrapped_program_cases("chunked", linear=True, **options)
    except Irrelevant:
        paired = None
    else:
        paired = _paired_input_types(dtype).flatmap(
            lambda types: _wrapped_program_cases("chunked", linear=True, input_types=types, **options))
    return _chunked_cases(_wrapped_program_cases("chunked", smooth=smooth, **options), paired)


@st.composite
def _reduce_axes_cases(draw, program_cases):
    program, args = draw(program_cases)
    size = draw(st.integers(1, 3))
    axes, batched = draw(_batched_axes(args[1:], size, _input_bounds(program, 1)))
    return VmapCase(program, (args[0],) + batched, ((None,) + axes,), (0,), (size,))


def reduce_axes_cases(*, dtype=None, max_ops=5):
    """Smooth programs of 2 or 3 inputs: the first shared (in_axes None), the others batched."""
    return _reduce_axes_cases(st.integers(2, 3).flatmap(lambda n: _wrapped_program_cases(
        "reduce_axes", smooth=True, dtype=dtype, max_ops=max_ops, num_inputs=n)))


def vmaps(*, smooth=False, dtype=None, max_ops=6, forward_only_ops=False):
    """Programs with batched arguments and a random in_axes / out_axes spec
    (``forward_only_ops``: as for :func:`programs`)."""
    return _vmap_cases(_program_cases(smooth=smooth, dtype=dtype, max_ops=max_ops,
                                      forward_only_ops=forward_only_ops))


@st.composite
def _nested_cases(draw, program_cases):
    program, args = draw(program_cases)
    outer_size, inner_size = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    bounds = _input_bounds(program)
    inner_axes, mid = draw(_batched_axes(args, inner_size, bounds))
    outer_axes, full = draw(_batched_axes(mid, outer_size, bounds))
    nd = _out_ndim(program)
    inner_out = draw(st.integers(-(nd + 1), nd))
    outer_out = draw(st.integers(-(nd + 2), nd + 1))
    return VmapCase(program, full, (outer_axes, inner_axes), (outer_out, inner_out), (outer_size, inner_size))


def nested_vmaps(*, dtype=None, max_ops=5, forward_only_ops=False):
    """Programs under two vmaps: axes are given per level as (outer, inner)."""
    return _nested_cases(_program_cases(dtype=dtype, max_ops=max_ops, forward_only_ops=forward_only_ops))


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
    """strategies.prng_cases: keys, splits, fold_in and draws around a float input. The
    rejection samplers (gamma, its derivative, poisson, binomial) take seconds of XLA
    compile per case, so only a focus on one of their families
    (``strategies.prng.SAMPLER_FAMILIES``) draws them (tests/test_random_dists.py runs
    the law on them against JAX)."""
    f = _focus.get()
    samplers = tuple(s for fam in (f.families if f is not None else ())
                     for s in _real.prng.SAMPLER_FAMILIES.get(fam, ()))
    if samplers:
        return _real.prng_cases(samplers=samplers, **options)
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


def manual_axes(**options):
    """strategies.manual_axis_cases: shard_map over a one-device mesh, the manual axis's
    casts and collectives (in focus: each body applies one of the focused steps)."""
    f = _focus.get()
    if f is None:
        return _real.manual_axis_cases(**options)
    if not f.manual:
        raise Irrelevant("manual axes")
    # the first of a drawn order: a short run's cases spread over the steps, where drawing
    # the step itself keeps to the first few (hypothesis' preference for simple choices)
    return st.permutations(f.manual).flatmap(
        lambda order: _real.manual_axis_cases(**options, require=(order[0],)))


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


#: name -> (h, true h', a plausible wrong h'): expressions in ``z``, ``np_`` the backend's numpy
ELEMENTARY = {
    "sin": ("np_.sin(z)", "np_.cos(z)", "np_.cos(z) + 0.5"),
    "tanh": ("np_.tanh(z)", "1.0 - np_.tanh(z) ** 2", "1.0 + np_.tanh(z) ** 2"),
    "cube": ("z * z * z", "3.0 * z * z", "z * z"),
    "softplus": ("np_.log1p(np_.exp(z))", "1.0 / (1.0 + np_.exp(-z))", "np_.exp(z)"),
    "gauss": ("np_.exp(-z * z)", "-2.0 * z * np_.exp(-z * z)", "np_.exp(-z * z)"),
}


@dataclass(repr=False)
class CustomCase(Case):
    """A function F(w, x) = h(w*x) + w with a custom derivative rule.

    ``rule`` is 'true' (the derivative) or 'wrong' (deliberately not);
    ``claims_true`` is what the law is told -- a wrong rule claimed true is
    the broken input the true-rule laws must catch.  ``bad_fwd`` makes a
    custom_vjp fwd return a primal output that is not F's.  ``text()`` prints F,
    h' and the rules as functions of the backend's numpy (``np_``) first.
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
    label = "custom"

    def __post_init__(self):
        if self.claims_true is None:
            self.claims_true = self.rule == "true"

    @property
    def dtype(self):
        return np.asarray(self.x).dtype

    def _with_numpy(self, name, np_):
        return functools.partial(compile_text(self.text(), self.label)[name], np_)

    def primal(self, np_):
        """F as a function of (w, x)."""
        return self._with_numpy("primal", np_)

    def dh(self, np_):
        """The rule's h' (the derivative, or deliberately not)."""
        return self._with_numpy("dh", np_)

    def jvp_rule(self, np_):
        """(primals, tangents) -> (out, tangent_out), computed directly."""
        return self._with_numpy("jvp_rule", np_)

    def fwd(self, np_):
        return self._with_numpy("fwd", np_)

    def bwd(self, np_):
        return self._with_numpy("bwd", np_)

    def text(self):
        h, dh_true, dh_wrong = ELEMENTARY[self.h]
        dh = dh_true if self.rule == "true" else dh_wrong
        why = "the derivative of h" if self.rule == "true" else "deliberately not h's derivative"
        out = "primal(np_, w, x) + 1.0" if self.bad_fwd else "primal(np_, w, x)"
        return (f"def h(np_, z):\n    return {h}\n\n\n"
                f"def dh(np_, z):  # the rule's h': {why}\n    return {dh}\n\n\n"
                "def primal(np_, w, x):  # F\n    return h(np_, w * x) + w\n\n\n"
                "def jvp_rule(np_, primals, tangents):\n    (w, x), (tw, tx) = primals, tangents\n"
                "    return primal(np_, w, x), dh(np_, w * x) * (x * tw + w * tx) + tw\n\n\n"
                f"def fwd(np_, w, x):{'  # its primal output is not F' if self.bad_fwd else ''}\n"
                f"    return {out}, (w, x, dh(np_, w * x))\n\n\n"
                "def bwd(np_, res, g):\n    w, x, d = res\n"
                "    return g * (d * x + 1.0), g * d * w\n")

    def describe(self):
        return (f"F(w, x) = {self.h}(w*x) + w with a {self.rule} rule"
                f"{' claimed true' if self.claims_true and self.rule != 'true' else ''}"
                f"{' and a fwd with the wrong primal' if self.bad_fwd else ''}"
                f"{' (custom_vjp with optimize_remat=True)' if self.optimize_remat else ''},"
                f" w={self.w.tolist()}, x={self.x.tolist()}")

    def example(self):
        return (f"w = {array_literal(self.w)}\nx = {array_literal(self.x)}\n"
                + (f"batch = {array_literal(self.batch)}\n" if self.batch is not None else "")
                + "print(primal(jax.numpy, w, x))\n")


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


# ---------------------------------------------------------------------------
# behaviour cases: a drawn program called as a user would (some inputs Python scalars,
# so weak types matter), a transformation of it, and misuses of the API


#: transformations of the user's function ``f`` at ``args``, as the source a user writes:
#: evaluated with ``jax`` and ``jnp`` bound to the backend (so a report shows what ran)
TRANSFORMATIONS = {
    "eager": "f(*args)",
    "jit": "jax.jit(f)(*args)",
    "grad": "jax.grad(lambda *a: jnp.sum(f(*a)), argnums=argnums)(*args)",
    "value_and_grad": "jax.value_and_grad(lambda *a: jnp.sum(f(*a)), argnums=argnums)(*args)",
    "jvp": "jax.jvp(f, args, tangents)",
    "vjp": "(lambda y, pullback: (y, pullback(y)))(*jax.vjp(f, *args))",
    "linearize": "(lambda y, f_jvp: (y, f_jvp(*tangents)))(*jax.linearize(f, *args))",
    "vmap": "jax.vmap(f)(*batch)",
    "jit(grad)": "jax.jit(jax.grad(lambda *a: jnp.sum(f(*a)), argnums=argnums))(*args)",
    "grad(jit)": "jax.grad(lambda *a: jnp.sum(jax.jit(f)(*a)), argnums=argnums)(*args)",
    "vmap(grad)": "jax.vmap(jax.grad(lambda *a: jnp.sum(f(*a)), argnums=argnums))(*batch)",
}


def _scalar(a):
    """The Python float a weakly typed input is passed as (its first element)."""
    a = np.asarray(a)
    return float(a.reshape(-1)[0]) if a.size else 1.0


def _weak_input(np_, scalar, shape):
    """A weakly typed array of ``shape`` holding ``scalar`` (a Python float)."""
    return np_.broadcast_to(np_.asarray(scalar), shape)


@dataclass(frozen=True, repr=False)
class BehaviourCase(Case):
    """A drawn program called as ``f(*args)``: the inputs marked ``weak`` are passed as
    Python floats (weakly typed) and broadcast to the program's input shape inside ``f``;
    ``transformation`` names an entry of :data:`TRANSFORMATIONS`; ``size`` is the batch
    size of the vmapped transformations (every argument batched along axis 0)."""
    program: object
    arrays: tuple
    weak: tuple
    transformation: str = "eager"
    size: int = 2
    label = "behaviour"

    def user_function(self, backend):
        run = self.program.build(backend)
        np_ = backend.numpy
        shapes = [shape for shape, _ in self.program.input_types]

        def f(*args):
            return run(*[_weak_input(np_, a, shape) if weak else a
                         for a, shape, weak in zip(args, shapes, self.weak)])
        return f

    def _args(self, scale=1.0):
        return tuple(_scalar(a) * scale if weak else np.asarray(a) * np.asarray(scale, a.dtype)
                     for a, weak in zip(self.arrays, self.weak))

    @property
    def call_args(self):
        return self._args()

    def other_values(self):
        """Arguments of the same types (shapes, dtypes, weak types), other values."""
        return self._args(0.5)

    def retyped_args(self):
        """The arguments with the float32 arrays as float64 and the others as float32: a new
        signature for jit (or the same, when every input is weak)."""
        return tuple(a if weak else a.astype(np.float64 if a.dtype == np.float32 else np.float32)
                     for a, weak in zip(self.call_args, self.weak))

    def tangents(self):
        return tuple(1.0 if weak else np.ones_like(a) for a, weak in zip(self.call_args, self.weak))

    @property
    def float_argnums(self):
        return tuple(range(len(self.arrays)))

    def batch(self, backend):
        """The batched arguments of vmap: arrays stacked with scaled copies; a weak input
        broadcast to the batch (still weakly typed)."""
        out = []
        for a, weak in zip(self.call_args, self.weak):
            if weak:
                out.append(backend.numpy.broadcast_to(a, (self.size,)))
            else:
                out.append(np.stack([a * np.asarray(1 + 0.25 * i, a.dtype) for i in range(self.size)]))
        return tuple(out)

    def example_args(self, i):
        """Batch element ``i`` of :meth:`batch`, as a Python loop over the batch passes it."""
        return tuple(a if weak else a * np.asarray(1 + 0.25 * i, a.dtype)
                     for a, weak in zip(self.call_args, self.weak))

    def transform(self, backend, f, transformation=None):
        """``f`` under the transformation (default: the drawn one), with ``backend``."""
        expr = TRANSFORMATIONS[transformation or self.transformation]
        scope = {"jax": backend, "jnp": backend.numpy, "f": f, "args": self.call_args,
                 "argnums": self.float_argnums, "tangents": self.tangents(),
                 "batch": self.batch(backend) if "batch" in expr else None}
        return eval(expr, scope)  # the expression is a constant of TRANSFORMATIONS

    def describe(self):
        shown = ", ".join("python float" if weak else f"{np.asarray(a).dtype}{list(np.shape(a))}"
                          for a, weak in zip(self.arrays, self.weak))
        return (f"{self.transformation} of program {getattr(self.program, 'ops', self.program)!r}"
                f" on ({shown})")

    def text(self):
        shapes = [shape for shape, _ in self.program.input_types]
        lines = [_program_source(self.program),
                 "def user_function(backend, *args):",
                 "    jnp = backend.numpy",
                 f"    weak, shapes = {self.weak!r}, {shapes!r}",
                 "    return program(backend, *[jnp.broadcast_to(jnp.asarray(a), s) if w else a",
                 "                              for a, s, w in zip(args, shapes, weak)])\n"]
        return "\n".join(lines)

    def example(self):
        args = "(" + ", ".join(repr(a) if weak else array_literal(a)
                               for a, weak in zip(self.call_args, self.weak)) + ",)"
        return (f"args = {args}\nargnums = {self.float_argnums!r}\n"
                f"tangents = tuple(1.0 if isinstance(a, float) else np.ones_like(a) for a in args)\n"
                f"batch = ...  # vmap: every argument stacked {self.size} times along axis 0\n"
                "f = lambda *a: user_function(jax, *a)\n"
                f"print({TRANSFORMATIONS[self.transformation]})\n")


@st.composite
def _behaviour_cases(draw, program_cases, transformations):
    program, arrays = draw(program_cases)
    n = len(arrays)
    mode = draw(st.sampled_from(["all", "some", "none"]))   # shrinks towards weak types
    weak = (tuple(draw(st.booleans()) for _ in range(n)) if mode == "some"
            else (mode == "all",) * n)
    return BehaviourCase(program, tuple(np.asarray(a) for a in arrays), weak,
                         draw(st.sampled_from(transformations)), draw(st.integers(1, 3)))


#: the input shapes of behaviour cases: few, so that the backends' caches of compiled
#: operations serve most examples (a compile per new shape would dominate their cost)
BEHAVIOUR_SHAPES = (((),), ((3,),), ((), (3,)), ((2, 3), (3,)), ((), (2, 3), ()))


#: ops whose compiles (or derivatives' compiles) cost the most: left out of cheap behaviour cases
HEAVY_OPS = frozenset((
    "conv", "sum_pool", "max_pool", "min_pool", "cholesky", "triangular_solve", "lu", "solve",
    "qr", "eigh", "svd", "lu_pivots", "rfft_filter", "fft_filter", "power_spectrum", "sort",
    "top_k", "cumlogsumexp", "cumsum", "cumprod", "cummax", "cummin", "random", "igamma",
    "igammac", "igamma_in_a", "betainc", "zeta", "polygamma", "digamma", "lgamma"))


def behaviour_cases(*, transformations=tuple(TRANSFORMATIONS), smooth=True, max_ops=3,
                    cheap=False):
    """Small programs (few ops, few shapes: cheap compiles) called with Python floats for some
    or all inputs, under one of ``transformations``; ``cheap``: without :data:`HEAVY_OPS`."""
    options = {"ops": tuple(o for o in _real.VOCABULARY if o not in HEAVY_OPS
                            and o not in _real.CUSTOM_KINDS)} if cheap else {}

    def programs_on(shapes, dtype):
        return _program_cases(smooth=smooth, max_ops=max_ops, **options,
                              input_types=tuple((shape, dtype) for shape in shapes))
    return _behaviour_cases(
        st.tuples(st.sampled_from(BEHAVIOUR_SHAPES), st.sampled_from(["float32", "float64"]))
        .flatmap(lambda sd: programs_on(*sd)), tuple(transformations))


#: misuses of the API: the source a user writes, with ``x`` a float array of rank 1 or 2
#: (size 2 or more); evaluated with ``jax``, ``jnp``, ``lax`` bound to the backend
MISUSES = {
    "vmap in_axes beyond the rank": "jax.vmap(jnp.sin, in_axes=x.ndim)(x)",
    "vmap of mismatched batch sizes": "jax.vmap(lambda a, b: a + b)(x, x[:-1])",
    "vmap in_axes of the wrong length": "jax.vmap(jnp.sin, in_axes=(0, 0))(x)",
    "vmap out_axes beyond the rank": "jax.vmap(jnp.sin, out_axes=x.ndim + 1)(x)",
    "vmap with no batched argument": "jax.vmap(jnp.sin, in_axes=None)(x)",
    "vmap in_axes not an integer": "jax.vmap(jnp.sin, in_axes=1.5)(x)",
    "grad of an integer input": "jax.grad(lambda a: jnp.sum(a * a))(x.astype(np.int32))",
    "grad of a non-scalar output": "jax.grad(jnp.sin)(x)",
    "grad of a complex output": "jax.grad(lambda a: jnp.sum(a).astype(np.complex64))(x)",
    "grad argnums out of range": "jax.grad(lambda a: jnp.sum(a), argnums=3)(x)",
    "grad has_aux without a pair": "jax.grad(lambda a: jnp.sum(a), has_aux=True)(x)",
    "grad argnums below the first argument": "jax.grad(lambda a: jnp.sum(a), argnums=-2)(x)",
    "value_and_grad of a non-scalar output": "jax.value_and_grad(jnp.sin)(x)",
    "value_and_grad of an integer input":
        "jax.value_and_grad(lambda a: jnp.sum(a * a))(x.astype(np.int32))",
    "value_and_grad argnums below the first argument":
        "jax.value_and_grad(lambda a: jnp.sum(a), argnums=-2)(x)",
    "hessian of an integer input": "jax.hessian(lambda a: jnp.sum(a * a))(x.astype(np.int32))",
    "Python bool of a traced value": "jax.jit(lambda a: a if jnp.sum(a) > 0 else -a)(x)",
    "int of a traced value": "jax.jit(lambda a: a * int(jnp.sum(a)))(x)",
    "NumPy on a traced value": "jax.jit(lambda a: np.asarray(a) * 2)(x)",
    "jvp tangents of another dtype": "jax.jvp(jnp.sin, (x,), (x.astype(np.float16),))",
    "jvp tangents of another shape": "jax.jvp(jnp.sin, (x,), (x[:-1],))",
    "jvp primals not a tuple": "jax.jvp(jnp.sin, x, x)",
    "vjp cotangent of another shape": "jax.vjp(jnp.sin, x)[1](x[:-1])",
    "vjp cotangent of another dtype": "jax.vjp(jnp.sin, x)[1](x.astype(np.float16))",
    "jvp tangents of another structure": "jax.jvp(jnp.sin, (x,), (x, x))",
    "linearize tangent of another shape": "jax.linearize(jnp.sin, x)[1](x[:-1])",
    "linearize tangent of another dtype": "jax.linearize(jnp.sin, x)[1](x.astype(np.float16))",
    "vjp function called with two cotangents": "jax.vjp(jnp.sin, x)[1](x, x)",
    "vjp function given a list cotangent": "jax.vjp(jnp.sin, x)[1]([x])",
    "linearize function called with two tangents": "jax.linearize(jnp.sin, x)[1](x, x)",
    "linearize function given a list tangent": "jax.linearize(jnp.sin, x)[1]([x])",
    "linearize of a string": "jax.linearize(jnp.sin, 'a')",
    "vmap of a scalar": "jax.vmap(jnp.sin)(x.reshape(-1)[0])",
    "jit static_argnums out of range": "jax.jit(jnp.sin, static_argnums=(3,))(x)",
    "jit static_argnames not a parameter": "jax.jit(lambda a: a * 2, static_argnames='y')(x)",
    "jit call with an unexpected keyword": "jax.jit(lambda a: a * 2)(x, y=1)",
    "jit donate_argnums out of range": "jax.jit(jnp.sin, donate_argnums=5)(x)",
    "jit static_argnums on an array": "jax.jit(lambda a: a * 2, static_argnums=0)(x)",
    "jit of a non-callable": "jax.jit(x)",
    "sum of a list": "jnp.sum(list(x))",
    "reshape to another size": "jnp.reshape(x, (x.size + 1,))",
    "add of two dtypes": "lax.add(x, x.astype(np.float16))",
    "linear_transpose of a nonlinear function": "jax.linear_transpose(jnp.sin, x)(x)",
}


@dataclass(frozen=True, repr=False)
class MisuseCase(Case):
    """The entries ``misuses`` of :data:`MISUSES` (every one, by default: each is a cheap
    call), on a drawn float array ``x``."""
    x: np.ndarray
    misuses: tuple = tuple(MISUSES)
    label = "misuse"

    def run(self, backend, misuse):
        scope = {"jax": backend, "jnp": backend.numpy, "lax": backend.lax, "np": np, "x": self.x}
        return eval(MISUSES[misuse], scope)  # the expression is a constant of MISUSES

    def describe(self):
        return f"misuses of the API on x {self.x.dtype}{list(self.x.shape)}"

    def text(self):
        return "import jax.numpy as jnp  # or: import impl.numpy as jnp\nfrom jax import lax\n"

    def example(self):
        return f"x = {array_literal(self.x)}\n" + "".join(
            f"print({MISUSES[m]})  # {m}\n" for m in self.misuses)


def misuses(*, one_of=None):
    """Every misuse of :data:`MISUSES` on a float32/float64 array of rank 1 or 2, sides 2 to 3;
    ``one_of``: one misuse drawn from these names per case instead."""
    xs = st.sampled_from(["float32", "float64"]).flatmap(lambda dt: _real.arrays(
        np.dtype(dt), st.sampled_from([(2,), (3,), (2, 3), (3, 2)]),
        elements=_real.elements(np.dtype(dt), min_value=-2.0, max_value=2.0)))
    if one_of is None:
        return st.builds(MisuseCase, xs)
    return st.builds(MisuseCase, xs, st.sampled_from(list(one_of)).map(lambda m: (m,)))


#: differentiations of a custom-rule function ``f(w, x)`` (``scalar``: the sum of ``f``), as
#: source evaluated with ``jax`` and ``jnp`` bound to the backend; "forward" ones need a
#: forward mode of custom_vjp, which JAX does not have
DIFFERENTIATIONS = {
    "grad": "jax.grad(scalar, argnums=(0, 1))(w, x)",
    "vjp": "jax.vjp(f, w, x)[1](np.ones_like(x))",
    "jit(grad)": "jax.jit(jax.grad(scalar, argnums=(0, 1)))(w, x)",
    "vmap(grad)": "jax.vmap(jax.grad(scalar, argnums=1), in_axes=(None, 0))(w, batch)",
    "grad(vmap)": "jax.grad(lambda a, b: jnp.sum(jax.vmap(f, in_axes=(None, 0))(a, b)), "
                  "argnums=(0, 1))(w, batch)",
    "jvp": "jax.jvp(f, (w, x), (w, x))",
    "linearize": "jax.linearize(f, w, x)[1](w, x)",
}
FORWARD_DIFFERENTIATIONS = ("jvp", "linearize")


@dataclass(repr=False)
class CustomDifferentiationCase(Case):
    """A custom-rule case (:class:`CustomCase`) as a ``custom_jvp`` or ``custom_vjp`` function,
    differentiated by an entry of :data:`DIFFERENTIATIONS`."""
    custom: CustomCase
    kind: str
    differentiation: str
    label = "custom"

    def __getattr__(self, name):   # the custom case's data and rules
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.custom, name)

    @property
    def dtype(self):
        return self.custom.dtype

    def differentiate(self, backend, f):
        scope = {"jax": backend, "jnp": backend.numpy, "np": np, "f": f, "w": self.custom.w,
                 "x": self.custom.x, "batch": self.custom.batch,
                 "scalar": lambda *a: backend.numpy.sum(f(*a))}
        return eval(DIFFERENTIATIONS[self.differentiation], scope)  # a constant of the table

    def describe(self):
        return f"{self.differentiation} of a {self.kind} function: {self.custom.describe()}"

    def text(self):
        return self.custom.text() + f"# f: F as a {self.kind}\n"

    def example(self):
        return self.custom.example() + f"# then: print({DIFFERENTIATIONS[self.differentiation]})\n"


def custom_differentiations():
    """True-rule custom cases as custom_jvp or custom_vjp, under one differentiation each."""
    kinds = st.sampled_from(["custom_jvp", "custom_vjp"]).flatmap(lambda kind: st.tuples(
        st.just(kind), st.sampled_from([d for d in DIFFERENTIATIONS if kind == "custom_jvp"
                                        or d not in FORWARD_DIFFERENTIATIONS])))
    def case(custom, kind_and_differentiation):
        kind, differentiation = kind_and_differentiation
        if kind == "custom_jvp":   # optimize_remat is custom_vjp's
            custom = dataclasses.replace(custom, optimize_remat=False)
        return CustomDifferentiationCase(custom, kind, differentiation)
    return st.builds(case, custom_cases(rules=("true",)), kinds)
