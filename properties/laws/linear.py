"""Laws of transposition: linear_transpose and linear_call."""
from __future__ import annotations

import jax
import numpy as np

from ._common import (assert_close, assert_dot_equal, directions, evaluate, fail,
                      leaves, require_finite, stack)


def _transpose_parts(backend, case):
    f = case.program.build(backend)
    y = evaluate(f, *case.args)
    require_finite(y, what="output")
    T = backend.linear_transpose(f, *case.args)
    return f, y, T


def linear_transpose_dot_product(backend, case):
    """<v, A u> == <A^T v, u> for a random linear program A."""
    f, y, T = _transpose_parts(backend, case)
    u = directions(case.args, salt=5)
    v = directions((y,), salt=6)[0]
    au = evaluate(f, *u)
    atv = evaluate(T, v)
    if len(leaves(atv)) != len(case.args):
        fail(case, f"transpose returned {len(leaves(atv))} cotangents for {len(case.args)} inputs")
    assert_dot_equal(case, "<v, A u> vs <A^T v, u>", (v, au), (atv, u))


def linear_transpose_twice(backend, case):
    """Transposing twice gives back the original linear map."""
    f, y, T = _transpose_parts(backend, case)
    TT = backend.linear_transpose(T, np.zeros_like(y))
    u = directions(case.args, salt=7)
    got = evaluate(TT, tuple(u))
    if len(leaves(got)) != 1:
        fail(case, f"double transpose returned {len(leaves(got))} outputs")
    assert_close(case, "transpose(transpose(A)) u vs A u", leaves(got)[0], evaluate(f, *u))


# --- linear_call ------------------------------------------------------------
# linear arguments and outputs may be pytrees (strategies' "pytree" kind)

FORMS = ("plain", "jit")


def tree_directions(tree, salt):
    """Deterministic directions shaped like every leaf of ``tree``."""
    flat, treedef = jax.tree_util.tree_flatten(tree)
    return jax.tree_util.tree_unflatten(treedef, list(directions(flat, salt)))


def _under(backend, form, fn):
    """fn as evaluated under ``form`` (vmap maps over a batch of inputs)."""
    if form == "jit":
        return backend.jit(fn)
    if form == "vmap":
        return backend.vmap(fn)
    return fn


def _inputs(form, a, b):
    """What one form is evaluated on: one input, or a batch of two."""
    return stack([a, b], 0) if form == "vmap" else a


def _expected(form, fn, a, b):
    if form == "vmap":
        return stack([evaluate(fn, a), evaluate(fn, b)], 0)
    return evaluate(fn, a)


def _element(tree, i):
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[i], tree)


def _linear_call_parts(backend, case, form):
    fun = case.linear.fun(backend)
    fun_t = case.linear.transpose(backend)
    res, x = case.residuals, case.x

    def lc(x_):
        return backend.linear_call(fun, fun_t, res, x_)

    lc_f = _under(backend, form, lc) if form == "jit" else lc
    y = evaluate(fun, res, x)
    require_finite(y, what="output")
    y0 = jax.tree_util.tree_map(np.zeros_like, y)

    def T1(ct):
        return backend.linear_transpose(lc_f, x)(ct)[0]

    def T2(v):
        return backend.linear_transpose(T1, y0)(v)[0]

    def T3(ct):
        return backend.linear_transpose(T2, x)(ct)[0]

    return fun, fun_t, res, x, y, lc, T1, T2, T3


def _involution(backend, case, form):
    fun, fun_t, res, x, y, lc, T1, T2, T3 = _linear_call_parts(backend, case, form)
    us = (tree_directions(x, 8), tree_directions(x, 9))
    vs = (tree_directions(y, 10), tree_directions(y, 11))
    checks = [("linear_call(fun) vs fun", lc, lambda a: fun(res, a), us),
              # a linear function is its own derivative: jvp at x along a is fun(a)
              ("jvp of linear_call(fun) vs fun", lambda a: backend.jvp(lc, (x,), (a,))[1],
               lambda a: fun(res, a), us),
              ("transpose once vs fun_transpose", T1, lambda a: fun_t(res, a), vs),
              ("transpose twice vs fun", T2, lambda a: fun(res, a), us),
              ("transpose three times vs fun_transpose", T3, lambda a: fun_t(res, a), vs)]
    for what, fn, ref, (a, b) in checks:
        got = evaluate(_under(backend, form, fn), _inputs(form, a, b))
        assert_close(case, f"[{form}] {what}", got, _expected(form, ref, a, b))


def _dot_product(backend, case, form):
    fun, fun_t, res, x, y, lc, T1, T2, T3 = _linear_call_parts(backend, case, form)
    us = (tree_directions(x, 12), tree_directions(x, 13))
    vs = (tree_directions(y, 14), tree_directions(y, 15))
    au = evaluate(_under(backend, form, lc), _inputs(form, *us))
    atv = evaluate(_under(backend, form, T1), _inputs(form, *vs))
    if form == "vmap":
        pairs = [((vs[i], _element(au, i)), (_element(atv, i), us[i])) for i in range(2)]
    else:
        pairs = [((vs[0], au), (atv, us[0]))]
    for lhs, rhs in pairs:
        assert_dot_equal(case, f"[{form}] <v, fun(u)> vs <fun_transpose(v), u>", lhs, rhs)


def linear_call_involution(backend, case):
    """Transposing linear_call once gives fun_transpose, twice fun, three
    times fun_transpose again, and its jvp is fun -- plain and under jit.  (A wrong
    fun_transpose passes this law: see linear_call_dot_product.)"""
    for form in FORMS:
        _involution(backend, case, form)


def linear_call_dot_product(backend, case):
    """<v, fun(u)> == <T(v), u> where T is linear_call's transpose, plain and
    under jit: this catches a wrong fun_transpose, which involution cannot."""
    for form in FORMS:
        _dot_product(backend, case, form)


def linear_call_under_vmap(backend, case):
    """Under vmap, linear_call and its transposes equal a loop, and the
    dot-product test holds per batch element."""
    _involution(backend, case, "vmap")
    _dot_product(backend, case, "vmap")
