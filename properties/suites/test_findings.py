"""Findings a maintainer can act on: every distinct failure with its message and
program, whose it is (replayed on the reference), hunts that write a script per
group of failures, stopped runs that lose nothing, shared example databases and
the coverage of the strategies' ``reach: `` events."""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from properties import findings
from properties.backends import load_backend
from properties.broken import broken
from properties.laws import LAWS, Law, get
from properties.report import build, law_row, render_markdown
from properties.runner import RECORDS, run_law

SUITES = pathlib.Path(__file__).resolve().parent
ROOT = str(SUITES.parents[1])
FEW = settings(max_examples=5, deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))


@dataclass
class NumberCase:
    """A case that is one number (pickles, prints as a program)."""
    x: int

    def describe(self):
        return f"x={self.x}"

    def source(self):
        return f"x = {self.x}\n"


def numbers():
    return st.integers(-1000, 1000).map(NumberCase)


def two_bugs(backend, case):
    """Fails in two distinct ways: a wrong value above 10, a crash below -10."""
    if case.x > 10:
        raise AssertionError(f"value {case.x} too large")
    if case.x < -10:
        raise TypeError(f"cannot handle {case.x}")


def test_each_distinct_failure_is_reported_with_its_message_and_program():
    law = Law(two_bugs, numbers)
    s = settings(max_examples=200, deadline=None, database=None, derandomize=True,
                 report_multiple_bugs=True, suppress_health_check=list(HealthCheck))
    with pytest.raises(BaseExceptionGroup):
        run_law(law, load_backend("jax"), settings=s, nodeid="x::test_two_bugs")
    record = RECORDS[-1]
    messages = sorted(f["message"] for f in record.failures)
    # shrunk: the smallest failing numbers are 11 and -11
    assert messages == ["AssertionError: law two_bugs failed: value 11 too large",
                        "TypeError: cannot handle -11"], messages
    assert sorted(f["program"] for f in record.failures) == ["x = -11\n", "x = 11\n"]
    assert {f["cause"]["exception"] for f in record.failures} == {"AssertionError", "TypeError"}
    md = render_markdown(build([law_row("x::test_two_bugs", record.as_dict(), "failed")], {},
                               backend="jax", profile="quick"))
    assert "2 distinct failures" in md and "value 11 too large" in md and "cannot handle -11" in md
    assert "x = 11" in md and "x = -11" in md


def test_a_wrapper_of_jax_inherits_jax_bugs_instead_of_failing_on_them(tmp_path, monkeypatch):
    """A module that re-exports JAX fails where JAX filters a known bug of its own; the
    replay on JAX reports that as inherited, and the law passes."""
    from strategies.named import NamedAxisCase, Step
    (tmp_path / "jax_again.py").write_text(
        '"""JAX under another name."""\nfrom jax import *  # noqa\nfrom jax import lax, numpy  # noqa\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    wrapper = load_backend("jax_again")

    def case(*steps):
        return NamedAxisCase(names=("i",), sizes=(2,), in_axes=(None,), out_axes=(0,),
                             steps=steps, x=np.arange(2, dtype=np.float32), elem_shape=(2,))
    # all_to_all of a value unbatched over its axis: JAX's bug (filtered on JAX)
    known_bug = case(Step(op="axis_index", names=("i",), params=()),
                     Step(op="all_to_all", names=("i",),
                          params=(("split", 0), ("concat", 0), ("tiled", False))))
    fine = case(Step(op="psum", names=("i",), params=()))
    law = get("named_collectives_member_derivatives_match_reference")
    with pytest.raises(AssertionError):
        law(wrapper, known_bug)   # the wrapper has JAX's bug
    record = run_law(law, wrapper, st.just(fine), settings=FEW, examples=[known_bug],
                     reference=load_backend("jax"))
    assert record.outcome == "passed" and record.failed == 0
    (inherited,) = record.inherited.values()
    assert inherited["whose"] == "inherited" and "shape (2, 2, 2), expected (2, 2)" in inherited["message"]
    assert "known JAX bug: all_to_all" in inherited["reference_result"]
    assert record.events["inherited from jax"] == 1


def test_the_known_jax_bug_filters_apply_to_backends_built_on_jax(tmp_path, monkeypatch):
    from properties.broken import Wrapped
    from properties.laws.jax_bugs import built_on_jax
    (tmp_path / "declared_jax.py").write_text('from jax import *  # noqa\n__built_on__ = "jax"\n')
    (tmp_path / "undeclared_jax.py").write_text('from jax import *  # noqa\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    jax = load_backend("jax")
    assert built_on_jax(jax) and built_on_jax(Wrapped(jax, "no_breaks", {}))
    assert built_on_jax(load_backend("declared_jax"))
    assert not built_on_jax(load_backend("undeclared_jax"))  # inherits through the replay


def test_the_backends_own_failure_says_the_reference_passes():
    law, bad = get("jit_matches_eager"), broken("jax", "jit_perturb")
    s = settings(FEW, phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False)
    with pytest.raises(AssertionError):
        run_law(law, bad, settings=s, reference=load_backend("jax"))
    (failure,) = RECORDS[-1].failures
    assert failure["whose"] == "own" and failure["reference_result"] == "the law holds"
    assert failure["cause"]["check"].startswith("jit.jit_matches_eager:")


def test_failures_group_by_cause_keeping_the_smallest_program():
    def entry(program, law="l", exc="TypeError"):
        return {"program": program, "whose": "own", "message": "m",
                "cause": {"law": law, "exception": exc, "primitives": ["sin"], "check": "a.b:1"}}
    groups = findings.group([entry("xxxx"), entry("xx"), entry("xxx"), entry("y", exc="ValueError")])
    assert sorted((g["program"], g["count"]) for g in groups.values()) == [("xx", 3), ("y", 1)]


def test_coverage_counts_the_strategies_reach_events_per_law():
    def tagged(x):
        event(f"reach: parity {x % 2}")
        event("not a reach event")
        return NumberCase(x)
    law = Law(two_bugs, lambda: st.integers(0, 9).map(tagged))
    record = run_law(law, load_backend("jax"), settings=settings(FEW, max_examples=20))
    reach = {k: v for k, v in record.events.items() if k.startswith("reach: ")}
    assert set(reach) == {"reach: parity 0", "reach: parity 1"}
    assert sum(reach.values()) == record.examples == record.events["checked"]
    md = render_markdown(build([law_row("x::test_two_bugs", record.as_dict(), "passed")], {},
                               backend="jax", profile="quick"))
    assert "## Coverage" in md and "`reach: parity 0`" in md and "not a reach event" not in md


def test_a_shared_database_folder_replays_another_runs_failure(tmp_path):
    """Two runs (two machines) on one database folder: the second fails on its first case."""
    law, bad = get("jit_matches_eager"), broken("jax", "jit_perturb")
    first = settings(max_examples=10, database=DirectoryBasedExampleDatabase(str(tmp_path)),
                     deadline=None, suppress_health_check=list(HealthCheck), derandomize=False,
                     phases=[Phase.generate], report_multiple_bugs=False)
    with pytest.raises(AssertionError):
        run_law(law, bad, settings=first)
    assert RECORDS[-1].first_failure >= 1 and os.listdir(tmp_path)
    second = settings(first, database=DirectoryBasedExampleDatabase(str(tmp_path)),
                      phases=[Phase.reuse])   # replays the database only: draws nothing new
    with pytest.raises(AssertionError):
        run_law(law, bad, settings=second)
    assert RECORDS[-1].first_failure == 1


# ---------------------------------------------------------------------------
# the CLI in a subprocess: stopped runs, hunts, repro scripts, shared databases


def test_cli_options_of_hunts_and_databases():
    import importlib
    cli = importlib.import_module("properties.__main__")
    hunt = cli.parse(["--hunt", "2", "--database", "redis://localhost:6379/0"])
    assert hunt.profile == "thorough" and cli.parse([]).profile == "default"
    cmd = cli.command(hunt)
    assert cmd[cmd.index("--properties-db") + 1] == "redis://localhost:6379/0"
    assert cmd[cmd.index("--reference") + 1] == "jax"
    for bad in (["--hunt", "1", "--time-limit", "2"], ["--hunt-seed", "3"], ["--hunt", "0"]):
        with pytest.raises(SystemExit):
            cli.parse(bad)


def _env(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("PROPERTIES_REPORT_DIR", None)
    return env


def _stop_after_laws(tmp_path, signum, laws=3, cli=True):
    """Run the CLI, send ``signum`` once ``laws`` laws have finished; (status, output, report).
    The backend lacks every numpy/lax function, so each law is skipped after a few cases
    and nothing compiles: the run is cheap, and long enough to stop in its middle."""
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "bare_jax.py").write_text(
        '"""JAX\'s transformations with an empty numpy and lax."""\n'
        "import types\nfrom jax import *  # noqa\n"
        "numpy = types.SimpleNamespace()\nlax = types.SimpleNamespace()\n")
    env = _env(tmp_path)
    env["PYTHONPATH"] += os.pathsep + str(tmp_path / "modules")
    reports = tmp_path / "reports"
    cmd = ["-m", "properties", "--report-dir", str(reports)] if cli else [
        "-m", "pytest", str(SUITES / "test_vmap_laws.py"), str(SUITES / "test_ad_laws.py"),
        "-p", "properties.plugin", "-p", "no:cacheprovider", "--properties-progress",
        "--properties-report", str(reports)]
    proc = subprocess.Popen(
        [sys.executable, *cmd, "--backend", "bare_jax", "--profile", "quick"], cwd=tmp_path,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    for line in proc.stdout:
        out.append(line)
        if line.startswith(f"[law {laws:>2}/"):
            proc.send_signal(signum)
            break
    out += proc.stdout.readlines()
    status = proc.wait(timeout=300)
    report = json.loads((reports / "properties-bare_jax.json").read_text())
    return status, "".join(out), report


@pytest.mark.parametrize("signum, cli", [
    (signal.SIGINT, True), pytest.param(signal.SIGTERM, True, marks=pytest.mark.slow),
    pytest.param(signal.SIGTERM, False, marks=pytest.mark.slow)], ids=["cli-SIGINT",
                                                                    "cli-SIGTERM", "pytest-SIGTERM"])
def test_a_stopped_run_writes_the_report_of_what_it_checked(tmp_path, signum, cli):
    status, out, report = _stop_after_laws(tmp_path, signum, cli=cli)
    assert status == 2, out
    assert report["interrupted"] is True
    assert sum(r["outcome"] == "skipped" for r in report["laws"]) >= 3, report["laws"]
    assert len(report["laws"]) < (len(LAWS) - 8 if cli else 25)  # stopped in the middle
    assert "Traceback" not in out, out
    assert "stopped (" in out or not cli


def _hunt(tmp_path, minutes, *options, backend="jax+vmap_slice0", law="vmap_matches_loop",
          reports="reports"):
    return subprocess.run(
        [sys.executable, "-m", "properties", "--backend", backend, "--hunt", str(minutes),
         "-k", law, "--report-dir", str(tmp_path / reports), *options],
        cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=900)


def _hunt_groups(tmp_path, reports="reports"):
    return json.loads((tmp_path / reports / "hunt.json").read_text())["groups"]


def _replayed_first(tmp_path, reports):
    """Whether the hunt's law failed on its very first example (in its first round)."""
    round_dir = tmp_path / reports / "hunt" / "round-1"
    (row,) = json.loads(next(round_dir.glob("*.json")).read_text())["laws"]
    return row["first_failure"] == 1


@pytest.mark.slow
def test_a_hunt_writes_a_script_that_fails_while_the_bug_lives(tmp_path):
    out = _hunt(tmp_path, 1, "--database", str(tmp_path / "db"))
    assert out.returncode == 1, out.stdout + out.stderr
    groups = _hunt_groups(tmp_path)
    assert groups and all(g["whose"] == "own" and g["cause"]["law"] == "vmap_matches_loop"
                          for g in groups)
    script = groups[0]["script"]
    run = subprocess.run([sys.executable, script], capture_output=True, text=True,
                         env=_env(tmp_path), timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "jax 0.10" in run.stdout and "expected:" in run.stdout and "the bug is present" in run.stdout


@pytest.mark.slow
def test_a_hunt_on_jax_reports_no_group_of_its_own(tmp_path):
    out = _hunt(tmp_path, 0.5, backend="jax", law="named_collectives_member_derivatives")
    assert out.returncode in (0, 1), out.stdout + out.stderr
    groups = _hunt_groups(tmp_path)
    # JAX's known bugs are filtered; any group left is a finding to confirm or fix
    assert all(g["group"] for g in groups), groups


@pytest.mark.slow
def test_hunts_sharing_a_database_folder_replay_each_others_failures(tmp_path):
    db = str(tmp_path / "shared")
    assert _hunt(tmp_path, 1, "--database", db, reports="first").returncode == 1
    assert _hunt(tmp_path, 1, "--database", db, reports="second").returncode == 1
    assert _replayed_first(tmp_path, "second")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_hunts_sharing_a_redis_database_replay_each_others_failures(tmp_path):
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed")
    pytest.importorskip("redis")
    port = _free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        db = f"redis://127.0.0.1:{port}/0"
        assert _hunt(tmp_path, 1, "--database", db, reports="first").returncode == 1
        assert _hunt(tmp_path, 1, "--database", db, reports="second").returncode == 1
        assert _replayed_first(tmp_path, "second")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
