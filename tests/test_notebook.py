"""The examples of the notebook "Custom derivative rules for JAX-transformable Python
functions" (seed 002), run on impl in float32, checked against the numbers the
notebook printed (to the printed precision), plus the docstring examples of
custom_gradient and linear_call from the custom-derivatives seed (000).

Inputs are explicit float32 values so that the results do not depend on whether
another test module enabled x64.
"""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import impl as jax
import impl.numpy as jnp
from impl import custom_jvp, custom_vjp, grad, jit, jvp, make_jaxpr, vmap

F = np.float32


def check_printed(value, printed):
    """`value` equals the notebook's printed text to the printed precision, in float32."""
    arr = np.asarray(value)
    assert arr.dtype == np.float32, arr.dtype
    tokens = printed.strip().strip("[]").split()
    # the float32 numbers the printed texts stand for (they are float32 reprs)
    expected = np.array([float(np.float32(t)) for t in tokens], np.float64)
    got = arr.reshape(-1).astype(np.float64)
    assert got.shape == expected.shape, (got, printed)
    for g, e, tok in zip(got, expected, tokens):
        if np.isnan(e):
            assert np.isnan(g), (g, tok)
            continue
        decimals = len(tok.split(".")[1]) if "." in tok else 0
        # Half a unit of the last printed digit; at least one float32 ulp, since the
        # notebook's 2020 XLA rounded one value (the naive log1pexp gradient at 2.0,
        # 0.88079715) one ulp away from what current JAX prints (0.8807971).
        tol = max(0.5 * 10.0 ** -decimals, float(np.spacing(np.float32(abs(e)))))
        assert abs(g - e) <= tol, (g, tok)


def arange3():
    return jnp.arange(3, dtype=jnp.float32) * F(1)


# --------------------------------------------------------------------------- TL;DR

def _tldr_custom_jvp():
    @custom_jvp
    def f(x, y):
        return jnp.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        primal_out = f(x, y)
        tangent_out = jnp.cos(x) * x_dot * y + jnp.sin(x) * y_dot
        return primal_out, tangent_out
    return f


def _tldr_defjvps():
    @custom_jvp
    def f(x, y):
        return jnp.sin(x) * y

    f.defjvps(lambda x_dot, primal_out, x, y: jnp.cos(x) * x_dot * y,
              lambda y_dot, primal_out, x, y: jnp.sin(x) * y_dot)
    return f


@pytest.mark.parametrize("make", [_tldr_custom_jvp, _tldr_defjvps])
def test_tldr_custom_jvp(make):
    f = make()
    check_printed(f(F(2.), F(3.)), "2.7278922")
    y, y_dot = jvp(f, (F(2.), F(3.)), (F(1.), F(0.)))
    check_printed(y, "2.7278922")
    check_printed(y_dot, "-1.2484405")
    check_printed(grad(f)(F(2.), F(3.)), "-1.2484405")


def test_tldr_custom_vjp():
    @custom_vjp
    def f(x, y):
        return jnp.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), (jnp.cos(x), jnp.sin(x), y)

    def f_bwd(res, g):
        cos_x, sin_x, y = res
        return (cos_x * g * y, sin_x * g)

    f.defvjp(f_fwd, f_bwd)
    check_printed(grad(f)(F(2.), F(3.)), "-1.2484405")


# ------------------------------------------------------------- numerical stability

def log1pexp_naive(x):
    return jnp.log(1. + jnp.exp(x))


def test_log1pexp_naive():
    check_printed(log1pexp_naive(F(3.)), "3.0485873")
    check_printed(jit(log1pexp_naive)(F(3.)), "3.0485873")
    check_printed(jit(grad(log1pexp_naive))(F(3.)), "0.95257413")
    check_printed(vmap(jit(grad(log1pexp_naive)))(arange3()), "[0.5 0.7310586 0.88079715]")
    check_printed(grad(log1pexp_naive)(F(100.)), "nan")
    # the notebook shows the gradient program computing exp(x) and 1 / (1 + exp(x))
    text = str(make_jaxpr(grad(log1pexp_naive))(F(100.)))
    assert "exp" in text and "div" in text


def _log1pexp_defjvp():
    @custom_jvp
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = log1pexp(x)
        ans_dot = (1 - 1 / (1 + jnp.exp(x))) * x_dot
        return ans, ans_dot
    return log1pexp


def _log1pexp_defjvps():
    @custom_jvp
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))

    log1pexp.defjvps(lambda t, ans, x: (1 - 1 / (1 + jnp.exp(x))) * t)
    return log1pexp


@pytest.mark.parametrize("make", [_log1pexp_defjvp, _log1pexp_defjvps])
def test_log1pexp_custom(make):
    log1pexp = make()
    check_printed(grad(log1pexp)(F(100.)), "1.0")
    check_printed(jit(log1pexp)(F(3.)), "3.0485873")
    check_printed(jit(grad(log1pexp))(F(3.)), "0.95257413")
    check_printed(vmap(jit(grad(log1pexp)))(arange3()), "[0.5 0.7310586 0.8807971]")


# ---------------------------------------------------- differentiation convention

def test_convention_naive_is_nan():
    def f(x):
        return x / (1 + jnp.sqrt(x))
    check_printed(grad(f)(F(0.)), "nan")


def _convention_defjvp():
    @custom_jvp
    def f(x):
        return x / (1 + jnp.sqrt(x))

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = f(x)
        ans_dot = ((jnp.sqrt(x) + 2) / (2 * (jnp.sqrt(x) + 1) ** 2)) * x_dot
        return ans, ans_dot
    return f


def _convention_defjvps():
    @custom_jvp
    def f(x):
        return x / (1 + jnp.sqrt(x))

    f.defjvps(lambda t, ans, x: ((jnp.sqrt(x) + 2) / (2 * (jnp.sqrt(x) + 1) ** 2)) * t)
    return f


@pytest.mark.parametrize("make", [_convention_defjvp, _convention_defjvps])
def test_convention_custom(make):
    check_printed(grad(make())(F(0.)), "1.0")


# ------------------------------------------------------------- gradient clipping

def test_gradient_clipping():
    """The notebook plots these; the values are clip(cos(t), -0.75, 0.75) by hand."""
    @custom_vjp
    def clip_gradient(lo, hi, x):
        return x  # identity function

    def clip_gradient_fwd(lo, hi, x):
        return x, (lo, hi)  # save bounds as residuals

    def clip_gradient_bwd(res, g):
        lo, hi = res
        return (None, None, jnp.clip(g, lo, hi))

    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)

    def clip_sin(x):
        x = clip_gradient(-0.75, 0.75, x)
        return jnp.sin(x)

    t = np.linspace(0, 10, 1000, dtype=np.float32)
    np.testing.assert_allclose(jnp.sin(t), np.sin(t), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vmap(clip_sin)(t), np.sin(t), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vmap(grad(clip_sin))(t), np.clip(np.cos(t), -0.75, 0.75),
                               rtol=1e-5, atol=1e-6)


# ------------------------------------------------ docstring examples of seed 000

def test_custom_gradient_docstring():
    @jax.custom_gradient
    def f(x):
        return x ** 2, lambda g: (g * x,)

    check_printed(f(F(3.)), "9.0")
    check_printed(grad(f)(F(3.)), "3.0")

    @jax.custom_gradient
    def h(x, y):
        return x * y, lambda g: (y, x)

    check_printed(h(F(3.), F(4.)), "12.0")
    gx, gy = grad(h, argnums=(0, 1))(F(3.), F(4.))
    check_printed(gx, "4.0")
    check_printed(gy, "3.0")


def _transpose(f, x_example):
    def transposed(y):
        x, = jax.linear_transpose(f, x_example)(y)
        return x
    return transposed


def test_linear_call_docstring():
    from impl.custom_derivatives import linear_call

    def f(r, x):
        return x / r

    def t(r, t):
        return t / r

    def div_add(x, denom):
        return x + linear_call(f, t, denom, x)

    check_printed(div_add(F(9.), F(3.)), "12.")
    check_printed(_transpose(partial(div_add, denom=F(3.)), F(1.))(F(18.)), "24.")  # custom
    check_printed(_transpose(lambda x: x + x / F(3.), F(1.))(F(18.)), "24.")  # reference

    def custom_id(x):
        def f(_, x):
            return x

        def t(_, t):
            return 7.
        return linear_call(f, t, (), x)

    check_printed(custom_id(F(1.)), "1.0")
    check_printed(_transpose(custom_id, F(1.))(F(1.)), "7.0")
    check_printed(_transpose(_transpose(custom_id, F(1.)), F(1.))(F(1.)), "1.0")
    check_printed(_transpose(_transpose(_transpose(custom_id, F(1.)), F(1.)), F(1.))(F(1.)),
                  "7.0")


# ======================================================================================
# The whole notebook, cell by cell (JAX's docs page "Custom derivative rules",
# docs/notebooks/Custom_derivative_rules_for_Python_code.md), written as test code.
# Each code cell is a function of the module under test (impl or jax) and a namespace
# shared by the cells; what it prints (prints of side effects included, and the value
# of a cell's last expression as the notebook displays it) is compared with what the
# same cell prints on JAX, in the same test. Plots are compared by their data.
# The notebook's Python floats are used as written (weak types), in JAX's default
# precision; the cells run in the notebook's order, so that state carries over.

import contextlib  # noqa: E402
import io  # noqa: E402
from collections import namedtuple  # noqa: E402

import jax as real_jax  # noqa: E402

NOTEBOOK_CELLS = []


def cell(fn):
    NOTEBOOK_CELLS.append(fn)
    return fn


# --- Summary

@cell
def cell_summary_custom_jvp(m, ns):
    jnp, custom_jvp = m.numpy, m.custom_jvp

    @custom_jvp
    def f(x, y):
        return jnp.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        primal_out = f(x, y)
        tangent_out = jnp.cos(x) * x_dot * y + jnp.sin(x) * y_dot
        return primal_out, tangent_out
    ns["f"] = f


@cell
def cell_summary_custom_jvp_run(m, ns):
    f, jvp, grad = ns["f"], m.jvp, m.grad
    print(f(2., 3.))
    y, y_dot = jvp(f, (2., 3.), (1., 0.))
    print(y)
    print(y_dot)
    print(grad(f)(2., 3.))


@cell
def cell_summary_defjvps(m, ns):
    jnp = m.numpy

    @m.custom_jvp
    def f(x, y):
        return jnp.sin(x) * y

    f.defjvps(lambda x_dot, primal_out, x, y: jnp.cos(x) * x_dot * y,
              lambda y_dot, primal_out, x, y: jnp.sin(x) * y_dot)
    ns["f"] = f


NOTEBOOK_CELLS.append(cell_summary_custom_jvp_run)


@cell
def cell_summary_custom_vjp(m, ns):
    jnp = m.numpy

    @m.custom_vjp
    def f(x, y):
        return jnp.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), (jnp.cos(x), jnp.sin(x), y)

    def f_bwd(res, g):
        cos_x, sin_x, y = res
        return (cos_x * g * y, sin_x * g)

    f.defvjp(f_fwd, f_bwd)
    print(m.grad(f)(2., 3.))


# --- Numerical stability

@cell
def cell_log1pexp_naive(m, ns):
    jnp = m.numpy

    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))
    ns["log1pexp"] = log1pexp
    print(repr(log1pexp(3.)))


@cell
def cell_log1pexp_transformable(m, ns):
    log1pexp, jnp = ns["log1pexp"], m.numpy
    print(m.jit(log1pexp)(3.))
    print(m.jit(m.grad(log1pexp))(3.))
    print(m.vmap(m.jit(m.grad(log1pexp)))(jnp.arange(3.)))


@cell
def cell_log1pexp_nan(m, ns):
    print(m.grad(ns["log1pexp"])(100.))


@cell
def cell_log1pexp_jaxpr(m, ns):
    print(m.make_jaxpr(m.grad(ns["log1pexp"]))(100.))


@cell
def cell_log1pexp_custom_jvp(m, ns):
    jnp = m.numpy

    @m.custom_jvp
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = log1pexp(x)
        ans_dot = (1 - 1/(1 + jnp.exp(x))) * x_dot
        return ans, ans_dot
    ns["log1pexp"] = log1pexp
    print(m.grad(log1pexp)(100.))


NOTEBOOK_CELLS.append(cell_log1pexp_transformable)


@cell
def cell_log1pexp_defjvps(m, ns):
    jnp = m.numpy

    @m.custom_jvp
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))

    log1pexp.defjvps(lambda t, ans, x: (1 - 1/(1 + jnp.exp(x))) * t)
    ns["log1pexp"] = log1pexp
    print(m.grad(log1pexp)(100.))
    cell_log1pexp_transformable(m, ns)


# --- Enforcing a differentiation convention

@cell
def cell_convention_naive(m, ns):
    jnp = m.numpy

    def f(x):
        return x / (1 + jnp.sqrt(x))
    print(m.grad(f)(0.))


@cell
def cell_convention_custom_jvp(m, ns):
    jnp = m.numpy

    @m.custom_jvp
    def f(x):
        return x / (1 + jnp.sqrt(x))

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = f(x)
        ans_dot = ((jnp.sqrt(x) + 2) / (2 * (jnp.sqrt(x) + 1)**2)) * x_dot
        return ans, ans_dot
    print(m.grad(f)(0.))


@cell
def cell_convention_defjvps(m, ns):
    jnp = m.numpy

    @m.custom_jvp
    def f(x):
        return x / (1 + jnp.sqrt(x))

    f.defjvps(lambda t, ans, x: ((jnp.sqrt(x) + 2) / (2 * (jnp.sqrt(x) + 1)**2)) * t)
    print(m.grad(f)(0.))


# --- Gradient clipping (the plotted curves are printed instead)

@cell
def cell_clip_gradient_define(m, ns):
    jnp = m.numpy

    @m.custom_vjp
    def clip_gradient(lo, hi, x):
        return x  # identity function

    def clip_gradient_fwd(lo, hi, x):
        return x, (lo, hi)  # save bounds as residuals

    def clip_gradient_bwd(res, g):
        lo, hi = res
        return (None, None, jnp.clip(g, lo, hi))

    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)
    ns["clip_gradient"] = clip_gradient


def _plot(y):
    print(np.array2string(np.asarray(y), threshold=20, precision=6), np.asarray(y).dtype)


@cell
def cell_clip_gradient_plot_sin(m, ns):
    jnp = m.numpy
    t = jnp.linspace(0, 10, 1000)
    _plot(jnp.sin(t))
    _plot(m.vmap(m.grad(jnp.sin))(t))


@cell
def cell_clip_gradient_plot_clipped(m, ns):
    jnp, clip_gradient = m.numpy, ns["clip_gradient"]

    def clip_sin(x):
        x = clip_gradient(-0.75, 0.75, x)
        return jnp.sin(x)

    t = jnp.linspace(0, 10, 1000)
    _plot(clip_sin(t))
    _plot(m.vmap(m.grad(clip_sin))(t))


# --- Implicit function differentiation of iterative implementations

def _newton_sqrt(fixed_point):
    def newton_sqrt(a):
        update = lambda a, x: 0.5 * (x + a / x)  # noqa: E731
        return fixed_point(update, a, a)
    return newton_sqrt


@cell
def cell_fixed_point_plain(m, ns):
    jnp = m.numpy

    def fixed_point(f, a, x_guess):
        def cond_fun(carry):
            x_prev, x = carry
            return jnp.abs(x_prev - x) > 1e-6

        def body_fun(carry):
            _, x = carry
            return x, f(a, x)

        _, x_star = m.lax.while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
        return x_star
    newton_sqrt = _newton_sqrt(fixed_point)
    print(newton_sqrt(2.))
    print(m.jit(m.vmap(newton_sqrt))(jnp.array([1., 2., 3., 4.])))


@cell
def cell_fixed_point_custom_vjp(m, ns):
    jnp, vjp = m.numpy, m.vjp

    @partial(m.custom_vjp, nondiff_argnums=(0,))
    def fixed_point(f, a, x_guess):
        def cond_fun(carry):
            x_prev, x = carry
            return jnp.abs(x_prev - x) > 1e-6

        def body_fun(carry):
            _, x = carry
            return x, f(a, x)

        _, x_star = m.lax.while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
        return x_star

    def fixed_point_fwd(f, a, x_init):
        x_star = fixed_point(f, a, x_init)
        return x_star, (a, x_star)

    def fixed_point_rev(f, res, x_star_bar):
        a, x_star = res
        _, vjp_a = vjp(lambda a: f(a, x_star), a)
        a_bar, = vjp_a(fixed_point(partial(rev_iter, f),
                                   (a, x_star, x_star_bar),
                                   x_star_bar))
        return a_bar, jnp.zeros_like(x_star)

    def rev_iter(f, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)
    newton_sqrt = _newton_sqrt(fixed_point)
    print(newton_sqrt(2.))
    print(m.grad(newton_sqrt)(2.))
    print(m.grad(m.grad(newton_sqrt))(2.))
    print(m.grad(jnp.sqrt)(2.))
    print(m.grad(m.grad(jnp.sqrt))(2.))


# --- Basic usage of custom_jvp

@cell
def cell_basic_custom_jvp(m, ns):
    jnp = m.numpy

    @m.custom_jvp
    def f(x):
        return jnp.sin(x)

    def f_jvp(primals, tangents):
        x, = primals
        t, = tangents
        return f(x), jnp.cos(x) * t

    f.defjvp(f_jvp)
    print(f(3.))
    y, y_dot = m.jvp(f, (3.,), (1.,))
    print(y)
    print(y_dot)
    print(m.grad(f)(3.))
    print(m.grad(m.grad(f))(3.))


@cell
def cell_basic_multiple_arguments(m, ns):
    @m.custom_jvp
    def f(x, y):
        return x ** 2 * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        primal_out = f(x, y)
        tangent_out = 2 * x * y * x_dot + x ** 2 * y_dot
        return primal_out, tangent_out
    print(m.grad(f)(2., 3.))


@cell
def cell_basic_defjvps(m, ns):
    jnp = m.numpy

    @m.custom_jvp
    def f(x):
        return jnp.sin(x)

    f.defjvps(lambda t, ans, x: jnp.cos(x) * t)
    print(m.grad(f)(3.))

    @m.custom_jvp
    def g(x, y):
        return x ** 2 * y

    g.defjvps(lambda x_dot, primal_out, x, y: 2 * x * y * x_dot,
              lambda y_dot, primal_out, x, y: x ** 2 * y_dot)
    print(m.grad(g)(2., 3.))
    print(m.grad(g, 0)(2., 3.))  # same as above
    print(m.grad(g, 1)(2., 3.))

    @m.custom_jvp
    def h(x, y):
        return x ** 2 * y

    h.defjvps(lambda x_dot, primal_out, x, y: 2 * x * y * x_dot, None)
    print(m.grad(h)(2., 3.))
    print(m.grad(h, 0)(2., 3.))  # same as above
    print(m.grad(h, 1)(2., 3.))


@cell
def cell_basic_side_effects(m, ns):
    jnp = m.numpy

    @m.custom_jvp
    def f(x):
        print('called f!')  # a harmless side-effect
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        print('called f_jvp!')  # a harmless side-effect
        x, = primals
        t, = tangents
        return f(x), jnp.cos(x) * t
    ns["f"] = f
    print(f(3.))


@cell
def cell_basic_side_effects_vmap_jit(m, ns):
    f, jnp = ns["f"], m.numpy
    print(m.vmap(f)(jnp.arange(3.)))
    print(m.jit(f)(3.))


@cell
def cell_basic_side_effects_jvp(m, ns):
    y, y_dot = m.jvp(ns["f"], (3.,), (1.,))
    print(y_dot)


@cell
def cell_basic_side_effects_grad(m, ns):
    print(m.grad(ns["f"])(3.))


@cell
def cell_basic_side_effects_grad_grad(m, ns):
    print(repr(m.grad(m.grad(ns["f"]))(3.)))


@cell
def cell_basic_python_control_flow(m, ns):
    jnp = m.numpy

    @m.custom_jvp
    def f(x):
        if x > 0:
            return jnp.sin(x)
        else:
            return jnp.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = f(x)
        if x > 0:
            return ans, 2 * x_dot
        else:
            return ans, 3 * x_dot
    print(m.grad(f)(1.))
    print(m.grad(f)(-1.))


# --- Basic usage of custom_vjp

@cell
def cell_basic_custom_vjp(m, ns):
    jnp = m.numpy

    @m.custom_vjp
    def f(x):
        return jnp.sin(x)

    def f_fwd(x):
        return f(x), jnp.cos(x)

    def f_bwd(cos_x, y_bar):
        return (cos_x * y_bar,)

    f.defvjp(f_fwd, f_bwd)
    print(f(3.))
    print(m.grad(f)(3.))


@cell
def cell_basic_custom_vjp_multiple_arguments(m, ns):
    jnp = m.numpy

    @m.custom_vjp
    def f(x, y):
        return jnp.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), (jnp.cos(x), jnp.sin(x), y)

    def f_bwd(res, g):
        cos_x, sin_x, y = res
        return (cos_x * g * y, sin_x * g)

    f.defvjp(f_fwd, f_bwd)
    print(m.grad(f)(2., 3.))


@cell
def cell_vjp_side_effects(m, ns):
    jnp = m.numpy

    @m.custom_vjp
    def f(x):
        print("called f!")
        return jnp.sin(x)

    def f_fwd(x):
        print("called f_fwd!")
        return f(x), jnp.cos(x)

    def f_bwd(cos_x, y_bar):
        print("called f_bwd!")
        return (cos_x * y_bar,)

    f.defvjp(f_fwd, f_bwd)
    ns["f"] = f
    print(f(3.))


@cell
def cell_vjp_side_effects_grad(m, ns):
    print(m.grad(ns["f"])(3.))


@cell
def cell_vjp_side_effects_vjp(m, ns):
    y, f_vjp = m.vjp(ns["f"], 3.)
    ns["f_vjp"] = f_vjp
    print(y)


@cell
def cell_vjp_side_effects_apply(m, ns):
    print(ns["f_vjp"](1.))


@cell
def cell_vjp_forward_mode_error(m, ns):
    try:
        m.jvp(ns["f"], (3.,), (1.,))
    except TypeError as e:
        print('ERROR! {}'.format(e))


@cell
def cell_vjp_debugging(m, ns):
    """The notebook stops in pdb in the backward pass and prints x and g there."""
    jnp = m.numpy

    @m.custom_vjp
    def debug(x):
        return x  # acts like identity

    def debug_fwd(x):
        return x, x

    def debug_bwd(x, g):
        print("(Pdb) p x")
        print(repr(x))
        print("(Pdb) p g")
        print(repr(g))
        return g

    debug.defvjp(debug_fwd, debug_bwd)

    def foo(x):
        y = x ** 2
        y = debug(y)  # insert pdb in corresponding backward pass step
        return jnp.sin(y)
    # not a code cell of the notebook (its bwd returns g, not a tuple): JAX refuses it
    try:
        print(repr(m.grad(foo)(3.)))
    except TypeError as e:
        print(type(e).__name__, str(e).split(".")[0])


# --- Pytrees

Point = namedtuple("Point", ["x", "y"])


@cell
def cell_pytrees_custom_jvp(m, ns):
    jnp = m.numpy

    @m.custom_jvp
    def f(pt):
        x, y = pt.x, pt.y
        return {'a': x ** 2,
                'b': (jnp.sin(x), jnp.cos(y))}

    @f.defjvp
    def f_jvp(primals, tangents):
        pt, = primals
        pt_dot, = tangents
        ans = f(pt)
        ans_dot = {'a': 2 * pt.x * pt_dot.x,
                   'b': (jnp.cos(pt.x) * pt_dot.x, -jnp.sin(pt.y) * pt_dot.y)}
        return ans, ans_dot

    def fun(pt):
        dct = f(pt)
        return dct['a'] + dct['b'][0]
    pt = Point(1., 2.)
    print(f(pt))
    print(m.grad(fun)(pt))


@cell
def cell_pytrees_custom_vjp(m, ns):
    jnp = m.numpy

    @m.custom_vjp
    def f(pt):
        x, y = pt.x, pt.y
        return {'a': x ** 2,
                'b': (jnp.sin(x), jnp.cos(y))}

    def f_fwd(pt):
        return f(pt), pt

    def f_bwd(pt, g):
        a_bar, (b0_bar, b1_bar) = g['a'], g['b']
        x_bar = 2 * pt.x * a_bar + jnp.cos(pt.x) * b0_bar
        y_bar = -jnp.sin(pt.y) * b1_bar
        return (Point(x_bar, y_bar),)

    f.defvjp(f_fwd, f_bwd)

    def fun(pt):
        dct = f(pt)
        return dct['a'] + dct['b'][0]
    pt = Point(1., 2.)
    print(f(pt))
    print(m.grad(fun)(pt))


# --- Non-differentiable arguments

@cell
def cell_nondiff_custom_jvp(m, ns):
    @partial(m.custom_jvp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    @app.defjvp
    def app_jvp(f, primals, tangents):
        x, = primals
        x_dot, = tangents
        return f(x), 2. * x_dot
    print(app(lambda x: x ** 3, 3.))
    print(m.grad(app, 1)(lambda x: x ** 3, 3.))

    @partial(m.custom_jvp, nondiff_argnums=(0, 2))
    def app2(f, x, g):
        return f(g((x)))

    @app2.defjvp
    def app2_jvp(f, g, primals, tangents):
        x, = primals
        x_dot, = tangents
        return f(g(x)), 3. * x_dot
    print(app2(lambda x: x ** 3, 3., lambda y: 5 * y))
    print(m.grad(app2, 1)(lambda x: x ** 3, 3., lambda y: 5 * y))


@cell
def cell_nondiff_custom_vjp(m, ns):
    @partial(m.custom_vjp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    def app_fwd(f, x):
        return f(x), x

    def app_bwd(f, x, g):
        return (5 * g,)

    app.defvjp(app_fwd, app_bwd)
    print(app(lambda x: x ** 2, 4.))
    print(m.grad(app, 1)(lambda x: x ** 2, 4.))


def _run_notebook(m):
    """Each cell's printed text, running all cells in order on module `m`."""
    ns, printed = {}, []
    for fn in NOTEBOOK_CELLS:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            fn(m, ns)
        printed.append((fn.__name__, buf.getvalue()))
    return printed


# make_jaxpr's text is the jaxpr printer's, which differs from JAX 0.10's (JAX writes
# literals with their types, `1.0:f32[]`, and keeps equations whose outputs nothing
# uses, `_ = log c`): that cell is compared by the primitives of its used equations.
PRINTER_CELLS = {"cell_log1pexp_jaxpr"}

# impl goes beyond JAX on purpose here: forward mode through a custom_vjp function
# transposes its bwd rule (when bwd is linear in the cotangent, as the notebook's is), where
# JAX refuses with the error the notebook prints. tests/test_custom_derivatives.py checks
# those tangents against JAX's jvp of the same function without the rule.
BEYOND_JAX_CELLS = {"cell_vjp_forward_mode_error"}


def _primitive_names(text):
    names = []
    for line in text.splitlines():
        lhs, eq, rhs = line.partition(" = ")
        if eq and not lhs.strip().startswith("_"):
            names.append(rhs.split()[0].split("[")[0])
    return names


def test_whole_notebook_prints_what_jax_prints():
    got, want = _run_notebook(jax), _run_notebook(real_jax)
    assert [n for n, _ in got] == [n for n, _ in want]
    for (name, g), (_, w) in zip(got, want):
        if name in BEYOND_JAX_CELLS:
            assert "ERROR! can't apply forward-mode autodiff (jvp)" in w, w
            assert "ERROR" not in g, g
            continue
        if name in PRINTER_CELLS:
            assert _primitive_names(g) == _primitive_names(w), (name, g, w)
            continue
        assert g == w, f"cell {name}:\n--- impl\n{g}--- JAX\n{w}"


def test_whole_notebook_comparison_catches_a_staged_primal(monkeypatch):
    """Negative check: with custom calls always staged where they are called (the
    function traced under grad as well as its rule run), the printed side effects
    differ from JAX's and the comparison sees it."""
    from impl.custom_derivatives import jvp as jvp_module
    # no landing trace found: every call takes the staging path
    monkeypatch.setattr(jvp_module, "landing", lambda operands: (None, []))
    ns, buf = {}, io.StringIO()
    with contextlib.redirect_stdout(buf):
        cell_basic_side_effects(jax, ns)
    want_ns, want_buf = {}, io.StringIO()
    with contextlib.redirect_stdout(want_buf):
        cell_basic_side_effects(real_jax, want_ns)
    got, want = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(got):
        cell_basic_side_effects_grad(jax, ns)
    with contextlib.redirect_stdout(want):
        cell_basic_side_effects_grad(real_jax, want_ns)
    assert got.getvalue() != want.getvalue()
