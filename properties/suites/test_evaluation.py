"""How the laws evaluate: float64 references staged out by jax.jit, and what the CLI and the
plugin turn on to compile faster: JAX's persistent compilation cache
(properties/compilation_cache.py), XLA's unoptimised compiles (properties/xla_options.py) and
shared MLIR contexts (properties/mlir_contexts.py)."""
import importlib
import json
import os
import subprocess
import sys
import threading

import jax
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


def test_fast_compiling_adds_its_flags_and_keeps_the_users():
    from properties import xla_options
    env = {}
    assert xla_options.fast_compile(env) == list(xla_options.FLAGS)
    assert env["XLA_FLAGS"].split() == list(xla_options.FLAGS)
    assert xla_options.fast_compile(env) == []  # already there: nothing added twice
    assert env["XLA_FLAGS"].split() == list(xla_options.FLAGS)
    mine = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8 "
                         "--xla_backend_optimization_level=2"}
    assert xla_options.fast_compile(mine) == ["--xla_cpu_use_fusion_emitters=false"]
    assert mine["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=8",
                                         "--xla_backend_optimization_level=2",
                                         "--xla_cpu_use_fusion_emitters=false"]


@pytest.fixture
def shared_contexts():
    from properties import mlir_contexts
    was_reusing = mlir_contexts.reusing()
    mlir_contexts.restore()
    yield mlir_contexts
    mlir_contexts.restore()
    if was_reusing:  # the session's (--reuse-mlir-contexts) stays as it was
        mlir_contexts.reuse()


def test_shared_mlir_contexts_are_handed_out_per_thread_and_renewed(shared_contexts):
    from jax._src.interpreters import mlir
    own = mlir.make_ir_context
    assert shared_contexts.reuse(per_context=2) and shared_contexts.reusing()
    first, second, third = (mlir.make_ir_context() for _ in range(3))
    assert first is second and third is not first  # a fresh one after two lowerings
    elsewhere = []
    thread = threading.Thread(target=lambda: elsewhere.append(mlir.make_ir_context()))
    thread.start()
    thread.join()
    assert elsewhere[0] is not third   # a thread lowers into a context of its own
    assert shared_contexts.reuse() and mlir.make_ir_context.make is own   # not stacked
    shared_contexts.restore()
    assert mlir.make_ir_context is own and not shared_contexts.reusing()
    assert mlir.make_ir_context() is not mlir.make_ir_context()   # JAX's own: always fresh
    with pytest.raises(ValueError, match="per_context"):
        shared_contexts.reuse(per_context=0)


def test_shared_mlir_contexts_lower_the_same_programs_to_the_same_values(shared_contexts):
    x = np.linspace(-2.0, 2.0, 7)
    programs = [lambda a: jnp.sin(a) * 2.5 + a, lambda a: jnp.cumsum(a[::-1]) @ a,
                lambda a: jax.lax.fori_loop(0, 3, lambda i, c: c * a + i, a)]

    def lowered_and_values():
        # fresh functions: nothing comes from the in-memory caches of the other run
        fns = [jax.jit(lambda a, f=f: f(a)) for f in programs]
        return ([f.lower(x).as_text() for f in fns], [np.asarray(f(x)) for f in fns],
                np.asarray(jnp.tanh(x + 0.125)))   # an eager op too

    fresh_texts, fresh_values, fresh_eager = lowered_and_values()
    shared_contexts.reuse(per_context=2)   # contexts renewed within the run as well
    shared_texts, shared_values, shared_eager = lowered_and_values()
    shared_contexts.restore()
    assert shared_texts == fresh_texts
    for a, b in zip(shared_values, fresh_values):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(shared_eager, fresh_eager)


def test_the_plugins_settings_reach_the_8_device_laws_subprocess(monkeypatch, tmp_path,
                                                                 shared_contexts):
    from properties import compilation_cache, plugin
    enabled = []
    monkeypatch.setattr(compilation_cache, "enable", enabled.append)
    for name in (compilation_cache.ENVIRONMENT_VARIABLE, shared_contexts.ENVIRONMENT_VARIABLE):
        monkeypatch.delenv(name, raising=False)

    class Config:
        def getoption(self, name):
            return {"--jax-cache": str(tmp_path), "--reuse-mlir-contexts": True}[name]

    plugin._use_compilation_cache(Config())
    plugin._use_mlir_contexts(Config())
    assert enabled == [str(tmp_path)] and shared_contexts.reusing()
    # what children inherit
    assert os.environ[compilation_cache.ENVIRONMENT_VARIABLE] == str(tmp_path)
    assert os.environ[shared_contexts.ENVIRONMENT_VARIABLE] == "1"
    # and the 8-device subprocess writes its compiled programs there (a few seconds)
    folder = tmp_path / "cache"
    out = subprocess.run([sys.executable, "-m", "properties.multidevice", "-k",
                          "spmd_axis_name_places_batch_axis", "--profile", "quick"],
                         capture_output=True, text=True,
                         env={**os.environ, compilation_cache.ENVIRONMENT_VARIABLE: str(folder)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert any(name.endswith("-cache") for name in os.listdir(folder))


@pytest.mark.parametrize("argv, env", [([], "1"), (["--fresh-mlir-contexts"], None)])
def test_cli_shares_mlir_contexts_unless_asked_not_to(argv, env, monkeypatch, tmp_path):
    cli = importlib.import_module("properties.__main__")
    from properties import mlir_contexts, process
    seen = {}
    monkeypatch.setattr(process, "run", lambda cmd, env=None, **_: seen.update(cmd=cmd, env=env)
                        or 0)
    monkeypatch.setenv(mlir_contexts.ENVIRONMENT_VARIABLE, "1")
    cli.main(argv + ["--report-dir", str(tmp_path), "-k", "nothing"])
    assert ("--reuse-mlir-contexts" in seen["cmd"]) is (env == "1")
    # the plugin's default is the environment's: --fresh-mlir-contexts takes it out
    assert seen["env"].get(mlir_contexts.ENVIRONMENT_VARIABLE) == env


_FAST_AND_DEFAULT = """
import json, sys
from properties import xla_options
if sys.argv[1] == "fast":
    xla_options.fast_compile()
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
x = np.linspace(-3.0, 3.0, 101)
f = lambda a: jnp.tanh(a) * a + jnp.exp(-a * a) * 1.5
print(json.dumps([np.asarray(jax.jit(f)(x)).tolist(), np.asarray(f(x)).tolist()]))
"""


@pytest.mark.slow  # two JAX processes of their own: seconds
def test_fast_compiling_computes_the_same_values_up_to_rounding():
    """XLA accepts the flags (an unknown one aborts the process) and the values agree with
    XLA's optimised build far inside the float64 'agree' tolerance."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    env.pop("XLA_FLAGS", None)
    values = {}
    for mode in ("fast", "default"):
        out = subprocess.run([sys.executable, "-c", _FAST_AND_DEFAULT, mode], capture_output=True,
                             text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        values[mode] = np.array(json.loads(out.stdout.splitlines()[-1]))
    for got, want in zip(values["fast"], values["default"]):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_a_stacks_reference_is_staged_and_eager_decides_where_staging_raises():
    from properties.laws import CaseFiltered
    from properties.laws.reach import _reference_results

    class Case:
        args = (np.linspace(-1.0, 1.0, 4),)
    staged = []

    def jit(f):
        staged.append(f)
        return jax.jit(f)

    def stageable(a):
        return jnp.sin(a) * 2.0

    def reads_values(a):  # jax.jit cannot stage it; eager evaluation can
        return jnp.asarray(np.sin(np.asarray(a)) * 2.0)

    def raises(a):
        raise TypeError("the reference cannot run it")

    for f in (stageable, reads_values):
        got = _reference_results(lambda f=f: f, Case, "jax", jit=jit)
        np.testing.assert_allclose(got, 2.0 * np.sin(Case.args[0]), rtol=1e-12)
    assert staged == [stageable, reads_values]
    with pytest.raises(CaseFiltered, match="jax raises TypeError"):
        _reference_results(lambda: raises, Case, "jax", jit=jit)


def test_trimming_the_cache_deletes_the_least_recently_used_programs_first(tmp_path):
    from properties import compilation_cache
    sizes = {"old": 300, "middle": 300, "new": 300}
    for age, (name, size) in enumerate(sizes.items()):
        entry = tmp_path / f"{name}-cache"
        entry.write_bytes(b"x" * size)
        (tmp_path / f"{name}-atime").write_bytes(b"t")
        when = 1_000_000 + 1000 * age
        os.utime(entry, (when, when))
    (tmp_path / "unrelated.txt").write_bytes(b"y" * 5000)  # not JAX's: never counted or deleted
    assert compilation_cache.trim(str(tmp_path), max_bytes=900) == 0
    assert compilation_cache.trim(str(tmp_path), max_bytes=650) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "middle-atime", "middle-cache", "new-atime", "new-cache", "unrelated.txt"]
    os.utime(tmp_path / "middle-cache", (2_000_000, 1_001_000))  # read since: used recently
    assert compilation_cache.trim(str(tmp_path), max_bytes=300) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "middle-atime", "middle-cache", "unrelated.txt"]
