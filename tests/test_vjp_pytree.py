"""The functions vjp and linearize return are pytrees whose leaves are the residuals, as
in JAX: they can be returned from jit, passed into it, mapped over with tree_map and
staged by make_jaxpr. Every check runs on JAX and on impl and compares the results."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as inp

APIS = {"jax": (jax, jjnp), "impl": (impl, inp)}
X = np.float32(0.7)
V = np.array([0.3, -1.2, 2.0], np.float32)


def _sin(J, N):
    return N.sin


def _product(J, N):
    return lambda x: N.sum(N.sin(x) * N.exp(x))


FUNCTIONS = {"sin": (_sin, X), "sum sin*exp": (_product, V)}


def _both(check):
    return [check(*APIS[name]) for name in ("jax", "impl")]


def _close(want, got):
    for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got),
                    strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)


def test_the_leaves_of_vjp_of_sin_are_its_residual():
    want, got = _both(lambda J, N: J.tree_util.tree_leaves(J.vjp(N.sin, X)[1]))
    assert len(want) == len(got) == 1
    _close(want, got)
    np.testing.assert_allclose(np.asarray(got[0]), np.cos(X), rtol=1e-6)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_scaling_the_residuals_scales_the_cotangent(name):
    make, x = FUNCTIONS[name]

    def check(J, N):
        _, f_vjp = J.vjp(make(J, N), x)
        doubled = J.tree_util.tree_map(lambda r: 2 * r, f_vjp)
        return f_vjp(np.float32(1.0)), doubled(np.float32(1.0))

    (want, want2), (got, got2) = _both(check)
    _close(want, got)
    _close(want2, got2)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_a_vjp_function_returned_from_jit_and_passed_into_jit(name):
    make, x = FUNCTIONS[name]

    def check(J, N):
        f = make(J, N)
        f_vjp = J.jit(lambda x: J.vjp(f, x)[1])(x)
        through = J.jit(lambda g, c: g(c))(f_vjp, np.float32(1.5))
        return f_vjp(np.float32(1.0)), through

    want, got = _both(check)
    _close(want, got)


def test_make_jaxpr_stages_vjp_and_linearize():
    def check(J, N):
        vjp_prog = J.make_jaxpr(lambda x: J.vjp(N.sin, x))(X)
        lin_prog = J.make_jaxpr(lambda x: J.linearize(N.sin, x))(X)
        return ([str(a) for a in vjp_prog.out_avals], [str(a) for a in lin_prog.out_avals])

    want, got = _both(check)
    assert got == want


def test_linearize_returns_a_partial_of_its_residuals():
    def check(J, N):
        y, f_jvp = J.linearize(N.sin, X)
        leaves = J.tree_util.tree_leaves(f_jvp)
        out = J.jit(lambda x: J.linearize(N.sin, x)[1])(X)(np.float32(2.0))
        return isinstance(f_jvp, jax.tree_util.Partial), len(leaves), f_jvp(np.float32(1.0)), out

    (w_partial, w_n, w_t, w_out), (g_partial, g_n, g_t, g_out) = _both(check)
    assert (g_partial, g_n) == (w_partial, w_n) == (True, 1)
    _close((w_t, w_out), (g_t, g_out))


def test_has_aux_keeps_aux_apart_from_the_function():
    def check(J, N):
        y, f_vjp, aux = J.vjp(lambda x: (N.sin(x), {"c": N.cos(x)}), X, has_aux=True)
        return aux, J.jit(lambda g: g(np.float32(1.0)))(f_vjp)

    want, got = _both(check)
    _close(want, got)


def test_calling_the_vjp_function_with_more_arguments_raises_type_error():
    for J, N in APIS.values():
        _, f_vjp = J.vjp(N.sin, X)
        with pytest.raises(TypeError):
            f_vjp(np.float32(1.0), np.float32(2.0))


def test_residuals_are_ordered_as_jax_orders_them():
    """The vjp function's leaves: the primal inputs it keeps first, in argument order,
    then the values computed from them in the order the backward pass needs them (the
    remat tutorial prints the programs reading them)."""
    def leaves(J, N):
        def g(W, x):
            return N.sin(N.dot(W, x))

        def f(W1, W2, W3, x):
            return g(W3, g(W2, g(W1, x)))
        args = (np.ones((5, 4), np.float32), np.ones((6, 5), np.float32) * 0.5,
                np.ones((7, 6), np.float32) * 0.25, np.arange(4, dtype=np.float32))
        _, f_vjp = J.vjp(f, *args)
        return [(np.shape(r), np.asarray(r).tolist()) for r in jax.tree_util.tree_leaves(f_vjp)]
    assert leaves(impl, inp) == leaves(jax, jjnp)
