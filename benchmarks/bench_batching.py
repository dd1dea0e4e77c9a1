"""vmap's named axes and chunking: collectives under vmap, and chunked vmap's memory."""

from ._backends import BACKENDS, DEVICES, BenchBase, SkipNotImplemented

import numpy as np

# A batch of "devices" (vmap elements) exchanging features with collectives.
COLLECTIVE_SIZES = {"small": (8, 64), "medium": (64, 256)}


def make_collective_step(be):
    """A fresh per-element step that normalises over the named axis, gathers every
    element's features and passes a message around a ring (psum, pmean, all_gather,
    ppermute, axis_index)."""
    lax, bnp = be.require("lax"), be.np

    def step(x):
        n = lax.psum(1, "i")
        centred = x - lax.pmean(x, "i")
        everyone = lax.all_gather(centred, "i")
        ring = lax.ppermute(centred, "i", [(k, (k + 1) % n) for k in range(n)])
        weight = (lax.axis_index("i") + 1).astype(x.dtype)
        return bnp.tanh(everyone.mean(0) * weight + ring)

    return step


class CollectivesUnderVmap(BenchBase):
    """Compiled ``jit(vmap(step, axis_name='i'))`` and its per-element gradients
    (the collectives' transposes under vmap)."""

    params = [BACKENDS, DEVICES, list(COLLECTIVE_SIZES)]
    param_names = ["backend", "device", "size"]

    def prepare(self, backend, device, size):
        jit, vmap, grad = self.be.require("jit", "vmap", "grad")
        batch, width = COLLECTIVE_SIZES[size]
        x = np.random.default_rng(0).standard_normal((batch, width)).astype(np.float32)
        self.x = self.put(x)
        step = make_collective_step(self.be)
        self.fwd = jit(vmap(step, axis_name="i"))
        bnp = self.be.np
        self.bwd = jit(vmap(grad(lambda v: bnp.sum(step(v) ** 2)), axis_name="i"))
        self.be.block((self.fwd(self.x), self.bwd(self.x)))

    def time_compiled(self, backend, device, size):
        self.be.block(self.fwd(self.x))

    def time_compiled_grad(self, backend, device, size):
        self.be.block(self.bwd(self.x))


# Per-element work with a large intermediate (a sorted outer product) that XLA must
# materialise: its size times the batch is what chunking saves.
CHUNK_BATCH, CHUNK_WIDTH, CHUNK = 512, 128, 16


def make_sorted_outer(bnp):
    def f(x):
        h = bnp.sort(bnp.outer(x, x), axis=-1)
        return bnp.sum(bnp.tanh(h) * h[::-1])

    return f


class ChunkedVmapMemory(BenchBase):
    """Memory of a compiled vmap computed whole or in chunks of 16 elements: impl's
    ``vmap(f, chunk_size=16)`` next to JAX's ``lax.map(f, xs, batch_size=16)``.

    ``peakmem_`` is the peak RSS of the benchmark process (JAX start-up included:
    compare backends and modes, not absolutes); ``track_temp_bytes`` is XLA's own
    count of the compiled program's temporary buffers."""

    params = [BACKENDS, DEVICES, ["whole", "chunked"]]
    param_names = ["backend", "device", "mode"]

    def prepare(self, backend, device, mode):
        jit, vmap = self.be.require("jit", "vmap")
        f = make_sorted_outer(self.be.np)
        xs = np.random.default_rng(0).standard_normal((CHUNK_BATCH, CHUNK_WIDTH))
        self.xs = self.put(xs.astype(np.float32))
        if mode == "whole":
            self.fn = jit(vmap(f))
        elif backend == "impl":
            self.fn = jit(vmap(f, chunk_size=CHUNK))
        else:
            lax_map = self.be.require("lax").map
            self.fn = jit(lambda xs: lax_map(f, xs, batch_size=CHUNK))
        if not hasattr(self.fn, "lower"):
            raise SkipNotImplemented(f"{backend}.jit(...) has no .lower")
        self.temp = self.fn.lower(self.xs).compile().memory_analysis().temp_size_in_bytes
        self.be.block(self.fn(self.xs))

    def peakmem_vmap(self, backend, device, mode):
        self.be.block(self.fn(self.xs))

    def track_temp_bytes(self, backend, device, mode):
        return self.temp

    track_temp_bytes.unit = "bytes"
