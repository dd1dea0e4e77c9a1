"""impl.scipy.stats against jax.scipy.stats in float64: values (through vmap), grads
in every float argument, jvp (nightly) and vmap; dtypes; errors."""
from __future__ import annotations

import jax

import jax.scipy.stats as jst  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import impl  # noqa: E402
import impl.scipy.stats as ist  # noqa: E402
from tests._scipy_compare import ALL, check_group  # noqa: E402


def arr(*values):
    return np.array(values, np.float64)


X = arr(-1.3, 0.2, 0.9, 2.4)
POS = arr(0.3, 0.8, 1.6, 3.1)
UNIT = arr(0.05, 0.3, 0.62, 0.97)
LOC, SCALE = arr(0.1, -0.4, 0.3, 1.0), arr(0.7, 1.2, 2.0, 0.9)

LOC_SCALE = {  # distribution -> functions taking (x, loc, scale)
    "norm": ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"),
    "cauchy": ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"),
    "logistic": ("logpdf", "pdf", "cdf", "sf"),
    "laplace": ("logpdf", "pdf", "cdf"),
    "expon": ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"),
    "uniform": ("logpdf", "pdf", "cdf"),
}
QUANTILES = {"norm": ("ppf", "isf"), "cauchy": ("ppf", "isf"), "logistic": ("ppf", "isf"),
             "expon": ("ppf",), "uniform": ("ppf",)}


def _fn(dist, name, **kw):
    return lambda st: (lambda *a: getattr(getattr(st, dist), name)(*a, **kw))


def _cases(defaults):
    """Every function with loc and scale given; with `defaults`, also without them."""
    cases, args = {}, {}

    def add(key, fn, values, diff=None):
        cases[key], args[key] = (fn, diff), values

    for dist, names in LOC_SCALE.items():
        x = X + 1.5 if dist in ("expon",) else X
        x = UNIT * 2 - 0.2 if dist == "uniform" else x
        for name in names:
            add(f"{dist}.{name}", _fn(dist, name), [x, LOC, SCALE])
            if defaults or dist == "norm":
                add(f"{dist}.{name}/default", _fn(dist, name), [x])
    for dist, names in QUANTILES.items():
        for name in names:
            add(f"{dist}.{name}", _fn(dist, name), [UNIT, LOC, SCALE])
    add("t.logpdf", _fn("t", "logpdf"), [X, arr(1.0, 2.5, 4.0, 30.0), LOC, SCALE])
    add("t.pdf", _fn("t", "pdf"), [X, arr(1.0, 2.5, 4.0, 30.0)])
    for name in ("logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"):
        diff = None if name in ("logpdf", "pdf") else (0,)  # betainc: no derivative in a, b
        add(f"beta.{name}", _fn("beta", name), [UNIT, POS, arr(0.9, 2.0, 3.5, 1.2)], diff)
        add(f"beta.{name}/loc", _fn("beta", name), [UNIT, POS, POS, arr(-0.1, 0.0, 0.1, 0.0),
                                                     arr(1.5, 1.0, 1.0, 2.0)], diff)
    for name in ("logpdf", "pdf"):
        add(f"gamma.{name}", _fn("gamma", name), [POS, arr(0.5, 1.0, 2.5, 4.0), LOC - 0.5, SCALE])
    k = arr(0.0, 1.0, 0.0, 1.0)
    for name in ("logpmf", "pmf"):
        add(f"bernoulli.{name}", _fn("bernoulli", name), [k, UNIT], (1,))
        add(f"poisson.{name}", _fn("poisson", name), [arr(0.0, 1.0, 3.0, 7.0), POS * 2], (1,))
    add("bernoulli.cdf", _fn("bernoulli", "cdf"), [arr(-0.5, 0.0, 0.5, 1.0), UNIT], (1,))
    mean = arr(0.3, -0.2, 1.0)
    a = np.array([[1.0, 0.2, 0.1], [0.3, 0.9, -0.2], [0.0, 0.4, 1.1]])
    cov = a @ a.T + 0.5 * np.eye(3)
    xs = np.array([[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]])
    for name in ("logpdf", "pdf"):
        add(f"multivariate_normal.{name}", _fn("multivariate_normal", name), [xs, mean, cov])
    add("multivariate_normal.logpdf/scalar_cov", _fn("multivariate_normal", "logpdf"),
        [xs, mean, np.float64(1.7)])
    add("multivariate_normal.logpdf/scalar_mean", _fn("multivariate_normal", "logpdf"),
        [X, np.float64(0.4), np.float64(1.7)])
    return cases, args


# The cases whose values, grads and vmaps the fast tests check (those over special
# functions or linear algebra); every case under every transformation nightly.
TRANSFORMED = ("norm.logpdf", "norm.logcdf", "norm.ppf", "t.logpdf", "beta.logpdf",
               "bernoulli.logpmf", "poisson.logpmf", "multivariate_normal.logpdf")


def test_distribution_grads_and_vmap_against_jax():
    cases, args = _cases(defaults=False)
    chosen = [k for k in cases if k in TRANSFORMED]
    check_group(jst, ist, {k: cases[k] for k in chosen}, {k: args[k] for k in chosen})


@pytest.mark.slow
def test_distributions_all_transformations_against_jax():
    check_group(jst, ist, *_cases(defaults=True), ALL)


@pytest.mark.slow
def test_cdfs_of_incomplete_gamma():
    """gamma.cdf/sf and poisson.cdf (igamma compiles slowly: values and x-derivatives)."""
    x, a = POS, arr(0.5, 1.0, 2.5, 4.0)

    def run(lib, st):
        def f(x):
            return (st.gamma.cdf(x, a), st.gamma.sf(x, a, 0.1, 1.5), st.gamma.logcdf(x, a),
                    st.gamma.logsf(x, a), st.poisson.cdf(arr(0.0, 1.0, 3.0, 7.0), x * 2))
        return lib.jit(lambda x: lib.jvp(f, (x,), (x / 3,)))(x)
    for g, w in zip(jax.tree_util.tree_leaves(run(impl, ist)),
                    jax.tree_util.tree_leaves(run(jax, jst))):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


def test_support_edges_match_jax():
    def edges(st):
        x = arr(-1.0, 0.0, 0.5, 1.0, 2.0)
        return dict(beta=st.beta.logpdf(x, 2.0, 3.0), beta_bad=st.beta.logpdf(x, -1.0, 3.0),
                    uniform=st.uniform.logpdf(x), uniform_cdf=st.uniform.cdf(x),
                    expon=st.expon.logpdf(x), expon_cdf=st.expon.cdf(x),
                    gamma=st.gamma.logpdf(x, 2.0),
                    poisson=st.poisson.logpmf(arr(-1.0, 0.5, 2.0), 1.5),
                    bern=st.bernoulli.logpmf(arr(-1.0, 0.0, 1.0, 2.0), 0.3),
                    bern_cdf=st.bernoulli.cdf(arr(0.5, 0.5), arr(-0.1, 1.1)),
                    ppf=st.norm.ppf(arr(0.0, 1.0)), uppf=st.uniform.ppf(arr(-0.1, 1.1)))
    want, got = jax.jit(lambda: edges(jst))(), impl.jit(lambda: edges(ist))()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], key)


@pytest.mark.parametrize("call", [
    lambda st: st.norm.logpdf(1.0), lambda st: st.norm.cdf(2),
    lambda st: st.norm.logpdf(np.float32(1.0), 0.5, 2),
    lambda st: st.t.logpdf(np.ones(2, np.int32), 3.0), lambda st: st.norm.ppf(0.3),
    lambda st: st.poisson.logpmf(2, 1.5), lambda st: st.bernoulli.cdf(1, 0.3),
    lambda st: st.multivariate_normal.logpdf(np.ones(2, np.float32), np.zeros(2),
                                             np.eye(2, dtype=np.float32)),
], ids=["norm.logpdf", "norm.cdf_int", "norm.logpdf_f32", "t_int", "norm.ppf",
        "poisson", "bernoulli.cdf", "mvn"])
def test_dtypes_and_weak_types(call):
    want = jax.eval_shape(lambda: call(jst))
    got = impl.make_jaxpr(lambda: call(ist))().out_avals[0]
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)


WEAK_ARRAY_CALLS = [(d, n) for d, names in LOC_SCALE.items() for n in names] + [
    (d, n) for d, names in QUANTILES.items() for n in names if d != "norm"] + [
    ("t", "logpdf"), ("beta", "logpdf"), ("beta", "cdf"), ("beta", "sf"), ("gamma", "logpdf"),
    ("gamma", "cdf"), ("gamma", "sf"), ("bernoulli", "logpmf"), ("bernoulli", "cdf"),
    ("bernoulli", "ppf"), ("poisson", "logpmf"), ("poisson", "cdf")]


def test_weak_array_arguments_give_jax_types():
    """An integer array with Python-scalar parameters: a weakly typed float array whose
    result is weak or strong as in JAX (it depends on how JAX forms its constants)."""
    wrong = []
    k = np.array([1, 2, 0], np.int32)
    for dist, name in WEAK_ARRAY_CALLS:
        extra = {"t": (3.0,), "beta": (2.0, 3.0), "gamma": (2.0,), "bernoulli": (0.3,),
                 "poisson": (1.5,)}.get(dist, ())
        x = np.array([0.2, 0.5, 0.7]) if name in ("ppf", "isf") else k
        if name in ("ppf", "isf"):  # a weak float array: the int array times a Python float
            def call(st, dist=dist, name=name, extra=extra):
                return getattr(getattr(st, dist), name)(k * 0.25, *extra)
        else:
            def call(st, dist=dist, name=name, extra=extra, x=x):
                return getattr(getattr(st, dist), name)(x, *extra)
        want = jax.eval_shape(lambda: call(jst))
        got = impl.make_jaxpr(lambda: call(ist))().out_avals[0]
        if (got.dtype, got.weak_type) != (want.dtype, want.weak_type):
            wrong.append((dist, name, got, want))
    assert not wrong, wrong


@pytest.mark.parametrize("call,exc,match", [
    (lambda st: st.multivariate_normal.logpdf(np.zeros(3), np.zeros(3), np.eye(2)),
     ValueError, "incompatible shapes"),
    (lambda st: st.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), np.eye(2),
                                              allow_singular=True),
     NotImplementedError, "allow_singular"),
    (lambda st: st.norm.ppf(np.array([1, 2])), TypeError, "x.dtype=int"),
])
def test_bad_input_errors_match_jax(call, exc, match):
    for module in (jst, ist):
        with pytest.raises(exc, match=match):
            call(module)
