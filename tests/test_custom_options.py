"""The options of custom_jvp and custom_vjp, each run on impl and on JAX (the reference):
nondiff_argnums/nondiff_argnames, symbolic zeros (SymbolicZero, zero_from_primal,
CustomVJPPrimal), defjvps with None, higher orders, pytrees with integer and float0
parts, residual pytrees, bwd returning None, optimize_remat.

Each program records what the rules saw (which tangents or cotangents were symbolic,
which inputs were perturbed), and that record must equal JAX's too.
"""
from __future__ import annotations

from functools import partial

import jax
import numpy as np
import pytest

import impl
from _custom_helpers import F32, assert_trees_close, check_against_jax, run_both

X = np.array([0.3, -1.2, 2.0], F32)
Y = np.array([1.5, 0.5, -0.7], F32)
TX = np.array([1.0, -0.5, 0.25], F32)


def _kinds(values):
    return tuple(type(v).__name__ == "SymbolicZero" for v in values)


# ----------------------------------------------------------- nondiff_argnames

def _nondiff_jvp(m, np_, how):
    kw = dict(nondiff_argnums=(0,)) if how == "nums" else dict(nondiff_argnames=("g",))

    @partial(m.custom_jvp, **kw)
    def h(g, x, k):
        return g(x) * k

    @h.defjvp
    def h_jvp(g, primals, tangents):
        (x, k), (tx, tk) = primals, tangents
        return h(g, x, k), 5. * tx * k + g(x) * tk

    k = F32(3.)
    return (m.jvp(lambda x: h(np_.sin, x, k), (X,), (TX,)),
            m.grad(lambda x, k: np_.sum(h(np_.sin, x, k)), (0, 1))(X, k),
            m.jvp(lambda x: h(g=np_.sin, x=x, k=k), (X,), (TX,)),
            m.vmap(m.grad(lambda x: h(np_.sin, x, k)))(X))


@pytest.mark.parametrize("how", ["nums", "names"])
def test_custom_jvp_nondiff_argnums_and_argnames(how):
    check_against_jax(_nondiff_jvp, how)


def _nondiff_vjp(m, np_, how):
    kw = dict(nondiff_argnums=(1,)) if how == "nums" else dict(nondiff_argnames=("g",))

    @partial(m.custom_vjp, **kw)
    def v(x, g, y):
        return g(x) * y

    v.defvjp(lambda x, g, y: (v(x, g, y), (x, y)),
             lambda g, res, ct: (7. * ct * res[1], g(res[0]) * ct))
    return (m.grad(lambda x, y: np_.sum(v(x, np_.sin, y)), (0, 1))(X, Y),
            m.grad(lambda x: np_.sum(v(x, g=np_.cos, y=Y)))(X),
            m.jit(m.vmap(m.grad(lambda x, y: v(x, np_.sin, y))))(X, Y))


@pytest.mark.parametrize("how", ["nums", "names"])
def test_custom_vjp_nondiff_argnums_and_argnames(how):
    check_against_jax(_nondiff_vjp, how)


def test_nondiff_positions_recorded_like_jax():
    def positions(m, np_):
        f = partial(m.custom_jvp, nondiff_argnames=("g",), nondiff_argnums=(2,))(
            lambda g, x, k: g(x) * k)
        v = partial(m.custom_vjp, nondiff_argnames=("k",))(lambda g, x, k: g(x) * k)
        return f.nondiff_argnums, v.nondiff_argnums
    got, want = run_both(positions)
    assert got == want == ((0, 2), (2,))


def test_unknown_nondiff_argname_is_refused():
    # JAX silently ignores names that are not positional parameters; impl names them.
    with pytest.raises(ValueError, match="'zz'"):
        impl.custom_jvp(lambda x, n: x * n, nondiff_argnames=("zz",))


# ---------------------------------------------------- custom_jvp symbolic zeros

def _symbolic_jvp(m, np_, log):
    SymbolicZero = m.custom_derivatives.SymbolicZero

    @m.custom_jvp
    def f(x, y, n):
        return np_.sin(x) * y * n

    def f_jvp(primals, tangents):
        x, y, n = primals
        tx, ty, tn = tangents
        log.append(_kinds(tangents))
        out = f(x, y, n)
        acc = np_.zeros_like(out)
        if type(tx) is not SymbolicZero:
            acc = acc + np_.cos(x) * tx * y * n
        if type(ty) is not SymbolicZero:
            acc = acc + np_.sin(x) * ty * n
        return out, acc

    f.defjvp(f_jvp, symbolic_zeros=True)
    return (m.jvp(lambda x: f(x, Y, 3), (X,), (TX,)),
            m.jvp(lambda x, y: f(x, y, 3), (X, Y), (TX, TX)),
            m.grad(lambda x: np_.sum(f(x, Y, 3)))(X),
            m.grad(lambda y: np_.sum(f(X, y, 3)))(Y),
            m.jit(m.grad(lambda x, y: np_.sum(f(x, y, 2)), (0, 1)))(X, Y),
            m.vmap(m.grad(lambda x: f(x, F32(2.), 3)))(X),
            m.jvp(m.vmap(lambda x: f(x, F32(2.), 3)), (X,), (TX,)),
            m.hessian(lambda x: np_.sum(f(x, Y, 3)))(X))


def test_custom_jvp_symbolic_zeros():
    log_i, log_j = [], []
    got, want = _symbolic_jvp(impl, impl.numpy, log_i), _symbolic_jvp(jax, jax.numpy, log_j)
    assert_trees_close(got, want)
    # the rule saw symbolic zeros exactly where JAX's did (at every call)
    assert log_i == log_j and any(any(k) for k in log_j)


def _rule_returns_symbolic_zero(m, np_, symbolic):
    SymbolicZero = m.custom_derivatives.SymbolicZero

    @m.custom_jvp
    def g(x, y):
        return x * y, np_.sin(x)

    def g_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        t = tx * y if type(ty) is SymbolicZero else tx * y + x * ty
        return g(x, y), (t, SymbolicZero.from_primal_value(np_.sin(x)))

    g.defjvp(g_jvp, symbolic_zeros=symbolic)
    outs = [m.jvp(g, (X, Y), (TX, TX))]
    if symbolic:   # JAX cannot instantiate it under grad with symbolic_zeros=False
        outs.append(m.grad(lambda x, y: np_.sum(g(x, y)[0] + g(x, y)[1]), (0, 1))(X, Y))
        outs.append(m.vmap(m.grad(lambda x: g(x, F32(2.))[1]))(X))
    return outs


@pytest.mark.parametrize("symbolic", [True, False])
def test_rule_returning_symbolic_zero_is_instantiated(symbolic):
    check_against_jax(_rule_returns_symbolic_zero, symbolic)


def test_rule_returning_symbolic_zero_under_grad_without_symbolic_zeros():
    """JAX fails here (it passes the SymbolicZero on as a value); impl treats it as a
    zero tangent, so the gradient equals the one with symbolic_zeros=True."""
    got = _rule_returns_symbolic_zero(impl, impl.numpy, True)
    SymbolicZero = impl.custom_derivatives.SymbolicZero

    @impl.custom_jvp
    def g(x, y):
        return x * y, impl.numpy.sin(x)

    g.defjvp(lambda p, t: (g(*p), (t[0] * p[1] + p[0] * t[1],
                                   SymbolicZero.from_primal_value(p[0]))))
    gx = impl.grad(lambda x, y: impl.numpy.sum(g(x, y)[0] + g(x, y)[1]), (0, 1))(X, Y)
    assert_trees_close(gx, got[1])


def test_symbolic_zero_and_zero_from_primal():
    def program(m, np_):
        cd = m.custom_derivatives
        z = cd.SymbolicZero.from_primal_value(np.ones((2, 3), F32))
        zi = cd.SymbolicZero.from_primal_value(np.int32(3))
        zeros = cd.zero_from_primal((F32(1.), np.ones(2, F32), np.int32(3)))
        symbolic = cd.zero_from_primal((F32(1.), np.int32(3)), symbolic_zeros=True)
        return (repr(z), z.shape, z.dtype, z.ndim, zi.shape, zi.dtype == jax.dtypes.float0,
                [np.asarray(a).dtype for a in zeros], [np.asarray(a).shape for a in zeros],
                [type(s).__name__ for s in symbolic], [s.dtype for s in symbolic])
    got, want = run_both(program)
    assert got == want


def test_symbolic_zero_is_not_an_array():
    def program(m, np_):
        z = m.custom_derivatives.SymbolicZero.from_primal_value(F32(1.))
        for op in (lambda: z + 1., lambda: np_.sin(z)):
            try:
                op()
            except TypeError:
                continue
            raise AssertionError("a SymbolicZero was used as an array")
        return True
    assert run_both(program) == (True, True)


# ----------------------------------------------------------------- defjvps / order

def _defjvps_none(m, np_):
    @m.custom_jvp
    def f(x, y, z):
        return np_.sin(x) * y + z

    f.defjvps(lambda tx, out, x, y, z: 2. * np_.cos(x) * tx * y, None,
              lambda tz, out, x, y, z: 3. * tz)
    return (m.jvp(f, (X, Y, X), (TX, TX, TX)),
            m.grad(lambda *a: np_.sum(f(*a)), (0, 1, 2))(X, Y, X),
            m.vmap(m.grad(f, (0, 1, 2)))(X, Y, X))


def test_defjvps_with_none_entries():
    check_against_jax(_defjvps_none)


def _defjvps_all_none(m, np_, none):
    @m.custom_jvp
    def f(x):
        return np_.sin(x)

    f.defjvps(None if none else lambda t, out, x: 0. * t)
    return m.jvp(f, (X,), (TX,)), m.grad(lambda x: np_.sum(f(x)))(X)


def test_defjvps_all_none_gives_zero_tangents():
    """JAX fails here (its internal zero reaches the structure check); the reference is
    JAX with a rule returning zeros."""
    assert_trees_close(_defjvps_all_none(impl, impl.numpy, True),
                       _defjvps_all_none(jax, jax.numpy, False))
    with pytest.raises(TypeError, match="equal container"):
        _defjvps_all_none(jax, jax.numpy, True)


def _higher_order(m, np_):
    @m.custom_jvp
    def f(x):
        return np_.sin(x) * x

    @f.defjvp
    def f_jvp(p, t):
        x, = p
        # written with f itself, so every order goes through the rule
        return f(x), (np_.cos(x) * x + np_.sin(x)) * t[0] + 0.5 * f(x) * t[0]

    def jvp1(x, v):
        return m.jvp(f, (x,), (v,))[1]

    return (m.jvp(lambda x: jvp1(x, TX), (X,), (TX,)),
            m.jvp(lambda x: m.jvp(lambda y: jvp1(y, TX), (x,), (TX,))[1], (X,), (TX,)),
            m.grad(m.grad(lambda x: np_.sum(f(x)) * 1.))(F32(0.7)),
            m.grad(lambda x: m.grad(m.grad(lambda y: f(y)))(x))(F32(0.7)),
            m.jacfwd(m.jacrev(lambda x: f(x)))(X))


def test_custom_jvp_higher_order():
    check_against_jax(_higher_order, rtol=1e-4, atol=1e-5)


# -------------------------------------------------- pytrees with int and float0 parts

def _int_float0_tree(m, np_):
    float0 = jax.dtypes.float0

    @m.custom_jvp
    def f(x, n):
        return {"y": np_.sin(x) * n, "k": n * 2, "m": x > 0}

    def f_jvp(p, t):
        x, n = p
        tx, tn = t
        assert tn.dtype == float0   # the tangent of an int input
        return f(x, n), {"y": np_.cos(x) * tx * n, "k": np.zeros((), float0),
                         "m": np.zeros(np.shape(x), float0)}

    f.defjvp(f_jvp)
    out, t = m.jvp(lambda x: f(x, 3), (X,), (TX,))
    return (out, {k: np.asarray(v).dtype.name for k, v in t.items()}, t["y"],
            m.grad(lambda x: np_.sum(f(x, 3)["y"]))(X),
            m.jacfwd(lambda x: f(x, 3)["y"])(X),
            m.vmap(m.grad(lambda x: f(x, 3)["y"]))(X),
            m.grad(m.jit(lambda x: np_.sum(f(x, 3)["y"])))(X))


def test_custom_jvp_pytree_with_int_and_float0_parts():
    got, want = run_both(_int_float0_tree)
    assert_trees_close(got[0], want[0])
    assert got[1] == want[1] == {"y": "float32", "k": "void", "m": "void"}
    assert_trees_close(got[2:], want[2:])


def _int_output_tangent_passthrough(m, np_):
    @m.custom_jvp
    def g(x, n):
        return np_.sin(x) * n, n * 2

    g.defjvp(lambda p, t: (g(*p), (np_.cos(p[0]) * t[0] * p[1], t[1])))
    (o, k), (t, tk) = m.jvp(lambda x: g(x, 3), (X,), (TX,))
    return o, k, t, np.asarray(tk).dtype.name, m.grad(lambda x: np_.sum(g(x, 3)[0]))(X)


def test_custom_jvp_int_output_with_float0_tangent():
    got, want = run_both(_int_output_tangent_passthrough)
    assert got[3] == want[3] == "void"
    assert_trees_close(got[:3] + got[4:], want[:3] + want[4:])


# ---------------------------------------------------- custom_vjp symbolic zeros

def _symbolic_vjp(m, np_, log):
    cd = m.custom_derivatives
    SymbolicZero = cd.SymbolicZero

    @m.custom_vjp
    def f(x, y, n):
        return np_.sin(x) * y * n, x * 2.

    def fwd(x, y, n):
        log.append(("fwd", type(x).__name__, x.perturbed, y.perturbed, n.perturbed))
        xv, yv, nv = cd.custom_vjp_primal_tree_values((x, y, n))
        return f(xv, yv, nv), (xv, yv, nv, x.perturbed, y.perturbed)

    def bwd(res, g):
        x, y, n, px, py = res
        g0, g1 = g
        log.append(("bwd", _kinds(g)))
        if type(g0) is SymbolicZero:
            return (2. * g1 if px else None, None, None)
        gx = np_.cos(x) * g0 * y * n if px else None
        if px and type(g1) is not SymbolicZero:
            gx = gx + 2. * g1
        return (gx, np_.sin(x) * g0 * n if py else None, None)

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    return (m.grad(lambda x: np_.sum(f(x, Y, 3)[0]))(X),
            m.grad(lambda x, y: np_.sum(f(x, y, 3)[0]), (0, 1))(X, Y),
            m.grad(lambda x, y: np_.sum(f(x, y, 3)[1]), (0, 1))(X, Y),
            m.vjp(lambda x: f(x, Y, 3), X)[1]((TX, TX)),
            m.vmap(m.grad(lambda x: f(x, F32(2.), 3)[0]))(X),
            m.jit(m.grad(lambda x: np_.sum(f(x, Y, 3)[0] + f(x, Y, 3)[1])))(X),
            m.grad(lambda y: np_.sum(m.vmap(f, (0, None, None))(X, y, 3)[0]))(F32(1.5)))


def test_custom_vjp_symbolic_zeros():
    log_i, log_j = [], []
    got = _symbolic_vjp(impl, impl.numpy, log_i)
    want = _symbolic_vjp(jax, jax.numpy, log_j)
    assert_trees_close(got, want)
    # fwd saw CustomVJPPrimal leaves with JAX's perturbed flags; bwd got SymbolicZero
    # exactly where JAX's did
    assert [e for e in log_i if e[0] == "bwd"] == [e for e in log_j if e[0] == "bwd"]
    assert [e[2:] for e in log_i if e[0] == "fwd"] == [e[2:] for e in log_j if e[0] == "fwd"]
    assert {e[1] for e in log_i if e[0] == "fwd"} == {"CustomVJPPrimal"}


def test_custom_vjp_primal_tree_values_and_record():
    def program(m, np_):
        cd = m.custom_derivatives
        p = cd.CustomVJPPrimal(F32(1.), True)
        vals = cd.custom_vjp_primal_tree_values({"a": p, "b": [cd.CustomVJPPrimal(2, False)]})
        try:
            cd.custom_vjp_primal_tree_values((1., 2.))
        except TypeError as e:
            err = "unexpected leaf type" in str(e)
        return p.value, p.perturbed, vals, err
    got, want = run_both(program)
    assert got == want


def _bwd_symbolic_zero_output(m, np_):
    cd = m.custom_derivatives

    @m.custom_vjp
    def h(x, y):
        return x * y

    h.defvjp(lambda x, y: (h(x.value, y.value), (x.value, y.value)),
             lambda r, g: (g * r[1], cd.SymbolicZero.from_primal_value(r[0])),
             symbolic_zeros=True)
    return m.grad(lambda x, y: np_.sum(h(x, y)), (0, 1))(X, Y)


def test_bwd_may_return_symbolic_zero():
    check_against_jax(_bwd_symbolic_zero_output)


# ------------------------------------------------- residuals and None cotangents

def _residual_pytrees(m, np_):
    @m.custom_vjp
    def f(x, n):
        return {"y": np_.sin(x) * n, "k": n * 2}

    def fwd(x, n):
        return f(x, n), {"a": (x, None), "n": n, "three": 3, "b": [np_.cos(x), 2.]}

    def bwd(res, g):
        x, none = res["a"]
        assert none is None
        cos_x, two = res["b"]
        return (cos_x * g["y"] * res["n"] * two / 2. + res["three"] * 0., None)

    f.defvjp(fwd, bwd)
    float0 = jax.dtypes.float0
    ct = {"y": TX, "k": np.zeros((), float0)}
    return (m.grad(lambda x: np_.sum(f(x, 3)["y"]))(X),
            m.jit(m.grad(lambda x: np_.sum(f(x, 3)["y"])))(X),
            m.vmap(m.grad(lambda x: f(x, 3)["y"]))(X),
            m.vjp(lambda x: f(x, 3), X)[1](ct),
            m.grad(lambda x: np_.sum(m.vmap(f, (0, None))(x, 2)["y"]))(X))


def test_custom_vjp_residuals_are_arbitrary_pytrees():
    check_against_jax(_residual_pytrees)


def _bwd_none(m, np_):
    @m.custom_vjp
    def f(p, y):
        return p["a"] * p["b"][0] * y

    f.defvjp(lambda p, y: (f(p, y), (p, y)),
             lambda r, g: ({"a": g * r[0]["b"][0] * r[1], "b": None}, None))
    g = m.grad(lambda p, y: np_.sum(f(p, y)), (0, 1))({"a": X, "b": (Y, )}, TX)
    return g, m.vmap(m.grad(lambda a: f({"a": a, "b": (F32(2.),)}, F32(3.))))(X)


def test_bwd_returns_none_for_zero_cotangents():
    check_against_jax(_bwd_none)


def _bwd_list(m, np_):
    @m.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda r, g: [g * r[1], g * r[0]])
    return m.grad(lambda x, y: np_.sum(f(x, y)), (0, 1))(X, Y)


def test_bwd_may_return_a_list_of_the_right_length():
    check_against_jax(_bwd_list)


# ------------------------------------------------------------------ optimize_remat

def _remat_program(m, np_, optimize):
    @m.custom_vjp
    def f(x):
        return np_.sin(x)

    def fwd(x):
        # deliberately not f's value: shows whether fwd or f computed the primal output
        return 10. * np_.sin(x), (np_.cos(x),)

    f.defvjp(fwd, lambda r, g: (r[0] * g,), optimize_remat=optimize)
    return (f(X),
            m.vjp(f, X)[0],                                   # fwd runs: no removal
            m.jit(lambda x: m.vjp(f, x)[0])(X),               # residuals dead
            m.jit(lambda x: m.vjp(f, x)[1](TX))(X),
            m.grad(lambda x: np_.sum(f(x)))(X),
            m.vmap(m.grad(f))(X),
            m.jit(m.vmap(lambda x: m.vjp(f, x)[0]))(X))


@pytest.mark.parametrize("optimize", [False, True])
def test_optimize_remat(optimize):
    got = check_against_jax(_remat_program, optimize)
    # with optimize_remat the primal function replaces fwd where no residual is used
    np.testing.assert_allclose(got[2], np.sin(X) * (1. if optimize else 10.), rtol=1e-6)


def test_optimize_remat_higher_order_matches_finite_differences():
    """JAX fails on grad of grad here; impl differentiates the staged fwd."""
    @impl.custom_vjp
    def f(x):
        return impl.numpy.sin(x) * x

    f.defvjp(lambda x: (f(x), (x,)),
             lambda r, g: ((impl.numpy.cos(r[0]) * r[0] + impl.numpy.sin(r[0])) * g,),
             optimize_remat=True)
    x = 0.7
    d2 = impl.grad(impl.grad(f))(np.float64(x))
    eps = 1e-5
    d1 = lambda v: np.cos(v) * v + np.sin(v)  # noqa: E731
    np.testing.assert_allclose(d2, (d1(x + eps) - d1(x - eps)) / (2 * eps), rtol=1e-7)


def test_optimize_remat_refuses_symbolic_zeros():
    for m in (impl, jax):
        with pytest.raises(NotImplementedError, match="does not support symbolic zeros"):
            m.custom_vjp(lambda x: x).defvjp(lambda x: (x, None), lambda r, g: (g,),
                                             symbolic_zeros=True, optimize_remat=True)


def test_optimize_remat_primal_program_in_jaxpr():
    @impl.custom_vjp
    def f(x):
        return impl.numpy.sin(x)

    f.defvjp(lambda x: (f(x), (impl.numpy.cos(x),)), lambda r, g: (r[0] * g,),
             optimize_remat=True)
    # What runs: make_jaxpr keeps unused equations, as JAX's does.
    from impl.interpreters import partial_eval as pe
    dead = str(pe.drop_unused_eqns(impl.make_jaxpr(lambda x: impl.vjp(f, x)[0])(X).jaxpr))
    live = str(pe.drop_unused_eqns(impl.make_jaxpr(lambda x: impl.vjp(f, x)[1](x))(X).jaxpr))
    assert "remat_opt" not in dead and "cos" not in dead
    assert "remat_opt" in live


# ------------------------------------------ the property checkers and symbolic zeros

def _symbolic_rules(m, np_, factor=1.):
    SymbolicZero = m.custom_derivatives.SymbolicZero

    @m.custom_jvp
    def f(x, y):
        return np_.sin(x) * y

    def f_jvp(p, t):
        (x, y), (tx, ty) = p, t
        out = f(x, y)
        acc = np_.zeros_like(out)
        if type(tx) is not SymbolicZero:
            acc = acc + factor * np_.cos(x) * tx * y
        if type(ty) is not SymbolicZero:
            acc = acc + np_.sin(x) * ty
        return out, acc

    f.defjvp(f_jvp, symbolic_zeros=True)

    @m.custom_vjp
    def g(x, y):
        return np_.sin(x) * y

    def g_bwd(res, ct):
        (x, px), (y, py) = res
        if type(ct) is SymbolicZero:
            return None, None
        return (factor * np_.cos(x) * ct * y if px else None,
                np_.sin(x) * ct if py else None)

    g.defvjp(lambda x, y: (g(x.value, y.value), ((x.value, x.perturbed),
                                                 (y.value, y.perturbed))),
             g_bwd, symbolic_zeros=True)
    return f, g


@pytest.mark.parametrize("backend", ["impl", "jax"])
def test_checkers_accept_rules_with_symbolic_zeros(backend):
    from properties import check_custom_jvp, check_custom_vjp
    m = impl if backend == "impl" else jax
    f, g = _symbolic_rules(m, m.numpy)
    args = (np.array([0.3, 1.1], np.float64), np.array([0.7, -0.4], np.float64))
    assert check_custom_jvp(f, *args, backend=backend, max_examples=2) == \
        {"custom_jvp_rule": "passed"}
    assert check_custom_vjp(g, *args, backend=backend, max_examples=2) == \
        {"custom_vjp_rule": "passed"}


@pytest.mark.parametrize("backend", ["impl", "jax"])
def test_checkers_catch_wrong_rules_with_symbolic_zeros(backend):
    from properties import check_custom_jvp, check_custom_vjp
    m = impl if backend == "impl" else jax
    f, g = _symbolic_rules(m, m.numpy, factor=2.)   # deliberately wrong d/dx
    args = (np.array([0.3, 1.1], np.float64), np.array([0.7, -0.4], np.float64))
    for check, fn in ((check_custom_jvp, f), (check_custom_vjp, g)):
        with pytest.raises(AssertionError):
            check(fn, *args, backend=backend, max_examples=0)


def test_public_names_of_custom_derivatives_match_jax():
    public = {n for n in dir(jax.custom_derivatives) if not n.startswith("_")}
    missing = sorted(n for n in public if not hasattr(impl.custom_derivatives, n))
    assert not missing, missing
