"""The harness itself: skips, filters, the example database, reports, the CLI, bad input."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from properties import profiles, tolerances
from properties.backends import Backend, LawSkipped, load_backend
from properties.broken import broken
from properties.laws import Law, discard, get
from properties.report import build, law_row, render_markdown, terminal_table
from properties.runner import RECORDS, run_law

SUITES = pathlib.Path(__file__).resolve().parent
ROOT = str(SUITES.parents[1])
FEW = settings(max_examples=5, deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))
NO_SHRINK = settings(FEW, phases=[Phase.explicit, Phase.generate])


def test_missing_name_is_a_skip_not_a_pass():
    jax = load_backend("jax")
    no_vmap = Backend("no-vmap", types.SimpleNamespace(numpy=jax.numpy, lax=jax.lax, jit=jax.jit))
    with pytest.raises(LawSkipped, match="has no 'vmap'"):
        run_law(get("vmap_matches_loop"), no_vmap, settings=FEW)
    assert RECORDS[-1].outcome == "skipped" and RECORDS[-1].passed == 0


def test_not_implemented_is_a_skip():
    def raises(f, *a, **k):
        raise NotImplementedError("no jit here")
    b = broken("jax")
    from properties.broken import Wrapped
    with pytest.raises(LawSkipped, match="no jit here"):
        run_law(get("jit_matches_eager"), Wrapped(b, "nojit", {"jit": raises}), settings=FEW)


# nightly: long hypothesis searches over whole laws
@pytest.mark.slow
def test_a_law_that_filters_too_much_fails():
    def always_filtered(backend, case):
        discard("always")
    law = Law(always_filtered, get("jit_matches_eager").cases)
    quiet = settings(FEW, suppress_health_check=list(HealthCheck))
    with pytest.raises(Exception) as info:  # our AssertionError or hypothesis' Unsatisfiable
        run_law(law, load_backend("jax"), settings=quiet)
    assert "filtered" in str(info.value) or "Unsatisfiable" in type(info.value).__name__


def test_half_filtered_law_fails_with_counts():
    calls = [0]

    def mostly_filtered(backend, case):
        calls[0] += 1
        if calls[0] % 4:
            discard("three in four")
    law = Law(mostly_filtered, get("jit_matches_eager").cases)
    with pytest.raises(AssertionError, match="three in four"):
        run_law(law, load_backend("jax"), settings=FEW)
    assert tolerances.MAX_FILTERED_FRACTION < 0.75


# nightly: long hypothesis searches over whole laws
@pytest.mark.slow
def test_failures_replay_first_from_the_database(tmp_path):
    s = settings(max_examples=40, database=DirectoryBasedExampleDatabase(str(tmp_path)),
                 deadline=None, suppress_health_check=list(HealthCheck))
    law, bad = get("vmap_matches_loop"), broken("jax", "vmap_slice0")
    counts = []
    for _ in range(2):
        with pytest.raises(AssertionError):
            run_law(law, bad, settings=s)
        counts.append(RECORDS[-1].examples)
    assert counts[1] <= 3 < counts[0] or counts[1] < counts[0]
    assert "def program(backend" in RECORDS[-1].counterexample


def test_report_lists_failures_with_source_and_who_caught_them():
    with pytest.raises(AssertionError):
        run_law(get("jit_matches_eager"), broken("jax", "jit_perturb"), settings=NO_SHRINK,
                nodeid="x::test_jit_matches_eager")
    jit_row = law_row("x::test_jit_matches_eager", RECORDS[-1].as_dict(), "failed", "boom")
    with pytest.raises(AssertionError):
        run_law(get("differential_value"), broken("jax", "numpy_perturbed"), settings=NO_SHRINK,
                nodeid="y::test_differential_value")
    diff_row = law_row("y::test_differential_value", RECORDS[-1].as_dict(), "failed")
    data = build([jit_row, diff_row], {"z::test_negative": ("passed", "")},
                 backend="jax+breaks", profile="quick")
    assert data["summary"]["failed"] == 2 and data["float64_enabled"]
    assert (jit_row["caught_by"], diff_row["caught_by"]) == ("law", "differential")
    md = render_markdown(data)
    assert "jit_matches_eager" in md and "def program(backend" in md
    assert "Caught by a law" in md and "Caught by the differential oracle" in md
    table = "\n".join(terminal_table(data["laws"]))
    assert "FAILED" in table and "differential" in table
    json.dumps(data)


def test_a_law_test_that_never_ran_is_still_a_row():
    row = law_row("s/test_jit_laws.py::test_jit_matches_eager", None, "failed", "fixture error")
    assert row["law"] == "jit_matches_eager" and row["topic"] == "jit" and row["examples"] == 0
    assert row["reason"] == "fixture error"


def test_a_skipped_multi_device_law_is_a_whole_row_of_the_report():
    """The multi-device process records a skipped law with its name, backend and reason only
    (properties.multidevice.run): the report still has every column for it."""
    skipped = {"law": "shard_map_matches_reference", "backend": "jax", "outcome": "skipped",
               "reason": "shard_map: the backend lacks jax.shard_map"}
    row = law_row("s/test_sharding_laws.py::test_device_laws[shard_map_matches_reference]",
                  skipped, "skipped")
    assert row["law"] == "shard_map_matches_reference" and row["examples"] == 0
    assert row["reason"] == skipped["reason"] and row["backend"] == "jax"
    data = build([row], {}, backend="jax", profile="quick")
    assert data["summary"]["skipped"] == 1 and "\n".join(terminal_table(data["laws"]))


def test_law_tests_take_the_selected_profile():
    before = profiles.active_name()
    try:
        profiles.select("quick")
        assert profiles.law_settings().max_examples == profiles.PROFILES["quick"]
        assert profiles.law_settings().derandomize
        profiles.select("thorough")
        assert profiles.law_settings().max_examples == profiles.PROFILES["thorough"]
    finally:
        profiles.select(before)
    assert settings.get_profile("properties-quick").max_examples == profiles.PROFILES["quick"]
    with pytest.raises(ValueError):
        profiles.select("fast")


def test_a_hypothesis_seed_is_not_ignored_by_the_derandomized_quick_profile():
    assert profiles.profile_settings("quick").derandomize
    seeded = profiles.profile_settings("quick", seeded=True)
    assert not seeded.derandomize and seeded.max_examples == profiles.PROFILES["quick"]
    assert seeded.database is None  # quick still keeps nothing


def test_bad_backend_and_tolerance_input():
    with pytest.raises(ValueError):
        load_backend("no_such_module_xyz")
    with pytest.raises(TypeError):
        load_backend(3)
    with pytest.raises(ValueError):
        tolerances.tolerance("loose", "float32")
    with pytest.raises(ValueError):
        tolerances.tolerance("agree", "int32")
    with pytest.raises(ValueError):
        broken("jax", "no_such_break")


def _run(cmd, cwd, **env):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, str(cwd.parent / "modules")]),
               XDG_CACHE_HOME=str(cwd.parent / "cache"), **env)
    env.pop("PROPERTIES_REPORT_DIR", None)
    return subprocess.run([sys.executable, *cmd], capture_output=True, text=True, cwd=cwd,
                          env=env)


@pytest.fixture
def elsewhere(tmp_path):
    """An empty working folder outside the project, and a folder of importable modules."""
    (tmp_path / "cwd").mkdir()
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "nonumpy.py").write_text(
        '"""JAX\'s transformations, and a numpy/lax with no functions at all."""\n'
        "import types\nfrom jax import *  # noqa\n"
        "numpy = types.SimpleNamespace()\nlax = types.SimpleNamespace()\n")
    return tmp_path / "cwd"


def test_cli_rejects_an_unknown_backend(elsewhere):
    out = _run(["-m", "properties", "--backend", "no_such_module_xyz", "-k", "jit_matches_eager",
                "--report-dir", str(elsewhere.parent / "reports")], elsewhere)
    assert out.returncode != 0
    assert "cannot import backend 'no_such_module_xyz'" in out.stdout + out.stderr


def test_cli_says_that_workers_need_xdist(monkeypatch, capsys):
    cli = importlib.import_module("properties.__main__")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "xdist" else real(name, *a))
    with pytest.raises(SystemExit):
        cli.parse(["-n", "2"])
    assert "-n 2 needs pytest-xdist" in capsys.readouterr().err
    assert cli.parse(["-n", "1"]).workers == "1"  # one process needs no xdist


def test_cli_runs_on_the_usable_cores_by_default(monkeypatch):
    cli = importlib.import_module("properties.__main__")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert cli.parse([]).workers == str(cli.DEFAULT_MAX_WORKERS)
    assert "-n" in cli.command(cli.parse([]))
    assert "-n" not in cli.command(cli.parse(["-n", "1"]))
    assert "loadfile" in cli.command(cli.parse([]))
    assert "--dist" not in cli.command(cli.parse(["--hunt", "5", "-n", "2"]))
    assert cli.parse(["--hunt", "5"]).workers == "1"
    assert cli.parse(["--hunt", "5", "-n", "2"]).workers == "2"
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert cli.parse([]).workers == "1"
    real = importlib.util.find_spec
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "xdist" else real(name, *a))
    assert cli.parse([]).workers == "1"   # without pytest-xdist: one process


def test_cli_runs_the_laws_and_self_checks_only_on_request():
    cli = importlib.import_module("properties.__main__")
    laws = cli.command(cli.parse(["--report-dir", "r"]))
    files = {os.path.basename(a) for a in laws if a.endswith(".py")}
    assert "test_ad_laws.py" in files and "test_vmap_laws.py" in files
    assert not files & {"test_negative.py", "test_harness.py", "test_checkers.py"}
    everything = cli.command(cli.parse(["--self-check", "--report-dir", "r"]))
    assert cli.SUITES in everything and not any(a.endswith("_laws.py") for a in everything)


@pytest.mark.parametrize("argv, fast", [([], True), (["--no-fast-compile"], False),
                                         (["--hunt", "5"], False),
                                         (["--hunt", "5", "--fast-compile"], True)])
def test_cli_compiles_fast_except_when_hunting(argv, fast):
    cli = importlib.import_module("properties.__main__")
    assert ("--fast-compile" in cli.command(cli.parse(argv))) is fast


def test_cli_from_another_folder_reports_a_law_nothing_supports_as_skipped(elsewhere):
    out = _run(["-m", "properties", "--backend", "nonumpy", "--profile", "quick",
                "-k", "jit_matches_eager and not negative"], elsewhere)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[law  1/1] jit_matches_eager" in out.stdout and "SKIPPED" in out.stdout
    assert list(elsewhere.iterdir()) == []  # no reports, caches or databases left here
    report = elsewhere.parent / "cache" / "impl-properties" / "reports" / "properties-nonumpy.json"
    row, = json.loads(report.read_text())["laws"]
    assert (row["law"], row["outcome"], row["passed"]) == ("jit_matches_eager", "skipped", 0)
    assert row["unsupported"] >= 1 and "has no numpy." in row["reason"]


# nightly: long hypothesis searches over whole laws
@pytest.mark.slow
def test_hypothesis_options_work_on_the_law_tests(elsewhere):
    out = _run(["-m", "pytest", str(SUITES / "test_jit_laws.py"), "-p", "properties.plugin",
                "-p", "no:cacheprovider", "--backend", "jax", "-k", "jit_matches_eager",
                "--hypothesis-profile", "properties-quick", "--hypothesis-show-statistics",
                "--hypothesis-seed", "1"], elsewhere)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "test_jit_matches_eager:" in out.stdout and "checked" in out.stdout
    assert "profile=quick" in out.stdout


# nightly: long hypothesis searches over whole laws
@pytest.mark.slow
def test_cases_with_ops_the_backend_lacks_make_the_law_skipped():
    jax = load_backend("jax")

    lacking = {"tanh", "sin", "cos", "exp", "log"}  # common in drawn programs

    class NoTranscendentals:
        def __getattr__(self, name):
            if name in lacking:
                raise AttributeError(name)
            return getattr(jax.numpy._module, name)

    partial = Backend("no-transcendentals", types.SimpleNamespace(
        numpy=NoTranscendentals(), lax=jax.lax._module, jit=jax.jit, vmap=jax.vmap,
        random=jax.random))  # programs may draw PRNG noise
    s = settings(FEW, max_examples=30)
    with pytest.raises(LawSkipped, match=r"has no numpy\.(tanh|sin|cos|exp|log)"):
        run_law(get("jit_matches_eager"), partial, settings=s)
    rec = RECORDS[-1]
    assert rec.outcome == "skipped" and rec.unsupported and rec.passed > 0


def test_the_differential_laws_compare_with_the_runs_reference():
    """``--reference`` names what the differential laws compare with: JAX holds against
    JAX, fails against a JAX whose numpy is off by 1%, and is skipped against itself."""
    import pytest

    from properties.backends import LawSkipped, load_backend
    from properties.broken import Wrapped, broken, find_counterexample
    from properties.laws import get

    law = get("differential_value")
    against_jax = Wrapped(load_backend("jax"), "unchanged", {})
    assert find_counterexample(law, against_jax, max_examples=10) is None
    against_wrong = Wrapped(load_backend("jax"), "unchanged", {})
    against_wrong.reference = broken("jax", "numpy_perturbed")
    found = find_counterexample(law, against_wrong, max_examples=10)
    assert found is not None and "vs jax+numpy_perturbed value" in str(found[1])
    itself = Wrapped(load_backend("jax"), "unchanged", {})
    itself.reference = itself
    with pytest.raises(LawSkipped):
        law(itself, find_counterexample(law, against_wrong, max_examples=10)[0])
