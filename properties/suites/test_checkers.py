"""The public checkers pass on correct functions and fail on broken ones."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from properties import (check_custom_jvp, check_custom_vjp, check_grads, check_linear_call,
                        check_vmap)

X = np.linspace(-1.0, 1.0, 3)


def _custom_sin(wrong):
    f = jax.custom_jvp(lambda x: jnp.sin(x))

    @f.defjvp
    def rule(primals, tangents):
        (x,), (t,) = primals, tangents
        d = jnp.cos(x) + (0.5 if wrong else 0.0)
        return jnp.sin(x), d * t
    return f


def _custom_tanh(wrong_bwd=False, wrong_fwd=False):
    f = jax.custom_vjp(lambda x: jnp.tanh(x))

    def fwd(x):
        y = jnp.tanh(x)
        return (y + 1.0 if wrong_fwd else y), y

    def bwd(y, g):
        return ((1.0 - y * y) * g * (2.0 if wrong_bwd else 1.0),)
    f.defvjp(fwd, bwd)
    return f


def test_check_grads_passes():
    check_grads(lambda x, y: jnp.sin(x) * y + x ** 3, (X, X + 0.5), order=2, max_examples=5)


def test_check_grads_catches_a_wrong_gradient():
    @jax.custom_jvp
    def f(x):
        return x * x

    f.defjvp(lambda p, t: (p[0] * p[0], p[0] * t[0]))  # drops the factor 2
    with pytest.raises(AssertionError, match="law grads_fwd failed"):
        check_grads(f, (X,), order=1, modes=("fwd",), max_examples=5)
    with pytest.raises(AssertionError, match="law grads_rev failed"):
        check_grads(f, (X,), order=1, modes=("rev",), max_examples=5)


def test_check_grads_catches_a_wrong_second_derivative():
    @jax.custom_jvp
    def g(x):  # first derivative right, its derivative (the second) wrong
        return jnp.sin(x)

    g.defjvp(lambda p, t: (jnp.sin(p[0]), jnp.cos(jax.lax.stop_gradient(p[0])) * t[0]))
    check_grads(g, (X,), order=1, max_examples=3)
    with pytest.raises(AssertionError, match="order2"):
        check_grads(g, (X,), order=2, modes=("fwd",), max_examples=3)


def test_check_custom_jvp():
    check_custom_jvp(_custom_sin(False), X, max_examples=5)
    with pytest.raises(AssertionError, match="law custom_jvp_rule failed"):
        check_custom_jvp(_custom_sin(True), X, max_examples=5)


def test_check_custom_vjp():
    check_custom_vjp(_custom_tanh(), X, max_examples=5)
    with pytest.raises(AssertionError, match="bwd"):
        check_custom_vjp(_custom_tanh(wrong_bwd=True), X, max_examples=5)
    with pytest.raises(AssertionError, match="fwd primal output"):
        check_custom_vjp(_custom_tanh(wrong_fwd=True), X, max_examples=5)


def test_check_linear_call():
    A = np.arange(6.0).reshape(2, 3) / 4

    def fun(a, x):
        return a @ x

    def fun_t(a, ct):
        return a.T @ ct

    out = check_linear_call(fun, fun_t, A, X)
    assert out["linear_call_involution"] == "passed"
    assert out["linear_call_dot_product"] == "passed"
    assert out["linear_call_under_vmap"].startswith("skipped")  # JAX cannot batch linear_call
    assert check_linear_call(fun, fun_t, A, X, vmap="loop")["linear_call_under_vmap"] == "passed"
    with pytest.raises(AssertionError, match="law linear_call_dot_product failed"):
        check_linear_call(fun, lambda a, ct: 2.0 * (a.T @ ct), A, X, vmap=False)


def test_check_vmap():
    def f(w, x):
        return jnp.tanh(jnp.dot(w, x))
    check_vmap(f, (None, 0), X, np.ones((4, 3)), max_examples=5)

    # a host callback declared batch-friendly that in fact sums over the batch too
    def host_total(x):
        return np.full(x.shape[:-1], np.sum(x), dtype=x.dtype)

    def g(w, x):
        total = jax.pure_callback(host_total, jax.ShapeDtypeStruct((), x.dtype), x,
                                  vmap_method="broadcast_all")
        return f(w, x) + total

    with pytest.raises(AssertionError, match="law vmap_matches_loop failed"):
        check_vmap(g, (None, 0), X, np.arange(12.0).reshape(4, 3) / 12, max_examples=3)


def test_checkers_reject_bad_input():
    with pytest.raises(TypeError):
        check_grads("not callable", (X,))
    with pytest.raises(ValueError):
        check_grads(jnp.sin, (X,), order=0)
    with pytest.raises(ValueError):
        check_grads(jnp.sin, (X,), modes=("sideways",))
    with pytest.raises(TypeError):
        check_grads(jnp.sin, (np.arange(3),))
    with pytest.raises(ValueError):
        check_vmap(jnp.sin, (5,), X)
