"""impl.scipy.special against jax.scipy.special in float64: values, grads and vmap
under jit (jvp too, nightly), result dtypes and weak types, edge values, and the
exceptions JAX raises for bad input."""
from __future__ import annotations

import jax

import jax.scipy.special as jsp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import impl  # noqa: E402
import impl.scipy.special as isp  # noqa: E402
from tests._scipy_compare import ALL, check_group  # noqa: E402

F = np.float64


def arr(*values):
    return np.array(values, F)


POS = arr(0.4, 1.3, 2.7, 7.5)      # positive reals
REAL = arr(-2.3, -0.6, 0.4, 1.9)   # reals avoiding the poles of gamma
UNIT = arr(0.02, 0.3, 0.55, 0.93)  # inside (0, 1)

# name -> (arguments, argnums differentiated); the function is isp.name / jsp.name.
CASES = {
    "gammaln": ([REAL], None),
    "digamma": ([REAL], None),
    "gammasgn": ([REAL], None),
    "gamma": ([REAL], None),
    "loggamma": ([POS], None),
    "betaln": ([POS, arr(0.7, 3.1, 9.5, 12.0)], None),
    "beta": ([POS, arr(0.7, 3.1, 1.5, 2.0)], None),
    "betainc": ([POS, arr(0.7, 3.1, 1.5, 2.0), UNIT], (2,)),
    "gammainc": ([POS, arr(0.3, 1.0, 2.5, 9.0)], None),
    "gammaincc": ([POS, arr(0.3, 1.0, 2.5, 9.0)], None),
    "polygamma": ([np.array([0, 1, 2, 3]), POS], (1,)),
    "zeta": ([arr(1.5, 2.0, 3.3, 6.0), POS], None),
    "factorial": ([arr(0.0, 1.5, 4.0, 6.2)], None),
    "comb": ([arr(5.0, 7.5, 10.0, 3.0), arr(2.0, 3.0, 4.5, 1.0)], None),
    "poch": ([POS, arr(0.0, 1.5, 2.0, -0.3)], None),
    "erfinv": ([arr(-0.9, -0.2, 0.35, 0.99)], None),
    "ndtr": ([arr(-9.0, -0.5, 0.3, 2.5)], None),
    "ndtri": ([arr(1e-12, 0.01, 0.3, 0.55, 0.9, 0.999)], None),
    "log_ndtr": ([arr(-40.0, -12.0, -0.5, 1.2, 9.0)], None),
    "erfcx": ([arr(-3.0, -0.4, 0.7, 5.0, 30.0)], None),
    "xlogy": ([arr(0.0, 0.5, 2.0, 3.0), POS], None),
    "xlog1py": ([arr(0.0, 0.5, 2.0, 3.0), arr(-0.5, 0.3, 2.0, 9.0)], None),
    "entr": ([arr(0.1, 0.5, 1.0, 4.0)], None),
    "rel_entr": ([arr(0.1, 0.5, 1.0, 4.0), POS], None),
    "kl_div": ([arr(0.1, 0.5, 1.0, 4.0), POS], None),
    "i0": ([REAL], None),
    "i0e": ([REAL], None),
    "i1": ([REAL], None),
    "i1e": ([REAL], None),
    "spence": ([arr(0.1, 0.45, 0.9, 1.2, 1.7, 3.5)], None),
    "erfc": ([REAL], None),
}


def _by_name(name):
    return lambda sp: getattr(sp, name)


HEAVY = ("gammainc", "gammaincc")


def _group(names, keys=("grad", "vmap")):
    check_group(jsp, isp, {n: (_by_name(n), CASES[n][1]) for n in names},
                {n: CASES[n][0] for n in names}, keys)


# The fast tests check the functions with derivative rules of their own (custom_jvp)
# or with several algorithms by range; every function under every transformation
# nightly (XLA's compile time makes each case cost about a second).
FAST = ("zeta", "poch", "log_ndtr", "erfcx", "xlogy", "xlog1py", "entr", "rel_entr",
        "ndtri", "betaln", "gammasgn", "spence")


def test_values_grads_and_vmap_against_jax():
    _group(FAST)


@pytest.mark.slow
def test_all_transformations_against_jax():
    _group(sorted(CASES), ALL)


@pytest.mark.slow
def test_incomplete_gamma_values_and_x_derivative():
    a, x = CASES["gammainc"][0]
    for name in HEAVY:
        def run(lib, sp, name=name):
            return lib.jit(lambda a, x: lib.jvp(lambda x: getattr(sp, name)(a, x), (x,),
                                                (x / 3,)))(a, x)
        np.testing.assert_allclose(run(impl, isp), run(jax, jsp), rtol=1e-9, err_msg=name)


def test_options_against_jax():
    """multigammaln's dimension, comb's repetition, log_ndtr's series order."""
    cases = {
        "multigammaln1": (lambda sp: lambda a: sp.multigammaln(a, 1), None),
        "multigammaln3": (lambda sp: lambda a: sp.multigammaln(a, 3), None),
        "comb_repetition": (lambda sp: lambda n, k: sp.comb(n, k, repetition=True), None),
        "log_ndtr5": (lambda sp: lambda x: sp.log_ndtr(x, series_order=5), None),
        "log_ndtr0": (lambda sp: lambda x: sp.log_ndtr(x, series_order=0), None),
    }
    args = {"multigammaln1": [arr(2.5, 3.0, 7.1)], "multigammaln3": [arr(2.5, 3.0, 7.1)],
            "comb_repetition": [arr(5.0, 7.5, 0.0, 3.0), arr(2.0, 3.0, 0.0, 1.0)],
            "log_ndtr5": [arr(-45.0, -25.0, -21.0)], "log_ndtr0": [arr(-45.0, -25.0, -1.0)]}
    check_group(jsp, isp, cases, args)


def _edge_values(sp, x, p, s, q):
    out = {name: getattr(sp, name)(x) for name in
           ("gammasgn", "gamma", "loggamma", "factorial", "i0", "entr")}
    out["ndtri"], out["spence"] = sp.ndtri(p), sp.spence(s)
    for name in ("rel_entr", "kl_div", "xlogy", "xlog1py"):
        out[name] = getattr(sp, name)(arr(0.0, 0.0, 2.0), q)
    return out


def test_edge_values_match_jax():
    """Poles, signed zeros, the ends of the domains and NaN give JAX's values."""
    args = (arr(-np.inf, -3.0, -2.5, -0.0, 0.0, np.inf, np.nan), arr(-0.1, 0.0, 1.0, 1.1),
            arr(-1.0, 0.0, 1.0), arr(0.0, 1.0, -1.0))
    want = jax.jit(lambda *a: _edge_values(jsp, *a))(*args)
    got = impl.jit(lambda *a: _edge_values(isp, *a))(*args)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], name)


def test_derivative_rules_at_zero_follow_jax():
    """xlogy/xlog1py/entr differentiate by their custom rules, not through `where`."""
    for name in ("xlogy", "xlog1py"):
        want = jax.grad(getattr(jsp, name), (0, 1))(0.0, 2.0)
        got = impl.grad(getattr(isp, name), (0, 1))(0.0, 2.0)
        np.testing.assert_allclose(got, want, err_msg=name)
    np.testing.assert_allclose(impl.grad(isp.entr)(1.0), jax.grad(jsp.entr)(1.0))


SCALAR_INPUTS = [1.5, 2, np.float32(0.5), np.int32(3), np.array([0.5, 0.7], np.float32)]
UNARY = ["gammaln", "digamma", "gamma", "gammasgn", "loggamma", "factorial", "erfinv",
         "erfcx", "entr", "i0", "i0e", "i1", "i1e"]


def _types(lib, fn, *args):
    """(shape, dtype, weak) of fn(*args) under `lib`, from tracing only (no compiling)."""
    if lib is jax:
        out = jax.eval_shape(fn, *args)
    else:
        out = impl.make_jaxpr(fn)(*args).out_avals[0]
    return out.shape, np.dtype(out.dtype), bool(out.weak_type)


@pytest.mark.parametrize("name", UNARY)
def test_dtypes_and_weak_types(name):
    for x in SCALAR_INPUTS:
        if name == "erfinv" and np.ndim(x) == 0 and float(x) >= 1:
            x = x / 4
        want = _types(jax, getattr(jsp, name), x)
        assert _types(impl, getattr(isp, name), x) == want, (name, x)


BINARY = ["betaln", "beta", "betainc", "gammainc", "gammaincc", "xlogy", "xlog1py",
          "rel_entr", "kl_div", "poch", "zeta", "comb"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_dtypes_and_broadcasting(name):
    pairs = [(1.5, 2), (np.float32(1.5), 2.5), (np.ones(3, np.int32) * 2, 1.5),
             (np.full((2, 1), 2.0), np.array([1.5, 2.5, 3.5], np.float32))]
    for a, b in pairs:
        args = (a, b, 0.5) if name == "betainc" else (a, b)
        want = _types(jax, getattr(jsp, name), *args)
        assert _types(impl, getattr(isp, name), *args) == want, (name, args)


def test_broadcast_values():
    a, b = np.full((2, 1), 2.0), np.array([1.5, 2.5, 3.5], np.float32)
    np.testing.assert_allclose(impl.jit(isp.betaln)(a, b), jax.jit(jsp.betaln)(a, b))


def test_strict_float_inputs():
    for name in ("ndtr", "ndtri", "spence"):
        assert _types(impl, getattr(isp, name), 0.5) == _types(jax, getattr(jsp, name), 0.5)
        for lib in (isp, jsp):
            with pytest.raises(TypeError, match="x.dtype=int"):
                getattr(lib, name)(np.array([1, 2]))


@pytest.mark.parametrize("call,exc,match", [
    (lambda m: m.polygamma(1.0, 2.0), ValueError, "must be of integer type"),
    (lambda m: m.zeta(2.0), NotImplementedError, "Riemann zeta"),
    (lambda m: m.factorial(3.0, exact=True), NotImplementedError, "exact=True"),
    (lambda m: m.log_ndtr(1.0, series_order=2.0), TypeError, "series_order"),
    (lambda m: m.log_ndtr(1.0, series_order=31), ValueError, "series_order"),
    (lambda m: m.log_ndtr(np.array([1, 2])), TypeError, "x.dtype=int"),
    (lambda m: m.entr(1j), ValueError, "complex"),
])
def test_bad_input_errors_match_jax(call, exc, match):
    for module in (jsp, isp):
        with pytest.raises(exc, match=match):
            call(module)


def test_the_comparison_catches_a_wrong_value_or_derivative():
    """Negative tests of check_group: an ndtr off by 1e-7 and one whose derivative
    rule is doubled (its values right) are both reported."""
    import types

    @impl.custom_jvp
    def doubled_slope(x):
        return isp.ndtr(x)
    doubled_slope.defjvps(
        lambda t, ans, x: 2 * t * impl.numpy.exp(-x * x / 2) / np.sqrt(2 * np.pi))
    x = arr(-0.5, 0.3, 2.5)
    for broken, key in ((lambda x: isp.ndtr(x) + 1e-7, "vmap"), (doubled_slope, "grad")):
        with pytest.raises(AssertionError, match=f"ndtr: {key}"):
            check_group(jsp, types.SimpleNamespace(ndtr=broken),
                        {"ndtr": (_by_name("ndtr"), None)}, {"ndtr": [x]})
