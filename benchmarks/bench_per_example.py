"""Per-example gradients of a 3-layer MLP: the workload impl is judged by."""

from ._backends import BACKENDS, DEVICES, BenchBase
from ._models import MLP_SIZES, make_per_example_grads, mlp_data


class _PerExample(BenchBase):
    """The MLP's data on the device and ``self.fn``, the per-example gradients, run once:
    compiled under jit (``compiled``), or op by op with warm primitive caches."""

    compiled = True

    def prepare(self, backend, device, size):
        params, xs, ys = mlp_data(size)
        self.args = (
            [(self.put(w), self.put(b)) for w, b in params],
            self.put(xs),
            self.put(ys),
        )
        self.fn = make_per_example_grads(self.be)
        if self.compiled:
            self.fn = self.be.require("jit")(self.fn)
        self.be.block(self.fn(*self.args))


class PerExampleGrads(_PerExample):
    """Compiled ``jit(vmap(grad(loss)))``; compiled in setup (steady state)."""

    params = [BACKENDS, DEVICES, list(MLP_SIZES)]
    param_names = ["backend", "device", "size"]

    def time_compiled(self, backend, device, size):
        self.be.block(self.fn(*self.args))


class PerExampleGradsEager(_PerExample):
    """``vmap(grad(loss))`` without jit: op-by-op dispatch cost."""

    compiled = False
    params = [BACKENDS, DEVICES, ["small", "medium"]]
    param_names = ["backend", "device", "size"]

    def time_eager(self, backend, device, size):
        self.be.block(self.fn(*self.args))


class PerExampleGradsMemory(_PerExample):
    """Peak resident memory of the process running compiled per-example grads.

    asv's ``peakmem_`` reports the maximum RSS of the benchmark process,
    including interpreter and JAX start-up; compare backends, not absolutes.
    """

    params = [BACKENDS, DEVICES, ["large"]]
    param_names = ["backend", "device", "size"]

    def peakmem_per_example_grads(self, backend, device, size):
        self.be.block(self.fn(*self.args))
