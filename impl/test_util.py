"""Numerical checks of derivatives, as jax.test_util: `check_grads`, `check_jvp`,
`check_vjp` compare impl's forward and reverse mode with central finite differences
along random directions (and, for higher orders, the derivatives of the derivatives)."""
from __future__ import annotations

import numpy as np
from jax import tree_util

from impl import api
from impl.core import float0

# Tolerances by dtype (JAX's defaults for gradient checks).
_TOLERANCE = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3,
              np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 1e-3,
              np.dtype(np.complex128): 1e-5}
_EPS = 1e-4


def _dtype(x):
    return np.dtype(getattr(x, "dtype", None) or np.result_type(x))


def _inexact(x):
    return np.issubdtype(_dtype(x), np.inexact)


def _tolerance(trees, given):
    if given is not None:
        return given
    dtypes = [_dtype(x) for x in tree_util.tree_leaves(trees) if _inexact(x)]
    return max((_TOLERANCE.get(d, 1e-5) for d in dtypes), default=1e-5)


def _random_like(tree, rng):
    """A random direction with the structure of `tree` (float0 zeros for integers)."""
    def one(x):
        dtype, shape = _dtype(x), np.shape(x)
        if not np.issubdtype(dtype, np.inexact):
            return np.zeros(shape, float0)
        v = rng.standard_normal(shape)
        if np.issubdtype(dtype, np.complexfloating):
            v = v + 1j * rng.standard_normal(shape)
        return np.asarray(v, dtype)
    return tree_util.tree_map(one, tree)


def _step(args, tangents, scale):
    def one(x, t):
        if not _inexact(x):
            return x
        return np.asarray(np.asarray(x) + scale * np.asarray(t), _dtype(x))
    return tree_util.tree_map(one, args, tangents)


def _sub_div(a, b, denom):
    return tree_util.tree_map(
        lambda x, y: (np.asarray(x, np.complex128 if _inexact(x) and np.iscomplexobj(x)
                                 else np.float64) - np.asarray(y)) / denom, a, b)


def _vdot(a, b):
    return sum(np.vdot(np.asarray(x, np.complex128), np.asarray(y, np.complex128)).real
               for x, y in zip(tree_util.tree_leaves(a), tree_util.tree_leaves(b))
               if _inexact(x) and _inexact(y))


def _assert_close(actual, expected, atol, rtol, err_msg):
    for a, e in zip(tree_util.tree_leaves(actual), tree_util.tree_leaves(expected)):
        if _dtype(a) == float0 or _dtype(e) == float0:
            continue
        np.testing.assert_allclose(np.asarray(a, np.complex128 if np.iscomplexobj(a)
                                              else np.float64),
                                   np.asarray(e), atol=atol, rtol=rtol, err_msg=err_msg)


def _numerical_jvp(f, args, tangents, eps):
    plus = f(*_step(args, tangents, eps))
    minus = f(*_step(args, tangents, -eps))
    return _sub_div(plus, minus, 2 * eps)


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=_EPS, err_msg=""):
    """`f_jvp(args, tangents)` against `f`'s values and central differences."""
    rng = np.random.RandomState(0)
    tangents = _random_like(args, rng)
    tol = _tolerance(args, None)
    atol, rtol = (tol if atol is None else atol), (tol if rtol is None else rtol)
    value, tangent_out = f_jvp(args, tangents)
    _assert_close(value, f(*args), atol, rtol, f"{err_msg} primal")
    _assert_close(tangent_out, _numerical_jvp(f, args, tangents, eps), atol, rtol,
                  f"{err_msg} tangent")


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=_EPS, err_msg=""):
    """`f_vjp(*args)` against central differences: <ct, J t> == <J^T ct, t>."""
    rng = np.random.RandomState(0)
    tol = _tolerance(args, None)
    atol, rtol = (tol if atol is None else atol), (tol if rtol is None else rtol)
    value, vjp_fn = f_vjp(*args)
    _assert_close(value, f(*args), atol, rtol, f"{err_msg} primal")
    tangents = _random_like(args, rng)
    cotangent = _random_like(value, rng)
    ct_in = vjp_fn(cotangent)
    forward = _vdot(_numerical_jvp(f, args, tangents, eps), cotangent)
    backward = _vdot(tangents, ct_in)
    np.testing.assert_allclose(backward, forward, atol=atol, rtol=rtol,
                               err_msg=f"{err_msg} cotangent projection")


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check the derivatives of `f` at `args` (a tuple) up to `order`, in forward mode
    ("fwd") and reverse mode ("rev"), against finite differences."""
    args = tuple(args)
    eps = _EPS if eps is None else eps
    unknown = set(modes) - {"fwd", "rev"}
    if unknown:
        raise ValueError(f"check_grads: unknown modes {sorted(unknown)}; expected 'fwd' "
                         "and/or 'rev'")

    def check(fun, args, order, err_msg):
        if order == 0:
            return
        if "fwd" in modes:
            check_jvp(fun, lambda a, t: api.jvp(fun, a, t), args, atol, rtol, eps,
                      f"{err_msg} JVP of order {order}")
            if order > 1:
                rng = np.random.RandomState(1)
                tangents = _random_like(args, rng)
                check(lambda *a: api.jvp(fun, a, tangents)[1], args, order - 1,
                      f"{err_msg} JVP")
        if "rev" in modes:
            check_vjp(fun, lambda *a: api.vjp(fun, *a), args, atol, rtol, eps,
                      f"{err_msg} VJP of order {order}")
            if order > 1:
                rng = np.random.RandomState(2)
                cotangent = _random_like(fun(*args), rng)
                check(lambda *a: api.vjp(fun, *a)[1](cotangent), args, order - 1,
                      f"{err_msg} VJP")

    check(f, args, order, "check_grads:")


__all__ = ["check_grads", "check_jvp", "check_vjp"]
