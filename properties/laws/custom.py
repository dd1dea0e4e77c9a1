"""Laws of user-defined derivative rules (issue item 7).

The cases are F(w, x) = h(w*x) + w with a rule for h' that is either the
true derivative or deliberately not (see cases.CustomCase).  Transformations
must *use* the rule, whatever it is; a rule that claims to be the derivative
must agree with autodiff of the primal and with finite differences.
"""
from __future__ import annotations

import numpy as np

from ._common import (assert_close, assert_dot_equal, directions, evaluate, fd_jvp,
                      require_finite, stack)


def make_custom_jvp(backend, case):
    np_ = backend.numpy
    F = backend.custom_jvp(case.primal(np_))
    F.defjvp(case.jvp_rule(np_))
    return F


def make_custom_vjp(backend, case):
    np_ = backend.numpy
    F = backend.custom_vjp(case.primal(np_))
    F.defvjp(case.fwd(np_), case.bwd(np_))
    return F


def make_custom_gradient(backend, case):
    np_ = backend.numpy
    primal, bwd = case.primal(np_), case.bwd(np_)

    @backend.custom_gradient
    def F(w, x):
        return primal(w, x), lambda g: bwd((w, x), g)
    return F


def _point(case):
    primals = (case.w, case.x)
    require_finite(primals, what="input")
    return primals


def custom_jvp_uses_rule(backend, case):
    """jvp of a custom_jvp function returns exactly what its rule returns."""
    F = make_custom_jvp(backend, case)
    primals = _point(case)
    tangents = directions(primals, salt=20)
    want_y, want_t = evaluate(case.jvp_rule(backend.numpy), primals, tangents)
    require_finite(want_y, want_t, what="rule output")
    y, t = evaluate(lambda: backend.jvp(F, primals, tangents))
    law = "custom_jvp_uses_rule"
    assert_close(law, case, "F(w, x) vs primal", evaluate(F, *primals),
                 evaluate(case.primal(backend.numpy), *primals))
    assert_close(law, case, "jvp primal output vs rule", y, want_y)
    assert_close(law, case, "jvp tangent vs rule", t, want_t)


def _true_jvp_checks(backend, case, law, transformed_jvp):
    primals = _point(case)
    tangents = directions(primals, salt=21)
    primal = case.primal(backend.numpy)
    got = transformed_jvp(primals, tangents)
    require_finite(got, what="tangent")
    _, auto = evaluate(lambda: backend.jvp(primal, primals, tangents))
    assert_close(law, case, "rule vs autodiff of the primal", got, auto, kind="reference")
    fd = fd_jvp(primal, primals, tangents)
    assert_close(law, case, "rule vs float64 finite differences", got, fd, kind="reference")


def custom_jvp_true_rule(backend, case):
    """A custom_jvp rule that is the derivative agrees with autodiff and FD."""
    F = make_custom_jvp(backend, case)
    _true_jvp_checks(backend, case, "custom_jvp_true_rule",
                     lambda p, t: evaluate(lambda: backend.jvp(F, p, t))[1])


def _uses_bwd(backend, case, law, F):
    primals = _point(case)
    np_ = backend.numpy
    want = evaluate(case.primal(np_), *primals)
    require_finite(want, what="output")
    assert_close(law, case, "F(w, x) vs primal", evaluate(F, *primals), want)
    y, pullback = backend.vjp(F, *primals)
    assert_close(law, case, "vjp primal output vs primal", evaluate(lambda: y), want)
    g = directions((want,), salt=22)[0]
    assert_close(law, case, "vjp cotangents vs bwd", evaluate(pullback, g),
                 evaluate(case.bwd(np_), primals, g))


def custom_vjp_uses_rule(backend, case):
    """custom_vjp: fwd's primal output is F's, and vjp returns what bwd returns."""
    law = "custom_vjp_uses_rule"
    fwd_y, _ = evaluate(case.fwd(backend.numpy), case.w, case.x)
    assert_close(law, case, "fwd primal output vs primal", fwd_y,
                 evaluate(case.primal(backend.numpy), case.w, case.x))
    _uses_bwd(backend, case, law, make_custom_vjp(backend, case))


def _true_vjp_checks(backend, case, law, F):
    primals = _point(case)
    primal = case.primal(backend.numpy)
    y = evaluate(primal, *primals)
    g = directions((y,), salt=23)[0]
    got = evaluate(backend.vjp(F, *primals)[1], g)
    require_finite(got, what="cotangent")
    auto = evaluate(backend.vjp(primal, *primals)[1], g)
    assert_close(law, case, "bwd vs autodiff of the primal", got, auto, kind="reference")
    u = directions(primals, salt=24)
    fd = fd_jvp(primal, primals, u)
    assert_dot_equal(law, case, "<g, FD(u)> vs <bwd(g), u>", (g, fd), (got, u),
                     kind="reference")


def custom_vjp_true_rule(backend, case):
    """A custom_vjp bwd that is the derivative agrees with autodiff and FD."""
    _true_vjp_checks(backend, case, "custom_vjp_true_rule", make_custom_vjp(backend, case))


def custom_gradient_uses_rule(backend, case):
    """custom_gradient: F's value is the primal and vjp returns the rule's cotangents."""
    _uses_bwd(backend, case, "custom_gradient_uses_rule", make_custom_gradient(backend, case))


def custom_gradient_true_rule(backend, case):
    """A custom_gradient rule that is the derivative agrees with autodiff and FD."""
    _true_vjp_checks(backend, case, "custom_gradient_true_rule",
                     make_custom_gradient(backend, case))


def custom_rules_under_vmap(backend, case):
    """vmap of custom_jvp / custom_vjp functions equals a loop: values, jvp,
    and gradients, where w is shared (unbatched) so its cotangent is summed."""
    law = "custom_rules_under_vmap"
    np_ = backend.numpy
    w, batch = case.w, case.batch
    require_finite(w, batch, what="input")
    size = batch.shape[0]
    weights = directions((batch,), salt=25)[0]
    tw = directions((w,), salt=26)[0]
    tbatch = directions((batch,), salt=27)[0]
    for kind, make in (("custom_jvp", make_custom_jvp), ("custom_vjp", make_custom_vjp)):
        F = make(backend, case)
        got = evaluate(backend.vmap(F, in_axes=(None, 0)), w, batch)
        want = stack([evaluate(F, w, batch[i]) for i in range(size)], 0)
        assert_close(law, case, f"[{kind}] vmap(F) vs loop", got, want)

        if kind == "custom_jvp":
            def jvp_at(x, tx, F=F):
                return backend.jvp(F, (w, x), (tw, tx))[1]
            got = evaluate(backend.vmap(jvp_at), batch, tbatch)
            want = stack([evaluate(jvp_at, batch[i], tbatch[i]) for i in range(size)], 0)
            assert_close(law, case, f"[{kind}] vmap(jvp(F)) vs loop", got, want)

        def total(w_, xs, F=F):
            return np_.sum(backend.vmap(F, in_axes=(None, 0))(w_, xs) * weights)

        gw, gx = evaluate(backend.grad(total, argnums=(0, 1)), w, batch)
        per = [evaluate(backend.grad(lambda w_, x_, i=i, F=F: np_.sum(F(w_, x_) * weights[i]),
                                     argnums=(0, 1)), w, batch[i]) for i in range(size)]
        want_w = np.sum(np.stack([p[0] for p in per]), axis=0)
        want_x = np.stack([p[1] for p in per])
        assert_close(law, case, f"[{kind}] grad wrt shared w (summed) vs loop", gw, want_w)
        assert_close(law, case, f"[{kind}] grad wrt batched x vs loop", gx, want_x)
