"""Costs paid before any math runs: tracing, lowering+compiling, dispatch."""

from ._backends import BenchBase, SkipNotImplemented
from ._models import make_per_example_grads, mlp_data


class Tracing(BenchBase):
    """``make_jaxpr(vmap(grad(mlp)))`` of a function never seen before.

    A new function object per call defeats every identity-keyed cache, so
    this is the cost a user pays the first time a transform stack is traced.
    """

    def prepare(self, backend, device):
        self.make_jaxpr = self.be.require("make_jaxpr")
        self.be.require("vmap", "grad")
        params, xs, ys = mlp_data("medium")
        self.args = (
            [(self.put(w), self.put(b)) for w, b in params],
            self.put(xs),
            self.put(ys),
        )

    def time_make_jaxpr_vmap_grad_mlp(self, backend, device):
        jaxpr = self.make_jaxpr(make_per_example_grads(self.be))(*self.args)
        self.be.block(jaxpr)


class LowerCompile(BenchBase):
    """``jit(vmap(grad(mlp))).lower(...).compile()`` of a fresh function.

    Lowering plus XLA compilation is what the first call of a jitted
    function costs on top of tracing.
    """

    def prepare(self, backend, device):
        jit = self.be.require("jit")
        self.be.require("vmap", "grad")
        if not hasattr(jit(lambda x: x), "lower"):
            raise SkipNotImplemented(f"{backend}.jit(...) has no .lower")
        self.jit = jit
        params, xs, ys = mlp_data("medium")
        self.args = (
            [(self.put(w), self.put(b)) for w, b in params],
            self.put(xs),
            self.put(ys),
        )

    def time_lower_compile(self, backend, device):
        compiled = self.jit(make_per_example_grads(self.be)).lower(*self.args).compile()
        self.be.block(compiled)


class Dispatch(BenchBase):
    """A cached ``jit`` call of a trivial function: pure Python overhead.

    Compiled in setup, so the timing is the fast path from Python call to
    a ready result.
    """

    def prepare(self, backend, device):
        jit = self.be.require("jit")
        self.f = jit(lambda x: x + 1.0)
        self.x = self.put([1.0, 2.0, 3.0, 4.0])
        self.be.block(self.f(self.x))  # compile outside the timing

    def time_cached_jit_dispatch(self, backend, device):
        self.be.block(self.f(self.x))


class DispatchAdd(BenchBase):
    """A cached ``jit`` call of ``a + b`` on two arrays: the dispatch of a jitted
    function of several arguments, compiled in setup."""

    def prepare(self, backend, device):
        jit = self.be.require("jit")
        self.f = jit(lambda a, b: a + b)
        self.a = self.put([1.0, 2.0, 3.0, 4.0])
        self.b = self.put([4.0, 3.0, 2.0, 1.0])
        self.be.block(self.f(self.a, self.b))

    def time_cached_jit_dispatch(self, backend, device):
        self.be.block(self.f(self.a, self.b))


class EagerElementwise(BenchBase):
    """``jnp.add(a, b)`` and ``jnp.sin(a)`` without jit: one elementwise function of
    the numpy module applied to arrays, as an eager user program calls it."""

    def prepare(self, backend, device):
        self.add, self.sin = self.be.np.add, self.be.np.sin
        self.a = self.put([1.0, 2.0, 3.0, 4.0])
        self.b = self.put([4.0, 3.0, 2.0, 1.0])
        self.be.block((self.add(self.a, self.b), self.sin(self.a)))

    def time_add(self, backend, device):
        self.be.block(self.add(self.a, self.b))

    def time_sin(self, backend, device):
        self.be.block(self.sin(self.a))
