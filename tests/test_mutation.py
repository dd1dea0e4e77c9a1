"""Tests of tools.mutation: mutants are generated from impl's tables, change
impl's results, are undone afterwards, are killed by the laws, and are reported."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import impl
from properties.primitives import impl_primitives
from strategies.coverage import draw_examples
from tools import mutation

ROOT = str(Path(__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def mutants():
    return mutation.generate()


def test_mutants_cover_every_family_of_rules(mutants):
    assert len(mutants) >= 30
    families = {m.family for m in mutants}
    assert {"elementwise", "reductions", "linalg", "indexing", "collectives", "custom rules"} <= families
    assert {m.table for m in mutants} == set(mutation.TABLES)
    names = set(impl_primitives())
    assert all(m.primitive in names for m in mutants)
    assert len({m.name for m in mutants}) == len(mutants)


def test_zero_tangent_rules_get_no_jvp_mutants(mutants):
    jvp_of = {m.primitive for m in mutants if m.table == "jvp"}
    assert "eq" not in jvp_of and "floor" not in jvp_of  # defjvp_zero: nothing to get wrong
    assert {"sin", "mul", "dot_general", "reduce_sum"} <= jvp_of


def _mutant(mutants, name):
    return next(m for m in mutants if m.name == name)


def test_a_jvp_mutant_scales_the_tangent_and_is_undone(mutants):
    m = _mutant(mutants, "jvp:sin:scale")
    x = np.float64(0.3)
    with mutation.applied(m):
        _, t = impl.jvp(impl.numpy.sin, (x,), (1.0,))
    np.testing.assert_allclose(float(t), 1.5 * np.cos(0.3))
    _, t = impl.jvp(impl.numpy.sin, (x,), (1.0,))
    np.testing.assert_allclose(float(t), np.cos(0.3))


def test_a_batching_mutant_shifts_the_batch(mutants):
    m = _mutant(mutants, "batching:sin:shift_batch")
    x = np.array([0.1, 0.2, 0.3])
    with mutation.applied(m):
        got = np.asarray(impl.vmap(impl.numpy.sin)(x))
    np.testing.assert_allclose(got, np.sin(np.roll(x, -1)))
    np.testing.assert_allclose(np.asarray(impl.vmap(impl.numpy.sin)(x)), np.sin(x))


def test_a_transpose_mutant_drops_a_cotangent(mutants):
    m = _mutant(mutants, "transpose:mul:drop_first")
    f = lambda x: x * np.float64(3.0)  # noqa: E731
    with mutation.applied(m):
        (ct,) = impl.vjp(f, np.float64(1.0))[1](np.float64(1.0))
    assert float(ct) == 0.0
    (ct,) = impl.vjp(f, np.float64(1.0))[1](np.float64(1.0))
    assert float(ct) == 3.0


def test_an_axis_mutant_of_a_transpose_rule_moves_the_axis(mutants):
    # the operands of a transpose rule are UndefinedPrimal: their rank still counts
    m = _mutant(mutants, "transpose:concatenate:axis_off_by_one")
    f = lambda a, b: impl.numpy.concatenate([a, b], axis=0)  # noqa: E731
    a, b, ct = np.ones((2, 2)), np.ones((2, 2)), np.arange(8.0).reshape(4, 2)
    with mutation.applied(m), pytest.raises(Exception):   # slicing ct along axis 1 cannot fit
        impl.vjp(f, a, b)[1](ct)
    ca, cb = impl.vjp(f, a, b)[1](ct)
    np.testing.assert_array_equal(np.asarray(ca), ct[:2])


@pytest.fixture(scope="module")
def cov():
    return mutation.coverage(per_source=2)


def test_focus_reaches_the_primitive(cov):
    focus = mutation.focus_for("sin", cov)
    assert "sin" in focus["ops"]
    focus = mutation.focus_for("psum", cov)
    assert focus["named"] and "psum" in focus["named"]


def test_a_wrapper_primitive_is_focused_on_its_wrapping_law(cov):
    """chunk_map and psum_unmapped are bound by what a law wraps around programs of any op
    (vmap's chunk_size, grad's reduce_axes): their focus is that wrapper alone, so the laws
    whose programs never bind them do not run; programs of any op are drawn for it."""
    from properties import cases
    assert mutation.focus_for("chunk_map", cov) == {"ops": None, "named": None, "control": None,
                                                    "families": ["chunked"]}
    assert mutation.focus_for("psum_unmapped", cov)["families"] == ["reduce_axes"]
    assert "chunked" not in mutation.focus_for("sin", cov)["families"]
    with cases.focus(**mutation.focus_for("chunk_map", cov)):
        with pytest.raises(cases.Irrelevant):
            cases.vmaps()
        drawn = draw_examples(cases.chunked_vmaps(), 6, random.Random(0))
    assert len({op for c in drawn for op in c.program.ops}) > 1   # not one op's programs
    with cases.focus(ops=("sin",)):
        drawn = draw_examples(cases.chunked_vmaps(), 4, random.Random(0))
    assert {op for c in drawn for op in c.program.ops} <= {"sin"}


def test_a_primitive_bound_only_in_derivatives_gets_the_differentiating_laws_first(cov):
    """add_any is bound only in derivative programs: the laws that vmap without
    differentiating cannot bind it, so its batching mutants try those that differentiate
    first (the same laws run, in another order)."""
    assert mutation.derivative_only("add_any", cov) and not mutation.derivative_only("sin", cov)
    plain = [law.name for law in mutation.laws_for("batching")]
    first = [law.name for law in mutation.laws_for("batching", derivative_only=True)]
    assert sorted(plain) == sorted(first)
    assert plain.index("vmap_matches_loop") < plain.index("vmap_grad_matches_loop")
    assert first.index("vmap_grad_matches_loop") < first.index("vmap_matches_loop")


def test_report_lists_survivors_with_reasons(tmp_path):
    results = [
        {"mutant": "jvp:sin:scale", "table": "jvp", "primitive": "sin", "operator": "scale",
         "family": "elementwise", "killed": True, "by": "grad_matches_jvp", "kind": "law", "message": "",
         "laws_run": ["grad_matches_jvp"], "seconds": 1.0},
        {"mutant": "batching:neg:move_batch_axis", "table": "batching", "primitive": "neg",
         "operator": "move_batch_axis", "family": "elementwise", "killed": False, "by": None, "kind": None,
         "message": "", "laws_run": ["vmap_matches_loop"], "seconds": 2.0},
    ]
    json_path, md_path = mutation.report(results, str(tmp_path))
    data = json.loads(Path(json_path).read_text())
    assert data["mutants"] == 2 and data["killed"] == 1
    (survivor,) = data["survivors"]
    assert set(survivor) == {"mutant", "rule", "why"} and survivor["mutant"] == "batching:neg:move_batch_axis"
    assert "vmap_matches_loop" in survivor["why"]
    assert "1 of 2 mutants killed" in Path(md_path).read_text()


def test_a_run_cut_short_reports_the_kill_rate_with_its_interval(tmp_path):
    r = {"table": "jvp", "primitive": "sin", "operator": "scale", "family": "elementwise", "by": None,
         "kind": None, "message": "", "laws_run": ["x"], "seconds": 1.0}
    results = [dict(r, mutant=f"jvp:p{i}:scale", killed=i < 8) for i in range(10)]
    json_path, md_path = mutation.report(results, str(tmp_path), total=100, planned=100)
    data = json.loads(Path(json_path).read_text())
    lo, hi = data["kill_rate_ci95"]
    # Wilson interval of 8/10 (z = 1.96): centre 0.7167, half-width 0.2266
    assert abs(lo - 0.4902) < 1e-3 and abs(hi - 0.9433) < 1e-3
    assert "uniform random sample of 10 of the 100" in Path(md_path).read_text()
    json_path, _ = mutation.report(results, str(tmp_path), total=100, planned=10)
    assert json.loads(Path(json_path).read_text())["kill_rate_ci95"] is None  # the whole plan ran


def test_equivalent_survivors_are_counted_apart(tmp_path):
    equivalent = sorted(mutation.EQUIVALENT)[0]
    table, prim, op = equivalent.split(":")
    base = {"family": "f", "by": None, "kind": None, "message": "", "laws_run": [], "seconds": 0.0}
    results = [dict(base, mutant=equivalent, table=table, primitive=prim, operator=op, killed=False),
               dict(base, mutant="jvp:sin:scale", table="jvp", primitive="sin", operator="scale", killed=True),
               dict(base, mutant="jvp:cos:scale", table="jvp", primitive="cos", operator="scale", killed=False)]
    json_path, md_path = mutation.report(results, str(tmp_path))
    data = json.loads(Path(json_path).read_text())
    assert data["equivalent"] == 1 and data["kill_rate_non_equivalent"] == 0.5
    assert "1 of the 2 others were killed (50.0%)" in Path(md_path).read_text()
    why = {s["mutant"]: s["why"] for s in data["survivors"]}
    assert why[equivalent] == mutation.EQUIVALENT[equivalent]


def test_a_program_derived_under_a_mutant_does_not_outlive_it(mutants):
    """The true rule's run after a mutant's (as run_one does for each case) computes the
    true derivative: nothing derived under the wrong rule is reused (without
    impl.clear_caches() the jitted function's cached jvp program gives 1.5 x the derivative)."""
    f = impl.jit(lambda x: impl.numpy.sin(x) * 2.0)
    x = np.float64(0.3)
    with mutation.applied(_mutant(mutants, "jvp:sin:scale")):
        np.testing.assert_allclose(float(impl.grad(f)(x)), 1.5 * 2.0 * np.cos(0.3))
    mutation.forget_derived_programs()
    np.testing.assert_allclose(float(impl.grad(f)(x)), 2.0 * np.cos(0.3))


def test_operand_counts_come_from_the_primitive_declarations():
    from impl.primitives._define import operand_counts
    assert operand_counts["sin"] == 1 and operand_counts["mul"] == 2
    assert operand_counts["concatenate"] is None   # any number of operands
    assert set(impl_primitives()) <= set(operand_counts)


def test_sample_spreads_over_families(mutants, cov):
    chosen = mutation._sample(mutants, 8, seed=0, cov=cov)
    assert len(chosen) == 8 and len({m.family for m in chosen}) >= 4
    assert chosen == mutation._sample(mutants, 8, seed=0, cov=cov)


@pytest.mark.parametrize("args, message", [
    (["--sample", "0"], "--sample must be at least 1"),
    (["-n", "0"], "-n must be at least 1"),
    (["--mutant", "jvp:nope:scale"], "unknown mutants"),
])
def test_cli_refuses_bad_input(args, message):
    out = subprocess.run([sys.executable, "-m", "tools.mutation", *args], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode != 0 and message in out.stderr


def test_unary_primitives_get_no_swap_mutants(mutants):
    swapped = {m.primitive for m in mutants if m.operator == "swap"}
    assert {"mul", "add", "dot_general"} <= swapped
    assert not {"sin", "cos", "neg", "exp"} & swapped  # one operand: a swap would be a no-op


def _run_cli(tmp_path, *args):
    out = subprocess.run([sys.executable, "-m", "tools.mutation", "--report-dir", str(tmp_path), *args],
                         capture_output=True, text=True, cwd=ROOT, timeout=8 * 3600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads((tmp_path / "mutation.json").read_text())


#: CI's mutants: one per rule table of a seed-0 sample, each killed within seconds in the
#: reference runs -- a regression check that the laws still kill them; the kill rate itself
#: comes from the sampled and full runs (docs/properties.md), not from CI.
CI_MUTANTS = ("jvp:squeeze:drop_first", "batching:cumprod:shift_batch", "transpose:transpose:scale")


def test_ci_mutants_are_killed_by_the_laws_alone(tmp_path):
    """CI's mutation run: impl's own rules made wrong, each in a worker subprocess; the
    laws (never the differential comparison with JAX) must kill every one (the whole
    run's target, 90%, is checked by the slow test)."""
    cache = tmp_path / "jax-cache"
    data = _run_cli(tmp_path, *[a for m in CI_MUTANTS for a in ("--mutant", m)], "-n", "2", "--profile", "quick",
                    "--jax-cache", str(cache))
    assert data["mutants"] == len(CI_MUTANTS) and len(data["results"]) == len(CI_MUTANTS)
    assert all(not r["by"] or not r["by"].startswith("differential") for r in data["results"])
    assert data["killed"] == len(CI_MUTANTS), f"mutants no law kills any more: {data['survivors']}"
    for r in data["results"]:   # the failure of the killing case, and each law's time
        assert (r["message"].startswith(f"AssertionError: law {r['by']} failed") if r["kind"] == "law"
                else r["message"])
        assert len(r["law_seconds"]) == len(r["laws_run"])
    assert any(cache.iterdir())   # the workers wrote their compiled programs there
    assert f"{data['killed']} of {len(CI_MUTANTS)} mutants killed" in (tmp_path / "mutation.md").read_text()


@pytest.mark.slow
def test_the_whole_mutation_run_kills_nine_in_ten(tmp_path):
    """Nightly: every mutant (about 6 hours on 2 loaded cores)."""
    data = _run_cli(tmp_path, "-n", "2", "--profile", "quick")
    assert data["mutants"] >= 30 and data["killed"] >= 0.9 * data["mutants"]
    assert all(s["why"] for s in data["survivors"])


def test_analysed_survivors_name_generated_mutants(mutants):
    names = {m.name for m in mutants}
    assert set(mutation.EQUIVALENT) <= names and set(mutation.OPEN_GAPS) <= names
    assert not set(mutation.EQUIVALENT) & set(mutation.OPEN_GAPS)
