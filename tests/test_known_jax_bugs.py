"""JAX bugs of the CPU runtime that hang rather than fail, checked in subprocesses.

Independent batched LAPACK calls (here 2 x cores triangular solves of 128 32x32 systems) run
concurrently on XLA's CPU thread pool; each waits for batch tasks queued on the same
pool, and with every pool thread waiting nobody runs them: the program never finishes.  The property
harness avoids it by setting ``--xla_cpu_enable_concurrency_optimized_scheduler=false``
on import (properties/__init__.py).
"""
import os
import subprocess
import sys

import pytest

REPRO = """
import os, jax, jax.numpy as jnp, numpy as np
from jax import lax
rng = np.random.default_rng(0)
n, b, k = 32, 128, max(4, 2 * os.cpu_count())  # more solves than pool threads
As = [jnp.asarray(np.tril(rng.standard_normal((b, n, n))).astype(np.float32)) for _ in range(k)]
Ys = [jnp.asarray(rng.standard_normal((b, n, 3)).astype(np.float32)) for _ in range(k)]
f = jax.jit(lambda As, Ys: [lax.linalg.triangular_solve(jnp.sin(a) + 4 * jnp.eye(n), 2 * y,
                                                        left_side=True, lower=True)
                            for a, y in zip(As, Ys)])
for _ in range(300):
    jax.block_until_ready(f(As, Ys))
print("finished")
"""


def _run(xla_flags, timeout):
    env = dict(os.environ, XLA_FLAGS=xla_flags, JAX_PLATFORMS="cpu")
    try:
        out = subprocess.run([sys.executable, "-c", REPRO], env=env, timeout=timeout,
                             capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return "hung"
    return out.stdout.strip() or out.stderr[-500:]


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="JAX 0.10.2 CPU: concurrent batched LAPACK calls deadlock "
                                       "the 2-thread pool (the program hangs)")
def test_jax_bug_concurrent_batched_lapack_calls_deadlock():
    assert _run("", timeout=60) == "finished"


def test_the_harness_flag_avoids_the_deadlock():
    import properties  # noqa: F401  (sets the flag on import)
    assert "--xla_cpu_enable_concurrency_optimized_scheduler=false" in os.environ["XLA_FLAGS"]
    assert _run("--xla_cpu_enable_concurrency_optimized_scheduler=false", timeout=120) == "finished"
