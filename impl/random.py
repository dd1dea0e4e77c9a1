"""impl.random: JAX's `jax.random` on impl's PRNG primitives.

Keys are impl values, so every function here works under `vmap` (over keys, seeds or
parameters), `grad` (through the parameters of a draw), `jit`, and nested in each other,
and gives bit-for-bit the numbers of JAX 0.10 for the same key (the default
threefry2x32 implementation with `jax_threefry_partitionable=True`).

Two kinds of key, as in JAX:
- `key(seed)` gives a typed key array (`PRNGKeyArray`): the uint32 key data with a key
  dtype (`jax.random.key_dtype()`), shape = the data's shape without its last axis. It
  is a pytree whose one leaf is the key data, so it passes through every transformation.
- `PRNGKey(seed)` gives a legacy raw key: the uint32 key data itself, shape (2,).
Functions given a typed key return typed keys, given a raw key return raw keys.

Each sampler is, as in JAX, a jitted body (`impl.jit` with static shape and dtype) over
`random_bits`: one compiled program when called eagerly, one call in a staged program.
"""
from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from impl import core
from impl import lax
from impl import numpy as jnp
from impl.api import jit
from impl.numpy._polynomials import _inexact as promote_inexact
from impl.primitives import prng
from impl.scipy import special
from impl.primitives.sharding import auto_axes
from impl.primitives.sharding_rules import canonical_out_sharding, not_a_named_sharding

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "key_dtype", "clone",
    "split", "fold_in", "bits", "uniform", "normal", "truncated_normal", "bernoulli",
    "randint", "permutation", "choice", "categorical", "gumbel", "exponential", "laplace",
    "logistic", "cauchy", "rademacher", "lognormal", "rayleigh", "weibull_min", "pareto",
    "geometric", "triangular", "maxwell", "double_sided_maxwell", "wald",
    "multivariate_normal", "orthogonal", "generalized_normal", "ball", "gamma", "loggamma",
    "beta", "dirichlet", "chisquare", "t", "f", "poisson", "binomial", "multinomial",
]

_IMPL_NAME = "threefry2x32"


# ------------------------------------------------------------- configuration

def _check_config():
    """impl implements JAX's default PRNG only; other settings would change the numbers."""
    name = jax.config.jax_default_prng_impl
    if name != _IMPL_NAME:
        raise NotImplementedError(f"impl.random implements the {_IMPL_NAME!r} PRNG only; "
                                  f"jax_default_prng_impl is {name!r}")
    if not jax.config.jax_threefry_partitionable:
        raise NotImplementedError("impl.random implements the bit layout of "
                                  "jax_threefry_partitionable=True (JAX's default) only")


def _resolve_impl(impl_spec, fun_name):
    """Accept the specifications of threefry2x32 JAX accepts (a name, a PRNGSpec, a key
    dtype); reject other implementations (unknown names with JAX's ValueError)."""
    if impl_spec is not None:
        name = impl_spec if isinstance(impl_spec, str) else str(
            jax.random.key_impl(jax.random.key(0, impl=impl_spec)))
        if name != _IMPL_NAME:
            jax.random.key_dtype(name)
            raise NotImplementedError(f"{fun_name}: impl.random implements the "
                                      f"{_IMPL_NAME!r} PRNG only, got {name!r}")
    _check_config()


def _user_dtype(dtype, default):
    """A user-requested dtype as JAX canonicalizes it (warning when x64 truncates it;
    JAX's samplers name no function in the warning)."""
    if isinstance(dtype, core.Tracer):
        raise ValueError("Passing an array as a dtype argument is no longer supported; "
                         "instead of dtype=arr use dtype=arr.dtype.")
    if dtype is None:
        return core.canonical_dtype(default)
    return core.user_dtype(dtype)


def _drawn(name, out_sharding, draw, *arrays):
    """`draw(*arrays)` placed as `out_sharding` (a PartitionSpec read against the mesh in
    context, or a NamedSharding) says, as JAX places draws: with the out_sharding's
    Explicit mesh axes taken out of the types (`auto_axes`), so the parameters' shardings
    do not constrain the draw, then resharded. The bits do not depend on how the result
    is sharded (JAX's partitionable threefry), so the values are the unsharded draw's.
    Without out_sharding the draw's type follows from its parameters'."""
    if out_sharding is None:
        return draw(*arrays)
    if not isinstance(out_sharding, (P, NamedSharding)):
        raise not_a_named_sharding(f"`out_sharding` argument of {name}", out_sharding)
    # Trailing None entries say nothing (JAX accepts P("x", None, None) for a vector draw).
    spec = out_sharding if isinstance(out_sharding, P) else out_sharding.spec
    entries = tuple(spec)
    while entries and entries[-1] is None:
        entries = entries[:-1]
    if len(entries) < len(spec):
        spec = spec.update(partitions=entries)
        out_sharding = spec if isinstance(out_sharding, P) else out_sharding.update(spec=spec)
    target = canonical_out_sharding(out_sharding, len(spec), name)
    return auto_axes(draw, axes=tuple(target.mesh.abstract_mesh.explicit_axes),
                     out_sharding=target)(*arrays)


def _replicated_when_unshaped(out_sharding, shape):
    """The samplers JAX gives this default place a draw without a shape (a scalar, or
    one shaped by its parameters) replicated when every axis of the mesh in context is
    Explicit, whatever its parameters' shardings."""
    if out_sharding is None and not shape:
        mesh = jax.sharding.get_abstract_mesh()
        if not mesh.empty and mesh.are_all_axes_explicit:
            return NamedSharding(mesh, P())
    return out_sharding


def _canonical_shape(shape):
    try:
        dims = (operator.index(shape),) if not isinstance(shape, Sequence) or \
            isinstance(shape, str) else tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError("Shapes must be 1D sequences of concrete values of integer type, "
                        f"got {shape}.") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"random draws need non-negative dimensions, got shape {dims}")
    return dims


def _broadcast_shapes(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError("Incompatible shapes for broadcasting: shapes="
                         f"{[tuple(s) for s in shapes]}") from None


def _check_shape(name, shape, *param_shapes):
    """Parameters broadcast to the requested shape (never beyond it)."""
    if param_shapes:
        result = _broadcast_shapes(shape, *param_shapes)
        if result != tuple(shape):
            raise ValueError(f"{name} parameter shapes must be broadcast-compatible with "
                             "shape argument, and the result of broadcasting the shapes "
                             f"must equal the shape argument, but got result {result} for "
                             f"shape argument {shape}.")


def _check_arraylike(fun_name, *args):
    for i, a in enumerate(args):
        if not core.valid_jaxtype(a):
            raise TypeError(f"{fun_name} requires ndarray or scalar arguments, got "
                            f"{type(a)} at position {i}.")


def _check_float_dtype(fun_name, dtype, complex_ok=False):
    if not jax.numpy.issubdtype(dtype, np.inexact if complex_ok else np.floating):
        what = "a float or complex dtype" if complex_ok else "a float dtype"
        raise ValueError(f"dtype argument to `{fun_name}` must be {what}, got {dtype}")


# ---------------------------------------------------------------- typed keys

class PRNGKeyArray:
    """An array of threefry2x32 keys: uint32 key data of shape (*shape, 2) seen as an
    array of `shape` with a key dtype. A pytree whose single leaf is the key data."""

    __slots__ = ("_base_array",)
    __array_priority__ = 100
    __hash__ = None

    def __init__(self, key_data):
        self._base_array = key_data   # any value: pytree unflattening passes placeholders

    shape = property(lambda self: tuple(core.get_aval(self._base_array).shape[:-1]))
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    dtype = property(lambda self: jax.random.key_dtype(_IMPL_NAME))
    itemsize = property(lambda self: prng.KEY_WIDTH * 4)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        return PRNGKeyArray(self._base_array[index + (slice(None),)])

    def reshape(self, *shape, order="C"):
        if order != "C":
            raise NotImplementedError("key arrays reshape in C order only")
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return PRNGKeyArray(jnp.reshape(self._base_array, tuple(shape) + (prng.KEY_WIDTH,)))

    def ravel(self):
        return self.reshape(self.size)

    flatten = ravel

    def squeeze(self, axis=None):
        axes = tuple(i for i, d in enumerate(self.shape) if d == 1) if axis is None else axis
        return PRNGKeyArray(jnp.squeeze(self._base_array, axes))

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        axes = tuple(range(self.ndim))[::-1] if not axes or axes[0] is None else tuple(axes)
        return PRNGKeyArray(jnp.transpose(self._base_array, axes + (self.ndim,)))

    T = property(lambda self: self.transpose())

    def __eq__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        return jnp.all(jnp.equal(self._base_array, other._base_array), axis=-1)

    def __ne__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        return jnp.logical_not(self == other)

    def __bool__(self):
        raise TypeError("key array cannot be converted to boolean.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("A key array cannot be converted to a NumPy array. Use "
                        "impl.random.key_data(arr) to extract the underlying integer array.")

    def __repr__(self):
        return (f"Array({self.shape}, dtype={self.dtype.name}) overlaying:\n"
                f"{self._base_array}")

    def block_until_ready(self):
        jax.block_until_ready(self._base_array)
        return self

    def copy(self):
        return PRNGKeyArray(self._base_array)


jax.tree_util.register_pytree_node(
    PRNGKeyArray, lambda k: ((k._base_array,), None), lambda _, leaves: PRNGKeyArray(*leaves))


def _is_jax_typed_key(x):
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _check_key_data(data):
    """JAX's checks of raw key data, with its TypeErrors."""
    if not all(hasattr(data, a) for a in ("ndim", "shape", "dtype")):
        raise TypeError("invalid PRNG key data: expected key_data to have ndim, shape, and "
                        f"dtype attributes. Got {data}")
    if data.ndim < 1:
        raise TypeError(f"invalid PRNG key data: expected key_data.ndim >= 1; got "
                        f"ndim={data.ndim}")
    if tuple(data.shape[-1:]) != (prng.KEY_WIDTH,):
        raise TypeError(f"invalid PRNG key data: expected key_data.shape to end with "
                        f"({prng.KEY_WIDTH},); got shape={tuple(data.shape)} for impl="
                        f"{_IMPL_NAME}")
    if data.dtype != np.uint32:
        raise TypeError(f"invalid PRNG key data: expected key_data.dtype = uint32; got "
                        f"dtype={data.dtype}")


def _unwrap(fun_name, key, allow_batched=False):
    """The key data of `key` and whether it was a typed key."""
    if isinstance(key, PRNGKeyArray):
        data, typed = key._base_array, True
    elif _is_jax_typed_key(key):
        _resolve_impl(key.dtype, fun_name)
        data, typed = jax.random.key_data(key), True
    elif isinstance(key, (core.Tracer, jax.Array, np.ndarray, np.generic, int, float)):
        _check_key_data(key)
        _check_legacy_key()
        data, typed = key, False
    else:
        raise TypeError(f"unexpected PRNG key type {type(key)}")
    _check_config()
    shape = tuple(core.get_aval(data).shape[:-1])
    if shape and not allow_batched:
        raise ValueError(f"{fun_name} accepts a single key, but was given a key array of "
                         f"shape {shape} != (). Use jax.vmap for batching.")
    return data, typed


def _check_legacy_key():
    mode = jax.config.jax_legacy_prng_key
    message = ("Legacy uint32 key array passed as key to jax.random function. Please create "
               "keys using jax.random.key(). If use of a raw key array was intended, set "
               'jax_legacy_prng_key="allow".')
    if mode == "error":
        raise ValueError(message)
    if mode == "warn":
        warnings.warn(message, stacklevel=4)
    elif jax.config.jax_enable_custom_prng:
        warnings.warn("Raw arrays as random keys to jax.random functions are deprecated. "
                      "Assuming valid threefry2x32 key for now.", FutureWarning, stacklevel=4)


def _wrap(typed, data):
    """Keys of the kind the caller gave (typed keys with jax_enable_custom_prng)."""
    return PRNGKeyArray(data) if typed or jax.config.jax_enable_custom_prng else data


# -------------------------------------------------------------- key functions

_seed_key_data = jit(prng.seed_key_data)
_split_key_data = jit(prng.split_key_data, static_argnums=1)
_fold_in_key_data = jit(prng.fold_in_key_data)


def _seed(ctor_name, seed, impl):
    _resolve_impl(impl, ctor_name)
    if isinstance(seed, PRNGKeyArray) or _is_jax_typed_key(seed):
        raise TypeError(f"{ctor_name} accepts a scalar seed, but was given a PRNG key.")
    if np.ndim(seed):
        raise TypeError(f"{ctor_name} accepts a scalar seed, but was given an array of "
                        f"shape {np.shape(seed)} != (). Use jax.vmap for batching")
    # A Python int goes through int64 (then x32 mode wraps it), as in JAX.
    seed = jnp.asarray(np.int64(seed) if isinstance(seed, int) else seed)
    if core.get_aval(seed).dtype.kind not in "iu":
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    offset = jax.config.jax_random_seed_offset
    if offset:
        seed = seed + offset
    return _seed_key_data(seed)


def key(seed, *, impl=None, dtype=None):
    """A typed PRNG key (a scalar key array) from an integer seed."""
    if dtype is not None:
        if impl is not None:
            raise ValueError("Cannot specify both `impl` and `dtype` arguments to "
                             "jax.random.key")
        impl = dtype
    return PRNGKeyArray(_seed("key", seed, impl))


def PRNGKey(seed, *, impl=None):  # noqa: N802  (JAX's name)
    """A legacy PRNG key: uint32 key data of shape (2,), from an integer seed."""
    data = _seed("PRNGKey", seed, impl)
    return PRNGKeyArray(data) if jax.config.jax_enable_custom_prng else data


def split(key, num=2):
    """`num` new keys (an int or a shape) from one key, along new leading axes."""
    data, typed = _unwrap("split", key)
    shape = tuple(num) if isinstance(num, Sequence) else (num,)
    return _wrap(typed, _split_key_data(data, _canonical_shape(shape)))


def fold_in(key, data):
    """A new key from `key` and a 32-bit integer `data` (traced data is fine)."""
    key_data_, typed = _unwrap("fold_in", key)
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of shape "
                        f"{np.shape(data)} != (). Use jax.vmap for batching.")
    return _wrap(typed, _fold_in_key_data(key_data_, jnp.asarray(data, dtype=np.uint32)))


def key_data(keys):
    """The uint32 key data underlying a key array (its shape plus a last axis of 2)."""
    data, _ = _unwrap("key_data", keys, allow_batched=True)
    return data


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """A typed key array over uint32 key data whose last axis holds the key words."""
    if dtype is not None:
        if impl is not None:
            raise ValueError("Cannot specify both `impl` and `dtype` arguments to "
                             "jax.random.wrap_key_data")
        impl = dtype
    _resolve_impl(impl, "wrap_key_data")
    _check_key_data(key_bits_array)
    return PRNGKeyArray(key_bits_array)


def key_impl(keys):
    """The name of the PRNG implementation of `keys`."""
    _unwrap("key_impl", keys, allow_batched=True)
    return _IMPL_NAME


def key_dtype(impl=None):
    """The key dtype of a PRNG implementation (threefry2x32, JAX's default)."""
    _resolve_impl(impl, "key_dtype")
    return jax.random.key_dtype(_IMPL_NAME)


def clone(key):
    """The same key (impl has no key reuse checking, so cloning is the identity)."""
    return key


# ----------------------------------------------------------------- raw bits

def bits(key, shape=(), dtype=None, *, out_sharding=None):
    """Uniform random bits as unsigned integers (uint64 with x64, else uint32)."""
    data, _ = _unwrap("bits", key)
    dtype = _user_dtype(dtype, np.uint64)
    if dtype.kind != "u":
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    shape = _canonical_shape(shape)
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("bits", out_sharding,
                  lambda d: prng.random_bits(d, dtype.itemsize * 8, shape), data)


# ---------------------------------------------------------------- uniform

def uniform(key, shape=(), dtype=None, minval=0., maxval=1., *, out_sharding=None):
    """Uniform floats in [minval, maxval)."""
    data, _ = _unwrap("uniform", key)
    dtype = _user_dtype(dtype, float)
    shape = _canonical_shape(shape)
    _check_float_dtype("uniform", dtype)
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("uniform", out_sharding, lambda d, lo, hi: _uniform(d, lo, hi, shape, dtype),
                  data, minval, maxval)


def _uniform_floats(data, shape, dtype):
    """Floats in [0, 1): random mantissa bits under the exponent of 1.0, minus 1."""
    finfo = jnp.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    if nbits not in (8, 16, 32, 64):
        raise TypeError(f"uniform only accepts 8-, 16-, 32-, or 64-bit dtypes, got {dtype}.")
    rng_bits = 8 if nmant < 8 else nbits   # bfloat16 and 8-bit floats: 8 random bits
    uint = np.dtype(f"uint{nbits}")
    random = prng.random_bits(data, rng_bits, shape)
    if rng_bits != nbits:
        random = lax.convert_element_type(random, uint)
    mantissa = lax.shift_right_logical(random, np.array(rng_bits - nmant, uint))
    one_bits = np.array(1.0, dtype).view(uint)
    floats = lax.bitcast_convert_type(lax.bitwise_or(mantissa, one_bits), dtype)
    return lax.sub(floats, np.array(1.0, dtype))


@jit(static_argnums=(3, 4))
def _uniform(data, minval, maxval, shape, dtype):
    minval = _to_rank(lax.convert_element_type(minval, dtype), len(shape))
    maxval = _to_rank(lax.convert_element_type(maxval, dtype), len(shape))
    floats = _uniform_floats(data, shape, dtype)
    scaled = jnp.add(jnp.multiply(floats, jnp.subtract(maxval, minval)), minval)
    return jnp.maximum(minval, jnp.reshape(scaled, shape))


def _to_rank(x, rank):
    """Leading axes of size 1 up to `rank` (as jax.lax.broadcast_to_rank)."""
    ndim = core.get_aval(x).ndim
    return x if ndim >= rank else jnp.reshape(x, (1,) * (rank - ndim) + jnp.shape(x))


# ----------------------------------------------------------------- normal

def normal(key, shape=(), dtype=None, *, out_sharding=None):
    """Standard normal floats (or complex numbers, of unit variance)."""
    data, _ = _unwrap("normal", key)
    shape = _canonical_shape(shape)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("normal", dtype, complex_ok=True)
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("normal", out_sharding, lambda d: _normal(d, shape, dtype), data)


@jit(static_argnums=(1, 2))
def _normal(data, shape, dtype):
    if dtype.kind != "c":
        return _normal_real(data, shape, dtype)
    real_dtype = np.empty((), dtype).real.dtype
    key_re, key_im = _split_pair(data)
    re = lax.convert_element_type(_normal_real(key_re, shape, real_dtype), dtype)
    im = lax.convert_element_type(_normal_real(key_im, shape, real_dtype), dtype)
    return jnp.divide(jnp.add(re, jnp.multiply(1j, im)), np.array(np.sqrt(2), dtype))


def _split_pair(data):
    pair = _split_key_data(data, (2,))
    return pair[0], pair[1]


@jit(static_argnums=(1, 2))
def _normal_real(data, shape, dtype):
    # Uniform in (-1, 1), then the inverse of erf.
    lo = np.nextafter(np.array(-1., dtype), np.array(0., dtype), dtype=dtype)
    u = _uniform(data, lo, np.array(1., dtype), shape, dtype)
    return lax.mul(np.array(np.sqrt(2), dtype), lax.erf_inv(u))


def truncated_normal(key, lower, upper, shape=None, dtype=None, *, out_sharding=None):
    """Standard normal floats conditioned on the open interval (lower, upper)."""
    if shape is not None:
        shape = _canonical_shape(shape)
    data, _ = _unwrap("truncated_normal", key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("truncated_normal", dtype)
    return _drawn("truncated_normal", out_sharding,
                  lambda d, lo, hi: _truncated_normal(d, lo, hi, shape, dtype), data, lower, upper)


@jit(static_argnums=(3, 4))
def _truncated_normal(data, lower, upper, shape, dtype):
    if shape is None:
        shape = _broadcast_shapes(jnp.shape(lower), jnp.shape(upper))
    else:
        _check_shape("truncated_normal", shape, jnp.shape(lower), jnp.shape(upper))
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a = lax.erf(jnp.divide(lower, sqrt2))
    b = lax.erf(jnp.divide(upper, sqrt2))
    u = _uniform(data, a, b, shape, dtype)
    out = jnp.multiply(sqrt2, lax.erf_inv(u))
    # Rounding (or u == a) must not leave the open interval.
    return jnp.clip(out,
                    lax.nextafter(lax.stop_gradient(lower), np.array(np.inf, dtype)),
                    lax.nextafter(lax.stop_gradient(upper), np.array(-np.inf, dtype)))


# --------------------------------------------------------------- bernoulli

def bernoulli(key, p=0.5, shape=None, mode="low", *, out_sharding=None):
    """Booleans that are True with probability `p`."""
    if shape is not None:
        shape = _canonical_shape(shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got {mode=}, expected 'high' or 'low'")
    data, _ = _unwrap("bernoulli", key)
    dtype = core.get_aval(p).dtype if core.valid_jaxtype(p) else jnp.asarray(p).dtype
    if dtype.kind != "f":
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dtype}.")
    return _drawn("bernoulli", out_sharding,
                  lambda d, q: _bernoulli(d, lax.convert_element_type(q, dtype), shape, mode),
                  data, p)


@jit(static_argnums=(2, 3))
def _bernoulli(data, p, shape, mode):
    if shape is None:
        shape = jnp.shape(p)
    else:
        _check_shape("bernoulli", shape, jnp.shape(p))
    dtype = core.get_aval(p).dtype
    if mode == "low":
        return jnp.less(_uniform(data, 0., 1., shape, dtype), p)
    # Two uniforms: the second refines the first below its resolution.
    pair = _uniform(data, 0., 1., (2,) + shape, dtype)
    u1, u2 = pair[0], jnp.multiply(pair[1], 2. ** -jnp.finfo(dtype).nmant)
    return jnp.less(u2, jnp.subtract(p, u1))


# ----------------------------------------------------------------- randint

def randint(key, shape, minval, maxval, dtype=None, *, out_sharding=None):
    """Uniform integers in [minval, maxval) (JAX's modulus method, so JAX's numbers)."""
    data, _ = _unwrap("randint", key)
    dtype = _user_dtype(dtype, int)
    shape = _canonical_shape(shape)
    if dtype.kind not in "iu":
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    info = jnp.iinfo(dtype)

    def draw(data, minval, maxval):
        sampling = dtype
        if info.bits < 32:
            # Sample in 32 bits (less bias), then cast.
            sampling = np.dtype(np.int32)
            minval = jnp.clip(jnp.astype(jnp.asarray(minval), sampling), int(info.min),
                              int(info.max))
            maxval = jnp.clip(jnp.astype(jnp.asarray(maxval), sampling), int(info.min),
                              int(info.max) + 1)
        return jnp.astype(_randint(data, minval, maxval, shape, sampling), dtype)
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("randint", out_sharding, draw, data, minval, maxval)


def _convert_and_clip_integer(val, dtype):
    """`val` in integer `dtype`, clipped to its range instead of wrapping."""
    src = jnp.iinfo(core.get_aval(val).dtype)
    dst = jnp.iinfo(dtype)
    val_dtype = core.get_aval(val).dtype
    lo = np.array(max(dst.min, src.min), val_dtype)
    hi = np.array(min(dst.max, src.max), val_dtype)
    return jnp.astype(jnp.clip(val, lo, hi), dtype)


@jit(static_argnums=(3, 4))
def _randint(data, minval, maxval, shape, dtype):
    _check_shape("randint", shape, jnp.shape(minval), jnp.shape(maxval))
    _check_arraylike("randint", minval, maxval)
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    int_default = core.canonical_dtype(int)
    if core.get_aval(minval).dtype.kind not in "iu":
        minval = jnp.astype(minval, int_default)
    if core.get_aval(maxval).dtype.kind not in "iu":
        maxval = jnp.astype(maxval, int_default)
    # maxval beyond dtype's range (randint(key, s, 0, 256, 'uint8')): one more value.
    dtype_max = _convert_and_clip_integer(np.array(jnp.iinfo(dtype).max, dtype),
                                          core.get_aval(maxval).dtype)
    maxval_out_of_range = jnp.greater(maxval, dtype_max)
    minval = _to_rank(_convert_and_clip_integer(minval, dtype), len(shape))
    maxval = _to_rank(_convert_and_clip_integer(maxval, dtype), len(shape))
    nbits = jnp.iinfo(dtype).bits
    if nbits not in (8, 16, 32, 64):
        raise TypeError(f"randint only accepts 8-, 16-, 32-, or 64-bit dtypes, got {dtype}")

    # Twice the bits of the dtype, reduced modulo the span, for a smaller bias.
    k1, k2 = _split_pair(data)
    higher_bits = prng.random_bits(k1, nbits, shape)
    lower_bits = prng.random_bits(k2, nbits, shape)
    unsigned = np.dtype(f"uint{nbits}")
    span = lax.convert_element_type(jnp.subtract(maxval, minval), unsigned)
    # span 1 where maxval <= minval (minval is returned), one more when maxval is out
    # of range (wrapping to 0 at the full range, where the remainders then do nothing).
    span = jnp.where(jnp.less_equal(maxval, minval), np.array(1, unsigned), span)
    span = jnp.where(jnp.logical_and(maxval_out_of_range, jnp.greater(maxval, minval)),
                     jnp.add(span, np.array(1, unsigned)), span)
    # 2**nbits % span without overflow: (2**(nbits/2) % span)**2 % span.
    multiplier = lax.rem(jnp.broadcast_to(np.array(2 ** (nbits // 2), unsigned),
                                          jnp.shape(span)), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    span = jnp.broadcast_to(span, shape)
    multiplier = jnp.broadcast_to(multiplier, shape)
    offset = lax.add(lax.mul(lax.rem(higher_bits, span), multiplier),
                     lax.rem(lower_bits, span))
    offset = lax.rem(offset, span)
    return jnp.add(minval, lax.convert_element_type(offset, dtype))


# ------------------------------------------------- permutation and choice

def permutation(key, x, axis=0, independent=False, *, out_sharding=None):
    """A random permutation of `x` along `axis` (of arange(x) for an integer x)."""
    data, _ = _unwrap("permutation", key)
    _check_arraylike("permutation", x)
    ndim = jnp.ndim(x)
    axis = _canonical_axis(axis, ndim or 1)
    if not ndim:
        if core.get_aval(x).dtype.kind not in "iu":
            raise TypeError("x must be an integer or at least 1-dimensional")
        n = operator.index(x) if not isinstance(x, core.Tracer) else int(x)
        return _drawn("permutation", out_sharding, lambda d: _shuffle(d, jnp.arange(n), axis), data)

    def draw(data, x):
        if independent or ndim == 1:
            return _shuffle(data, x, axis)
        order = _shuffle(data, jnp.arange(jnp.shape(x)[axis]), 0)
        return jnp.take(x, order, axis, unique_indices=True)
    return _drawn("permutation", out_sharding, draw, data, x)


def _canonical_axis(axis, ndim):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


@jit(static_argnums=(2,))
def _shuffle(data, x, axis):
    # Sort by fresh random 32-bit keys, repeated until collisions are unlikely
    # (the number of rounds JAX uses, so the same permutation).
    size = math.prod(jnp.shape(x))
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        data, subkey = _split_pair(data)
        sort_keys = prng.random_bits(subkey, 32, jnp.shape(x))
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """Random elements of `a` (or of arange(a)), with or without replacement,
    uniformly or with probabilities `p`."""
    data, _ = _unwrap("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError(f"shape argument of jax.random.choice must be a sequence, got {shape}")
    _check_arraylike("choice", a)
    arr = jnp.asarray(a)
    if not jnp.ndim(arr):
        n_inputs = operator.index(a) if not isinstance(a, core.Tracer) else int(a)
    else:
        axis = _canonical_axis(axis, jnp.ndim(arr))
        n_inputs = jnp.shape(arr)[axis]
    shape = tuple(shape)
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=core.get_aval(arr).dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population "
                         f"(size {n_inputs}) when 'replace=False'")
    typed_key = PRNGKeyArray(data)
    if p is None:
        if replace:
            ind = randint(typed_key, shape, 0, n_inputs)
            result = ind if not jnp.ndim(arr) else jnp.take(arr, ind, axis)
        else:
            slices = (slice(None),) * axis + (slice(n_draws),)
            result = permutation(typed_key, n_inputs if not jnp.ndim(arr) else arr,
                                 axis)[slices]
    else:
        _check_arraylike("choice", p)
        p_arr = jnp.asarray(p)
        if core.get_aval(p_arr).dtype.kind not in "fc":
            p_arr = jnp.astype(p_arr, core.canonical_dtype(float))
        if jnp.shape(p_arr) != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as "
                             f"a.shape[axis]. p has shape {jnp.shape(p_arr)} and "
                             f"a.shape[axis] is {n_inputs}.")
        int_default = core.canonical_dtype(int)
        if replace:
            p_cuml = jnp.cumsum(p_arr)
            total = p_cuml[-1]
            r = jnp.multiply(total, jnp.subtract(
                1, uniform(typed_key, shape, dtype=core.get_aval(p_cuml).dtype)))
            ind = jnp.astype(_searchsorted_left(p_cuml, r), int_default)
        else:
            g = jnp.add(gumbel(typed_key, (n_inputs,), dtype=core.get_aval(p_arr).dtype,
                               mode=mode), jnp.log(p_arr))
            ind = jnp.astype(_top_k_indices(g, n_draws), int_default)
        result = ind if not jnp.ndim(arr) else jnp.take(arr, ind, axis)
    arr_shape = jnp.shape(arr)
    return jnp.reshape(result, shape if not arr_shape else
                       arr_shape[:axis] + shape + arr_shape[axis + 1:])


def _searchsorted_left(sorted_values, v):
    """For each v, the number of sorted values below it: where v would be inserted
    keeping the order (numpy's searchsorted, side='left')."""
    below = jnp.less(sorted_values, jnp.expand_dims(v, -1))
    return jnp.sum(below, axis=-1)


def _top_k_indices(x, k):
    """Indices (int32) of the k largest entries along the last axis, largest first and,
    among equal entries, lowest index first (as jax.lax.top_k): a stable sort of -x."""
    n = jnp.shape(x)[-1]
    positions = jnp.broadcast_to(lax.iota(np.int32, n), jnp.shape(x))
    _, order = lax.sort_key_val(jnp.negative(x), positions, -1)
    return order[..., :k]


# ----------------------------------------------------- gumbel and categorical

def gumbel(key, shape=(), dtype=None, mode=None, *, out_sharding=None):
    """Standard Gumbel floats; `mode` 'high'/'highest' spend more bits on the tail."""
    data, _ = _unwrap("gumbel", key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("gumbel", dtype)
    shape = _canonical_shape(shape)
    if mode is None:
        mode = "high" if jax.config.jax_high_dynamic_range_gumbel else "low"
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("gumbel", out_sharding, lambda d: _gumbel(d, shape, dtype, mode), data)


@jit(static_argnums=(1, 2, 3))
def _gumbel(data, shape, dtype, mode):
    info = jnp.finfo(dtype)
    if dtype == np.float32 and mode == "highest":
        return _gumbel_highest(data, shape)
    if mode in ("high", "highest"):
        pair = _uniform(data, 0., 1., (2,) + shape, dtype)
        high, low = pair[0], pair[1]
        # Below 0.5 the second uniform fills the bits the first lacks.
        refined = jnp.add(jnp.add(high, jnp.multiply(2 ** -info.nmant, low)), info.tiny)
        x = jnp.where(jnp.greater_equal(high, 0.5), high, refined)
        return jnp.negative(jnp.log(jnp.negative(jnp.log1p(jnp.negative(x)))))
    u = _uniform(data, info.tiny, 1., shape, dtype)
    return jnp.negative(jnp.log(jnp.negative(jnp.log(u))))


def _gumbel_highest(data, shape):
    """float32 Gumbel from a 64-bit fixed-point uniform (JAX's 'highest' mode)."""
    words = prng.random_bits(data, 32, (2,) + shape)
    u32 = np.uint32
    neg = lax.bitwise_not(words)
    lo_bits = neg[1]
    # 1 - words in 64-bit fixed point: the carry out of the low word.
    carry = jnp.astype(jnp.equal(lo_bits, np.array(0xFFFFFFFF, u32)), u32)
    neg = jnp.add(neg, jnp.stack([carry, jnp.ones_like(lo_bits)]))
    flip = jnp.less(words[0], np.array(1 << 31, u32))
    x = _fixed_point_to_float32(jnp.where(flip, words, neg))
    return jnp.where(flip, jnp.negative(jnp.log(jnp.negative(jnp.log1p(jnp.negative(x))))),
                     jnp.negative(jnp.log(jnp.negative(jnp.log(x)))))


def _fixed_point_to_float32(words):
    """A u32[2, ...] 64-bit fixed-point fraction in (0, 1) as float32, rounding down."""
    finfo = jnp.finfo(np.float32)
    u32 = np.uint32
    hi, lo = words[0], words[1]
    hiclz, loclz = lax.clz(hi), lax.clz(lo)
    hi_zero = jnp.equal(hiclz, np.array(32, u32))
    mantissa = lax.bitwise_or(
        lax.shift_left(hi, hiclz),
        jnp.where(hi_zero, lax.shift_left(lo, loclz),
                  lax.shift_right_logical(lo, lax.sub(np.array(finfo.bits, u32), hiclz))))
    mantissa = lax.shift_right_logical(mantissa, np.array(finfo.bits - finfo.nmant - 1, u32))
    mantissa = lax.bitwise_and(mantissa, np.array((1 << finfo.nmant) - 1, u32))
    leading = jnp.where(hi_zero, lax.add(np.array(32, u32), loclz), hiclz)
    exponent = lax.shift_left(lax.sub(np.array(-finfo.minexp, u32), leading),
                              np.array(finfo.nmant, u32))
    exponent = lax.bitwise_and(exponent, np.array(
        (1 << (finfo.bits - 2)) - (1 << (finfo.nmant - 1)), u32))
    return lax.bitcast_convert_type(lax.bitwise_or(exponent, mantissa), np.float32)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None, *,
                out_sharding=None):
    """Indices drawn from softmax(logits) along `axis` (the Gumbel-max trick; without
    replacement, the Gumbel-top-k trick)."""
    data, _ = _unwrap("categorical", key)
    _check_arraylike("categorical", logits)
    logits = jnp.asarray(logits)
    logits_shape = jnp.shape(logits)
    axis = operator.index(axis)
    batch_shape = tuple(int(d) for d in np.delete(np.array(logits_shape, int), axis))
    if shape is None:
        shape = batch_shape
    else:
        shape = _canonical_shape(shape)
        _check_shape("categorical", shape, batch_shape)
    dtype = core.get_aval(logits).dtype
    ndim = len(logits_shape)
    prefix = shape[:len(shape) - len(batch_shape)]
    k = math.prod(prefix)
    if not replace and k > logits_shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number "
                         f"of categories ({logits_shape[axis]}).")

    def draw(data, logits):
        typed_key = PRNGKeyArray(data)
        if replace:
            last = axis - ndim if axis >= 0 else axis
            noise_shape = list(shape[len(shape) - len(batch_shape):])
            noise_shape.insert(last % ndim, logits_shape[last])
            noise = gumbel(typed_key, (*prefix, *noise_shape), dtype, mode=mode)
            return jnp.argmax(jnp.add(noise, jnp.expand_dims(logits,
                                                             tuple(range(len(prefix))))),
                              axis=last)
        logits = jnp.add(logits, gumbel(typed_key, logits_shape, dtype, mode=mode))
        indices = _top_k_indices(jnp.moveaxis(logits, axis, -1), k)
        # The k draws of each distribution become the leading axes of the result.
        indices = jnp.moveaxis(indices, -1, 0)
        return jnp.reshape(indices, shape)
    return _drawn("categorical", out_sharding, draw, data, logits)


# ------------------------------------------------ more continuous distributions

def _float_sampler(name, body):
    """A sampler `(key, shape=(), dtype=None)` of floats: the jitted
    `body(data, shape, dtype)` after JAX's argument checks."""
    def sampler(key, shape=(), dtype=None, *, out_sharding=None):
        data, _ = _unwrap(name, key)
        dtype = _user_dtype(dtype, float)
        _check_float_dtype(name, dtype)
        shape = _canonical_shape(shape)
        out_sharding = _replicated_when_unshaped(out_sharding, shape)
        return _drawn(name, out_sharding, lambda d: body(d, shape, dtype), data)

    sampler.__name__ = sampler.__qualname__ = name
    sampler.__doc__ = body.__doc__
    return sampler


@jit(static_argnums=(1, 2))
def _exponential(data, shape, dtype):
    """Exponential floats of rate 1: -log(1 - u)."""
    u = _uniform(data, 0., 1., shape, dtype)
    return lax.neg(lax.log1p(lax.neg(u)))


@jit(static_argnums=(1, 2))
def _laplace(data, shape, dtype):
    """Laplace floats (density exp(-|x|)/2)."""
    u = _uniform(data, -1. + jnp.finfo(dtype).epsneg, 1., shape, dtype)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


@jit(static_argnums=(1, 2))
def _logistic(data, shape, dtype):
    """Standard logistic floats: log(u / (1 - u))."""
    x = _uniform(data, jnp.finfo(dtype).tiny, 1., shape, dtype)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


@jit(static_argnums=(1, 2))
def _cauchy(data, shape, dtype):
    """Standard Cauchy floats: tan(pi (u - 1/2))."""
    u = _uniform(data, jnp.finfo(dtype).eps, 1., shape, dtype)
    return lax.tan(lax.mul(np.array(np.pi, dtype), lax.sub(u, np.array(0.5, dtype))))


exponential = _float_sampler("exponential", _exponential)
laplace = _float_sampler("laplace", _laplace)
logistic = _float_sampler("logistic", _logistic)
cauchy = _float_sampler("cauchy", _cauchy)


def _check_all_safe_to_cast(name, dtype, *args):
    """Parameters must convert to the sample dtype without losing range or kind."""
    for arg in args:
        aval = core.get_aval(arg) if core.valid_jaxtype(arg) else core.get_aval(
            jnp.asarray(arg))
        like = ({"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}[aval.dtype.kind]
                if aval.weak_type else aval.dtype)
        if np.dtype(jax.numpy.result_type(like, dtype)) != dtype:
            raise jax.dtypes.TypePromotionError(
                f"In arguments to {name}, cannot safely cast argument of type {aval.dtype} "
                f"to {dtype}")


def _param_draw(name, body, key, shape, dtype, params, out_sharding, complex_ok=False,
                replicated_when_unshaped=True):
    """A sampler with array parameters after their common checks: the jitted
    `body(data, *params, shape, dtype)`, placed by out_sharding."""
    data, _ = _unwrap(name, key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype(name, dtype, complex_ok)
    if replicated_when_unshaped:
        out_sharding = _replicated_when_unshaped(out_sharding, shape)
    if shape is None:
        shape = _broadcast_shapes(*(jnp.shape(p) for p in params))
    else:
        shape = _canonical_shape(shape)
        _check_shape(name, shape, *(jnp.shape(p) for p in params))
    _check_all_safe_to_cast(name, dtype, *params)
    return _drawn(name, out_sharding, lambda d, *ps: body(d, *ps, shape, dtype), data, *params)


def pareto(key, b, shape=None, dtype=None, *, out_sharding=None):
    """Pareto floats of shape parameter `b` (exp(exponential / b))."""
    return _param_draw("pareto", _pareto, key, shape, dtype, [b], out_sharding)


@jit(static_argnums=(2, 3))
def _pareto(data, b, shape, dtype):
    e = _exponential(data, shape, dtype)
    return lax.exp(jnp.divide(e, lax.convert_element_type(b, dtype)))


def rayleigh(key, scale, shape=None, dtype=None, *, out_sharding=None):
    """Rayleigh floats of scale `scale`: scale * sqrt(-2 log u)."""
    return _param_draw("rayleigh", _rayleigh, key, shape, dtype, [scale], out_sharding)


@jit(static_argnums=(2, 3))
def _rayleigh(data, scale, shape, dtype):
    u = _uniform(data, 0., 1., shape, dtype)
    scale = jnp.broadcast_to(jnp.astype(scale, dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), np.array(-2, dtype))))


def wald(key, mean, shape=None, dtype=None, *, out_sharding=None):
    """Wald (inverse Gaussian) floats of mean `mean` and shape 1."""
    return _param_draw("wald", _wald, key, shape, dtype, [mean], out_sharding,
                       replicated_when_unshaped=False)


@jit(static_argnums=(2, 3))
def _wald(data, mean, shape, dtype):
    k1, k2 = _split_pair(data)
    mean = jnp.broadcast_to(jnp.astype(mean, dtype), shape)
    v = _normal_real(k1, shape, dtype)
    z = _uniform(k2, 0., 1., shape, dtype)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(jnp.add(jnp.multiply(jnp.multiply(4, mean), y),
                                 jnp.multiply(mean_sq, y_sq)))
    x = jnp.subtract(jnp.add(mean, jnp.divide(jnp.multiply(mean_sq, y), 2)),
                     jnp.multiply(jnp.divide(mean, 2), sqrt_term))
    return jnp.where(jnp.less_equal(z, jnp.divide(mean, jnp.add(mean, x))), x,
                     jnp.divide(mean_sq, x))


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None, *, out_sharding=None):
    """exp(sigma * normal) floats."""
    return _param_draw("lognormal", _lognormal, key, shape, dtype, [sigma], out_sharding,
                       complex_ok=True, replicated_when_unshaped=False)


@jit(static_argnums=(2, 3))
def _lognormal(data, sigma, shape, dtype):
    return lax.exp(jnp.multiply(_normal(data, shape, dtype),
                                lax.convert_element_type(sigma, dtype)))


def triangular(key, left, mode, right, shape=None, dtype=None, *, out_sharding=None):
    """Triangular floats on [left, right] with peak at `mode` (inverse CDF)."""
    return _param_draw("triangular", _triangular, key, shape, dtype, [left, mode, right],
                       out_sharding)


@jit(static_argnums=(4, 5))
def _triangular(data, left, mode, right, shape, dtype):
    left, right, mode = (jnp.broadcast_to(lax.convert_element_type(v, dtype), shape)
                         for v in (left, right, mode))
    width = jnp.subtract(right, left)
    fc = jnp.divide(jnp.subtract(mode, left), width)
    u = _uniform(data, 0., 1., shape, dtype)
    out1 = jnp.add(left, lax.sqrt(jnp.multiply(jnp.multiply(u, width),
                                               jnp.subtract(mode, left))))
    out2 = jnp.subtract(right, lax.sqrt(jnp.multiply(jnp.multiply(jnp.subtract(1, u), width),
                                                     jnp.subtract(right, mode))))
    return jnp.where(jnp.less(u, fc), out1, out2)


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull floats: scale * (-log(1 - u)) ** (1 / concentration)."""
    data, _ = _unwrap("weibull_min", key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("weibull_min", dtype)
    return _weibull_min(data, scale, concentration, _canonical_shape(shape), dtype)


@jit(static_argnums=(3, 4))
def _weibull_min(data, scale, concentration, shape, dtype):
    u = _uniform(data, 0, 1, shape, dtype)
    return jnp.multiply(jnp.power(jnp.negative(jnp.log1p(jnp.negative(u))),
                                  jnp.divide(1.0, concentration)), scale)


def geometric(key, p, shape=None, dtype=None, *, out_sharding=None):
    """Geometric integers >= 1: trials until the first success of probability `p`."""
    data, _ = _unwrap("geometric", key)
    dtype = _user_dtype(dtype, int)
    if dtype.kind not in "iu":
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    shape = (_broadcast_shapes(jnp.shape(p)) if shape is None else
             _checked_param_shape("geometric", shape, p))
    return _drawn("geometric", out_sharding, lambda d, q: _geometric(d, q, shape, dtype), data, p)


def _checked_param_shape(name, shape, *params):
    shape = _canonical_shape(shape)
    _check_shape(name, shape, *(jnp.shape(p) for p in params))
    return shape


@jit(static_argnums=(2, 3))
def _geometric(data, p, shape, dtype):
    _check_arraylike("geometric", p)
    p = jnp.asarray(p)
    if core.get_aval(p).dtype.kind not in "fc":
        p = jnp.astype(p, core.canonical_dtype(float))
    u = _uniform(data, 0., 1., shape, core.get_aval(p).dtype)
    u = jnp.where(jnp.equal(u, 0), 1, u)   # JAX maps u = 0 to 1 (log stays finite)
    log_one_minus_p = jnp.broadcast_to(lax.log1p(jnp.negative(p)), shape)
    g = jnp.add(lax.floor(lax.div(lax.log(u), log_one_minus_p)), 1)
    return jnp.astype(g, dtype)


def rademacher(key, shape=(), dtype=None, *, out_sharding=None):
    """-1 or +1 with equal probability."""
    data, _ = _unwrap("rademacher", key)
    dtype = _user_dtype(dtype, int)
    shape = _canonical_shape(shape)
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("rademacher", out_sharding, lambda d: _rademacher(d, shape, dtype), data)


@jit(static_argnums=(1, 2))
def _rademacher(data, shape, dtype):
    coin = jnp.astype(_bernoulli(data, np.array(0.5, core.canonical_dtype(float)), shape,
                                 "low"), dtype)
    return jnp.astype(jnp.subtract(jnp.multiply(2, coin), 1), dtype)


def maxwell(key, shape=(), dtype=None, *, out_sharding=None):
    """Maxwell floats: the length of a standard normal 3-vector."""
    data, _ = _unwrap("maxwell", key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("maxwell", dtype)
    shape = _canonical_shape(shape)
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("maxwell", out_sharding, lambda d: _maxwell(d, shape, dtype), data)


@jit(static_argnums=(1, 2))
def _maxwell(data, shape, dtype):
    return jnp.linalg.norm(_normal(data, shape + (3,), dtype), axis=-1)


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Maxwell floats with a random sign, scaled by `scale` and shifted by `loc`."""
    data, _ = _unwrap("double_sided_maxwell", key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("double_sided_maxwell", dtype)
    return _double_sided_maxwell(data, loc, scale, _canonical_shape(shape), dtype)


@jit(static_argnums=(3, 4))
def _double_sided_maxwell(data, loc, scale, shape, dtype):
    params_shape = _broadcast_shapes(jnp.shape(loc), jnp.shape(scale))
    shape = (shape or params_shape) + params_shape
    maxwell_key, sign_key = _split_pair(data)
    magnitude = _maxwell(maxwell_key, shape, dtype)
    sign = _rademacher(sign_key, shape, dtype)
    return jnp.add(jnp.multiply(jnp.multiply(sign, magnitude), scale), loc)


# ------------------------------------------- gamma and the distributions built on it

def gamma(key, a, shape=None, dtype=None, *, out_sharding=None):
    """Gamma(a) floats of unit scale (Marsaglia and Tsang's rejection sampler, run per
    element by the `random_gamma` primitive with JAX's sampler, so JAX's numbers).
    Differentiable in `a` by implicit reparameterization (lax.random_gamma_grad)."""
    return _gamma_draw("gamma", key, a, shape, dtype, out_sharding, False)


def loggamma(key, a, shape=None, dtype=None, *, out_sharding=None):
    """log of Gamma(a) floats, computed in log space (accurate for a << 1, where the
    samples underflow)."""
    return _gamma_draw("loggamma", key, a, shape, dtype, out_sharding, True)


def _gamma_draw(name, key, a, shape, dtype, out_sharding, log_space):
    data, _ = _unwrap(name, key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("gamma", dtype)   # JAX names gamma for loggamma too
    shape = None if shape is None else _canonical_shape(shape)
    if not log_space:   # JAX gives loggamma no such default
        out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn(name, out_sharding, lambda d, a: _gamma(d, a, shape, dtype, log_space), data, a)


@jit(static_argnums=(2, 3, 4))
def _gamma(data, a, shape, dtype, log_space):
    if shape is None:
        shape = jnp.shape(a)
    else:
        _check_shape("gamma", shape, jnp.shape(a))
    a = jnp.broadcast_to(lax.convert_element_type(a, dtype), shape)
    return prng.random_gamma(data, a, log_space=log_space)


def beta(key, a, b, shape=None, dtype=None, *, out_sharding=None):
    """Beta(a, b) floats: Ga / (Ga + Gb) of two gamma draws, formed from their logs."""
    return _param_draw("beta", _beta, key, shape, dtype, [a, b], out_sharding)


@jit(static_argnums=(3, 4))
def _beta(data, a, b, shape, dtype):
    key_a, key_b = _split_pair(data)
    a, b = (jnp.broadcast_to(lax.convert_element_type(v, dtype), shape) for v in (a, b))
    log_a = _gamma(key_a, a, shape, dtype, True)
    log_b = _gamma(key_b, b, shape, dtype, True)
    # Scaled by the larger draw, so neither exponential underflows to 0/0.
    log_max = lax.max(log_a, log_b)
    scaled_a = jnp.exp(jnp.subtract(log_a, log_max))
    scaled_b = jnp.exp(jnp.subtract(log_b, log_max))
    return jnp.divide(scaled_a, jnp.add(scaled_a, scaled_b))


def dirichlet(key, alpha, shape=None, dtype=None, *, out_sharding=None):
    """Dirichlet(alpha) vectors along alpha's last axis: softmax of log-gamma draws."""
    data, _ = _unwrap("dirichlet", key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("dirichlet", dtype)
    if shape is not None:
        shape = _canonical_shape(shape)
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("dirichlet", out_sharding, lambda d, a: _dirichlet(d, a, shape, dtype), data,
                  alpha)


@jit(static_argnums=(2, 3))
def _dirichlet(data, alpha, shape, dtype):
    alpha_shape = jnp.shape(alpha)
    if not alpha_shape:
        raise ValueError("dirichlet requires alpha.ndim >= 1, got alpha.ndim == 0")
    if shape is None:
        shape = alpha_shape[:-1]
    else:
        _check_shape("dirichlet", shape, alpha_shape[:-1])
    alpha = lax.convert_element_type(alpha, dtype)
    log_gammas = _gamma(data, alpha, shape + alpha_shape[-1:], dtype, True)
    return special.softmax(log_gammas, axis=-1)


def chisquare(key, df, shape=None, dtype=None, *, out_sharding=None):
    """Chi-square floats of `df` degrees of freedom: 2 Gamma(df / 2)."""
    return _param_draw("chisquare", _chisquare, key, shape, dtype, [df], out_sharding)


@jit(static_argnums=(2, 3))
def _chisquare(data, df, shape, dtype):
    half_df = lax.div(lax.convert_element_type(df, dtype), np.array(2, dtype))
    log_g = _gamma(data, half_df, shape, dtype, True)
    return lax.mul(jnp.exp(log_g), np.array(2, dtype))


def f(key, dfnum, dfden, shape=None, dtype=None, *, out_sharding=None):
    """F floats: the ratio of two chi-squares, each divided by its degrees of freedom."""
    return _param_draw("f", _f, key, shape, dtype, [dfnum, dfden], out_sharding)


@jit(static_argnums=(3, 4))
def _f(data, dfnum, dfden, shape, dtype):
    dfnum = lax.convert_element_type(dfnum, dtype)
    dfden = lax.convert_element_type(dfden, dtype)
    key_den, key_num = _split_pair(data)
    num = lax.div(_chisquare(key_num, dfnum, shape, dtype), dfnum)
    den = lax.div(_chisquare(key_den, dfden, shape, dtype), dfden)
    return lax.div(num, den)


def t(key, df, shape=None, dtype=None, *, out_sharding=None):
    """Student's t floats: normal * sqrt((df / 2) / Gamma(df / 2))."""
    return _param_draw("t", _t, key, shape, dtype, [df], out_sharding)


@jit(static_argnums=(2, 3))
def _t(data, df, shape, dtype):
    key_n, key_g = _split_pair(data)
    n = _normal(key_n, shape, dtype)
    half_df = lax.div(lax.convert_element_type(df, dtype), np.array(2, dtype))
    g = _gamma(key_g, half_df, shape, dtype, False)
    return jnp.multiply(n, jnp.sqrt(jnp.divide(half_df, g)))


def generalized_normal(key, p, shape=(), dtype=None, *, out_sharding=None):
    """Floats of density proportional to exp(-|x|**p): a random sign times
    Gamma(1/p)**(1/p)."""
    data, _ = _unwrap("generalized_normal", key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("gamma", dtype)   # JAX fails in its gamma draw
    shape = _canonical_shape(shape)
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("generalized_normal", out_sharding,
                  lambda d, q: _generalized_normal(d, q, shape, dtype), data, p)


@jit(static_argnums=(2, 3))
def _generalized_normal(data, p, shape, dtype):
    key_g, key_r = _split_pair(data)
    inv_p = jnp.divide(1, p)
    g = _gamma(key_g, inv_p, shape, dtype, False)
    r = _rademacher(key_r, shape, dtype)
    return jnp.multiply(r, jnp.power(g, inv_p))


def ball(key, d, p=2, shape=(), dtype=None, *, out_sharding=None):
    """Points uniform in the unit Lp ball of dimension `d` (Barthe et al. 2005: a
    generalized normal vector scaled by its norm plus an exponential)."""
    data, _ = _unwrap("ball", key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("gamma", dtype)
    d = _concrete_index(d, "ball", "d")
    shape = _canonical_shape(shape)
    return _drawn("ball", out_sharding, lambda k, q: _ball(k, q, d, shape, dtype), data, p)


def _concrete_index(value, fun_name, what):
    if isinstance(value, core.Tracer):
        raise core.ConcretizationTypeError(
            f"{fun_name}: {what} must be a concrete integer, got a traced value")
    return operator.index(value)


@jit(static_argnums=(2, 3, 4))
def _ball(data, p, d, shape, dtype):
    key_g, key_e = _split_pair(data)
    g = _generalized_normal(key_g, p, (*shape, d), dtype)
    e = _exponential(key_e, shape, dtype)
    norm = jnp.power(jnp.add(jnp.sum(jnp.power(jnp.abs(g), p), axis=-1), e),
                     jnp.divide(1, p))
    return jnp.divide(g, norm[..., None])


# ------------------------------------------------------------- random matrices

def orthogonal(key, n, shape=(), dtype=None, m=None, *, out_sharding=None):
    """A matrix (*shape, n, m) uniform on the orthogonal group (unitary for complex
    dtypes; semi-orthogonal if n != m): Q of the QR of a normal matrix, its columns'
    signs fixed by R's diagonal (Mezzadri 2007)."""
    shape = _canonical_shape(shape)
    data, _ = _unwrap("orthogonal", key)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("normal", dtype, complex_ok=True)
    n = _concrete_index(n, "orthogonal", "n")
    m = n if m is None else _concrete_index(m, "orthogonal", "m")
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("orthogonal", out_sharding, lambda d: _orthogonal(d, n, m, shape, dtype), data)


@jit(static_argnums=(1, 2, 3, 4))
def _orthogonal(data, n, m, shape, dtype):
    z = _normal(data, (*shape, max(n, m), min(n, m)), dtype)
    q, r = jnp.linalg.qr(z)
    x = jnp.multiply(q, jnp.expand_dims(jnp.sign(jnp.linalg.diagonal(r)), -2))
    return jnp.matrix_transpose(x) if n < m else x


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky", *,
                        out_sharding=None):
    """Normal vectors of mean `mean` (..., n) and covariance `cov` (..., n, n):
    mean + F z for a factor F F^T = cov (Cholesky, or from eigh / svd for singular
    covariances) and standard normal z."""
    data, _ = _unwrap("multivariate_normal", key)
    _check_arraylike("multivariate_normal", mean, cov)
    mean, cov = promote_inexact(mean, cov)
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    dtype = (core.get_aval(mean).dtype if dtype is None
             else _user_dtype(dtype, float))
    _check_float_dtype("multivariate_normal", dtype)
    if shape is not None:
        shape = _canonical_shape(shape)
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    return _drawn("multivariate_normal", out_sharding, lambda d, mu, sigma: _multivariate_normal(
        d, mu, sigma, shape, dtype, method), data, mean, cov)


@jit(static_argnums=(3, 4, 5))
def _multivariate_normal(data, mean, cov, shape, dtype, method):
    mean_shape, cov_shape = jnp.shape(mean), jnp.shape(cov)
    if len(mean_shape) < 1:
        raise ValueError("multivariate_normal requires mean.ndim >= 1, got mean.ndim == 0")
    if len(cov_shape) < 2:
        raise ValueError("multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{len(cov_shape)}")
    n = mean_shape[-1]
    if cov_shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {cov_shape}.")
    if shape is None:
        shape = _broadcast_shapes(mean_shape[:-1], cov_shape[:-2])
    else:
        _check_shape("normal", shape, mean_shape[:-1], cov_shape[:-2])
    if method == "svd":
        u, s, _ = jnp.linalg.svd(cov)
        factor = jnp.multiply(u, jnp.sqrt(s[..., None, :]))
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cov)
        factor = jnp.multiply(v, jnp.sqrt(w[..., None, :]))
    else:
        factor = jnp.linalg.cholesky(cov)
    z = _normal(data, shape + mean_shape[-1:], dtype)
    return jnp.add(mean, _apply_factor(factor, z))


def _apply_factor(factor, z):
    """factor @ z for factor (..., n, n), z (*shape, n), factor's batch axes broadcasting
    against shape's trailing ones: one dot_general, as JAX's einsum forms it (size-1
    factor axes dropped, the others batch axes), so the sums round as JAX's do."""
    factor_batch = jnp.shape(factor)[:-2]
    z_ndim = jnp.ndim(z)
    offset = z_ndim - 1 - len(factor_batch)
    factor = jnp.squeeze(factor, tuple(i for i, d in enumerate(factor_batch) if d == 1))
    z_batch = [offset + i for i, d in enumerate(factor_batch) if d != 1]
    out = lax.dot_general(z, factor, (((z_ndim - 1,), (jnp.ndim(factor) - 1,)),
                                      (tuple(z_batch), tuple(range(len(z_batch))))))
    # dot_general puts the batch axes first, then z's other axes, then the output axis.
    order = z_batch + [i for i in range(z_ndim - 1) if i not in z_batch] + [z_ndim - 1]
    return jnp.transpose(out, tuple(int(i) for i in np.argsort(order)))


# ------------------------------------------------------------- counts

def poisson(key, lam, shape=None, dtype=None, *, out_sharding=None):
    """Poisson(lam) integers (Knuth's method below lam = 10, Hormann's transformed
    rejection above). The loops run per element in the `random_poisson` primitive,
    which lowers to JAX's sampler on the raw key data, so the numbers are JAX's."""
    data, _ = _unwrap("poisson", key)
    dtype = _user_dtype(dtype, int)
    if dtype.kind not in "iu":
        raise ValueError(f"dtype argument to `poisson` must be an integer dtype, got {dtype}")
    _check_arraylike("poisson", lam)
    out_sharding = _replicated_when_unshaped(out_sharding, shape)
    shape = jnp.shape(lam) if shape is None else _canonical_shape(shape)
    return _drawn("poisson", out_sharding, lambda d, rate: prng.random_poisson_p.bind(
        d, jnp.astype(jnp.broadcast_to(rate, shape), np.float32), dtype=dtype), data, lam)


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats (inversion for n p <= 10, else the BTRS
    transformed rejection). The loops run per element in the `random_binomial`
    primitive, which lowers to JAX's sampler on the raw key data (JAX's numbers)."""
    data, _ = _unwrap("binomial", key)
    _check_arraylike("binomial", n, p)
    dtype = _user_dtype(dtype, float)
    _check_float_dtype("binomial", dtype)
    if shape is not None:
        shape = _canonical_shape(shape)
    return _binomial(data, n, p, shape, dtype)


@jit(static_argnums=(3, 4))
def _binomial(data, count, prob, shape, dtype):
    if shape is None:
        shape = _broadcast_shapes(jnp.shape(count), jnp.shape(prob))
    else:
        _check_shape("binomial", shape, jnp.shape(count), jnp.shape(prob))
    (prob,) = promote_inexact(prob)
    count = lax.convert_element_type(count, core.get_aval(prob).dtype)
    count, prob = (jnp.broadcast_to(v, shape) for v in (count, prob))
    return prng.random_binomial_p.bind(data, count, prob, dtype=dtype)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Counts of `n` trials over the outcomes of probabilities `p` (last axis): for each
    outcome in turn, a binomial draw of the remaining trials with its conditional
    probability (a scan over the outcomes, one key each)."""
    data, _ = _unwrap("multinomial", key)
    _check_arraylike("multinomial", n, p)
    n, p = promote_inexact(n, p)
    if shape is None:
        shape = jnp.shape(p)
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.moveaxis(jnp.broadcast_to(p, shape), -1, 0)
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = jnp.divide(p, jnp.where(jnp.equal(remaining, 0), 1, remaining))
    keys = _split_key_data(data, (jnp.shape(ratios)[0],))

    def draw_outcome(remainder, ratio_and_key):
        ratio, outcome_key = ratio_and_key
        count = binomial(PRNGKeyArray(outcome_key), remainder, jnp.clip(ratio, 0, 1),
                         dtype=core.get_aval(remainder).dtype)
        return jnp.subtract(remainder, count), count

    _, counts = lax.scan(draw_outcome, n, (ratios, keys), unroll=unroll)
    return jnp.astype(jnp.moveaxis(counts, 0, -1), dtype)
