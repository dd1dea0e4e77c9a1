"""impl.scipy.linalg against jax.scipy.linalg: values, jvp, grad and vmap under jit (one
program holding every function), SciPy's flags (lower, trans, unit_diagonal, assume_a,
permute_l, mode, pivoting), the deprecated batched-vector solves, and bad input."""
from __future__ import annotations

import jax
import jax.scipy.linalg  # noqa: F401  (makes jax.scipy.linalg an attribute)
import numpy as np
import pytest

import impl
import impl.scipy.linalg as isl
from _compare import check
from helpers import F64, TOLERANCE, assert_tree_close

jsl = jax.scipy.linalg

RNG = np.random.RandomState(0)
A = RNG.normal(size=(4, 4))
RHS = RNG.normal(size=(4, 2))
TOL = TOLERANCE["programs"][F64]  # float64 decompositions and solves against JAX


def linalg_program(B, names=None):
    """Every function of the module (or those in `names`) on matrices built from A: S is
    positive definite, T lower triangular and well conditioned (S is symmetrized first:
    JAX's and impl's Cholesky derivatives differ for tangents that are not symmetric,
    see tests/test_linalg.py)."""
    sl, np_ = B.api.scipy.linalg, B.np

    def f(a_rhs):
        a, rhs = a_rhs[:, :4], a_rhs[:, 4:]
        s = a @ a.T + 4 * np_.eye(4)
        s = (s + s.T) / 2
        t = np_.tril(a) + 4 * np_.eye(4)
        v = rhs[:, 0]
        calls = {
            "tri": lambda: sl.solve_triangular(t, rhs, lower=True),
            "tri_trans_vec": lambda: sl.solve_triangular(t, v, lower=True, trans=1),
            "tri_upper_T_unit": lambda: sl.solve_triangular(t.T, rhs, trans="T",
                                                            unit_diagonal=True),
            "tri_C": lambda: sl.solve_triangular(t.T, v, trans="C"),
            "chol": lambda: sl.cholesky(s), "chol_lower": lambda: sl.cholesky(s, lower=True),
            "cho_solve": lambda: sl.cho_solve(sl.cho_factor(s), rhs),
            "cho_solve_lower": lambda: sl.cho_solve(sl.cho_factor(s, lower=True), v),
            "lu": lambda: sl.lu(a), "lu_wide_permute_l": lambda: sl.lu(a[:3], permute_l=True),
            "lu_tall": lambda: sl.lu(a[:, :3]),
            "lu_factor": lambda: sl.lu_factor(a),
            "lu_solve": lambda: sl.lu_solve(sl.lu_factor(a), rhs),
            "lu_solve_T": lambda: sl.lu_solve(sl.lu_factor(a), v, trans=1),
            "lu_solve_C": lambda: sl.lu_solve(sl.lu_factor(a), rhs, trans=2),
            "solve": lambda: sl.solve(a, rhs),
            "solve_sym": lambda: sl.solve(s, v, assume_a="sym"),
            "solve_pos": lambda: sl.solve(s, rhs, assume_a="pos"),
            "solve_pos_lower": lambda: sl.solve(s, v, assume_a="pos", lower=True),
            "inv": lambda: sl.inv(a), "det": lambda: sl.det(a),
            "qr": lambda: sl.qr(a), "qr_economic": lambda: sl.qr(a[:, :3], mode="economic"),
            "qr_r": lambda: sl.qr(a, mode="r"),
            "svd": lambda: sl.svd(a[:3], full_matrices=False),
            "svdvals": lambda: sl.svd(a, compute_uv=False),
            "eigh": lambda: sl.eigh(s),
            "eigvalsh_upper": lambda: sl.eigh(s, lower=False, eigvals_only=True),
            "block_diag": lambda: sl.block_diag(a[:2], v, rhs, 3.0),
        }
        return {name: call() for name, call in calls.items() if names is None or name in names}
    return f


A_RHS = np.concatenate([A, RHS], axis=1)   # one argument: one vmap spec, a smaller program
# what this module builds itself (the rest delegate to impl.lax.linalg / impl.numpy.linalg)
OWN = ["tri_upper_T_unit", "cho_solve_lower", "lu_wide_permute_l", "lu_solve_T",
       "solve_pos", "block_diag"]


def test_own_functions_value_jvp_grad_vmap_under_jit():
    check(lambda B: linalg_program(B, OWN), A_RHS, eager=False, **TOL)


@pytest.mark.slow
def test_every_function_value_jvp_grad_vmap_under_jit():
    check(linalg_program, A_RHS, eager=False, **TOL)


def test_every_function_value_under_jit():
    from _compare import IMPL, JAX
    assert_tree_close(impl.jit(linalg_program(IMPL))(A_RHS), jax.jit(linalg_program(JAX))(A_RHS),
                      tol=TOL, exact_non_float=True)


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

    def solves(m, ts, rhs):
        out = []
        for b in (rhs, rhs[:, 0]):   # batched matrices, one right-hand side broadcast
            out += [m.solve_triangular(ts, b, lower=True),
                    m.cho_solve(m.cho_factor(ts @ np.swapaxes(ts, -1, -2)), b),
                    m.lu_solve(m.lu_factor(ts), b, trans=1)]
        return out
    assert_tree_close(impl.jit(lambda *a: solves(isl, *a))(ts, RHS),
                      jax.jit(lambda *a: solves(jsl, *a))(ts, RHS), tol=TOL)


def test_batched_vectors_are_solved_with_jaxs_future_warning():
    ts = np.tril(RNG.normal(size=(3, 4, 4))) + 4 * np.eye(4)
    bs = RNG.normal(size=(3, 4))
    with pytest.warns(FutureWarning, match="batched 1D solves"):
        want = jsl.solve_triangular(ts, bs)
    with pytest.warns(FutureWarning, match="batched 1D solves"):
        got = isl.solve_triangular(ts, bs)
    assert_tree_close(got, want, tol=TOL)


def test_float32_and_integer_inputs_keep_jaxs_dtypes():
    a32, b32 = A.astype(np.float32), RHS.astype(np.float32)

    def calls(m, a32, b32, i2, i3):
        return [m.inv(a32), m.det(a32), m.lu(a32), m.solve(a32, b32),
                m.block_diag(i2, np.ones((1,), np.int8)), m.lu_factor(i3)]
    args = (a32, b32, np.ones((2, 2), np.int32), np.eye(3, dtype=np.int32))
    assert_tree_close(impl.jit(lambda *a: calls(isl, *a))(*args),
                      jax.jit(lambda *a: calls(jsl, *a))(*args),
                      tol=dict(rtol=2e-5, atol=2e-6), exact_non_float=True)


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


@pytest.mark.slow
def test_expm_value_jvp_grad_vmap_under_jit():
    """Norms 3 and 0.03 take different Pade degrees; 3 also needs squarings."""
    a = A / np.abs(A).sum(0).max() * 3
    check(expm_program, a, eager=False, **TOL)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_expm_across_pade_degrees_and_with_its_derivative(dtype):
    """A batch whose norms pick every Pade degree (and squarings); jvp in float64."""
    a = np.stack([A * scale for scale in (1e-3, 0.05, 0.2, 0.5, 1.5, 20.0)]).astype(dtype)
    want = jax.jit(jsl.expm)(a)
    tol = TOL if dtype == np.float64 else dict(rtol=0, atol=2e-5 * float(np.abs(want).max()))
    assert_tree_close(impl.jit(isl.expm)(a), want, tol=tol)
    if dtype == np.float64:
        t = np.ones_like(a)
        assert_tree_close(impl.jit(lambda a: impl.jvp(isl.expm, (a,), (t,)))(a),
                          jax.jit(lambda a: jax.jvp(jsl.expm, (a,), (t,)))(a),
                          tol=dict(rtol=1e-8, atol=1e-8))


def test_expm_past_max_squarings_is_nan_as_jax():
    a = np.eye(2) * 1e6
    assert_tree_close(isl.expm(a, max_squarings=4), jsl.expm(a, max_squarings=4), tol=TOL)
    assert np.isnan(np.asarray(isl.expm(a, max_squarings=4))).all()


def test_expm_needs_square_matrices():
    for m in (jsl, isl):
        with pytest.raises(ValueError, match="square"):
            m.expm(np.ones((2, 3)))
