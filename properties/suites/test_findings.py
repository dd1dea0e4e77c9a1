"""Findings a maintainer can act on: every distinct failure with its message and
program, whose it is (replayed on the reference), hunts that write a script per
group of failures, stopped runs that lose nothing, shared example databases and
the coverage of the strategies' ``reach: `` events."""
import ast
import contextlib
import io
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
from hypothesis import HealthCheck, Phase, event, find, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from properties import findings, repro
from properties.backends import LawSkipped, load_backend
from properties.broken import broken, find_counterexample, load
from properties.laws import LAWS, Breaks, BrokenRule, CaseFiltered, Law, get
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


def test_crashes_group_by_their_message_and_wrong_values_by_their_primitives():
    def entry(primitives, exc=TypeError("reshape of a Zero at 0x7f12 position 0")):
        return {"program": "p", "whose": "own", "message": findings.message(exc),
                "cause": {"law": "l", "exception": type(exc).__name__, "primitives": primitives,
                          "check": "a.b:1", "crash": findings.crash_signature(exc)}}
    crashes = findings.group([entry(["clz", "reduce"]), entry(["shift_left", "reduce"]),
                              entry(["reduce"], TypeError("reshape of a Zero at 0x7f99 position 1"))])
    assert [g["count"] for g in crashes.values()] == [3]
    other = findings.group([entry(["reduce"]), entry(["reduce"], TypeError("another crash"))])
    assert len(other) == 2
    wrong = AssertionError("law l failed: max error 0.5")
    assert len(findings.group([entry(["sin"], wrong), entry(["cos"], wrong)])) == 2


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
# repro scripts: standalone (the backend and NumPy only), failing while the bug lives

#: packages a standalone script must not import
HARNESS = ("properties", "strategies", "hypothesis", "tests", "pytest")


def _imports(text):
    """The modules a script's statements import (at any depth)."""
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            out.add("." * node.level + (node.module or ""))
    return out


def assert_standalone(text, backend_module="jax"):
    """The script imports the backend, NumPy and the standard library only."""
    imported = _imports(text)
    tops = {m.split(".")[0] for m in imported}
    assert backend_module in tops and "numpy" in tops, imported
    assert not any(m.startswith(".") for m in imported), imported
    assert not tops & set(HARNESS), imported
    others = tops - {backend_module, "numpy", "__future__"}
    assert others <= set(sys.stdlib_module_names) and "pickle" not in others, others
    assert "import_module" not in text and "__import__" not in text   # no import by name


def _script_of(law_name, backend, cases=None):
    """(script, case, loaded backend): the script of the first case on which the law fails
    on ``backend`` (a name properties.broken.load takes)."""
    law, bad = get(law_name), load(backend)
    found = find_counterexample(law, bad, cases, max_examples=30)
    assert found is not None, f"{law_name} holds on {backend}"
    case, exc = found
    e = findings.entry(exc, law_name, case)
    return repro.standalone_script(law, case, backend, e, load_backend("jax")), case, bad


def _outcome_on(law_name, backend, case):
    """1 when the law fails on ``case`` with ``backend`` (its own verdict, in the harness), else 0."""
    try:
        get(law_name)(backend, case)
    except (CaseFiltered, LawSkipped):
        return 0
    except Exception:  # any failure of the law, a crash included
        return 1
    return 0


def test_a_repro_script_imports_only_the_backend_and_numpy_and_fails_while_the_bug_lives():
    text, case, bad = _script_of("vmap_matches_loop", "jax+vmap_slice0")
    assert_standalone(text)
    status, out = repro.run_script(text, bad)
    assert status == 1, out
    assert "python 3" in out and "numpy " in out and "jax 0.10" in out
    assert "expected: vmap(f, in_axes, out_axes) equals" in out and "actual: vmap(f) vs loop" in out
    assert "the bug is present" in out
    jax = load_backend("jax")
    assert _outcome_on("vmap_matches_loop", jax, case) == 0   # the law holds on JAX ...
    status, out = repro.run_script(text, jax)                 # ... and so does the script
    assert status == 0 and "the bug is fixed" in out, out
    # for another backend module the script imports that one, as ``jax``
    impl_text = repro.standalone_script(get("vmap_matches_loop"), case, "impl")
    assert_standalone(impl_text, "impl") and "import impl as jax" in impl_text


def _clean_run(tmp_path, name, text):
    """Run a script as a user would: its own interpreter, isolated (-I: no PYTHONPATH, no
    user site), from an empty folder -- the harness is not importable there."""
    path = tmp_path / name
    path.write_text(text)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-I", str(path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_repro_script_runs_in_a_clean_interpreter(tmp_path):
    """On plain JAX: a custom rule twice the derivative claimed true (the law's broken input)
    gives a script exiting 1; a program on which jit_matches_eager holds, one exiting 0."""
    law = get("custom_wrapper_true_rule_matches_finite_differences")
    (broken_rule,) = [n for n in law.negatives if isinstance(n, BrokenRule)]
    text, case, jax = _script_of(law.name, "jax", broken_rule.cases())
    assert_standalone(text)
    assert _outcome_on(law.name, jax, case) == 1
    run = _clean_run(tmp_path, "bug.py", text)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "vs float64 finite differences" in run.stdout and "the bug is present" in run.stdout

    holds = get("jit_matches_eager")
    case = find(holds.cases(), lambda c: True, settings=settings(FEW, max_examples=1))
    assert _outcome_on(holds.name, jax, case) == 0
    text = repro.standalone_script(holds, case, "jax")
    assert_standalone(text)
    run = _clean_run(tmp_path, "fixed.py", text)
    assert run.returncode == 0 and "the bug is fixed" in run.stdout, run.stdout + run.stderr


def test_a_differential_laws_script_records_the_references_results():
    text, case, bad = _script_of("differential_value", "jax+numpy_perturbed")
    assert_standalone(text)
    (want,) = [line[len("WANT = "):] for line in text.splitlines() if line.startswith("WANT = ")]
    np.testing.assert_array_equal(eval(want, {"np": np}),
                                  get("differential_value").fn.differential_parts.side(
                                      load_backend("jax"), case))
    assert repro.run_script(text, bad)[0] == 1
    assert repro.run_script(text, load_backend("jax"))[0] == 0


def test_a_crash_on_a_valid_program_is_the_finding_of_its_script():
    law = get("stack_matches_meaning")
    (crash,) = [n for n in law.negatives if n.labels == ("jit_refuses_static_argnames",)]
    text, case, bad = _script_of(law.name, "jax+jit_refuses_static_argnames", crash.cases())
    assert_standalone(text)
    status, out = repro.run_script(text, bad)
    assert status == 1 and "raised NotImplementedError" in out, out
    assert repro.run_script(text, load_backend("jax"))[0] == 0


def test_a_law_without_a_standalone_form_gets_a_script_that_says_it_needs_the_harness():
    law, bad = get("named_collectives_match_reference"), load("jax+collectives_wrong")
    case, exc = find_counterexample(law, bad, max_examples=30)
    e = findings.entry(exc, law.name, case)
    text, standalone = repro.repro_script(e, bad.name)
    assert not standalone and "NOT STANDALONE (no standalone view of a NamedAxisCase)" in text
    scope = {"__name__": "__main__"}
    with pytest.raises(SystemExit) as stop, contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(text, "<repro>", "exec"), scope)
    assert stop.value.code == 1 and "the bug is present" in out.getvalue()


def _standalone_params():
    """Every negative test of a law that runs in this process (its break, or its broken
    rule), marked slow (nightly)."""
    return [pytest.param(law.name, n, id=f"{law.name}-{getattr(n, 'id', 'broken_rule')}",
                         marks=pytest.mark.slow)
            for law in LAWS if law.devices == 1 for n in law.negatives]


#: laws whose scripts need the harness: a NumPy reference of the strategies (named axes),
#: a feature probe (piles)
NEEDS_THE_HARNESS = {"named_collectives_match_reference", "named_collectives_jvp_matches_reference",
                     "named_collectives_vjp_matches_reference",
                     "named_extrema_derivatives_match_reference",
                     "named_collectives_member_derivatives_match_reference",
                     "pile_map_matches_loop", "pile_grad_matches_loop"}


@pytest.mark.parametrize("law_name,negative", _standalone_params())
def test_each_laws_script_reproduces_what_its_negative_test_breaks(law_name, negative):
    """The script of the case a negative test finds imports only the backend and NumPy (or,
    for the laws in NEEDS_THE_HARNESS, says it needs the harness), exits 1 on the broken
    backend, and on the unbroken one exits as the law itself decides there."""
    law = get(law_name)
    if isinstance(negative, Breaks):
        bad, name = broken("jax", *negative.labels), f"jax+{negative.id}"
        good = broken("jax", *negative.emulation) if negative.emulation else load_backend("jax")
    else:
        bad, name, good = load_backend("jax"), "jax", None
    found = find_counterexample(law, bad, negative.cases() if negative.cases else None)
    assert found is not None
    case, exc = found
    e = findings.entry(exc, law_name, case)
    text, standalone = repro.repro_script(e, name, load_backend("jax"))
    assert standalone == (law_name not in NEEDS_THE_HARNESS), text[:2000]
    if not standalone:
        return
    assert_standalone(text)
    status, out = repro.run_script(text, bad)
    assert status == 1, out
    if good is not None:
        assert repro.run_script(text, good)[0] == _outcome_on(law_name, good, case), out


def test_reports_list_what_the_backend_declares_unsupported(tmp_path, monkeypatch):
    from properties.plugin import _declared_unsupported
    (tmp_path / "declaring_jax.py").write_text(
        "from jax import *  # noqa\nfrom jax import lax, numpy  # noqa\n"
        "UNSUPPORTED_FEATURES = {'param jit.donate_argnums': 'buffers are never donated'}\n")
    (tmp_path / "plain_jax.py").write_text("from jax import *  # noqa\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, declared, shown in [
            ("declaring_jax", {"param jit.donate_argnums": "buffers are never donated"},
             "| `param jit.donate_argnums` | buffers are never donated |"),
            ("plain_jax", {}, "`plain_jax` declares no feature unsupported"),
            ("no_such_module", None, "could not be read")]:
        assert _declared_unsupported(name) == declared
        data = build([], {}, backend=name, profile="quick", declared_unsupported=declared)
        assert json.loads(json.dumps(data))["declared_unsupported"] == declared
        md = render_markdown(data)
        assert "## Declared unsupported" in md and shown in md, md


# ---------------------------------------------------------------------------
# the CLI in a subprocess: stopped runs, hunts, repro scripts, shared databases


def test_a_hunt_shares_its_time_among_the_rounds_of_a_pass():
    """Each round of a pass over the laws gets an equal share of the time left, so every law
    is reached within the hunt; a round that ends early leaves its time to the others."""
    from properties.hunt import MIN_ROUND_SECONDS, round_seconds
    assert round_seconds(3600.0, 1, 12) == 300.0
    assert round_seconds(3300.0, 2, 12) == 300.0
    assert round_seconds(1200.0, 12, 12) == 1200.0     # the pass' last round: all that is left
    assert round_seconds(3000.0, 13, 12) == 250.0       # a new pass
    assert round_seconds(60.0, 1, 12) == MIN_ROUND_SECONDS
    assert round_seconds(5.0, 1, 12) == 5.0             # never past the hunt's end


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
    assert groups[0]["standalone"]
    assert_standalone(pathlib.Path(script).read_text())
    # the break exists in the harness only: run there, the script finds it ...
    run = subprocess.run([sys.executable, "-m", "properties.repro", script], capture_output=True,
                         text=True, env=_env(tmp_path), timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "jax 0.10" in run.stdout and "expected:" in run.stdout and "the bug is present" in run.stdout
    # ... run plainly, it checks plain JAX, where the law holds
    run = _clean_run(tmp_path, "plain.py", pathlib.Path(script).read_text())
    assert run.returncode == 0, run.stdout + run.stderr


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
