"""jax.scipy.signal's convolutions over impl: direct (one conv_general_dilated) and FFT-based.

Both follow scipy's conventions for mode="full" | "same" | "valid": "same" is centred on the
first input, "valid" keeps only full overlaps and lets either input be the larger one.
"""
from __future__ import annotations

import numpy as np

from impl import api
from impl import lax
from impl import numpy as jnp
from impl.numpy._ufuncs import _float_operand
from impl.numpy._util import canonicalize_axis, check_arraylike, promote

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve"]

_MODES = ("full", "same", "valid")


def _inexact_pair(in1, in2):
    """Both operands at their promoted dtype, made inexact (ints become floats)."""
    return promote(_float_operand(in1), _float_operand(in2))


def _check_mode(mode):
    if mode not in _MODES:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")


def _direct(in1, in2, mode, precision):
    """N-d convolution as a cross-correlation of in1 with the flipped smaller input.
    Like JAX's, it reads `.ndim` of its operands first (a list raises AttributeError)."""
    _check_mode(mode)
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 must have the same number of dimensions")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"zero-size arrays not supported in convolutions, got shapes "
                         f"{in1.shape} and {in2.shape}.")
    in1, in2 = _inexact_pair(in1, in2)
    in1_larger = all(a >= b for a, b in zip(in1.shape, in2.shape))
    in2_larger = all(a <= b for a, b in zip(in1.shape, in2.shape))
    if not (in1_larger or in2_larger):
        raise ValueError("One input must be smaller than the other in every dimension.")
    second_shape = in2.shape  # "same" centres on in1, whichever input slides
    if in2_larger:
        in1, in2 = in2, in1
    kernel = in2.shape
    if mode == "valid":
        padding = [(0, 0)] * len(kernel)
    elif mode == "same":
        padding = [(k - 1 - (s - 1) // 2, k - s + (s - 1) // 2)
                   for k, s in zip(kernel, second_shape)]
    else:
        padding = [(k - 1, k - 1) for k in kernel]
    out = lax.conv_general_dilated(in1[None, None], jnp.flip(in2)[None, None],
                                   (1,) * len(kernel), padding, precision=precision)
    return out[0, 0]


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """Convolution of two N-dimensional arrays (scipy.signal.convolve)."""
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method in ("direct", "auto"):
        return _direct(in1, in2, mode, precision)
    raise ValueError(f"Got method={method!r}; expected 'auto', 'fft', or 'direct'.")


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """Cross-correlation of two N-dimensional arrays (scipy.signal.correlate)."""
    return convolve(in1, jnp.flip(in2.conj()), mode, precision=precision, method=method)


def _check_2d(name, in1, in2, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0")
    if np.ndim(in1) != 2 or np.ndim(in2) != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs.")


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """Convolution of two 2-dimensional arrays (zero fill at the boundary)."""
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _direct(in1, in2, mode, precision)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """Cross-correlation of two 2-dimensional arrays (zero fill at the boundary).

    Computed as a convolution of flipped inputs; which input is flipped follows scipy's
    choice of the sliding input, so "same" and "valid" keep scipy's alignment.
    """
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    in2_larger = all(a <= b for a, b in zip(in1.shape, in2.shape))
    same_shape = in1.shape == in2.shape
    slide_in1 = mode == "same" or (mode == "valid" and (not in2_larger or same_shape)) or (
        mode not in ("same", "valid") and not in2_larger)
    if slide_in1:
        return jnp.flip(_direct(jnp.flip(in1), jnp.conj(in2), mode, precision))
    out = _direct(jnp.flip(in2), jnp.conj(in1), mode, precision)
    return out if mode == "valid" else jnp.conj(out)


def _fft_full_then_crop(in1, in2, mode):
    full = tuple(a + b - 1 for a, b in zip(in1.shape, in2.shape))
    if mode == "valid":
        in1_larger = all(a >= b for a, b in zip(in1.shape, in2.shape))
        in2_larger = all(a <= b for a, b in zip(in1.shape, in2.shape))
        if not (in1_larger or in2_larger):
            raise ValueError("For 'valid' mode, One input must be at least as "
                             "large as the other in every dimension.")
        if in2_larger:
            in1, in2 = in2, in1
    if all(a == 1 or b == 1 for a, b in zip(in1.shape, in2.shape)):
        conv = in1 * in2  # an outer product needs no transform
    elif np.issubdtype(in1.dtype, np.complexfloating):
        conv = jnp.fft.ifftn(jnp.fft.fftn(in1, full) * jnp.fft.fftn(in2, full), full)
    else:
        conv = jnp.fft.irfftn(jnp.fft.rfftn(in1, full) * jnp.fft.rfftn(in2, full), full)
    if mode == "full":
        out_shape = full
    elif mode == "same":
        out_shape = in1.shape
    else:
        out_shape = tuple(a - b + 1 for a, b in zip(in1.shape, in2.shape))
    start = tuple((f - o) // 2 for f, o in zip(full, out_shape))
    return lax.dynamic_slice(conv, start, out_shape)


def fftconvolve(in1, in2, mode="full", axes=None):
    """Convolution of two N-dimensional arrays through the FFT; `axes` limits the transform
    to those axes and maps over the others (which must then agree in size)."""
    check_arraylike("fftconvolve", in1, in2)
    in1, in2 = _inexact_pair(in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    _check_mode(mode)

    def one(a, b):
        return _fft_full_then_crop(a, b, mode)
    if axes is None:
        return one(in1, in2)
    axes = (axes,) if np.ndim(axes) == 0 else tuple(axes)
    axes = {canonicalize_axis(a, in1.ndim) for a in axes}
    mapped = sorted(set(range(in1.ndim)) - axes)
    if any(in1.shape[i] != in2.shape[i] for i in mapped):
        raise ValueError(f"mapped axes must have same shape; got in1.shape={in1.shape} "
                         f"in2.shape={in2.shape} axes={tuple(sorted(axes))}")
    for ax in mapped:
        one = api.vmap(one, in_axes=ax, out_axes=ax)
    return one(in1, in2)
