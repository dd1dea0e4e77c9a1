"""What the strategies draw, declared once per primitive.

:data:`PRIMITIVES` has one entry per primitive of a backend's registry (impl's
``impl.primitives._define.registry``), saying what draws it: a vocabulary op of
the random programs, a collective of the named-axis cases, a control-flow kind,
a step of the one-device shard_map cases, a family of case strategies, or an
exemption with its reason. An entry may hold
the op itself (a new primitive's op is declared right there) or name an op
declared in ``strategies/ops.py``. The program vocabulary and the coverage test
(tests/test_strategies.py, through ``strategies.coverage.check_table``, which
traces each source and checks it binds the primitives declared for it) read
this table.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .ops import (AtApply, ComplexProduct, CustomVmap, LinearSolve, Op, OptimizationBarrier,
                  PureCallback, ReducePrecision, TridiagonalSolve, base_ops)


@dataclass(frozen=True)
class Drawn:
    """A primitive the drawn cases of ``source`` bind (see ``strategies.coverage.sources``);
    ``op``: the vocabulary op declared with it, when the table holds it."""

    source: tuple[str, str]
    op: Op | None = None


@dataclass(frozen=True)
class Exempt:
    """A primitive no strategy draws, and why."""

    reason: str


def op(o: str | Op) -> Drawn:
    """Drawn by a program vocabulary op: its name (an op of ``strategies/ops.py``), or the op."""
    return Drawn(("op", o), None) if isinstance(o, str) else Drawn(("op", o.name), o)


def named(collective: str) -> Drawn:
    """Drawn by a named-axis case applying ``collective`` (``strategies.named.COLLECTIVES``)."""
    return Drawn(("named", collective))


def manual(step: str) -> Drawn:
    """Drawn by a one-device shard_map case applying ``step`` (``strategies.manual.MANUAL_OPS``)."""
    return Drawn(("manual", step))


def control(kind: str) -> Drawn:
    """Drawn by a control-flow case of ``kind`` (``strategies.control.CONTROL_KINDS``)."""
    return Drawn(("control", kind))


def family(name: str) -> Drawn:
    """Drawn by a family of case strategies (``strategies.coverage.FAMILIES``)."""
    return Drawn(("family", name))


def exempt(reason: str) -> Exempt:
    return Exempt(reason)


#: impl's primitives (by the module defining each) -> what draws it. A drawn entry names
#: the source whose cases bind it most directly; others may bind it too.
PRIMITIVES: dict[str, Drawn | Exempt] = {
    # custom_batching
    "custom_vmap_call": op(CustomVmap()),
    # custom_derivatives.jvp
    "custom_jvp_call": family("custom"),
    # custom_derivatives.linear
    "linear_call": op("linear_call"),
    # custom_derivatives.vjp
    "custom_lin": family("custom"),
    "custom_vjp_call": family("custom"),
    "remat_opt": family("custom_optimize_remat"),
    # primitives.call
    "jit": op("jit_call"),
    # primitives.callbacks
    "debug_callback": exempt(
        "a host callback with no outputs (impl.debug.callback): no law reads it; "
        "tests/test_toplevel.py compares what it sees with JAX's"),
    "debug_print": exempt(
        "a host print with no outputs (impl.debug.print): no law reads it; "
        "tests/test_toplevel.py compares its printed output with JAX's eagerly and under jit, "
        "vmap and grad, and its staged programs with JAX's"),
    "inspect_sharding": exempt(
        "a host callback with a sharding, no outputs (impl.debug.inspect_array_sharding, "
        "visualize_array_sharding): no law reads it; tests/explicit_sharding_cases.py compares "
        "what it reports with JAX's on 8 devices"),
    "io_callback": exempt(
        "an effectful host callback (impl.experimental.io_callback), not differentiable: "
        "tests/test_toplevel.py against JAX eagerly, under jit and vmap, ordered or not"),
    "pure_callback": op(PureCallback()),
    # primitives.collectives
    "all_gather": named("all_gather"),
    "all_to_all": named("all_to_all"),
    "axis_index": named("axis_index"),
    # the manual axis's casts and collectives: the one-device shard_map cases (strategies.manual)
    "pbroadcast": manual("pbroadcast"),
    "pmax": named("pmax"),
    "pmin": named("pmin"),
    "ppermute": named("ppermute"),
    "psum": named("psum"),
    "reduce_scatter": named("psum_scatter"),
    "psum_invariant": manual("psum"),
    "pvary": manual("pvary"),
    "preduced": manual("preduced"),
    "reduced_vary_cast_p": manual("reduced_to_varying"),
    "vary_unreduced_cast_p": manual("to_unreduced"),
    "unreduced_psum": manual("unreduced_psum"),
    "unreduced_reduce_scatter": manual("unreduced_psum_scatter"),
    "all_gather_invariant": manual("all_gather_invariant"),
    "all_gather_reduced": manual("all_gather_reduced"),
    "psum_unmapped": exempt(
        "internal to reduce_axes (sums a cotangent over the named axes); drawn through "
        "properties.cases.reduce_axes_cases for reduce_axes_matches_summed_grads"),
    # primitives.compiler_controls
    "optimization_barrier": op(OptimizationBarrier()),
    "reduce_precision": op(ReducePrecision()),
    # primitives.complex_parts
    "complex": op("fft_filter"),
    "conj": op("power_spectrum"),
    "imag": op("fft_filter"),
    "real": op("fft_filter"),
    # primitives.control_flow
    "cond": control("cond"),
    "scan": control("scan"),
    "while": control("while_loop"),
    # primitives.convolution
    "conv_general_dilated": op("conv"),
    # primitives.elementwise
    "abs": op("abs"),
    "acos": op("arccos"),
    "acosh": op("acosh"),
    "add": op("add"),
    "add_any": op("add"),
    "and": op("logic"),
    "asin": op("arcsin"),
    "asinh": op("asinh"),
    "atan": op("arctan"),
    "atan2": op("arctan2"),
    "atanh": op("atanh"),
    "bessel_i0e": op("bessel_i0e"),
    "bessel_i1e": op("bessel_i1e"),
    "bitcast_convert_type": op("float_bits"),
    "cbrt": op("cbrt"),
    "ceil": op("ceil"),
    "clamp": op("clamp"),
    "clz": op("clz"),
    "convert_element_type": op("astype"),
    "copy": op("copy"),
    "cos": op("cos"),
    "cosh": op("cosh"),
    "digamma": op("digamma"),
    "div": op("div"),
    "eq": op("maximum"),
    "erf": op("erf"),
    "erf_inv": op("erf_inv"),
    "erfc": op("erfc"),
    "exp": op("exp"),
    "exp2": op("exp2"),
    "expm1": op("expm1"),
    "floor": op("floor"),
    "ge": op("abs"),
    "gt": op("where"),
    "igamma": op("igamma"),
    "igamma_grad_a": op("igamma_in_a"),
    "igammac": op("igammac"),
    "integer_pow": op("integer_pow"),
    "is_finite": op("is_finite"),
    "le": op("logic"),
    "lgamma": op("lgamma"),
    "log": op("log"),
    "log1p": op("log1p"),
    "logistic": op("logistic"),
    "lt": op("logic"),
    "max": op("maximum"),
    "min": op("minimum"),
    "mul": op("mul"),
    "ne": op("logic"),
    "neg": op("neg"),
    "nextafter": op("nextafter"),
    "not": op("logic"),
    "or": op("logic"),
    "polygamma": op("polygamma"),
    "population_count": op("population_count"),
    "pow": op("pow"),
    "random_gamma_grad": family("prng_gamma"),
    "regularized_incomplete_beta": op("betainc"),
    "rem": op("rem"),
    "round": op("round"),
    "rsqrt": op("rsqrt"),
    "select_n": op("where"),
    "shift_left": op("shift_left"),
    "shift_right_arithmetic": op("shift_right_arithmetic"),
    "shift_right_logical": op("float_bits"),
    "sign": op("sign"),
    "sin": op("sin"),
    "sinh": op("sinh"),
    "sqrt": op("sqrt"),
    "stop_gradient": op("stop_gradient"),
    "sub": op("sub"),
    "tan": op("tan"),
    "square": op("square"),
    "tanh": op("tanh"),
    "xor": op("logic"),
    "zeta": op("zeta"),
    # primitives.fft
    "fft": op("fft_filter"),
    # primitives.general_reduce
    "reduce": op(ComplexProduct()),
    # primitives.indexing
    "concatenate": op("concatenate"),
    "dynamic_slice": op("dynamic_slice"),
    "dynamic_update_slice": op("dynamic_update_slice"),
    "gather": op("take"),
    "pad": op("pad"),
    "rev": op("flip"),
    "scatter": op("at_set"),
    "scatter_add": op("at_add"),
    "scatter_max": op("at_max"),
    "scatter_min": op("at_min"),
    "scatter_mul": op("at_multiply"),
    "slice": op("slice"),
    # primitives.linalg
    "dot_general": op("matmul"),
    # primitives.linalg_decompositions
    "cholesky": op("cholesky"),
    "eigh": op("eigh"),
    "lu": op("lu"),
    "lu_pivots_to_permutation": op("lu_pivots"),
    "qr": op("qr"),
    "svd": op("svd"),
    "triangular_solve": op("triangular_solve"),
    "tridiagonal_solve": op(TridiagonalSolve()),
    # primitives.linear_solve
    "custom_linear_solve": op(LinearSolve()),
    # primitives.mapping
    "chunk_map": exempt(
        "bound by vmap(..., chunk_size=k): properties.cases.chunked_vmaps draws the chunk size (a "
        "vmap parameter, not a program op) for chunked_vmap_matches_vmap"),
    # primitives.prng
    "random_binomial": family("prng_binomial"),
    "random_bits": op("random"),
    "random_gamma": family("prng_gamma"),
    "random_poisson": family("prng_poisson"),
    "threefry2x32": op("random"),
    # primitives.reductions
    "argmax": op("take_argmax"),
    "argmin": op("take_argmin"),
    "cumchooser_cotangent": op("cummax"),
    "cumchooser_tangent": op("cummax"),
    "cumlogsumexp": op("cumlogsumexp"),
    "cummax": op("cummax"),
    "cummin": op("cummin"),
    "cumprod": op("cumprod"),
    "cumsum": op("cumsum"),
    "iota": op("iota"),
    "linear_recurrence": op("cumprod"),
    "reduce_max": op("max"),
    "reduce_or": op("flip_unless_any_positive"),
    "reduce_and": op("flip_unless_all_positive"),
    "reduce_min": op("min"),
    "reduce_prod": op("prod"),
    "scatter_add_along_axis": op("sort"),
    "shift": op("cumprod"),
    "sort": op("sort"),
    "take_along_axis": op("sort"),
    "top_k": op("top_k"),
    # primitives.remat
    "checkpoint": family("remat"),
    "name": family("remat"),
    # primitives.scatter_apply
    "scatter_apply": op(AtApply()),
    # primitives.shape
    "broadcast_in_dim": op("broadcast_to"),
    "reduce_sum": op("sum"),
    "reshape": op("reshape"),
    "squeeze": op("index"),
    "transpose": op("transpose"),
    # primitives.sharding
    "reshard": manual("preduced"),   # on an Explicit mesh, a is resharded onto it
    "sharding_constraint": exempt(
        "drawn by strategies.sharding (8 devices, properties.multidevice)"),
    # primitives.windows
    "reduce_window_max": op("max_pool"),
    "reduce_window_min": op("min_pool"),
    "reduce_window_sum": op("sum_pool"),
    "select_and_gather_add": op("max_pool"),
    "select_and_scatter_add": op("max_pool"),
    # shard_map
    # every one-device case; strategies.sharding draws 8-device meshes (properties.multidevice)
    "shard_map": manual("scale"),
}


def _vocabulary() -> dict[str, Op]:
    ops = base_ops() + [e.op for e in PRIMITIVES.values() if isinstance(e, Drawn) and e.op is not None]
    return {o.name: o for o in ops}


#: name -> op, the ops random programs are drawn from, in drawing order
VOCABULARY: dict[str, Op] = _vocabulary()
#: Names of every op a program may contain.
OP_NAMES: tuple[str, ...] = tuple(VOCABULARY)
#: Ops that keep a program linear in its inputs.
LINEAR_OPS: tuple[str, ...] = tuple(n for n, o in VOCABULARY.items() if o.linear)
#: Ops allowed in smooth programs (some, e.g. abs, only away from their kink).
SMOOTH_OPS: tuple[str, ...] = tuple(n for n, o in VOCABULARY.items() if o.smooth)


@contextlib.contextmanager
def declared(primitive: str, entry: Drawn | Exempt):
    """:data:`PRIMITIVES` with one more entry meanwhile, and the op the entry holds in
    :data:`VOCABULARY`: how a test declares a toy primitive (tests/test_strategies.py),
    or a backend a primitive of its own, without editing this module."""
    if primitive in PRIMITIVES:
        raise ValueError(f"primitive {primitive!r} already has an entry: {PRIMITIVES[primitive]!r}")
    new_op = entry.op if isinstance(entry, Drawn) else None
    if new_op is not None and new_op.name in VOCABULARY:
        raise ValueError(f"an op named {new_op.name!r} is already in the vocabulary")
    PRIMITIVES[primitive] = entry
    if new_op is not None:
        VOCABULARY[new_op.name] = new_op
    try:
        yield
    finally:
        del PRIMITIVES[primitive]
        if new_op is not None:
            del VOCABULARY[new_op.name]
