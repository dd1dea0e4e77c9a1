"""Overhead of user-defined derivative rules next to the plain function.

Each benchmark has a ``rule`` parameter: ``plain`` is the baseline, so the
custom_jvp / custom_vjp overhead is the ratio to ``plain`` within a backend.
"""

from ._backends import BACKENDS, DEVICES, BenchBase
from ._models import make_elementwise, orthogonal

RULES = ["plain", "custom_jvp", "custom_vjp"]


def make_rule_fn(be, rule):
    """A fresh f(x) = sum(sin(x)*x + cos(x)) with its derivative given by ``rule``."""
    bnp = be.np
    plain = make_elementwise(bnp)
    if rule == "plain":
        return plain

    def df(x):  # d/dx [sin(x) x + cos(x)] = x cos(x)
        return x * bnp.cos(x)

    if rule == "custom_jvp":
        custom_jvp = be.require("custom_jvp")
        f = custom_jvp(plain)

        def f_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return plain(x), bnp.sum(df(x) * t)

        f.defjvp(f_jvp)
        return f

    custom_vjp = be.require("custom_vjp")
    f = custom_vjp(plain)

    def f_fwd(x):
        return plain(x), x

    def f_bwd(x, g):
        return (g * df(x),)

    f.defvjp(f_fwd, f_bwd)
    return f


class CustomRules(BenchBase):
    """Compiled ``jit(grad(f))`` in steady state, and tracing ``grad(f)``."""

    params = [BACKENDS, DEVICES, RULES]
    param_names = ["backend", "device", "rule"]

    def prepare(self, backend, device, rule):
        jit, grad, self.make_jaxpr = self.be.require("jit", "grad", "make_jaxpr")
        self.grad = grad
        self.rule = rule
        self.x = self.put(orthogonal(256)[0] * 3.0)
        self.fn = jit(grad(make_rule_fn(self.be, rule)))
        self.be.block(self.fn(self.x))

    def time_jit_grad(self, backend, device, rule):
        self.be.block(self.fn(self.x))

    def time_make_jaxpr_grad(self, backend, device, rule):
        fresh = make_rule_fn(self.be, self.rule)
        self.be.block(self.make_jaxpr(self.grad(fresh))(self.x))


class LinearCallTranspose(BenchBase):
    """Gradient through ``linear_call`` with a user-supplied transpose.

    The linear map is a solve against an orthogonal Q (solve(Q, b) = Q^T b),
    whose transpose is b -> Q b; only matmul is needed, so it runs on any
    backend that has linear_call.  grad forces the transpose rule to run.
    """

    params = [BACKENDS, DEVICES]
    param_names = ["backend", "device"]

    def prepare(self, backend, device):
        jit, grad, self.make_jaxpr = self.be.require("jit", "grad", "make_jaxpr")
        self.linear_call = self.be.require("linear_call")
        self.grad = grad
        q = orthogonal(128, seed=1)
        self.q = self.put(q)
        self.b = self.put(q[:, 0] + 1.0)
        self.fn = jit(grad(self._make_loss()))
        self.be.block(self.fn(self.b))

    def _make_loss(self):
        bnp, linear_call, q = self.be.np, self.linear_call, self.q

        def solve(q_, b):
            return bnp.matmul(bnp.transpose(q_), b)

        def solve_transpose(q_, ct):
            return bnp.matmul(q_, ct)

        def loss(b):
            x = linear_call(solve, solve_transpose, q, b)
            return bnp.sum(x * x)

        return loss

    def time_jit_grad(self, backend, device):
        self.be.block(self.fn(self.b))

    def time_make_jaxpr_grad(self, backend, device):
        self.be.block(self.make_jaxpr(self.grad(self._make_loss()))(self.b))
