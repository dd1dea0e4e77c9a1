"""Sharding on 8 host devices (jit shardings, with_sharding_constraint, vmap's
spmd_axis_name, shard_map), against JAX.

XLA's device count is fixed when JAX is first imported, and this pytest process has
imported it already, so the cases (`tests/sharding_cases.py`) run in one subprocess
with 8 host devices; each `case_*` there is reported here as one test. Under
pytest-xdist the workers share that one run through a lock file.
"""
from __future__ import annotations

import ast
import fcntl
import json
import os
import pathlib
import subprocess
import sys

import pytest

CASES_FILE = pathlib.Path(__file__).with_name("sharding_cases.py")
REPO_ROOT = CASES_FILE.parent.parent
CASE_NAMES = [node.name for node in ast.parse(CASES_FILE.read_text()).body
              if isinstance(node, ast.FunctionDef) and node.name.startswith("case_")]


def _run_dir(tmp_path_factory):
    """A directory shared by the xdist workers of this run (and only this run)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def case_results(tmp_path_factory):
    out = _run_dir(tmp_path_factory) / "sharding_cases.json"
    with open(str(out) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)     # released when the file closes
        if not out.exists():
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
            proc = subprocess.run([sys.executable, str(CASES_FILE), "--json", str(out)],
                                  env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                                  timeout=900)
            if not out.exists():
                pytest.fail(f"the sharding cases did not run (exit {proc.returncode}):\n"
                            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", CASE_NAMES)
def test_on_8_devices(case_results, name):
    result = case_results.get(name)
    assert result is not None, f"{name} was not run"
    if not result["ok"]:
        pytest.fail(f"{name} failed on 8 devices:\n{result['error']}", pytrace=False)
