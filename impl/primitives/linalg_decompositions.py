"""Matrix decompositions and triangular solves, each with all of its rules.

Primitives: cholesky, triangular_solve, lu, lu_pivots_to_permutation, qr, eigh, svd.
All act on the last two axes and map over any leading ones, so one batching rule
(batch axis first, unbatched operands broadcast) serves every primitive except
triangular_solve, which folds a batched right-hand side into its columns instead.

Derivatives are written with other primitives, linear in the tangent (triangular
solves, products with primal-dependent matrices, masks), so reverse mode transposes
them without further rules. triangular_solve is linear in its right-hand side and
has a transpose rule for it. Only real floating dtypes are accepted.
"""
from __future__ import annotations

import jax
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import ad, batching
from impl.interpreters.ad import Zero, is_undefined_primal
from impl.primitives import elementwise as ew
from impl.primitives import indexing as ix
from impl.primitives import shape as sh
from impl.primitives import sharding_rules
from impl.primitives._define import define
from impl.primitives.complex_parts import conj
from impl.primitives.linalg import dot_general
from impl.primitives.reductions import take_along_axis


# ------------------------------------------------------------- type checks

def _check_float(name, aval):
    if not (np.issubdtype(aval.dtype, np.floating) and aval.dtype != core.float0):
        kind = "complex" if np.issubdtype(aval.dtype, np.complexfloating) else str(aval.dtype)
        raise TypeError(f"{name}: needs a real floating-point operand, got {aval.str_short()}"
                        + (" (complex matrices are not supported by impl)"
                           if kind == "complex" else ""))


def _check_inexact(name, aval):
    """Floating-point or complex: the decompositions that are defined for Hermitian
    matrices (cholesky, and the triangular solves it needs) take complex operands."""
    if not np.issubdtype(aval.dtype, np.complexfloating):
        _check_float(name, aval)


def _check_matrix(name, aval, square=False, complex_ok=False):
    if aval.ndim < 2:
        raise ValueError(f"{name}: needs an array of shape [..., m, n] (at least 2 axes), got "
                         f"shape {aval.shape}")
    if square and aval.shape[-1] != aval.shape[-2]:
        raise ValueError(f"{name}: needs square matrices of shape [..., n, n], got shape "
                         f"{aval.shape}")
    (_check_inexact if complex_ok else _check_float)(name, aval)


# ------------------------------------------------------------- matrix helpers
# Small building blocks for the derivative rules; each is linear in its array
# argument (masks and identities are constants), so rules built from them transpose.

def _mT(x):
    """Swap the last two axes."""
    nd = get_aval(x).ndim
    return sh.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _matmul(a, b):
    """Batched a @ b over equal leading axes."""
    nd = get_aval(a).ndim
    batch = tuple(range(nd - 2))
    return dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _constant_matrix(mat, like_shape):
    """A (rows, cols) numpy constant broadcast over the leading axes of `like_shape`."""
    nd = len(like_shape)
    return sh.broadcast_in_dim(mat, tuple(like_shape[:-2]) + mat.shape, (nd - 2, nd - 1))


def _keep_where(x, mask):
    """x where the (rows, cols) boolean `mask` holds, zero elsewhere (the mask sharded
    as x: a select's predicate must be, over Explicit mesh axes)."""
    aval = get_aval(x)
    nd = aval.ndim
    which = sh.broadcast_in_dim(mask, aval.shape, (nd - 2, nd - 1),
                                out_sharding=aval.explicit_sharding)
    return ew.select_n(which, ew.zeros_like(x), x)


def _tril(x, k=0):
    m, n = get_aval(x).shape[-2:]
    return _keep_where(x, np.tri(m, n, k, dtype=bool))


def _triu(x, k=0):
    m, n = get_aval(x).shape[-2:]
    return _keep_where(x, ~np.tri(m, n, k - 1, dtype=bool))


def _eye_like(x, n=None):
    """The identity (n x n, default the trailing size of x) over x's leading axes."""
    aval = get_aval(x)
    n = aval.shape[-1] if n is None else n
    return _constant_matrix(np.eye(n, dtype=aval.dtype), aval.shape[:-2] + (n, n))


def _diagonal(x):
    """The main diagonal of square matrices: (..., n, n) -> (..., n)."""
    n = get_aval(x).shape[-1]
    return sh.reduce_sum(_keep_where(x, np.eye(n, dtype=bool)), (get_aval(x).ndim - 1,))


def _rows_like(v, shape):
    """v (..., n) repeated down the rows of a (..., m, n) matrix: entry [i, j] = v[j]."""
    nd = len(shape)
    return sh.broadcast_in_dim(v, shape, tuple(range(nd - 2)) + (nd - 1,))


def _cols_like(v, shape):
    """v (..., m) repeated across the columns of a (..., m, n) matrix: [i, j] = v[i]."""
    nd = len(shape)
    return sh.broadcast_in_dim(v, shape, tuple(range(nd - 2)) + (nd - 2,))


def _slice_last2(x, rows, cols):
    """x[..., rows[0]:rows[1], cols[0]:cols[1]]."""
    shape = get_aval(x).shape
    nb = len(shape) - 2
    return ix.slice(x, (0,) * nb + (rows[0], cols[0]), shape[:nb] + (rows[1], cols[1]))


def _pad_last2(x, rows, cols):
    """Zero-pad the last two axes by (before, after) counts."""
    nb = get_aval(x).ndim - 2
    zero = np.zeros((), get_aval(x).dtype)
    return ix.pad(x, zero, ((0, 0, 0),) * nb + ((rows[0], rows[1], 0), (cols[0], cols[1], 0)))


def _mH(x):
    """Conjugate transpose over the last two axes (the transpose, for real x)."""
    xt = _mT(x)
    return conj(xt) if np.issubdtype(get_aval(x).dtype, np.complexfloating) else xt


def _as_read(t, lower=True):
    """The Hermitian (for real t: symmetric) matrix a decomposition sees when it reads
    only one triangle of t."""
    if lower:
        return ew.add(_tril(t), _mH(_tril(t, -1)))
    return ew.add(_triu(t), _mH(_triu(t, 1)))


def _float0_zero(x):
    return Zero(ad.tangent_aval(get_aval(x)))


# --------------------------------------------------------- batching helpers

def _make_leading_batch(prim):
    """Decompositions map over leading axes: put the batch axis first, broadcast the
    unbatched operands, and every output carries the batch axis first."""
    def rule(axis_data, vals, dims, **params):
        vals = [batching.bdim_at_front(x, d, axis_data.size) for x, d in zip(vals, dims)]
        out = prim.bind(*vals, **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    return rule


_leading_batch = core.RuleMaker(_make_leading_batch)


# ------------------------------------------------------- lowering batch-sharded

def _partitioned_by_xla(lower):
    """A lowering run with the mesh axes out of JAX's types when the operand is
    sharded over Explicit ones (its batch axes: the sharding rule allows no other), and
    its results resharded as the batch. JAX 0.10.2's cholesky and qr mask their factors
    with a predicate it does not shard as the batch (a ShardingTypeError, though its own
    rule types the batch-sharded decomposition, and vmap of them works); XLA partitions
    the batch as the operand is sharded either way."""
    def rule(x, **params):
        sharding = core.jax_explicit_sharding(x)
        if sharding is None:
            return lower(x, **params)
        batch = jax.sharding.NamedSharding(sharding.mesh, P(*sharding.spec[:-2]))
        with jax.sharding.use_abstract_mesh(sharding.mesh):
            return jax.sharding.auto_axes(lambda m: lower(m, **params),
                                          out_sharding=batch)(x)
    return rule


# ------------------------------------------------------------------ cholesky

def _cholesky_aval(x):
    _check_matrix("cholesky", x, square=True, complex_ok=True)
    return x.strip_weak_type()


def _cholesky_jvp(primals, tangents):
    # A = L L^H gives L^{-1} dA L^{-H} = L^{-1} dL + (L^{-1} dL)^H, whose lower triangle
    # with the (real) diagonal halved is L^{-1} dL. Only the lower triangle of A is read,
    # so that of the tangent (mirrored) is its tangent.
    (x,), (t,) = primals, tangents
    L = cholesky_p.bind(x)
    if type(t) is Zero:
        return L, _float0_zero(L)
    t = _as_read(t)
    t_linv_t = triangular_solve(L, t, left_side=False, lower=True, transpose_a=True,
                                conjugate_a=True)
    inner = triangular_solve(L, t_linv_t, left_side=True, lower=True)
    n = get_aval(x).shape[-1]
    half_diag = ew.mul(_keep_where(inner, np.eye(n, dtype=bool)),
                       np.asarray(0.5, get_aval(x).dtype))
    phi = ew.add(_tril(inner, -1), half_diag)
    return L, _matmul(L, phi)


cholesky_p = define(
    "cholesky", abstract_eval=_cholesky_aval,
    lowering=_partitioned_by_xla(lambda x: lax.linalg.cholesky(x, symmetrize_input=False)),
    jvp=_cholesky_jvp, batching=_leading_batch,
    sharding_rule=sharding_rules.batched_matrices("cholesky", (2,), 2))


def cholesky(x, *, symmetrize_input=True):
    """The lower Cholesky factor L of A = L L^H (NaN where A is not positive definite).
    With symmetrize_input, A is first replaced by (A + A^H) / 2."""
    if symmetrize_input:
        aval = get_aval(x)
        if np.issubdtype(aval.dtype, np.integer) or aval.dtype == np.bool_:
            # (A + A^H) / 2 is a true division, so integer matrices come out floating
            # (64-bit integers as float64, smaller ones as float32, as JAX divides)
            wide = aval.dtype.itemsize >= 8
            x = ew.convert_element_type(x, core.canonical_dtype(np.float64 if wide
                                                                else np.float32))
        x = symmetrize(x)
    return cholesky_p.bind(x)


def symmetrize(x):
    """(x + x^H) / 2 over the last two axes (divided by 2, as JAX's, so that the
    operations' rules refuse what JAX's refuse)."""
    _check_matrix("symmetrize", get_aval(x), square=True, complex_ok=True)
    return ew.div(ew.add(x, _mH(x)), np.asarray(2, get_aval(x).dtype))


# ----------------------------------------------------------- triangular_solve

_SOLVE_FLAGS = ("left_side", "lower", "transpose_a", "conjugate_a", "unit_diagonal")


def _triangular_solve_aval(a, b, **flags):
    _check_matrix("triangular_solve", a, square=True, complex_ok=True)
    _check_inexact("triangular_solve", b)
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve: a and b must have the same dtype, got "
                        f"{a.str_short()} and {b.str_short()}")
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2]:
        raise ValueError(f"triangular_solve: a of shape {a.shape} and b of shape {b.shape} "
                         "must have the same leading (batch) axes")
    common = -2 if flags["left_side"] else -1
    if b.shape[common] != a.shape[-1]:
        raise ValueError(f"triangular_solve: incompatible shapes {a.shape} and {b.shape} "
                         f"(left_side={flags['left_side']})")
    return b.strip_weak_type()


def _triangular_solve_jvp(primals, tangents, **flags):
    # op(A) X = B: dX = op(A)^{-1} (dB - op(dA) X) (left side); X op(A) = B:
    # dX = (dB - X op(dA)) op(A)^{-1}. Only the triangle of dA that A reads counts.
    (a, b), (ta, tb) = primals, tangents
    out = triangular_solve_p.bind(a, b, **flags)
    acc = Zero(ad.tangent_aval(get_aval(out)))
    if type(tb) is not Zero:
        acc = triangular_solve_p.bind(a, tb, **flags)
    if type(ta) is not Zero:
        skip = 1 if flags["unit_diagonal"] else 0
        da = _tril(ta, -skip) if flags["lower"] else _triu(ta, skip)
        if flags["transpose_a"]:
            da = _mT(da)
        if flags["conjugate_a"] and np.issubdtype(get_aval(da).dtype, np.complexfloating):
            da = conj(da)
        prod = _matmul(da, out) if flags["left_side"] else _matmul(out, da)
        acc = ad.add_tangents(acc, ew.neg(triangular_solve_p.bind(a, prod, **flags)))
    return out, acc


def _triangular_solve_transpose(ct, a, b, **flags):
    if is_undefined_primal(a):
        raise TypeError("triangular_solve is not linear in its matrix a; it can only be "
                        "transposed with respect to its right-hand side b")
    if type(ct) is Zero:
        return [None, None]
    flipped = dict(flags, transpose_a=not flags["transpose_a"])
    return [None, triangular_solve_p.bind(a, ct, **flipped)]


def _triangular_solve_batch(axis_data, vals, dims, **flags):
    (a, b), (ad_, bd) = vals, dims
    if ad_ is not None:
        a = batching.bdim_at_front(a, ad_, axis_data.size)
        b = batching.bdim_at_front(b, bd, axis_data.size)
        return triangular_solve_p.bind(a, b, **flags), 0
    # Only b is batched: the examples are extra columns (left side) or extra rows
    # (right side) of one solve with the shared matrix.
    nd = get_aval(b).ndim
    if flags["left_side"]:
        b = batching.moveaxis(b, bd, nd - 1)            # (..., m, n, B)
        shape = get_aval(b).shape
        flat = sh.reshape(b, shape[:-2] + (shape[-2] * shape[-1],))
        out_dim = nd - 1
    else:
        # (rows and examples merged with the rows major, as JAX does: a sharding of the
        # rows stays that of the merged axis)
        b = batching.moveaxis(b, bd, nd - 2)            # (..., r, B, m)
        shape = get_aval(b).shape
        flat = sh.reshape(b, shape[:-3] + (shape[-3] * shape[-2], shape[-1]))
        out_dim = nd - 2
    out = triangular_solve_p.bind(a, flat, **flags)
    return sh.reshape(out, shape), out_dim


triangular_solve_p = define(
    "triangular_solve", abstract_eval=_triangular_solve_aval,
    lowering=lambda a, b, **flags: lax.linalg.triangular_solve(a, b, **flags),
    jvp=_triangular_solve_jvp, transpose=_triangular_solve_transpose,
    batching=_triangular_solve_batch, sharding_rule=sharding_rules.triangular_solve)


def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False,
                     conjugate_a=False, unit_diagonal=False):
    """Solve op(a) x = b (left_side) or x op(a) = b for x, a triangular; op transposes
    when transpose_a (conjugate_a is a no-op on real matrices). A b with one axis fewer
    than a is a single vector."""
    flags = dict(left_side=bool(left_side), lower=bool(lower),
                 transpose_a=bool(transpose_a), conjugate_a=bool(conjugate_a),
                 unit_diagonal=bool(unit_diagonal))
    a_nd, b_nd = get_aval(a).ndim, get_aval(b).ndim
    vector = b_nd == a_nd - 1
    if vector:
        b = sh.expand_dims(b, (b_nd if left_side else b_nd - 1,))
    out = triangular_solve_p.bind(a, b, **flags)
    if vector:
        out = sh.squeeze(out, (b_nd if left_side else b_nd - 1,))
    return out


# ------------------------------------------------------------------------ lu

def _lu_aval(x):
    _check_matrix("lu", x)
    *batch, m, n = x.shape
    batch = tuple(batch)
    return [x.strip_weak_type(), ShapedArray(batch + (min(m, n),), np.int32),
            ShapedArray(batch + (m,), np.int32)]


def _lu_factors(lu):
    """The unit lower factor padded to (m, m) and the upper factor padded to (n, n)
    (identity in the padding), so that both are square and invertible."""
    *_, m, n = get_aval(lu).shape
    k = min(m, n)
    lower = _pad_last2(_tril(_slice_last2(lu, (0, m), (0, k)), -1), (0, 0), (0, m - k))
    lower = ew.add(lower, _eye_like(lower, m))
    upper = _pad_last2(_triu(_slice_last2(lu, (0, k), (0, n))), (0, n - k), (0, 0))
    if n > k:
        tail = np.zeros((n, n), get_aval(lu).dtype)
        tail[k:, k:] = np.eye(n - k)
        upper = ew.add(upper, _constant_matrix(tail, get_aval(upper).shape))
    return lower, upper


def permute_rows(x, permutation):
    """x[..., permutation, :] with the permutation batched like x's leading axes."""
    shape = get_aval(x).shape
    idx = _cols_like(permutation, shape)
    return take_along_axis(x, idx, len(shape) - 2)


def _lu_jvp(primals, tangents):
    # P A = L U gives L^{-1} P dA U^{-1} = L^{-1} dL + dU U^{-1}: the strictly lower part
    # is L^{-1} dL, the upper part dU U^{-1}.
    (x,), (t,) = primals, tangents
    lu, pivots, perm = lu_p.bind(x)
    zeros = [_float0_zero(pivots), _float0_zero(perm)]
    if type(t) is Zero:
        return [lu, pivots, perm], [_float0_zero(lu)] + zeros
    lower, upper = _lu_factors(lu)
    la = triangular_solve(lower, permute_rows(t, perm), left_side=True, lower=True,
                          unit_diagonal=True)
    lau = triangular_solve(upper, la, left_side=False, lower=False)
    lu_dot = ew.add(_matmul(lower, _tril(lau, -1)), _matmul(_triu(lau), upper))
    return [lu, pivots, perm], [lu_dot] + zeros


lu_p = define("lu", multiple_results=True, abstract_eval=_lu_aval,
              lowering=lambda x: list(lax.linalg.lu(x)), jvp=_lu_jvp,
              batching=_leading_batch,
              sharding_rule=sharding_rules.batched_matrices("lu", (2,), lambda: (2, 1, 1)))


def lu(x):
    """LU decomposition with partial pivoting, P A = L U: returns [lu, pivots,
    permutation], a list as jax.lax.linalg.lu does."""
    return list(lu_p.bind(x))


def _pivots_aval(pivots, *, permutation_size):
    if pivots.ndim < 1 or pivots.dtype != np.int32:
        raise TypeError(f"lu_pivots_to_permutation: pivots must be an int32 array with at "
                        f"least one axis, got {pivots.str_short()}")
    if permutation_size < pivots.shape[-1]:
        raise ValueError(f"lu_pivots_to_permutation: permutation_size {permutation_size} "
                         f"must be at least the number of pivots {pivots.shape[-1]}")
    return ShapedArray(pivots.shape[:-1] + (permutation_size,), np.int32)


lu_pivots_to_permutation_p = define(
    "lu_pivots_to_permutation", abstract_eval=_pivots_aval,
    lowering=lambda p, *, permutation_size:
        lax.linalg.lu_pivots_to_permutation(p, permutation_size),
    jvp=ad.zero_jvp, batching=_leading_batch,
    sharding_rule=sharding_rules.batched_matrices("lu_pivots_to_permutation", (1,), 1))


def lu_pivots_to_permutation(pivots, permutation_size):
    """The permutation that the row swaps `pivots` (as lu returns them) perform."""
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


# ------------------------------------------------------------------------ qr

def _qr_aval(x, *, pivoting, full_matrices, use_magma):
    _check_matrix("qr", x)
    *batch, m, n = x.shape
    batch = tuple(batch)
    k = m if full_matrices else min(m, n)
    out = [ShapedArray(batch + (m, k), x.dtype), ShapedArray(batch + (k, n), x.dtype)]
    if pivoting:
        out.append(ShapedArray(batch + (n,), np.int32))
    return out


def _qr_lower(x, *, pivoting, full_matrices, use_magma):
    return list(lax.linalg.qr(x, pivoting=pivoting, full_matrices=full_matrices,
                              use_magma=use_magma))


def _thin_qr_tangents(q, r, dx):
    # X = Q R with R square: C = Q^T dX R^{-1} = Q^T dQ + dR R^{-1}, where Q^T dQ is
    # antisymmetric and dR R^{-1} upper triangular, so the strictly lower part of C
    # fixes Q^T dQ.
    dx_rinv = triangular_solve(r, dx, left_side=False, lower=False)
    c = _matmul(_mT(q), dx_rinv)
    low = _tril(c, -1)
    omega = ew.sub(low, _mT(low))
    dq = ew.add(_matmul(q, ew.sub(omega, c)), dx_rinv)
    dr = _matmul(ew.sub(c, omega), r)
    return dq, dr


def _qr_jvp(primals, tangents, *, pivoting, full_matrices, use_magma):
    (x,), (dx,) = primals, tangents
    outs = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices, use_magma=use_magma)
    q, r = outs[:2]
    extra = [_float0_zero(outs[2])] if pivoting else []
    if type(dx) is Zero:
        return outs, [_float0_zero(q), _float0_zero(r)] + extra
    *_, m, n = get_aval(x).shape
    if pivoting:
        # A[:, p] = Q R: differentiate the column-permuted matrix.
        cols = _rows_like(outs[2], get_aval(x).shape)
        dx = take_along_axis(dx, cols, get_aval(x).ndim - 1)
        x = take_along_axis(x, cols, get_aval(x).ndim - 1)
    if m < n:
        # X = [X1 X2] = Q [R1 R2]: X1 = Q R1 is a square QR, and R2 = Q^T X2.
        dq, dr1 = _thin_qr_tangents(q, _slice_last2(r, (0, m), (0, m)),
                                    _slice_last2(dx, (0, m), (0, m)))
        x2, dx2 = _slice_last2(x, (0, m), (m, n)), _slice_last2(dx, (0, m), (m, n))
        dr2 = ew.add(_matmul(_mT(dq), x2), _matmul(_mT(q), dx2))
        dr = ix.concatenate([dr1, dr2], get_aval(x).ndim - 1)
        return outs, [dq, dr] + extra
    if full_matrices and m > n:
        raise NotImplementedError("qr: the derivative of a complete QR decomposition "
                                  "(full_matrices=True, mode='complete') of a tall matrix "
                                  "is not implemented; use full_matrices=False")
    dq, dr = _thin_qr_tangents(q, r, dx)
    return outs, [dq, dr] + extra


qr_p = define("qr", multiple_results=True, abstract_eval=_qr_aval,
              lowering=_partitioned_by_xla(_qr_lower),
              jvp=_qr_jvp, batching=_leading_batch,
              sharding_rule=sharding_rules.batched_matrices(
                  "qr", (2,), lambda pivoting, **_: (2, 2, 1) if pivoting else (2, 2)))


def qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
    """QR decomposition A = Q R (A[:, p] = Q R with pivoting), as jax.lax.linalg.qr."""
    outs = qr_p.bind(x, pivoting=bool(pivoting), full_matrices=bool(full_matrices),
                     use_magma=use_magma)
    return tuple(outs)


# ---------------------------------------------------------------------- eigh

def _subset_size(subset_by_index, n):
    if subset_by_index is None:
        return n
    lo, hi = subset_by_index
    if not 0 <= lo <= hi <= n:
        raise ValueError(f"subset_by_index {subset_by_index} must satisfy 0 <= start <= "
                         f"end <= {n}")
    return hi - lo


def _eigh_aval(x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    _check_matrix("eigh", x, square=True)
    n = x.shape[-1]
    d = _subset_size(subset_by_index, n)
    return [ShapedArray(x.shape[:-1] + (d,), x.dtype),
            ShapedArray(x.shape[:-2] + (d,), x.dtype)]


def _eigh_lower(x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    extra = {} if algorithm is None else {"implementation": algorithm}
    return list(lax.linalg.eigh(x, lower=lower, symmetrize_input=False,
                                sort_eigenvalues=sort_eigenvalues,
                                subset_by_index=subset_by_index, **extra))


def _eigh_jvp(primals, tangents, **params):
    # First-order perturbation theory for distinct eigenvalues: with M = V^T dA V,
    # dw = diag(M) and dV = V (F * M), F[i, j] = 1 / (w[j] - w[i]) off the diagonal.
    (x,), (t,) = primals, tangents
    n = get_aval(x).shape[-1]
    if params["subset_by_index"] not in (None, (0, n)):
        raise NotImplementedError("eigh: derivatives of a partial eigendecomposition "
                                  "(subset_by_index) are not defined")
    v, w = eigh_p.bind(x, **params)
    if type(t) is Zero:
        return [v, w], [_float0_zero(v), _float0_zero(w)]
    t = _as_read(t, params["lower"])     # only one triangle of x is read
    shape = get_aval(v).shape
    eye = _eye_like(v)
    gaps = ew.add(eye, ew.sub(_rows_like(w, shape), _cols_like(w, shape)))
    f = ew.sub(ew.div(np.asarray(1, get_aval(w).dtype), gaps), eye)
    m = _matmul(_matmul(_mT(v), t), v)
    return [v, w], [_matmul(v, ew.mul(f, m)), _diagonal(m)]


eigh_p = define("eigh", multiple_results=True, abstract_eval=_eigh_aval,
                lowering=_eigh_lower, jvp=_eigh_jvp, batching=_leading_batch,
                sharding_rule=sharding_rules.batched_matrices("eigh", (2,),
                                                              lambda **_: (2, 1)))


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True,
         subset_by_index=None, implementation=None):
    """Eigenvectors and eigenvalues (v, w) of symmetric matrices, as jax.lax.linalg.eigh."""
    if symmetrize_input:
        x = symmetrize(x)
    subset = None if subset_by_index is None else tuple(int(i) for i in subset_by_index)
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues),
                       subset_by_index=subset, algorithm=implementation)
    return v, w


# ----------------------------------------------------------------------- svd

def _svd_aval(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
    _check_matrix("svd", x)
    *batch, m, n = x.shape
    batch = tuple(batch)
    rank = min(m, n)
    if subset_by_index is not None:
        if full_matrices and tuple(subset_by_index) != (0, rank):
            raise ValueError("svd: full_matrices and subset_by_index cannot both be set")
        rank = min(rank, _subset_size(subset_by_index, rank))
    s = ShapedArray(batch + (rank,), x.dtype)
    if not compute_uv:
        return [s]
    return [s, ShapedArray(batch + (m, m if full_matrices else rank), x.dtype),
            ShapedArray(batch + (n if full_matrices else rank, n), x.dtype)]


def _svd_lower(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
    out = lax.linalg.svd(x, full_matrices=full_matrices, compute_uv=compute_uv,
                         subset_by_index=subset_by_index, algorithm=algorithm)
    if not compute_uv:
        return [out]
    u, s, vh = out
    return [s, u, vh]


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv, subset_by_index, algorithm):
    # With dS = U^T dA V: ds = diag(dS); the rotations of U and V within the singular
    # subspaces come from dividing the symmetric parts of dS diag(s) and diag(s) dS by
    # s[j]^2 - s[i]^2; a non-square A adds the part of dA outside those subspaces.
    (x,), (t,) = primals, tangents
    *_, m, n = get_aval(x).shape
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError("svd: the derivative of full_matrices=True for non-square "
                                  "matrices is not implemented; use full_matrices=False")
    # (A square matrix's full and reduced factors coincide: one thin call serves both.)
    s, u, vh = svd_p.bind(x, full_matrices=False, compute_uv=True,
                          subset_by_index=subset_by_index, algorithm=algorithm)
    outs = [s, u, vh] if compute_uv else [s]
    if type(t) is Zero:
        return outs, [_float0_zero(o) for o in outs]
    v = _mT(vh)
    ds_mat = _matmul(_matmul(_mT(u), t), v)
    ds = _diagonal(ds_mat)
    if not compute_uv:
        return outs, [ds]
    k_shape = get_aval(ds_mat).shape
    s_row, s_col = _rows_like(s, k_shape), _cols_like(s, k_shape)
    eye = _eye_like(ds_mat)
    f = ew.sub(ew.div(np.asarray(1, get_aval(s).dtype),
                      ew.add(ew.sub(ew.mul(s_row, s_row), ew.mul(s_col, s_col)), eye)), eye)
    ds_s = ew.mul(ds_mat, s_row)
    s_ds = ew.mul(s_col, ds_mat)
    du = _matmul(u, ew.mul(f, ew.add(ds_s, _mT(ds_s))))
    dv = _matmul(v, ew.mul(f, ew.add(s_ds, _mT(s_ds))))
    if m > n:
        dav = _matmul(t, v)
        rest = ew.sub(dav, _matmul(u, _matmul(_mT(u), dav)))
        du = ew.add(du, ew.div(rest, _rows_like(s, get_aval(rest).shape)))
    if n > m:
        datu = _matmul(_mT(t), u)
        rest = ew.sub(datu, _matmul(v, _matmul(vh, datu)))
        dv = ew.add(dv, ew.div(rest, _rows_like(s, get_aval(rest).shape)))
    return outs, [ds, du, _mT(dv)]


svd_p = define("svd", multiple_results=True, abstract_eval=_svd_aval, lowering=_svd_lower,
               jvp=_svd_jvp, batching=_leading_batch,
               sharding_rule=sharding_rules.batched_matrices(
                   "svd", (2,), lambda compute_uv, **_: (1, 2, 2) if compute_uv else (1,)))


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """Singular values, with compute_uv the triple (u, s, vh), as jax.lax.linalg.svd."""
    subset = None if subset_by_index is None else tuple(int(i) for i in subset_by_index)
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                      subset_by_index=subset, algorithm=algorithm)
    if not compute_uv:
        return outs[0]
    s, u, vh = outs
    return u, s, vh


# ----------------------------------------------------------- tridiagonal_solve

def _tridiagonal_solve_aval(dl, d, du, b):
    for name, a in (("dl", dl), ("d", d), ("du", du)):
        _check_inexact("tridiagonal_solve", a)
        if a.shape != d.shape or a.dtype != b.dtype:
            raise TypeError(f"tridiagonal_solve: {name} must have the shape {d.shape} of d "
                            f"and the dtype of b, got {a.str_short()} and {b.str_short()}")
    if b.ndim != d.ndim + 1 or b.shape[:-1] != d.shape:
        raise ValueError(f"tridiagonal_solve: b of shape {b.shape} must be [..., m, n] for "
                         f"diagonals of shape {d.shape}")
    return b.strip_weak_type()


def _tridiagonal_times(dl, d, du, x):
    """A x for the tridiagonal A (sub-diagonal dl[1:], diagonal d, super-diagonal du[:-1])
    and x of shape [..., m, n]; each diagonal scales x shifted along the m axis."""
    nd = get_aval(x).ndim
    m = get_aval(x).shape[-2]
    shape = get_aval(x).shape
    col = lambda v: sh.broadcast_in_dim(v, shape, tuple(range(nd - 1)))  # noqa: E731
    zero_row = lambda: ew.zeros_like(ix.slice_in_dim(x, 0, 1, axis=nd - 2))  # noqa: E731
    below = ix.concatenate([zero_row(), ix.slice_in_dim(x, 0, m - 1, axis=nd - 2)], nd - 2)
    above = ix.concatenate([ix.slice_in_dim(x, 1, m, axis=nd - 2), zero_row()], nd - 2)
    return ew.add(ew.add(ew.mul(col(dl), below), ew.mul(col(d), x)), ew.mul(col(du), above))


def _tridiagonal_solve_jvp(primals, tangents):
    # A x = b gives A dx = db - dA x, solved with the same A.
    dl, d, du, b = primals
    x = tridiagonal_solve_p.bind(dl, d, du, b)
    rhs = tangents[3]
    if any(type(t) is not Zero for t in tangents[:3]):
        zero = lambda v, t: ew.zeros_like(v) if type(t) is Zero else t  # noqa: E731
        change = _tridiagonal_times(*(zero(v, t) for v, t in zip(primals[:3], tangents[:3])), x)
        rhs = ew.neg(change) if type(rhs) is Zero else ew.sub(rhs, change)
    if type(rhs) is Zero:
        return x, rhs
    return x, tridiagonal_solve_p.bind(dl, d, du, rhs)


def _tridiagonal_solve_transpose(ct, dl, d, du, b):
    if any(is_undefined_primal(v) for v in (dl, d, du)):
        raise TypeError("tridiagonal_solve is linear only in its right-hand side b")
    if type(ct) is Zero:
        return [None] * 4
    # A^T is tridiagonal too: its sub-diagonal is A's super-diagonal shifted down a row
    nd = get_aval(d).ndim
    m = get_aval(d).shape[-1]
    zero = ew.zeros_like(ix.slice_in_dim(d, 0, 1, axis=nd - 1))
    dl_t = ix.concatenate([zero, ix.slice_in_dim(du, 0, m - 1, axis=nd - 1)], nd - 1)
    du_t = ix.concatenate([ix.slice_in_dim(dl, 1, m, axis=nd - 1), zero], nd - 1)
    return [None, None, None, tridiagonal_solve_p.bind(dl_t, d, du_t, ct)]


tridiagonal_solve_p = define(
    "tridiagonal_solve", abstract_eval=_tridiagonal_solve_aval,
    lowering=lax.linalg.tridiagonal_solve, jvp=_tridiagonal_solve_jvp,
    transpose=_tridiagonal_solve_transpose, batching=_leading_batch,
    sharding_rule=sharding_rules.batched_matrices("tridiagonal_solve", (1, 1, 1, 2), 2))


def tridiagonal_solve(dl, d, du, b):
    """Solve A x = b for the tridiagonal A with sub-diagonal dl (dl[..., 0] unused),
    diagonal d and super-diagonal du (du[..., -1] unused); b is [..., m, n]."""
    return tridiagonal_solve_p.bind(dl, d, du, b)
