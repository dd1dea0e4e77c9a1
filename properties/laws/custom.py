"""Laws of user-defined derivative rules.

The cases are F(w, x) = h(w*x) + w with a rule for h' that is either the
true derivative or deliberately not (see cases.CustomCase).  Transformations
must *use* the rule, whatever it is; a rule that claims to be the derivative
must agree with autodiff of the primal and with finite differences.
"""
from __future__ import annotations

import numpy as np

from ._common import (assert_close, assert_dot_equal, check_conditioning, directions, evaluate,
                      fail, fd_jvp, require_finite, stack)


def make_custom_jvp(backend, case):
    np_ = backend.numpy
    F = backend.custom_jvp(case.primal(np_))
    F.defjvp(case.jvp_rule(np_))
    return F


def make_custom_vjp(backend, case):
    np_ = backend.numpy
    F = backend.custom_vjp(case.primal(np_))
    F.defvjp(case.fwd(np_), case.bwd(np_), optimize_remat=case.optimize_remat)
    return F


def make_custom_gradient(backend, case):
    np_ = backend.numpy
    primal, fwd, bwd = case.primal(np_), case.fwd(np_), case.bwd(np_)

    @backend.custom_gradient
    def F(w, x):
        return primal(w, x), lambda g: bwd(fwd(w, x)[1], g)
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
    assert_close(case, "F(w, x) vs primal", evaluate(F, *primals),
                 evaluate(case.primal(backend.numpy), *primals))
    assert_close(case, "jvp primal output vs rule", y, want_y)
    assert_close(case, "jvp tangent vs rule", t, want_t)


def _true_jvp_checks(backend, case, transformed_jvp):
    primals = _point(case)
    tangents = directions(primals, salt=21)
    primal = case.primal(backend.numpy)
    got = transformed_jvp(primals, tangents)
    require_finite(got, what="tangent")
    _, auto = evaluate(lambda: backend.jvp(primal, primals, tangents))
    assert_close(case, "rule vs autodiff of the primal", got, auto, kind="reference")
    fd = fd_jvp(primal, primals, tangents)
    assert_close(case, "rule vs float64 finite differences", got, fd, kind="reference")


def custom_jvp_true_rule(backend, case):
    """A custom_jvp rule that is the derivative agrees with autodiff and FD."""
    F = make_custom_jvp(backend, case)
    _true_jvp_checks(backend, case, lambda p, t: evaluate(lambda: backend.jvp(F, p, t))[1])


def _uses_bwd(backend, case, F):
    primals = _point(case)
    np_ = backend.numpy
    want = evaluate(case.primal(np_), *primals)
    require_finite(want, what="output")
    assert_close(case, "F(w, x) vs primal", evaluate(F, *primals), want)
    y, pullback = backend.vjp(F, *primals)
    assert_close(case, "vjp primal output vs primal", evaluate(lambda: y), want)
    g = directions((want,), salt=22)[0]
    assert_close(case, "vjp cotangents vs bwd", evaluate(pullback, g),
                 evaluate(case.bwd(np_), case.fwd(np_)(*primals)[1], g))


def custom_vjp_uses_rule(backend, case):
    """custom_vjp: fwd's primal output is F's, and vjp returns what bwd returns."""
    fwd_y, _ = evaluate(case.fwd(backend.numpy), case.w, case.x)
    assert_close(case, "fwd primal output vs primal", fwd_y,
                 evaluate(case.primal(backend.numpy), case.w, case.x))
    _uses_bwd(backend, case, make_custom_vjp(backend, case))


def _true_vjp_checks(backend, case, F):
    primals = _point(case)
    primal = case.primal(backend.numpy)
    y = evaluate(primal, *primals)
    g = directions((y,), salt=23)[0]
    got = evaluate(backend.vjp(F, *primals)[1], g)
    require_finite(got, what="cotangent")
    auto = evaluate(backend.vjp(primal, *primals)[1], g)
    assert_close(case, "bwd vs autodiff of the primal", got, auto, kind="reference")
    u = directions(primals, salt=24)
    fd = fd_jvp(primal, primals, u)
    assert_dot_equal(case, "<g, FD(u)> vs <bwd(g), u>", (g, fd), (got, u), kind="reference")


def custom_vjp_true_rule(backend, case):
    """A custom_vjp bwd that is the derivative agrees with autodiff and FD."""
    _true_vjp_checks(backend, case, make_custom_vjp(backend, case))


def custom_vjp_forward_over_forward(backend, case):
    """Second-order forward mode through a custom_vjp function whose bwd is the
    derivative (its tangents come from transposing bwd, which impl does and JAX
    refuses): <g, jvp along (v, s) of (p, u) -> jvp(F)(p; u)> agrees with float64
    finite differences along v of the primal's reverse-mode <vjp(g), u>, plus
    <vjp(g), s> (the inner tangent moves too, so every outer tangent is live);
    and vmap of jvp(F) equals a loop of it."""
    F = make_custom_vjp(backend, case)
    primals = _point(case)
    primal = case.primal(backend.numpy)
    y = check_conditioning(primal, primals)
    u, v, s = (directions(primals, salt=salt) for salt in (25, 26, 28))
    (g,) = directions((y,), salt=27)
    n = len(primals)
    got = evaluate(lambda: backend.jvp(lambda *pu: backend.jvp(F, pu[:n], pu[n:])[1],
                                       tuple(primals) + tuple(u), tuple(v) + tuple(s))[1])
    require_finite(got, what="second-order tangent")

    def reverse(*p, along=u):   # <vjp(primal)(g), along>, by reverse mode of the primal alone
        cts = evaluate(backend.vjp(primal, *p)[1], g.astype(p[0].dtype))
        return np.float64(sum(np.vdot(c, t) for c, t in zip(cts, along)))
    want = fd_jvp(reverse, primals, v) + reverse(*primals, along=s)
    assert_dot_equal(case, "<g, d/d(v, s) jvp(F)(p; u)> vs FD_v <vjp(primal)(g), u> + <vjp(primal)(g), s>",
                     ((g,), (got,)), ((np.float64(1.0),), (want,)), kind="reference")
    # forward mode through F under vmap (over the batch of x) equals a loop of it
    w = primals[0]
    batched = evaluate(backend.vmap(lambda x: backend.jvp(F, (w, x), tuple(u))[1]), case.batch)
    loop = np.stack([np.asarray(evaluate(lambda: backend.jvp(F, (w, x), tuple(u))[1])) for x in case.batch])
    assert_close(case, "vmap of jvp(F) vs a loop of it", batched, loop)


def custom_gradient_uses_rule(backend, case):
    """custom_gradient: F's value is the primal and vjp returns the rule's cotangents."""
    _uses_bwd(backend, case, make_custom_gradient(backend, case))


def custom_gradient_true_rule(backend, case):
    """A custom_gradient rule that is the derivative agrees with autodiff and FD."""
    _true_vjp_checks(backend, case, make_custom_gradient(backend, case))


def custom_rules_under_vmap(backend, case):
    """vmap of custom_jvp / custom_vjp functions equals a loop: values, jvp,
    and gradients, where w is shared (unbatched) so its cotangent is summed."""
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
        assert_close(case, f"[{kind}] vmap(F) vs loop", got, want)

        if kind == "custom_jvp":
            def jvp_at(x, tx, F=F):
                return backend.jvp(F, (w, x), (tw, tx))[1]
            got = evaluate(backend.vmap(jvp_at), batch, tbatch)
            want = stack([evaluate(jvp_at, batch[i], tbatch[i]) for i in range(size)], 0)
            assert_close(case, f"[{kind}] vmap(jvp(F)) vs loop", got, want)

        def total(w_, xs, F=F):
            return np_.sum(backend.vmap(F, in_axes=(None, 0))(w_, xs) * weights)

        gw, gx = evaluate(backend.grad(total, argnums=(0, 1)), w, batch)
        per = [evaluate(backend.grad(lambda w_, x_, i=i, F=F: np_.sum(F(w_, x_) * weights[i]),
                                     argnums=(0, 1)), w, batch[i]) for i in range(size)]
        want_w = np.sum(np.stack([p[0] for p in per]), axis=0)
        want_x = np.stack([p[1] for p in per])
        assert_close(case, f"[{kind}] grad wrt shared w (summed) vs loop", gw, want_w)
        assert_close(case, f"[{kind}] grad wrt batched x vs loop", gx, want_x)


# --- custom rules wrapped around drawn programs: true, scaled, symbolic-zero rules ----------

class _Primal:
    """What custom_vjp's fwd receives with symbolic_zeros=True (value, perturbed)."""

    def __init__(self, value, perturbed):
        self.value, self.perturbed = value, perturbed


def _require_symbolic(backend, case):
    from .. import features
    if case.rule == "symbolic_zeros":
        features.require(backend, "symbolic_zeros" if case.kind == "custom_jvp"
                         else "custom_vjp_symbolic_zeros")


def _rule_output(backend, case, rule, t_or_c):
    """What the rule itself returns, called directly (no custom-rule machinery)."""
    if case.kind == "custom_jvp":
        return evaluate(lambda: rule(case.args, t_or_c))
    fwd, bwd = rule
    primals = [(_Primal(a, True) if case.rule == "symbolic_zeros" else a) for a in case.args]
    _, res = fwd(*primals)
    return evaluate(lambda: bwd(res, t_or_c))


def custom_wrapper_uses_rule(backend, case):
    """jvp of a custom_jvp wrapper (vjp of a custom_vjp wrapper) returns what
    the rule returns -- true, scaled or symbolic-zero -- eagerly and under jit;
    linear_transpose of a custom_jvp wrapper of a linear body transposes the body."""
    _require_symbolic(backend, case)
    f, rule = case.make(backend)
    y = evaluate(f, *case.args)
    require_finite(y, what="output")
    if case.kind == "custom_jvp":
        t = directions(case.args, salt=60)
        want = _rule_output(backend, case, rule, t)
        require_finite(want, what="rule output")
        got = evaluate(lambda: backend.jvp(f, case.args, t))
        assert_close(case, "jvp vs the rule", got, want)
        got = evaluate(backend.jit(lambda xs, ts: backend.jvp(f, xs, ts)), case.args, t)
        assert_close(case, "jit(jvp) vs the rule", got, want)
        if case.weights:   # a linear body: linear_transpose transposes it, the rule plays no part
            (c,) = directions((y,), salt=63)
            got = evaluate(backend.linear_transpose(f, *case.args), c)
            assert_close(case, "linear_transpose vs the weights times the cotangent", got,
                         tuple(w * np.asarray(c) for w in case.weights))
    else:
        (c,) = directions((y,), salt=61)
        want = _rule_output(backend, case, rule, c)
        require_finite(want, what="rule output")
        assert_close(case, "vjp vs the rule", evaluate(backend.vjp(f, *case.args)[1], c), want)
        got = evaluate(backend.jit(lambda xs, ct: backend.vjp(f, *xs)[1](ct)), case.args, c)
        assert_close(case, "jit(vjp) vs the rule", got, want)


def custom_wrapper_true_rule_matches_finite_differences(backend, case):
    """A rule that claims to be the derivative agrees with float64 finite
    differences of the wrapped program (jvp, or <vjp(c), u> == <c, FD(u)>)."""
    if not case.claims_true:
        return
    _require_symbolic(backend, case)
    f, _ = case.make(backend)
    y = check_conditioning(f, case.args)
    u = directions(case.args, salt=62)
    want = fd_jvp(f, case.args, u)
    if case.kind == "custom_jvp":
        _, t = evaluate(lambda: backend.jvp(f, case.args, u))
        require_finite(t, what="tangent")
        assert_close(case, "jvp vs float64 finite differences", t, want, kind="reference")
    else:
        (c,) = directions((y,), salt=63)
        cts = evaluate(backend.vjp(f, *case.args)[1], c)
        require_finite(cts, what="cotangent")
        assert_dot_equal(case, "<vjp(c), u> vs <c, FD(u)>", (cts, u), ((c,), (want,)),
                         kind="reference")


def custom_wrapper_symbolic_zeros(backend, case):
    """With symbolic_zeros=True, differentiating only the ``perturbed`` inputs
    hands the rule SymbolicZero tangents (custom_jvp) or perturbed=False
    primals (custom_vjp) exactly for the others, and the derivative is right."""
    if case.rule != "symbolic_zeros":
        return
    _require_symbolic(backend, case)
    seen = []
    f, _ = case.make(backend, seen)
    chosen = [i for i, p in enumerate(case.perturbed) if p]

    def of_chosen(*xs):
        full = list(case.args)
        for i, x in zip(chosen, xs):
            full[i] = x
        return f(*full)
    xs = tuple(case.args[i] for i in chosen)
    u = directions(xs, salt=64)
    want = fd_jvp(of_chosen, xs, u)
    if case.kind == "custom_jvp":
        _, got = evaluate(lambda: backend.jvp(of_chosen, xs, u))
        expected_flags = tuple(not p for p in case.perturbed)
    else:
        y = evaluate(of_chosen, *xs)
        (c,) = directions((y,), salt=65)
        cts = evaluate(backend.vjp(of_chosen, *xs)[1], c)
        got = None
        expected_flags = case.perturbed
    if not seen:
        fail(case, "the rule was never called")
    if seen[-1] != expected_flags:
        what = "SymbolicZero tangents" if case.kind == "custom_jvp" else "perturbed flags"
        fail(case, f"the rule saw {what} {seen[-1]}, expected {expected_flags} "
             f"(differentiating inputs {chosen})")
    if got is not None:
        assert_close(case, "jvp vs float64 finite differences", got, want, kind="reference")
    else:
        assert_dot_equal(case, "<vjp(c), u> vs <c, FD(u)>", (cts, u), ((c,), (want,)),
                         kind="reference")
