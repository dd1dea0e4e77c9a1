"""Laws of jit: compiling does not change results."""
from __future__ import annotations

from ._common import (all_argnums, assert_close, check_conditioning, evaluate,
                      one_level, require_finite, scalarize)
from .vmap import _per_example_check


def jit_matches_eager(backend, case):
    """jit(f) == f within the dtype's tolerance."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    assert_close(case, "jit(f) vs f", evaluate(backend.jit(f), *case.args), y)


def jit_grad_matches_grad(backend, case):
    """jit(grad(f)) == grad(f)."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    g = backend.grad(scalarize(backend, f, y), argnums=all_argnums(case.args))
    want = evaluate(g, *case.args)
    require_finite(want, what="gradient")
    assert_close(case, "jit(grad(f)) vs grad(f)", evaluate(backend.jit(g), *case.args), want)


def jit_vmap_matches_vmap(backend, case):
    """jit(vmap(f)) == vmap(f)."""
    f = case.program.build(backend)
    _per_example_check(f, case)
    in_axes, out_axes, _ = one_level(case)
    vf = backend.vmap(f, in_axes=in_axes, out_axes=out_axes)
    assert_close(case, "jit(vmap(f)) vs vmap(f)",
                 evaluate(backend.jit(vf), *case.args), evaluate(vf, *case.args))
