"""Importing impl (or the harness) initialises nothing of JAX's: as after `import jax`,
JAX's device flags can still be set, and backends start on first use."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Setting the CPU device count raises RuntimeError once JAX's backends exist.
PROGRAM = """
import jax
{imports}
jax.config.update('jax_num_cpu_devices', 3)
print(len(jax.devices('cpu')))
"""


def _run(imports):
    env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(imports=imports)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return proc.returncode, proc.stdout.strip(), proc.stderr


@pytest.mark.parametrize("imports", [
    "import impl, impl.numpy, impl.lax, impl.scipy, impl.nn, impl.random",
    "import strategies, properties, properties.repro, properties.hunt",
])
def test_import_leaves_jax_backends_uninitialised(imports):
    want = _run("import jax.numpy, jax.scipy, jax.nn, jax.random")
    assert want[:2] == (0, "3"), want[2]
    code, out, err = _run(imports)
    assert (code, out) == want[:2], err[-3000:]


def test_the_check_sees_a_backend_started_at_import():
    # A module that makes an array while importing makes the flag update raise.
    code, out, err = _run("import jax.numpy as jnp; jnp.zeros(())")
    assert code != 0 and "RuntimeError" in err
