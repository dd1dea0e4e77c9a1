"""impl.random against jax.random: the same numbers, bit for bit, for the same key.

Values, dtypes, weak types and shapes must equal JAX's exactly, each mode against the
same mode in JAX (XLA may round a float differently when it folds a constant). XLA
spends ~0.2 s compiling each threefry hash (on each side), so the default run draws
many samplers in one program: every main sampler (CORE) under jit in float32 (and
those whose float arithmetic differs in float64), a subset under jit of vmap over split
keys, eagerly (typed, raw and jax.random keys), under vmap without jit, and nested
vmap. The nightly run (`-m slow`) adds the full matrix: every sampler in every mode and
dtype. Gradients through the parameters of draws are compared with jax.grad (and
float64 finite differences), also under vmap and jit. Keys (seeds, split, fold_in, key
data, key arrays), errors (exception types as JAX's), the threefry2x32 primitive (the
published known-answer vectors) and the lax operations random numbers build on are
tested too; two negative tests break a rule on purpose and check that the comparisons
catch it.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import impl
import impl.random as ir
from impl import lax as ilax
from impl.interpreters import batching
from impl.primitives import prng
from helpers import TOLERANCE, assert_each, assert_same, keyed_draws

F32, F64 = np.float32, np.float64
FLOATS = [F32, F64]
SEEDS = (0, 1701)


def keys_of(seed):
    return ir.key(seed), jr.key(seed)


# ------------------------------------------------------------------- the table
# Each case is f(R, key, dtype) with R = impl.random or jax.random.

def _logits(d):
    return np.log(np.array([[.1, .2, .7], [.5, .25, .25]], d))


# The main samplers, in variants that take different code paths; every
# one runs eagerly and under jit of vmap, in float32 and (where the float dtype
# matters) float64.
CORE = {
    "bits": lambda R, k, d: R.bits(k, (5,)),
    "bits_uint8": lambda R, k, d: R.bits(k, (2, 3), np.uint8),
    "uniform": lambda R, k, d: R.uniform(k, (5,), d, -2., 3.),
    "uniform_array_bounds": lambda R, k, d: R.uniform(
        k, (2, 3), d, np.zeros(3, d), np.full((2, 1), 4., d)),
    "normal": lambda R, k, d: R.normal(k, (2, 3), d),
    "truncated_normal": lambda R, k, d: R.truncated_normal(k, -0.5, 1.5, (4,), d),
    "truncated_normal_arrays": lambda R, k, d: R.truncated_normal(
        k, np.array([-1., 0.], d), np.array([2., 0.5], d), None, d),
    "bernoulli": lambda R, k, d: R.bernoulli(k, np.array([0.1, 0.5, 0.9], d)),
    "bernoulli_high": lambda R, k, d: R.bernoulli(k, d(0.3), (4,), mode="high"),
    "randint": lambda R, k, d: R.randint(k, (6,), -5, 17),
    "randint_uint8_full_range": lambda R, k, d: R.randint(k, (6,), 0, 256, np.uint8),
    "randint_int8": lambda R, k, d: R.randint(k, (6,), -100, 100, np.int8),
    "randint_int64_empty_ranges": lambda R, k, d: R.randint(
        k, (6,), np.array([-2 ** 40, 0, 3] * 2), np.array([2 ** 50, 0, 1] * 2), np.int64),
    "randint_arrays": lambda R, k, d: R.randint(
        k, (2, 3), np.array([0, 1, 2]), np.array([[5], [3]]), np.int32),
    "permutation_int": lambda R, k, d: R.permutation(k, 10),
    "permutation_axis1": lambda R, k, d: R.permutation(
        k, np.arange(12, dtype=d).reshape(3, 4), axis=1),
    "permutation_independent": lambda R, k, d: R.permutation(
        k, np.arange(12, dtype=d).reshape(3, 4), axis=1, independent=True),
    "choice": lambda R, k, d: R.choice(k, 7, (3,)),
    "choice_array_axis1": lambda R, k, d: R.choice(
        k, np.arange(12, dtype=d).reshape(3, 4), (2,), axis=1),
    "choice_no_replace": lambda R, k, d: R.choice(k, 7, (3,), replace=False),
    "choice_p": lambda R, k, d: R.choice(k, 5, (4,), p=np.array([.1, .2, .3, 0., .4], d)),
    "choice_p_no_replace": lambda R, k, d: R.choice(
        k, 5, (3,), replace=False, p=np.array([.1, .2, .3, 0., .4], d)),
    "categorical": lambda R, k, d: R.categorical(k, _logits(d)),
    "categorical_axis0_shape": lambda R, k, d: R.categorical(k, _logits(d), axis=0,
                                                             shape=(4, 3)),
    "categorical_no_replace": lambda R, k, d: R.categorical(
        k, np.zeros((2, 5), d), shape=(3, 2), replace=False),
    "gumbel": lambda R, k, d: R.gumbel(k, (4,), d),
    "gumbel_high": lambda R, k, d: R.gumbel(k, (4,), d, mode="high"),
    "gumbel_highest": lambda R, k, d: R.gumbel(k, (4,), d, mode="highest"),
    "exponential": lambda R, k, d: R.exponential(k, (4,), d),
    "laplace": lambda R, k, d: R.laplace(k, (4,), d),
    "logistic": lambda R, k, d: R.logistic(k, (4,), d),
}
# The other distributions impl.random has (and normal in other dtypes): float32 only.
EXTRA = {
    "normal_complex64": lambda R, k, d: R.normal(k, (3,), np.complex64),
    "normal_float16": lambda R, k, d: R.normal(k, (4,), np.float16),
    "cauchy": lambda R, k, d: R.cauchy(k, (4,), d),
    "pareto": lambda R, k, d: R.pareto(k, d(3.), (4,), d),
    "rayleigh": lambda R, k, d: R.rayleigh(k, d(2.), (4,), d),
    "wald": lambda R, k, d: R.wald(k, d(1.5), (4,), d),
    "lognormal": lambda R, k, d: R.lognormal(k, d(0.5), (4,), d),
    "triangular": lambda R, k, d: R.triangular(k, d(0.), d(1.), d(3.), (4,), d),
    "weibull_min": lambda R, k, d: R.weibull_min(k, d(2.), d(1.5), (4,), d),
    "geometric": lambda R, k, d: R.geometric(k, d(0.3), (4,)),
    "rademacher": lambda R, k, d: R.rademacher(k, (4,)),
    "maxwell": lambda R, k, d: R.maxwell(k, (4,), d),
    "double_sided_maxwell": lambda R, k, d: R.double_sided_maxwell(k, d(1.), d(2.), (4,), d),
}
CASES = {**CORE, **EXTRA}
# Cases whose numbers do not depend on the float dtype argument run once.
DTYPE_FREE = {"bits", "bits_uint8", "randint", "randint_uint8_full_range", "randint_int8",
              "randint_int64_empty_ranges", "randint_arrays", "permutation_int", "choice",
              "choice_no_replace"}
# In CI one or two variants of the main samplers, in float32; nightly also float64 for
# those whose float arithmetic differs (64 random bits per float), and every case.
FLOAT32_CASES = ("bits_uint8", "uniform_array_bounds", "normal", "truncated_normal_arrays",
                 "bernoulli", "bernoulli_high", "randint_int8", "randint_int64_empty_ranges",
                 "permutation_axis1", "choice_p", "choice_no_replace",
                 "categorical_axis0_shape", "categorical_no_replace", "gumbel_highest",
                 "exponential")
FLOAT64_CASES = ("uniform", "normal", "truncated_normal", "bernoulli_high", "gumbel_high",
                 "exponential")

# Compiling a program that hashes with threefry costs XLA ~0.2 s per draw, on each
# side, so the default tests put many draws into one program (`all_draws`); the full
# matrix (every case eagerly, with raw keys, under jit of vmap) is nightly (slow).


def all_draws(R, dtype, names):
    """Several cases in one function, each with its own key (one split)."""
    return keyed_draws(CASES, R, dtype, names)


def assert_same_draws(got, want):
    assert_each(assert_same, got, want, what="case ")


@pytest.mark.parametrize("dtype,names", [
    (F32, FLOAT32_CASES), pytest.param(F64, FLOAT64_CASES, marks=pytest.mark.slow),
    pytest.param(F32, tuple(CASES), marks=pytest.mark.slow),
    pytest.param(F64, tuple(n for n in CORE if n not in DTYPE_FREE), marks=pytest.mark.slow)],
    ids=["float32", "float64", "float32-all", "float64-all"])
def test_every_sampler_under_jit(dtype, names):
    k, jk = keys_of(SEEDS[1])
    assert_same_draws(impl.jit(all_draws(ir, dtype, names))(k),
                      jax.jit(all_draws(jr, dtype, names))(jk))


# Samplers with distinct code paths (float bits, erf_inv, integer modulus, sort,
# Gumbel-top-k, a split inside the body, two uniforms per draw).
SUBSET = ("normal", "randint", "permutation_axis1", "categorical")


def test_samplers_under_jit_of_vmap_over_split_keys():
    k, jk = keys_of(SEEDS[0])
    keys, jkeys = ir.split(k, 3), jr.split(jk, 3)
    assert_same_draws(impl.jit(impl.vmap(all_draws(ir, F32, SUBSET)))(keys),
                      jax.jit(jax.vmap(all_draws(jr, F32, SUBSET)))(jkeys))


EAGER = ("normal", "randint", "permutation_axis1", "categorical")


@pytest.mark.parametrize("name", EAGER)
def test_sampler_eagerly(name):
    """Eagerly (each sampler compiles its own jitted body) with typed keys of two
    seeds and a raw key (the same program); float64 where the dtype matters."""
    f = CASES[name]
    dtype = F32 if name in DTYPE_FREE else F64
    for seed in SEEDS:
        k, jk = keys_of(seed)
        assert_same(f(ir, k, dtype), f(jr, jk, dtype))
    assert_same(f(ir, ir.key_data(k), dtype), f(jr, jr.key_data(jk), dtype))
    assert_same(f(ir, jk, dtype), f(jr, jk, dtype))   # a key made by jax.random


@pytest.mark.parametrize("name", [pytest.param("normal", marks=pytest.mark.slow),
                                  "permutation_axis1"])
def test_sampler_eager_vmap(name):
    """vmap without jit: each sampler's own jitted body is batched and compiled."""
    f = CASES[name]
    k, jk = keys_of(SEEDS[0])
    assert_same(impl.vmap(lambda key: f(ir, key, F32))(ir.split(k, 3)),
                jax.vmap(lambda key: f(jr, key, F32))(jr.split(jk, 3)))


def test_nested_vmap():
    k, jk = keys_of(3)
    keys, jkeys = ir.split(k, (2, 3)), jr.split(jk, (2, 3))
    draw = CASES["uniform"]
    assert_same(impl.jit(impl.vmap(impl.vmap(lambda key: draw(ir, key, F32))))(keys),
                jax.jit(jax.vmap(jax.vmap(lambda key: draw(jr, key, F32))))(jkeys))
    # Raw key data mapped along axis 1 of its batch, then 0, without jit.
    raw, jraw = ir.key_data(keys), jr.key_data(jkeys)
    draw = CASES["bits"]
    assert_same(impl.vmap(impl.vmap(lambda key: draw(ir, key, F32)), in_axes=1)(raw),
                jax.vmap(jax.vmap(lambda key: draw(jr, key, F32)), in_axes=1)(jraw))


def test_default_dtypes_in_x32_mode():
    with jax.enable_x64(False):
        k, jk = keys_of(5)
        f = lambda R, key: (R.uniform(key, (3,)),  # noqa: E731
                            R.randint(key, (3,), 0, 9), R.bits(key, (2,)))
        assert_same(impl.jit(lambda key: f(ir, key))(k), jax.jit(lambda key: f(jr, key))(jk))


# The full matrix, nightly: every case eagerly for two seeds, with a raw key, and
# under jit of vmap over split keys, in float32 and float64.
RUNS = [(n, d) for n in CORE for d in FLOATS if not (n in DTYPE_FREE and d is F64)]
RUNS += [(n, F32) for n in EXTRA]


@pytest.mark.slow
@pytest.mark.parametrize("name,dtype", RUNS, ids=[f"{n}-{d.__name__}" for n, d in RUNS])
def test_sampler_matches_jax_in_every_mode(name, dtype):
    f = CASES[name]
    for seed in SEEDS:
        k, jk = keys_of(seed)
        assert_same(f(ir, k, dtype), f(jr, jk, dtype))
    assert_same(f(ir, ir.key_data(k), dtype), f(jr, jr.key_data(jk), dtype))
    keys, jkeys = ir.split(k, 3), jr.split(jk, 3)
    assert_same(impl.jit(impl.vmap(lambda key: f(ir, key, dtype)))(keys),
                jax.jit(jax.vmap(lambda key: f(jr, key, dtype)))(jkeys))
    assert_same(impl.vmap(lambda key: f(ir, key, dtype))(keys),
                jax.vmap(lambda key: f(jr, key, dtype))(jkeys))


# ------------------------------------------------------------------- gradients
# f(R, key, param) -> float array; the derivative flows through the parameter.

GRAD_CASES = {
    "reparameterised_normal": lambda R, k, p: p * R.normal(k, (3,), p.dtype) + p ** 2,
    "uniform_bounds": lambda R, k, p: R.uniform(k, (4,), p.dtype, -p, 2 * p),
    "truncated_normal_bounds": lambda R, k, p: R.truncated_normal(k, -p, p + 1, (4,), p.dtype),
    "exponential_scaled": lambda R, k, p: R.exponential(k, (3,), p.dtype) / p,
    "gumbel_shifted": lambda R, k, p: R.gumbel(k, (3,), p.dtype) + jnp.sin(p) if R is jr
    else R.gumbel(k, (3,), p.dtype) + impl.numpy.sin(p),
    "pareto": lambda R, k, p: R.pareto(k, p, (3,), p.dtype),
    "rayleigh": lambda R, k, p: R.rayleigh(k, p, (3,), p.dtype),
    "wald": lambda R, k, p: R.wald(k, p, (3,), p.dtype),
    "lognormal": lambda R, k, p: R.lognormal(k, p, (3,), p.dtype),
    "triangular": lambda R, k, p: R.triangular(k, p - 2, p, p + 1, (3,), p.dtype),
    "weibull_min": lambda R, k, p: R.weibull_min(k, p, p + 0.5, (3,), p.dtype),
    "double_sided_maxwell": lambda R, k, p: R.double_sided_maxwell(k, p, p * 2, (3,),
                                                                   p.dtype),
    "permutation_of_parameter": lambda R, k, p: R.permutation(k, p * np.arange(1., 6.)) ** 2,
    "choice_of_parameter": lambda R, k, p: R.choice(k, p * np.arange(1., 6.), (4,)) ** 3,
}


def _total(R, f):
    np_ = impl.numpy if R is ir else jnp
    return lambda p, key: np_.sum(f(R, key, p))


def _all_totals(R, names):
    """Every gradient case in one function of a dict of parameters."""
    np_ = impl.numpy if R is ir else jnp
    return lambda ps, key: sum(np_.sum(GRAD_CASES[n](R, k, ps[n]))
                               for n, k in zip(names, R.split(key, len(names))))


EAGER_GRAD = [pytest.param("reparameterised_normal", F64, marks=pytest.mark.slow),
              ("permutation_of_parameter", F32)]


@pytest.mark.parametrize("name,dtype", EAGER_GRAD, ids=["normal", "permutation"])
def test_grad_through_draws(name, dtype):
    f = GRAD_CASES[name]
    p = np.asarray(1.25, dtype)
    k, jk = keys_of(11)
    g = impl.grad(_total(ir, f))(p, k)
    jg = jax.grad(_total(jr, f))(p, jk)
    assert g.dtype == jg.dtype
    np.testing.assert_allclose(g, jg, **TOLERANCE["sampler gradients"][np.dtype(dtype)])


GRAD_RUNS = [
    (F32, ("uniform_bounds", "wald", "choice_of_parameter")),
    (F64, ("reparameterised_normal", "truncated_normal_bounds")),
    pytest.param(F32, tuple(GRAD_CASES), marks=pytest.mark.slow)]


@pytest.mark.parametrize("dtype,names", GRAD_RUNS, ids=["float32", "float64", "float32-all"])
def test_grad_under_jit_and_vmap(dtype, names):
    """Per-key gradients of several cases in one program: jit of vmap of grad over
    split keys."""
    ps = {n: np.asarray(1.25 + 0.01 * i, dtype) for i, n in enumerate(names)}
    k, jk = keys_of(12)
    keys, jkeys = ir.split(k, 3), jr.split(jk, 3)
    gv = impl.jit(impl.vmap(impl.grad(_all_totals(ir, names)), in_axes=(None, 0)))(ps, keys)
    jgv = jax.jit(jax.vmap(jax.grad(_all_totals(jr, names)), in_axes=(None, 0)))(ps, jkeys)
    for n in names:
        assert gv[n].dtype == jgv[n].dtype == dtype, n
        np.testing.assert_allclose(gv[n], jgv[n], err_msg=n,
                                   **TOLERANCE["sampler gradients"][np.dtype(dtype)])


def test_grad_through_draws_matches_finite_differences():
    # A reference independent of reverse mode: central differences in float64.
    f = GRAD_CASES["truncated_normal_bounds"]
    k = ir.key(2)
    total = _total(ir, f)
    p, eps = 0.7, 1e-6
    fd = (total(np.float64(p + eps), k) - total(np.float64(p - eps), k)) / (2 * eps)
    np.testing.assert_allclose(impl.grad(total)(np.float64(p), k), fd, rtol=1e-6)


def test_dropout_under_jit_of_grad():
    """The dropout of a small model, trained under jit(grad) with a key argument."""
    def loss(np_, R, w, key, x):
        keep = R.bernoulli(key, 0.8, x.shape)
        h = np_.where(keep, x / 0.8, 0.) @ w
        return np_.sum(np_.tanh(h) ** 2)

    w = np.linspace(-1, 1, 12).reshape(4, 3)
    x = np.linspace(0, 2, 8).reshape(2, 4)
    k, jk = keys_of(4)
    g = impl.jit(impl.grad(lambda w, key: loss(impl.numpy, ir, w, key, x)))(w, k)
    jg = jax.jit(jax.grad(lambda w, key: loss(jnp, jr, w, key, x)))(w, jk)
    np.testing.assert_allclose(g, jg, rtol=1e-13)


# ------------------------------------------------------------------------ keys

SEED_VALUES = [0, 1, 42, -1, 2 ** 31, 2 ** 40 + 3, -(2 ** 40), np.int32(-7),
               np.uint32(4_000_000_000), np.int64(2 ** 50), np.uint64(2 ** 63 + 5),
               np.int8(-3), jnp.int32(9), jnp.uint64(12)]


@pytest.mark.parametrize("seed", SEED_VALUES, ids=repr)
def test_seeds(seed):
    assert_same(ir.PRNGKey(seed), jr.PRNGKey(seed))
    assert_same(ir.key_data(ir.key(seed)), jr.key_data(jr.key(seed)))


def test_seeds_in_x32_mode():
    with jax.enable_x64(False):
        for seed in (0, -1, 2 ** 40 + 3, np.int32(-7)):
            assert_same(ir.PRNGKey(seed), jr.PRNGKey(seed))


def test_traced_seeds():
    seeds = np.array([0, 5, -3, 2 ** 40], np.int64)
    assert_same(impl.vmap(ir.PRNGKey)(seeds), jax.vmap(jr.PRNGKey)(seeds))
    assert_same(impl.jit(lambda s: ir.key_data(ir.key(s)))(seeds[2]),
                jax.jit(lambda s: jr.key_data(jr.key(s)))(seeds[2]))
    assert_same(impl.vmap(lambda s: ir.normal(ir.key(s), (2,)))(seeds),
                jax.vmap(lambda s: jr.normal(jr.key(s), (2,)))(seeds))


@pytest.mark.parametrize("num", [2, 5, 1, 0, (2, 3), (4, 1, 2), ()])
def test_split(num):
    for k, jk in (keys_of(7), (ir.PRNGKey(7), jr.PRNGKey(7))):
        assert_same(ir.key_data(ir.split(k, num)), jr.key_data(jr.split(jk, num)))
    if num == (2, 3):
        k, jk = keys_of(7)
        assert_same(ir.key_data(impl.jit(ir.split, static_argnums=1)(k, num)),
                    jr.key_data(jax.jit(jr.split, static_argnums=1)(jk, num)))


def test_split_and_fold_in_under_vmap():
    k, jk = keys_of(8)
    keys, jkeys = ir.split(k, 4), jr.split(jk, 4)
    assert_same(ir.key_data(impl.vmap(ir.split)(keys)), jr.key_data(jax.vmap(jr.split)(jkeys)))
    assert_same(ir.key_data(impl.vmap(lambda key: ir.fold_in(key, 3))(keys)),
                jr.key_data(jax.vmap(lambda key: jr.fold_in(key, 3))(jkeys)))
    data = np.array([0, 1, 2 ** 31, 2 ** 32 - 1], np.uint32)
    assert_same(ir.key_data(impl.vmap(ir.fold_in, (None, 0))(k, data)),
                jr.key_data(jax.vmap(jr.fold_in, (None, 0))(jk, data)))
    assert_same(ir.key_data(impl.vmap(ir.fold_in)(keys, data)),
                jr.key_data(jax.vmap(jr.fold_in)(jkeys, data)))
    # A training-loop pattern: a step index folded into a key, under jit.
    step = np.int32(17)
    assert_same(impl.jit(lambda key, i: ir.normal(ir.fold_in(key, i), (3,)))(k, step),
                jax.jit(lambda key, i: jr.normal(jr.fold_in(key, i), (3,)))(jk, step))


@pytest.mark.parametrize("data", [0, 1, 7, 2 ** 32 - 1, np.int32(-1), np.uint32(9),
                                  jnp.int64(2 ** 33 + 1), True, 2.5])
def test_fold_in(data):
    for k, jk in (keys_of(3), (ir.PRNGKey(3), jr.PRNGKey(3))):
        assert_same(ir.key_data(ir.fold_in(k, data)), jr.key_data(jr.fold_in(jk, data)))


def test_key_arrays_behave_like_jax_key_arrays():
    k, jk = keys_of(0)
    keys, jkeys = ir.split(k, (2, 3)), jr.split(jk, (2, 3))
    assert keys.shape == jkeys.shape and keys.ndim == 2 and keys.size == 6
    assert keys.dtype == jkeys.dtype and jax.dtypes.issubdtype(keys.dtype,
                                                               jax.dtypes.prng_key)
    assert len(keys) == 2 and k.shape == () and ir.key_impl(keys) == jr.key_impl(jkeys)
    assert ir.key_dtype() == jr.key_dtype()
    for got, want in [(keys[1], jkeys[1]), (keys[:, 1:], jkeys[:, 1:]),
                      (keys[..., 0], jkeys[..., 0]), (keys.T, jkeys.T),
                      (keys.reshape(3, 2), jkeys.reshape(3, 2)), (keys.ravel(), jkeys.ravel()),
                      (keys[None], jkeys[None]), (keys[:1].squeeze(), jkeys[:1].squeeze())]:
        assert got.shape == want.shape
        assert_same(ir.key_data(got), jr.key_data(want))
    a, b = ir.split(k)
    ja, jb = jr.split(jk)
    assert_same(ir.key_data(b), jr.key_data(jb))
    assert [ir.key_data(x).tolist() for x in keys[0]] == \
        [jr.key_data(x).tolist() for x in jkeys[0]]
    assert_same(keys == keys[0], jkeys == jkeys[0])
    assert_same(a != b, ja != jb)
    assert_same(ir.wrap_key_data(ir.key_data(keys)) == keys, jnp.ones((2, 3), bool))
    assert ir.clone(k) is k
    assert "key<fry>" in repr(k)
    # One pytree leaf, the key data: keys pass through jit and vmap outputs.
    assert jax.tree_util.tree_leaves(keys)[0].shape == (2, 3, 2)
    out = impl.jit(lambda key: ir.split(key, 4))(k)
    assert isinstance(out, ir.PRNGKeyArray) and out.shape == (4,)
    assert_same(ir.key_data(out), jr.key_data(jr.split(jk, 4)))


def test_typed_and_raw_keys_give_their_own_kind():
    k, raw = ir.key(1), ir.PRNGKey(1)
    assert isinstance(ir.split(k), ir.PRNGKeyArray)
    assert isinstance(ir.fold_in(k, 2), ir.PRNGKeyArray)
    assert isinstance(ir.split(raw), jax.Array) and ir.split(raw).dtype == np.uint32
    assert isinstance(raw, jax.Array) and raw.shape == (2,)
    # Keys made by jax.random are accepted too.
    assert_same(ir.normal(jr.key(1), (2,)), jr.normal(jr.key(1), (2,)))


def test_make_jaxpr_shows_the_random_primitives():
    text = str(impl.make_jaxpr(lambda key: ir.normal(key, (3,), F32))(ir.key(0)))
    assert "random_bits[bit_width=32 shape=(3,)]" in text and "erf_inv" in text
    text = str(impl.make_jaxpr(lambda key: ir.split(key))(ir.key(0)))
    assert "threefry2x32" in text


def test_unsupported_configuration_raises():
    # out_sharding as a PartitionSpec names axes of the mesh in context: none here
    for lib in (ir, jr):
        with pytest.raises(ValueError, match="not under a mesh context"):
            lib.gumbel(lib.key(0), (2,), out_sharding=jax.sharding.PartitionSpec())
    with pytest.raises(NotImplementedError, match="threefry2x32"):
        ir.key(0, impl="rbg")
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        ir.key(0, impl="nonsense")
    with jax.threefry_partitionable(False):
        with pytest.raises(NotImplementedError, match="partitionable"):
            ir.normal(ir.key(0))


# ---------------------------------------------------------------------- errors

K = ir.key(0)
JK = jr.key(0)
ERRORS = {
    "batched key": lambda R, k: R.normal(R.split(k)),
    "int key": lambda R, k: R.normal(5),
    "list key": lambda R, k: R.normal([0, 0]),
    "key data of shape (3,)": lambda R, k: R.normal(np.zeros(3, np.uint32)),
    "key data of int32": lambda R, k: R.normal(np.zeros(2, np.int32)),
    "0-d key data": lambda R, k: R.normal(np.uint32(0)),
    "split of a batch": lambda R, k: R.split(R.split(k)),
    "split float num": lambda R, k: R.split(k, 2.0),
    "array seed": lambda R, k: R.key(np.arange(2)),
    "float seed": lambda R, k: R.key(1.5),
    "key as seed": lambda R, k: R.key(k),
    "fold_in array": lambda R, k: R.fold_in(k, np.arange(2)),
    "fold_in negative int": lambda R, k: R.fold_in(k, -1),
    "float shape": lambda R, k: R.normal(k, (2.0,)),
    "uniform int dtype": lambda R, k: R.uniform(k, dtype=np.int32),
    "normal int dtype": lambda R, k: R.normal(k, dtype=np.int32),
    "bits signed dtype": lambda R, k: R.bits(k, dtype=np.int32),
    "randint float dtype": lambda R, k: R.randint(k, (2,), 0, 5, dtype=np.float32),
    "randint shape mismatch": lambda R, k: R.randint(k, (2,), np.zeros(3, int), 5),
    "bernoulli int p": lambda R, k: R.bernoulli(k, 1),
    "bernoulli mode": lambda R, k: R.bernoulli(k, 0.5, mode="x"),
    "bernoulli shape mismatch": lambda R, k: R.bernoulli(k, np.full(3, .5), (2,)),
    "categorical shape": lambda R, k: R.categorical(k, np.ones((3, 4)), shape=(2,)),
    "categorical too many without replacement": lambda R, k: R.categorical(
        k, np.ones(3), shape=(4,), replace=False),
    "choice too many": lambda R, k: R.choice(k, 3, (4,), replace=False),
    "choice int shape": lambda R, k: R.choice(k, 3, 4),
    "choice p shape": lambda R, k: R.choice(k, 3, (2,), p=np.ones(4)),
    "choice empty population": lambda R, k: R.choice(k, 0, (2,)),
    "permutation float": lambda R, k: R.permutation(k, 3.0),
    "permutation list": lambda R, k: R.permutation(k, [1, 2, 3]),
    "permutation axis": lambda R, k: R.permutation(k, np.ones(3), axis=2),
    "gumbel mode": lambda R, k: R.gumbel(k, mode="x"),
    "truncated_normal int dtype": lambda R, k: R.truncated_normal(k, -1, 1, dtype=np.int32),
    "truncated_normal shape mismatch": lambda R, k: R.truncated_normal(
        k, np.zeros(3), 1., (2,)),
    "pareto unsafe cast": lambda R, k: R.pareto(k, np.float64(2.), dtype=np.float32),
    "geometric float dtype": lambda R, k: R.geometric(k, 0.5, dtype=np.float32),
    "wrap_key_data bad shape": lambda R, k: R.wrap_key_data(np.zeros(3, np.uint32)),
    "wrap_key_data int32": lambda R, k: R.wrap_key_data(np.zeros(2, np.int32)),
    "key_data of an int": lambda R, k: R.key_data(3),
    "both impl and dtype": lambda R, k: R.key(0, impl="threefry2x32",
                                              dtype="threefry2x32"),
    "len of a scalar key": lambda R, k: len(k),
    "iteration over a scalar key": lambda R, k: iter(k),
    "bool of a key": lambda R, k: bool(k),
    "key to numpy": lambda R, k: np.asarray(k),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_as_jax(name):
    f = ERRORS[name]
    with pytest.raises(Exception) as jax_err:
        f(jr, JK)
    with pytest.raises(Exception) as impl_err:
        f(ir, K)
    assert type(impl_err.value) is type(jax_err.value) or (
        isinstance(impl_err.value, type(jax_err.value))), (impl_err.value, jax_err.value)


def test_errors_name_what_was_wrong():
    with pytest.raises(ValueError, match="accepts a single key.*shape \\(2,\\)"):
        ir.uniform(ir.split(K))
    with pytest.raises(TypeError, match="dtype=int32"):
        ir.normal(np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        ir.bernoulli(K, np.full(3, .5), (2,))
    with pytest.raises(ValueError, match="negative"):
        ir.normal(K, (-1,))
    with pytest.raises(TypeError, match="uint32"):
        prng.threefry2x32(np.int32(0), np.uint32(0), np.uint32(0), np.uint32(0))
    with pytest.raises(TypeError, match="key data"):
        prng.random_bits(np.zeros(3, np.uint32), 32, (2,))


# ------------------------------------------------- the threefry2x32 primitive

# Known-answer vectors of Threefry-2x32 with 20 rounds (Random123's kat_vectors):
# (key words, counter words) -> hashed words.
KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6b200159, 0x99ba4efe)),
    ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
    ((0x13198a2e, 0x03707344), (0x243f6a88, 0x85a308d3), (0xc4923a9c, 0x483df7a0)),
]


def test_threefry_known_answers():
    u = np.uint32
    for (k1, k2), (x1, x2), expected in KAT:
        out = prng.threefry2x32(u(k1), u(k2), u(x1), u(x2))
        assert [int(o) for o in out] == list(expected)
        staged = impl.jit(prng.threefry2x32)(u(k1), u(k2), u(x1), u(x2))
        assert [int(o) for o in staged] == list(expected)


def test_threefry_broadcasts_and_batches():
    u = np.uint32
    counts = np.arange(6, dtype=u).reshape(2, 3)
    keys = np.array([[1, 2], [3, 4], [5, 6]], u)
    batched = impl.vmap(lambda k: prng.threefry2x32(k[0], k[1], u(0), counts))(keys)
    for i, (k1, k2) in enumerate(keys):
        want = jax.extend.random.threefry2x32_p.bind(
            *[jnp.broadcast_to(v, (2, 3)) for v in (k1, k2, u(0), counts)])
        for got, w in zip(batched, want):
            assert_same(got[i], w)
    # Zero derivative: the hash of a traced key under jvp.
    _, t = impl.jvp(lambda x: prng.threefry2x32(u(1), u(2), u(0), counts)[0] * x,
                    (np.float32(1.),), (np.float32(1.),))
    assert t.dtype == np.float32


def test_random_bits_of_a_batch_of_keys():
    data = jr.key_data(jr.split(jr.key(2), (2, 2)))
    out = prng.random_bits(data, 32, (3,))
    assert out.shape == (2, 2, 3)
    for i in range(2):
        for j in range(2):
            assert_same(out[i, j], jr.bits(jr.wrap_key_data(data[i, j]), (3,), np.uint32))


# --------------------------------------------------- lax operations for bits

def test_lax_bit_operations():
    u = np.array([0, 1, 7, 2 ** 31, 2 ** 32 - 1], np.uint32)
    s = np.array([0, 1, 4, 31, 3], np.uint32)
    i = np.array([-8, -1, 5, 2 ** 30, 3], np.int32)
    for name in ("shift_left", "shift_right_logical", "shift_right_arithmetic"):
        for x, y in ((u, s), (i, s.astype(np.int32))):
            assert_same(getattr(ilax, name)(x, y), getattr(jax.lax, name)(x, y))
            assert_same(impl.vmap(getattr(ilax, name))(x, y),
                        jax.vmap(getattr(jax.lax, name))(x, y))
    assert_same(ilax.clz(u), jax.lax.clz(u))
    for dt in (np.float32, np.int32):
        assert_same(ilax.bitcast_convert_type(u, dt), jax.lax.bitcast_convert_type(u, dt))
    wide = np.arange(6, dtype=np.uint32).reshape(3, 2)
    assert_same(ilax.bitcast_convert_type(wide, np.uint64),
                jax.lax.bitcast_convert_type(wide, np.uint64))
    assert_same(impl.vmap(lambda x: ilax.bitcast_convert_type(x, np.uint16))(wide),
                jax.vmap(lambda x: jax.lax.bitcast_convert_type(x, np.uint16))(wide))
    with pytest.raises(TypeError, match="last axis of size 2"):
        ilax.bitcast_convert_type(u, np.uint64)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.__name__)
def test_erf_inv_and_nextafter(dtype):
    x = np.linspace(-0.95, 0.95, 7).astype(dtype)
    assert_same(ilax.erf_inv(x), jax.lax.erf_inv(x))
    t = np.ones_like(x)
    _, tan = impl.jvp(ilax.erf_inv, (x,), (t,))
    _, jtan = jax.jvp(jax.lax.erf_inv, (x,), (t,))
    np.testing.assert_allclose(tan, jtan, rtol=1e-6 if dtype == F32 else 1e-13)
    # Reference independent of JAX's rule: d/dx erfinv(x) = sqrt(pi)/2 exp(erfinv(x)^2).
    ref = np.sqrt(np.pi) / 2 * np.exp(np.asarray(jax.lax.erf_inv(x), np.float64) ** 2)
    np.testing.assert_allclose(impl.vmap(impl.grad(ilax.erf_inv))(x), ref,
                               rtol=1e-5 if dtype == F32 else 1e-12)
    for to in (np.inf, -np.inf, 0.):
        assert_same(ilax.nextafter(x, np.full_like(x, to)),
                    jax.lax.nextafter(x, np.full_like(x, to)))
    with pytest.raises(NotImplementedError, match="nextafter"):
        impl.grad(lambda v: ilax.nextafter(v, dtype(1.)))(dtype(0.5))


# ---------------------------------------------------------- negative tests

def test_comparison_catches_a_broken_batching_rule(monkeypatch):
    """A batching rule that hashes the first key for every batch element: the vmap
    comparison with JAX must fail."""
    def first_key_only(axis_data, vals, dims, *, bit_width, shape):
        (keys,), (d,) = vals, dims
        first = batching.moveaxis(keys, d, 0)[0]
        out = prng.random_bits_p.bind(first, bit_width=bit_width, shape=shape)
        return batching.broadcast_batch(out, axis_data.size, 0), 0

    monkeypatch.setitem(batching.batching_rules, prng.random_bits_p, first_key_only)
    keys, jkeys = ir.split(ir.key(0), 3), jr.split(jr.key(0), 3)
    with pytest.raises(AssertionError):
        # (a shape no other test draws, so no batched program is cached yet)
        assert_same(impl.vmap(lambda k: ir.normal(k, (7, 2)))(keys),
                    jax.vmap(lambda k: jr.normal(k, (7, 2)))(jkeys))


def test_comparison_catches_a_wrong_counter_layout(monkeypatch):
    """Counter words in the wrong order (low word first): eager draws must differ."""
    original = prng._threefry_lower
    monkeypatch.setattr(prng, "_threefry_lower",
                        lambda k1, k2, x1, x2: original(k1, k2, x2, x1))
    with pytest.raises(AssertionError):
        assert_same(ir.bits(ir.key(0), (3,)), jr.bits(jr.key(0), (3,)))
