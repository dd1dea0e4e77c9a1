"""Differential laws: the backend and JAX agree on one program.

Compared with the run's reference backend (``--reference``, JAX by default); skipped
when the backend is that reference itself (there is nothing to compare).
Cross-implementation results are compared with the 'reference' tolerance.
"""
from __future__ import annotations

from ..backends import differential_reference
from ._common import (all_argnums, assert_close, check_conditioning, directions, evaluate,
                      one_level, require_finite, scalarize)
from .vmap import _per_example_check


def _pair(backend, case):
    ref = differential_reference(backend)
    return ref, case.program.build(backend), case.program.build(ref)


def differential_value(backend, case):
    """f gives JAX's value."""
    ref, fb, fr = _pair(backend, case)
    want = check_conditioning(fr, case.args)
    assert_close(case, f"{backend.name} vs {ref.name} value",
                 evaluate(fb, *case.args), want, kind="reference")


def differential_jvp(backend, case):
    """jvp(f) gives JAX's primal and tangent outputs."""
    ref, fb, fr = _pair(backend, case)
    check_conditioning(fr, case.args)
    t = directions(case.args, salt=30)
    want = evaluate(lambda: ref.jvp(fr, case.args, t))
    require_finite(want, what="jax jvp")
    got = evaluate(lambda: backend.jvp(fb, case.args, t))
    assert_close(case, f"{backend.name} vs {ref.name} jvp", got, want, kind="reference")


def differential_vjp(backend, case):
    """vjp(f) gives JAX's cotangents."""
    ref, fb, fr = _pair(backend, case)
    y = check_conditioning(fr, case.args)
    v = directions((y,), salt=31)[0]
    want = evaluate(ref.vjp(fr, *case.args)[1], v)
    require_finite(want, what="jax vjp")
    got = evaluate(backend.vjp(fb, *case.args)[1], v)
    assert_close(case, f"{backend.name} vs {ref.name} vjp", got, want, kind="reference")


def differential_grad(backend, case):
    """grad(f) gives JAX's gradient."""
    ref, fb, fr = _pair(backend, case)
    y = check_conditioning(fr, case.args)
    argnums = all_argnums(case.args)
    want = evaluate(ref.grad(scalarize(ref, fr, y), argnums=argnums), *case.args)
    require_finite(want, what="jax gradient")
    got = evaluate(backend.grad(scalarize(backend, fb, y), argnums=argnums), *case.args)
    assert_close(case, f"{backend.name} vs {ref.name} grad", got, want, kind="reference")


def differential_vmap(backend, case):
    """vmap(f) gives JAX's batched result."""
    ref, fb, fr = _pair(backend, case)
    _per_example_check(fr, case)
    in_axes, out_axes, _ = one_level(case)
    kw = dict(in_axes=in_axes, out_axes=out_axes)
    want = evaluate(ref.vmap(fr, **kw), *case.args)
    got = evaluate(backend.vmap(fb, **kw), *case.args)
    assert_close(case, f"{backend.name} vs {ref.name} vmap", got, want, kind="reference")
