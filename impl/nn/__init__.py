"""jax.nn's activation functions and helpers over impl's primitives."""
from __future__ import annotations

import math

import numpy as np

from impl import core
from impl.core import get_aval
from impl.primitives import elementwise as ew
from impl.numpy import _core as c
from impl.numpy import _ufuncs as uf
from impl.numpy._util import asarray, canonicalize_axes
from impl.scipy import special
from impl.scipy.special import logsumexp  # noqa: F401

__all__ = ["relu", "relu6", "gelu", "sigmoid", "softplus", "silu", "swish", "log_sigmoid",
           "softmax", "log_softmax", "logsumexp", "one_hot", "tanh", "elu", "leaky_relu",
           "hard_tanh", "standardize"]


def _float(x):
    return uf._float_operand(x)


def relu(x):
    """max(x, 0), with derivative 0 at 0 (as jax.nn.relu); NaN propagates."""
    x = _float(x)
    return uf.where(uf.less_equal(x, 0), ew.zeros_like(x), x)


def relu6(x):
    x = _float(x)
    return uf.where(uf.greater_equal(x, 6), ew.full_like(x, 6), relu(x))


def sigmoid(x):
    return ew.logistic_p.bind(_float(x))


def softplus(x):
    return uf.logaddexp(_float(x), 0.0)


def log_sigmoid(x):
    return uf.negative(softplus(uf.negative(_float(x))))


def silu(x):
    x = _float(x)
    return uf.multiply(x, sigmoid(x))


swish = silu


def gelu(x, approximate=True):
    """GELU: the tanh approximation, or exactly via erf."""
    x = _float(x)
    if approximate:
        cdf = uf.add(1.0, uf.tanh(uf.multiply(math.sqrt(2 / math.pi),
                                              uf.add(x, uf.multiply(0.044715,
                                                                    uf.power(x, 3))))))
        return uf.multiply(uf.multiply(0.5, x), cdf)
    return uf.multiply(uf.multiply(0.5, x),
                       uf.add(1.0, ew.erf_p.bind(uf.multiply(x, 1 / math.sqrt(2)))))


def elu(x, alpha=1.0):
    x = _float(x)
    positive = uf.greater(x, 0)
    safe = uf.where(positive, ew.zeros_like(x), x)     # expm1 never sees large inputs
    return uf.where(positive, x, uf.multiply(alpha, uf.expm1(safe)))


def leaky_relu(x, negative_slope=0.01):
    x = _float(x)
    return uf.where(uf.greater_equal(x, 0), x, uf.multiply(negative_slope, x))


def hard_tanh(x):
    return uf.clip(_float(x), -1.0, 1.0)


def tanh(x):
    return uf.tanh(x)


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) along `axis`, with the maximum subtracted for stability;
    entries outside the `where` mask get 0."""
    return special._softmax(x, axis, where)


def log_softmax(x, axis=-1, where=None):
    return special._log_softmax(x, axis, where)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
    x = _float(x)
    if mean is None:
        mean = c.mean(x, axis=axis, keepdims=True)
    if variance is None:
        centered = uf.subtract(x, mean)
        variance = c.mean(uf.multiply(centered, centered), axis=axis, keepdims=True)
    return uf.multiply(uf.subtract(x, mean), uf.power(uf.add(variance, epsilon), -0.5))


def one_hot(x, num_classes, *, dtype=np.float64, axis=-1):
    """x[..., None] == arange(num_classes), as `dtype`; the class axis goes at `axis`."""
    if not isinstance(num_classes, (int, np.integer)):
        raise TypeError(f"one_hot: num_classes must be a concrete int, got {num_classes!r}")
    x = asarray(x) if not isinstance(x, core.Tracer) else x
    nd = get_aval(x).ndim
    out_axis = axis % (nd + 1)
    classes = np.arange(int(num_classes)).reshape(
        (int(num_classes),) + (1,) * (nd - out_axis))
    xe = c.expand_dims(x, out_axis)
    hot = uf.equal(xe, classes)
    return c.astype(hot, core.canonical_dtype(dtype))
