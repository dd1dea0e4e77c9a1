"""jax.lax.linalg: matrix decompositions and triangular solves over impl's primitives."""
from jax.lax.linalg import EighImplementation, SvdAlgorithm  # noqa: F401

from impl.primitives.linalg_decompositions import (  # noqa: F401
    cholesky, cholesky_p, eigh, eigh_p, lu, lu_p, lu_pivots_to_permutation,
    lu_pivots_to_permutation_p, qr, qr_p, svd, svd_p, symmetrize, triangular_solve,
    triangular_solve_p, tridiagonal_solve, tridiagonal_solve_p,
)
