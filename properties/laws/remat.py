"""Laws of remat: checkpoint(f) computes f, whatever the policy."""
from __future__ import annotations

from ._common import (all_argnums, assert_close, check_conditioning, directions, evaluate,
                      evaluate_compiled, require_finite, scalarize)


def remat_matches_no_remat(backend, case):
    """checkpoint(f, policy=...) equals f: the value (eagerly and compiled),
    jvp, and the gradient with respect to every input, also under vmap
    (transformations compiled once with jit)."""
    f, plain = case.build(backend, remat=True), case.build(backend, remat=False)
    y = check_conditioning(plain, case.args)
    assert_close(case, "checkpoint(f) vs f", evaluate(f, *case.args), y)
    t = directions(case.args, salt=50)
    argnums = all_argnums(case.args)

    def derivatives(fun):
        def run(xs, ts):
            jv = backend.jvp(fun, xs, ts)
            g = backend.grad(scalarize(backend, fun, y), argnums=argnums)(*xs)
            per_example = backend.vmap(backend.grad(scalarize(backend, fun, y), argnums=argnums))(
                *[backend.numpy.stack([x, 0.5 * x]) for x in xs])
            return jv, g, per_example
        return evaluate_compiled(backend, run, case.args, t)

    want = derivatives(plain)
    require_finite(want, what="derivative")
    got = derivatives(f)
    for what, a, b in zip(("jvp", "grad", "vmap(grad)"), got, want):
        assert_close(case, f"{what} of checkpoint(f) vs of f", a, b)
