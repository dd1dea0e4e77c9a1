"""A convolutional layer (conv + bias + relu + 2x2 max-pool), compiled.

Both backends lower to one XLA program; impl's ratio to JAX measures whether its
convolution and pooling rules (the transposes in particular) produce programs as
fast as JAX's own.
"""

import numpy as np

from ._backends import BACKENDS, DEVICES, BenchBase

# (batch, height, width, input channels, output channels, kernel size)
CONV_SIZES = {
    "small": (8, 16, 16, 8, 16, 3),
    "medium": (16, 32, 32, 16, 32, 3),
}


def conv_data(size, seed=0):
    """Host float32 kernel, bias and an NHWC batch for one conv layer."""
    n, h, w, c_in, c_out, k = CONV_SIZES[size]
    rng = np.random.default_rng(seed)
    kernel = rng.standard_normal((k, k, c_in, c_out)) / np.sqrt(k * k * c_in)
    kernel = kernel.astype(np.float32)
    bias = np.zeros((c_out,), np.float32)
    xs = rng.standard_normal((n, h, w, c_in)).astype(np.float32)
    return kernel, bias, xs


def make_conv_loss(be):
    """A fresh loss of one conv layer: SAME conv, bias, relu, 2x2 max-pool, mean square."""
    lax, bnp = be.module.lax, be.np

    def loss(kernel, bias, x):
        y = lax.conv_general_dilated(x, kernel, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = bnp.maximum(y + bias, 0.0)
        y = lax.reduce_window(y, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return bnp.mean(y * y)

    return loss


class _ConvLayer(BenchBase):
    params = [BACKENDS, DEVICES, list(CONV_SIZES)]
    param_names = ["backend", "device", "size"]

    def prepare(self, backend, device, size):
        kernel, bias, xs = conv_data(size)
        self.args = (self.put(kernel), self.put(bias), self.put(xs))


class ConvLayerForward(_ConvLayer):
    """Compiled ``jit(loss)`` of the conv layer; compiled in setup."""

    def prepare(self, backend, device, size):
        super().prepare(backend, device, size)
        jit = self.be.require("jit")
        self.fn = jit(make_conv_loss(self.be))
        self.be.block(self.fn(*self.args))

    def time_compiled(self, backend, device, size):
        self.be.block(self.fn(*self.args))


class ConvLayerGrad(_ConvLayer):
    """Compiled ``jit(grad(loss))`` for kernel and bias: the training step's work."""

    def prepare(self, backend, device, size):
        super().prepare(backend, device, size)
        jit, grad = self.be.require("jit", "grad")
        self.fn = jit(grad(make_conv_loss(self.be), argnums=(0, 1)))
        self.be.block(self.fn(*self.args))

    def time_compiled(self, backend, device, size):
        self.be.block(self.fn(*self.args))
