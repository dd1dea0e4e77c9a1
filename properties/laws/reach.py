"""Laws over transformation stacks: where bugs of transformation systems live.

The cases (``strategies.stacks``) are up to four transformations in any order with drawn
parameters, over a small program with a dtype or shape corner.  Most bugs there are crashes
on valid programs: a stack the reference runs and the backend raises on is a failure (a
finding), unless the backend declares the feature unsupported
(``properties.features.declared_unsupported``): then the case counts as unsupported, with
the declared reason.

Each case reports what it reached as hypothesis events ("reach: param jit.static_argnums",
"reach: dtype bfloat16", "reach: stack grad(vmap(jit(f)))"), shown by
``--hypothesis-show-statistics``.
"""
from __future__ import annotations

import jax
import numpy as np
from hypothesis import event
from hypothesis.errors import InvalidArgument

from ..backends import differential_reference
from ..features import MissingFeature, declared_unsupported
from ..tolerances import close
from ._common import Differential, discard, evaluate, fail

#: the prefix of every event these laws emit
PREFIX = "reach: "


def _event(what):
    """A hypothesis event, where there is a test to count it (``find`` and direct calls have none)."""
    try:
        event(PREFIX + what)
    except InvalidArgument:
        pass


def report_reach(case):
    """One hypothesis event per parameter, dtype, shape corner and stack shape the case reaches."""
    for what in case.events():
        _event(what)


def _float0(a):
    return a.dtype == jax.dtypes.float0


def assert_same_results(case, what, got, want, kind="reference"):
    """Equal pytree structure, shapes and dtypes; non-finite values in the same places;
    the finite values close for the leaf's dtype (real and imaginary parts apart)."""
    got_tree, want_tree = jax.tree_util.tree_structure(got), jax.tree_util.tree_structure(want)
    if got_tree != want_tree:
        fail(case, f"{what}: output structure {got_tree}, expected {want_tree}")
    for i, (a, e) in enumerate(zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want))):
        a, e = np.asarray(a), np.asarray(e)
        where = f"{what}[{i}]"
        if a.shape != e.shape or a.dtype != e.dtype:
            fail(case, f"{where}: {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}")
        if _float0(e) or a.size == 0:
            continue
        if e.dtype.kind in "biu":
            if not np.array_equal(a, e):
                fail(case, f"{where}: {a.tolist()}, expected {e.tolist()}")
            continue
        parts = ((a.real, e.real), (a.imag, e.imag)) if e.dtype.kind == "c" else ((a, e),)
        real = np.dtype({"complex64": "float32", "complex128": "float64"}.get(e.dtype.name, e.dtype))
        for pa, pe in parts:
            pa, pe = pa.astype(np.float64), pe.astype(np.float64)
            bad_a, bad_e = ~np.isfinite(pa), ~np.isfinite(pe)
            if not (np.array_equal(bad_a, bad_e) and np.array_equal(pa[bad_a], pe[bad_e], equal_nan=True)):
                fail(case, f"{where}: non-finite values differ\n  got      {a}\n  expected {e}")
            ok, err, bound = close(pa[~bad_e], pe[~bad_e], kind, real)
            if not ok:
                fail(case, f"{where}: max error {err:.3g} > tolerance {bound:.3g} ({kind}, {real})"
                     f"\n  got      {np.array2string(a, precision=6)}"
                     f"\n  expected {np.array2string(e, precision=6)}")


def run_or_fail(backend, case, what):
    """The stack's results on ``backend``; a crash is the law's failure, or unsupported when
    the case reaches a feature the backend declares unsupported."""
    try:
        return evaluate(case.build(backend), *case.args)
    except Exception as exc:  # any crash on a stack the reference runs is a finding
        declared = declared_unsupported(backend)
        reached = [f for f in case.events() if f in declared]
        if reached:
            raise MissingFeature(f"the backend declares {reached[0]!r} unsupported: "
                                 f"{declared[reached[0]]}") from exc
        message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        fail(case, f"{what} raised {type(exc).__name__}: {message}")


def stack_results(backend, case):
    """The stack's results on ``backend``: a crash is a failure (see :func:`run_or_fail`)."""
    return run_or_fail(backend, case, f"stack {case.shape}")


def _reference_results(build, case, who, jit=None):
    """The results the law compares with.  ``jit``: the reference backend's own jit, to
    evaluate the whole stack as one compiled program -- a reference, never the subject,
    and one compile instead of one per eager op (an eager Jacobian of a vmapped gradient
    runs thousands of ops).  Where it raises, eager evaluation decides, as without it."""
    if jit is not None:
        try:
            return evaluate(jit(build()), *case.args)
        except Exception:  # eager evaluation says what, if anything, is wrong
            pass
    try:
        return evaluate(build(), *case.args)
    except Exception as exc:  # the reference cannot run it: outside the law's domain
        _event(f"{who} raises {type(exc).__name__}")
        discard(f"{who} raises {type(exc).__name__}")


def stack_matches_reference(backend, case):
    """A transformation stack (up to four of jit, grad, vmap, jvp, vjp, linearize, checkpoint,
    custom rules, Jacobians, with drawn parameters and dtype/shape corners) gives JAX's
    results: structure, dtypes and values; a crash where JAX runs it is a failure."""
    ref = differential_reference(backend)
    report_reach(case)
    want = _reference_results(lambda: case.build(ref), case, ref.name, jit=ref.jit)
    got = stack_results(backend, case)
    assert_same_results(case, f"{backend.name} vs {ref.name}, {case.shape}", got, want)


# a differential law whose reference side filters a crash (the reference cannot run the
# case) and counts what the case reaches: its parts are set here rather than by
# ``_common.differential``
stack_matches_reference.differential_parts = Differential(stack_results, "stack",
                                                          assert_same_results)


def stack_matches_meaning(backend, case):
    """A transformation stack equals its meaning on the same backend: jit, checkpoint and the
    custom rules as plain calls of what they wrap, vmap (and its collective) as a Python
    loop; a crash where the meaning runs is a failure."""
    report_reach(case)
    want = _reference_results(lambda: case.build(backend, meaning=True), case, "the meaning")
    got = stack_results(backend, case)
    assert_same_results(case, f"{case.shape} vs its meaning", got, want)
