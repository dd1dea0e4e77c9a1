"""Helpers shared by the laws: failing, filtering, comparing, references."""
from __future__ import annotations

import functools
import weakref
import zlib
from dataclasses import dataclass
from typing import Callable

import jax
import numpy as np

from ..backends import differential_reference
from ..tolerances import FD_STEP, MAX_MAGNITUDE, close, tolerance


class CaseFiltered(Exception):
    """The drawn case is outside a law's domain; counted and rejected."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Differential:
    """What a differential law compares, for a standalone script: ``side(backend, case)``,
    computed on the backend and on the reference, compared by ``compare(case, what, got,
    want)``; ``what`` names the side in messages."""
    side: Callable
    what: str
    compare: Callable


def differential(side, what, compare, prepare=None):
    """The differential law whose name and docstring the decorated function gives:
    ``side`` computed on the reference (``prepare(reference, case, want)`` may filter the
    case there) and on the backend, compared by ``compare``.  The parts stay on the law
    (``law.fn.differential_parts``), so a standalone script can run the backend's side against
    the reference's results recorded in it."""
    def law(fn):
        @functools.wraps(fn)
        def check(backend, case):
            ref = differential_reference(backend)
            want = side(ref, case)
            if prepare is not None:
                prepare(ref, case, want)
            compare(case, f"{backend.name} vs {ref.name} {what}", side(backend, case), want)
        check.differential_parts = Differential(side, what, compare)
        return check
    return law


def discard(reason):
    raise CaseFiltered(reason)


def fail(case, message):
    """The law does not hold on ``case``: what failed, and the case.  The law's name is
    not given here: ``Law.__call__`` (laws/__init__.py) puts it in front, so renaming a
    law is renaming its function."""
    raise AssertionError(f"{message}\n  case: {case.describe()}")


def leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def assert_close(case, what, actual, expected, kind="agree", dtype=None):
    """Norm-wise comparison of two pytrees of arrays (see tolerances.py)."""
    a_leaves, e_leaves = leaves(actual), leaves(expected)
    if len(a_leaves) != len(e_leaves):
        fail(case, f"{what}: {len(a_leaves)} outputs, expected {len(e_leaves)}")
    dtype = dtype if dtype is not None else getattr(case, "dtype", None)
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        where = f"{what}[{i}]" if len(a_leaves) > 1 else what
        if a.shape != e.shape:
            fail(case, f"{where}: shape {a.shape}, expected {e.shape}")
        ok, err, bound = close(a, e, kind, dtype)
        if not ok:
            fail(case, f"{where}: max error {err:.3g} > tolerance {bound:.3g}"
                 f" ({kind}, {dtype})\n  got      {np.array2string(a, precision=6)}"
                 f"\n  expected {np.array2string(e, precision=6)}")


def vdot(xs, ys):
    """Sum of elementwise products over matching pytrees, in float64, and its scale."""
    total, scale = 0.0, 0.0
    for x, y in zip(leaves(xs), leaves(ys)):
        prod = x.astype(np.float64) * y.astype(np.float64)
        total += float(np.sum(prod))
        scale += float(np.sum(np.abs(prod)))
    return total, scale


def assert_dot_equal(case, what, lhs, rhs, dtype=None, kind="agree"):
    """<lhs pair> == <rhs pair>: each side is a (xs, ys) pair of pytrees."""
    dtype = dtype if dtype is not None else getattr(case, "dtype", None)
    a, sa = vdot(*lhs)
    b, sb = vdot(*rhs)
    t = tolerance(kind, dtype)
    bound = t.atol + t.rtol * max(sa, sb)
    if not abs(a - b) <= bound:
        fail(case, f"{what}: {a!r} != {b!r} (difference {abs(a - b):.3g} > {bound:.3g})")


def require_finite(*trees, what="value"):
    """Filter cases whose values are non-finite or too large to compare."""
    for x in leaves(trees):
        if x.size and not np.all(np.isfinite(x)):
            discard(f"non-finite {what}")
        if x.size and np.max(np.abs(x)) > MAX_MAGNITUDE:
            discard(f"{what} beyond {MAX_MAGNITUDE:g} (ill-conditioned)")


def _seed(salt, specs):
    key = f"{salt}|" + "|".join(f"{shape}{dtype}" for shape, dtype in specs)
    return zlib.crc32(key.encode())


def _spec(a):
    dtype = getattr(a, "dtype", None)
    return tuple(np.shape(a)), np.dtype(dtype if dtype is not None else np.asarray(a).dtype)


def directions(like, salt=0):
    """Deterministic unit-scale arrays shaped and typed like ``like`` (a tuple).

    Only shapes and dtypes are read, so ``like`` may hold tracers."""
    specs = [_spec(a) for a in like]
    rng = np.random.default_rng(_seed(salt, specs))
    return tuple(rng.uniform(-1.0, 1.0, shape).astype(dtype) for shape, dtype in specs)


def weights_like(x, salt=7):
    """Fixed non-uniform weights used to turn an array output into a scalar."""
    return directions((x,), salt)[0]


def scalarize(backend, f, out_example):
    """g(*args) = sum(w * f(*args)) with fixed weights w."""
    w = weights_like(out_example)
    np_ = backend.numpy

    def g(*args):
        return np_.sum(f(*args) * w)
    return g


def as_float64(args):
    return tuple(jax.tree_util.tree_map(lambda x: np.asarray(x, dtype=np.float64), a)
                 for a in args)


def evaluate(f, *args):
    return jax.tree_util.tree_map(np.asarray, f(*args))


#: the functions whose references have been evaluated: their jax.jit, or _EAGER for those
#: that cannot be staged out; weak keys: each law builds its function anew per case
_REFERENCE_PROGRAMS = weakref.WeakKeyDictionary()
_EAGER = object()


def evaluate_reference(f, *args):
    """``f(*args)`` for a float64 reference (the float64 re-run of a case, finite
    differences).  The function is staged out whole by JAX's own ``jax.jit`` (never the
    backend's jit, which may be the one under test): the primitives its eager evaluation
    runs, compiled as one program per function instead of one per op and shape, and
    called again at each point of a finite difference.  A function that cannot be
    staged (it reads concrete values) is evaluated eagerly, as before."""
    try:
        staged = _REFERENCE_PROGRAMS.get(f)
    except TypeError:  # a callable without weak references: staged anew each time
        staged, f_is_keyed = None, False
    else:
        f_is_keyed = True
    if staged is None:
        staged = jax.jit(f)
        if f_is_keyed:
            _REFERENCE_PROGRAMS[f] = staged
    if staged is not _EAGER:
        try:
            return evaluate(staged, *args)
        except Exception:  # not stageable: eager says what, if anything, is wrong
            if f_is_keyed:
                _REFERENCE_PROGRAMS[f] = _EAGER
    return evaluate(f, *args)


def evaluate_compiled(backend, f, *args):
    """evaluate(backend.jit(f), *args): for laws whose transformations are
    heavy (jacobians, hessians), one compile instead of op-by-op dispatch.
    The transformation rules run all the same while jit traces; eager
    evaluation is covered by the other laws and by jit_matches_eager."""
    return evaluate(backend.jit(f), *args)


def check_conditioning(f, args):
    """Evaluate f; filter non-finite, huge, or (float32) ill-conditioned cases.

    A float32 case whose value differs from the float64 re-run by more than the
    float32 reference tolerance cannot be compared tightly by any law.
    """
    y = evaluate(f, *args)
    require_finite(y, what="output")
    lowest = min((x.dtype for x in leaves(args)), key=lambda d: np.finfo(d).bits)
    if lowest != np.float64:
        y64 = evaluate_reference(f, *as_float64(args))
        require_finite(y64, what="float64 output")
        for a, b in zip(leaves(y), leaves(y64)):
            ok, _, _ = close(a, b, "reference", lowest)
            if not ok:
                discard("ill-conditioned in float32 (float32 and float64 values disagree)")
    return y


def fd_jvp(f, args, tangents):
    """Central finite differences of f at args along tangents, in float64.

    Two step sizes are compared; where they disagree the point is not smooth
    enough (a kink, a discontinuity, large curvature) and the case is filtered.
    Returns the Richardson-extrapolated estimate.
    """
    x = as_float64(args)
    t = as_float64(tangents)
    size = max([1.0] + [float(np.max(np.abs(a))) for a in x if a.size])
    h = FD_STEP * size

    def diff(step):
        plus = evaluate_reference(f, *[a + step * b for a, b in zip(x, t)])
        minus = evaluate_reference(f, *[a - step * b for a, b in zip(x, t)])
        return jax.tree_util.tree_map(lambda p, m: (p - m) / (2 * step), plus, minus)

    d1, d2 = diff(h), diff(h / 2)
    require_finite(d1, d2, what="finite difference")
    for a, b in zip(leaves(d1), leaves(d2)):
        ok, _, _ = close(a, b, "reference", np.float64)
        if not ok:
            discard("not smooth here (finite differences at two steps disagree)")
    return jax.tree_util.tree_map(lambda a, b: (4 * b - a) / 3, d1, d2)


def require_no_kink(f, args, tangents):
    """Filter points at a kink of f along tangents: there the float64 forward and
    backward differences disagree (a tie of max/sort/top_k at the point, where a
    positively homogeneous f fools the two-step test of :func:`fd_jvp`)."""
    x, t = as_float64(args), as_float64(tangents)
    size = max([1.0] + [float(np.max(np.abs(a))) for a in x if a.size])
    h = FD_STEP * size
    at = evaluate_reference(f, *x)
    plus = evaluate_reference(f, *[a + h * b for a, b in zip(x, t)])
    minus = evaluate_reference(f, *[a - h * b for a, b in zip(x, t)])
    for p, m, c in zip(leaves(plus), leaves(minus), leaves(at)):
        ok, _, _ = close((p - c) / h, (c - m) / h, "reference", np.float32)
        if not ok:
            discard("at a kink (one-sided finite differences disagree)")


def take(x, i, axis):
    return np.take(np.asarray(x), i, axis=axis)


def stack(trees, axis):
    """Stack a list of equal pytrees of arrays along ``axis``."""
    return jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs], axis=axis),
                                  *trees)


def example_args(args, in_axes, i):
    """Batch element ``i`` of ``args``: each argument taken at ``i`` along its axis of
    ``in_axes`` (one entry per argument; None: shared, passed whole)."""
    return [a if ax is None else take(a, i, ax) for a, ax in zip(args, in_axes)]


def one_level(case):
    """``(in_axes, out_axes, size)`` of a vmap case of one level."""
    if case.depth != 1:
        raise ValueError(f"a law of one vmap got a case of {case.depth} nested vmaps")
    return case.in_axes[0], case.out_axes[0], case.axis_sizes[0]


def loop_vmap(f, args, in_axes, out_axes, size):
    """The meaning of vmap: call f per batch element, stack the results."""
    return stack([evaluate(f, *example_args(args, in_axes, i)) for i in range(size)], out_axes)


def all_argnums(args):
    return tuple(range(len(args)))
