"""The harness on the oldest JAX release of pyproject's range for backends (JAX 0.6.0):
every law runs on it from a fresh virtual environment that has JAX 0.6.0 and the harness'
own dependencies but not impl (the harness never imports impl for another backend).

Nightly: it installs JAX 0.6.0 from the package index into a folder of the user's cache
(kept between runs) and runs the quick profile, about four minutes on two cores."""
import json
import os
import pathlib
import subprocess
import sys
import venv

import pytest

from properties.laws import LAWS

OLDEST_JAX = "0.6.0"
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _environment():
    cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))
    folder = cache / "impl-properties" / f"venv-jax-{OLDEST_JAX}"
    python = folder / "bin" / "python"
    if not python.exists():
        venv.create(folder, with_pip=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", f"jax=={OLDEST_JAX}",
                        f"jaxlib=={OLDEST_JAX}", "numpy>=1.26", "opt_einsum>=3.3",
                        "hypothesis>=6.100", "pytest>=8", "pytest-xdist>=3.5"], check=True)
    return python


@pytest.mark.slow
def test_every_law_runs_on_the_oldest_jax(tmp_path):
    python = _environment()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "XLA", "JAX"))}
    env["PYTHONPATH"] = str(ROOT)
    run = subprocess.run([python, "-m", "properties", "--backend", "jax", "--profile", "quick",
                          "--report-dir", str(tmp_path), "--no-jax-cache"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    written = tmp_path / "properties-jax.json"
    assert written.exists(), (f"no report (exit status {run.returncode}):\n"
                              + run.stdout[-5000:] + run.stderr[-3000:])
    report = json.loads(written.read_text())
    assert report["jax_version"] == OLDEST_JAX
    assert {row["law"] for row in report["laws"]} == {law.name for law in LAWS}
    assert report["summary"]["failed"] == 0, run.stdout[-5000:]
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
