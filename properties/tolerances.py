"""Tolerances per dtype: the one place they are defined.

Two kinds of comparison occur in the laws:

* ``AGREE`` -- two routes to the same number in the same dtype (jit vs eager,
  vmap vs a loop, jvp vs vjp).  Only rounding separates them.
* ``REFERENCE`` -- a result in the case's dtype against a float64 reference
  (central finite differences in float64, or the function re-run in float64).
  Allows for the case dtype's rounding and the finite-difference error.

The check is norm-wise: ``max|actual - expected| <= atol + rtol * max|expected|``.
A norm-wise bound does not fail on a single element that cancels to ~0.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class Tol:
    rtol: float
    atol: float


_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

AGREE = {
    _BFLOAT16: Tol(rtol=2e-2, atol=5e-3),
    np.dtype("float16"): Tol(rtol=5e-3, atol=5e-4),
    np.dtype("float32"): Tol(rtol=2e-4, atol=1e-5),
    np.dtype("float64"): Tol(rtol=1e-9, atol=1e-12),
}

REFERENCE = {
    _BFLOAT16: Tol(rtol=5e-2, atol=1e-2),
    np.dtype("float16"): Tol(rtol=1e-2, atol=1e-3),
    np.dtype("float32"): Tol(rtol=5e-3, atol=1e-4),
    np.dtype("float64"): Tol(rtol=2e-5, atol=1e-7),
}

#: Central-difference step, relative to max(1, |x|), in float64.
FD_STEP = 1e-4

#: Values beyond this magnitude make a case ill-conditioned: it is filtered.
MAX_MAGNITUDE = 1e4

#: A law whose cases are filtered more often than this fails (filters must
#: never silently swallow a law).
MAX_FILTERED_FRACTION = 0.5


def _dtype_of(*values):
    dtypes = [np.asarray(v).dtype for v in values if np.asarray(v).dtype.kind in "fc"]
    if not dtypes:
        return np.dtype("float64")
    # the least precise dtype governs the tolerance
    return min(dtypes, key=lambda d: np.finfo(d).bits)


def tolerance(kind, dtype):
    """Tolerance of ``kind`` ('agree' or 'reference') for ``dtype``."""
    table = {"agree": AGREE, "reference": REFERENCE}.get(kind)
    if table is None:
        raise ValueError(f"tolerance kind must be 'agree' or 'reference', got {kind!r}")
    dtype = np.dtype(dtype)
    if dtype not in table:
        raise ValueError(f"no tolerance defined for dtype {dtype}")
    return table[dtype]


def close(actual, expected, kind="agree", dtype=None):
    """(ok, error, bound) for a norm-wise comparison of two arrays."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return False, float("inf"), 0.0
    dtype = dtype if dtype is not None else _dtype_of(actual, expected)
    tol = tolerance(kind, dtype)
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    if a.size == 0:
        return True, 0.0, tol.atol
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(e))):
        # laws filter non-finite cases first; what is left is a real mismatch
        return False, float("inf"), 0.0
    err = float(np.max(np.abs(a - e)))
    bound = tol.atol + tol.rtol * float(np.max(np.abs(e)))
    return err <= bound, err, bound
