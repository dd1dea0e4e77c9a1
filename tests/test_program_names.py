"""Names real JAX programs use, each against JAX itself: jax.test_util.check_grads,
jax.scipy.signal's convolutions, lax's shape-tuple helpers, Cholesky of complex matrices and
the top-level __all__."""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import jax.scipy.signal as jsignal
import jax.test_util as jtest_util
import numpy as np
import pytest

import impl
import impl.numpy as inp
import impl.scipy.signal as isignal
import impl.test_util as itest_util
from impl import lax as ilax


def _outcome(fn):
    try:
        fn()
        return "ok"
    except Exception as e:  # noqa: BLE001  (the exception type is what is compared)
        return type(e).__name__


# ------------------------------------------------------------------ check_grads

def _grad_cases(api, np_):
    """(name, thunk) pairs calling `api.check_grads`-style checks; `np_` is that side's numpy."""
    check = api["check_grads"]
    f = lambda x: np_.sin(x) * x  # noqa: E731

    def wrong_rule(x):  # a custom_jvp whose rule is off by a factor 2
        return np_.sin(x)
    wrong = api["custom_jvp"](wrong_rule)
    wrong.defjvp(lambda p, t: (np_.sin(p[0]), 2.0 * np_.cos(p[0]) * t[0]))

    f32 = np.float32
    return [
        ("order2", lambda: check(f, (f32(0.7),), 2)),
        ("order3_rev", lambda: check(f, (np.arange(3.0, dtype=f32),), 3, modes=["rev"])),
        ("python_scalar_fwd", lambda: check(f, (0.3,), 2, modes=("fwd",))),
        ("lin", lambda: check(f, (f32(0.7),), 2, modes=["lin"])),
        ("pytree_out", lambda: check(lambda x, y: (x * y, np_.cos(x)), (f32(0.7), f32(2.0)), 2)),
        ("complex", lambda: check(lambda z: np_.sin(z) * z, (np.complex64(0.5 + 0.2j),), 1)),
        ("dict_rtol", lambda: check(f, (f32(0.7),), 2, rtol={np.float32: 1e-2})),
        ("wrong_rule_fwd", lambda: check(wrong, (0.5,), 1, modes=["fwd"])),
        ("wrong_rule_rev", lambda: check(wrong, (0.5,), 1, modes=["rev"])),
        ("wrong_rule_loose_tol", lambda: check(wrong, (0.5,), 1, modes=["fwd"], atol=2.0,
                                               rtol=2.0)),
        ("coarse_eps", lambda: check(lambda x: x ** 3, (f32(1.0),), 1, eps=1.0)),
        ("fine_eps", lambda: check(lambda x: x ** 3, (f32(1.0),), 1, eps=1e-3)),
    ]


def test_check_grads_decides_as_jax_does():
    mine = _grad_cases({"check_grads": itest_util.check_grads, "custom_jvp": impl.custom_jvp},
                       inp)
    theirs = _grad_cases({"check_grads": jtest_util.check_grads, "custom_jvp": jax.custom_jvp},
                         jnp)
    got = {name: _outcome(fn) for name, fn in mine}
    want = {name: _outcome(fn) for name, fn in theirs}
    assert got == want
    # the wrong rule is caught in both modes, and the coarse step is too coarse for x**3
    assert got["wrong_rule_fwd"] == got["wrong_rule_rev"] == got["coarse_eps"] \
        == "AssertionError"


def test_check_grads_signatures_match_jax():
    for name in ("check_grads", "check_jvp", "check_vjp"):
        assert _parameters(getattr(itest_util, name)) == _parameters(
            getattr(jtest_util, name)), name


def test_check_grads_names_an_unknown_mode():
    # JAX ignores a misspelt mode (and so checks nothing); impl names it instead.
    with pytest.raises(ValueError, match="bwd"):
        itest_util.check_grads(inp.sin, (0.5,), 1, modes=["bwd"])


# ------------------------------------------------------------------ scipy.signal

R = np.random.RandomState(0)
_SHAPES = [((9,), (4,)), ((4,), (9,)), ((5,), (5,)), ((6, 7), (3, 2)), ((3, 2), (6, 7)),
           ((4, 5), (4, 5)), ((5, 4, 3), (2, 3, 2))]


def _signal_pairs():
    for s1, s2 in _SHAPES:
        for mode in ("full", "same", "valid"):
            yield s1, s2, mode


def _compare(got, want, rtol=2e-5, atol=2e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("s1,s2,mode", list(_signal_pairs()))
def test_convolve_and_correlate_match_jax(s1, s2, mode):
    a, b = R.randn(*s1).astype(np.float32), R.randn(*s2).astype(np.float32)
    for name in ("convolve", "correlate"):
        for method in ("auto", "direct", "fft"):
            mine, theirs = getattr(isignal, name), getattr(jsignal, name)
            _compare(mine(a, b, mode, method), theirs(a, b, mode, method), rtol=2e-4, atol=2e-4)
    if len(s1) == 2:
        for name in ("convolve2d", "correlate2d"):
            _compare(getattr(isignal, name)(a, b, mode), getattr(jsignal, name)(a, b, mode))
    _compare(isignal.fftconvolve(a, b, mode), jsignal.fftconvolve(a, b, mode), 2e-4, 2e-4)


def test_signal_dtypes_and_complex_inputs_match_jax():
    ints = (np.arange(6, dtype=np.int32), np.array([1, 2, 1], np.int32))
    for name in ("convolve", "correlate", "fftconvolve"):
        _compare(getattr(isignal, name)(*ints), getattr(jsignal, name)(*ints), 1e-5, 1e-4)
    z = (R.randn(5, 4) + 1j * R.randn(5, 4)).astype(np.complex64)
    w = (R.randn(2, 3) + 1j * R.randn(2, 3)).astype(np.complex64)
    for mode in ("full", "same", "valid"):
        for name in ("convolve2d", "correlate2d", "convolve", "correlate", "fftconvolve"):
            _compare(getattr(isignal, name)(z, w, mode), getattr(jsignal, name)(z, w, mode),
                     2e-4, 2e-4)
            _compare(getattr(isignal, name)(w, z, mode), getattr(jsignal, name)(w, z, mode),
                     2e-4, 2e-4)


def test_fftconvolve_axes_match_jax():
    a, b = R.randn(3, 8).astype(np.float32), R.randn(3, 4).astype(np.float32)
    for axes in (1, -1, (1,), [1]):
        for mode in ("full", "same", "valid"):
            _compare(isignal.fftconvolve(a, b, mode, axes=axes),
                     jsignal.fftconvolve(a, b, mode, axes=axes), 2e-4, 2e-4)
    assert _outcome(lambda: isignal.fftconvolve(a, b[:2], axes=1)) == _outcome(
        lambda: jsignal.fftconvolve(a, b[:2], axes=1)) == "ValueError"


def test_signal_under_transformations_matches_jax():
    a, b = R.randn(7).astype(np.float32), R.randn(3).astype(np.float32)
    for name in ("convolve", "correlate", "fftconvolve"):
        mine, theirs = getattr(isignal, name), getattr(jsignal, name)
        loss_i = lambda x, y: inp.sum(mine(x, y, "same") ** 2)  # noqa: E731
        loss_j = lambda x, y: jnp.sum(theirs(x, y, "same") ** 2)  # noqa: E731
        for gi, gj in zip(impl.grad(loss_i, (0, 1))(a, b), jax.grad(loss_j, (0, 1))(a, b)):
            _compare(gi, gj, 2e-4, 2e-4)
        _compare(impl.jit(mine)(a, b), jax.jit(theirs)(a, b), 2e-4, 2e-4)
        _compare(impl.vmap(mine, (0, None))(np.stack([a, 2 * a]), b),
                 jax.vmap(theirs, (0, None))(np.stack([a, 2 * a]), b), 2e-4, 2e-4)
        ti = impl.jvp(lambda x: mine(x, b), (a,), (np.ones_like(a),))
        tj = jax.jvp(lambda x: theirs(x, b), (a,), (np.ones_like(a),))
        for x, y in zip(ti, tj):
            _compare(x, y, 2e-4, 2e-4)


def test_signal_errors_match_jax():
    a, b = np.ones(5, np.float32), np.ones(3, np.float32)
    m, k = np.ones((4, 4), np.float32), np.ones((2, 5), np.float32)
    cases = {
        "bad_mode": lambda s: s.convolve(a, b, "middle"),
        "bad_method": lambda s: s.convolve(a, b, method="winograd"),
        "ndim_mismatch": lambda s: s.convolve(a, m),
        "not_nested": lambda s: s.convolve(m, k),
        "empty": lambda s: s.convolve(a, np.ones(0, np.float32)),
        "boundary": lambda s: s.convolve2d(m, m, boundary="wrap"),
        "fillvalue": lambda s: s.correlate2d(m, m, fillvalue=1),
        "not_2d": lambda s: s.convolve2d(a, b),
        "fft_bad_mode": lambda s: s.fftconvolve(a, b, "middle"),
        "fft_valid_not_nested": lambda s: s.fftconvolve(m, k, "valid"),
        "list_input": lambda s: s.convolve([1.0, 2.0], b),
        "list_kernel": lambda s: s.correlate(a, [1.0, 2.0]),
    }
    got = {n: _outcome(lambda: c(isignal)) for n, c in cases.items()}
    want = {n: _outcome(lambda: c(jsignal)) for n, c in cases.items()}
    assert got == want
    assert "ok" not in got.values()


def _parameters(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_signal_signatures_match_jax():
    for name in isignal.__all__:
        assert _parameters(getattr(isignal, name)) == _parameters(getattr(jsignal, name)), name


# ------------------------------------------------------------------ shape tuples

def test_shape_tuple_helpers_match_jax():
    nchw = ("NCHW", "OIHW", "NCHW")
    cases = [
        ("conv_general_shape_tuple", ((2, 3, 9, 9), (4, 3, 3, 3), (2, 1), [(1, 1), (0, 0)], nchw)),
        ("conv_general_shape_tuple", ((2, 9, 9, 3), (3, 3, 3, 4), (2, 1), "SAME",
                                      ("NHWC", "HWIO", "NHWC"))),
        ("conv_general_shape_tuple", ((2, 9, 9, 3), (3, 3, 3, 4), (1, 3), "VALID",
                                      ("NHWC", "HWIO", "NHWC"))),
        ("conv_shape_tuple", ((2, 4, 9, 9), (4, 2, 3, 3), (2, 1), [(1, 1), (0, 0)], 2)),
        ("conv_shape_tuple", ((2, 3, 9, 9), (4, 3, 3, 3), (2, 1), "SAME")),
        ("conv_transpose_shape_tuple", ((2, 3, 9, 9), (4, 3, 3, 3), (2, 1), "SAME", nchw)),
        ("reduce_window_shape_tuple", ((4, 6), (2, 2), (1, 2), [(0, 0), (1, 1)])),
        ("reduce_window_shape_tuple", ((4, 6), (2, 2), (1, 2), [(0, 0), (1, 1)], (2, 1), (1, 2))),
    ]
    for name, args in cases:
        assert getattr(ilax, name)(*args) == getattr(jax.lax, name)(*args), name
    # and the shape a real convolution / window reduction of impl has
    x, w = np.ones((2, 3, 9, 9), np.float32), np.ones((4, 3, 3, 3), np.float32)
    out = ilax.conv_general_dilated(x, w, (2, 1), [(1, 1), (0, 0)], dimension_numbers=nchw)
    assert out.shape == ilax.conv_general_shape_tuple(x.shape, w.shape, (2, 1),
                                                      [(1, 1), (0, 0)], nchw)
    y = ilax.reduce_window(np.ones((4, 6), np.float32), 0.0, ilax.add, (2, 2), (1, 2),
                           [(0, 0), (1, 1)])
    assert y.shape == ilax.reduce_window_shape_tuple((4, 6), (2, 2), (1, 2), [(0, 0), (1, 1)])
    for bad in (lambda m: m.conv_general_shape_tuple((2, 3, 9, 9), (4, 3, 3, 3), (1, 1),
                                                     "SAME", None),
                lambda m: m.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 3), (1, 1), [(0, 0)])):
        assert _outcome(lambda: bad(ilax)) == _outcome(lambda: bad(jax.lax)) != "ok"


# ------------------------------------------------------------------ complex cholesky

def _hermitian(n, dtype=np.complex64, batch=()):
    a = R.randn(*batch, n, n) + 1j * R.randn(*batch, n, n)
    a = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)
    return a.astype(dtype)


def test_complex_cholesky_matches_jax():
    a, batch, wide = _hermitian(4), _hermitian(3, batch=(2,)), _hermitian(3, np.complex128)
    pairs = [
        (lambda: ilax.linalg.cholesky(a), lambda: jax.lax.linalg.cholesky(a)),
        (lambda: ilax.linalg.cholesky(a, symmetrize_input=False),
         lambda: jax.lax.linalg.cholesky(a, symmetrize_input=False)),
        (lambda: inp.linalg.cholesky(a), lambda: jnp.linalg.cholesky(a)),
        (lambda: inp.linalg.cholesky(a, upper=True), lambda: jnp.linalg.cholesky(a, upper=True)),
        (lambda: impl.vmap(ilax.linalg.cholesky)(batch), lambda: jax.vmap(
            jax.lax.linalg.cholesky)(batch)),
        (lambda: impl.jit(inp.linalg.cholesky)(wide), lambda: jax.jit(jnp.linalg.cholesky)(wide)),
    ]
    for mine, theirs in pairs:
        _compare(mine(), theirs(), 1e-5, 1e-5)


def test_complex_cholesky_derivatives_match_jax():
    a = _hermitian(3)
    weights = np.arange(9.0).reshape(3, 3).astype(np.float32)
    ti = impl.jvp(inp.linalg.cholesky, (a,), (0.1 * a,))
    tj = jax.jvp(jnp.linalg.cholesky, (a,), (0.1 * a,))
    for x, y in zip(ti, tj):
        _compare(x, y, 1e-4, 1e-5)
    gi = impl.grad(lambda x: inp.real(inp.sum(inp.linalg.cholesky(x) * weights)))(a)
    gj = jax.grad(lambda x: jnp.real(jnp.sum(jnp.linalg.cholesky(x) * weights)))(a)
    _compare(gi, gj, 1e-4, 1e-5)
    # and by finite differences, a reference that does not lean on JAX's rule
    itest_util.check_grads(lambda x: inp.linalg.cholesky(x), (_hermitian(3, np.complex128),),
                           1, modes=["fwd", "rev"])


def test_integer_matrices_factor_as_floats_like_jax():
    m = 2 * np.eye(3, dtype=np.int32)
    for mine, theirs in ((ilax.linalg.cholesky, jax.lax.linalg.cholesky),
                         (inp.linalg.cholesky, jnp.linalg.cholesky)):
        _compare(mine(m), theirs(m), 1e-6, 1e-6)


# ------------------------------------------------------------------ __all__

def test_star_import_brings_the_names_jax_shares():
    import types
    public = {n for n in dir(impl) if not n.startswith("_")}
    assert set(impl.__all__) <= public & set(vars(jax))
    # every shared name that is not a submodule imported later (jax.test_util, ...) is exported
    shared = {n for n in public & set(vars(jax))
              if not isinstance(getattr(impl, n), types.ModuleType)}
    assert shared <= set(impl.__all__), sorted(shared - set(impl.__all__))
    assert {"custom_jvp", "custom_vjp", "checkpoint", "remat", "grad", "vmap",
            "jit"} <= set(impl.__all__)
    assert "pile" not in impl.__all__  # impl-only names stay out
    namespace = {}
    exec("from impl import *", namespace)  # noqa: S102
    assert namespace["custom_jvp"] is impl.custom_jvp
    assert namespace["checkpoint"] is impl.checkpoint


# ------------------------------------------------------------------ tridiagonal_solve

def test_tridiagonal_solve_matches_jax_under_transformations():
    r = np.random.RandomState(1)
    dl, du = r.randn(2, 6).astype(np.float32)
    d = (r.randn(6) + 4).astype(np.float32)
    b = r.randn(6, 3).astype(np.float32)
    mine, theirs = ilax.linalg.tridiagonal_solve, jax.lax.linalg.tridiagonal_solve
    _compare(mine(dl, d, du, b), theirs(dl, d, du, b), 1e-5, 1e-5)
    batched = np.stack([b, 2 * b], 2)
    _compare(impl.vmap(mine, (None, None, None, 2))(dl, d, du, batched),
             jax.vmap(theirs, (None, None, None, 2))(dl, d, du, batched), 1e-5, 1e-5)
    diag_batch = np.stack([d, d + 1])
    _compare(impl.vmap(mine, (None, 0, None, None))(dl, diag_batch, du, b),
             jax.vmap(theirs, (None, 0, None, None))(dl, diag_batch, du, b), 1e-5, 1e-5)
    loss_i = lambda *a: inp.sum(inp.sin(mine(*a)))  # noqa: E731
    loss_j = lambda *a: jnp.sum(jnp.sin(theirs(*a)))  # noqa: E731
    for gi, gj in zip(impl.grad(loss_i, (0, 1, 2, 3))(dl, d, du, b),
                      jax.grad(loss_j, (0, 1, 2, 3))(dl, d, du, b)):
        _compare(gi, gj, 1e-4, 1e-5)
    args64 = tuple(a.astype(np.float64) for a in (dl, d, du, b))
    itest_util.check_grads(mine, args64, 1, modes=["fwd", "rev"])


# ------------------------------------------------------------------ platform_dependent

def test_platform_dependent_matches_jax():
    x = np.arange(3, dtype=np.float32)
    pick = lambda lax_, np_: lambda v: lax_.platform_dependent(  # noqa: E731
        v, cpu=np_.sin, default=np_.cos)
    _compare(pick(ilax, inp)(x), pick(jax.lax, jnp)(x))
    _compare(impl.jit(pick(ilax, inp))(x), jax.jit(pick(jax.lax, jnp))(x))
    _compare(impl.vmap(pick(ilax, inp))(x), jax.vmap(pick(jax.lax, jnp))(x))
    _compare(impl.grad(lambda v: pick(ilax, inp)(v))(1.0),
             jax.grad(lambda v: pick(jax.lax, jnp)(v))(1.0))
    # only the chosen branch is staged
    text = str(impl.make_jaxpr(pick(ilax, inp))(x))
    assert ("sin" in text) != ("cos" in text)
    _compare(ilax.platform_dependent(cpu=lambda: 1.0, default=lambda: 2.0),
             jax.lax.platform_dependent(cpu=lambda: 1.0, default=lambda: 2.0))
    no_branch = lambda m: m.platform_dependent(3.0, no_such_platform=lambda v: v)  # noqa: E731
    assert _outcome(lambda: no_branch(ilax)) == _outcome(lambda: no_branch(jax.lax)) \
        == "NotImplementedError"
