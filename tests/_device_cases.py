"""Running a file of `case_*` functions in a subprocess with 8 host devices.

XLA's device count is fixed when JAX is first imported, and a pytest process has
imported it already, so a cases file (`tests/*_cases.py`) runs as one subprocess that
writes `{case: {ok, error, seconds}}` as JSON; its test module reports each case as one
test. Under pytest-xdist the workers share that one run through a lock file.
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

from helpers import nightly

REPO_ROOT = pathlib.Path(__file__).parent.parent


def case_names(cases_file):
    return [node.name for node in ast.parse(pathlib.Path(cases_file).read_text()).body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("case_")]


def _run_dir(tmp_path_factory):
    """A directory shared by the xdist workers of this run (and only this run)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def selected_cases(request, test_file):
    """The case names this pytest run selected (marks and -k applied) among the tests
    of `test_file`, so that cases marked slow do not run in the subprocess when they
    are deselected."""
    test_file = pathlib.Path(test_file).resolve()
    return sorted({item.callspec.params["name"] for item in request.session.items
                   if pathlib.Path(str(item.fspath)).resolve() == test_file
                   and getattr(item, "callspec", None) is not None
                   and "name" in item.callspec.params})


def run_cases_once(cases_file, tmp_path_factory, only=None):
    """The results of running `cases_file` (once per test run), or only the cases named
    in `only`."""
    cases_file = pathlib.Path(cases_file)
    out = _run_dir(tmp_path_factory) / f"{cases_file.stem}.json"
    with open(str(out) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)     # released when the file closes
        if not out.exists():
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
            command = [sys.executable, str(cases_file), "--json", str(out)]
            if only is not None:
                command += ["--only", ",".join(only)]
            proc = subprocess.run(command,
                                  env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                                  timeout=900)
            if not out.exists():
                pytest.fail(f"{cases_file.name} did not run (exit {proc.returncode}):\n"
                            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(out.read_text())


def report(results, name):
    result = results.get(name)
    assert result is not None, f"{name} was not run"
    if not result["ok"]:
        pytest.fail(f"{name} failed on 8 devices:\n{result['error']}", pytrace=False)


def selected_case_tests(cases_file, test_file, nightly_cases=()):
    """The session fixture `case_results` and the test `test_on_8_devices` (one per case,
    those in `nightly_cases` marked slow) of a test module that runs `cases_file` in a
    subprocess with only the cases its pytest run selected: assign both in the module."""
    @pytest.fixture(scope="session")
    def case_results(request, tmp_path_factory):
        return run_cases_once(cases_file, tmp_path_factory,
                              only=selected_cases(request, test_file))

    @pytest.mark.parametrize("name", [nightly(n) if n in nightly_cases else n
                                      for n in case_names(cases_file)])
    def test_on_8_devices(case_results, name):
        report(case_results, name)

    return case_results, test_on_8_devices
