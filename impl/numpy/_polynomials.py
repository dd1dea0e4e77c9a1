"""Polynomials, integration, window functions, log-spaced grids, covariance, counting
and phase unwrapping of jax.numpy, composed from impl's array operations."""
from __future__ import annotations

import math
import operator

import numpy as np

from impl import core
from impl.core import get_aval
from impl.numpy import _core as c
from impl.numpy import _ufuncs as uf
from impl.numpy._arrays import diff
from impl.numpy._indexing import concatenate
from impl.numpy._util import asarray, canonicalize_axis, promote
from impl.primitives import elementwise as ew
from impl.primitives import indexing as ix

__all__ = ["polyval", "polyadd", "polysub", "polymul", "polyder", "polyint", "vander",
           "trapezoid", "hamming", "hanning", "bartlett", "blackman", "logspace",
           "geomspace", "cov", "corrcoef", "bincount", "union1d", "unwrap"]


def _inexact(*xs):
    """The operands in their common dtype, made floating (JAX's promote_dtypes_inexact)."""
    xs = promote(*[asarray(x) for x in xs])
    dtype = uf.inexact_dtype(get_aval(xs[0]).dtype)
    return [ew.convert_element_type(x, dtype, weak_type=get_aval(x).weak_type) for x in xs]


def _static_int(value, what):
    if isinstance(value, core.Tracer):
        raise core.ConcretizationTypeError(f"{what} must be a concrete integer (not traced)")
    return operator.index(value)


# ------------------------------------------------------------------ polynomials
# Coefficients run from the highest power down, as in NumPy.

def polyval(p, x):
    """The polynomial with coefficients p at x (Horner's rule)."""
    p, x = promote(asarray(p), asarray(x))
    y = c.zeros_like(x)
    for i in range(get_aval(p).shape[0]):
        y = uf.add(uf.multiply(y, x), p[i])
    return y


def _padded_front(a, n):
    m = get_aval(a).shape[0]
    return a if m == n else concatenate([c.zeros(n - m, get_aval(a).dtype), a], 0)


def polyadd(a1, a2):
    a1, a2 = promote(asarray(a1), asarray(a2))
    n = max(get_aval(a1).shape[0], get_aval(a2).shape[0])
    return uf.add(_padded_front(a1, n), _padded_front(a2, n))


def polysub(a1, a2):
    a1, a2 = promote(asarray(a1), asarray(a2))
    return polyadd(a1, uf.negative(a2))


def polymul(a1, a2):
    """The product polynomial (the full convolution of the coefficients)."""
    from impl.numpy._convolve import convolve
    a1, a2 = _inexact(a1, a2)
    if get_aval(a1).shape[0] == 0:
        a1 = c.zeros(1, get_aval(a2).dtype)
    if get_aval(a2).shape[0] == 0:
        a2 = c.zeros(1, get_aval(a1).dtype)
    return convolve(a1, a2, mode="full")


def polyder(p, m=1):
    """The m-th derivative's coefficients."""
    m = _static_int(m, "'m' argument of jnp.polyder")
    (p,) = _inexact(p)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    for _ in range(m):
        n = get_aval(p).shape[0]
        powers = np.arange(n - 1, 0, -1)
        p = uf.multiply(ix.slice(p, [0], [max(n - 1, 0)]),
                        powers.astype(get_aval(p).dtype))
    return p


def polyint(p, m=1, k=None):
    """The m-th antiderivative's coefficients, with integration constants k."""
    m = _static_int(m, "'m' argument of jnp.polyint")
    p, k = _inexact(p, 0 if k is None else k)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = c.ravel(k)
    if get_aval(k).shape[0] == 1:
        k = c.full((m,), k[0])
    if get_aval(k).shape != (m,):
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    for i in range(m):
        n = get_aval(p).shape[0]
        divisors = np.arange(n, 0, -1).astype(get_aval(p).dtype)
        p = concatenate([uf.true_divide(p, divisors), c.reshape(k[i], (1,))], 0)
    return p


def vander(x, N=None, increasing=False):
    """The columns are powers of x (decreasing unless `increasing`)."""
    x = asarray(x)
    if get_aval(x).ndim != 1:
        raise ValueError("x must be a one-dimensional array")
    n = get_aval(x).shape[0] if N is None else _static_int(N, "'N' argument of jnp.vander()")
    if n < 0:
        raise ValueError("N must be nonnegative")
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    powers = asarray(powers.astype(get_aval(x).dtype))
    return uf.power(c.expand_dims(x, -1), c.expand_dims(powers, 0))


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of y by the trapezoidal rule (sample points x, or spacing dx)."""
    if x is None:
        (y,) = _inexact(y)
        spacing = asarray(dx)
    else:
        y, x = _inexact(y, x)
        spacing = diff(x) if get_aval(x).ndim == 1 else c.moveaxis(diff(x, axis=axis), axis, -1)
    y = c.moveaxis(y, canonicalize_axis(axis, get_aval(y).ndim), -1)
    n = get_aval(y).shape[-1]
    lo, hi = y[..., :max(n - 1, 0)], y[..., 1:]
    return c.sum(uf.multiply(spacing, uf.multiply(uf.add(lo, hi), 0.5)), axis=-1)


# ------------------------------------------------------------------ windows

def _window(M, values):
    M = _static_int(M, "M argument of the window function")
    dtype = core.canonical_dtype(np.float64)
    if M <= 1:
        return c.ones(max(M, 0), dtype)
    return asarray(values(np.arange(M), M).astype(dtype))


def hamming(M):
    return _window(M, lambda n, M: 0.54 - 0.46 * np.cos(2 * np.pi * n / (M - 1)))


def hanning(M):
    return _window(M, lambda n, M: 0.5 - 0.5 * np.cos(2 * np.pi * n / (M - 1)))


def bartlett(M):
    return _window(M, lambda n, M: 1 - np.abs(2 * n / (M - 1) - 1))


def blackman(M):
    return _window(M, lambda n, M: 0.42 - 0.5 * np.cos(2 * np.pi * n / (M - 1))
                   + 0.08 * np.cos(4 * np.pi * n / (M - 1)))


# ----------------------------------------------------------- log-spaced grids

def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """base ** linspace(start, stop): num points evenly spaced on a log scale."""
    exponents = c.linspace(start, stop, num, endpoint, dtype=None, axis=axis)
    out = uf.power(c.astype(asarray(base), get_aval(exponents).dtype), exponents)
    return out if dtype is None else c.astype(out, dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """num points from start to stop in geometric progression (same-sign endpoints)."""
    start, stop = _inexact(start, stop)
    sign = uf.sign(start)
    logs = c.linspace(uf.log10(uf.multiply(start, sign)), uf.log10(uf.multiply(stop, sign)),
                      num, endpoint, axis=axis)
    out = uf.multiply(sign, uf.power(10.0, logs))
    return out if dtype is None else c.astype(out, dtype)


# ------------------------------------------------------------------ statistics

def cov(m, y=None, rowvar=True, bias=False, ddof=None, dtype=None):
    """The covariance matrix of the variables (rows unless not rowvar)."""
    x = asarray(m)
    if get_aval(x).ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    x = c.atleast_2d(x)
    if not rowvar and get_aval(x).shape[0] != 1:
        x = c.transpose(x)
    if y is not None:
        y = c.atleast_2d(asarray(y))
        if not rowvar and get_aval(y).shape[0] != 1:
            y = c.transpose(y)
        x = concatenate(promote(x, y), 0)
    (x,) = _inexact(x)
    if dtype is not None:
        x = c.astype(x, dtype)
    ddof = (0 if bias else 1) if ddof is None else _static_int(ddof, "ddof")
    n = get_aval(x).shape[1]
    centred = uf.subtract(x, c.mean(x, axis=1, keepdims=True))
    products = c.matmul(centred, c.transpose(centred))
    return c.squeeze(uf.true_divide(products, float(n - ddof)))


def corrcoef(x, y=None, rowvar=True, dtype=None):
    """Pearson correlation coefficients (the covariance scaled by the deviations)."""
    sigma = cov(x, y, rowvar, dtype=dtype)
    if get_aval(sigma).ndim == 0:
        return uf.true_divide(sigma, sigma)
    d = c.diagonal(sigma)
    stddev = uf.sqrt(uf.absolute(d))
    out = uf.true_divide(uf.true_divide(sigma, c.expand_dims(stddev, 1)),
                         c.expand_dims(stddev, 0))
    return uf.clip(out, -1, 1)


def bincount(x, weights=None, minlength=0, *, length=None):
    """Occurrences (or summed weights) of each non-negative integer in x. The output
    length is x.max() + 1 (at least minlength), which must then be concrete, or `length`
    (values beyond it are dropped, as in JAX)."""
    x = asarray(x)
    if get_aval(x).dtype.kind not in "iub":
        raise TypeError(f"x argument to bincount must have an integer type; got "
                        f"{get_aval(x).dtype}")
    if get_aval(x).ndim != 1:
        raise ValueError("only 1-dimensional input supported.")
    minlength = _static_int(minlength, "minlength of bincount")
    if minlength < 0:
        raise ValueError(f"minlength must be nonnegative, got {minlength}")
    if length is None:
        if isinstance(x, core.Tracer):
            raise core.ConcretizationTypeError(
                "bincount: the output length is x.max() + 1, which needs a concrete x; "
                "pass length= under a transformation")
        values = np.asarray(x)
        length = max(minlength, int(values.max()) + 1 if values.size else 0)
    length = _static_int(length, "length of bincount")
    bins = np.arange(length, dtype=get_aval(x).dtype if get_aval(x).dtype != np.bool_
                     else np.int32)
    hits = uf.equal(c.expand_dims(x, 1), c.expand_dims(asarray(bins), 0))
    if weights is None:
        return c.sum(hits, axis=0, dtype=core.canonical_dtype(np.int64))
    w = asarray(weights)
    return c.sum(uf.where(hits, c.expand_dims(w, 1), c.zeros((), get_aval(w).dtype)), axis=0)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values of both arrays."""
    from impl.numpy._searching import unique
    joined = concatenate([c.ravel(asarray(ar1)), c.ravel(asarray(ar2))], 0)
    return unique(joined, size=size, fill_value=fill_value)


def unwrap(p, discont=None, axis=-1, period=2 * math.pi):
    """p with jumps larger than discont (default period / 2) between neighbours along
    axis replaced by their complement modulo period."""
    (p,) = _inexact(p)
    nd = get_aval(p).ndim
    axis = canonicalize_axis(axis, nd)
    dd = diff(p, axis=axis)
    discont = period / 2 if discont is None else discont
    interval = period / 2
    ddmod = uf.subtract(uf.remainder(uf.add(dd, interval), period), interval)
    ddmod = uf.where(uf.logical_and(uf.equal(ddmod, -interval), uf.greater(dd, 0)),
                     interval, ddmod)
    correction = uf.where(uf.less(uf.absolute(dd), discont), 0, uf.subtract(ddmod, dd))
    first = ix.slice_in_dim(p, 0, 1, 1, axis)
    from impl.numpy._reductions import cumsum
    rest = uf.add(ix.slice_in_dim(p, 1, get_aval(p).shape[axis], 1, axis),
                  cumsum(correction, axis=axis))
    return concatenate([first, rest], axis)
