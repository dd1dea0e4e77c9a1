"""impl.random's gamma family, matrices and count distributions against jax.random.

multivariate_normal, orthogonal, generalized_normal, ball, gamma, loggamma, beta,
dirichlet, chisquare, t, f, poisson, binomial and multinomial must give JAX 0.10's
numbers bit for bit for the same key, under jit and under vmap (over split keys and
over parameters), and the same gradients as jax.grad where JAX differentiates (gamma
in `a` by implicit reparameterization, the distributions built on it, and
multivariate_normal in mean and cov). One float64 check compares gamma's derivative
in `a` with finite differences of the gamma CDF; bad input raises JAX's exception type;
two negative tests break random_gamma's batching and jvp rules and check that the
comparisons catch it. XLA spends ~1 s compiling each rejection loop (on each side), so
the default run compiles a handful; the nightly run (`-m slow`) has the full matrix.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.random as jr
import jax.scipy.special as jsp
import numpy as np
import pytest

import impl
import impl.random as ir
from impl.interpreters import ad, batching
from impl.primitives import prng
from helpers import assert_each, assert_same, keyed_draws

F32, F64 = np.float32, np.float64


def _cov(d):
    return np.array([[2., .5, .1], [.5, 1., .3], [.1, .3, .7]], d)


def _singular_cov(d):
    v = np.array([[1., 2., 0.], [0., 1., 1.]], d)
    return v.T @ v   # rank 2


# Each case is f(R, key, dtype) with R = impl.random or jax.random.
CASES = {
    "mvn_cholesky": lambda R, k, d: R.multivariate_normal(
        k, np.array([1., -1., 0.], d), _cov(d), (2,), d),
    "mvn_eigh_batched_cov": lambda R, k, d: R.multivariate_normal(
        k, np.zeros(3, d), np.stack([_cov(d), _singular_cov(d)]), method="eigh"),
    "mvn_svd": lambda R, k, d: R.multivariate_normal(
        k, np.zeros((2, 3), d), _singular_cov(d), method="svd"),
    "orthogonal": lambda R, k, d: R.orthogonal(k, 3, (2,), d),
    "orthogonal_wide": lambda R, k, d: R.orthogonal(k, 2, (), d, m=4),
    "generalized_normal": lambda R, k, d: R.generalized_normal(k, 1.5, (5,), d),
    "ball": lambda R, k, d: R.ball(k, 3, 2, (2,), d),
    "ball_p1": lambda R, k, d: R.ball(k, 2, 1., (), d),
    "gamma": lambda R, k, d: R.gamma(k, np.array([0.2, 1., 3.5, 40.], d), dtype=d),
    "gamma_shape": lambda R, k, d: R.gamma(k, np.array([0.5, 2.], d), (3, 2), d),
    "loggamma": lambda R, k, d: R.loggamma(k, np.array([0.01, 0.5, 5.], d), dtype=d),
    "beta": lambda R, k, d: R.beta(k, np.array([0.5, 2., 7.], d), d(1.5), dtype=d),
    "dirichlet": lambda R, k, d: R.dirichlet(k, np.array([0.3, 1., 4.], d), (2,), d),
    "chisquare": lambda R, k, d: R.chisquare(k, np.array([1., 3., 9.], d), dtype=d),
    "t": lambda R, k, d: R.t(k, d(4.), (4,), d),
    "f": lambda R, k, d: R.f(k, np.array([2., 5.], d), d(7.), dtype=d),
    "poisson": lambda R, k, d: R.poisson(k, np.array([0., 0.5, 3., 12., 200.], d)),
    "poisson_shape_int64": lambda R, k, d: R.poisson(k, 4., (2, 3), np.int64),
    "binomial": lambda R, k, d: R.binomial(
        k, np.array([5., 20., 100., 1000.], d), np.array([0.3, 0.6, 0.2, 0.9], d), dtype=d),
    "binomial_edge": lambda R, k, d: R.binomial(
        k, np.array([-1., np.inf, 4., 7.], d), np.array([0.5, 0.5, np.nan, 1.], d), dtype=d),
    "multinomial": lambda R, k, d: R.multinomial(
        k, d(10.), np.array([[.2, .3, .5], [.1, .0, .9]], d), dtype=d),
}


def all_draws(R, dtype, names):
    """Several cases in one function, each with its own key (one split)."""
    return keyed_draws(CASES, R, dtype, names)


def assert_same_draws(got, want):
    assert_each(assert_same, got, want, what="case ")


# XLA spends ~1 s compiling each rejection loop (on each side), so the default run
# compiles a few loops only: the matrices and the Lp ball (generalized_normal's gamma
# draw), and below loggamma under nested vmap, gamma under vmap over `a` with one key,
# and gradients of gamma and multivariate_normal. Poisson, binomial and multinomial
# (two loops each) are nightly. The
# nightly run (`-m slow`) has every case, both dtypes, seeds and key kinds.
FAST = ("mvn_cholesky", "mvn_eigh_batched_cov", "orthogonal_wide", "ball")


@pytest.mark.parametrize("dtype,names,seeds", [
    (F32, FAST, (1701,)),
    pytest.param(F32, tuple(CASES), (0, 1701), marks=pytest.mark.slow),
    pytest.param(F64, tuple(CASES), (0, 1701), marks=pytest.mark.slow)],
    ids=["float32", "float32-all", "float64-all"])
def test_distributions_under_jit(dtype, names, seeds):
    for seed in seeds:
        k, jk = ir.key(seed), jr.key(seed)
        assert_same_draws(impl.jit(all_draws(ir, dtype, names))(k),
                          jax.jit(all_draws(jr, dtype, names))(jk))


@pytest.mark.slow
@pytest.mark.parametrize("name", tuple(CASES))
def test_eagerly_with_typed_raw_and_jax_keys(name):
    f = CASES[name]
    k, jk = ir.key(7), jr.key(7)
    want = f(jr, jk, F32)
    assert_same(f(ir, k, F32), want)
    assert_same(f(ir, jk, F32), want)
    assert_same(f(ir, ir.PRNGKey(7), F32), f(jr, jr.PRNGKey(7), F32))


@pytest.mark.slow
def test_jit_of_vmap_over_split_keys():
    names = tuple(CASES)
    keys, jkeys = ir.split(ir.key(3), 3), jr.split(jr.key(3), 3)
    assert_same_draws(impl.jit(impl.vmap(all_draws(ir, F32, names)))(keys),
                      jax.jit(jax.vmap(all_draws(jr, F32, names)))(jkeys))


def test_loggamma_under_nested_vmap_over_split_keys():
    """Eager vmap of vmap over raw keys: the batching rule of random_gamma runs twice
    (float64)."""
    keys, jkeys = ir.split(ir.PRNGKey(4), (2, 3)), jr.split(jr.PRNGKey(4), (2, 3))
    f = CASES["loggamma"]
    assert_same(impl.vmap(impl.vmap(lambda k: f(ir, k, F64)))(keys),
                jax.vmap(jax.vmap(lambda k: f(jr, k, F64)))(jkeys))


# Batched parameters, with the key unbatched (JAX's gamma then gives every batch
# element the same key, so the draws differ from one unbatched draw of the stack) or
# batched too.
def _param_draws(R, names):
    def draws(key, a, lam, p, mean):
        k = R.split(key, 6)
        every = dict(
            poisson=lambda: R.poisson(k[0], lam, (2,)),
            mvn=lambda: R.multivariate_normal(k[1], mean, np.eye(2) * 2.),
            gamma=lambda: R.gamma(k[2], a, (2,), F64),
            loggamma=lambda: R.loggamma(k[3], a, dtype=F32),
            beta=lambda: R.beta(k[4], a, 2., dtype=F64),
            binomial=lambda: R.binomial(k[5], 30., p, (2,)),
        )
        return {n: every[n]() for n in names}
    return draws


PARAMS = (np.array([0.4, 3.]), np.array([2., 30.], F32), np.array([0.2, 0.7]),
          np.array([[1., 2.], [3., 4.]]))
ALL_PARAM_DRAWS = ("poisson", "mvn", "gamma", "loggamma", "beta", "binomial")


@pytest.mark.parametrize("key_axis,names", [
    (None, ("gamma", "mvn")),
    pytest.param(None, ALL_PARAM_DRAWS, marks=pytest.mark.slow),
    pytest.param(0, ALL_PARAM_DRAWS, marks=pytest.mark.slow)],
    ids=["unbatched-key", "unbatched-key-all", "batched-key-all"])
def test_vmap_over_parameters(key_axis, names):
    if key_axis is None:
        k, jk = ir.key(5), jr.key(5)
    else:
        k, jk = ir.split(ir.key(5), 2), jr.split(jr.key(5), 2)
    in_axes = (key_axis, 0, 0, 0, 0)
    assert_same_draws(impl.jit(impl.vmap(_param_draws(ir, names), in_axes))(k, *PARAMS),
                      jax.jit(jax.vmap(_param_draws(jr, names), in_axes))(jk, *PARAMS))


# ------------------------------------------------------------------ gradients

def _grad_cases(R, key):
    k = R.split(key, 10)
    return {
        "gamma": lambda a: R.gamma(k[0], a).sum(),
        "mvn_cholesky_mean_cov": lambda a: R.multivariate_normal(
            k[8], a, a[:, None] * np.eye(3) + _cov(F64), (2,)).sum(),
        "mvn_eigh_cov": lambda a: R.multivariate_normal(
            k[9], np.zeros(3), a[:, None] * np.eye(3) + _cov(F64), method="eigh").sum(),
        "mvn_svd_cov": lambda a: R.multivariate_normal(
            k[9], np.zeros(3), a[:, None] * np.eye(3) + _cov(F64), method="svd").sum(),
        "loggamma": lambda a: R.loggamma(k[1], a).sum(),
        "beta": lambda a: R.beta(k[2], a, a[::-1] + 1.).sum(),
        "dirichlet": lambda a: (R.dirichlet(k[3], a) * np.arange(3.)).sum(),
        "chisquare": lambda a: R.chisquare(k[4], 2. * a).sum(),
        "t": lambda a: R.t(k[5], a + 2.).sum(),
        "f": lambda a: R.f(k[6], a + 1., a[::-1] + 3.).sum(),
        "generalized_normal": lambda a: R.generalized_normal(k[7], a[1] + 1., (3,)).sum(),
    }


A = np.array([0.6, 1.7, 3.2])
FAST_GRADS = ("mvn_cholesky_mean_cov",)


@pytest.mark.parametrize("wrap,names", [
    ("plain", FAST_GRADS),
    pytest.param("plain", None, marks=pytest.mark.slow),
    pytest.param("jit", None, marks=pytest.mark.slow)],
    ids=["plain", "plain-all", "jit-all"])
def test_grads_match_jax(wrap, names):
    got_cases, want_cases = _grad_cases(ir, ir.key(11)), _grad_cases(jr, jr.key(11))
    for name in names or got_cases:
        got_fn, want_fn = impl.grad(got_cases[name]), jax.grad(want_cases[name])
        if wrap == "jit":
            got_fn, want_fn = impl.jit(got_fn), jax.jit(want_fn)
        np.testing.assert_allclose(np.asarray(got_fn(A)), np.asarray(want_fn(A)),
                                   rtol=1e-10, atol=1e-12, err_msg=name)


def test_gamma_a_derivative_matches_jax_and_finite_differences():
    """d sample / d a by implicit reparameterization, against jax.grad and against
    -(dF/da) / f(sample) (F the gamma CDF, f its density), dF/da by float64 central
    differences (independent of random_gamma_grad)."""
    a = np.array([0.3, 1., 2.5, 8.])
    k, jk = ir.key(9), jr.key(9)
    sample, vjp = impl.vjp(lambda x: ir.gamma(k, x), a)
    want_sample, want_vjp = jax.vjp(lambda x: jr.gamma(jk, x), a)
    assert_same(sample, want_sample)
    cotangent = np.array([1., -2., 0.5, 3.])
    got = np.asarray(vjp(cotangent)[0])
    np.testing.assert_allclose(got, want_vjp(cotangent)[0], rtol=1e-12)
    # Each sample depends on its own a[i] alone: the vjp is the elementwise derivative
    # times the cotangent.
    _check_against_cdf(a, np.asarray(sample), got / cotangent)


def _check_gamma_derivative(a, key):
    sample, vjp = impl.vjp(lambda x: ir.gamma(key, x), a)
    _check_against_cdf(a, np.asarray(sample), np.asarray(vjp(np.ones_like(a))[0]))


def _check_against_cdf(a, sample, got):
    h = 1e-6
    dcdf_da = (np.asarray(jsp.gammainc(a + h, sample)) -
               np.asarray(jsp.gammainc(a - h, sample))) / (2 * h)
    pdf = np.exp((a - 1) * np.log(sample) - sample - np.asarray(jsp.gammaln(a)))
    np.testing.assert_allclose(got, -dcdf_da / pdf, rtol=1e-5)


@pytest.mark.slow
def test_grad_of_gamma_under_vmap_over_keys():
    def per_key(R):
        return lambda k, a: R.gamma(k, a, (3,), F32).sum()
    a = np.array([0.7, 2.5, 5.], F32)
    got = impl.vmap(impl.grad(per_key(ir), 1), (0, None))(ir.split(ir.key(2), 4), a)
    want = jax.vmap(jax.grad(per_key(jr), 1), (0, None))(jr.split(jr.key(2), 4), a)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


@pytest.mark.slow   # the fast run reaches random_gamma_grad through gamma's vjp
def test_random_gamma_grad_under_vmap_matches_jax():
    a = np.array([0.2, 1., 4.], F32)
    x = np.array([0.1, 1.3, 2.], F32)
    assert_same(impl.vmap(impl.lax.random_gamma_grad, (0, None))(a, x[1]),
                jax.lax.random_gamma_grad(a, np.full(3, x[1])))


@pytest.mark.slow   # every case compiles its rejection loops, seconds each
@pytest.mark.parametrize("backend", ["impl", "jax"])
@pytest.mark.parametrize("family", ["prng_gamma", "prng_poisson", "prng_binomial"])
def test_prng_law_holds_on_the_sampler_cases(family, backend):
    """The PRNG cases that only a mutation focus on a sampler family draws (gamma, its
    derivative, poisson, binomial mapped over split keys) pass prng_vmap_matches_loop on
    impl and on JAX, and hold the family's samplers."""
    from hypothesis import HealthCheck, given, settings

    from properties import cases
    from properties.backends import load_backend
    from properties.laws import LAWS
    from strategies.prng import SAMPLER_FAMILIES
    law = next(law for law in LAWS if law.name == "prng_vmap_matches_loop")
    loaded = load_backend(backend)
    with cases.focus(families=(family,)):
        strategy = law.cases()

    @settings(max_examples=2, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def holds(case):
        assert {s[0] for s in case.steps} & set(SAMPLER_FAMILIES[family]), case
        law(loaded, case)
    holds()


# ------------------------------------------------------------------- errors

ERRORS = [
    ("gamma_int_dtype", lambda R, k: R.gamma(k, 1., dtype=np.int32)),
    ("loggamma_int_dtype", lambda R, k: R.loggamma(k, 1., dtype=np.int32)),
    ("gamma_shape", lambda R, k: R.gamma(k, np.ones(3), (2,))),
    ("beta_shape", lambda R, k: R.beta(k, np.ones(3), np.ones(2))),
    ("beta_unsafe_cast", lambda R, k: R.beta(k, np.ones(2), 1., dtype=np.float32)),
    ("t_int_dtype", lambda R, k: R.t(k, 3., dtype=np.int32)),
    ("dirichlet_scalar", lambda R, k: R.dirichlet(k, 1.)),
    ("dirichlet_shape", lambda R, k: R.dirichlet(k, np.ones((2, 3)), (3,))),
    ("mvn_method", lambda R, k: R.multivariate_normal(k, np.zeros(2), np.eye(2),
                                                        method="qr")),
    ("mvn_cov_shape", lambda R, k: R.multivariate_normal(k, np.zeros(2), np.eye(3))),
    ("mvn_scalar_mean", lambda R, k: R.multivariate_normal(k, 0., np.eye(2))),
    ("mvn_int_dtype", lambda R, k: R.multivariate_normal(k, np.zeros(2), np.eye(2),
                                                         dtype=np.int32)),
    ("orthogonal_int_dtype", lambda R, k: R.orthogonal(k, 2, dtype=np.int32)),
    ("binomial_int_dtype", lambda R, k: R.binomial(k, 3., 0.5, dtype=np.int32)),
    ("binomial_shape", lambda R, k: R.binomial(k, np.ones(3), 0.5, (2,))),
    ("binomial_list", lambda R, k: R.binomial(k, [3.], 0.5)),
    ("batched_key", lambda R, k: R.gamma(R.split(k), 1.)),
    ("poisson_float_dtype", lambda R, k: R.poisson(k, 1., dtype=np.float32)),
    ("poisson_list", lambda R, k: R.poisson(k, [1.])),
    ("poisson_shape", lambda R, k: R.poisson(k, np.ones(3), (2,))),
    ("multinomial_list", lambda R, k: R.multinomial(k, 3., [0.5, 0.5])),
    ("multinomial_shape", lambda R, k: R.multinomial(k, 3., np.ones(2) / 2, shape=(3,))),
    ("orthogonal_float_n", lambda R, k: R.orthogonal(k, 2.5)),
    ("ball_float_d", lambda R, k: R.ball(k, 2.5)),
]


@pytest.mark.parametrize("name,f", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_like_jax(name, f):
    with pytest.raises(Exception) as want:
        f(jr, jr.key(0))
    with pytest.raises(want.type):
        f(ir, ir.key(0))


# ---------------------------------------------------------- negative tests

def test_comparison_catches_a_batching_rule_that_folds_the_batch_into_the_draw(
        monkeypatch):
    """A plausible wrong random_gamma batching rule: with one key and batched `a`, draw
    the whole stack from the one key (instead of giving each batch element that key, as
    JAX does). The vmap-over-parameters comparison must fail."""
    original = batching.batching_rules[prng.random_gamma_p]

    def fold_batch(axis_data, vals, dims, **params):
        (keys, a), (key_dim, a_dim) = vals, dims
        if key_dim is None:
            return prng.random_gamma_p.bind(keys, batching.moveaxis(a, a_dim, 0),
                                            **params), 0
        return original(axis_data, vals, dims, **params)

    monkeypatch.setitem(batching.batching_rules, prng.random_gamma_p, fold_batch)
    a = np.array([[0.5, 1.5], [2.5, 3.5], [4.5, 5.5]], F32)   # a shape no other test uses
    with pytest.raises(AssertionError):
        assert_same(impl.vmap(lambda x: ir.gamma(ir.key(1), x, dtype=F32))(a),
                    jax.vmap(lambda x: jr.gamma(jr.key(1), x, dtype=F32))(a))


def test_finite_differences_catch_a_scaled_gamma_jvp(monkeypatch):
    """random_gamma's jvp scaled by 1.5: the finite-difference check must fail."""
    original = ad.jvp_rules[prng.random_gamma_p]

    def scaled(primals, tangents, **params):
        out, t = original(primals, tangents, **params)
        return out, impl.lax.mul(t, np.float64(1.5))

    monkeypatch.setitem(ad.jvp_rules, prng.random_gamma_p, scaled)
    with pytest.raises(AssertionError):
        _check_gamma_derivative(np.array([0.4, 1.2, 6.]), ir.key(10))
