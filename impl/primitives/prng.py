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
from impl.primitives.elementwise import (convert_element_type, div, eq, exp, full_like, mul,
                                         select_n, shift_right_logical_p)
from impl.primitives.indexing import concatenate, index_in_dim
from impl.primitives.reductions import iota
from impl.primitives.shape import expand_dims, reshape
from impl.primitives.special import random_gamma_grad

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


# ------------------------------------------------------ samplers with rejection loops
# Gamma, Poisson and binomial variates come from rejection loops whose trip count
# differs per element. impl draws them with JAX's own samplers, called on the raw key
# data inside the lowering, so the numbers are JAX's by construction (including the
# per-element key splitting JAX does inside its gamma primitive). Each primitive takes
# key data of shape (*K, 2) and parameters of shape (*K, *S): keys with leading axes
# K (a batch of keys from vmap) each draw for their slice of the parameters, which the
# lowering expresses as jax.vmap over K, exactly as JAX batches its samplers. (Under
# vmap with one key, JAX's gamma primitive broadcasts the key, and JAX's poisson and
# binomial, plain code, hash the one key once: the same bits as broadcasting it.)

def _check_sampler_operands(name, keys, *params):
    check_key_data(name, keys)
    lead = keys.shape[:-1]
    for p in params:
        if not core.is_float_dtype(p.dtype):
            raise TypeError(f"{name}: parameters must be floats, got {p.str_short()}")
        if p.shape[:len(lead)] != lead or p.shape != params[0].shape:
            raise TypeError(f"{name}: parameters must have equal shapes starting with the "
                            f"key batch shape {lead}, got "
                            f"{', '.join(q.str_short() for q in params)}")


def _lower_jax_sampler(sample):
    """A lowering that runs `sample(jax_key, *params)` per key, mapped over the leading
    key axes."""
    def lower(keys, *params, **kwargs):
        def draw(key_data, *ps):
            return sample(jax.random.wrap_key_data(key_data), *ps, **kwargs)
        for _ in range(keys.ndim - 1):
            draw = jax.vmap(draw)
        return draw(keys, *params)
    return lower


def _sampler_batch(prim):
    """Batch axes of keys and parameters both move to the front (an unbatched operand
    is broadcast), as JAX's gamma batching rule does: the result is one more leading key
    axis."""
    def rule(axis_data, vals, dims, **params):
        vals = [batching.bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims)]
        return prim.bind(*vals, **params), 0
    return rule


def _random_gamma_aval(keys, a, *, log_space):
    _check_sampler_operands("random_gamma", keys, a)
    return ShapedArray(a.shape, a.dtype)


def _jax_gamma(key, a, *, log_space):
    sample = jax.random.loggamma if log_space else jax.random.gamma
    return sample(key, a, dtype=a.dtype)


def _gamma_sample_grad(t, sample, keys, a, *, log_space):
    """The implicit reparameterization derivative d sample / d a (for log samples, of
    exp(sample), floored at the smallest normal float so the quotient stays finite)."""
    if not log_space:
        return mul(t, random_gamma_grad(a, sample))
    x = exp(sample)
    tiny = full_like(x, np.finfo(core.get_aval(x).dtype).tiny)
    x = select_n(eq(x, full_like(x, 0)), x, tiny)
    return mul(t, div(random_gamma_grad(a, x), x))


random_gamma_p = define(
    "random_gamma", abstract_eval=_random_gamma_aval,
    lowering=_lower_jax_sampler(_jax_gamma),
    jvp=ad.jvp_by_parts(None, _gamma_sample_grad, use_output=True),
    batching=core.RuleMaker(_sampler_batch))


def random_gamma(keys, a, *, log_space=False):
    """Gamma(a) variates (their logs with log_space) of a's shape and dtype; a.shape
    starts with the key batch shape keys.shape[:-1], each key drawing for its slice."""
    return random_gamma_p.bind(keys, a, log_space=bool(log_space))


def _random_poisson_aval(keys, lam, *, dtype):
    _check_sampler_operands("random_poisson", keys, lam)
    return ShapedArray(lam.shape, dtype)


def _jax_poisson(key, lam, *, dtype):
    return jax.random.poisson(key, lam, dtype=dtype)


random_poisson_p = define(
    "random_poisson", abstract_eval=_random_poisson_aval,
    lowering=_lower_jax_sampler(_jax_poisson), jvp=ad.zero_jvp,
    batching=core.RuleMaker(_sampler_batch))


def _random_binomial_aval(keys, count, prob, *, dtype):
    _check_sampler_operands("random_binomial", keys, count, prob)
    return ShapedArray(prob.shape, dtype)


def _jax_binomial(key, count, prob, *, dtype):
    return jax.random.binomial(key, count, prob, dtype=dtype)


random_binomial_p = define(
    "random_binomial", abstract_eval=_random_binomial_aval,
    lowering=_lower_jax_sampler(_jax_binomial), jvp=ad.zero_jvp,
    batching=core.RuleMaker(_sampler_batch))
