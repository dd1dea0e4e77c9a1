"""Laws of forward and reverse mode (issue items 3 and 4)."""
from __future__ import annotations

import numpy as np

from ._common import (all_argnums, assert_close, assert_dot_equal, check_conditioning,
                      directions, evaluate, fail, fd_jvp, leaves, require_finite,
                      scalarize)


def jvp_matches_finite_differences(backend, case):
    """jvp(f) equals central finite differences computed in float64."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    t = directions(case.args, salt=1)
    y_out, t_out = evaluate(lambda: backend.jvp(f, case.args, t))
    require_finite(t_out, what="tangent")
    assert_close("jvp_matches_finite_differences", case, "jvp primal output", y_out, y)
    want = fd_jvp(f, case.args, t)
    assert_close("jvp_matches_finite_differences", case, "jvp tangent vs float64 finite differences",
                 t_out, want, kind="reference")


def linearize_matches_jvp(backend, case):
    """linearize(f) gives f's value and a linear map equal to jvp's tangent."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    t = directions(case.args, salt=2)
    y_lin, f_lin = backend.linearize(f, *case.args)
    assert_close("linearize_matches_jvp", case, "linearize primal output", evaluate(lambda: y_lin), y)
    _, want = evaluate(lambda: backend.jvp(f, case.args, t))
    require_finite(want, what="tangent")
    got = evaluate(f_lin, *t)
    assert_close("linearize_matches_jvp", case, "linearized map vs jvp", got, want)


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
        fail("vjp_adjoint_of_jvp", case, f"vjp returned {len(leaves(jtv))} cotangents for "
             f"{len(case.args)} inputs")
    for ct, a in zip(leaves(jtv), case.args):
        if ct.shape != np.shape(a):
            fail("vjp_adjoint_of_jvp", case, f"cotangent shape {ct.shape} != input shape "
                 f"{np.shape(a)}")
    assert_close("vjp_adjoint_of_jvp", case, "vjp primal output", evaluate(lambda: y_vjp), y)
    assert_dot_equal("vjp_adjoint_of_jvp", case, "<v, J u> vs <J^T v, u>",
                     (v, ju), (jtv, u))


def jacfwd_matches_jacrev(backend, case):
    """jacfwd(f) equals jacrev(f)."""
    f = case.program.build(backend)
    check_conditioning(f, case.args)
    argnums = all_argnums(case.args)
    fwd = evaluate(backend.jacfwd(f, argnums=argnums), *case.args)
    rev = evaluate(backend.jacrev(f, argnums=argnums), *case.args)
    require_finite(fwd, rev, what="jacobian")
    assert_close("jacfwd_matches_jacrev", case, "jacfwd vs jacrev", rev, fwd)


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
    blocks = evaluate(backend.hessian(g, argnums=argnums), *case.args)
    require_finite(blocks, what="hessian")
    try:
        H = _full_matrix(blocks, case.args)
    except (ValueError, TypeError, IndexError) as exc:
        fail("hessian_symmetric", case, f"hessian has the wrong structure: {exc}")
    assert_close("hessian_symmetric", case, "H vs H^T", H.T, H)
