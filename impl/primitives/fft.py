"""fft: discrete Fourier transforms over the trailing axes (jax.lax.fft's four kinds).

The transform is linear, so its jvp is the transform of the tangent. Its transpose:
the DFT matrix is symmetric, so a complex transform (fft, ifft) is its own transpose;
rfft keeps only the first n//2+1 outputs of a Hermitian-symmetric spectrum, so its
transpose and irfft's are the other real transform with the dropped half counted by a
weight of 2 on the entries that stand for two (all but the zero and Nyquist
frequencies), in JAX's convention for complex cotangents.
"""
from __future__ import annotations

import math

import numpy as np
from jax import lax

from impl.core import ShapedArray, get_aval
from impl.interpreters import ad, batching
from impl.interpreters.ad import Zero
from impl.primitives import sharding_rules
from impl.primitives._define import define
from impl.primitives.complex_parts import complex_dtype_of, conj, real_dtype_of
from impl.primitives.elementwise import mul
from impl.primitives.shape import broadcast_in_dim

FFT_TYPES = ("fft", "ifft", "rfft", "irfft")


def _fft_aval(x, *, fft_type, fft_lengths):
    lengths = tuple(fft_lengths)
    if not 1 <= len(lengths) <= 3 or len(lengths) > x.ndim:
        raise ValueError(f"fft: fft_lengths {lengths} must name 1 to 3 trailing axes of the "
                         f"operand of shape {x.shape}")
    trailing = x.shape[x.ndim - len(lengths):]
    if fft_type == "rfft":
        if x.dtype.kind != "f":
            raise TypeError(f"fft: rfft takes a real floating operand, got {x.str_short()}")
        expected, out_shape = lengths, x.shape[:-1] + (lengths[-1] // 2 + 1,)
        dtype = complex_dtype_of(x.dtype)
    else:
        if x.dtype.kind != "c":
            raise TypeError(f"fft: {fft_type} takes a complex operand, got {x.str_short()}")
        if fft_type == "irfft":
            expected = lengths[:-1] + (lengths[-1] // 2 + 1,)
            out_shape, dtype = x.shape[:-1] + (lengths[-1],), real_dtype_of(x.dtype)
        else:
            expected, out_shape, dtype = lengths, x.shape, x.dtype
    if trailing != expected:
        raise ValueError(f"fft: a {fft_type} of lengths {lengths} needs trailing axes "
                         f"{expected}, got an operand of shape {x.shape}")
    return ShapedArray(out_shape, dtype)


def _lower_fft(x, *, fft_type, fft_lengths):
    # XLA's CPU layout assignment leaves an FFT's layout free and may hand it the layout
    # its partitioner's collectives want (a sharded program: `irfft2(rfft2(x) * 2)` with
    # x split over its transformed axes), which its FFT then refuses (a RET_CHECK: JAX's
    # own lax.fft fails there). A leading unit axis, reshaped in and out, pins the
    # default layout; it costs nothing (the reshapes are bitcasts).
    out = lax.fft(lax.expand_dims(x, (0,)), fft_type.upper(), fft_lengths)
    return lax.squeeze(out, (0,))


def _hermitian_weights(shape, n, dtype, power=1):
    """Along the last axis of `shape` (a half spectrum of a length-n transform): 2 on the
    entries that also stand for their mirror image, 1 on the zero frequency (and the
    Nyquist one for even n); raised to `power`."""
    w = np.full(shape[-1], 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return broadcast_in_dim((w ** power).astype(dtype), tuple(shape), (len(shape) - 1,))


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if type(ct) is Zero:
        return [None]
    n, size = fft_lengths[-1], math.prod(fft_lengths)
    if fft_type == "rfft":
        ct_aval = get_aval(ct)
        spectrum = mul(conj(ct), _hermitian_weights(ct_aval.shape, n, ct_aval.dtype, -1))
        out = fft_p.bind(spectrum, fft_type="irfft", fft_lengths=fft_lengths)
        return [mul(out, np.asarray(size, real_dtype_of(ct_aval.dtype)))]
    if fft_type == "irfft":
        spectrum = fft_p.bind(ct, fft_type="rfft", fft_lengths=fft_lengths)
        s_aval = get_aval(spectrum)
        weights = _hermitian_weights(s_aval.shape, n, s_aval.dtype)
        return [conj(mul(spectrum, mul(weights, np.asarray(1 / size, s_aval.dtype))))]
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]


def _fft_batch(axis_data, vals, dims, *, fft_type, fft_lengths):
    # The transform acts on trailing axes: keep the batch axis in front of them.
    (x,), (d,) = vals, dims
    return fft_p.bind(batching.moveaxis(x, d, 0), fft_type=fft_type,
                      fft_lengths=fft_lengths), 0


# The result keeps the operand's sharding, transformed axes included (XLA gathers what
# it needs), as JAX types it; a sharded last axis whose length changes (rfft, irfft) must
# stay divisible.
fft_p = define("fft", abstract_eval=_fft_aval, lowering=_lower_fft, jvp=ad.linear_jvp,
               transpose=_fft_transpose, batching=_fft_batch,
               sharding_rule=sharding_rules.same_as_operand,
               unreduced_rule=sharding_rules.fft_unreduced)


def fft(x, fft_type, fft_lengths):
    """The `fft_type` transform ('fft', 'ifft', 'rfft' or 'irfft', any case) of `x` over
    its last len(fft_lengths) axes (as jax.lax.fft, with the type given as a string)."""
    kind = str(getattr(fft_type, "name", fft_type)).lower()
    if kind not in FFT_TYPES:
        raise ValueError(f"Unknown FFT type {fft_type!r}; expected one of {FFT_TYPES}")
    return fft_p.bind(x, fft_type=kind, fft_lengths=tuple(int(n) for n in fft_lengths))
