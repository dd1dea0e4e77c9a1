"""Custom-rule calls as JAX 0.10 prints them and prunes them: `make_jaxpr` text of
custom_jvp, custom_vjp and forward mode through custom_vjp (`custom_lin`), the
`pretty_print` options (`use_color`, `print_shapes`, `width`), and JAX's
`partial_eval.dce_jaxpr(jaxpr, used_outputs)`, which prunes a custom call to the outputs
used while keeping its rule. Each program runs on JAX and on impl."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from jax._src import core as jax_core
from jax._src.interpreters import partial_eval as jax_pe

import impl
from impl import core as impl_core
from impl.interpreters import partial_eval as impl_pe

X = np.array([4.2], np.float32)
BACKENDS = {"jax": (jax, jax_pe), "impl": (impl, impl_pe)}
CORES = {jax: jax_core, impl: impl_core}


def _custom_jvp(J):
    @J.custom_jvp
    def f(x):
        return x + 1

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(*primals), tangents[0]
    return f


def _custom_vjp(J):
    @J.custom_vjp
    def f(x):
        return x + 1

    def f_fwd(x):
        return f(x), ()

    def f_bwd(_, g):
        return (g,)
    f.defvjp(f_fwd, f_bwd)
    return f


PROGRAMS = {
    "custom_jvp": lambda J: J.make_jaxpr(_custom_jvp(J))(X),
    "custom_vjp": lambda J: J.make_jaxpr(_custom_vjp(J))(X),
    "jvp of custom_vjp (custom_lin)":
        lambda J: J.make_jaxpr(lambda x: J.jvp(_custom_vjp(J), (x,), (x,)))(X),
    "cond": lambda J: J.make_jaxpr(lambda x: J.lax.cond(x[0] > 0, J.numpy.sin,
                                                         J.numpy.cos, x * 2.0))(X),
}
OPTIONS = [dict(use_color=False), dict(use_color=True), dict(print_shapes=False),
           dict(width=40, use_color=False)]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_custom_calls_print_as_jax(name):
    with jax.numpy_dtype_promotion("strict"):
        want, got = [PROGRAMS[name](J) for J, _ in BACKENDS.values()]
    assert str(got) == str(want)
    for options in OPTIONS:
        assert got.pretty_print(**options) == want.pretty_print(**options), options
    assert got.jaxpr.pretty_print(use_color=False) == want.jaxpr.pretty_print(
        use_color=False)


def test_unsupported_print_options_raise_naming_them():
    jaxpr = impl.make_jaxpr(lambda x: x + 1.0)(X)
    for flag in ("source_info", "name_stack", "print_effects"):
        with pytest.raises(NotImplementedError, match=flag):
            jaxpr.pretty_print(**{flag: True})


def _two_outputs(J, kind):
    np_ = J.numpy
    f = J.custom_jvp(lambda x, y: (np_.sin(x), x + np_.cos(y))) if kind == "jvp" else \
        J.custom_vjp(lambda x, y: (np_.sin(x), x + np_.cos(y)))
    if kind == "jvp":
        def f_jvp(primals, tangents):
            (x, y), (dx, dy) = primals, tangents
            return f(x, y), (2.0 * np_.cos(x) * dx, 1.5 * dx - 0.5 * np_.sin(y) * dy)
        f.defjvp(f_jvp)
    else:
        def f_fwd(x, y):
            return f(x, y), (np_.cos(x), np_.sin(y))

        def f_bwd(res, cts):
            (cos_x, sin_y), (ct_a, ct_b) = res, cts
            return 2.0 * cos_x * ct_a + 1.5 * ct_b, -0.5 * sin_y * ct_b
        f.defvjp(f_fwd, f_bwd)
    return f


@pytest.mark.parametrize("kind", ["jvp", "vjp"])
def test_dce_of_a_custom_call_keeps_its_rule(kind):
    x, y = np.float32(0.1), np.float32(-1.3)
    results = {}
    for backend, (J, pe) in BACKENDS.items():
        jaxpr = J.make_jaxpr(_two_outputs(J, kind))(x, y).jaxpr
        out = []
        for used in ([True, True], [True, False], [False, True], [False, False]):
            pruned, used_inputs = pe.dce_jaxpr(jaxpr, used)
            calls = [sorted(e.primitive.name for e in eqn.params["call_jaxpr"].eqns)
                     for eqn in pruned.eqns]
            out.append((calls, used_inputs, len(pruned.outvars)))
            if sum(used) == 1:
                fun = CORES[J].jaxpr_as_fun(pe.close_jaxpr(pruned))
                g = lambda a, b: fun(a, b)[0]  # noqa: E731
                if kind == "jvp":   # the rule's tangents, not sin's and cos's
                    out.append(J.jvp(g, (x, y), (np.float32(1.), np.float32(0.5))))
                else:               # bwd's cotangents
                    out.append(J.grad(g, argnums=(0, 1))(x, y))
        results[backend] = out
    got, want = results["impl"], results["jax"]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w[0], list):
            assert g == w
        else:
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
