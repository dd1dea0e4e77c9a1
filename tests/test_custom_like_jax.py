"""Custom rules behave like JAX's, not only compute like them: which user Python runs
(call counts by a side-effect counter) under every nesting of jvp, grad, linearize,
vjp, jit and vmap; Python control flow on primal values inside a custom_jvp function;
weak types of the results, also with `jax_numpy_dtype_promotion='strict'`; and
`impl.test_util.check_grads`. Every reference comes from JAX run in the same test."""
from collections import namedtuple

import jax
import numpy as np
import pytest

import impl
import impl.test_util
import jax.test_util


def strict_promotion():
    return jax.numpy_dtype_promotion("strict")


def _counted_jvp(m, np_, calls):
    @m.custom_jvp
    def f(x):
        calls.append("f")
        return np_.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        calls.append("rule")
        (x,), (t,) = primals, tangents
        return f(x), 2 * np_.cos(x) * t

    return f


def _counted_vjp(m, np_, calls):
    @m.custom_vjp
    def f(x):
        calls.append("f")
        return np_.sin(x)

    def fwd(x):
        calls.append("fwd")
        return f(x), np_.cos(x)

    def bwd(c, g):
        calls.append("bwd")
        return (2 * c * g,)

    f.defvjp(fwd, bwd)
    return f


NESTINGS = {
    "eager": lambda m, f, x, xs: f(x),
    "jvp": lambda m, f, x, xs: m.jvp(f, (x,), (x,)),
    "grad": lambda m, f, x, xs: m.grad(f)(x),
    "linearize": lambda m, f, x, xs: m.linearize(f, x)[1](x),
    "vjp": lambda m, f, x, xs: m.vjp(f, x)[1](x),
    "grad_grad": lambda m, f, x, xs: m.grad(m.grad(f))(x),
    "jit_grad": lambda m, f, x, xs: m.jit(m.grad(f))(x),
    "grad_jit": lambda m, f, x, xs: m.grad(m.jit(f))(x),
    "vmap_grad": lambda m, f, x, xs: m.vmap(m.grad(f))(xs),
    "jit_vmap_grad": lambda m, f, x, xs: m.jit(m.vmap(m.grad(f)))(xs),
    "jacrev": lambda m, f, x, xs: m.jacrev(f)(xs),
    "checkpoint": lambda m, f, x, xs: m.grad(m.checkpoint(f))(x),
}
JVP_ONLY = {"jvp", "linearize", "grad_grad"}   # JAX refuses forward mode of custom_vjp


def _run_counted(make, nesting, m):
    calls = []
    f = make(m, m.numpy, calls)
    out = NESTINGS[nesting](m, f, np.float32(0.5), np.arange(3, dtype=np.float32))
    return calls, out


@pytest.mark.parametrize("nesting", NESTINGS)
@pytest.mark.parametrize("make", [_counted_jvp, _counted_vjp], ids=["custom_jvp",
                                                                     "custom_vjp"])
def test_user_python_runs_as_in_jax(make, nesting):
    if make is _counted_vjp and nesting in JVP_ONLY:
        pytest.skip("forward mode through custom_vjp: JAX raises, impl transposes bwd")
    got_calls, got = _run_counted(make, nesting, impl)
    want_calls, want = _run_counted(make, nesting, jax)
    assert got_calls == want_calls, (got_calls, want_calls)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_a_broken_landing_is_caught():
    """Negative check of the counter: a function called as well as its rule (what impl
    did before) gives another call list than JAX's."""
    calls = []
    f = _counted_jvp(impl, impl.numpy, calls)
    f(np.float32(0.5))   # the function run an extra time, as a staged primal would be
    impl.grad(f)(np.float32(0.5))
    want_calls, _ = _run_counted(_counted_jvp, "grad", jax)
    assert calls != want_calls


def _control_flow(m, np_):
    """The custom-derivatives notebook's example: Python control flow on the primal."""
    @m.custom_jvp
    def f(x):
        if x > 0:
            return np_.sin(x)
        return np_.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), (2. if x > 0 else 3.) * t

    return f


@pytest.mark.parametrize("transform", ["grad", "jvp", "vjp", "jit_of_nothing"])
def test_python_control_flow_on_primal_values(transform):
    def run(m):
        f = _control_flow(m, m.numpy)
        if transform == "grad":
            return m.grad(f)(1.), m.grad(f)(-1.)
        if transform == "jvp":
            return m.jvp(f, (1.,), (1.,)), m.jvp(f, (-1.,), (1.,))
        if transform == "vjp":
            return m.vjp(f, 1.)[1](1.), m.vjp(f, -1.)[1](1.)
        return f(1.), f(-1.)
    got, want = run(impl), run(jax)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-6)
        assert type(g) is type(w) or isinstance(g, jax.Array) == isinstance(w, jax.Array)
        assert getattr(g, "weak_type", None) == getattr(w, "weak_type", None)


def test_control_flow_on_a_traced_value_still_raises_under_jit():
    def run(m):
        with pytest.raises(m.errors.TracerBoolConversionError):
            m.jit(m.grad(_control_flow(m, m.numpy)))(1.)
    run(impl)
    run(jax)


# ------------------------------------------------------------------- weak types

def _sin_rule(m, np_):
    @m.custom_jvp
    def f(x):
        return np_.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (g,) = primals, tangents
        return f(x), 2 * np_.cos(x) * g   # a Python int meets a traced float

    return f


WEAK = {
    "grad": lambda m, f: m.grad(f)(3.),
    "jit_grad": lambda m, f: m.jit(m.grad(f))(3.),
    "grad_jit": lambda m, f: m.grad(m.jit(f))(3.),
    "vmap_grad": lambda m, f: m.vmap(m.grad(f))(m.numpy.arange(3.)),
    "jit_vmap_grad": lambda m, f: m.jit(m.vmap(m.grad(f)))(m.numpy.arange(3.)),
    "jvp_jit": lambda m, f: m.jvp(m.jit(f), (3.,), (1.,)),
    "make_jaxpr_free": lambda m, f: m.jit(lambda x: 2 * m.numpy.cos(x))(3.),
}


def _describe(tree):
    return [(np.asarray(x).dtype, getattr(x, "weak_type", None), np.asarray(x).tolist())
            for x in jax.tree_util.tree_leaves(tree)]


@pytest.mark.parametrize("case", WEAK)
def test_weak_types_under_strict_promotion(case):
    with strict_promotion():
        got = WEAK[case](impl, _sin_rule(impl, impl.numpy))
        want = WEAK[case](jax, _sin_rule(jax, jax.numpy))
    g, w = _describe(got), _describe(want)
    assert [d[:2] for d in g] == [d[:2] for d in w]
    np.testing.assert_allclose([d[2] for d in g], [d[2] for d in w], rtol=1e-6)


def test_strict_promotion_still_refuses_strong_mixtures():
    with strict_promotion():
        for m in (impl, jax):
            with pytest.raises(jax.dtypes.TypePromotionError):
                m.jit(lambda x: x * np.int32(2))(np.float32(1.))


Point = namedtuple("Point", ["x", "y"])


def test_weak_types_in_custom_jvp_pytree_outputs():
    def run(m):
        @m.custom_jvp
        def f(pt):
            return Point(pt.x * 2., 0.)

        @f.defjvp
        def f_jvp(primals, tangents):
            (p,), (t,) = primals, tangents
            return f(p), Point(t.x * 2., 0.)

        return (f(Point(1., 2.)), m.jit(f)(Point(1., 2.)),
                m.jvp(f, (Point(1., 2.),), (Point(1., 1.),)),
                m.grad(lambda p: f(p).x)(Point(1., 2.)))
    assert _describe(run(impl)) == _describe(run(jax))


def test_weak_types_in_complex_differentiation():
    def run(m):
        np_ = m.numpy
        return (m.grad(lambda z: np_.real(z * z))(1. + 2.j),
                m.grad(lambda z: np_.abs(z) ** 2, holomorphic=False)(1. + 2.j),
                m.jvp(lambda z: z * 2.j, (1. + 2.j,), (1. + 0.j,)),
                m.grad(lambda z: z * z, holomorphic=True)(1. + 2.j),
                m.vjp(lambda z: z * z, 1. + 2.j)[1](1. + 0j))
    assert _describe(run(impl)) == _describe(run(jax))


# ------------------------------------------------------------------- check_grads

def test_check_grads_accepts_what_jax_accepts():
    f = lambda x, y: impl.numpy.sin(x) * y   # noqa: E731
    g = lambda x, y: jax.numpy.sin(x) * y    # noqa: E731
    args = (np.float32(1.), np.arange(3, dtype=np.float32))
    impl.test_util.check_grads(f, args, order=2)
    jax.test_util.check_grads(g, args, order=2)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_check_grads_catches_a_wrong_rule_as_jax_does(mode):
    def wrong(m):
        @m.custom_jvp
        def f(x):
            return m.numpy.sin(x)
        f.defjvp(lambda p, t: (f(p[0]), 3. * t[0]))   # not the derivative of sin
        return f
    with pytest.raises(AssertionError):
        impl.test_util.check_grads(wrong(impl), (np.float32(1.),), order=1, modes=[mode])
    with pytest.raises(AssertionError):
        jax.test_util.check_grads(wrong(jax), (np.float32(1.),), order=1, modes=[mode])


def _mismatched_bwd(m):
    @m.custom_vjp
    def foo(x, y):
        return x

    foo.defvjp(lambda x, y: (x, None),
               lambda _, g: (m.numpy.zeros(3, np.float32),   # y has shape (4,)
                             m.numpy.zeros(3, np.float32)))
    return lambda: m.grad(lambda x, y: foo(x, y).sum(), 1)(np.ones(3, np.float32),
                                                         np.ones(4, np.float32))


def test_bwd_shape_check_and_jax_option_to_disable_it():
    for m in (impl, jax):
        with pytest.raises(ValueError, match="bwd rule produced an output of type"):
            _mismatched_bwd(m)()
    from jax._src import config
    with config.disable_bwd_checks(True):
        got, want = _mismatched_bwd(impl)(), _mismatched_bwd(jax)()
    assert _describe(got) == _describe(want)
