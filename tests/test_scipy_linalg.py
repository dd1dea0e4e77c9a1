"""impl.scipy.linalg against jax.scipy.linalg: values, jvp, grad and vmap under jit (one
program holding every function), SciPy's flags (lower, trans, unit_diagonal, assume_a,
permute_l, mode, pivoting), the deprecated batched-vector solves, and bad input."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg  # noqa: F401  (makes jax.scipy.linalg an attribute)
import numpy as np
import pytest

import impl
import impl.scipy.linalg as isl
from _compare import check
from helpers import assert_tree_close

jax.config.update("jax_enable_x64", True)
jsl = jax.scipy.linalg

RNG = np.random.RandomState(0)
A = RNG.normal(size=(4, 4))
RHS = RNG.normal(size=(4, 2))
TOL = dict(rtol=1e-9, atol=1e-10)


def linalg_program(B):
    """Every function of the module on matrices built from A: S is positive definite,
    T lower triangular and well conditioned (S is symmetrized first: JAX's and impl's
    Cholesky derivatives differ for tangents that are not symmetric, see
    tests/test_linalg.py)."""
    sl, np_ = B.api.scipy.linalg, B.np

    def f(a_rhs):
        a, rhs = a_rhs[:, :4], a_rhs[:, 4:]
        s = a @ a.T + 4 * np_.eye(4)
        s = (s + s.T) / 2
        t = np_.tril(a) + 4 * np_.eye(4)
        v = rhs[:, 0]
        lu_piv = sl.lu_factor(a)
        return {
            "tri": sl.solve_triangular(t, rhs, lower=True),
            "tri_trans_vec": sl.solve_triangular(t, v, lower=True, trans=1),
            "tri_upper_T_unit": sl.solve_triangular(t.T, rhs, trans="T", unit_diagonal=True),
            "tri_C": sl.solve_triangular(t.T, v, trans="C"),
            "chol": sl.cholesky(s), "chol_lower": sl.cholesky(s, lower=True),
            "cho_solve": sl.cho_solve(sl.cho_factor(s), rhs),
            "cho_solve_lower": sl.cho_solve(sl.cho_factor(s, lower=True), v),
            "lu": sl.lu(a), "lu_wide_permute_l": sl.lu(a[:3], permute_l=True),
            "lu_tall": sl.lu(a[:, :3]),
            "lu_factor": lu_piv,
            "lu_solve": sl.lu_solve(lu_piv, rhs), "lu_solve_T": sl.lu_solve(lu_piv, v, trans=1),
            "lu_solve_C": sl.lu_solve(lu_piv, rhs, trans=2),
            "solve": sl.solve(a, rhs), "solve_sym": sl.solve(s, v, assume_a="sym"),
            "solve_pos": sl.solve(s, rhs, assume_a="pos"),
            "solve_pos_lower": sl.solve(s, v, assume_a="pos", lower=True),
            "inv": sl.inv(a), "det": sl.det(a),
            "qr": sl.qr(a), "qr_economic": sl.qr(a[:, :3], mode="economic"),
            "qr_r": sl.qr(a, mode="r"),
            "svd": sl.svd(a[:3], full_matrices=False), "svdvals": sl.svd(a, compute_uv=False),
            "eigh": sl.eigh(s), "eigvalsh_upper": sl.eigh(s, lower=False, eigvals_only=True),
            "block_diag": sl.block_diag(a[:2], v, rhs, 3.0),
        }
    return f


def test_every_function_value_jvp_grad_vmap_under_jit():
    # one argument, A and RHS side by side: one vmap spec, a smaller program
    check(linalg_program, np.concatenate([A, RHS], axis=1), eager=False, **TOL)


def test_positive_definite_solve_differentiates_the_whole_matrix_as_jax():
    """assume_a='pos' reads one triangle for the value, but its derivative (as JAX's,
    through a linear solve) uses every entry of the tangent: -a^-1 da x."""
    s = A @ A.T + 4 * np.eye(4)
    ds = RNG.normal(size=(4, 4))       # not symmetric
    for lower in (False, True):
        got = impl.jvp(lambda s, b: isl.solve(s, b, assume_a="pos", lower=lower),
                       (s, RHS), (ds, RHS))
        want = jax.jvp(lambda s, b: jsl.solve(s, b, assume_a="pos", lower=lower),
                       (s, RHS), (ds, RHS))
        assert_tree_close(got, want, tol=TOL)
    x = np.linalg.solve(s, RHS)        # the closed form, independent of both
    np.testing.assert_allclose(got[1], np.linalg.solve(s, RHS - ds @ x), rtol=1e-10)


def test_qr_of_a_tall_matrix_and_with_pivoting():
    assert_tree_close(isl.qr(A[:, :3]), jsl.qr(A[:, :3]), tol=TOL)
    got, want = isl.qr(A[:, :3], pivoting=True), jsl.qr(A[:, :3], pivoting=True)
    assert_tree_close(got, want, tol=TOL, exact_non_float=True)
    assert_tree_close(isl.qr(A, mode="r", pivoting=True), jsl.qr(A, mode="r", pivoting=True),
                      tol=TOL, exact_non_float=True)


def test_batched_and_broadcast_solves():
    ts = np.tril(RNG.normal(size=(3, 4, 4))) + 4 * np.eye(4)
    for fn in (lambda m, a, b: m.solve_triangular(a, b, lower=True),
               lambda m, a, b: m.cho_solve(m.cho_factor(a @ np.swapaxes(a, -1, -2)), b),
               lambda m, a, b: m.lu_solve(m.lu_factor(a), b, trans=1)):
        assert_tree_close(fn(isl, ts, RHS), fn(jsl, ts, RHS), tol=TOL)
        assert_tree_close(fn(isl, ts, RHS[:, 0]), fn(jsl, ts, RHS[:, 0]), tol=TOL)


def test_batched_vectors_are_solved_with_jaxs_future_warning():
    ts = np.tril(RNG.normal(size=(3, 4, 4))) + 4 * np.eye(4)
    bs = RNG.normal(size=(3, 4))
    with pytest.warns(FutureWarning, match="batched 1D solves"):
        want = jsl.solve_triangular(ts, bs)
    with pytest.warns(FutureWarning, match="batched 1D solves"):
        got = isl.solve_triangular(ts, bs)
    assert_tree_close(got, want, tol=TOL)


def test_float32_and_integer_inputs_keep_jaxs_dtypes():
    a32 = A.astype(np.float32)
    for name, args in [("inv", (a32,)), ("det", (a32,)), ("lu", (a32,)),
                       ("solve", (a32, RHS.astype(np.float32))),
                       ("block_diag", (np.ones((2, 2), np.int32), np.ones((1,), np.int8))),
                       ("lu_factor", (np.eye(3, dtype=np.int32),))]:
        got, want = getattr(isl, name)(*args), getattr(jsl, name)(*args)
        assert_tree_close(got, want, tol=dict(rtol=2e-5, atol=2e-6), exact_non_float=True)


def test_block_diag_of_nothing():
    assert_tree_close(isl.block_diag(), jsl.block_diag(), tol=TOL)


@pytest.mark.parametrize("call,exc,match", [
    (lambda m: m.solve(A, RHS, assume_a="tri"), ValueError, "assume_a"),
    (lambda m: m.solve_triangular(A, RHS, trans=3), ValueError, "trans"),
    (lambda m: m.lu_solve(m.lu_factor(A), RHS, trans=4), ValueError, "trans"),
    (lambda m: m.lu_solve((A[:3], np.zeros(3, np.int32)), RHS), ValueError,
     "LU|core dimension"),
    (lambda m: m.qr(A, mode="raw"), ValueError, "mode"),
    (lambda m: m.eigh(A, A), NotImplementedError, "b=None"),
    (lambda m: m.eigh(A, type=2), NotImplementedError, "type=1"),
    (lambda m: m.eigh(A, eigvals=(0, 1)), NotImplementedError, "eigvals=None"),
    (lambda m: m.block_diag(np.ones((2, 2, 2))), ValueError, "at most 2"),
    (lambda m: m.solve(A, RHS[:3], assume_a="pos"), ValueError, "shapes"),
])
def test_bad_input_raises_as_jax(call, exc, match):
    with pytest.raises(exc, match=match):
        call(jsl)
    with pytest.raises(exc, match=match):
        call(isl)


def expm_program(B):
    sl = B.api.scipy.linalg

    def f(a):
        return {"expm": sl.expm(a), "small": sl.expm(a * 0.01),
                "upper": sl.expm(B.np.triu(a), upper_triangular=True)}
    return f


def test_expm_value_jvp_grad_vmap_under_jit():
    """Norms 3 and 0.03 take different Pade degrees; 3 also needs squarings."""
    a = A / np.abs(A).sum(0).max() * 3
    check(expm_program, a, eager=False, **TOL)


@pytest.mark.parametrize("scale", [1e-3, 0.5, 1.5, 20.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_expm_across_pade_degrees(scale, dtype):
    a = (A * scale).astype(dtype)
    want = jsl.expm(a)
    tol = TOL if dtype == np.float64 else dict(rtol=0, atol=2e-5 * float(np.abs(want).max()))
    assert_tree_close(isl.expm(a), want, tol=tol)


def test_expm_past_max_squarings_is_nan_as_jax():
    a = np.eye(2) * 1e6
    assert_tree_close(isl.expm(a, max_squarings=4), jsl.expm(a, max_squarings=4), tol=TOL)
    assert np.isnan(np.asarray(isl.expm(a, max_squarings=4))).all()


def test_expm_needs_square_matrices():
    for m in (jsl, isl):
        with pytest.raises(ValueError, match="square"):
            m.expm(np.ones((2, 3)))
