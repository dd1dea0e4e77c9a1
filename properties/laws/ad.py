"""Laws of forward and reverse mode."""
from __future__ import annotations

import numpy as np

from ._common import (all_argnums, assert_close, assert_dot_equal, check_conditioning,
                      directions, evaluate, evaluate_compiled, fail, fd_jvp, leaves,
                      require_finite, require_no_kink, scalarize)


def jvp_matches_finite_differences(backend, case):
    """jvp(f) equals central finite differences computed in float64."""
    _jvp_vs_finite_differences(backend, case)


def piecewise_jvp_matches_finite_differences(backend, case):
    """jvp(f) equals float64 central differences also for programs with
    piecewise-smooth ops (max, sort, top_k, cummax, pooling, floor, ...), at
    points away from their kinks (where two step sizes disagree the case is
    filtered): the one check of their jvp rules independent of autodiff."""
    _jvp_vs_finite_differences(backend, case, kinks=True)


def _jvp_vs_finite_differences(backend, case, kinks=False):
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    t = directions(case.args, salt=1)
    if kinks:
        require_no_kink(f, case.args, t)
    y_out, t_out = evaluate(lambda: backend.jvp(f, case.args, t))
    require_finite(t_out, what="tangent")
    assert_close(case, "jvp primal output", y_out, y)
    want = fd_jvp(f, case.args, t)
    assert_close(case, "jvp tangent vs float64 finite differences", t_out, want, kind="reference")


def linearize_matches_jvp(backend, case):
    """linearize(f) gives f's value and a linear map equal to jvp's tangent."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    t = directions(case.args, salt=2)
    y_lin, f_lin = backend.linearize(f, *case.args)
    assert_close(case, "linearize primal output", evaluate(lambda: y_lin), y)
    _, want = evaluate(lambda: backend.jvp(f, case.args, t))
    require_finite(want, what="tangent")
    got = evaluate(f_lin, *t)
    assert_close(case, "linearized map vs jvp", got, want)


def vjp_adjoint_of_jvp(backend, case):
    """<v, J u> from jvp equals <J^T v, u> from vjp."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    u = directions(case.args, salt=3)
    v = directions((y,), salt=4)[0]
    _, ju = evaluate(lambda: backend.jvp(f, case.args, u))
    y_vjp, pullback = backend.vjp(f, *case.args)
    jtv = evaluate(pullback, v)
    require_finite(ju, jtv, what="derivative")
    if len(leaves(jtv)) != len(case.args):
        fail(case, f"vjp returned {len(leaves(jtv))} cotangents for {len(case.args)} inputs")
    for ct, a in zip(leaves(jtv), case.args):
        if ct.shape != np.shape(a):
            fail(case, f"cotangent shape {ct.shape} != input shape {np.shape(a)}")
    assert_close(case, "vjp primal output", evaluate(lambda: y_vjp), y)
    assert_dot_equal(case, "<v, J u> vs <J^T v, u>", (v, ju), (jtv, u))


def vjp_of_vjp_matches_jvp(backend, case):
    """The pullback c -> J^T c is linear, and its own vjp applied to u is J u:
    vjp of vjp equals jvp. Transposes the transposed program, so the transpose
    rules of the primitives only reverse mode emits (scatter_add_along_axis,
    cumchooser_cotangent, pad, dynamic_update_slice, ...) are checked against
    jvp, which does not use them."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    u = directions(case.args, salt=5)
    c = directions((y,), salt=6)[0]

    def run(xs, c, u):
        _, pullback = backend.vjp(f, *xs)
        _, pullback_of_pullback = backend.vjp(pullback, c)
        (ju,) = pullback_of_pullback(tuple(u))
        return ju, backend.jvp(f, tuple(xs), tuple(u))[1]

    got, want = evaluate_compiled(backend, run, tuple(case.args), c, u)
    require_finite(got, want, what="derivative")
    assert_close(case, "vjp of vjp (c -> J^T c) applied to u vs jvp J u", got, want)


def jacfwd_matches_jacrev(backend, case):
    """jacfwd(f) equals jacrev(f)."""
    f = case.program.build(backend)
    check_conditioning(f, case.args)
    argnums = all_argnums(case.args)
    fwd = evaluate_compiled(backend, backend.jacfwd(f, argnums=argnums), *case.args)
    rev = evaluate_compiled(backend, backend.jacrev(f, argnums=argnums), *case.args)
    require_finite(fwd, rev, what="jacobian")
    assert_close(case, "jacfwd vs jacrev", rev, fwd)


def _full_matrix(blocks, args):
    """Assemble hessian blocks H[i][j] into one (N, N) matrix."""
    sizes = [int(np.size(a)) for a in args]
    rows = []
    for i, row in enumerate(blocks):
        rows.append(np.concatenate([np.asarray(row[j]).reshape(sizes[i], sizes[j])
                                    for j in range(len(args))], axis=1))
    return np.concatenate(rows, axis=0)


def hessian_symmetric(backend, case):
    """The hessian of a smooth scalar function is symmetric."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    g = scalarize(backend, f, y)
    argnums = all_argnums(case.args)
    blocks = evaluate_compiled(backend, backend.hessian(g, argnums=argnums), *case.args)
    require_finite(blocks, what="hessian")
    try:
        H = _full_matrix(blocks, case.args)
    except (ValueError, TypeError, IndexError) as exc:
        fail(case, f"hessian has the wrong structure: {exc}")
    assert_close(case, "H vs H^T", H.T, H)


# --- grad, vjp and jvp tied together, and each against finite differences ----------

def _scalar_case(backend, case):
    """(f, g, y): the program, g = sum(w * f) with fixed weights, and f's value."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    return f, scalarize(backend, f, y), y


def grad_matches_jvp(backend, case):
    """<grad g(x), v> equals jvp(g)(x; v) for a scalar g."""
    _, g, _ = _scalar_case(backend, case)
    v = directions(case.args, salt=5)
    grads = evaluate(backend.grad(g, argnums=all_argnums(case.args)), *case.args)
    _, jv = evaluate(lambda: backend.jvp(g, case.args, v))
    require_finite(grads, jv, what="derivative")
    _check_cotangent_shapes(case, grads)
    assert_dot_equal(case, "<grad g, v> vs jvp(g)(x; v)", (grads, v), ((np.ones(()),), (jv,)))


def grad_matches_vjp(backend, case):
    """grad(g) equals vjp(g)(1.0), and value_and_grad gives g's value."""
    _, g, _ = _scalar_case(backend, case)
    argnums = all_argnums(case.args)
    grads = evaluate(backend.grad(g, argnums=argnums), *case.args)
    out, pullback = backend.vjp(g, *case.args)
    one = np.ones(np.shape(out), np.asarray(out).dtype)
    cts = evaluate(pullback, one)
    require_finite(grads, cts, what="derivative")
    _check_cotangent_shapes(case, grads)
    assert_close(case, "grad(g) vs vjp(g)(1)", grads, cts)
    value, grads2 = evaluate(backend.value_and_grad(g, argnums=argnums), *case.args)
    assert_close(case, "value_and_grad value vs g", value, evaluate(g, *case.args))
    assert_close(case, "value_and_grad gradient vs vjp(g)(1)", grads2, cts)


def grad_matches_finite_differences(backend, case):
    """<grad g(x), v> equals float64 central differences of g along v."""
    _, g, _ = _scalar_case(backend, case)
    v = directions(case.args, salt=6)
    grads = evaluate(backend.grad(g, argnums=all_argnums(case.args)), *case.args)
    require_finite(grads, what="gradient")
    _check_cotangent_shapes(case, grads)
    want = fd_jvp(g, case.args, v)
    assert_dot_equal(case, "<grad g, v> vs float64 finite differences", (grads, v),
                     ((np.ones(()),), (want,)), kind="reference")


def vjp_matches_finite_differences(backend, case):
    """<J^T c, u> from vjp equals <c, FD(u)> with float64 central differences."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    u = directions(case.args, salt=8)
    c = directions((y,), salt=9)[0]
    cts = evaluate(backend.vjp(f, *case.args)[1], c)
    require_finite(cts, what="cotangent")
    _check_cotangent_shapes(case, cts)
    want = fd_jvp(f, case.args, u)
    assert_dot_equal(case, "<J^T c, u> vs <c, FD(u)>", (cts, u), ((c,), (want,)), kind="reference")


def jacobian_matches_finite_differences(backend, case):
    """jacfwd and jacrev, contracted with a direction u, equal FD(u) in float64."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    u = directions(case.args, salt=10)
    argnums = all_argnums(case.args)
    want = fd_jvp(f, case.args, u)
    for name in ("jacfwd", "jacrev"):
        blocks = evaluate_compiled(backend, getattr(backend, name)(f, argnums=argnums), *case.args)
        require_finite(blocks, what=name)
        got = _contract(name, case, blocks, u, np.shape(y))
        assert_close(case,
                     f"{name}(f) . u vs float64 finite differences", got, want, kind="reference")


def hessian_matches_jacfwd_jacrev(backend, case):
    """hessian(g) equals jacfwd(jacrev(g)) and jacrev(jacfwd(g))."""
    _, g, _ = _scalar_case(backend, case)
    argnums = all_argnums(case.args)
    H = evaluate_compiled(backend, backend.hessian(g, argnums=argnums), *case.args)
    require_finite(H, what="hessian")
    for outer, inner in (("jacfwd", "jacrev"), ("jacrev", "jacfwd")):
        want = evaluate_compiled(backend, getattr(backend, outer)(
            getattr(backend, inner)(g, argnums=argnums), argnums=argnums), *case.args)
        require_finite(want, what=f"{outer}({inner})")
        assert_close(case, f"hessian vs {outer}({inner}(g))", H, want)


def hessian_matches_finite_differences(backend, case):
    """v^T H u equals float64 central differences of jvp(g)(x; u) along v."""
    _, g, _ = _scalar_case(backend, case)
    u = directions(case.args, salt=11)
    v = directions(case.args, salt=12)
    blocks = evaluate_compiled(backend, backend.hessian(g, argnums=all_argnums(case.args)),
                               *case.args)
    require_finite(blocks, what="hessian")
    try:
        H = _full_matrix(blocks, case.args)
    except (ValueError, TypeError, IndexError) as exc:
        fail(case, f"hessian has the wrong structure: {exc}")
    flat_u, flat_v = _flat(u), _flat(v)

    directional = backend.jit(lambda *xs: backend.jvp(g, xs, tuple(
        np.asarray(t, x.dtype) for t, x in zip(u, xs)))[1])
    want = fd_jvp(directional, case.args, v)
    assert_close(case, "v^T H u vs FD of jvp(g)(.; u) along v",
                 flat_v @ H @ flat_u, want, kind="reference")


def piecewise_second_jvp_matches_finite_differences(backend, case):
    """The second directional derivative, jvp of jvp(f)(.; u) along v, equals float64 central
    differences of jvp(f)(.; u) along v, also for programs with piecewise-smooth ops, at
    points away from their kinks: forward over forward mode differentiates the tangent maps
    of pooling and running extrema (select_and_gather_add, cumchooser_tangent), which only
    second-order forward derivatives reach. The program runs on its inputs mapped by
    x -> 2 sin(pi x / 4), which keeps the drawn input intervals ([-2, 2], [0.5, 2]): a
    program of piecewise-linear ops alone has a zero second derivative, in which a wrong
    rule of those tangent maps would not show."""
    program = case.program.build(backend)
    jnp = backend.numpy

    def f(*xs):
        return program(*[2.0 * jnp.sin(x * (np.pi / 4)) for x in xs])

    check_conditioning(f, case.args)
    u = directions(case.args, salt=13)
    v = directions(case.args, salt=14)

    def first(*xs):
        return backend.jvp(f, xs, tuple(np.asarray(t, x.dtype) for t, x in zip(u, xs)))[1]

    directional = backend.jit(first)
    require_no_kink(directional, case.args, v)
    got = evaluate_compiled(backend, lambda *xs: backend.jvp(first, xs, tuple(
        np.asarray(t, x.dtype) for t, x in zip(v, xs)))[1], *case.args)
    require_finite(got, what="second derivative")
    want = fd_jvp(directional, case.args, v)
    assert_close(case, "jvp of jvp(f)(.; u) along v vs FD of jvp(f)(.; u) along v", got, want,
                 kind="reference")


def _flat(xs):
    return np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in xs])


def _check_cotangent_shapes(case, cts):
    got = leaves(cts)
    if len(got) != len(case.args):
        fail(case, f"{len(got)} cotangents for {len(case.args)} inputs")
    for ct, a in zip(got, case.args):
        if ct.shape != np.shape(a):
            fail(case, f"cotangent shape {ct.shape} != input shape {np.shape(a)}")


def _contract(name, case, blocks, u, out_shape):
    """sum_i J_i . u_i for Jacobian blocks J_i of shape out_shape + in_shape_i."""
    blocks = leaves(blocks)
    total = np.zeros(out_shape)
    for J, t in zip(blocks, u):
        want_shape = tuple(out_shape) + np.shape(t)
        if J.shape != want_shape:
            fail(case, f"{name} block shape {J.shape}, expected {want_shape}")
        total = total + (J.reshape(int(np.prod(out_shape)), -1) @ np.ravel(t)).reshape(out_shape)
    return total
