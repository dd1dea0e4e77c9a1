"""custom_gradient (auxiliary outputs, cotangent conventions) and closure_convert
(functions closing over a mix of tracers and constants, under jit, vmap and grad), on
impl and on JAX."""
from __future__ import annotations

from functools import partial

import jax
import numpy as np
import pytest

import impl
from _custom_helpers import F32, assert_trees_close, check_against_jax, run_both

X = np.array([0.3, -1.2, 2.0], F32)
XS = np.stack([X, 2 * X])


# ------------------------------------------------------------------ custom_gradient

def _with_aux(m, np_):
    @m.custom_gradient
    def f(x):
        aux = {"scaled": x * 3., "count": np.int32(7)}
        return (np_.sum(x ** 2), aux), lambda g: (g[0] * 10. * x,)

    return (f(X),
            m.grad(f, has_aux=True)(X),
            m.value_and_grad(f, has_aux=True)(X),
            m.vmap(m.grad(f, has_aux=True))(XS),
            m.jit(m.grad(f, has_aux=True))(X),
            m.grad(lambda x: f(x)[0] + np_.sum(f(x)[1]["scaled"]))(X))


def test_custom_gradient_with_auxiliary_outputs():
    check_against_jax(_with_aux)


def _integer_output(m, np_):
    @m.custom_gradient
    def k(x):
        return (x * 2., np_.int32(3)), lambda ct: (ct[0] * 5.,)

    return (m.grad(lambda x: np_.sum(k(x)[0]))(X), m.grad(lambda x: k(x)[0], has_aux=False)(
        F32(1.)), m.grad(k, has_aux=True)(F32(1.)), m.vmap(m.grad(k, has_aux=True))(X))


def test_custom_gradient_with_integer_output():
    check_against_jax(_integer_output)


def _cotangent_conventions(m, np_):
    @m.custom_gradient
    def single(x):
        return x ** 2, lambda ct: 5. * ct * x        # one argument: a bare cotangent

    @m.custom_gradient
    def with_none(x, y):
        return x * y, lambda ct: (ct * y, None)      # None: zero cotangent

    @m.custom_gradient
    def tree(p):
        return p["a"] * p["b"], lambda ct: ({"a": ct * p["b"], "b": ct * p["a"] * 2.},)

    return (m.grad(single)(F32(3.)), m.grad(m.grad(single))(F32(3.)),
            m.grad(with_none, (0, 1))(F32(3.), F32(2.)),
            m.grad(tree)({"a": F32(2.), "b": F32(3.)}),
            m.jit(m.vmap(m.grad(single)))(X))


def test_custom_gradient_cotangent_conventions():
    check_against_jax(_cotangent_conventions)


def test_custom_gradient_forward_mode_matches_finite_differences():
    """JAX refuses jvp of a custom_gradient function; impl transposes the (linear) vjp
    function, so the tangent is the rule's derivative, checked in float64."""
    @impl.custom_gradient
    def f(x):
        return impl.numpy.sin(x) * x, lambda g: ((impl.numpy.cos(x) * x +
                                                  impl.numpy.sin(x)) * g,)

    x = np.array([0.3, -1.2], np.float64)
    _, t = impl.jvp(f, (x,), (np.ones(2),))
    eps = 1e-6
    np.testing.assert_allclose(t, (np.sin(x + eps) * (x + eps) - np.sin(x - eps) * (x - eps))
                               / (2 * eps), rtol=1e-7)


# ------------------------------------------------------------------ closure_convert

def _closures(m, np_, log):
    c = np.array([1., 2., 3.], F32)

    def outer(a, b):
        def fun(x):
            return np_.sin(x * c) * a + b * (np.arange(3) > 0)

        conv, consts = m.closure_convert(fun, np.ones(3, F32))
        log.append(len(consts))
        return conv(np.ones(3, F32), *consts)

    return (outer(F32(2.), F32(3.)),
            m.jit(outer)(F32(2.), F32(3.)),
            m.vmap(outer)(np.ones(2, F32), np.ones(2, F32)),
            m.grad(lambda a: np_.sum(outer(a, F32(3.))))(F32(2.)),
            m.vmap(m.grad(lambda a, b: np_.sum(outer(a, b))))(np.ones(2, F32),
                                                             np.ones(2, F32)),
            m.jvp(lambda a: outer(a, F32(3.)), (F32(2.),), (F32(1.),)),
            m.grad(lambda a: np_.sum(m.jit(outer)(a, F32(3.))))(F32(2.)))


def test_closure_convert_hoists_what_may_be_differentiated():
    """Constants stay closed over; traced values are hoisted unless they cannot carry a
    tangent (vmap's values, integers): the same choices as JAX's."""
    log_i, log_j = [], []
    got, want = _closures(impl, impl.numpy, log_i), _closures(jax, jax.numpy, log_j)
    assert_trees_close(got, want)
    # (JAX's jit reuses its trace of `outer` for the last case; impl traces again)
    assert log_i[:6] == log_j[:6] == [0, 2, 0, 1, 1, 1]


def _fixed_point(m, np_):
    """The closure_convert pattern: a custom_vjp solver taking a function."""
    def solve(g, a):
        conv, consts = m.closure_convert(g, a)
        return _solve(conv, a, *consts)

    @partial(m.custom_vjp, nondiff_argnums=(0,))
    def _solve(g, a, *args):
        x = a
        for _ in range(30):
            x = g(x, *args)
        return x

    def fwd(g, a, *args):
        x = _solve(g, a, *args)
        return x, (x, args)

    def bwd(g, res, ct):
        x, args = res
        # implicit function theorem for x = g(x, *args)
        _, vjp_x = m.vjp(lambda z: g(z, *args), x)
        w = ct / (1 - vjp_x(np_.ones_like(x))[0])
        _, vjp_args = m.vjp(lambda *a: g(x, *a), *args)
        return (np_.zeros_like(x),) + tuple(vjp_args(w))

    _solve.defvjp(fwd, bwd)
    return solve


def _solver_programs(m, np_):
    solve = _fixed_point(m, np_)
    w = np.array([0.9, 1.1], F32)   # a constant the function closes over

    def loss(c, d):
        # closes over a traced c, a traced d and the constant w
        return np_.sum(solve(lambda x: 0.5 * np_.cos(x) * c * w + 0.1 * d,
                             np.full(2, 0.3, F32)))

    cs = np.array([0.8, 0.6], F32)
    return (loss(F32(0.8), F32(0.5)),
            m.grad(loss, (0, 1))(F32(0.8), F32(0.5)),
            m.jit(m.grad(loss, (0, 1)))(F32(0.8), F32(0.5)),
            m.vmap(m.grad(loss), (0, None))(cs, F32(0.5)),
            m.grad(lambda c: np_.sum(m.vmap(loss, (0, None))(c, F32(0.5))))(cs),
            m.vmap(m.jit(loss), (None, 0))(F32(0.8), cs))


def test_closure_convert_with_custom_vjp_solver():
    check_against_jax(_solver_programs, rtol=1e-4, atol=1e-5)


def test_closure_convert_function_of_pytrees():
    def program(m, np_):
        def outer(a):
            conv, consts = m.closure_convert(lambda p: {"y": p["x"] * a}, {"x": X})
            return conv({"x": X}, *consts), len(consts)
        out, n = outer(F32(2.))
        return out, n, m.jit(outer)(F32(2.))
    got, want = run_both(program)
    assert got[1] == want[1] == 0
    assert_trees_close(got[0], want[0])
    assert_trees_close(got[2], want[2])


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_closure_convert_under_jit_hoists_float_tracers_only(dtype):
    def program(m, np_):
        counts = []

        def outer(n):
            conv, consts = m.closure_convert(lambda x: x * n, F32(1.))
            counts.append(len(consts))
            return conv(F32(2.), *consts)
        return m.jit(outer)(dtype(3)), counts
    got, want = run_both(program)
    assert got[1] == want[1] == [0 if dtype is np.int32 else 1]
    assert_trees_close(got[0], want[0])
