"""linear_call: recursion through transposes (a transpose that calls linear_call with
the original function as its transpose), and vmap with batched residuals and linear
arguments. JAX is the reference; it has no batching rule for linear_call, so under
vmap the reference is a loop of JAX calls over the examples."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import impl
from _custom_helpers import F32, assert_trees_close, check_against_jax

X = np.array([[1., 2.], [3., 4.], [5., -6.]], F32)
R = np.array([[2., 4.], [0.5, 1.], [3., -2.]], F32)


def _lc(m):
    return m.custom_derivatives.linear_call


def _transpose(m, f, example):
    return lambda y: m.linear_transpose(f, example)(y)[0]


def _self_recursive(m):
    """mul2's transpose is mul2 itself (through a new linear_call)."""
    def mul2(x):
        return _lc(m)(lambda r, x: 2. * x, lambda r, t: mul2(t), (), x)
    return mul2


def _mutually_recursive(m):
    """scale's transpose calls scale_t, whose transpose calls scale."""
    def scale(r, x):
        return _lc(m)(lambda r, x: r * x, lambda r, t: 3. * scale_t(r, t), r, x)

    def scale_t(r, t):
        return _lc(m)(lambda r, t: r * t, lambda r, u: scale(r, u) / 3., r, t)
    return scale


def _recursion(m, np_, which):
    x, r = X[0], R[0]
    f = _self_recursive(m) if which == "self" else (lambda x: _mutually_recursive(m)(r, x))
    outs, g = [f(x)], f
    for _ in range(4):     # transposes alternate between the two functions
        g = _transpose(m, g, x)
        outs.append(g(x))
    outs += [m.grad(lambda a: np_.sum(f(a) * a))(x),
             m.jit(m.grad(lambda a: np_.sum(f(a) * a)))(x),
             m.jit(_transpose(m, f, x))(x),
             m.jvp(f, (x,), (r,))]
    return outs


@pytest.mark.parametrize("which", ["self", "mutual"])
def test_linear_call_recursion(which):
    check_against_jax(_recursion, which)


def test_recursion_under_vmap():
    """A loop of JAX calls is the reference (JAX cannot vmap linear_call)."""
    f_i = _self_recursive(impl)
    f_j = _self_recursive(jax)
    tt = _transpose(impl, _transpose(impl, f_i, X[0]), X[0])
    got = (impl.vmap(f_i)(X), impl.vmap(_transpose(impl, f_i, X[0]))(X), impl.vmap(tt)(X))
    want = tuple(np.stack([g(x) for x in X]) for g in
                 (f_j, _transpose(jax, f_j, X[0]),
                  _transpose(jax, _transpose(jax, f_j, X[0]), X[0])))
    assert_trees_close(got, want)


# ------------------------------------------------------------------------ vmap

def _div(m):
    """x / r, linear in x; its transpose is written separately."""
    return lambda r, x: _lc(m)(lambda r, x: x / r, lambda r, t: t / r, r, x)


VMAP_CASES = {
    # name: (impl program over (X, R), JAX per-example program over (x, r))
    "both_batched": (lambda m: m.vmap(_div(m))(R, X), lambda m, r, x: _div(m)(r, x)),
    "residual_unbatched": (lambda m: m.vmap(_div(m), (None, 0))(R[0], X),
                           lambda m, r, x: _div(m)(R[0], x)),
    "linear_unbatched": (lambda m: m.vmap(_div(m), (0, None))(R, X[0]),
                         lambda m, r, x: _div(m)(r, X[0])),
    "transpose_both_batched": (
        lambda m: m.vmap(lambda r, x: _transpose(m, lambda a: _div(m)(r, a), x)(x))(R, X),
        lambda m, r, x: _transpose(m, lambda a: _div(m)(r, a), x)(x)),
    "transpose_of_vmap": (
        lambda m: _transpose(m, lambda a: m.vmap(_div(m))(R, a), X)(X),
        lambda m, r, x: _transpose(m, lambda a: _div(m)(r, a), x)(x)),
    "transpose_twice_of_vmap": (
        lambda m: _transpose(m, _transpose(m, lambda a: m.vmap(_div(m))(R, a), X), X)(X),
        lambda m, r, x: _div(m)(r, x)),
    # JAX cannot differentiate linear_call with respect to residuals: the reference
    # differentiates x / r itself
    "grad_of_vmap_residual": (
        lambda m: m.grad(lambda r: m.numpy.sum(m.vmap(_div(m))(r, X)))(R),
        lambda m, r, x: m.grad(lambda b: m.numpy.sum(x / b))(r)),
    "vmap_of_grad_linear": (
        lambda m: m.vmap(m.grad(lambda x, r: m.numpy.sum(_div(m)(r, x) ** 2)))(X, R),
        lambda m, r, x: m.grad(lambda a: m.numpy.sum(_div(m)(r, a) ** 2))(x)),
    "jit_vmap_jvp": (
        lambda m: m.jit(m.vmap(lambda r, x: m.jvp(lambda a: _div(m)(r, a), (x,), (r,))))(R, X),
        lambda m, r, x: m.jvp(lambda a: _div(m)(r, a), (x,), (r,))),
}


@pytest.mark.parametrize("case", VMAP_CASES, ids=list(VMAP_CASES))
def test_linear_call_under_vmap(case):
    batched, per_example = VMAP_CASES[case]
    got = batched(impl)
    examples = [per_example(jax, r, x) for r, x in zip(R, X)]
    want = jax.tree_util.tree_map(lambda *xs: np.stack(xs), *examples)
    assert_trees_close(got, want)


def test_transpose_of_vmap_with_unbatched_linear_input_sums():
    """vmap broadcasts an unbatched linear input; transposing sums its cotangents."""
    got = _transpose(impl, lambda a: impl.vmap(_div(impl), (0, None))(R, a), X[0])(X)
    want = sum(_transpose(jax, lambda a: _div(jax)(r, a), X[0])(x) for r, x in zip(R, X))
    assert_trees_close(got, want, rtol=1e-5)


def _closing_transpose(m, jit):
    def f(r, x):
        return _lc(m)(lambda r_, x: x / r_, lambda r_, t: t / r, r, x)
    g = lambda r, x: _transpose(m, lambda a: f(r, a), x)(x)  # noqa: E731
    h = _transpose(m, lambda a: jit(f)(R[1], a), X[1])
    return jit(g)(R[0], X[0]), jit(h)(X[1])


def test_transpose_closing_over_a_residual_under_jit():
    """The transpose closes over the residual instead of reading its argument; it is
    staged only when transposed, after jit's trace ended, and still sees the current
    residual. JAX fails under jit here ("No constant handler"); the reference is JAX
    without jit."""
    assert_trees_close(_closing_transpose(impl, impl.jit),
                       _closing_transpose(jax, lambda f: f))
