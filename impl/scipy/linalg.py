"""jax.scipy.linalg over impl: SciPy's names and argument conventions (lower=, trans=,
(factor, flag) pairs) on top of the decompositions of `impl.lax.linalg`.

As in JAX, `overwrite_*`, `check_finite`, `debug`, `lwork`, `turbo` and `lapack_driver`
are accepted and have no effect: there is nothing to overwrite in place and compiled
code cannot check values. Everything else is honoured or refused by name.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from impl import lax
from impl import numpy as inp
from impl.core import get_aval
from impl.custom_derivatives import custom_jvp
from impl.numpy._util import promote
from impl.numpy.linalg import _floats
from impl.primitives import linalg_decompositions as dec

__all__ = ["solve_triangular", "cho_factor", "cho_solve", "cholesky", "lu", "lu_factor",
           "lu_solve", "solve", "inv", "det", "qr", "svd", "eigh", "block_diag", "expm"]


def _shape(x):
    return get_aval(x).shape


def _rhs_signature(name, a, b):
    """The gufunc signature of b for a solve with matrices a: a vector (n), or columns
    (n,k); b of one axis fewer than a whose last axis matches is a batch of vectors,
    which JAX still accepts with a FutureWarning."""
    a_shape, b_shape = _shape(a), _shape(b)
    if len(b_shape) == 1:
        return "(n)"
    if len(a_shape) == len(b_shape) + 1 and a_shape[-1] == b_shape[-1]:
        warnings.warn(f"jax.scipy.linalg.{name}: batched 1D solves with b.ndim > 1 are "
                      "deprecated, and in the future will be treated as a batched 2D solve. "
                      f"Use {name}(..., b[..., None]).squeeze(-1) to avoid this warning.",
                      category=FutureWarning, stacklevel=3)
        return "(n)"
    return "(n,k)"


def _solve_with(name, fn, a, *rest, b):
    """fn(a, *rest, b) over the broadcast batch axes of a and b (rest are (n) vectors)."""
    rhs = _rhs_signature(name, a, b)
    signature = "(n,n)," + "(n)," * len(rest) + f"{rhs}->{rhs}"
    return inp.vectorize(fn, signature=signature)(a, *rest, b)


# ------------------------------------------------------------- triangular solves

_TRANS = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """x with op(a) x = b, a triangular (its `lower` or upper triangle is read); op is
    the identity (trans 0/'N') or the transpose (1/'T', 2/'C': the same for reals)."""
    if trans not in _TRANS:
        raise ValueError(f"Invalid 'trans' value {trans}")
    a, b = _floats(a, b)
    solve = functools.partial(dec.triangular_solve, left_side=True, lower=bool(lower),
                              transpose_a=_TRANS[trans], unit_diagonal=bool(unit_diagonal))
    return _solve_with("solve_triangular", solve, a, b=b)


# --------------------------------------------------------------------- Cholesky

def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of positive definite a: upper U (a = U^T U) by default, lower L
    (a = L L^T) with lower=True; only that triangle of a is read."""
    (a,) = _floats(a)
    if lower:
        return dec.cholesky(a, symmetrize_input=False)
    return dec._mT(dec.cholesky(dec._mT(a), symmetrize_input=False))


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower): the Cholesky factor and which triangle it is, for cho_solve."""
    return cholesky(a, lower=lower), lower


def _cho_solve_core(c, b, *, lower):
    # a = L L^T: solve L y = b, then L^T x = y (with U = L^T the transposes swap)
    y = dec.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower)
    return dec.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a x = b, from cho_factor(a) = (c, lower)."""
    c, lower = c_and_lower
    c, b = _floats(c, b)
    return _solve_with("cho_solve", functools.partial(_cho_solve_core, lower=bool(lower)),
                       c, b=b)


# --------------------------------------------------------------------------- LU

def lu_factor(a, overwrite_a=False, check_finite=True):
    """(lu, piv): L (unit diagonal, below) and U (on and above) packed in one matrix, and
    LAPACK's row swaps, for lu_solve."""
    (a,) = _floats(a)
    lu_packed, pivots, _ = dec.lu(a)
    return lu_packed, pivots


def _lu_solve_core(lu_packed, permutation, b, *, trans):
    if not trans:   # P a = L U: x = U^-1 L^-1 P b
        x = inp.take(b, permutation, axis=0)
        x = dec.triangular_solve(lu_packed, x, left_side=True, lower=True,
                                 unit_diagonal=True)
        return dec.triangular_solve(lu_packed, x, left_side=True, lower=False)
    # a^T = U^T L^T P: x = P^T L^-T U^-T b
    x = dec.triangular_solve(lu_packed, b, left_side=True, lower=False, transpose_a=True)
    x = dec.triangular_solve(lu_packed, x, left_side=True, lower=True, unit_diagonal=True,
                             transpose_a=True)
    return inp.take(x, inp.argsort(permutation), axis=0)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """x with a x = b (trans 0) or a^T x = b (trans 1, or 2: the same for reals), from
    lu_factor(a)."""
    if trans not in (0, 1, 2):
        raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}")
    lu_packed, pivots = lu_and_piv
    lu_packed, b = _floats(lu_packed, b)
    shape = _shape(lu_packed)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError("last two dimensions of LU decomposition must be equal, got shape "
                         f"{shape}")
    permutation = dec.lu_pivots_to_permutation(pivots, shape[-2])
    solve = functools.partial(_lu_solve_core, trans=bool(trans))
    return _solve_with("lu_solve", solve, lu_packed, permutation, b=b)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """(p, l, u) with a = p l u, or (p l, u) with permute_l, for a 2D matrix a (m x n):
    l is m x k unit lower triangular, u is k x n upper triangular, k = min(m, n)."""
    (a,) = _floats(a)
    shape = _shape(a)
    if len(shape) != 2:
        raise ValueError(f"jax.scipy.linalg.lu: a must be a 2D matrix, got shape {shape}")
    m, n = shape
    k = min(m, n)
    dtype = get_aval(a).dtype
    lu_packed, _, permutation = dec.lu(a)
    p = inp.astype(inp.equal(permutation[None, :], np.arange(m, dtype=np.int32)[:, None]),
                   dtype)
    l_factor = inp.add(inp.tril(lu_packed, -1)[:, :k], np.eye(m, k, dtype=dtype))
    u_factor = inp.triu(lu_packed)[:k, :]
    if permute_l:
        return inp.matmul(p, l_factor, precision=lax.Precision.HIGHEST), u_factor
    return p, l_factor, u_factor


# ------------------------------------------------------------------ general solve

def _matvec(a, x):
    return inp.matmul(a, x[..., None])[..., 0] if get_aval(x).ndim == 1 else inp.matmul(a, x)


def _positive_definite_solver(lower):
    """x with a x = b for one positive definite a through its Cholesky factor (only the
    `lower` or upper triangle is read), differentiated as JAX's linear solve: every
    entry of a's tangent counts. (`lower` is closed over: a custom_jvp's nondiff bool
    argument would be traced.)"""
    @custom_jvp
    def solve_pd(a, b):
        return _cho_solve_core(cholesky(a, lower=lower), b, lower=lower)

    @solve_pd.defjvp
    def solve_pd_jvp(primals, tangents):
        # x = a^-1 b  =>  dx = a^-1 (db - da x)
        (a, b), (da, db) = primals, tangents
        factor = cholesky(lax.stop_gradient(a), lower=lower)
        x = _cho_solve_core(factor, b, lower=lower)
        return x, _cho_solve_core(factor, inp.subtract(db, _matvec(da, x)), lower=lower)

    return solve_pd


_POSITIVE_DEFINITE_SOLVERS = {lower: _positive_definite_solver(lower) for lower in (False, True)}


_ASSUME_A = ["gen", "sym", "her", "pos"]


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    """x with a x = b. assume_a 'gen', 'sym' and 'her' use the LU decomposition (as JAX
    does); 'pos' the Cholesky factor of the `lower` or upper triangle of a."""
    if assume_a not in _ASSUME_A:
        raise ValueError(f"Expected assume_a to be one of {_ASSUME_A}; got {assume_a!r}")
    if assume_a != "pos":
        return inp.linalg.solve(a, b)
    a, b = _floats(a, b)
    a_shape, b_shape = _shape(a), _shape(b)
    if not (len(a_shape) >= 2 and len(b_shape) in (len(a_shape), len(a_shape) - 1)
            and a_shape[-1] == a_shape[-2] == b_shape[len(a_shape) - 2]):
        raise ValueError("The arguments to solve must have shapes a=[..., m, m] and "
                         f"b=[..., m, k] or b=[..., m]; got a={a_shape} and b={b_shape}")
    rhs = "(n)" if len(a_shape) == len(b_shape) + 1 else "(n,k)"
    return inp.vectorize(_POSITIVE_DEFINITE_SOLVERS[bool(lower)],
                         signature=f"(n,n),{rhs}->{rhs}")(a, b)


def inv(a, overwrite_a=False, check_finite=True):
    return inp.linalg.inv(a)


def det(a, overwrite_a=False, check_finite=True):
    return inp.linalg.det(a)


# ------------------------------------------------------------- decompositions

_QR_FULL = {"full": True, "r": True, "economic": False}


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """(q, r), or (r,) with mode 'r'; with pivoting also the column permutation p
    (a[:, p] = q r). mode 'economic' gives the reduced factors."""
    if mode not in _QR_FULL:
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    (a,) = _floats(a)
    q, r, *p = dec.qr(a, pivoting=pivoting, full_matrices=_QR_FULL[mode])
    return ((r,) if mode == "r" else (q, r)) + tuple(p)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """(u, s, vh) with a = u diag(s) vh, or only s without compute_uv."""
    (a,) = _floats(a)
    return dec.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True):  # noqa: A002 (SciPy's name)
    """(w, v): the ascending eigenvalues and eigenvectors of symmetric a, or only w."""
    if b is not None:
        raise NotImplementedError("Only the b=None case of eigh is implemented")
    if type != 1:
        raise NotImplementedError("Only the type=1 case of eigh is implemented.")
    if eigvals is not None:
        raise NotImplementedError("Only the eigvals=None case of eigh is implemented.")
    (a,) = _floats(a)
    v, w = dec.eigh(a, lower=lower)
    return w if eigvals_only else (w, v)


# ------------------------------------------------------------------- builders

def block_diag(*arrs):
    """The arrays (at most 2D; scalars and vectors count as one row) along the diagonal
    of one matrix, zeros elsewhere."""
    if not arrs:
        arrs = (inp.zeros((1, 0)),)
    arrs = promote(*arrs)
    for i, x in enumerate(arrs):
        if get_aval(x).ndim > 2:
            raise ValueError("Arguments to jax.scipy.linalg.block_diag must have at most 2 "
                             f"dimensions, got {x} at argument {i}.")
    blocks = [inp.atleast_2d(x) for x in arrs]
    dtype = get_aval(blocks[0]).dtype
    total_cols = sum(_shape(x)[1] for x in blocks)
    rows, col = [], 0
    for x in blocks:
        cols = _shape(x)[1]
        padding = [(0, 0, 0), (col, total_cols - col - cols, 0)]
        rows.append(lax.pad(x, np.zeros((), dtype), padding))
        col += cols
    return inp.concatenate(rows, axis=0)


# ------------------------------------------------------------------ expm

def _pade_coefficients(m):
    """b_0..b_m of the degree-m Pade approximant of exp, scaled so that b_m = 1:
    b_j = (2m - j)! m! / ((2m)! j! (m - j)!) / (the same for j = m)."""
    def c(j):
        return math.factorial(2 * m - j) * math.factorial(m) / (
            math.factorial(2 * m) * math.factorial(j) * math.factorial(m - j))
    return [c(j) / c(m) for j in range(m + 1)]


def _dot(x, y):
    return inp.matmul(x, y, precision=lax.Precision.HIGHEST)


def _pade(m):
    """A -> (U, V), the odd and even parts of the numerator of the degree-m Pade
    approximant r_m(A) = (V - U)^-1 (V + U) (Higham 2005). Degree 13 writes its high
    powers as A^6 (...) to save products."""
    b = _pade_coefficients(m)
    top = 3 if m == 13 else (m - 1) // 2      # the highest even power needed, halved

    def combine(coefficients, powers):     # highest power first, as JAX sums
        terms = [c * p for c, p in zip(coefficients, powers)][::-1]
        return functools.reduce(inp.add, terms)

    def approximant(a):
        eye = np.eye(_shape(a)[0], dtype=get_aval(a).dtype)
        a2 = _dot(a, a)
        powers = [eye, a2]                 # A^0, A^2, A^4, ...
        while len(powers) <= top:
            powers.append(_dot(powers[-1], a2))
        odd, even = b[1::2], b[0::2]
        if m == 13:
            a6 = powers[3]
            u = inp.add(_dot(a6, combine(odd[4:], powers[1:])), combine(odd[:4], powers))
            v = inp.add(_dot(a6, combine(even[4:], powers[1:])), combine(even[:4], powers))
            return _dot(a, u), v
        return _dot(a, combine(odd, powers)), combine(even, powers)
    return approximant


# Higham's bounds on ||A||_1 for each degree's accuracy, and the largest norm before
# scaling: (degrees, thresholds between them, max norm) per precision
_EXPM_PLANS = {8: ((3, 5, 7, 9, 13), (0.01495585217958292, 0.253939833006323,
                                      0.9504178996162932, 2.097847961257068),
                   5.371920351148152),
               4: ((3, 5, 7), (0.4258730016922831, 1.880152677804762), 3.92572478313866)}


def _expm_one(a, upper_triangular, max_squarings):
    dtype = get_aval(a).dtype
    if dtype.itemsize not in _EXPM_PLANS:
        raise TypeError(f"A.dtype={dtype} is not supported.")
    degrees, thresholds, max_norm = _EXPM_PLANS[dtype.itemsize]
    norm = inp.max(inp.sum(inp.abs(a), axis=0))
    n_squarings = inp.maximum(0, inp.floor(inp.log2(inp.divide(norm, max_norm))))
    a = inp.divide(a, inp.power(2, inp.astype(n_squarings, dtype)))
    degree = inp.sum(inp.astype(inp.greater_equal(norm, np.array(thresholds, dtype)),
                                np.int32))
    u, v = lax.switch(degree, [_pade(m) for m in degrees], a)
    p, q = inp.add(u, v), inp.subtract(v, u)

    def compute(p, q):
        r = solve_triangular(q, p) if upper_triangular else inp.linalg.solve(q, p)

        def square_while_needed(r, i):
            return lax.cond(i < n_squarings, lambda r: _dot(r, r), lambda r: r, r), None
        steps = np.arange(max_squarings, dtype=get_aval(n_squarings).dtype)
        return lax.scan(square_while_needed, r, steps)[0]

    # past max_squarings the scaling would not be undone: NaN, as JAX
    return lax.cond(n_squarings > max_squarings, lambda p, q: inp.full_like(p, np.nan),
                    compute, p, q)


def expm(A, *, upper_triangular=False, max_squarings=16):
    """The matrix exponential by scaling and squaring with a Pade approximant whose
    degree the 1-norm picks (Higham 2005); NaN when more than max_squarings squarings
    would be needed. upper_triangular: A is upper triangular (a triangular solve)."""
    (A,) = _floats(A)
    shape = _shape(A)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"Expected A to be a (batched) square matrix, got A.shape={shape}.")
    one = functools.partial(_expm_one, upper_triangular=upper_triangular,
                            max_squarings=int(max_squarings))
    return inp.vectorize(one, signature="(n,n)->(n,n)")(A)
