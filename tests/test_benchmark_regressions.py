"""impl/JAX regressions in an asv history: a planted step in the ratio is flagged
at its commit (and fails the command on request); machine drift that moves
impl and JAX together, an improvement and a one-commit spike are not."""
import json
import os
import random
import subprocess
import sys

import pytest

pytest.importorskip("asv")

from benchmarks import history, plot, regressions  # noqa: E402

MACHINE = "box-cpu"
PARAMS = [["'impl'", "'jax'"], ["'cpu'", "'gpu'"]]
BENCHMARKS = {
    "bench_x.Dispatch.time_call": {"unit": "seconds", "base": 1e-5},
    "bench_x.Tracing.time_trace": {"unit": "seconds", "base": 1e-3},
    "bench_x.Laws.track_rate": {"unit": "examples/s", "base": 50.0},
}
COMMITS = [f"{i:x}" * 40 for i in range(1, 9)]  # 8 commits, oldest first


def _write_result(results_dir, commit, n, results):
    """The asv result file of ``commit``, the n-th measured (dated in that order)."""
    (results_dir / MACHINE / f"{commit[:8]}-existing-py3.11.json").write_text(json.dumps(
        {"commit_hash": commit, "env_name": "existing-py3.11", "date": 1000 * (n + 1),
         "params": {"machine": MACHINE, "python": "3.11"}, "python": "3.11",
         "requirements": {}, "env_vars": {}, "result_columns": ["result", "params", "version"],
         "results": results, "durations": {}, "version": 2}))


def _write_history(tmp_path, ratios, commits=COMMITS):
    """An asv results folder for ``ratios``: {benchmark: [impl/JAX per commit]}.

    Each commit's machine runs faster or slower by a common factor (load
    drift, up to 1.6x), and each value carries 2 % of its own noise: what a
    shared machine does to both backends.  Returns the asv.conf.json path."""
    rng = random.Random(0)
    results = tmp_path / "results"
    (results / MACHINE).mkdir(parents=True)
    (results / MACHINE / "machine.json").write_text(json.dumps(
        {"machine": MACHINE, "os": "Linux", "arch": "x86_64 cpu", "cpu": "c", "num_cpu": "2",
         "ram": "1 GiB", "version": 1}))
    (results / "benchmarks.json").write_text(json.dumps(
        {**{name: {"name": name, "params": PARAMS, "param_names": ["backend", "device"],
                   "type": name.rsplit(".", 1)[1].split("_")[0], "unit": b["unit"],
                   "version": "v"} for name, b in BENCHMARKS.items()}, "version": 2}))
    for n, commit in enumerate(commits):
        drift = rng.uniform(0.7, 1.6)
        data = {}
        for name, ratio in ratios.items():
            base = BENCHMARKS[name]["base"]
            jax = base * drift * rng.uniform(0.98, 1.02)
            impl = base * drift * rng.uniform(0.98, 1.02) * ratio[n]
            if BENCHMARKS[name]["unit"].endswith("/s"):  # a rate: cost is its inverse
                jax, impl = base ** 2 / jax, base ** 2 / impl
            data[name] = [[impl, None, jax, None], PARAMS, "v"]
        _write_result(results, commit, n, data)
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"version": 1, "repo": ".", "results_dir": "results",
                                  "branches": ["main"]}))
    return str(config)


FLAT = [1.2] * 8
STEP = [1.2] * 4 + [1.8] * 4  # impl 50 % slower relative to JAX from the 5th commit on


def _report(config, capsys, *extra):
    rc = history.main(["--report-only", "--config", config, "--machine", MACHINE, *extra])
    return rc, capsys.readouterr().out


def test_a_planted_step_in_the_ratio_is_flagged_at_its_commit(tmp_path, capsys):
    config = _write_history(tmp_path, {"bench_x.Dispatch.time_call": STEP,
                                       "bench_x.Tracing.time_trace": FLAT,
                                       "bench_x.Laws.track_rate": STEP})
    _, results_dir = plot.load_config(config)
    found, commits = regressions.stored_regressions(results_dir, MACHINE, "cpu", {})
    assert commits == COMMITS
    assert [(r.benchmark, r.measure, r.before, r.after) for r in found] == [
        ("bench_x.Dispatch.time_call", "impl/JAX", COMMITS[3], COMMITS[4]),
        ("bench_x.Laws.track_rate", "JAX/impl", COMMITS[3], COMMITS[4]),
    ]
    for r in found:
        assert r.level_before == pytest.approx(1.2, rel=0.05)
        assert r.level_after == pytest.approx(1.8, rel=0.05)

    rc, out = _report(config, capsys)
    assert rc == 0  # reporting alone never fails
    assert f"in {COMMITS[3][:8]}..{COMMITS[4][:8]}" in out and "Tracing" not in out
    rc, out = _report(config, capsys, "--fail-on-regression")
    assert rc == 1 and "bench_x.Dispatch.time_call: impl/JAX 1.2" in out


def test_a_step_below_the_threshold_is_not_flagged(tmp_path, capsys):
    config = _write_history(tmp_path, {"bench_x.Dispatch.time_call": STEP})
    rc, out = _report(config, capsys, "--fail-on-regression", "--threshold", "0.6")
    assert rc == 0 and out.rstrip().endswith("none")
    rc, out = _report(config, capsys, "--fail-on-regression", "--threshold", "0.4")
    assert rc == 1 and "Dispatch" in out


def test_drift_improvement_and_a_spike_that_goes_away_are_not_flagged(tmp_path, capsys):
    config = _write_history(tmp_path, {
        "bench_x.Dispatch.time_call": FLAT,  # only the machine's common drift
        "bench_x.Tracing.time_trace": STEP[::-1],  # impl got faster relative to JAX
        "bench_x.Laws.track_rate": [1.2] * 3 + [2.4] + [1.2] * 4,  # one noisy commit
    })
    rc, out = _report(config, capsys, "--fail-on-regression")
    assert rc == 0, out
    assert out.splitlines()[-1] == "  none" and "8 commits measured" in out


def test_report_only_runs_nothing_and_refuses_run_options(tmp_path, capsys):
    config = _write_history(tmp_path, {"bench_x.Dispatch.time_call": FLAT})
    for extra in (["--commits", "HEAD"], ["--last", "2"], ["--", "-b", "Dispatch"]):
        with pytest.raises(SystemExit) as exc:
            history.main(["--report-only", "--config", config, *extra])
        assert exc.value.code == 2
    with pytest.raises(SystemExit, match="no impl and JAX results for machine other"):
        history.main(["--report-only", "--config", config, "--machine", "other"])


def test_since_keeps_only_the_steps_after_a_commit(tmp_path):
    config = _write_history(tmp_path, {"bench_x.Dispatch.time_call": STEP,
                                       "bench_x.Tracing.time_trace": FLAT[:7] + [2.4]})
    _, results_dir = plot.load_config(config)
    order = {c: 10 * n for n, c in enumerate(COMMITS)}  # measured every tenth commit
    found, _ = regressions.stored_regressions(results_dir, MACHINE, "cpu", order)
    assert [(r.benchmark, r.after, r.commits_in_step) for r in found] == [
        ("bench_x.Dispatch.time_call", COMMITS[4], 10),
        ("bench_x.Tracing.time_trace", COMMITS[7], 10),
    ]
    newest = regressions.after_commit(found, COMMITS[6], order)
    assert [r.benchmark for r in newest] == ["bench_x.Tracing.time_trace"]
    assert regressions.after_commit(found, COMMITS[7], order) == []
    with pytest.raises(SystemExit, match="not on the benchmarked branch"):
        regressions.after_commit(found, "f" * 40, order)


def _git_repo(path, n):
    """A repository with ``n`` empty commits on main; their hashes, oldest first."""

    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], check=True, text=True,
                              capture_output=True).stdout.strip()

    path.mkdir()
    git("init", "-q", "-b", "main")
    for i in range(n):
        git("-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
            "commit", "-q", "--allow-empty", "-m", f"c{i}")
    return git("rev-list", "--reverse", "main").split()


def test_the_steps_are_those_asv_publish_finds_in_the_ratio_as_a_track_benchmark(tmp_path):
    """The ratio series written as a ``track_`` benchmark and run through
    ``asv publish`` gives the same steps in its regressions.json."""
    commits = _git_repo(tmp_path / "repo", 8)
    stairs = [1.0, 1.0, 1.0, 1.4, 1.4, 1.4, 2.2, 2.2]
    config = _write_history(tmp_path, {"bench_x.Dispatch.time_call": STEP,
                                       "bench_x.Tracing.time_trace": stairs,
                                       "bench_x.Laws.track_rate": FLAT}, commits)
    _, results_dir = plot.load_config(config)
    order = {c: n for n, c in enumerate(commits)}
    found, _ = regressions.stored_regressions(results_dir, MACHINE, "cpu", order)
    ours = {(r.benchmark, r.before, r.after) for r in found}
    assert sorted((b, commits.index(a)) for b, _, a in ours) == [
        ("bench_x.Dispatch.time_call", 4), ("bench_x.Tracing.time_trace", 3),
        ("bench_x.Tracing.time_trace", 6)]

    series, dates, kinds = plot.collect(results_dir, MACHINE, "cpu")
    ratios = regressions.cost_ratio_series(series, kinds, commits)
    tracked = tmp_path / "tracked"
    (tracked / MACHINE).mkdir(parents=True)
    (tracked / MACHINE / "machine.json").write_text(
        (tmp_path / "results" / MACHINE / "machine.json").read_text())
    names = {key: f"ratio.{key.replace('.', '_')}.track_ratio" for key, _ in ratios}
    (tracked / "benchmarks.json").write_text(json.dumps(
        {**{name: {"name": name, "params": [], "param_names": [], "type": "track",
                   "unit": "ratio", "version": "v"} for name in names.values()},
         "version": 2}))
    for n, commit in enumerate(commits):
        _write_result(tracked, commit, n, {names[key]: [[ys[n]], [], "v"]
                                           for (key, _), (_, ys) in ratios.items()})
    conf = tmp_path / "publish.conf.json"
    conf.write_text(json.dumps({
        "version": 1, "project": "x", "repo": str(tmp_path / "repo"), "branches": ["main"],
        "results_dir": str(tracked), "html_dir": str(tmp_path / "html"),
        "regressions_thresholds": {".*": regressions.DEFAULT_THRESHOLD}}))
    asv = os.path.join(os.path.dirname(sys.executable), "asv")
    subprocess.run([asv, "publish", "--no-pull", "--config", str(conf)], check=True,
                   capture_output=True)
    published = json.loads((tmp_path / "html" / "regressions.json").read_text())
    index = json.loads((tmp_path / "html" / "index.json").read_text())
    to_hash = {int(rev): h for rev, h in index["revision_to_hash"].items()}
    from_asv = set()
    for name, _, _, _, _, _, jumps in published["regressions"]:
        key = next(k for k, n in names.items() if n == name)
        for before, after, _, _ in jumps:
            # asv leaves out ``before`` when the step is a single commit
            before = to_hash[before] if before is not None else commits[
                commits.index(to_hash[after]) - 1]
            from_asv.add((key, before, to_hash[after]))
    assert from_asv == ours


def test_a_history_run_ends_with_the_report(tmp_path, capsys, monkeypatch):
    config = _write_history(tmp_path, {"bench_x.Dispatch.time_call": STEP})
    ran = []
    monkeypatch.setattr(history, "run_history",
                        lambda args: ran.append(args.commits) or ([], MACHINE))
    rc = history.main(["--config", config, "--commits", "HEAD", "--fail-on-regression"])
    out = capsys.readouterr().out
    assert ran == [["HEAD"]] and rc == 1
    assert out.splitlines()[1].startswith("  bench_x.Dispatch.time_call: impl/JAX")
    assert history.main(["--config", config, "--commits", "HEAD"]) == 0
