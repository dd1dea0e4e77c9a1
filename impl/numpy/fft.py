"""jax.numpy.fft over impl's fft primitive: the transformed axes are moved last, cropped
or zero-padded to the requested lengths, transformed (at most three axes per primitive
application, as XLA allows), scaled by `norm`, and moved back."""
from __future__ import annotations

import math
import operator

import numpy as np

from impl import core
from impl.core import get_aval
from impl.numpy import _core as c
from impl.numpy._arrays import roll
from impl.numpy._ufuncs import inexact_dtype
from impl.numpy._util import asarray, canonicalize_axis
from impl.primitives import complex_parts as cp
from impl.primitives import elementwise as ew
from impl.primitives import indexing as ix
from impl.primitives import fft as fft_prim

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
           "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")


def _operand(name, kind, x):
    """Cast to the dtype the transform takes: real floating for rfft, complex else."""
    dtype = get_aval(x).dtype
    if kind == "rfft":
        if dtype.kind == "c":
            raise ValueError(f"jax.numpy.fft.{name}: only real valued inputs are supported, "
                             f"got {dtype}")
        return ew.convert_element_type(x, inexact_dtype(dtype))
    if dtype.kind != "c":
        dtype = cp.complex_dtype_of(inexact_dtype(dtype))
    return ew.convert_element_type(x, dtype)


def _resized(x, axes, lengths):
    """Crop or zero-pad each axis in `axes` to its length in `lengths`."""
    shape = get_aval(x).shape
    target = list(shape)
    for a, n in zip(axes, lengths):
        target[a] = n
    crop = [min(s, t) for s, t in zip(shape, target)]
    if tuple(crop) != shape:
        x = ix.slice(x, [0] * len(shape), crop)
    if tuple(crop) != tuple(target):
        zero = np.zeros((), get_aval(x).dtype)
        x = ix.pad(x, zero, [(0, t - s, 0) for s, t in zip(crop, target)])
    return x


def _transform_last(x, kind, lengths):
    """The primitive over the last len(lengths) axes, three at a time at most: the axes
    are separable, so a real transform takes the last three and a complex one the rest."""
    if len(lengths) <= 3:
        return fft_prim.fft(x, kind, lengths)
    nd, k = get_aval(x).ndim, len(lengths)
    front = tuple(range(nd - k, nd - 3))
    back = tuple(range(nd - len(front), nd))

    def on_front(y, inner):
        y = c.moveaxis(y, front, back)
        y = _transform_last(y, inner, lengths[:-3])
        return c.moveaxis(y, back, front)

    if kind in ("fft", "rfft"):
        return on_front(fft_prim.fft(x, kind, lengths[-3:]), "fft")
    return fft_prim.fft(on_front(x, "ifft"), kind, lengths[-3:])


def _scale(x, name, lengths, norm):
    """norm: 'backward' (or None) scales only the inverse by 1/size, 'forward' only the
    forward transform, 'ortho' both by 1/sqrt(size)."""
    if norm is None or norm == "backward":
        return x
    size = math.prod(lengths)
    factor = math.sqrt(size) if norm == "ortho" else size
    if not name.startswith("i"):
        factor = 1 / factor
    return ew.mul(x, np.asarray(factor, get_aval(x).dtype))


def _transform(name, kind, a, s, axes, norm):
    full = f"jax.numpy.fft.{name}"
    if norm not in _NORMS:
        raise ValueError(f'{full}: invalid norm value {norm!r}; should be "backward", '
                         '"ortho" or "forward".')
    x = asarray(a)
    nd = get_aval(x).ndim
    if s is not None:
        s = tuple(operator.index(n) for n in s)
        if any(n <= 0 for n in s):
            raise ValueError(f"{full}: the lengths s={s} must be positive.")
        if axes is not None and len(s) != len(axes):
            raise ValueError(f"{full}: s={s} and axes={tuple(axes)} have different lengths.")
    given = axes is not None
    if axes is None:
        axes = range(nd) if s is None else range(nd - len(s), nd)
    axes = tuple(canonicalize_axis(ax, nd) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{full} does not support repeated axes. Got axes {axes}.")
    last = tuple(range(nd - len(axes), nd))
    if given:
        x = c.moveaxis(x, axes, last)
    shape = get_aval(x).shape
    if s is None:
        s = tuple(shape[ax] for ax in last)
        if kind == "irfft" and s:
            s = s[:-1] + (max(0, 2 * (s[-1] - 1)),)
        in_lengths = tuple(shape[ax] for ax in last)
    else:
        in_lengths = s[:-1] + (s[-1] // 2 + 1,) if kind == "irfft" else s
        x = _resized(x, last, in_lengths)
    x = _operand(name, kind, x)
    out = _transform_last(x, kind, s) if s else x
    out = _scale(out, name, s, norm)
    return c.moveaxis(out, last, axes) if given else out


def _one_axis(name, axis):
    if isinstance(axis, (list, tuple)):
        raise ValueError(f"jax.numpy.fft.{name} does not support multiple axes. Please use "
                         f"jax.numpy.fft.{name}n. Got axis = {axis!r}.")
    return [axis]


def _two_axes(name, axes):
    if len(axes) != 2:
        raise ValueError(f"jax.numpy.fft.{name} only supports 2 axes. Got axes = {axes!r}.")
    return axes


def _lengths(n):
    return None if n is None else [n]


def fft(a, n=None, axis=-1, norm=None):
    """The discrete Fourier transform along `axis` (cropped or zero-padded to n)."""
    return _transform("fft", "fft", a, _lengths(n), _one_axis("fft", axis), norm)


def ifft(a, n=None, axis=-1, norm=None):
    return _transform("ifft", "ifft", a, _lengths(n), _one_axis("ifft", axis), norm)


def rfft(a, n=None, axis=-1, norm=None):
    """The first n//2+1 frequencies of the transform of a real signal."""
    return _transform("rfft", "rfft", a, _lengths(n), _one_axis("rfft", axis), norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The real signal (length n, default 2*(m-1)) of a half spectrum of m entries."""
    return _transform("irfft", "irfft", a, _lengths(n), _one_axis("irfft", axis), norm)


def hfft(a, n=None, axis=-1, norm=None):
    """The real spectrum of a signal with Hermitian symmetry (given by its first half)."""
    x = cp.conj(_operand("hfft", "fft", asarray(a)))
    axis = _one_axis("hfft", axis)
    length = (get_aval(x).shape[axis[0]] - 1) * 2 if n is None else n
    out = _transform("hfft", "irfft", x, _lengths(n), axis, norm)
    return ew.mul(out, np.asarray(length, get_aval(out).dtype))


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of hfft: half the spectrum of a real signal, conjugated, over n."""
    x = asarray(a)
    axis = _one_axis("ihfft", axis)
    length = get_aval(x).shape[axis[0]] if n is None else n
    out = cp.conj(_transform("ihfft", "rfft", x, _lengths(n), axis, norm))
    return ew.mul(out, np.asarray(1 / length, get_aval(out).dtype))


def fft2(a, s=None, axes=(-2, -1), norm=None):
    return _transform("fft2", "fft", a, s, _two_axes("fft2", axes), norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    return _transform("ifft2", "ifft", a, s, _two_axes("ifft2", axes), norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    return _transform("rfft2", "rfft", a, s, _two_axes("rfft2", axes), norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    return _transform("irfft2", "irfft", a, s, _two_axes("irfft2", axes), norm)


def fftn(a, s=None, axes=None, norm=None):
    """The transform over `axes` (default: the last len(s) axes, or all)."""
    return _transform("fftn", "fft", a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    return _transform("ifftn", "ifft", a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    return _transform("rfftn", "rfft", a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    return _transform("irfftn", "irfft", a, s, axes, norm)


def _check_freq_args(name, n, d):
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of jax.numpy.fft.{name} only takes an int. "
                         f"Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of jax.numpy.fft.{name} only takes a single value. "
                         f"Got d = {list(d)}.")


def _frequencies(k, n, d, dtype):
    dtype = core.canonical_dtype(dtype or np.float64)
    work = np.finfo(inexact_dtype(dtype)).dtype
    spacing = ew.mul(ew.convert_element_type(asarray(d), work), np.asarray(n, work))
    out = ew.div(asarray(k.astype(work)), spacing)
    return ew.convert_element_type(out, dtype)


def fftfreq(n, d=1.0, *, dtype=None):
    """The frequencies of fft's outputs, in cycles per unit of the sample spacing d."""
    _check_freq_args("fftfreq", n, d)
    k = (np.arange(n) + n // 2) % n - n // 2
    return _frequencies(k, n, d, dtype)


def rfftfreq(n, d=1.0, *, dtype=None):
    """The frequencies of rfft's outputs (0 to the Nyquist frequency)."""
    _check_freq_args("rfftfreq", n, d)
    return _frequencies(np.arange(n // 2 + 1), n, d, dtype)


def _shifted(x, axes, sign):
    x = asarray(x)
    shape = get_aval(x).shape
    if axes is None:
        axes = tuple(range(len(shape)))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    shifts = [sign * (shape[canonicalize_axis(ax, len(shape))] // 2) for ax in axes]
    return roll(x, shifts, axes) if axes else x


def fftshift(x, axes=None):
    """The zero frequency moved to the middle of each axis in `axes` (default all)."""
    return _shifted(x, axes, 1)


def ifftshift(x, axes=None):
    """fftshift undone."""
    return _shifted(x, axes, -1)
