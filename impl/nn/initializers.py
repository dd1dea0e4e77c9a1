"""jax.nn.initializers: factories of `init(key, shape, dtype)` functions that draw
parameter arrays with impl.random, so the same key gives JAX's numbers."""
from __future__ import annotations

import math

import numpy as np

from impl import core
from impl import lax
from impl import numpy as inp
from impl import random

__all__ = ["zeros", "ones", "constant", "normal", "uniform", "truncated_normal",
           "variance_scaling", "glorot_normal", "glorot_uniform", "xavier_normal",
           "xavier_uniform", "lecun_normal", "lecun_uniform", "he_normal", "he_uniform",
           "kaiming_normal", "kaiming_uniform", "orthogonal", "delta_orthogonal"]


def _dtype(dtype):
    """The requested dtype, or the default float (float64 under x64, else float32)."""
    return core.canonical_dtype(float if dtype is None else dtype)


def _no_sharding(out_sharding, name):
    if out_sharding is not None:
        raise NotImplementedError(f"nn.initializers.{name}: out_sharding is not supported "
                                  "by impl")


def zeros(key, shape, dtype=None, out_sharding=None):
    """All zeros; the key is not used."""
    _no_sharding(out_sharding, "zeros")
    return inp.zeros(shape, _dtype(dtype))


def ones(key, shape, dtype=None, out_sharding=None):
    """All ones; the key is not used."""
    _no_sharding(out_sharding, "ones")
    return inp.ones(shape, _dtype(dtype))


def constant(value, dtype=None):
    """An initializer filling its arrays with `value`."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding, "constant")
        return inp.full(shape, value, dtype=_dtype(dtype))
    return init


def _scaled(name, sample, factor, default_dtype):
    """An initializer drawing `sample(key, shape, dtype)` times the scalar `factor`."""
    def init(key, shape, dtype=default_dtype, out_sharding=None):
        _no_sharding(out_sharding, name)
        dtype = _dtype(dtype)
        return inp.multiply(sample(key, shape, dtype), inp.array(factor, dtype))
    return init


def uniform(scale=1e-2, dtype=None):
    """Uniform draws in [0, scale)."""
    return _scaled("uniform", random.uniform, scale, dtype)


def normal(stddev=1e-2, dtype=None):
    """Normal draws of mean 0 and standard deviation `stddev`."""
    return _scaled("normal", random.normal, stddev, dtype)


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """Standard normal draws truncated to (lower, upper), then times `stddev` (no
    correction for the variance the truncation removes)."""
    def sample(key, shape, dtype):
        return random.truncated_normal(key, lower, upper, shape, dtype)
    return _scaled("truncated_normal", sample, stddev, dtype)


def _size(shape, axes):
    if isinstance(axes, int):
        return shape[axes]
    return math.prod(shape[i] for i in axes)


def _fans(shape, in_axis, out_axis, batch_axis):
    """(fan_in, fan_out): the input and output sizes times the receptive field, the
    product of the axes that are none of input, output and batch."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")
    in_size, out_size = _size(shape, in_axis), _size(shape, out_axis)
    receptive_field = math.prod(shape) / in_size / out_size / _size(shape, batch_axis)
    return in_size * receptive_field, out_size * receptive_field


_FAN_MODES = {"fan_in": lambda fi, fo: fi, "fan_out": lambda fi, fo: fo,
              "fan_avg": lambda fi, fo: (fi + fo) / 2,
              "fan_geo_avg": lambda fi, fo: (fi * fo) ** 0.5}
# The standard deviation of a standard normal truncated to (-2, 2).
_TRUNCATED_STD = .87962566103423978


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """Draws of variance scale / n, n the fan of `mode` (inputs, outputs, their mean or
    geometric mean), from a truncated normal, a normal or a uniform distribution."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding, "variance_scaling")
        shape = tuple(int(d) for d in shape)
        dtype = _dtype(dtype)
        if np.issubdtype(dtype, np.complexfloating):
            raise NotImplementedError("nn.initializers.variance_scaling: complex dtypes are "
                                      "not supported by impl")
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        if mode not in _FAN_MODES:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = inp.array(scale / _FAN_MODES[mode](fan_in, fan_out), dtype=dtype)
        if distribution == "truncated_normal":
            stddev = inp.divide(inp.sqrt(variance), inp.array(_TRUNCATED_STD, dtype))
            return inp.multiply(random.truncated_normal(key, -2, 2, shape, dtype), stddev)
        if distribution == "normal":
            return inp.multiply(random.normal(key, shape, dtype), inp.sqrt(variance))
        if distribution == "uniform":
            half_width = inp.sqrt(inp.multiply(3, variance))
            return inp.multiply(random.uniform(key, shape, dtype, -1), half_width)
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution}")
    return init


def _specialization(scale, mode, distribution, doc):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis=in_axis,
                                out_axis=out_axis, batch_axis=batch_axis, dtype=dtype)
    factory.__doc__ = doc
    return factory


glorot_uniform = _specialization(1.0, "fan_avg", "uniform", "Glorot (Xavier) uniform.")
glorot_normal = _specialization(1.0, "fan_avg", "truncated_normal", "Glorot (Xavier) normal.")
lecun_uniform = _specialization(1.0, "fan_in", "uniform", "LeCun uniform.")
lecun_normal = _specialization(1.0, "fan_in", "truncated_normal", "LeCun normal.")
he_uniform = _specialization(2.0, "fan_in", "uniform", "He (Kaiming) uniform.")
he_normal = _specialization(2.0, "fan_in", "truncated_normal", "He (Kaiming) normal.")
for _name in ("glorot_uniform", "glorot_normal", "lecun_uniform", "lecun_normal",
              "he_uniform", "he_normal"):
    globals()[_name].__name__ = _name
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """Matrices with orthonormal rows or columns (whichever are fewer) times `scale`;
    the axes other than `column_axis` are flattened into the rows."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding, "orthogonal")
        shape = tuple(int(d) for d in shape)
        dtype = _dtype(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if 0 in shape:
            return inp.zeros(shape, dtype)
        n_cols = shape[column_axis]
        q = random.orthogonal(key, math.prod(shape) // n_cols, (), dtype, n_cols)
        rows_shape = tuple(np.delete(np.array(shape), column_axis))
        q = inp.moveaxis(inp.reshape(q, rows_shape + (n_cols,)), -1, column_axis)
        return inp.multiply(inp.array(scale, dtype), q)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """Convolution kernels (3D, 4D or 5D) that are zero except at the spatial centre,
    which holds an orthogonal matrix (Xiao et al. 2018)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding, "delta_orthogonal")
        shape = tuple(int(d) for d in shape)
        dtype = _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        centre_matrix = orthogonal(scale, column_axis, dtype)(key, shape[-2:])
        spatial = shape[:-2]
        padding = [((k - 1) // 2, k - 1 - (k - 1) // 2, 0) for k in spatial] + [(0, 0, 0)] * 2
        block = inp.reshape(centre_matrix, (1,) * len(spatial) + shape[-2:])
        return lax.pad(block, np.zeros((), dtype), padding)
    return init
