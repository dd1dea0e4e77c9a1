"""jax.nn's activation functions and helpers over impl's primitives."""
from __future__ import annotations

import math

import numpy as np

from impl import core
from impl import numpy as inp
from impl.core import get_aval
from impl.custom_derivatives import custom_jvp
from impl.primitives import elementwise as ew
from impl.numpy import _core as c
from impl.numpy import _ufuncs as uf
from impl.numpy._util import asarray, canonicalize_axes
from impl.scipy import special
from impl.scipy.special import logsumexp  # noqa: F401

__all__ = ["relu", "relu6", "gelu", "sigmoid", "softplus", "silu", "swish", "log_sigmoid",
           "softmax", "log_softmax", "logsumexp", "one_hot", "tanh", "elu", "leaky_relu",
           "hard_tanh", "standardize", "celu", "selu", "glu", "mish", "hard_sigmoid",
           "hard_silu", "hard_swish", "soft_sign", "squareplus", "log1mexp", "logmeanexp",
           "identity", "sparse_plus", "sparse_sigmoid", "dot_product_attention",
           "initializers"]


def _float(x):
    return uf._float_operand(x)


@custom_jvp
def relu(x):
    """max(x, 0); NaN propagates and integers stay integers."""
    return uf.maximum(x, 0)


# derivative 0 at 0 (as jax.nn.relu, see Bertoin et al., "Numerical influence of ReLU'(0)")
relu.defjvps(lambda g, ans, x: uf.where(uf.greater(x, 0), g, ew.zeros_like(g)))


@custom_jvp
def relu6(x):
    return uf.minimum(uf.maximum(x, 0), 6.)


# derivative 0 at both kinks, 0 and 6
relu6.defjvps(lambda g, ans, x: uf.where(uf.logical_and(uf.greater(x, 0), uf.less(x, 6)),
                                         g, ew.zeros_like(g)))


def sigmoid(x):
    """lax.logistic, which (as in JAX) refuses integer input with a TypeError."""
    return ew.logistic_p.bind(asarray(x))


def softplus(x):
    return uf.logaddexp(_float(x), 0.0)


def log_sigmoid(x):
    return uf.negative(softplus(uf.negative(_float(x))))


def silu(x):
    x = asarray(x)
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
    x = identity(x)
    positive = uf.greater(x, 0)
    safe = uf.where(positive, 0., x)     # expm1 never sees large inputs
    return uf.where(positive, x, uf.multiply(alpha, uf.expm1(safe)))


def leaky_relu(x, negative_slope=0.01):
    x = identity(x)
    return uf.where(uf.greater_equal(x, 0), x, uf.multiply(negative_slope, x))


def hard_tanh(x):
    x = identity(x)
    return uf.where(uf.greater(x, 1), 1, uf.where(uf.less(x, -1), -1, x))


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
        mean = c.mean(x, axis=axis, keepdims=True, where=where)
    if variance is None:
        centered = uf.subtract(x, mean)
        variance = c.mean(uf.multiply(centered, centered), axis=axis, keepdims=True,
                          where=where)
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


# ------------------------------------------------------------ more activations

def identity(x):
    """x itself, as an array (integers stay integers)."""
    return asarray(x) if not isinstance(x, core.Tracer) else x


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha): elu with a derivative continuous at 0."""
    x = identity(x)
    negative_part = uf.expm1(uf.divide(uf.minimum(x, 0.0), alpha))
    return uf.add(uf.maximum(x, 0.0), uf.multiply(alpha, negative_part))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants of Klambauer et al."""
    return uf.multiply(_SELU_SCALE, elu(x, _SELU_ALPHA))


def glu(x, axis=-1):
    """The first half of x along `axis` gated by the sigmoid of the second half."""
    x = identity(x)
    shape = get_aval(x).shape
    (axis,) = canonicalize_axes(axis, len(shape))
    if shape[axis] % 2:
        raise ValueError(f"glu: the size of axis {axis} must be divisible by 2, got shape "
                         f"{shape}")
    first, second = inp.split(x, 2, axis)
    return uf.multiply(first, sigmoid(second))


def mish(x):
    x = identity(x)
    return uf.multiply(x, uf.tanh(softplus(x)))


def hard_sigmoid(x):
    """relu6(x + 3) / 6: derivative 0 at -3 and 3, as relu6's."""
    return uf.divide(relu6(uf.add(identity(x), 3.0)), 6.0)


def hard_silu(x):
    x = identity(x)
    return uf.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


def soft_sign(x):
    x = identity(x)
    return uf.divide(x, uf.add(uf.absolute(x), 1))


def squareplus(x, b=4):
    """(x + sqrt(x^2 + b)) / 2, a smooth relu with algebraic tails."""
    x = identity(x)
    return uf.divide(uf.add(x, uf.sqrt(uf.add(uf.square(x), b))), 2)


def sparse_plus(x):
    """0 below -1, x above 1 and (x + 1)^2 / 4 between: softplus with exact zeros."""
    x = identity(x)
    middle = uf.divide(uf.square(uf.add(x, 1.0)), 4)
    return uf.where(uf.less_equal(x, -1.0), 0.0, uf.where(uf.greater_equal(x, 1.0), x, middle))


def sparse_sigmoid(x):
    """(x + 1) / 2 clipped to [0, 1]: the derivative of sparse_plus."""
    return uf.multiply(0.5, uf.clip(uf.add(identity(x), 1.0), 0.0, 2.0))


@custom_jvp
def log1mexp(x):
    """log(1 - exp(-x)) for x >= 0, by expm1 near 0 and log1p beyond log 2 (Maechler)."""
    x = identity(x)
    near_zero = uf.less(x, math.log(2.0))
    return uf.where(near_zero, uf.log(uf.negative(uf.expm1(uf.negative(x)))),
                    uf.log1p(uf.negative(uf.exp(uf.negative(x)))))


# the derivative exp(-x) / (1 - exp(-x)) = 1 / expm1(x), without the where's NaN branch
log1mexp.defjvps(lambda g, ans, x: uf.divide(g, uf.expm1(x)))


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """logsumexp(x) - log(n), n the number of entries reduced (those in `where`)."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    ones = ew.full_like(_float(x), 1)
    count = c.sum(ones, axis=axis, where=where, keepdims=keepdims)
    return uf.subtract(lse, uf.log(c.astype(count, get_aval(lse).dtype)))


from impl.nn import initializers  # noqa: E402,F401  (jax.nn.initializers)
from impl.nn._attention import dot_product_attention  # noqa: E402,F401
