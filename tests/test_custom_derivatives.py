"""custom_jvp, custom_vjp, custom_gradient, closure_convert, linear_call and custom_vmap
under every transformation and the compositions of them.

The same program is written once against a module pair (jax, jax.numpy) or
(impl, impl.numpy) and run with both; JAX is the reference wherever it has the
feature. Where JAX refuses (forward mode through custom_vjp, reverse mode through
custom_vmap, ...) the reference is a JAX program with the equivalent custom_jvp rule,
float64 finite differences, or values derived by hand.

The custom rules deliberately differ from the true derivative (a factor 2 on the x
part of d(sin(x) * y)), so a test can tell the rule was used.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from impl.custom_derivatives import linear_call
from _custom_helpers import F32, assert_trees_close
from helpers import nightly


# ------------------------------------------------------------------ programs
# Each builder takes (m, np_) and returns f(x, y) on float32 vectors.

def _rule_tangent(np_, x, y, xd, yd):
    return 2. * np_.cos(x) * xd * y + np_.sin(x) * yd


def cjvp_defjvp(m, np_):
    @m.custom_jvp
    def f(x, y):
        return np_.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, y), (xd, yd) = primals, tangents
        return f(x, y), _rule_tangent(np_, x, y, xd, yd)
    return f


def cjvp_defjvps(m, np_):
    @m.custom_jvp
    def f(x, y):
        return np_.sin(x) * y

    f.defjvps(lambda xd, out, x, y: 2. * np_.cos(x) * xd * y,
              lambda yd, out, x, y: np_.sin(x) * yd)
    return f


def cjvp_defjvps_none(m, np_):
    @m.custom_jvp
    def f(x, y):
        return np_.sin(x) * y

    f.defjvps(lambda xd, out, x, y: 2. * np_.cos(x) * xd * y, None)
    return f


def cjvp_nondiff_fn(m, np_):
    @partial(m.custom_jvp, nondiff_argnums=(0,))
    def h(g, x, y):
        return g(x) * y

    @h.defjvp
    def h_jvp(g, primals, tangents):
        (x, y), (xd, yd) = primals, tangents
        return h(g, x, y), 2. * np_.cos(x) * xd * y + g(x) * yd
    return lambda x, y: h(np_.sin, x, y)


def cjvp_nondiff_traced(m, np_):
    """A traced array in nondiff_argnums: never differentiated (like stop_gradient)."""
    @partial(m.custom_jvp, nondiff_argnums=(2,))
    def h(x, y, s):
        return np_.sin(x) * y * s

    @h.defjvp
    def h_jvp(s, primals, tangents):
        (x, y), (xd, yd) = primals, tangents
        return h(x, y, s), _rule_tangent(np_, x, y, xd, yd) * s
    return lambda x, y: h(x, y, y * y)


def cjvp_kwargs(m, np_):
    @m.custom_jvp
    def h(x, y, scale=1.):
        return np_.sin(x) * y * scale

    @h.defjvp
    def h_jvp(primals, tangents):
        (x, y, scale), (xd, yd, _) = primals, tangents
        return h(x, y, scale), _rule_tangent(np_, x, y, xd, yd) * scale
    return lambda x, y: h(x, y=y)


def cjvp_pytree(m, np_):
    @m.custom_jvp
    def h(p):
        return {"out": np_.sin(p["x"]) * p["y"][0]}

    @h.defjvp
    def h_jvp(primals, tangents):
        (p,), (t,) = primals, tangents
        x, y = p["x"], p["y"][0]
        return h(p), {"out": _rule_tangent(np_, x, y, t["x"], t["y"][0])}
    return lambda x, y: h({"x": x, "y": (y,)})["out"]


def cvjp(m, np_):
    @m.custom_vjp
    def f(x, y):
        return np_.sin(x) * y

    def fwd(x, y):
        return f(x, y), (np_.cos(x), np_.sin(x), y)

    def bwd(res, g):
        cos_x, sin_x, y = res
        return (2. * cos_x * g * y, sin_x * g)

    f.defvjp(fwd, bwd)
    return f


def cvjp_none(m, np_):
    @m.custom_vjp
    def f(x, y):
        return np_.sin(x) * y

    def fwd(x, y):
        return f(x, y), {"c": np_.cos(x), "y": [y]}

    def bwd(res, g):
        return (2. * res["c"] * g * res["y"][0], None)

    f.defvjp(fwd, bwd)
    return f


def cvjp_nondiff_fn(m, np_):
    @partial(m.custom_vjp, nondiff_argnums=(0,))
    def h(g, x, y):
        return g(x) * y

    def fwd(g, x, y):
        return h(g, x, y), (x, y)

    def bwd(g, res, ct):
        x, y = res
        return (2. * np_.cos(x) * ct * y, g(x) * ct)

    h.defvjp(fwd, bwd)
    return lambda x, y: h(np_.sin, x, y)


def cgrad(m, np_):
    @m.custom_gradient
    def f(x, y):
        return np_.sin(x) * y, lambda g: (2. * np_.cos(x) * g * y, np_.sin(x) * g)
    return f


def cjvp_stop_gradient_ref(m, np_):
    """JAX's reference for cjvp_nondiff_traced: JAX cannot stage a traced nondiff
    argument under grad(jit), so pass it as an ordinary stop_gradient'ed argument."""
    @m.custom_jvp
    def h(x, y, s):
        return np_.sin(x) * y * s

    @h.defjvp
    def h_jvp(primals, tangents):
        (x, y, s), (xd, yd, _) = primals, tangents
        return h(x, y, s), _rule_tangent(np_, x, y, xd, yd) * s
    return lambda x, y: h(x, y, jax.lax.stop_gradient(y * y))


# For forward mode through custom_vjp (JAX refuses): the custom_jvp program whose rule
# is the transpose of bwd.
FORWARD_REFERENCE = {cvjp: cjvp_defjvp, cvjp_nondiff_fn: cjvp_defjvp,
                     cgrad: cjvp_defjvp, cvjp_none: cjvp_defjvps_none}

PROGRAMS = [cjvp_defjvp, cjvp_defjvps, cjvp_defjvps_none, cjvp_nondiff_fn,
            cjvp_nondiff_traced, cjvp_kwargs, cjvp_pytree, cvjp, cvjp_none,
            cvjp_nondiff_fn, cgrad]


# ------------------------------------------------------------- transformations

def _inputs():
    rng = np.random.RandomState(0)
    x = rng.uniform(-2, 2, 3).astype(F32)
    y = rng.uniform(0.5, 2, 3).astype(F32)
    tx = rng.uniform(-1, 1, 3).astype(F32)
    ty = rng.uniform(-1, 1, 3).astype(F32)
    X = rng.uniform(-2, 2, (2, 3)).astype(F32)
    Y = rng.uniform(0.5, 2, (2, 3)).astype(F32)
    return x, y, tx, ty, X, Y


def _S(np_, f):
    return lambda x, y: np_.sum(f(x, y))


def t_eval(m, np_, f, x, y, tx, ty, X, Y):
    return f(x, y)


def t_jit(m, np_, f, x, y, tx, ty, X, Y):
    return m.jit(f)(x, y)


def t_jvp(m, np_, f, x, y, tx, ty, X, Y):
    return m.jvp(f, (x, y), (tx, ty))


def t_linearize(m, np_, f, x, y, tx, ty, X, Y):
    out, lin = m.linearize(f, x, y)
    return out, lin(tx, ty)


def t_vjp(m, np_, f, x, y, tx, ty, X, Y):
    out, pb = m.vjp(f, x, y)
    return out, pb(tx)


def t_grad(m, np_, f, x, y, tx, ty, X, Y):
    return m.grad(_S(np_, f), (0, 1))(x, y)


def t_jit_grad(m, np_, f, x, y, tx, ty, X, Y):
    return m.jit(m.grad(_S(np_, f), (0, 1)))(x, y)


def t_grad_jit(m, np_, f, x, y, tx, ty, X, Y):
    return m.grad(m.jit(_S(np_, f)), (0, 1))(x, y)


def t_vmap(m, np_, f, x, y, tx, ty, X, Y):
    return m.vmap(f)(X, Y)


def t_vmap_in_axes(m, np_, f, x, y, tx, ty, X, Y):
    return m.vmap(f, (1, None))(X.T, y)


def t_vmap_vmap(m, np_, f, x, y, tx, ty, X, Y):
    return m.vmap(m.vmap(f), (0, None))(np.stack([X, X * 2]), Y)


def t_vmap_grad(m, np_, f, x, y, tx, ty, X, Y):
    return m.vmap(m.grad(_S(np_, f), (0, 1)))(X, Y)


def t_vmap_grad_unbatched(m, np_, f, x, y, tx, ty, X, Y):
    return m.vmap(m.grad(_S(np_, f), (0, 1)), (0, None))(X, y)


def t_grad_vmap(m, np_, f, x, y, tx, ty, X, Y):
    return m.grad(lambda a, b: np_.sum(m.vmap(f)(a, b)), (0, 1))(X, Y)


def t_grad_vmap_unbatched(m, np_, f, x, y, tx, ty, X, Y):
    # y is not batched: its cotangent is summed over the batch
    return m.grad(lambda a, b: np_.sum(m.vmap(f, (0, None))(a, b) ** 2), (0, 1))(X, y)


def t_jit_vmap_grad(m, np_, f, x, y, tx, ty, X, Y):
    return m.jit(m.vmap(m.grad(_S(np_, f), (0, 1))))(X, Y)


def t_vmap_jit_grad(m, np_, f, x, y, tx, ty, X, Y):
    return m.vmap(m.jit(m.grad(_S(np_, f), (0, 1))), (0, None))(X, y)


def t_grad_grad(m, np_, f, x, y, tx, ty, X, Y):
    g = m.grad(_S(np_, f), 0)
    return m.grad(lambda a, b: np_.sum(g(a, b) * a), (0, 1))(x, y)


def t_jvp_grad(m, np_, f, x, y, tx, ty, X, Y):
    return m.jvp(m.grad(_S(np_, f), (0, 1)), (x, y), (tx, ty))


def t_jvp_jvp(m, np_, f, x, y, tx, ty, X, Y):
    inner = lambda a, b: m.jvp(f, (a, b), (tx, ty))[1]  # noqa: E731
    return m.jvp(inner, (x, y), (ty, tx))


def t_jvp_vmap(m, np_, f, x, y, tx, ty, X, Y):
    return m.jvp(m.vmap(f), (X, Y), (X * 0.5, Y * 0.25))


def t_vmap_jvp(m, np_, f, x, y, tx, ty, X, Y):
    return m.vmap(lambda a, b: m.jvp(f, (a, b), (tx, b)), (0, None))(X, y)


def t_jvp_jit(m, np_, f, x, y, tx, ty, X, Y):
    return m.jvp(m.jit(f), (x, y), (tx, ty))


def t_jit_jvp(m, np_, f, x, y, tx, ty, X, Y):
    return m.jit(lambda a, b: m.jvp(f, (a, b), (tx, ty)))(x, y)


def t_jacfwd(m, np_, f, x, y, tx, ty, X, Y):
    return m.jacfwd(f, (0, 1))(x, y)


def t_jacrev(m, np_, f, x, y, tx, ty, X, Y):
    return m.jacrev(f, (0, 1))(x, y)


def t_hessian(m, np_, f, x, y, tx, ty, X, Y):
    return m.hessian(lambda a: np_.sum(f(a, y)))(x)


def t_grad_of_jit_of_vmap(m, np_, f, x, y, tx, ty, X, Y):
    return m.grad(lambda a: np_.sum(m.jit(m.vmap(f))(a, Y)))(X)


# CI runs each custom rule under eval, jit, jvp, vjp, grad, vmap, linearize, hessian and the
# two-level stacks grad_grad, jvp_grad, vmap_grad, grad_vmap; the other stacks run nightly.
TRANSFORMS = [t_eval, t_jit, t_jvp, t_linearize, t_vjp, t_grad, t_vmap, t_vmap_grad,
              t_grad_vmap, t_grad_grad, t_jvp_grad, t_hessian]
NIGHTLY_TRANSFORMS = [t_jit_grad, t_grad_jit, t_vmap_in_axes, t_vmap_vmap,
                      t_vmap_grad_unbatched, t_grad_vmap_unbatched, t_jit_vmap_grad,
                      t_vmap_jit_grad, t_jvp_jvp, t_jvp_vmap, t_vmap_jvp, t_jvp_jit, t_jit_jvp,
                      t_jacfwd, t_jacrev, t_grad_of_jit_of_vmap]

# forward mode through custom_vjp: JAX refuses, so the reference is the custom_jvp twin
FORWARD = {t_jvp, t_linearize, t_jvp_grad, t_jvp_jvp, t_jvp_vmap, t_vmap_jvp, t_jvp_jit,
           t_jit_jvp, t_jacfwd, t_hessian}


@pytest.mark.parametrize("transform", TRANSFORMS + [nightly(t) for t in NIGHTLY_TRANSFORMS],
                         ids=lambda t: t.__name__[2:])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_against_jax(program, transform):
    args = _inputs()
    got = transform(impl, inp, program(impl, inp), *args)
    ref_program = cjvp_stop_gradient_ref if program is cjvp_nondiff_traced else program
    if transform in FORWARD and program in FORWARD_REFERENCE:
        ref_program = FORWARD_REFERENCE[program]
    want = transform(jax, jjnp, ref_program(jax, jjnp), *args)
    assert_trees_close(got, want)


def test_rule_is_used():
    """The factor 2 of the rules shows in the derivative (so the rules are not bypassed)."""
    x, y = F32(0.5), F32(1.5)
    for program in PROGRAMS:
        f = program(impl, inp)
        expected_dx = 2 * np.cos(0.5) * 1.5
        if program is cjvp_nondiff_traced:
            expected_dx *= 1.5 * 1.5     # the nondiff scale y * y
        np.testing.assert_allclose(impl.grad(f)(x, y), expected_dx, rtol=1e-6)
        np.testing.assert_allclose(impl.jvp(f, (x, y), (F32(1), F32(0)))[1], expected_dx,
                                   rtol=1e-6)


def test_linearize_custom_vjp_uses_bwd_once_per_transpose():
    calls = []

    @impl.custom_vjp
    def f(x):
        return x * 3.

    f.defvjp(lambda x: (f(x), None), lambda r, g: (calls.append(1) or g * 5.,))
    _, lin = impl.linearize(f, F32(2.))
    np.testing.assert_allclose(lin(F32(1.)), 5.)
    _, pb = impl.vjp(f, F32(2.))
    np.testing.assert_allclose(pb(F32(1.))[0], 5.)
    assert calls


# --------------------------------------------------------------- custom_jvp extras

def test_custom_jvp_linear_is_transposable():
    @impl.custom_jvp
    def scale(x):
        return 3. * x

    scale.defjvp(lambda p, t: (scale(p[0]), scale(t[0])))
    x = np.ones(3, F32)
    ct, = impl.linear_transpose(scale, x)(np.arange(3, dtype=F32))
    np.testing.assert_allclose(ct, 3. * np.arange(3))
    # and grad goes through the rule, which applies the custom function to tangents
    np.testing.assert_allclose(impl.grad(lambda x: inp.sum(scale(x)))(x), 3. * np.ones(3))
    np.testing.assert_allclose(impl.vmap(impl.grad(lambda x: inp.sum(scale(scale(x)))))(
        np.ones((2, 3), F32)), 9. * np.ones((2, 3)))


def test_custom_jvp_higher_order_rule():
    """A rule written with the custom function itself: derivatives of every order."""
    def derivatives(m, np_):
        @m.custom_jvp
        def e(x):
            return np_.exp(x)

        e.defjvp(lambda p, t: (e(p[0]), e(p[0]) * t[0] * 2.))
        g, vals = e, []
        for _ in range(4):
            g = m.grad(g)
            vals.append(float(g(F32(0.3))))
        return vals

    got, want = derivatives(impl, inp), derivatives(jax, jjnp)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(got, [2. ** k * np.exp(0.3) for k in range(1, 5)], rtol=1e-5)


def test_custom_jvp_under_jit_is_staged():
    f = cjvp_defjvp(impl, inp)
    text = str(impl.make_jaxpr(f)(np.ones(3, F32), np.ones(3, F32)))
    assert "custom_jvp_call" in text
    # The primal call stays in the program unused (as in JAX's make_jaxpr); what the
    # gradient uses is the rule's cos.
    from impl.interpreters import partial_eval as pe
    program = impl.make_jaxpr(impl.grad(lambda x: inp.sum(f(x, x))))(np.ones(3, F32))
    text = str(pe.drop_unused_eqns(program.jaxpr))
    assert "custom_jvp_call" not in text and "cos" in text


def test_custom_jvp_int_argument_gets_float0_tangent():
    seen = []

    @impl.custom_jvp
    def f(x, n):
        return x * n

    @f.defjvp
    def f_jvp(p, t):
        seen.append(np.asarray(t[1]).dtype)
        return f(*p), t[0] * p[1]

    np.testing.assert_allclose(impl.grad(f)(F32(2.), 3), 3.)
    assert seen and seen[0] == jax.dtypes.float0


def test_custom_jvp_method_and_decorator_return():
    class C:
        @partial(impl.custom_jvp, nondiff_argnums=(0,))
        def f(self, x):
            return inp.sin(x)

    rule = C.f.defjvp(lambda self, p, t: (C.f(self, *p), 5. * t[0]))
    assert callable(rule)
    np.testing.assert_allclose(impl.grad(lambda x: C().f(x))(F32(1.)), 5.)


# --------------------------------------------------------------- custom_vjp extras

def test_custom_vjp_forward_mode_value():
    """jvp through custom_vjp is the transpose of ct -> bwd(res, ct), by hand."""
    @impl.custom_vjp
    def f(x, y):
        return inp.stack([x * y, x + y])

    def fwd(x, y):
        return f(x, y), (x, y)

    def bwd(res, ct):
        x, y = res
        # transpose of J = [[y, x], [1, 1]] scaled by [2, 3] columns
        return (2. * (y * ct[0] + ct[1]), 3. * (x * ct[0] + ct[1]))

    f.defvjp(fwd, bwd)
    x, y, tx, ty = 2., 5., 0.5, -1.
    _, t = impl.jvp(f, (F32(x), F32(y)), (F32(tx), F32(ty)))
    np.testing.assert_allclose(t, [2 * y * tx + 3 * x * ty, 2 * tx + 3 * ty], rtol=1e-6)
    J = impl.jacfwd(f, (0, 1))(F32(x), F32(y))
    np.testing.assert_allclose(np.stack(J, 1), [[2 * y, 3 * x], [2., 3.]], rtol=1e-6)


def test_custom_vjp_residuals_any_pytree_and_vmap_sum():
    @impl.custom_vjp
    def f(x, w):
        return x * w

    def fwd(x, w):
        return f(x, w), {"a": (x, None), "b": [w, 2.]}

    def bwd(res, g):
        x, _ = res["a"]
        w, two = res["b"]
        return (g * w * two, g * x)

    f.defvjp(fwd, bwd)
    X = np.arange(6, dtype=F32).reshape(2, 3)
    w = np.array([1., 2., 3.], F32)
    gx, gw = impl.grad(lambda X, w: inp.sum(impl.vmap(f, (0, None))(X, w)), (0, 1))(X, w)
    np.testing.assert_allclose(gx, 2 * np.broadcast_to(w, (2, 3)))
    np.testing.assert_allclose(gw, X.sum(0))        # batched cotangent summed over batch


def test_custom_vjp_bwd_none_per_leaf():
    @impl.custom_vjp
    def f(p):
        return p["a"] * p["b"]

    f.defvjp(lambda p: (f(p), p), lambda p, g: ({"a": g * p["b"], "b": None},))
    g = impl.grad(f)({"a": F32(2.), "b": F32(3.)})
    np.testing.assert_allclose(g["a"], 3.)
    np.testing.assert_allclose(g["b"], 0.)


def test_custom_vjp_closure_over_outer_tracer_under_vmap():
    """Closing over a batched value of an enclosing vmap is fine (not differentiated)."""
    f = cvjp(impl, inp)
    X = np.arange(6, dtype=F32).reshape(2, 3) / 3

    def per_example(xi):
        return impl.grad(lambda y: inp.sum(f(xi, y)))(np.ones(3, F32))
    np.testing.assert_allclose(impl.vmap(per_example)(X), np.sin(X), rtol=1e-6)


def test_custom_gradient_under_vmap_and_jit():
    f = cgrad(impl, inp)
    X = np.linspace(-1, 1, 6, dtype=F32).reshape(2, 3)
    y = np.full(3, 1.5, F32)
    want = 2 * np.cos(X) * 1.5
    got = impl.grad(lambda a: inp.sum(impl.vmap(f, (0, None))(a, y)))(X)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    got = impl.jit(impl.vmap(impl.grad(lambda a: inp.sum(f(a, y)))))(X)
    np.testing.assert_allclose(got, want, rtol=1e-6)


# --------------------------------------------------------------------- linear_call

def _div(r, x):
    return x / r


def _div_t(r, t):
    return t / r


def test_linear_call_matches_jax():
    def prog(m, np_):
        lc = m.custom_derivatives.linear_call
        return lambda x, r: x + lc(_div, _div_t, r, x)

    x, r = np.array([9., 3.], F32), np.array([3., 2.], F32)
    for transform in [
            lambda m, f: f(x, r),
            lambda m, f: m.jit(f)(x, r),
            lambda m, f: m.linear_transpose(lambda a: f(a, r), x)(np.ones(2, F32) * 18),
            lambda m, f: m.grad(lambda a: m.numpy.sum(f(a, r)))(x),
            lambda m, f: m.vjp(lambda a: f(a, r), x)[1](np.array([1., 2.], F32)),
            lambda m, f: m.jit(m.linear_transpose(lambda a: f(a, r), x))(np.ones(2, F32)),
    ]:
        assert_trees_close(transform(impl, prog(impl, inp)), transform(jax, prog(jax, jjnp)))


def _transpose(f, x_example):
    return lambda y: impl.linear_transpose(f, x_example)(y)[0]


def test_linear_call_nested_transposes():
    def custom_id(x):
        return linear_call(lambda _, x: x, lambda _, t: 7. * t, (), x)

    f = custom_id
    x = F32(2.)
    for depth in range(6):
        want = 2. * 7. if depth % 2 == 0 else 2.   # odd numbers of transposes use t
        f = _transpose(f, x)
        np.testing.assert_allclose(f(x), want)


def test_linear_call_vmap_jvp_and_residual_derivative():
    x = np.array([[1., 2.], [3., 4.], [5., 6.]], F32)
    r = np.array([2., 4.], F32)
    f = lambda a, b: linear_call(_div, _div_t, b, a)  # noqa: E731
    np.testing.assert_allclose(impl.vmap(f)(x, np.stack([r] * 3)), x / r)
    np.testing.assert_allclose(impl.vmap(f, (0, None))(x, r), x / r)
    # transpose of the batched call: unbatched linear input, cotangent summed
    ct = impl.linear_transpose(lambda a: impl.vmap(f, (None, 0))(a, np.stack([r] * 3)),
                               x[0])(x)[0]
    np.testing.assert_allclose(ct, (x / r).sum(0), rtol=1e-6)
    # transpose of transpose under vmap gives the original map back
    tt = _transpose(_transpose(lambda a: impl.vmap(f, (0, None))(a, r), x), x)
    np.testing.assert_allclose(tt(x), x / r, rtol=1e-6)
    # jvp: linear in x, and d/dr (x / r) = -x / r**2 from the callee's program
    _, t = impl.jvp(f, (x[0], r), (np.ones(2, F32), np.zeros(2, F32)))
    np.testing.assert_allclose(t, 1 / r, rtol=1e-6)
    _, t = impl.jvp(f, (x[0], r), (np.zeros(2, F32), np.ones(2, F32)))
    np.testing.assert_allclose(t, -x[0] / r ** 2, rtol=1e-6)
    g = impl.grad(lambda b: inp.sum(f(x[0], b)))(r)
    np.testing.assert_allclose(g, -x[0] / r ** 2, rtol=1e-6)
    # vmap of grad and grad of vmap over the residual
    g = impl.grad(lambda b: inp.sum(impl.vmap(f, (0, None))(x, b)))(r)
    np.testing.assert_allclose(g, (-x / r ** 2).sum(0), rtol=1e-6)


def test_linear_call_custom_transpose_used_by_grad():
    def f(x):
        return linear_call(lambda _, x: x, lambda _, t: 7. * t, (), x)
    np.testing.assert_allclose(impl.grad(f)(F32(1.)), 7.)
    np.testing.assert_allclose(impl.jit(impl.grad(f))(F32(1.)), 7.)
    np.testing.assert_allclose(impl.vmap(impl.grad(f))(np.ones(3, F32)), 7. * np.ones(3))


# --------------------------------------------------------------------- custom_vmap

def _cvmap_program(m, np_, log):
    cv = m.custom_batching.custom_vmap

    @cv
    def f(x, y):
        return np_.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        log.append((axis_size, tuple(in_batched)))
        xb, yb = in_batched
        out = np_.sin(x) * (y if not yb or xb else y)
        return out, xb or yb
    return f


@pytest.mark.parametrize("transform", [t_eval, t_jit, t_vmap, t_vmap_in_axes, t_vmap_vmap,
                                       t_jvp, t_jvp_vmap, t_vmap_jvp, t_jacfwd],
                         ids=lambda t: t.__name__[2:])
def test_custom_vmap_against_jax(transform):
    args = _inputs()
    log_i, log_j = [], []
    got = transform(impl, inp, _cvmap_program(impl, inp, log_i), *args)
    want = transform(jax, jjnp, _cvmap_program(jax, jjnp, log_j), *args)
    assert_trees_close(got, want)
    if transform in (t_vmap, t_vmap_in_axes, t_vmap_vmap):
        assert log_i  # the user rule ran


@pytest.mark.parametrize("transform", [t_grad, t_vjp, t_linearize, t_vmap_grad,
                                       t_vmap_grad_unbatched, t_grad_vmap,
                                       t_grad_vmap_unbatched, t_jit_vmap_grad, t_grad_grad,
                                       t_jvp_grad, t_hessian, t_jacrev],
                         ids=lambda t: t.__name__[2:])
def test_custom_vmap_reverse_mode(transform):
    """Reverse mode reaching a custom_vmap call raises (JAX cannot linearize it); with
    a vmap outside the differentiation the rule runs first and is differentiated. impl
    does what JAX does in each case."""
    args = _inputs()
    try:
        want = transform(jax, jjnp, _cvmap_program(jax, jjnp, []), *args)
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            transform(impl, inp, _cvmap_program(impl, inp, []), *args)
        assert str(got.value) == str(e)
        return
    assert_trees_close(transform(impl, inp, _cvmap_program(impl, inp, []), *args), want)


def test_custom_vmap_rule_sees_axis_and_is_used():
    log = []

    @impl.custom_vmap
    def f(x):
        return x * 2.

    @f.def_vmap
    def rule(axis_size, in_batched, x, axis_name=None):
        log.append((axis_size, in_batched, axis_name))
        return x * 3., in_batched[0]   # deliberately different, to see that it runs

    x = np.arange(4, dtype=F32)
    np.testing.assert_allclose(f(x), 2 * x)
    np.testing.assert_allclose(impl.vmap(f, axis_name="batch")(x), 3 * x)
    assert log[-1] == (4, [True], "batch")
    # grad of vmap differentiates through the rule
    np.testing.assert_allclose(impl.grad(lambda a: inp.sum(impl.vmap(f)(a)))(x), 3 * np.ones(4))
    # vmap of jvp: the rule's jvp batches the tangent program
    _, t = impl.vmap(lambda a: impl.jvp(f, (a,), (F32(1.),)))(x)
    np.testing.assert_allclose(t, 3 * np.ones(4))


# -------------------------------------------------------- finite differences (f64)

def _fd_grad(fun, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (fun(x + e) - fun(x - e)) / (2 * eps)
    return g


def test_float64_against_finite_differences():
    """In float64 a correct custom rule (here for custom_vjp, custom_vmap and
    linear_call) matches central finite differences of the function itself (custom_vmap
    in forward mode: reverse mode through it raises, as in JAX)."""
    x = np.array([0.3, -1.2, 2.0], np.float64)

    @impl.custom_vjp
    def f(x):
        return inp.sin(x) * inp.exp(x)

    f.defvjp(lambda x: (f(x), x),
             lambda x, g: (g * (inp.cos(x) + inp.sin(x)) * inp.exp(x),))

    @impl.custom_vmap
    def h(x):
        return inp.sin(x) * inp.exp(x)

    h.def_vmap(lambda n, b, x: (inp.sin(x) * inp.exp(x), b[0]))
    lin = lambda x: linear_call(_div, _div_t, 3., x) * inp.exp(x)  # noqa: E731
    ref = lambda v: np.sum(np.sin(v) * np.exp(v))  # noqa: E731
    _, t = impl.jvp(h, (x,), (np.ones(3),))
    np.testing.assert_allclose(t, _fd_grad(ref, x), rtol=1e-8)
    for fun, rf in [(f, ref), (lin, lambda v: np.sum(v / 3. * np.exp(v)))]:
        want = _fd_grad(rf, x)
        g = impl.grad(lambda v: inp.sum(fun(v)))(x)
        assert np.asarray(g).dtype == np.float64
        np.testing.assert_allclose(g, want, rtol=1e-8)
        _, t = impl.jvp(fun, (x,), (np.ones(3),))
        np.testing.assert_allclose(t, want, rtol=1e-8)
        gv = impl.vmap(impl.grad(lambda v: inp.sum(fun(v))))(np.stack([x, x]))
        np.testing.assert_allclose(gv, np.stack([want, want]), rtol=1e-8)


@pytest.mark.parametrize("bwd, why", [
    (lambda r, g: (inp.clip(g, -1., 1.),), "min|max|clamp"),
    (lambda r, g: (g * g,), "bilinear"),
    (lambda r, g: (inp.sin(g),), "sin"),
])
def test_forward_mode_through_nonlinear_bwd_is_a_clear_error(bwd, why):
    @impl.custom_vjp
    def f(x):
        return x

    f.defvjp(lambda x: (x, None), bwd)
    with pytest.raises(TypeError, match="must\\s+be linear in the output cotangent") as e:
        impl.jvp(f, (F32(0.5),), (F32(1.),))
    assert any(w in str(e.value) for w in why.split("|"))
    # reverse mode is fine
    impl.grad(f)(F32(0.5))


# ------------------------------------------------- rules closing over traced values

def _closing_programs(m, np_):
    """Custom functions defined inside a transformed function, closing over `y`."""
    def cj(y):
        @m.custom_jvp
        def f(x):
            return np_.sin(x) * y

        f.defjvp(lambda p, t: (f(p[0]), 2. * np_.cos(p[0]) * t[0] * y))
        return f

    def cv(y):
        @m.custom_vjp
        def f(x):
            return np_.sin(x) * y

        f.defvjp(lambda x: (f(x), np_.cos(x)), lambda c, g: (2. * c * g * y,))
        return f
    return [cj, cv]


@pytest.mark.parametrize("which", [0, 1], ids=["custom_jvp", "custom_vjp"])
@pytest.mark.parametrize("case", ["vmap_grad", "grad_vmap", "grad_jit", "jit_grad",
                                  "jit_vmap_grad", "grad_vmap_jit", "grad_vmap_vmap",
                                  "jit_grad_vmap_vmap"])
def test_rules_closing_over_tracers(case, which):
    """The rule closes over a value traced by a vmap or jit that is inside (or outside)
    the differentiation; the rule's d/dx is 2 cos(x) y, checked by hand."""
    make = _closing_programs(impl, inp)[which]
    ys = np.array([0.5, 1., 2.], F32)
    x = F32(0.7)
    d = 2 * np.cos(0.7)
    if case == "vmap_grad":
        got, want = impl.vmap(lambda y: impl.grad(make(y))(x))(ys), d * ys
    elif case == "grad_vmap":
        got = impl.grad(lambda x: inp.sum(impl.vmap(lambda y: make(y)(x))(ys)))(x)
        want = d * ys.sum()
    elif case == "grad_jit":
        got, want = impl.grad(impl.jit(lambda x, y: make(y)(x)))(x, F32(2.)), d * 2.
    elif case == "jit_grad":
        got, want = impl.jit(lambda y: impl.grad(make(y))(x))(F32(2.)), d * 2.
    elif case == "jit_vmap_grad":
        got = impl.jit(impl.vmap(lambda y: impl.grad(make(y))(x)))(ys)
        want = d * ys
    elif case == "grad_vmap_jit":
        got = impl.grad(lambda x: inp.sum(impl.jit(impl.vmap(lambda y: make(y)(x)))(ys)))(x)
        want = d * ys.sum()
    else:   # the rule closes over a tracer of the inner vmap holding one of the outer
        yss = np.stack([ys, 2 * ys])
        grad = impl.grad(lambda x: inp.sum(impl.vmap(impl.vmap(lambda y: make(y)(x)))(yss)))
        got = grad(x) if case == "grad_vmap_vmap" else impl.jit(grad)(x)
        want = d * yss.sum()
    np.testing.assert_allclose(got, want, rtol=1e-6)
