"""Gradient checks against finite differences (JAX's `jax.test_util` surface).

`check_grads(f, args, order)` differentiates `f` with impl's own `jvp`/`vjp`/`linearize` and
compares, along one random direction drawn from `numpy.random.RandomState(0)`, with a central
difference of `f` in numpy. It raises AssertionError when they disagree, as JAX's does: a JAX
test suite that imports `check_grads` runs unchanged with impl's transformations underneath.

Tolerances follow JAX's: a number, or a {dtype: tol} dict merged over per-dtype defaults, scaled
by the number of elements compared.
"""
from __future__ import annotations

import operator
from functools import partial

import numpy as np
from jax import dtypes as _dtypes
from jax.tree_util import tree_map, tree_reduce

from impl import api

__all__ = ["check_grads", "check_jvp", "check_vjp"]

EPS = 1e-4
_MODES = ("fwd", "rev", "lin")

# Per-dtype defaults for derivatives compared with finite differences.
_GRADIENT_TOLERANCE = {np.dtype(_dtypes.bfloat16): 1e-1, np.dtype(np.float16): 1e-2,
                       np.dtype(np.float32): 2e-3, np.dtype(np.float64): 1e-5,
                       np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5}
# For dtypes without a gradient default (integers, bool, float0) the comparison is exact.
_EXACT = 0


def _is_python_scalar(x):
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def _dtype_of(x):
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    return np.dtype(_dtypes.canonicalize_dtype(np.asarray(x).dtype))


def _tolerances(tol):
    """A user tolerance (None, a number or a {dtype: tol} dict) as a number or a full dict."""
    if tol is None:
        return dict(_GRADIENT_TOLERANCE)
    if isinstance(tol, dict):
        return {**_GRADIENT_TOLERANCE, **{np.dtype(k): v for k, v in tol.items()}}
    return tol


def _tol_for(tol, dtype):
    if not isinstance(tol, dict):
        return tol
    return tol.get(np.dtype(_dtypes.canonicalize_dtype(dtype)), _EXACT)


def _assert_close(x, y, atol, rtol, err_msg):
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape, f"{err_msg}: shapes {x.shape} and {y.shape} differ"
    a = max(_tol_for(atol, x.dtype), _tol_for(atol, y.dtype)) * x.size
    r = max(_tol_for(rtol, x.dtype), _tol_for(rtol, y.dtype)) * y.size
    if x.dtype == _dtypes.float0 or y.dtype == _dtypes.float0:
        np.testing.assert_array_equal(x, y, err_msg=err_msg)
        return
    x, y = (v.astype(np.float32) if v.dtype == _dtypes.bfloat16 else v for v in (x, y))
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(x, y, atol=a or 0, rtol=r or 1e-7, err_msg=err_msg)


def _check_close(xs, ys, atol, rtol, err_msg):
    tree_map(partial(_assert_close, atol=atol, rtol=rtol, err_msg=err_msg), xs, ys)


def _check_same_dtypes(xs, ys, what):
    def same(x, y):
        dx = _dtypes.canonicalize_dtype(_dtype_of(x))
        dy = _dtypes.canonicalize_dtype(_dtype_of(y))
        assert dx == dy, f"{what}: dtypes {dx} and {dy} differ"
    tree_map(same, xs, ys)


# Leafwise arithmetic in numpy that keeps each input's dtype (and Python scalars as scalars),
# so that f sees perturbed arguments of the types it was given.
def _keeping_type(op):
    def apply(x, *rest):
        out = np.asarray(op(x, *rest), dtype=_dtype_of(x))
        return out.item() if _is_python_scalar(x) else out
    return partial(tree_map, apply)


_add = _keeping_type(operator.add)
_sub = _keeping_type(operator.sub)
_conj = _keeping_type(np.conj)


def _scale(xs, a):
    def one(x):
        dt = _dtype_of(x)
        out = np.multiply(x, np.array(a, dtype=dt), dtype=dt)
        return out.item() if _is_python_scalar(x) else out
    return tree_map(one, xs)


def _difference(x, y):
    # inf - inf counts as no change, so an infinite output does not poison the difference
    dt = _dtype_of(x)
    with np.errstate(invalid="ignore"):
        return np.where(np.equal(x, y), np.array(0, dt), np.subtract(x, y, dtype=dt))


def _random_like(rng, x):
    dt = _dtype_of(x)
    draw = lambda: np.asarray(rng.randn(*np.shape(x)), dtype=dt)  # noqa: E731
    out = draw() + dt.type(1j) * draw() if np.issubdtype(dt, np.complexfloating) else draw()
    return out.item() if _is_python_scalar(x) else out


def _inner(xs, ys):
    def dot(x, y):
        return np.real(np.dot(np.conj(x).reshape(-1), np.asarray(y).reshape(-1)))
    return tree_reduce(np.add, tree_map(dot, xs, ys))


def numerical_jvp(f, primals, tangents, eps=EPS):
    """Central difference of f at primals along tangents."""
    step = _scale(tangents, eps)
    ahead, behind = f(*_add(primals, step)), f(*_sub(primals, step))
    return _scale(tree_map(_difference, ahead, behind), 0.5 / eps)


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """Check `f_jvp(args, tangents) -> (out, tangent_out)` against finite differences of f."""
    atol, rtol = _tolerances(atol), _tolerances(rtol)
    tangents = tree_map(partial(_random_like, np.random.RandomState(0)), args)
    out, tangent_out = f_jvp(args, tangents)
    _check_same_dtypes(out, tangent_out, "primal and tangent outputs")
    expected_out = f(*args)
    _check_same_dtypes(out, expected_out, "primal output and f(*args)")
    expected_tangent = numerical_jvp(f, args, tangents, eps=eps)
    _check_close(out, expected_out, atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    _check_close(tangent_out, expected_tangent, atol, rtol,
                 f"{err_msg} tangent" if err_msg else "tangent")


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """Check `f_vjp(*args) -> (out, pullback)`: <pullback(ct), t> must equal <ct, jvp(t)>."""
    atol, rtol = _tolerances(atol), _tolerances(rtol)
    random_like = partial(_random_like, np.random.RandomState(0))
    out, pullback = f_vjp(*args)
    _check_close(out, f(*args), atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    tangents = tree_map(random_like, args)
    tangent_out = numerical_jvp(f, args, tangents, eps=eps)
    cotangents = tree_map(random_like, out)
    cotangent_in = _conj(pullback(_conj(cotangents)))
    _check_close(_inner(tangents, cotangent_in), _inner(tangent_out, cotangents), atol, rtol,
                 f"{err_msg} cotangent projection" if err_msg else "cotangent projection")


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check impl's derivatives of f at args, up to `order`, in each of `modes`
    ("fwd": jvp, "rev": vjp, "lin": linearize), against finite differences.

    Raises AssertionError when a derivative disagrees.
    """
    unknown = [m for m in modes if m not in _MODES]
    if unknown:
        raise ValueError(f"check_grads: unknown modes {unknown}; expected some of {_MODES}")
    args = tuple(args)
    eps = eps or EPS
    jvp_check = partial(check_jvp, atol=atol, rtol=rtol, eps=eps)
    vjp_check = partial(check_vjp, atol=atol, rtol=rtol, eps=eps)

    def jvp_by_linearize(fun, primals, tangents):
        out, lin = api.linearize(fun, *primals)
        return out, lin(*tangents)

    def vjp_applied_to_output(fun):
        def pulled(*xs):
            out, pullback = api.vjp(fun, *xs)
            return pullback(out)
        return pulled

    def check(fun, xs, k, context):
        name = (lambda mode: f"{mode} of {context}" if context else mode)
        if "fwd" in modes:
            jvp_check(fun, partial(api.jvp, fun), xs, err_msg=name("JVP"))
            if k > 1:
                check(partial(api.jvp, fun), (xs, xs), k - 1, name("JVP"))
        if "rev" in modes:
            vjp_check(fun, partial(api.vjp, fun), xs, err_msg=name("VJP"))
            if k > 1:
                check(vjp_applied_to_output(fun), xs, k - 1, name("VJP"))
        if "lin" in modes:
            jvp_check(fun, partial(jvp_by_linearize, fun), xs, err_msg=name("LIN"))
            if k > 1:
                check(partial(jvp_by_linearize, fun), (xs, xs), k - 1, name("LIN"))

    check(f, args, order, "")
