"""Counter-based random numbers: the threefry2x32 hash and `random_bits`, with all rules.

A key is two uint32 words (key data of shape (..., 2)). Every random value is the
Threefry-2x32 hash (20 rounds, Salmon et al., "Parallel random numbers: as easy as 1, 2,
3", SC 2011) of the key and a counter, so drawing is a pure function: it differentiates
(to zero), batches and stages like any other primitive, and under vmap a batch of keys
is hashed in one call.

The counters follow JAX's default layout (`jax_threefry_partitionable=True`): element i
(row-major) of a draw of shape `shape` hashes the 64-bit counter i, given as its high and
low 32-bit words; the two output words are combined into the random bits. This makes
the numbers bit-for-bit JAX's for the same key.
"""
from __future__ import annotations

import math

import jax
import numpy as np
from jax import lax
from jax.extend import random as jex_random

from impl import core
from impl.core import ShapedArray
from impl.interpreters import ad, batching
from impl.primitives._define import define
from impl.primitives.elementwise import convert_element_type, shift_right_logical_p
from impl.primitives.indexing import concatenate, index_in_dim
from impl.primitives.reductions import iota
from impl.primitives.shape import expand_dims, reshape

KEY_WIDTH = 2                 # uint32 words per threefry2x32 key
BIT_WIDTHS = (8, 16, 32, 64)  # what random_bits can produce
_UINT32 = np.dtype(np.uint32)


def check_key_data(name, aval):
    """Key data is a uint32 array whose last axis holds the two key words."""
    if aval.dtype != _UINT32 or not aval.shape or aval.shape[-1] != KEY_WIDTH:
        raise TypeError(f"{name}: key data must be a uint32 array of shape (..., {KEY_WIDTH}), "
                        f"got {aval.str_short()}")


# ------------------------------------------------------------------ threefry2x32

def _threefry_aval(*avals):
    if any(a.dtype != _UINT32 for a in avals):
        raise TypeError("threefry2x32: arguments must have dtype uint32, got "
                        f"{', '.join(a.str_short() for a in avals)}")
    shapes = {a.shape for a in avals if a.shape}
    if len(shapes) > 1:
        raise TypeError("threefry2x32: arguments must have equal shapes (or be scalars), got "
                        f"{', '.join(a.str_short() for a in avals)}")
    out = ShapedArray(shapes.pop() if shapes else (), _UINT32)
    return [out, out]


def _threefry_lower(k1, k2, x1, x2):
    # JAX's own threefry primitive (public in jax.extend.random) gives its platform
    # lowerings (a rolled loop on CPU, a kernel on GPU); it wants equal shapes.
    shape = np.broadcast_shapes(*(np.shape(a) for a in (k1, k2, x1, x2)))
    args = [jax.numpy.broadcast_to(a, shape) for a in (k1, k2, x1, x2)]
    return jex_random.threefry2x32_p.bind(*args)


def _make_threefry_batch(prim):
    # Elementwise with scalar broadcasting; both outputs share the batch axis.
    elementwise = batching.broadcasting.make(prim)

    def rule(axis_data, vals, dims):
        outs, d = elementwise(axis_data, vals, dims)
        return outs, [d] * len(outs)
    return rule


threefry2x32_p = define(
    "threefry2x32", multiple_results=True, abstract_eval=_threefry_aval,
    lowering=_threefry_lower, jvp=ad.zero_jvp,
    batching=core.RuleMaker(_make_threefry_batch))


def threefry2x32(k1, k2, x1, x2):
    """The Threefry-2x32 hash of the counter words (x1, x2) under the key words (k1, k2);
    all uint32, scalars broadcast. Returns the two hashed words."""
    return threefry2x32_p.bind(k1, k2, x1, x2)


def _check_size(what, shape):
    size = math.prod(shape)
    if size >= 2 ** 32:
        raise NotImplementedError(f"{what} of {size} >= 2**32 elements is not supported")
    return size


# ------------------------------------------------------------------- random_bits

def _random_bits_aval(keys, *, bit_width, shape):
    check_key_data("random_bits", keys)
    if bit_width not in BIT_WIDTHS:
        raise TypeError(f"random_bits: bit_width must be one of {BIT_WIDTHS}, got {bit_width}")
    if any(d < 0 for d in shape):
        raise TypeError(f"random_bits: shape {shape} has a negative size")
    dtype = np.dtype(f"uint{bit_width}")
    if core.canonical_dtype(dtype) != dtype:
        raise TypeError(f"random_bits: {bit_width}-bit values need jax_enable_x64")
    return ShapedArray(keys.shape[:-1] + tuple(shape), dtype)


def _random_bits_lower(keys, *, bit_width, shape):
    # Keys with leading axes (a batch of keys) each draw `shape`: the key words are
    # broadcast against the counters, so all draws are hashed in one call.
    lead = keys.shape[:-1]
    out_shape = lead + tuple(shape)
    key_dims = tuple(range(len(lead)))
    count_dims = tuple(range(len(lead), len(out_shape)))
    k1, k2 = (lax.broadcast_in_dim(keys[..., i], out_shape, key_dims) for i in range(2))
    size = _check_size("a random draw", shape)
    low = lax.broadcast_in_dim(lax.reshape(lax.iota(np.uint32, size), tuple(shape)),
                               out_shape, count_dims)
    bits1, bits2 = _threefry_lower(k1, k2, np.uint32(0), low)
    if bit_width == 64:
        wide = [lax.convert_element_type(b, np.uint64) for b in (bits1, bits2)]
        return lax.shift_left(wide[0], np.uint64(32)) | wide[1]
    mixed = bits1 ^ bits2
    return mixed if bit_width == 32 else lax.convert_element_type(mixed, f"uint{bit_width}")


def _random_bits_batch(axis_data, vals, dims, *, bit_width, shape):
    # The batch axis becomes a leading axis of keys: one more draw per batch element.
    (keys,), (d,) = vals, dims
    keys = batching.moveaxis(keys, d, 0)
    return random_bits_p.bind(keys, bit_width=bit_width, shape=shape), 0


random_bits_p = define(
    "random_bits", abstract_eval=_random_bits_aval, lowering=_random_bits_lower,
    jvp=ad.zero_jvp, batching=_random_bits_batch)


def random_bits(keys, bit_width, shape):
    """Uniform random bits, uint{bit_width} of shape keys.shape[:-1] + shape, from key
    data `keys` (uint32, last axis the two key words)."""
    return random_bits_p.bind(keys, bit_width=int(bit_width),
                              shape=tuple(int(d) for d in shape))


# ---------------------------------------------------------- keys from keys and seeds
# Written over the primitives above, so they transform like any impl code.

def _key_words(key):
    return [index_in_dim(key, i, axis=0, keepdims=False) for i in range(KEY_WIDTH)]


def _stack_words(words):
    """The words as one array, along a new last axis."""
    ndim = core.get_aval(words[0]).ndim
    return concatenate([expand_dims(w, (ndim,)) for w in words], ndim)


def seed_key_data(seed):
    """Key data (uint32[2]) of an integer seed: its high and low 32-bit words."""
    aval = core.get_aval(seed)
    if aval.dtype.itemsize == 8:
        high = convert_element_type(shift_right_logical_p.bind(seed, 32), _UINT32)
    else:
        high = np.uint32(0)
    return _stack_words([high, convert_element_type(seed, _UINT32)])


def split_key_data(key, shape):
    """New keys (uint32[*shape, 2]) for the positions of an array of `shape`."""
    size = _check_size("a split", shape)
    k1, k2 = _key_words(key)
    low = reshape(iota(_UINT32, size), shape)
    return _stack_words(threefry2x32(k1, k2, np.uint32(0), low))


def fold_in_key_data(key, data):
    """A new key from `key` and the uint32 scalar `data` (hashed as the counter (0, data))."""
    k1, k2 = _key_words(key)
    return _stack_words(threefry2x32(k1, k2, np.uint32(0), data))
