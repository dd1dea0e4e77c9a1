"""Differential laws: the backend and JAX agree on one program.

Compared with the run's reference backend (``--reference``, JAX by default); skipped
when the backend is that reference itself (there is nothing to compare).
Cross-implementation results are compared with the 'reference' tolerance.

Each law is a *side* -- what it computes, on either backend -- run on the reference (on
cases the reference runs well-conditioned) and on the backend, then compared
(``_common.differential``); the parts stay on the law (``law.fn.differential_parts``), so
a standalone script can run the backend's side against the reference's results recorded
in it.
"""
from __future__ import annotations

from ._common import (all_argnums, assert_close, check_conditioning, differential, directions,
                      evaluate, one_level, require_finite, scalarize)
from .vmap import _per_example_check


def close_to_reference(case, what, got, want):
    """The backend's results against the reference's, with the 'reference' tolerance."""
    assert_close(case, what, got, want, kind="reference")


def _conditioned(reference, case, want):
    check_conditioning(case.program.build(reference), case.args)
    require_finite(want, what=f"{reference.name} result")


def _per_example_conditioned(reference, case, want):
    _per_example_check(case.program.build(reference), case)
    require_finite(want, what=f"{reference.name} result")


def _law(side, what, prepare=_conditioned):
    return differential(side, what, close_to_reference, prepare)


def value_of(backend, case):
    return evaluate(case.program.build(backend), *case.args)


def jvp_of(backend, case):
    t = directions(case.args, salt=30)
    return evaluate(lambda: backend.jvp(case.program.build(backend), case.args, t))


def vjp_of(backend, case):
    f = case.program.build(backend)
    v = directions((evaluate(f, *case.args),), salt=31)[0]
    return evaluate(backend.vjp(f, *case.args)[1], v)


def grad_of(backend, case):
    f = case.program.build(backend)
    g = scalarize(backend, f, evaluate(f, *case.args))
    return evaluate(backend.grad(g, argnums=all_argnums(case.args)), *case.args)


def vmap_of(backend, case):
    in_axes, out_axes, _ = one_level(case)
    kw = dict(in_axes=in_axes, out_axes=out_axes)
    return evaluate(backend.vmap(case.program.build(backend), **kw), *case.args)


@_law(value_of, "value")
def differential_value(backend, case):
    """f gives JAX's value."""


@_law(jvp_of, "jvp")
def differential_jvp(backend, case):
    """jvp(f) gives JAX's primal and tangent outputs."""


@_law(vjp_of, "vjp")
def differential_vjp(backend, case):
    """vjp(f) gives JAX's cotangents."""


@_law(grad_of, "grad")
def differential_grad(backend, case):
    """grad(f) gives JAX's gradient."""


@_law(vmap_of, "vmap", prepare=_per_example_conditioned)
def differential_vmap(backend, case):
    """vmap(f) gives JAX's batched result."""
