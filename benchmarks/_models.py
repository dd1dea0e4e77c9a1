"""Workloads shared by the benchmarks, written against a backend's numpy.

Factories return *new* Python functions on every call: tracing and
compile benchmarks need a fresh function each time so no cache keyed on
function identity (jit caches, linear_util memoization) can answer.
"""

import numpy as np

# (batch, input width, hidden width, output width) of the 3-layer MLP.
MLP_SIZES = {
    "small": (16, 32, 64, 8),
    "medium": (64, 128, 256, 16),
    "large": (128, 256, 512, 32),
}


def mlp_data(size, seed=0):
    """Host (numpy) float32 parameters and a batch for a 3-layer MLP."""
    batch, d_in, hidden, d_out = MLP_SIZES[size]
    rng = np.random.default_rng(seed)
    widths = [d_in, hidden, hidden, d_out]
    params = []
    for a, b in zip(widths[:-1], widths[1:]):
        w = (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
        params.append((w, np.zeros((b,), np.float32)))
    xs = rng.standard_normal((batch, d_in)).astype(np.float32)
    ys = rng.standard_normal((batch, d_out)).astype(np.float32)
    return params, xs, ys


def make_mlp_loss(bnp):
    """A fresh single-example squared-error loss of a tanh 3-layer MLP."""

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = bnp.tanh(bnp.dot(h, w) + b)
        w, b = params[-1]
        d = bnp.dot(h, w) + b - y
        return bnp.sum(d * d)

    return loss


def make_per_example_grads(be):
    """Fresh ``vmap(grad(loss))`` over examples, parameters shared."""
    vmap, grad = be.require("vmap", "grad")
    return vmap(grad(make_mlp_loss(be.np)), in_axes=(None, 0, 0))


def make_elementwise(bnp):
    """A fresh scalar-output elementwise function used by custom-rule tests."""

    def f(x):
        return bnp.sum(bnp.sin(x) * x + bnp.cos(x))

    return f


def orthogonal(n, seed=0):
    """A float32 orthogonal matrix: its inverse is its transpose."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return q.astype(np.float32)
