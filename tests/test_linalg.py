"""Matrix decompositions (impl.lax.linalg) and impl.numpy.linalg against JAX.

Each case runs through value, jit, jvp, grad and vmap (see _against_jax.py) in float64,
with the jvp also checked against central finite differences (so JAX's own derivative
rules are not the only reference); the decompositions also run in float32, and (slow,
nightly) with every transformation evaluated eagerly.
Inputs are well conditioned (distinct eigenvalues and singular values, positive
definite where needed), where the derivatives are defined.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from impl import lax as ilax
from _against_jax import check_transforms, rng_for

FLOATS = [np.float64, np.float32]


def general(m, n, seed=0):
    return lambda dtype: rng_for("general", m, n, seed).standard_normal((m, n)).astype(dtype)


def well_conditioned(n, seed=0):
    """A square matrix with singular values in [1, 3] (LU pivots and solves are stable)."""
    def make(dtype):
        rng = rng_for("wc", n, seed)
        q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
        q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
        return (q1 @ np.diag(np.linspace(1, 3, n)) @ q2).astype(dtype)
    return make


def spd(n, seed=0):
    """Symmetric positive definite, eigenvalues spread apart (1, 2, ..., n)."""
    def make(dtype):
        q, _ = np.linalg.qr(rng_for("spd", n, seed).standard_normal((n, n)))
        return (q @ np.diag(np.arange(1.0, n + 1)) @ q.T).astype(dtype)
    return make


def symmetric(n, seed=0):
    """Symmetric with distinct eigenvalues of both signs."""
    def make(dtype):
        q, _ = np.linalg.qr(rng_for("sym", n, seed).standard_normal((n, n)))
        return (q @ np.diag(np.linspace(-2.5, 3.0, n)) @ q.T).astype(dtype)
    return make


def triangular(n, lower):
    def make(dtype):
        a = rng_for("tri", n, lower).standard_normal((n, n)) * 0.3 + 2 * np.eye(n)
        return (np.tril(a) if lower else np.triu(a)).astype(dtype)
    return make


class Case:
    def __init__(self, name, impl_fn, jax_fn, makers, fd=True, float32=False):
        self.name, self.impl_fn, self.jax_fn, self.makers = name, impl_fn, jax_fn, makers
        self.fd, self.float32 = fd, float32

    def __repr__(self):
        return self.name


def _both(fn_of_module):
    """(impl version, jax version) of a function written against a numpy module."""
    return fn_of_module(inp), fn_of_module(jnp)


def _lax_both(fn_of_lax):
    return fn_of_lax(ilax), fn_of_lax(jax.lax)


def case(name, fn_of_module, makers, **kw):
    return Case(name, *_both(fn_of_module), makers, **kw)


def lax_case(name, fn_of_lax, makers, **kw):
    return Case(name, *_lax_both(fn_of_lax), makers, float32=True, **kw)


LAX_CASES = [
    lax_case("cholesky", lambda l: l.linalg.cholesky, [spd(4)]),
    lax_case("triangular_solve_left_lower",
             lambda l: lambda a, b: l.linalg.triangular_solve(a, b, left_side=True,
                                                              lower=True),
             [triangular(4, True), general(4, 2)]),
    lax_case("triangular_solve_right_upper_transpose",
             lambda l: lambda a, b: l.linalg.triangular_solve(a, b, left_side=False,
                                                              lower=False, transpose_a=True),
             [triangular(3, False), general(2, 3)]),
    lax_case("triangular_solve_unit_diagonal",
             lambda l: lambda a, b: l.linalg.triangular_solve(a, b, left_side=True,
                                                              lower=True, unit_diagonal=True),
             [triangular(3, True), general(3, 3)]),
    lax_case("lu_square", lambda l: l.linalg.lu, [well_conditioned(4)]),
    lax_case("lu_tall", lambda l: l.linalg.lu, [general(5, 3)]),
    lax_case("lu_wide", lambda l: l.linalg.lu, [general(3, 5)]),
    lax_case("qr_tall_reduced",
             lambda l: lambda x: l.linalg.qr(x, full_matrices=False), [general(5, 3)]),
    lax_case("qr_square_full", lambda l: l.linalg.qr, [general(4, 4)]),
    lax_case("qr_wide", lambda l: lambda x: l.linalg.qr(x, full_matrices=False),
             [general(3, 5)]),
    lax_case("eigh", lambda l: l.linalg.eigh, [symmetric(4)]),
    lax_case("svd_tall", lambda l: lambda x: l.linalg.svd(x, full_matrices=False),
             [general(5, 3)]),
    lax_case("svd_wide_values_only",
             lambda l: lambda x: l.linalg.svd(x, compute_uv=False), [general(3, 5)]),
    lax_case("svd_square_full", lambda l: l.linalg.svd, [general(3, 3)]),
]

NUMPY_CASES = [
    case("solve_matrix", lambda m: m.linalg.solve, [well_conditioned(4), general(4, 2)]),
    case("solve_vector", lambda m: m.linalg.solve,
         [well_conditioned(3), lambda d: general(3, 1)(d)[:, 0]]),
    case("inv", lambda m: m.linalg.inv, [well_conditioned(4)]),
    case("det_4x4", lambda m: m.linalg.det, [well_conditioned(4)]),
    case("det_3x3", lambda m: m.linalg.det, [general(3, 3)]),
    case("slogdet_4x4", lambda m: m.linalg.slogdet, [well_conditioned(4, 1)]),
    case("slogdet_2x2", lambda m: m.linalg.slogdet, [general(2, 2)]),
    case("cholesky_upper", lambda m: lambda x: m.linalg.cholesky(x, upper=True), [spd(3)]),
    case("eigh_upper", lambda m: lambda x: m.linalg.eigh(x, UPLO="U"), [symmetric(3)]),
    case("eigvalsh", lambda m: m.linalg.eigvalsh, [symmetric(4, 1)]),
    case("qr_reduced", lambda m: m.linalg.qr, [general(4, 3)]),
    case("qr_r", lambda m: lambda x: m.linalg.qr(x, mode="r"), [general(3, 4)]),
    case("svd_reduced", lambda m: lambda x: m.linalg.svd(x, full_matrices=False),
         [general(3, 4)]),
    case("svd_hermitian", lambda m: lambda x: m.linalg.svd(x, hermitian=True),
         [symmetric(4, 2)]),
    case("svdvals", lambda m: m.linalg.svdvals, [general(4, 3)]),
    case("pinv_tall", lambda m: m.linalg.pinv, [general(4, 3)]),
    case("pinv_wide_rtol", lambda m: lambda x: m.linalg.pinv(x, rtol=1e-3), [general(2, 4)]),
    case("lstsq", lambda m: lambda a, b: m.linalg.lstsq(a, b)[:2] + m.linalg.lstsq(a, b)[3:],
         [general(5, 3), general(5, 2)]),
    case("norm_fro_default", lambda m: m.linalg.norm, [general(3, 4)]),
    case("norm_nuc", lambda m: lambda x: m.linalg.norm(x, "nuc"), [general(3, 4)]),
    case("norm_2_and_minus_2", lambda m: lambda x: (m.linalg.norm(x, 2), m.linalg.norm(x, -2)),
         [general(4, 3)]),
    case("norm_1_inf_keepdims",
         lambda m: lambda x: (m.linalg.norm(x, 1, keepdims=True), m.linalg.norm(x, np.inf)),
         [general(3, 4)], fd=False),
    case("norm_vector_p", lambda m: lambda x: m.linalg.norm(x, 3, axis=1), [general(3, 4)]),
    case("norm_matrix_axes", lambda m: lambda x: m.linalg.norm(x.reshape(2, 2, 3), 2,
                                                               axis=(2, 0)),
         [general(3, 4)]),
    case("vector_and_matrix_norm",
         lambda m: lambda x: (m.linalg.vector_norm(x, ord=1, axis=0),
                              m.linalg.matrix_norm(x, ord="nuc")), [general(3, 4)], fd=False),
    case("matrix_power_5", lambda m: lambda x: m.linalg.matrix_power(x, 5),
         [lambda d: (well_conditioned(3)(d) / 2).astype(d)]),
    case("matrix_power_minus_2", lambda m: lambda x: m.linalg.matrix_power(x, -2),
         [well_conditioned(3)]),
    case("cond_all_orders", lambda m: lambda x: (
        m.linalg.cond(x), m.linalg.cond(x, -2), m.linalg.cond(x, "fro"), m.linalg.cond(x, 1),
        m.linalg.cond(x, -np.inf)), [well_conditioned(3)]),
    case("cond_rectangular", lambda m: m.linalg.cond, [general(4, 3)]),
    case("array_api_aliases", lambda m: lambda a, b: (
        m.linalg.trace(a, offset=1), m.linalg.diagonal(a, offset=-1),
        m.linalg.outer(a[0], b[:, 1]), m.linalg.cross(a, b[:, :3]),
        m.linalg.vecdot(a, b[:, 1:], axis=0), m.linalg.matmul(a, b),
        m.linalg.tensordot(a, b, axes=1)), [general(3, 3), general(3, 4)]),
    case("multi_dot", lambda m: lambda a, b, c: m.linalg.multi_dot([a, b, c]),
         [lambda d: general(1, 3)(d)[0], general(3, 6), general(6, 2)]),
]

ALL = LAX_CASES + NUMPY_CASES


def _run(case, dtype, eager=False):
    args = [make(dtype) for make in case.makers]
    check_transforms(case.name, case.impl_fn, case.jax_fn, args, eager=eager,
                     fd=case.fd and dtype == np.float64)


@pytest.mark.parametrize("case", ALL, ids=repr)
def test_float64(case):
    _run(case, np.float64)


@pytest.mark.slow
@pytest.mark.parametrize("case", LAX_CASES, ids=repr)
def test_float64_eager(case):
    """Every transformation evaluated eagerly too (each primitive compiled on its own)."""
    _run(case, np.float64, eager=True)


@pytest.mark.parametrize("case", [c for c in ALL if c.float32], ids=repr)
def test_float32(case):
    _run(case, np.float32)


# ----------------------------------------------------------- specific behaviour

def test_lu_pivots_and_permutation_match_jax():
    x = general(4, 4, seed=3)(np.float64)
    assert type(ilax.linalg.lu(x)) is type(jax.lax.linalg.lu(x))   # a list in JAX 0.10
    lu, piv, perm = ilax.linalg.lu(x)
    jlu, jpiv, jperm = jax.lax.linalg.lu(x)
    np.testing.assert_array_equal(piv, jpiv)
    np.testing.assert_array_equal(perm, jperm)
    assert piv.dtype == np.int32 and perm.dtype == np.int32
    np.testing.assert_array_equal(ilax.linalg.lu_pivots_to_permutation(piv, 4), jperm)
    batched = np.stack([piv, piv[::-1] % 4])
    np.testing.assert_array_equal(
        impl.vmap(lambda p: ilax.linalg.lu_pivots_to_permutation(p, 5))(batched),
        jax.vmap(lambda p: jax.lax.linalg.lu_pivots_to_permutation(p, 5))(batched))


def test_triangular_solve_transpose_in_rhs():
    """linear_transpose of a solve in its right-hand side is the transposed solve."""
    a = triangular(3, True)(np.float64)
    b = general(3, 2)(np.float64)
    ct = general(3, 2, seed=1)(np.float64)
    solve = lambda l: lambda v: l.linalg.triangular_solve(a, v, left_side=True,  # noqa: E731
                                                          lower=True)
    got = impl.linear_transpose(solve(ilax), b)(ct)
    want = jax.linear_transpose(solve(jax.lax), b)(ct)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)


def test_triangular_solve_vector_and_batched_rhs_only():
    a = triangular(3, False)(np.float64)
    bs = general(4, 3)(np.float64)
    for left in (True, False):
        f = lambda l: lambda b: l.linalg.triangular_solve(a, b, left_side=left)  # noqa: E731
        np.testing.assert_allclose(impl.vmap(f(ilax))(bs), jax.vmap(f(jax.lax))(bs),
                                   rtol=1e-12)
        np.testing.assert_allclose(f(ilax)(bs[0]), f(jax.lax)(bs[0]), rtol=1e-12)


def test_second_derivative_of_logdet():
    """Forward over reverse through lu: the Hessian-vector product of log|det|."""
    x = well_conditioned(3)(np.float64)
    t = general(3, 3, seed=4)(np.float64)
    got = impl.jvp(impl.grad(lambda a: inp.linalg.slogdet(a)[1]), (x,), (t,))[1]
    want = -np.linalg.inv(x).T @ t.T @ np.linalg.inv(x).T   # d(A^{-T}) = -A^{-T} dA^T A^{-T}
    np.testing.assert_allclose(got, want, rtol=1e-9)


def _central_difference(fn, x, t, eps=1e-6):
    return [(np.asarray(p) - np.asarray(m)) / (2 * eps) for p, m in
            zip(jax.tree_util.tree_leaves(fn(x + eps * t)),
                jax.tree_util.tree_leaves(fn(x - eps * t)))]


ONE_TRIANGLE = {
    "cholesky": lambda l: lambda a: l.linalg.cholesky(a, symmetrize_input=False),
    "eigh_lower": lambda l: lambda a: l.linalg.eigh(a, symmetrize_input=False),
    "eigh_upper": lambda l: lambda a: l.linalg.eigh(a, lower=False, symmetrize_input=False),
}


@pytest.mark.parametrize("which", list(ONE_TRIANGLE))
def test_one_triangle_reads_differentiate_like_finite_differences(which):
    """With symmetrize_input=False only one triangle of the input is read, so a
    non-symmetric tangent acts through that triangle (mirrored)."""
    x = spd(3)(np.float64)
    t = general(3, 3, seed=5)(np.float64)          # not symmetric
    fn = ONE_TRIANGLE[which](ilax)
    got = jax.tree_util.tree_leaves(impl.jvp(fn, (x,), (t,))[1])
    for g, want in zip(got, _central_difference(fn, x, t)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)


@pytest.mark.xfail(strict=True, reason="JAX bug: the jvp of cholesky/eigh with "
                   "symmetrize_input=False uses the whole tangent although only one "
                   "triangle of the input is read (disagrees with finite differences)")
@pytest.mark.parametrize("which", list(ONE_TRIANGLE))
def test_jax_one_triangle_reads_against_finite_differences(which):
    # Minimal program:
    #   x = q @ diag(1, 2, 3) @ q.T; t = a non-symmetric 3x3 matrix
    #   jax.jvp(lambda a: jax.lax.linalg.cholesky(a, symmetrize_input=False), (x,), (t,))
    #   differs from (chol(x + e t) - chol(x - e t)) / 2e.
    x = spd(3)(np.float64)
    t = general(3, 3, seed=5)(np.float64)
    fn = ONE_TRIANGLE[which](jax.lax)
    got = jax.tree_util.tree_leaves(jax.jvp(fn, (x,), (t,))[1])
    for g, want in zip(got, _central_difference(fn, x, t)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)


def test_complete_qr_derivative_of_tall_matrix_is_reported():
    x = general(4, 2)(np.float64)
    with pytest.raises(NotImplementedError, match="full_matrices=True"):
        impl.jvp(lambda a: inp.linalg.qr(a, mode="complete"), (x,), (x,))


@pytest.mark.parametrize("call, error, match", [
    (lambda: inp.linalg.solve(np.ones(3), np.ones(3)), ValueError, "at least two"),
    (lambda: inp.linalg.inv(np.ones((2, 3))), ValueError, r"\[\.\.\., n, n\]"),
    (lambda: inp.linalg.det(np.ones((2, 3))), ValueError, r"\[\.\.\., n, n\]"),
    (lambda: inp.linalg.slogdet(np.eye(3), method="svd"), ValueError, "Unknown slogdet"),
    (lambda: inp.linalg.eigh(np.eye(3), UPLO="X"), ValueError, "UPLO"),
    (lambda: inp.linalg.qr(np.eye(3), mode="economic"), ValueError, "mode"),
    (lambda: inp.linalg.norm(np.ones((2, 2)), "bad"), ValueError, "Invalid order"),
    (lambda: inp.linalg.norm(np.ones((2, 2, 2)), axis=(0, 1, 2)), ValueError, "number of axes"),
    (lambda: inp.linalg.matrix_power(np.eye(2), 1.5), TypeError, "integer"),
    (lambda: inp.linalg.pinv(np.eye(2), rtol=0.1, rcond=0.1), ValueError, "only one"),
    (lambda: ilax.linalg.cholesky(np.ones((2, 3))), ValueError, "square"),
    # (with symmetrize_input, the default, integers are divided into floats first, as in JAX)
    (lambda: ilax.linalg.cholesky(np.ones((2, 2), np.int32), symmetrize_input=False),
     TypeError, "floating"),
    (lambda: ilax.linalg.triangular_solve(np.eye(3), np.ones((2, 2)), left_side=True),
     ValueError, "incompatible shapes"),
    (lambda: ilax.linalg.svd(np.ones(3)), ValueError, "at least 2 axes"),
], ids=["solve_1d", "inv", "det", "slogdet_method", "uplo", "qr_mode", "norm_ord",
        "norm_axes", "matrix_power", "pinv_rcond", "cholesky_shape", "cholesky_dtype",
        "triangular_solve", "svd_rank"])
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_jax_raises_the_same_errors():
    """The messages above follow JAX's where JAX has one."""
    with pytest.raises(ValueError, match=r"Argument to inv must have shape \[\.\.\., n, n\]"):
        jnp.linalg.inv(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"Argument to inv must have shape \[\.\.\., n, n\]"):
        inp.linalg.inv(np.ones((2, 3)))
    with pytest.raises(ValueError, match="Invalid order 'bad' for matrix norm"):
        jnp.linalg.norm(np.ones((2, 2)), "bad")
