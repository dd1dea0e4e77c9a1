"""Laws of control flow: scan, fori_loop, while_loop, cond, switch and map mean
their Python loops and branches, and their derivatives and batching agree with
float64 finite differences and loops over examples."""
from __future__ import annotations

import jax
import numpy as np

from ._common import (assert_close, assert_dot_equal, check_conditioning, directions, evaluate,
                      evaluate_compiled, fd_jvp, require_finite, stack)


def _float_fun(case, fn):
    """fn as a function of the float arguments only (predicates, indices, trip counts fixed)."""
    def g(*floats):
        args = list(case.args)
        for i, x in zip(case.float_argnums, floats):
            args[i] = x
        return fn(*args)
    return g


def _floats(case):
    return tuple(case.args[i] for i in case.float_argnums)


def _meaning(backend, case, args=None):
    """The Python meaning as a function of the float arguments, compiled once
    with backend.jit (the loop unrolls while tracing; predicates, indices and
    trip counts stay concrete Python values)."""
    ref = case.reference(backend)
    args = case.args if args is None else args

    def g(*floats):
        full = list(args)
        for i, x in zip(case.float_argnums, floats):
            full[i] = x
        return ref(*full)
    return backend.jit(g)


def control_flow_matches_python(backend, case):
    """The primitive equals its Python meaning (a for/while loop, an if, a list
    index with clamping) on concrete values, eagerly and under jit."""
    f = case.build(backend)
    want = check_conditioning(_meaning(backend, case), _floats(case))
    assert_close(case, f"{case.kind} vs Python", evaluate(f, *case.args), want)
    assert_close(case, f"jit({case.kind}) vs Python", evaluate(backend.jit(f), *case.args), want)


def control_flow_jvp_matches_finite_differences(backend, case):
    """jvp through the primitive equals float64 central differences of the Python meaning."""
    if not case.float_argnums:
        return
    f, ref = case.build(backend), _meaning(backend, case)
    floats = _floats(case)
    y = check_conditioning(ref, floats)
    t = directions(floats, salt=20)
    y_out, t_out = evaluate_compiled(
        backend, lambda xs, ts: backend.jvp(_float_fun(case, f), xs, ts), floats, t)
    require_finite(t_out, what="tangent")
    assert_close(case, "jvp primal output", y_out, y)
    want = fd_jvp(ref, floats, t)
    assert_close(case,
                 f"jvp of {case.kind} vs float64 finite differences", t_out, want, kind="reference")


def control_flow_vjp_matches_finite_differences(backend, case):
    """<vjp(c), u> through the primitive equals <c, FD(u)> of the Python meaning."""
    if not case.float_argnums:
        return
    f, ref = case.build(backend), _meaning(backend, case)
    floats = _floats(case)
    y = check_conditioning(ref, floats)
    u = directions(floats, salt=21)
    y_leaves, treedef = jax.tree_util.tree_flatten(y)
    c = jax.tree_util.tree_unflatten(treedef, list(directions(tuple(y_leaves), salt=22)))
    cts = evaluate_compiled(backend, lambda xs, ct: backend.vjp(_float_fun(case, f), *xs)[1](ct),
                            floats, c)
    require_finite(cts, what="cotangent")
    want = fd_jvp(ref, floats, u)
    assert_dot_equal(case,
                     f"<vjp of {case.kind}, u> vs <c, FD(u)>", (cts, u), (c, want), kind="reference")


def control_flow_vmap_matches_loop(backend, case):
    """vmap of the primitive, every argument batched (predicates, indices and
    trip counts too), equals the Python meaning looped over the examples."""
    f = case.build(backend)
    outs = []
    for i in range(case.batch_size):
        example = tuple(np.asarray(b)[i] for b in case.batch)
        outs.append(check_conditioning(_meaning(backend, case, example),
                                       tuple(example[k] for k in case.float_argnums)))
    got = evaluate_compiled(backend, backend.vmap(f), *case.batch)
    assert_close(case, f"vmap({case.kind}) vs loop of Python", got, stack(outs, 0))
