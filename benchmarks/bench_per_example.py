"""Per-example gradients of a 3-layer MLP: the workload impl is judged by."""

from ._backends import BACKENDS, DEVICES, BenchBase
from ._models import MLP_SIZES, make_per_example_grads, mlp_data


class _PerExample(BenchBase):
    def prepare(self, backend, device, size):
        params, xs, ys = mlp_data(size)
        self.args = (
            [(self.put(w), self.put(b)) for w, b in params],
            self.put(xs),
            self.put(ys),
        )


class PerExampleGrads(_PerExample):
    """Compiled ``jit(vmap(grad(loss)))``; compiled in setup (steady state)."""

    params = [BACKENDS, DEVICES, list(MLP_SIZES)]
    param_names = ["backend", "device", "size"]

    def prepare(self, backend, device, size):
        super().prepare(backend, device, size)
        jit = self.be.require("jit")
        self.fn = jit(make_per_example_grads(self.be))
        self.be.block(self.fn(*self.args))

    def time_compiled(self, backend, device, size):
        self.be.block(self.fn(*self.args))


class PerExampleGradsEager(_PerExample):
    """``vmap(grad(loss))`` without jit: op-by-op dispatch cost."""

    params = [BACKENDS, DEVICES, ["small", "medium"]]
    param_names = ["backend", "device", "size"]

    def prepare(self, backend, device, size):
        super().prepare(backend, device, size)
        self.fn = make_per_example_grads(self.be)
        self.be.block(self.fn(*self.args))  # warm primitive caches

    def time_eager(self, backend, device, size):
        self.be.block(self.fn(*self.args))


class PerExampleGradsMemory(_PerExample):
    """Peak resident memory of the process running compiled per-example grads.

    asv's ``peakmem_`` reports the maximum RSS of the benchmark process,
    including interpreter and JAX start-up; compare backends, not absolutes.
    """

    params = [BACKENDS, DEVICES, ["large"]]
    param_names = ["backend", "device", "size"]

    def prepare(self, backend, device, size):
        super().prepare(backend, device, size)
        jit = self.be.require("jit")
        self.fn = jit(make_per_example_grads(self.be))
        self.be.block(self.fn(*self.args))

    def peakmem_per_example_grads(self, backend, device, size):
        self.be.block(self.fn(*self.args))
