"""The harness itself: skips, filters, the example database, reports, bad input."""
import json
import subprocess
import sys
import types

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from properties import tolerances
from properties.backends import Backend, LawSkipped, load_backend
from properties.broken import broken
from properties.laws import Law, discard, get
from properties.report import build, render_markdown
from properties.runner import RECORDS, run_law

ROOT = str(__import__("pathlib").Path(__file__).resolve().parents[2])
FEW = settings(max_examples=5, deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))


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


def test_a_law_that_filters_too_much_fails():
    def always_filtered(backend, case):
        discard("always")
    law = Law("always_filtered", 0, always_filtered, get("jit_matches_eager").cases)
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
    law = Law("mostly_filtered", 0, mostly_filtered, get("jit_matches_eager").cases)
    with pytest.raises(AssertionError, match="three in four"):
        run_law(law, load_backend("jax"), settings=FEW)
    assert tolerances.MAX_FILTERED_FRACTION < 0.75


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


def test_report_lists_failures_with_source():
    with pytest.raises(AssertionError):
        run_law(get("jit_matches_eager"), broken("jax", "jit_perturb"), settings=FEW,
                nodeid="x::test_jit_matches_eager")
    rec = RECORDS[-1].as_dict()
    data = build([rec], {"x::test_jit_matches_eager": ("failed", "boom")}, backend="jax+jit_perturb",
                 profile="quick")
    assert data["summary"]["failed"] == 1 and data["float64_enabled"]
    md = render_markdown(data)
    assert "jit_matches_eager" in md and "def program(backend" in md
    assert data["laws"][0]["caught_by"] == "law" and "Caught by: law." in md
    assert data["failures_caught_by"] == {"law": 1, "differential oracle (JAX)": 0}
    json.dumps(data)


def test_report_says_a_differential_failure_was_the_oracle():
    rec = {"law": "differential_value", "backend": "b", "nodeid": "x::test_differential_value",
           "examples": 1, "filtered": 0, "filtered_reasons": {}, "unsupported": 0,
           "unsupported_reasons": {}, "passed": 0, "failed": 1, "outcome": "failed",
           "reason": "law differential_value: differs", "counterexample": "", "seconds": 0.1}
    data = build([rec], {"x::test_differential_value": ("failed", "")}, backend="b", profile="quick")
    assert data["failures_caught_by"]["differential oracle (JAX)"] == 1
    assert "Caught by: differential oracle (JAX)." in render_markdown(data)


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


def test_cli_rejects_an_unknown_backend(tmp_path):
    out = subprocess.run([sys.executable, "-m", "properties", "--backend", "no_such_module_xyz",
                          "-k", "jit_matches_eager", "--report-dir", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0
    assert "cannot import backend 'no_such_module_xyz'" in out.stdout + out.stderr


def test_cases_with_ops_the_backend_lacks_make_the_law_skipped():
    jax = load_backend("jax")

    class NoTanh:
        def __getattr__(self, name):
            if name == "tanh":
                raise AttributeError(name)
            return getattr(jax.numpy._module, name)

    no_tanh = Backend("no-tanh", types.SimpleNamespace(
        numpy=NoTanh(), lax=jax.lax._module, jit=jax.jit, vmap=jax.vmap))
    s = settings(FEW, max_examples=30)
    with pytest.raises(LawSkipped, match="has no numpy.tanh"):
        run_law(get("jit_matches_eager"), no_tanh, settings=s)
    rec = RECORDS[-1]
    assert rec.outcome == "skipped" and rec.unsupported and rec.passed > 0
