"""jax.numpy's array manipulation, elementwise math, polynomials, windows, dtype names and
fft argument checks, each against jax.numpy: values, shapes, dtypes and weak types on
concrete input (one table), then the
differentiable ones under jit, jvp, grad and vmap in one compiled program per group
(see _against_jax.py), float64 with the jvp also checked against finite differences."""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from _against_jax import check_transforms, rng_for
from helpers import assert_each

R = rng_for("numpy_names")
X = R.standard_normal((3, 4))
X32 = X.astype(np.float32)
U = R.uniform(-0.9, 0.9, (3, 4))            # inside arctanh's domain
BIG = 1.0 + R.uniform(0.1, 3.0, (3, 4))     # inside arccosh's domain
Z = (R.standard_normal((3, 4)) + 1j * R.standard_normal((3, 4))).astype(np.complex64)
I = np.array([[5, -3, 0, 7], [1, 2, -8, 4]], np.int32)
V = np.array([3, 1, 2, 3, 1, 0, 0, 5], np.int32)
SQ = R.standard_normal((3, 3))
P = np.array([2.0, -1.0, 0.5, 3.0])
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.5], np.float32)

VALUES = {
    # elementwise
    "arcsinh": lambda m: m.arcsinh(X32), "asinh small": lambda m: m.asinh(X * 1e-5),
    "arccosh": lambda m: m.arccosh(BIG), "acosh near 1": lambda m: m.acosh(1 + 1e-7 * BIG),
    "arctanh": lambda m: m.arctanh(U.astype(np.float32)), "atanh int": lambda m: m.atanh(0),
    "cbrt": lambda m: m.cbrt(X32 * 9), "cbrt int": lambda m: m.cbrt(I),
    "copysign": lambda m: m.copysign(X32, SPECIAL[:4].reshape(1, 4)),
    "copysign scalar": lambda m: m.copysign(2, -1.0),
    "fabs": lambda m: m.fabs(I), "float_power": lambda m: m.float_power(BIG, X32),
    "float_power int": lambda m: m.float_power(I, 2),
    "ldexp": lambda m: m.ldexp(X32, I[0]), "ldexp int": lambda m: m.ldexp(I, 3),
    "logaddexp2": lambda m: m.logaddexp2(X32, X32[::-1]),
    "modf": lambda m: m.modf(X32 * 3), "divmod": lambda m: m.divmod(I, 3),
    "divmod float": lambda m: m.divmod(X32 * 5, 1.5),
    "sinc": lambda m: m.sinc(np.concatenate([X32.ravel(), [0.0]])),
    "nextafter": lambda m: m.nextafter(X32, np.float32(0)),
    "left_shift": lambda m: m.left_shift(I, 2), "bitwise_left_shift": lambda m:
        m.bitwise_left_shift(np.uint8(3), np.uint8(2)),
    "right_shift": lambda m: m.right_shift(I, 1), "right_shift unsigned": lambda m:
        m.bitwise_right_shift(I.astype(np.uint32), np.uint32(1)),
    "bitwise_invert": lambda m: m.bitwise_invert(I), "pow": lambda m: m.pow(BIG, 1.5),
    "real": lambda m: m.real(Z), "imag": lambda m: m.imag(Z), "real of real": lambda m:
        m.real(X32), "imag of int": lambda m: m.imag(I),
    "conj": lambda m: m.conj(Z), "conjugate real": lambda m: m.conjugate(X32),
    "angle": lambda m: m.angle(Z), "angle deg real": lambda m: m.angle(X32, deg=True),
    "iscomplex": lambda m: m.iscomplex(Z * np.array([1, 0, 1, 1])), "isreal": lambda m:
        m.isreal(Z.real.astype(np.complex64)), "isreal of real": lambda m: m.isreal(X32),
    "isneginf": lambda m: m.isneginf(SPECIAL), "isposinf": lambda m: m.isposinf(SPECIAL),
    "isposinf int": lambda m: m.isposinf(I),
    # manipulation
    "append": lambda m: m.append(X32, I), "append axis": lambda m: m.append(X, X[:1], axis=0),
    "array_split": lambda m: m.array_split(np.arange(10.0), 3),
    "array_split axis": lambda m: m.array_split(X, [1, 3], axis=1),
    "hsplit": lambda m: m.hsplit(X, 2), "vsplit": lambda m: m.vsplit(X, [1]),
    "dsplit": lambda m: m.dsplit(X.reshape(3, 2, 2), 2),
    "atleast_3d": lambda m: [m.atleast_3d(3.0), m.atleast_3d(P), m.atleast_3d(X)],
    "atleast_3d many": lambda m: m.atleast_3d(P, X),
    "column_stack": lambda m: m.column_stack([P, P * 2, I.T[:4, :1].astype(float)]),
    "dstack": lambda m: m.dstack([X, X]), "concat": lambda m: m.concat([X, X], axis=1),
    "concat none": lambda m: m.concat([X, I], axis=None),
    "fliplr": lambda m: m.fliplr(X), "flipud": lambda m: m.flipud(P),
    "rot90": lambda m: [m.rot90(X, k) for k in range(-1, 4)],
    "rot90 axes": lambda m: m.rot90(X.reshape(3, 2, 2), 1, axes=(2, 0)),
    "rollaxis": lambda m: [m.rollaxis(np.arange(24).reshape(2, 3, 4), a, s)
                           for a in (0, 2, -1) for s in (0, 1, 3, -1, -2)],
    "diagflat": lambda m: m.diagflat(X[:2, :2], k=-1),
    "ediff1d": lambda m: m.ediff1d(X), "ediff1d ends": lambda m: m.ediff1d(
        P, to_end=np.array([9.0, 8.0]), to_begin=-1),
    "empty_like": lambda m: m.empty_like(X32, shape=(2,)).shape,
    "matrix_transpose": lambda m: m.matrix_transpose(X.reshape(1, 3, 4)),
    "matvec": lambda m: m.matvec(X, P), "matvec batched": lambda m: m.matvec(
        np.stack([X, X]), X[:2]),
    "vecmat": lambda m: m.vecmat(X[0, :3], X), "vecmat complex": lambda m: m.vecmat(
        Z[0, :3], Z),
    "unstack": lambda m: m.unstack(X), "unstack axis": lambda m: m.unstack(X, axis=1),
    "resize": lambda m: m.resize(P, (3, 3)), "resize shrink": lambda m: m.resize(X, 5),
    "block": lambda m: m.block([[SQ, SQ[:, :1]], [SQ[:1], np.ones((1, 1))]]),
    "block flat": lambda m: m.block([P, 1.0, P]),
    "select": lambda m: m.select([X > 0.5, X < -0.5], [X, -X], default=7.0),
    "piecewise": lambda m: m.piecewise(X, [X < 0, X > 1], [lambda x: -x, 5.0]),
    "piecewise otherwise": lambda m: m.piecewise(X, [X < 0], [lambda x, a: x * a, 9.0], 3.0),
    "ix_": lambda m: m.ix_(np.arange(2), np.arange(3)),
    "unravel_index": lambda m: m.unravel_index(np.array([0, 5, 11, -1, 30]), (3, 4)),
    "fromfunction": lambda m: m.fromfunction(lambda i, j: i * 10 + j, (2, 3)),
    "fromfunction dtype": lambda m: m.fromfunction(lambda i: i, (4,), dtype=int),
    "apply_along_axis": lambda m: m.apply_along_axis(lambda r: r.sum() * r, 1, X),
    "apply_along_axis 3d": lambda m: m.apply_along_axis(
        lambda r: r[:2], 1, X.reshape(3, 2, 2)),
    "apply_over_axes": lambda m: m.apply_over_axes(m.sum, X.reshape(3, 2, 2), [0, 2]),
    "delete": lambda m: m.delete(X, np.array([0, 2]), axis=1), "delete flat": lambda m: m.delete(X, 5),
    "delete slice": lambda m: m.delete(P, slice(1, None, 2)),
    "fill_diagonal": lambda m: m.fill_diagonal(X, 9.0, inplace=False),
    "fill_diagonal values": lambda m: m.fill_diagonal(np.zeros((3, 3, 3)), P[:2],
                                                      inplace=False),
    "frombuffer": lambda m: m.frombuffer(np.arange(4.0, dtype=np.float32).tobytes(),
                                         dtype=np.float32, offset=4),
    "frombuffer default": lambda m: m.frombuffer(np.arange(3.0).tobytes()),
    "fromstring": lambda m: m.fromstring("1 2 3.5", sep=" "),
    "mgrid": lambda m: [m.mgrid[0:3, 1:5:2], m.mgrid[0:1:5j], m.mgrid[-1:1:0.5]],
    "ogrid": lambda m: m.ogrid[0:3, 0:2:3j],
    # polynomials and series
    "polyval": lambda m: m.polyval(P, X), "polyval int": lambda m: m.polyval(
        np.array([1, 2, 3]), np.array([2, 3])),
    "polyadd": lambda m: m.polyadd(P, P[:2]), "polysub": lambda m: m.polysub(P[:2], P),
    "polymul": lambda m: m.polymul(P, P[:3]), "polymul int": lambda m: m.polymul(
        np.array([1, 2]), np.array([3, 4, 5])),
    "polyder": lambda m: [m.polyder(P, k) for k in range(5)],
    "polyint": lambda m: [m.polyint(P), m.polyint(P, 2, k=np.array([1.0, 2.0])), m.polyint(P, 3, 4.0)],
    "vander": lambda m: m.vander(P), "vander N increasing": lambda m: m.vander(
        np.array([1.0, 2, 3]), 5, increasing=True),
    "trapezoid": lambda m: m.trapezoid(X), "trapezoid dx": lambda m: m.trapezoid(
        X, dx=0.5, axis=0), "trapezoid x": lambda m: m.trapezoid(X, P),
    "trapezoid x 2d": lambda m: m.trapezoid(X, np.cumsum(np.abs(X), 0), axis=0),
    "hamming": lambda m: [m.hamming(k) for k in (0, 1, 6)],
    "hanning": lambda m: m.hanning(7), "bartlett": lambda m: m.bartlett(7),
    "blackman": lambda m: m.blackman(6),
    "logspace": lambda m: m.logspace(0, 3, 4), "logspace base": lambda m: m.logspace(
        1.0, 2.0, 5, endpoint=False, base=2.0, dtype=np.float32),
    "geomspace": lambda m: m.geomspace(1, 1000, 4), "geomspace negative": lambda m:
        m.geomspace(-2.0, -32.0, 5, dtype=np.float32),
    "cov": lambda m: m.cov(X), "cov cols ddof": lambda m: m.cov(X, rowvar=False, ddof=0),
    "cov y bias": lambda m: m.cov(P, P ** 2, bias=True), "cov 1d": lambda m: m.cov(P),
    "corrcoef": lambda m: m.corrcoef(X), "corrcoef y": lambda m: m.corrcoef(P, P ** 2),
    "bincount": lambda m: m.bincount(V), "bincount weights": lambda m: m.bincount(
        V, weights=np.arange(8.0), minlength=9), "bincount length": lambda m: m.bincount(
        V, length=4),
    "union1d": lambda m: m.union1d(V, np.array([9, 1])), "union1d size": lambda m:
        m.union1d(V, np.array([9, 1]), size=8, fill_value=-1),
    "unwrap": lambda m: m.unwrap(np.cumsum(X * 3, axis=1)),
    "unwrap discont period": lambda m: m.unwrap(np.array([0., 3., 7., 1., 9.]),
                                                discont=2.0, period=4.0),
    # fft (complex64 from float32 and int inputs; float64 inputs follow x64)
    "fft.fft": lambda m: m.fft.fft(X32), "fft.fft int n": lambda m: m.fft.fft(I, n=6, axis=0),
    "fft.ifft": lambda m: m.fft.ifft(Z, norm="ortho"), "fft.rfft": lambda m: m.fft.rfft(
        X32, n=5, axis=0), "fft.irfft": lambda m: m.fft.irfft(Z, norm="forward"),
    "fft.hfft": lambda m: m.fft.hfft(Z, n=5), "fft.ihfft": lambda m: m.fft.ihfft(X32, axis=0),
    "fft.fft2": lambda m: m.fft.fft2(Z, s=(4, 3)), "fft.ifft2": lambda m: m.fft.ifft2(
        X32, axes=(1, 0)), "fft.rfft2": lambda m: m.fft.rfft2(X32),
    "fft.irfft2": lambda m: m.fft.irfft2(Z, s=(2, 6), norm="ortho"),
    "fft.fftn": lambda m: m.fft.fftn(Z.reshape(3, 2, 2)), "fft.fftn 4 axes": lambda m:
        m.fft.fftn(np.arange(36.0).reshape(3, 2, 3, 2)),
    "fft.ifftn": lambda m: m.fft.ifftn(Z, s=(2, 2)), "fft.rfftn": lambda m: m.fft.rfftn(
        X32.reshape(3, 2, 2), axes=(0, 2)), "fft.rfftn 4 axes": lambda m: m.fft.rfftn(
        np.cos(np.arange(48.0)).reshape(2, 3, 2, 4)),
    "fft.irfftn": lambda m: m.fft.irfftn(Z), "fft.irfftn 4 axes": lambda m: m.fft.irfftn(
        np.sin(np.arange(36.0)).reshape(3, 2, 3, 2) + 1j),
    "fft.fftfreq": lambda m: [m.fft.fftfreq(7), m.fft.fftfreq(8, 0.1)],
    "fft.fftfreq dtype": lambda m: m.fft.fftfreq(4, dtype=np.float16),
    "fft.rfftfreq": lambda m: [m.fft.rfftfreq(7, d=2.0), m.fft.rfftfreq(8)],
    "fft.fftshift": lambda m: [m.fft.fftshift(X), m.fft.fftshift(P, axes=0)],
    "fft.ifftshift": lambda m: m.fft.ifftshift(X, axes=(1,)),
    # types
    "dtype names": lambda m: [m.zeros(2, getattr(m, n)) for n in DTYPE_NAMES],
    "abstract types": lambda m: [m.issubdtype(m.float32, getattr(m, n))
                                 for n in ("number", "floating", "inexact", "integer")],
    "isdtype": lambda m: [m.isdtype(m.int32, "integral"), m.isdtype(m.float32, "bool")],
    "can_cast": lambda m: [m.can_cast(m.int32, m.float64), m.can_cast(m.float64, m.int8)],
    "isscalar": lambda m: [m.isscalar(v) for v in (3, 1.5, np.float32(1), np.ones(()),
                                                   jnp.ones(()), jnp.ones(2), [1], "a")],
    "iscomplexobj": lambda m: [m.iscomplexobj(v) for v in (Z, X, 1j, 1.0, I)],
    "isrealobj": lambda m: [m.isrealobj(v) for v in (Z, X, 1j, 1.0)],
    "ndarray": lambda m: [isinstance(v, m.ndarray) for v in (jnp.ones(2), np.ones(2), 1.0)],
}

DTYPE_NAMES = ("bool", "int_", "uint", "uint16", "uint64", "single", "double", "csingle",
               "cdouble", "complex_", "float4_e2m1fn", "float8_e4m3fn", "float8_e5m2",
               "float8_e4m3b11fnuz", "int4", "uint4", "int2", "uint2")


def _assert_same(got, expected, rtol=1e-5, atol=1e-6):
    le, lg = jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(got)
    assert len(le) == len(lg), (got, expected)
    for e, g in zip(le, lg):
        if isinstance(e, (bool, np.dtype, tuple, int)) and not isinstance(e, np.ndarray):
            assert g == e and type(g) is type(e), (g, e)
            continue
        assert getattr(g, "weak_type", False) == getattr(e, "weak_type", False), (g, e)
        e, g = np.asarray(e), np.asarray(g)
        assert (g.shape, g.dtype) == (e.shape, e.dtype)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


# Results that are not arrays (Python values, dtypes, shapes), or whose shape depends on
# the values of the input (so they cannot be traced): compared eagerly, one by one.
EAGER = {"empty_like", "abstract types", "isdtype", "can_cast",
         "isscalar", "iscomplexobj", "isrealobj", "ndarray", "bincount", "bincount weights",
         "union1d"}
# The rest run as one jitted program per group on each side (a compilation per group,
# not one per primitive); two groups, by the name's initial (a-f and g-z).
GROUPS = {}
for _name in sorted(set(VALUES) - EAGER):
    GROUPS.setdefault(_name[0] <= "f", []).append(_name)


@pytest.mark.parametrize("name", sorted(EAGER))
def test_eager_value_matches_jax(name):
    _assert_same(VALUES[name](inp), VALUES[name](jnp))


@pytest.mark.parametrize("first_half", sorted(GROUPS))
def test_values_match_jax(first_half):
    names = GROUPS[first_half]
    expected = jax.jit(lambda: {n: VALUES[n](jnp) for n in names})()
    got = impl.jit(lambda: {n: VALUES[n](inp) for n in names})()
    assert_each(_assert_same, got, expected)


# ------------------------------------------------------------- under transformations

FFT_MISUSE = {
    "rfft of complex": lambda m: m.fft.rfft(Z),
    "bad norm": lambda m: m.fft.fft(X, norm="unitary"),
    "repeated axes": lambda m: m.fft.fftn(X, axes=(0, 0)),
    "s and axes lengths": lambda m: m.fft.fftn(X, s=(2, 2), axes=(0,)),
    "non-positive s": lambda m: m.fft.fft(X, n=0),
    "fft2 with 3 axes": lambda m: m.fft.fft2(X.reshape(3, 2, 2), axes=(0, 1, 2)),
    "fft with 2 axes": lambda m: m.fft.fft(X, axis=(0, 1)),
    "fftfreq of a list": lambda m: m.fft.fftfreq([3]),
}


@pytest.mark.parametrize("name", sorted(FFT_MISUSE))
def test_fft_misuse_raises_as_jax(name):
    with pytest.raises(ValueError):
        FFT_MISUSE[name](jnp)
    with pytest.raises(ValueError):
        FFT_MISUSE[name](inp)


def _normal(*shape, seed=0):
    return rng_for("names", shape, seed).standard_normal(shape)


X64, Y64 = _normal(3, 4), _normal(3, 4, seed=1)
U64 = np.clip(_normal(3, 4, seed=2) * 0.3, -0.9, 0.9)
B64 = 1.5 + np.abs(_normal(3, 4, seed=3))

_SLOW = pytest.mark.slow   # compositions of primitives tested elsewhere; ~20 s each

TRANSFORMED = [
    pytest.param("elementwise", lambda m: lambda x, u, b: (
        m.arcsinh(x), m.arccosh(b), m.arctanh(u), m.cbrt(b), m.copysign(x, u), m.fabs(x),
        m.float_power(b, x), m.ldexp(x, np.arange(4)), m.logaddexp2(x, u), m.modf(3 * x),
        m.sinc(x), m.divmod(5 * x, 1.5)[1], m.angle(x), m.real(x), m.imag(x),
        m.conj(x)), [X64, U64, B64], marks=_SLOW, id="elementwise"),
    pytest.param("complex_parts", lambda m: lambda x, y: (
        m.real(m.conj(x + 1j * y) * (x - 2j)), m.imag((x + 1j * y) ** 2),
        m.angle(x + 1j * y), m.abs(x - 1j * y), m.real(m.vecmat(x[0] + 1j * y[0], y.T))),
        [X64, Y64], id="complex_parts"),
    pytest.param("manipulation", lambda m: lambda x, y: (
        m.append(x, y), m.append(x, y[:1], axis=0), m.array_split(x, 3, axis=1),
        m.hsplit(x, 2), m.vsplit(x, [1]), m.atleast_3d(x), m.column_stack([x[0], y[0]]),
        m.dstack([x, y]), m.concat([x, y]), m.fliplr(x), m.flipud(y), m.rot90(x, 3),
        m.rollaxis(x, 1), m.diagflat(x[0]), m.ediff1d(x, to_begin=y[0, :1]),
        m.matrix_transpose(x), m.matvec(x, y[0]), m.vecmat(x[:, 0], y), m.unstack(y),
        m.resize(x, (5, 3)), m.block([[x, y], [y, x]]),
        m.select([x > 0, y > 0], [x * y, y], default=2.0),
        m.piecewise(x, [x < 0, x > 1], [lambda v: v ** 2, lambda v: 3 * v, 0.5]),
        m.delete(x, np.array([1]), axis=1), m.fill_diagonal(x, y[0, 0], inplace=False),
        m.apply_along_axis(lambda r: r * r.sum(), 0, x),
        m.apply_over_axes(m.sum, x, [1])), [X64, Y64], marks=_SLOW, id="manipulation"),
    pytest.param("series", lambda m: lambda p, x, y: (
        m.polyval(p, x), m.polyadd(p, x[0]), m.polysub(x[1, :2], p), m.polymul(p, x[0]),
        m.polyder(p, 2), m.polyint(p, 2, k=p[:2]), m.vander(x[0], 3),
        m.trapezoid(x, dx=0.3), m.trapezoid(y, m.cumsum(m.abs(x), 1) + 0.1),
        m.cov(x), m.cov(x, y, rowvar=False, ddof=0), m.corrcoef(x, y),
        m.unwrap(3 * m.cumsum(x, 1)), m.logspace(p[0], p[1], 4), m.geomspace(
            m.abs(p[0]) + 1, m.abs(p[1]) + 5, 3)),
        [_normal(4, seed=4), X64, Y64], marks=_SLOW, id="series"),
    # The fft primitive's rules (jvp = itself, transpose = the adjoint in JAX's
    # convention) through every kind of transform, with real losses of complex results.
    pytest.param("fft", lambda m: lambda x, y: (
        m.fft.fft(x), m.fft.ifft(x + 1j * y, n=5, axis=0, norm="ortho"),
        m.fft.rfft(x, n=6), m.fft.irfft(x + 1j * y, n=7, norm="forward"),
        m.fft.hfft(x[0] + 1j * y[0]), m.fft.ihfft(x[1]), m.fft.fft2(x + 1j * y, s=(2, 5)),
        m.fft.irfftn(m.fft.rfftn(x) * (1 + 1j * y[:, :3]), s=x.shape),
        m.real(m.fft.fftn(m.fft.ifft2(x * y))), m.abs(m.fft.rfft(x, axis=0)),
        m.fft.fftshift(x), m.fft.ifftshift(y, 0), m.fft.fftfreq(5, x[0, 0])),
        [X64, Y64], id="fft"),
]


@pytest.mark.parametrize("name, fn, args", TRANSFORMED)
def test_transformed_matches_jax(name, fn, args):
    check_transforms(name, fn(inp), fn(jnp), args, fd=True)


def test_a_wrong_fft_transpose_is_caught():
    """Negative test: the rfft transpose without the weights for the dropped half of
    the spectrum gives wrong gradients, and the comparison with JAX says so."""
    from impl.interpreters import ad
    from impl.primitives.fft import fft_p
    right = ad.transpose_rules[fft_p]

    def unweighted(ct, x, *, fft_type, fft_lengths):
        if fft_type != "rfft":
            return right(ct, x, fft_type=fft_type, fft_lengths=fft_lengths)
        out = fft_p.bind(inp.conj(ct), fft_type="irfft", fft_lengths=fft_lengths)
        return [out * float(np.prod(fft_lengths))]
    fn = lambda m: lambda x: m.abs(m.fft.rfft(x))  # noqa: E731
    ad.transpose_rules[fft_p] = unweighted
    try:
        with pytest.raises(AssertionError, match="grad"):
            check_transforms("wrong rfft transpose", fn(inp), fn(jnp), [X64[0]], vmap=False)
    finally:
        ad.transpose_rules[fft_p] = right
    check_transforms("rfft transpose", fn(inp), fn(jnp), [X64[0]], vmap=False)


SEARCH_A = np.array([0.0, 1, 1, 2, 4, 4, np.nan, np.nan], np.float32)
SEARCH_UNSORTED = np.array([3.0, -1, 2, 0.5, 7], np.float32)   # each method's own answer
SEARCH_V = np.array([[-1, 0, 1, 2.5], [3, 4, 5, np.nan]], np.float32)


@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "sort", "compare_all"])
def test_searchsorted_methods_match_jax(method):
    def calls(api, m):
        return [api.jit(lambda a, v: m.searchsorted(a, v, side=side, method=method))(a, SEARCH_V)
                for side in ("left", "right") for a in (SEARCH_A, SEARCH_UNSORTED)] + [
            api.vmap(lambda v: m.searchsorted(SEARCH_A, v, method=method))(SEARCH_V),
            m.searchsorted(SEARCH_A[:0], SEARCH_V, method=method)]
    _assert_same(calls(impl, inp), calls(jax, jnp))


def test_searchsorted_unknown_method_raises_as_jax():
    for m in (jnp, inp):
        with pytest.raises(ValueError, match="method='binary'"):
            m.searchsorted(SEARCH_A, 1.0, method="binary")
