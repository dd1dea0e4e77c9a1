"""How the laws evaluate: float64 references staged out by jax.jit, and JAX's persistent
compilation cache that the CLI and the plugin turn on (properties/compilation_cache.py)."""
import importlib
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from properties.laws._common import evaluate, evaluate_reference, fd_jvp


def test_a_reference_is_the_eager_value_staged_or_not():
    x = np.linspace(-1.0, 1.0, 5)

    def stageable(a):
        return jnp.sin(a) * a + 1.0

    def reads_values(a):  # np.asarray of a tracer: jax.jit cannot stage it
        return jnp.asarray(np.sin(np.asarray(a)) * np.asarray(a) + 1.0)

    for f in (stageable, reads_values):
        np.testing.assert_allclose(evaluate_reference(f, x), evaluate(f, x), rtol=1e-12)
        np.testing.assert_allclose(evaluate_reference(f, x), np.sin(x) * x + 1.0, rtol=1e-12)
    # the finite differences of both: the derivative sin(x) + x cos(x)
    for f in (stageable, reads_values):
        np.testing.assert_allclose(fd_jvp(f, (x,), (np.ones(5),)), np.sin(x) + x * np.cos(x),
                                   rtol=1e-7, atol=1e-9)


def test_a_reference_raises_what_eager_evaluation_raises():
    def broken(a):
        raise NotImplementedError("no such op")
    try:
        evaluate_reference(broken, np.ones(2))
    except NotImplementedError as exc:
        assert "no such op" in str(exc)
    else:
        raise AssertionError("the eager error was swallowed")


def test_the_cli_keeps_its_compiled_programs_in_the_user_cache(monkeypatch):
    monkeypatch.delenv("PROPERTIES_JAX_CACHE", raising=False)
    cli = importlib.import_module("properties.__main__")
    default = cli.command(cli.parse([]))
    folder = default[default.index("--jax-cache") + 1]
    assert folder == os.path.join(cli.cache_dir(), "jax-cache")
    assert "--jax-cache" not in cli.command(cli.parse(["--no-jax-cache"]))
    chosen = cli.command(cli.parse(["--jax-cache", "somewhere"]))
    assert chosen[chosen.index("--jax-cache") + 1] == os.path.abspath("somewhere")


_COMPILE_TWICE = """
import sys
from properties import compilation_cache
compilation_cache.enable(sys.argv[1])
import jax, jax.numpy as jnp, numpy as np
from jax._src import compiler
compiled = []
original = compiler.backend_compile_and_load
compiler.backend_compile_and_load = lambda *a, **k: compiled.append(1) or original(*a, **k)
for _ in range(2):  # the second time, JAX's in-memory caches are empty: only the folder has it
    jax.clear_caches()
    jax.jit(lambda x: jnp.tanh(x) * 3.0 + x)(np.ones(7, np.float32)).block_until_ready()
print(len(compiled))
"""


@pytest.mark.slow  # a JAX process of its own: seconds
def test_the_persistent_cache_keeps_even_a_tiny_program(tmp_path):
    """Compiled once and written; then read from the folder instead of compiled again."""
    folder = str(tmp_path / "jax-cache")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    out = subprocess.run([sys.executable, "-c", _COMPILE_TWICE, folder], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert os.listdir(folder)
    assert int(out.stdout.split()[-1]) == 1


def test_a_reference_of_a_callable_without_weak_references():
    class Scaled:
        __slots__ = ("k",)

        def __init__(self, k):
            self.k = k

        def __call__(self, a):
            return jnp.cos(a) * self.k

    x = np.linspace(-1.0, 1.0, 3)
    np.testing.assert_allclose(evaluate_reference(Scaled(2.0), x), 2.0 * np.cos(x), rtol=1e-12)
