"""Custom rules inside control flow and checkpoint: custom_jvp, custom_vjp (symbolic
zeros, nondiff_argnums, optimize_remat), custom_gradient, closure_convert, linear_call
and custom_vmap inside scan, cond, while/fori and checkpoint bodies, under jvp, grad,
vmap and jit, against JAX.

The rules are deliberately not the functions' true derivatives (or batchings), so a
transformation that bypassed a rule inside a body and differentiated (or batched) the
function itself would give a different number. Where JAX cannot run a combination
(vmap of linear_call, forward mode through custom_vjp) the reference is a loop of JAX
calls over the examples, or a custom_jvp twin of the custom_vjp function.
"""
from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

import impl
from _compare import IMPL, JAX, assert_trees_close, check, x32

XS = x32(4, 3)
A = x32(3, seed=1)
B_ = x32(3, seed=2)
POS, NEG = np.float32(1.), np.float32(-1.)


# --------------------------------------------------------------- the custom functions

def wrong_jvp(B):
    """sin(x) * 2 with a tangent rule of 3 cos(x)."""
    @B.api.custom_jvp
    def f(x):
        return B.np.sin(x) * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 3.0 * B.np.cos(x) * t
    return f


def wrong_vjp(B):
    """x * tanh(y) with cotangents scaled by 2 and 1/2."""
    @B.api.custom_vjp
    def g(x, y):
        return x * B.np.tanh(y)

    def fwd(x, y):
        return g(x, y), (x, B.np.tanh(y))

    def bwd(res, ct):
        x, ty = res
        return 2.0 * ct * ty, 0.5 * ct * x
    g.defvjp(fwd, bwd)
    return g


def wrong_vmap(B, batched_as=None):
    """sin, batched as cos (or as `batched_as`)."""
    @B.api.custom_batching.custom_vmap
    def h(x):
        return B.np.sin(x)

    @h.def_vmap
    def rule(axis_size, in_batched, x):
        return (batched_as or B.np.cos)(x), in_batched[0]
    return h


def wrong_vmap_with_jvp(B):
    """custom_jvp around custom_vmap: differentiable, tangent scaled by 5."""
    h = wrong_vmap(B)

    @B.api.custom_jvp
    def k(x):
        return h(x)

    @k.defjvp
    def k_jvp(primals, tangents):
        return k(primals[0]), 5.0 * tangents[0]
    return k


def vjp_over_vmap(B):
    """custom_vjp around custom_vmap (sin, batched as sin + 1)."""
    h = wrong_vmap(B, batched_as=lambda x: B.np.sin(x) + 1.0)

    @B.api.custom_vjp
    def g(x):
        return h(x)
    g.defvjp(lambda x: (h(x), B.np.cos(x)), lambda c, t: (2.0 * c * t,))
    return g


def symbolic_zero_vjp(B):
    """x * y whose fwd records which inputs are perturbed in the cotangent."""
    f = B.api.custom_vjp(lambda x, y: x * y)

    def fwd(x, y):
        flags = (1.0 if x.perturbed else 0.0) + (10.0 if y.perturbed else 0.0)
        return f(x.value, y.value), (y.value, flags)

    def bwd(res, ct):
        y, flags = res
        return ct * y * (1.0 + flags), None
    f.defvjp(fwd, bwd, symbolic_zeros=True)
    return f


def symbolic_zero_jvp(B):
    """x * y whose rule scales y's tangent by 3 and skips symbolic zeros."""
    @B.api.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        out = x * y
        tout = 0.0 * out
        if type(tx) is not B.api.custom_derivatives.SymbolicZero:
            tout = tout + tx * y
        if type(ty) is not B.api.custom_derivatives.SymbolicZero:
            tout = tout + 3.0 * ty * x
        return out, tout
    f.defjvp(f_jvp, symbolic_zeros=True)
    return f


def remat_vjp(B):
    @B.api.custom_vjp
    def f(x, y):
        return B.np.sin(x) * y

    def fwd(x, y):
        return f(x, y), (B.np.cos(x), B.np.sin(x), y)

    def bwd(res, ct):
        c, s, y = res
        return 1.5 * c * y * ct, s * ct
    f.defvjp(fwd, bwd, optimize_remat=True)
    return f


# ------------------------------------------- custom rules in bodies, against JAX

def _scan(B, body):
    return lambda xs, c: B.lax.scan(body, c, xs)


PROGRAMS = {
    # name: (program over B, arguments, options of `check`)
    "custom_jvp/scan": (lambda B: (lambda f: _scan(B, lambda c, x: (c + f(c * x), f(c) * x)))(
        wrong_jvp(B)), (XS, A), {}),
    "custom_jvp/cond": (lambda B: lambda p, x: B.lax.cond(p > 0, wrong_jvp(B), B.np.cos, x),
                        (POS, A), {}),
    "custom_jvp/while": (lambda B: (lambda f: lambda x: B.lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, f(c[1])), (0, x))[1])(wrong_jvp(B)),
        (A,), dict(grad=False)),
    "custom_jvp/fori": (lambda B: (lambda f: lambda x: B.lax.fori_loop(
        0, 3, lambda i, v: f(v) + i, x))(wrong_jvp(B)), (A,), {}),
    "custom_jvp/checkpoint": (lambda B: (lambda f: B.api.checkpoint(
        lambda x: f(f(x)) * x))(wrong_jvp(B)), (A,), {}),
    "custom_vjp/scan": (lambda B: (lambda g: _scan(B, lambda c, x: (g(c, x) + 0.5, g(x, c))))(
        wrong_vjp(B)), (XS, A), dict(jvp=False)),
    "custom_vjp/cond": (lambda B: lambda p, x, y: B.lax.cond(
        p > 0, wrong_vjp(B), lambda x, y: x * y, x, y), (POS, A, B_), dict(jvp=False)),
    "custom_vjp/checkpoint": (lambda B: (lambda g: B.api.checkpoint(
        lambda x, y: g(x, y) * y))(wrong_vjp(B)), (A, B_), dict(jvp=False)),
    "custom_vjp/checkpoint_policy": (lambda B: (lambda g: B.api.checkpoint(
        lambda x, y: g(B.np.sin(x), y) * y,
        policy=B.api.checkpoint_policies.dots_with_no_batch_dims_saveable))(wrong_vjp(B)),
        (A, B_), dict(jvp=False)),
    "custom_gradient/scan": (lambda B: (lambda cg: lambda xs: B.lax.scan(
        lambda c, x: (c * cg(x), cg(c)), 1.0 + 0.0 * xs[0], xs))(
        B.api.custom_gradient(lambda x: (B.np.sin(x), lambda g: (7.0 * g,)))),
        (XS,), dict(jvp=False)),
    "custom_vmap/scan": (lambda B: (lambda h: lambda xs: B.lax.scan(
        lambda c, x: (c + h(x), h(x) * c), 0.0 * xs[0], xs))(wrong_vmap(B)),
        (XS,), dict(jvp=False, grad=False)),
    "custom_vmap_jvp/scan": (lambda B: (lambda k: lambda xs: B.lax.scan(
        lambda c, x: (c + k(x), k(x) * c), 0.0 * xs[0], xs))(wrong_vmap_with_jvp(B)),
        (XS,), {}),
    "custom_vmap_jvp/cond": (lambda B: lambda p, x: B.lax.cond(
        p > 0, wrong_vmap_with_jvp(B), B.np.cos, x), (NEG, A), {}),
    "custom_vjp_vmap/scan": (lambda B: (lambda g: lambda xs: B.lax.scan(
        lambda c, x: (c + g(x * c), g(c)), xs[0], xs))(vjp_over_vmap(B)),
        (XS,), dict(jvp=False)),
    "custom_vjp_vmap/checkpoint": (lambda B: (lambda g: B.api.checkpoint(
        lambda x: g(x) * g(2.0 * x)))(vjp_over_vmap(B)), (A,), dict(jvp=False)),
    "symbolic_zeros_vjp/scan": (lambda B: (lambda f: _scan(
        B, lambda c, x: (f(c, x), f(x, B.lax.stop_gradient(c)))))(symbolic_zero_vjp(B)),
        (XS, A), dict(jvp=False)),
    "symbolic_zeros_vjp/checkpoint": (lambda B: (lambda f: B.api.checkpoint(
        lambda x, y: f(x, y) + f(y, 2.0)))(symbolic_zero_vjp(B)), (A, B_), dict(jvp=False)),
    "symbolic_zeros_jvp/scan": (lambda B: (lambda f: _scan(
        B, lambda c, x: (f(c, x), f(x, 2.0))))(symbolic_zero_jvp(B)), (XS, A), {}),
    "symbolic_zeros_jvp/cond": (lambda B: (lambda f: lambda p, x, y: B.lax.cond(
        p > 0, lambda x, y: f(x, 2.0), f, x, y))(symbolic_zero_jvp(B)), (POS, A, B_), {}),
    "optimize_remat/checkpoint": (lambda B: (lambda f: B.api.checkpoint(
        lambda x, y: f(x, y) * f(y, x)))(remat_vjp(B)), (A, B_), dict(jvp=False)),
    "optimize_remat/scan": (lambda B: (lambda f: _scan(B, lambda c, x: (f(x, c), f(c, x))))(
        remat_vjp(B)), (XS, A), dict(jvp=False)),
    "optimize_remat/cond": (lambda B: lambda p, x, y: B.lax.cond(
        p > 0, remat_vjp(B), lambda x, y: x + y, x, y), (POS, A, B_), dict(jvp=False)),
    "closure_convert/scan": (lambda B: _scan(B, lambda c, x: (lambda fc, consts: (
        c + fc(c, *consts), fc(x, *consts)))(*B.api.closure_convert(
            lambda y: y * c + B.np.sin(x), c))), (XS, A), {}),
    "closure_convert/cond": (lambda B: lambda p, x, y: B.lax.cond(
        p > 0, lambda x, y: (lambda fc, consts: fc(x, *consts))(
            *B.api.closure_convert(lambda z: z * y + x, x)),
        lambda x, y: x - y, x, y), (POS, A, XS[0]), {}),
}


def _nondiff_vjp_scan(B):
    @functools.partial(B.api.custom_vjp, nondiff_argnums=(0,))
    def f(k, x):
        return x ** k
    f.defvjp(lambda k, x: (x ** k, x), lambda k, x, g: (2.0 * k * g * x,))
    return _scan(B, lambda c, x: (f(2, c) + x, f(3, x)))


def _nondiff_jvp_while(B):
    @functools.partial(B.api.custom_jvp, nondiff_argnums=(0,))
    def f(k, x):
        return x * k
    f.defjvp(lambda k, p, t: (f(k, p[0]), t[0] * (k + 1.0)))
    return lambda x: B.lax.while_loop(lambda c: c[0] < 3,
                                      lambda c: (c[0] + 1, f(2.0, c[1])), (0, x))[1]


PROGRAMS["nondiff_argnums_vjp/scan"] = (_nondiff_vjp_scan, (XS, A), dict(jvp=False))
PROGRAMS["nondiff_argnums_jvp/while"] = (_nondiff_jvp_while, (A,), dict(grad=False))


@pytest.mark.parametrize("name", PROGRAMS, ids=list(PROGRAMS))
def test_custom_rule_in_body(name):
    """value, jvp, grad and vmap (each argument batched, and all) under jit, as JAX."""
    prog, args, options = PROGRAMS[name]
    check(prog, *args, eager=False, **options)


def test_custom_rule_in_body_negative():
    """The comparison catches a body that ignores the rule: a custom_jvp whose rule is
    replaced by the function's true derivative gives another jvp inside scan."""
    def true_jvp(B):
        if B is JAX:
            return PROGRAMS["custom_jvp/scan"][0](B)
        f = lambda x: impl.numpy.sin(x) * 2.0  # noqa: E731 - no rule at all
        return _scan(B, lambda c, x: (c + f(c * x), f(c) * x))
    with pytest.raises(AssertionError):
        check(true_jvp, XS, A, eager=False, grad=False, vmap=False)


# ------------------------------------------------ forward mode through custom_vjp

def _vjp_version(B):
    @B.api.custom_vjp
    def f(x, y):
        return x * B.np.sin(y)
    f.defvjp(lambda x, y: (f(x, y), (x, y)),
             lambda r, g: (2.0 * g * B.np.sin(r[1]), g * r[0] * B.np.cos(r[1])))
    return f


def _jvp_twin(B):
    """The custom_jvp whose rule is the transpose of _vjp_version's bwd."""
    @B.api.custom_jvp
    def f(x, y):
        return x * B.np.sin(y)
    f.defjvp(lambda p, t: (f(*p), 2.0 * t[0] * B.np.sin(p[1])
                           + t[1] * p[0] * B.np.cos(p[1])))
    return f


def _scan_both_ways(B, f):
    return _scan(B, lambda c, x: (f(c, x), f(x, c)))


def test_jvp_of_custom_vjp_in_scan():
    """JAX refuses forward mode through custom_vjp; impl's jvp is the transpose of bwd.
    The reference is JAX's scan over the custom_jvp twin."""
    tangents = (0.5 * XS, A + 1.0)
    got = impl.jit(lambda a, b, ta, tb: impl.jvp(_scan_both_ways(IMPL, _vjp_version(IMPL)),
                                                 (a, b), (ta, tb)))(XS, A, *tangents)
    want = jax.jvp(_scan_both_ways(JAX, _jvp_twin(JAX)), (XS, A), tangents)
    assert_trees_close(got, want)
    stacked = (np.stack([XS, XS + 1]), np.stack([A, 2 * A]))
    got = impl.vmap(lambda a, b: impl.jvp(_scan_both_ways(IMPL, _vjp_version(IMPL)),
                                          (a, b), (a, b)))(*stacked)
    want = jax.vmap(lambda a, b: jax.jvp(_scan_both_ways(JAX, _jvp_twin(JAX)),
                                         (a, b), (a, b)))(*stacked)
    assert_trees_close(got, want)


# ------------------------------------------------------ linear_call in control flow
# JAX differentiates linear_call with respect to its linear operands only (its jvp
# asserts the residuals' tangents are zero) and cannot vmap it.

def _lc_mul(B):
    """r * x, linear in x; its transpose is written separately."""
    return lambda r, x: B.api.custom_derivatives.linear_call(
        lambda r, x: r * x, lambda r, t: r * t, r, x)


def _lc_scan(B):
    lc = _lc_mul(B)
    return lambda rs, c: B.lax.scan(lambda c, r: (lc(r, c) + c, 2.0 * lc(r, c)), c, rs)


def _lc_cond(B):
    lc = _lc_mul(B)
    return lambda p, r, x: B.lax.cond(p > 0, lambda x: lc(r, x), lambda x: 3.0 * x, x)


def _lc_fori(B):
    lc = _lc_mul(B)
    return lambda r, x: B.lax.fori_loop(0, 3, lambda i, v: lc(r, v), x)


def _lc_checkpoint(B):
    lc = _lc_mul(B)
    return lambda r, x: B.api.checkpoint(lambda x: 2.0 * lc(B.np.sin(r), x))(x)


LINEAR_CASES = {  # name: (program, residual arguments, linear argument, transposable)
    "scan": (_lc_scan, (XS,), A, True),
    "cond_true": (_lc_cond, (POS, XS[0]), A, True),
    "cond_false": (_lc_cond, (NEG, XS[0]), A, True),
    "fori": (_lc_fori, (XS[0],), A, False),
    "checkpoint": (_lc_checkpoint, (XS[0],), A, True),
}


def _linear_suite(B, case):
    prog, res, x, transposable = LINEAR_CASES[case]
    f = prog(B)
    g = lambda x: f(*res, x)  # noqa: E731
    leaves = lambda t: jax.tree_util.tree_leaves(t)  # noqa: E731
    loss = lambda x: sum(B.np.sum((i + 1.5) * y) for i, y in enumerate(leaves(g(x))))  # noqa: E731
    out = {"value": f(*res, x), "jvp": B.api.jvp(g, (x,), (B_,)),
           "grad": B.api.grad(loss)(x), "jit_grad": B.api.jit(B.api.grad(loss))(x)}
    if transposable:
        out["transpose"] = B.api.linear_transpose(g, x)(g(x))
    return out


@pytest.mark.parametrize("case", LINEAR_CASES, ids=list(LINEAR_CASES))
def test_linear_call_in_body(case):
    assert_trees_close(_linear_suite(IMPL, case), _linear_suite(JAX, case))


def _stack_trees(trees):
    return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *trees)


RS, CS = np.stack([XS, 2 * XS, XS - 1]), np.stack([A, A + 1, -A])
PS = np.array([1., -1., 2.], np.float32)
LINEAR_VMAP_CASES = {
    # name: (impl program, JAX programs per example)
    "scan_both_batched": (lambda: impl.vmap(_lc_scan(IMPL))(RS, CS),
                          [lambda r=r, c=c: _lc_scan(JAX)(r, c) for r, c in zip(RS, CS)]),
    "scan_residuals_batched": (lambda: impl.vmap(_lc_scan(IMPL), (0, None))(RS, A),
                               [lambda r=r: _lc_scan(JAX)(r, A) for r in RS]),
    "scan_linear_batched": (lambda: impl.vmap(_lc_scan(IMPL), (None, 0))(XS, CS),
                            [lambda c=c: _lc_scan(JAX)(XS, c) for c in CS]),
    "grad_scan": (
        lambda: impl.vmap(impl.grad(lambda r, c: impl.numpy.sum(_lc_scan(IMPL)(r, c)[1]),
                                    1))(RS, CS),
        [lambda r=r, c=c: jax.grad(lambda r, c: jax.numpy.sum(_lc_scan(JAX)(r, c)[1]), 1)(r, c)
         for r, c in zip(RS, CS)]),
    "jit_cond_batched_predicate": (
        lambda: impl.jit(impl.vmap(_lc_cond(IMPL)))(PS, RS[:, 0], CS),
        [lambda p=p, r=r, c=c: _lc_cond(JAX)(p, r, c) for p, r, c in zip(PS, RS[:, 0], CS)]),
    "grad_of_vmap_cond": (
        lambda: impl.grad(lambda c: impl.numpy.sum(
            impl.vmap(_lc_cond(IMPL))(PS, RS[:, 0], c) ** 2))(CS),
        [lambda p=p, r=r, c=c: jax.grad(lambda c: jax.numpy.sum(_lc_cond(JAX)(p, r, c) ** 2))(c)
         for p, r, c in zip(PS, RS[:, 0], CS)]),
}


@pytest.mark.parametrize("case", LINEAR_VMAP_CASES, ids=list(LINEAR_VMAP_CASES))
def test_linear_call_in_body_under_vmap(case):
    """JAX cannot vmap linear_call: the reference is a loop of JAX calls."""
    batched, per_example = LINEAR_VMAP_CASES[case]
    assert_trees_close(batched(), _stack_trees([f() for f in per_example]))


# ---------------------------------------------------- optimize_remat in bodies
# With optimize_remat, a custom_vjp whose residuals nothing reads runs its primal
# function instead of fwd. Here fwd's primal output is deliberately 10 times f's, so
# the numbers show which one ran; JAX's dead-code removal reaches into the bodies of
# control flow and checkpoint under jit, and impl's must as well.

def _fwd_shows(B):
    @B.api.custom_vjp
    def f(x):
        return B.np.sin(x)
    f.defvjp(lambda x: (10. * B.np.sin(x), (B.np.cos(x),)), lambda r, g: (r[0] * g,),
             optimize_remat=True)
    return f


REMAT_BODIES = {
    "checkpoint": lambda B, f: lambda x: B.api.checkpoint(lambda x: 2.0 * f(x))(x),
    "checkpoint_policy": lambda B, f: lambda x: B.api.checkpoint(
        lambda x: 2.0 * f(x), policy=B.api.checkpoint_policies.everything_saveable)(x),
    "scan": lambda B, f: lambda x: B.lax.scan(lambda c, _: (f(c), c), x, None, length=3),
    "cond": lambda B, f: lambda x: B.lax.cond(True, f, B.np.cos, x),
    "fori": lambda B, f: lambda x: B.lax.fori_loop(0, 2, lambda i, c: f(c), x),
    "while": lambda B, f: lambda x: B.lax.while_loop(
        lambda c: c[0] < 2, lambda c: (c[0] + 1, f(c[1])), (0, x))[1],
}


def _remat_suite(B, body, eager):
    api, w = B.api, REMAT_BODIES[body](B, _fwd_shows(B))
    out = {"jit_primal": api.jit(lambda x: api.vjp(w, x)[0])(A),
           "jit_value": api.jit(w)(A)}
    if body != "while":
        out["eager_primal"] = api.vjp(w, A)[0] if eager else None
        # the primal output of one vjp (residuals dead) is the cotangent of another
        out["jit_pullback"] = api.jit(lambda x: api.vjp(w, x)[1](api.vjp(w, x)[0]))(A)
    return out


@pytest.mark.parametrize("body", REMAT_BODIES, ids=list(REMAT_BODIES))
def test_optimize_remat_in_body_runs_what_jax_runs(body):
    # Eager vjp through checkpoint: JAX stages the known half and removes dead code
    # (f runs); impl evaluates the known half, computing the primal outputs of a call
    # whose residuals the policy does not save with f as well. Only a fwd that
    # disagrees with f can tell them apart.
    got, want = _remat_suite(IMPL, body, True), _remat_suite(JAX, body, True)
    if body == "while":
        # JAX's while_loop under vjp keeps the primal and tangent loops together, so
        # fwd runs; impl's known loop reads no residual, so f runs (as everywhere else)
        assert_trees_close(got["jit_primal"], want["jit_value"])
        np.testing.assert_allclose(want["jit_primal"], 10. * np.sin(10. * np.sin(A)),
                                   rtol=1e-4, atol=1e-5)
        got, want = got["jit_value"], want["jit_value"]
    assert_trees_close(got, want)


def _tan_with_sin_fwd(B, residual):
    """JAX's test_optimize_remat_gh21303: fwd's primal output (sin) deliberately not
    the function's (tan); `residual`: fwd saves its argument (which JAX forwards, so it
    is no output of remat_opt) or a value it computes."""
    @B.api.custom_vjp
    def f(x):
        return B.np.tan(x)
    f.defvjp(lambda x: (B.np.sin(x), (x if residual == "argument" else B.np.cos(x),)),
             lambda r, g: ((B.np.cos(r[0]) if residual == "argument" else r[0]) * g,),
             optimize_remat=True)
    return f


@pytest.mark.parametrize("residual", ["argument", "computed"])
def test_optimize_remat_primal_output_under_remat_is_the_function_s(residual):
    """Under checkpoint the residuals are recomputed, so the forward pass runs the
    function (tan), eagerly and under jit; without checkpoint, eagerly fwd (sin) runs,
    and under jit the primal function replaces it when no residual output is used (a
    residual that is fwd's argument is not one)."""
    def programs(B):
        api, f = B.api, _tan_with_sin_fwd(B, residual)
        remat = lambda x: api.remat(f)(x) ** 2  # noqa: E731
        plain = lambda x: f(x) ** 2  # noqa: E731
        return [api.value_and_grad(remat)(3.2), api.jit(api.value_and_grad(remat))(3.2),
                api.vjp(api.remat(f), 3.2)[0], api.value_and_grad(plain)(3.2),
                api.jit(api.value_and_grad(plain))(3.2)]

    with jax.numpy_dtype_promotion("strict"):
        got, want = programs(IMPL), programs(JAX)
    assert_trees_close(got, want)
    # independently of both: tan under checkpoint, eagerly
    np.testing.assert_allclose(got[0][0], np.tan(np.float32(3.2)) ** 2, rtol=1e-5)
    np.testing.assert_allclose(got[3][0], np.sin(np.float32(3.2)) ** 2, rtol=1e-5)


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="JAX bug: vmap of an optimize_remat custom_vjp applied to a "
                          "NumPy array inside jit fails with 'non-canonical constant'")
def test_jax_optimize_remat_vmap_of_numpy_constant_under_jit():
    """Minimal program; impl runs it (checked below against JAX on a jax array)."""
    f = _fwd_shows(JAX)
    X = np.ones((3, 2), np.float32)
    jax.jit(lambda: jax.vmap(f)(X))()


def test_optimize_remat_vmap_of_numpy_constant_under_jit():
    X = np.ones((3, 2), np.float32)
    f_i, f_j = _fwd_shows(IMPL), _fwd_shows(JAX)
    got = (impl.jit(lambda: impl.vmap(f_i)(X))(),
           impl.jit(lambda: impl.grad(lambda x: impl.vmap(f_i)(x).sum())(X))())
    Xj = jax.numpy.asarray(X)
    want = (jax.jit(lambda x: jax.vmap(f_j)(x))(Xj),
            jax.jit(jax.grad(lambda x: jax.vmap(f_j)(x).sum()))(Xj))
    assert_trees_close(got, want)


# ------------------------------------------------- dead code in bodies (structure)

def _eqn(closed, name):
    """The equation of primitive `name` in the program as it runs: make_jaxpr keeps
    unused equations (as JAX's does), dead-code removal then drops what they hold."""
    from impl.interpreters import partial_eval as pe
    (eqn,) = [e for e in pe.drop_unused_eqns(closed.jaxpr).eqns if e.primitive.name == name]
    return eqn


def _dead_scan(B):
    def body(c, _):
        a, b, dead = c
        return (a + b, b * 2.0, dead * 3.0), (a, dead)
    return lambda x: B.lax.scan(body, (x, x, x), None, length=3)[0][0]


def _dead_while(B):
    return lambda x: B.lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + c[2], c[2] * 2.0, c[3] * 3.0),
        (0, x, x, x))[1]


def _dead_cond(B):
    return lambda x: B.lax.cond(True, lambda x: (x, 2.0 * x), lambda x: (x, 3.0 * x), x)[1]


def test_dead_carries_and_outputs_are_dropped():
    """Only what a used output needs stays in a loop or branch: a carry that feeds a
    used carry stays (fixpoint), one that only feeds itself goes."""
    scan = _eqn(impl.make_jaxpr(_dead_scan(IMPL))(1.0), "scan")
    assert (scan.params["num_carry"], len(scan.outvars)) == (2, 2)
    loop = _eqn(impl.make_jaxpr(_dead_while(IMPL))(1.0), "while")
    assert len(loop.outvars) == 3           # the counter read by the condition stays
    cond = _eqn(impl.make_jaxpr(_dead_cond(IMPL))(1.0), "cond")
    assert [len(b.out_avals) for b in cond.params["branches"]] == [1, 1]
    for prog in (_dead_scan, _dead_while, _dead_cond):
        assert_trees_close(impl.jit(prog(IMPL))(np.float32(1.5)),
                           jax.jit(prog(JAX))(np.float32(1.5)))
