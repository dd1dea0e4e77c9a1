"""custom_vmap (def_vmap rules, defjvp on a custom_vmap function, nesting with
custom_jvp and custom_vjp both ways) and sequential_vmap, on impl and on JAX.

Where JAX refuses (reverse mode reaching a custom_vmap call: linearization cannot
split it) impl raises the same ValueError."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import impl
from _custom_helpers import (F32, assert_trees_close, check_against_jax, check_same_error,
                             run_both)

LINEARIZE_REFUSED = "Linearization failed to produce known values for all output primals"

X = np.array([0.3, -1.2, 2.0], F32)
Y = np.array([1.5, 0.5, -0.7], F32)
XS = np.stack([X, 2 * X])
YS = np.stack([Y, -Y])


def _cv(m):
    return m.custom_batching.custom_vmap


# ------------------------------------------------------------------- def_vmap rules

def _pytree_rule(m, np_, log):
    @_cv(m)
    def f(p, s):
        return {"a": np_.sin(p["x"]) * s, "b": p["y"] * 2.}

    @f.def_vmap
    def rule(axis_size, in_batched, p, s):
        log.append((axis_size, in_batched))
        (pb, sb) = in_batched
        s = s[:, None] if sb else s
        out = {"a": np_.sin(p["x"]) * s * 3., "b": p["y"] * 2.}
        return out, {"a": pb["x"] or sb, "b": pb["y"]}

    p = {"x": XS, "y": YS}
    return (f({"x": X, "y": Y}, F32(2.)),
            m.vmap(f, ({"x": 0, "y": None}, None))({"x": XS, "y": Y}, F32(2.)),
            m.vmap(f, ({"x": None, "y": 0}, 0))({"x": X, "y": YS}, np.array([1., 2.], F32)),
            m.jit(m.vmap(f, (0, None)))(p, F32(2.)),
            m.vmap(m.vmap(f, ({"x": 0, "y": None}, None)), ({"x": 0, "y": None}, None))(
                {"x": np.stack([XS, XS]), "y": Y}, F32(2.)),
            m.vmap(f, ({"x": 1, "y": None}, None))({"x": XS.T, "y": Y}, F32(2.)))


def test_def_vmap_rule_with_pytrees():
    log_i, log_j = [], []
    got = _pytree_rule(impl, impl.numpy, log_i)
    want = _pytree_rule(jax, jax.numpy, log_j)
    assert_trees_close(got, want)
    assert log_i == log_j and log_j   # the rules saw the same axis sizes and in_batched


def _unbatched_output_rule(m, np_):
    @_cv(m)
    def total(x):
        return np_.sum(x)

    # the rule says the output is unbatched (the total over the whole batch)
    total.def_vmap(lambda n, b, x: (np_.sum(x), False))
    return (m.vmap(total)(XS), m.vmap(total, out_axes=None)(XS),
            m.jvp(m.vmap(total), (XS,), (XS,)))


def test_rule_returning_unbatched_output():
    check_against_jax(_unbatched_output_rule)


def test_rule_sees_axis_name():
    """An impl extension: a rule accepting `axis_name` gets the vmapped axis' name."""
    log = []

    @impl.custom_batching.custom_vmap
    def f(x):
        return x * 2.

    @f.def_vmap
    def rule(axis_size, in_batched, x, axis_name=None):
        log.append((axis_size, in_batched, axis_name))
        return x * 3., in_batched[0]

    np.testing.assert_allclose(impl.vmap(f, axis_name="batch")(X), 3 * X)
    assert log == [(3, [True], "batch")]


# ------------------------------------------------ differentiation through custom_vmap

def _sin_rule(m, np_, log):
    @_cv(m)
    def f(x, y):
        return np_.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        log.append(tuple(in_batched))
        return np_.sin(x) * y, any(in_batched)

    return f


FORWARD = {
    "jvp": lambda m, f: m.jvp(f, (X, Y), (Y, X)),
    "jvp_vmap": lambda m, f: m.jvp(m.vmap(f), (XS, YS), (YS, XS)),
    "vmap_jvp": lambda m, f: m.vmap(lambda a, b: m.jvp(f, (a, b), (b, a)))(XS, YS),
    "vmap_jvp_unbatched_tangent": lambda m, f: m.vmap(
        lambda a: m.jvp(f, (a, Y), (Y, X)))(XS),
    "jacfwd_vmap": lambda m, f: m.jacfwd(m.vmap(f, (0, None)), 1)(XS, Y),
    "jit_vmap_jvp": lambda m, f: m.jit(m.vmap(lambda a, b: m.jvp(f, (a, b), (b, a))))(XS, YS),
}


@pytest.mark.parametrize("transform", FORWARD, ids=list(FORWARD))
def test_forward_mode_through_custom_vmap(transform):
    log_i, log_j = [], []
    got = FORWARD[transform](impl, _sin_rule(impl, impl.numpy, log_i))
    want = FORWARD[transform](jax, _sin_rule(jax, jax.numpy, log_j))
    assert_trees_close(got, want)
    # the rule is told an input is batched only when its primal and its tangent both
    # are (the rest is vmapped around it), in JAX and impl alike
    assert set(log_i) == set(log_j)


REVERSE = {
    "grad": lambda m, np_, f: m.grad(lambda a, b: np_.sum(f(a, b)), (0, 1))(X, Y),
    "grad_vmap": lambda m, np_, f: m.grad(lambda a: np_.sum(m.vmap(f, (0, None))(a, Y)))(XS),
    "vmap_grad": lambda m, np_, f: m.vmap(m.grad(lambda a, b: np_.sum(f(a, b)), (0, 1)))(XS, YS),
    "jit_grad_vmap": lambda m, np_, f: m.jit(m.grad(
        lambda a, b: np_.sum(m.vmap(f)(a, b) ** 2), (0, 1)))(XS, YS),
    "hessian": lambda m, np_, f: m.hessian(lambda a: np_.sum(f(a, Y)))(X),
}


# reverse mode reaching custom_vmap_call (no vmap outside the differentiation)
REVERSE_REFUSED = {"grad", "vmap_grad", "hessian"}


@pytest.mark.parametrize("transform", REVERSE, ids=list(REVERSE))
def test_reverse_mode_through_custom_vmap(transform):
    """A vmap outside the differentiation runs the rule, which is then differentiated;
    reverse mode reaching the custom_vmap call itself raises, in JAX and impl alike."""
    def program(m, np_):
        return REVERSE[transform](m, np_, _sin_rule(m, np_, []))
    if transform in REVERSE_REFUSED:
        check_same_error(program, LINEARIZE_REFUSED)
    else:
        check_against_jax(program)


def _nested_jvp(m, np_, log, jvp_outside):
    """custom_jvp(custom_vmap(f)) or custom_vmap(custom_jvp(f)): the def* method of the
    inner function is reached through the outer one."""
    def f(x):
        return np_.sin(x)

    f = m.custom_jvp(_cv(m)(f)) if jvp_outside else _cv(m)(m.custom_jvp(f))

    @f.def_vmap
    def rule(n, b, x):
        log.append(("vmap", n, tuple(b)))
        return np_.sin(x), b[0]

    @f.defjvp
    def f_jvp(p, t):
        log.append("jvp")
        return f(p[0]), 3. * t[0]
    return f


NESTED = {
    "vmap": lambda m, np_, f: m.vmap(f)(X),
    "jvp": lambda m, np_, f: m.jvp(f, (X,), (Y,)),
    "jvp_vmap": lambda m, np_, f: m.jvp(m.vmap(f), (XS,), (YS,)),
    "vmap_jvp": lambda m, np_, f: m.vmap(lambda a, t: m.jvp(f, (a,), (t,)))(XS, YS),
    "grad": lambda m, np_, f: m.grad(lambda a: np_.sum(f(a)))(X),
    "vmap_grad": lambda m, np_, f: m.vmap(m.grad(f))(X),
    "grad_vmap": lambda m, np_, f: m.grad(lambda a: np_.sum(m.vmap(f)(a)))(XS),
    "jit_grad": lambda m, np_, f: m.jit(m.grad(lambda a: np_.sum(f(a))))(X),
}
# reverse mode reaching custom_vmap_call (vmap outside the differentiation or none)
JAX_REFUSES = {"grad", "vmap_grad", "jit_grad"}


@pytest.mark.parametrize("transform", NESTED, ids=list(NESTED))
@pytest.mark.parametrize("nesting", ["outside", "inside"])
def test_defjvp_on_a_custom_vmap_function(nesting, transform):
    outside = nesting == "outside"
    if not outside and transform in JAX_REFUSES:
        check_same_error(lambda m, np_: NESTED[transform](m, np_, _nested_jvp(
            m, np_, [], outside)), LINEARIZE_REFUSED)
        return
    log_i, log_j = [], []
    got = NESTED[transform](impl, impl.numpy, _nested_jvp(impl, impl.numpy, log_i, outside))
    want = NESTED[transform](jax, jax.numpy, _nested_jvp(jax, jax.numpy, log_j, outside))
    assert_trees_close(got, want)
    # the rules were called with the same arguments as JAX's (impl may call the vmap
    # rule twice under vmap of jvp: once for the primal, once for the tangent)
    assert set(log_i) == set(log_j)


# ------------------------------------------------ custom_vjp with a batching rule

def _nested_vjp(m, np_, log, vjp_outside):
    """custom_vjp(custom_vmap(f)) (as in JAX's custom_vmap docstring) or
    custom_vmap(custom_vjp(f))."""
    def f(x, y):
        return np_.sin(x) * y

    f = m.custom_vjp(_cv(m)(f)) if vjp_outside else _cv(m)(m.custom_vjp(f))

    @f.def_vmap
    def rule(axis_size, in_batched, xs, ys):
        log.append(tuple(in_batched))
        return np_.cos(xs) * ys, True   # deliberately not f: shows the rule was used

    def bwd(res, g):
        cos_x, sin_x, y = res
        return (2. * cos_x * g * y, sin_x * g)

    f.defvjp(lambda x, y: (f(x, y), (np_.cos(x), np_.sin(x), y)), bwd)
    return f


COMBINED = {
    "eval": lambda m, np_, f: f(X, Y),
    "vmap": lambda m, np_, f: m.vmap(f)(XS, YS),
    "vmap_unbatched_y": lambda m, np_, f: m.vmap(f, (0, None))(XS, Y),
    "jit_vmap": lambda m, np_, f: m.jit(m.vmap(f))(XS, YS),
    "grad": lambda m, np_, f: m.grad(lambda a, b: np_.sum(f(a, b)), (0, 1))(X, Y),
    "vmap_grad": lambda m, np_, f: m.vmap(m.grad(lambda a, b: np_.sum(f(a, b)), (0, 1)))(
        XS, YS),
    "grad_vmap": lambda m, np_, f: m.grad(lambda a, b: np_.sum(m.vmap(f)(a, b)), (0, 1))(
        XS, YS),
    "jit_grad": lambda m, np_, f: m.jit(m.grad(lambda a: np_.sum(f(a, Y))))(X),
}


@pytest.mark.parametrize("transform", COMBINED, ids=list(COMBINED))
@pytest.mark.parametrize("nesting", ["outside", "inside"])
def test_custom_vjp_with_a_batching_rule(nesting, transform):
    outside = nesting == "outside"
    if not outside and transform in JAX_REFUSES:
        check_same_error(lambda m, np_: COMBINED[transform](m, np_, _nested_vjp(
            m, np_, [], outside)), LINEARIZE_REFUSED)
        return
    log_i, log_j = [], []
    got = COMBINED[transform](impl, impl.numpy, _nested_vjp(impl, impl.numpy, log_i, outside))
    want = COMBINED[transform](jax, jax.numpy, _nested_vjp(jax, jax.numpy, log_j, outside))
    assert_trees_close(got, want)
    if "vmap" in transform:
        assert set(log_i) == set(log_j) and log_j


# ------------------------------------------------------------------ sequential_vmap

def _sequential(m, np_, shapes):
    @m.custom_batching.sequential_vmap
    def f(x, y):
        shapes.add((np.shape(x), np.shape(y)))
        return np_.sin(x) * y

    return (m.vmap(f, (0, None))(XS, F32(2.)),
            m.vmap(f)(XS, YS),
            m.jit(m.vmap(f))(XS, YS),
            m.vmap(m.vmap(f))(np.stack([XS, XS]), np.stack([YS, YS])),
            m.jvp(m.vmap(f, (0, None)), (XS, F32(2.)), (YS, F32(1.))),
            f(X, Y))


def test_sequential_vmap():
    shapes_i, shapes_j = set(), set()
    got = _sequential(impl, impl.numpy, shapes_i)
    want = _sequential(jax, jax.numpy, shapes_j)
    assert_trees_close(got, want)
    # the function only ever saw single examples, as in JAX
    assert shapes_i == shapes_j


def _sequential_pytree(m, np_):
    @m.custom_batching.sequential_vmap
    def f(p, s):
        return {"out": np_.sin(p["a"]) * p["b"] * s}

    return (m.vmap(f, ({"a": 0, "b": None}, None))({"a": XS, "b": Y}, F32(2.)),
            m.vmap(f, ({"a": None, "b": 0}, 0))({"a": X, "b": YS}, np.ones(2, F32)))


def test_sequential_vmap_pytree_arguments_partly_batched():
    check_against_jax(_sequential_pytree)


def test_sequential_vmap_reverse_mode_raises():
    """The rule's loop calls the function on single examples, a custom_vmap call that
    reverse mode reaches: JAX and impl refuse."""
    def program(m, np_):
        f = m.custom_batching.sequential_vmap(lambda x, y: np_.sin(x) * y)
        return m.grad(lambda a: np_.sum(m.vmap(f, (0, None))(a, Y)))(XS)
    check_same_error(program, LINEARIZE_REFUSED)


def test_public_names_match_jax():
    def names(m, np_):
        return (sorted(n for n in dir(m.custom_batching) if not n.startswith("_")
                       and n in ("custom_vmap", "sequential_vmap")),
                callable(m.custom_batching.sequential_vmap))
    got, want = run_both(names)
    assert got == want


def _closing_over(m, np_, y, x):
    f = _cv(m)(lambda x: np_.sin(x) * y)
    f.def_vmap(lambda n, b, x: (np_.sin(x) * y * 2., b[0]))   # 2: shows the rule ran
    return f(x)


def test_differentiating_a_value_a_custom_vmap_function_closes_over():
    def program(m, np_):
        return (m.jvp(lambda y: _closing_over(m, np_, y, F32(1.)), (F32(2.),), (F32(1.),)),
                m.jvp(lambda y: m.vmap(lambda x: _closing_over(m, np_, y, x))(X),
                      (F32(2.),), (F32(1.),)),
                m.grad(lambda y: np_.sum(m.vmap(lambda x: _closing_over(m, np_, y, x))(X)))(
                    F32(2.)))
    check_against_jax(program)


def test_linear_transpose_of_a_linear_custom_vmap_function():
    """impl transposes a linear custom_vmap function as its program (JAX has no transpose of
    custom_vmap_call: NotImplementedError); the reference is JAX's transpose of the plain
    function. Both operands have one type, so cotangents given to the wrong operand show."""
    def plain(x, y):
        return 2. * x - 0.5 * y

    def linear(m):
        f = _cv(m)(plain)

        @f.def_vmap
        def rule(axis_size, in_batched, x, y):
            return plain(x, y), any(in_batched)
        return f

    got = impl.linear_transpose(linear(impl), X, Y)(X)
    assert_trees_close(got, jax.linear_transpose(plain, X, Y)(X))
    with pytest.raises(NotImplementedError):
        jax.linear_transpose(linear(jax), X, Y)(X)
