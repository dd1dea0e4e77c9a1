"""Compiled control flow: a 1,000-step scan (forward and gradient) and a cond-heavy loop.

impl lowers lax.scan/cond/switch to XLA's control flow inside one jitted program, so
the compiled ratio to JAX measures what impl's staging and transformations (jvp,
partial evaluation, transpose of the loop) leave for XLA to run.
"""

import numpy as np

from ._backends import BACKENDS, DEVICES, BenchBase

SCAN_STEPS, HIDDEN, BATCH = 1000, 32, 8


def make_rnn_loss(be):
    """A fresh tanh-RNN loss over SCAN_STEPS steps of lax.scan."""
    bnp, lax = be.np, be.module.lax

    def loss(params, xs):
        wx, wh = params

        def cell(h, x):
            h = bnp.tanh(x @ wx + h @ wh)
            return h, bnp.sum(h * h)

        h0 = bnp.zeros((xs.shape[1], wh.shape[0]), xs.dtype)
        _, ys = lax.scan(cell, h0, xs)
        return bnp.sum(ys) / SCAN_STEPS

    return loss


def rnn_data(seed=0):
    rng = np.random.default_rng(seed)
    wx = (rng.standard_normal((HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)).astype(np.float32)
    wh = (rng.standard_normal((HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)).astype(np.float32)
    xs = rng.standard_normal((SCAN_STEPS, BATCH, HIDDEN)).astype(np.float32)
    return (wx, wh), xs


class ScanLoop(BenchBase):
    """``jit`` of a 1,000-step RNN scan, and ``jit(grad)`` of it (the gradient
    runs a forward scan saving residuals per step and a reverse scan)."""

    params = [BACKENDS, DEVICES, ["forward", "grad"]]
    param_names = ["backend", "device", "mode"]

    def prepare(self, backend, device, mode):
        jit, grad = self.be.require("jit", "grad")
        loss = make_rnn_loss(self.be)
        self.fn = jit(loss if mode == "forward" else grad(loss))
        params, xs = rnn_data()
        self.args = (tuple(self.put(p) for p in params), self.put(xs))
        self.be.block(self.fn(*self.args))

    def time_jit(self, backend, device, mode):
        self.be.block(self.fn(*self.args))


COND_STEPS, COND_BATCH, COND_WIDTH = 500, 8, 128


def make_cond_program(be):
    """A fresh loop whose every step picks one of several branches by the data:
    a lax.cond on the sign of the carry, then a lax.switch on a step counter."""
    bnp, lax = be.np, be.module.lax

    def program(x, w):
        def step(carry, i):
            carry = lax.cond(bnp.sum(carry) > 0,
                             lambda c: bnp.tanh(c @ w),
                             lambda c: bnp.sin(c) * 0.5 + 0.1, carry)
            carry = lax.switch(i % 3, [lambda c: c * 0.99, lambda c: c - bnp.mean(c),
                                       lambda c: bnp.cos(c)], carry)
            return carry, carry[0, 0]
        return lax.scan(step, x, bnp.arange(COND_STEPS))

    return program


class CondHeavy(BenchBase):
    """``jit`` of a 500-step loop with a cond and a three-way switch per step."""

    def prepare(self, backend, device):
        jit = self.be.require("jit")
        self.fn = jit(make_cond_program(self.be))
        rng = np.random.default_rng(1)
        w = rng.standard_normal((COND_WIDTH, COND_WIDTH)) / np.sqrt(COND_WIDTH)
        self.args = (self.put(rng.standard_normal((COND_BATCH, COND_WIDTH)).astype(np.float32)),
                     self.put(w.astype(np.float32)))
        self.be.block(self.fn(*self.args))

    def time_jit(self, backend, device):
        self.be.block(self.fn(*self.args))
