"""Laws of named axes: collectives under nested vmaps against explicit
NumPy references on the stacked batch (each collective computed from the
members of its group), and their derivatives -- jvp against float64 finite
differences of the reference, vjp by <vjp(c), u> == <c, FD(u)>, which ties
each collective's transpose (psum/broadcast, all_gather/psum_scatter,
ppermute/inverse permutation, all_to_all/swapped axes) to the reference."""
from __future__ import annotations

import numpy as np

from .. import features
from .jax_bugs import built_on_jax
from ._common import (assert_close, assert_dot_equal, directions, discard, evaluate,
                      evaluate_compiled, fail, fd_jvp, require_finite)


#: JAX bugs the laws found (docs/properties.md; strict xfails in suites/test_negative.py):
#: {what goes wrong: applies(case, check)}, ``check`` the part of a law about to run
#: ("value", "jvp", "vjp", "member_jvp" or "member_vjp": derivatives taken inside the
#: vmaps).  On backends built on JAX (``jax_bugs.built_on_jax``) such cases are filtered
#: with this reason, counted in the report; other backends run them, and when one fails
#: where JAX filters the case (a wrapper of JAX that does not declare it) the runner's
#: replay on the reference reports the failure as inherited from JAX.
KNOWN_JAX_BUGS = {
    "all_to_all of a value unbatched over its axis returns a wrong shape under vmap":
        lambda case, check: _all_to_all_of_invariant(case, tangent=check == "member_jvp") or (
            check == "member_vjp" and _all_to_all_before_invariant(case)),
    "the transpose of an untiled all_to_all whose split and concat axes differ has the wrong "
    "shape inside vmap":
        lambda case, check: check == "member_vjp" and any(
            s.op == "all_to_all" and s.kw["split"] != s.kw["concat"] and not s.kw["tiled"] for s in case.steps),
    "an untiled psum_scatter over an outer vmap axis fails when an inner vmap batches its "
    "operand along a nonzero axis (all_gather's transpose too)":
        lambda case, check: _scatter_outside_nonzero_inner_axis(case, check),
}


#: steps whose result is the same on every member of the names they reduce over
_INVARIANT_OVER_NAMES = ("psum", "pmean", "pmax", "pmin", "all_gather")


def _all_to_all_of_invariant(case, tangent=False):
    """An all_to_all over a name its operand does not vary along.  With ``tangent``
    (a jvp taken inside the vmaps) the operand is the tangent, which adding
    ``axis_index`` leaves unbatched."""
    invariant = {n for n, a in zip(case.names, case.in_axes) if a is None}
    varying = ("psum_scatter", "all_to_all") if tangent else (
        "axis_index", "psum_scatter", "all_to_all")
    for step in case.steps:
        if step.op == "all_to_all" and set(step.names) & invariant:
            return True
        if step.op in _INVARIANT_OVER_NAMES:
            invariant |= set(step.names)
        elif step.op in varying:
            invariant -= set(step.names)
    return False


#: steps whose transpose gives a cotangent that is the same on every member of their names:
#: those with invariant results, and psum_scatter (its transpose is an all_gather)
_INVARIANT_COTANGENT_OVER_NAMES = (*_INVARIANT_OVER_NAMES, "psum_scatter")


def _all_to_all_before_invariant(case):
    """An all_to_all followed by a step whose cotangent is the same on every member of its
    name (psum, psum_scatter, ...): in a per-member vjp the all_to_all's transpose then
    receives a cotangent unbatched over its axis."""
    for i, step in enumerate(case.steps):
        if step.op == "all_to_all" and any(
                later.op in _INVARIANT_COTANGENT_OVER_NAMES and set(later.names) & set(step.names)
                for later in case.steps[i + 1:]):
            return True
    return False


def _scatter_outside_nonzero_inner_axis(case, check):
    """An untiled psum_scatter -- or, in a per-member vjp, an untiled all_gather, whose
    transpose it is -- over a name with an inner level (later in ``names``) that lays
    its values or cotangents along a nonzero axis."""
    ops = ("psum_scatter", "all_gather") if check == "member_vjp" else ("psum_scatter",)
    for step in case.steps:
        if step.op in ops and not step.kw["tiled"]:
            k = min(case.names.index(n) for n in step.names)
            if any(a not in (0, None) for a in case.in_axes[k + 1:] + case.out_axes[k + 1:]):
                return True
    return False


def _prepare(backend, case, check="value"):
    derivatives = check != "value"
    if built_on_jax(backend):
        for bug, applies in KNOWN_JAX_BUGS.items():
            if applies(case, check):
                discard(f"known JAX bug: {bug}")
    if case.uses_tuples:
        features.require(backend, "tuple_axis_names")
    f = case.program(backend)
    gaps = []
    want = case.reference(np.asarray(case.x, np.float64), gaps)
    require_finite(want, what="reference")
    if derivatives and gaps and min(gaps) < 1e-2:
        discard("pmax/pmin members within 1e-2 of a tie (a kink for finite differences)")
    return f, want


def named_collectives_match_reference(backend, case):
    """Nested vmaps with collectives equal the member-by-member NumPy reference
    (eagerly and under jit)."""
    f, want = _prepare(backend, case)
    assert_close(case, "vmapped collectives vs reference",
                 evaluate(f, case.x), want, kind="reference")
    assert_close(case, "jit of vmapped collectives vs reference",
                 evaluate(backend.jit(f), case.x), want, kind="reference")


def named_collectives_jvp_matches_reference(backend, case):
    """jvp through the collectives equals float64 central differences of the reference."""
    _check_jvp(backend, case)


def named_collectives_vjp_matches_reference(backend, case):
    """<vjp(c), u> through the collectives equals <c, FD(u)> of the reference."""
    _check_vjp(backend, case)


def named_extrema_derivatives_match_reference(backend, case):
    """jvp and vjp through pmax/pmin equal finite differences of the reference,
    taken outside and inside the named vmaps (JAX has no differentiation rule
    for pmax/pmin: skipped there)."""
    _check_jvp(backend, case)
    _check_vjp(backend, case)
    _check_member_jvp(backend, case)
    _check_member_vjp(backend, case)


def named_collectives_member_derivatives_match_reference(backend, case):
    """jvp and vjp taken by each member inside the named vmaps -- where the
    collectives' own jvp and transpose rules run, not their batching rules --
    equal finite differences of the reference (jvp) and <c, FD(u)> (vjp)."""
    _check_member_vjp(backend, case)
    _check_member_jvp(backend, case)


def _check_jvp(backend, case):
    f, want = _prepare(backend, case, "jvp")
    (u,) = directions((case.x,), salt=40)
    y, t = evaluate_compiled(backend, lambda x, u: backend.jvp(f, (x,), (u,)), case.x, u)
    require_finite(t, what="tangent")
    assert_close(case, "jvp primal output", y, want, kind="reference")
    fd = fd_jvp(case.reference, (case.x,), (u,))
    assert_close(case,
                 "jvp tangent vs float64 finite differences of the reference", t, fd, kind="reference")


def _check_vjp(backend, case):
    f, want = _prepare(backend, case, "vjp")
    (u,) = directions((case.x,), salt=41)
    (c,) = directions((want.astype(case.x.dtype),), salt=42)
    (ct,) = evaluate_compiled(backend, lambda x, c: backend.vjp(f, x)[1](c), case.x, c)
    require_finite(ct, what="cotangent")
    if ct.shape != case.x.shape:
        fail(case, f"cotangent shape {ct.shape} != input shape {case.x.shape}")
    fd = fd_jvp(case.reference, (case.x,), (u,))
    assert_dot_equal(case, "<vjp(c), u> vs <c, FD(u)>",
                     ((ct,), (u,)), ((c,), (fd,)), kind="reference")



def _check_member_jvp(backend, case):
    _, want = _prepare(backend, case, "member_jvp")
    (u,) = directions((case.x,), salt=43)
    y, t = evaluate_compiled(backend, case.member_derivative_program(backend, "jvp"), case.x, u)
    require_finite(t, what="tangent")
    assert_close(case, "per-member jvp primal output", y, want, kind="reference")
    fd = fd_jvp(case.reference, (case.x,), (u,))
    assert_close(case, "per-member jvp tangent vs float64 finite differences of the reference",
                 t, fd, kind="reference")


def _check_member_vjp(backend, case):
    case = case.batched_everywhere()
    _, want = _prepare(backend, case, "member_vjp")
    (u,) = directions((case.x,), salt=44)
    (c,) = directions((want.astype(case.x.dtype),), salt=45)
    ct = evaluate_compiled(backend, case.member_derivative_program(backend, "vjp"), case.x, c)
    require_finite(ct, what="cotangent")
    if ct.shape != case.x.shape:
        fail(case, f"per-member cotangent shape {ct.shape} != input shape {case.x.shape}")
    fd = fd_jvp(case.reference, (case.x,), (u,))
    assert_dot_equal(case, "per-member <vjp(c), u> vs <c, FD(u)>",
                     ((ct,), (u,)), ((c,), (fd,)), kind="reference")
