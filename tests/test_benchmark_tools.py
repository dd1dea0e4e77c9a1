"""The asv history tools: one machine's results stay one series; plots mark
environment changes; a recorded machine description is never overwritten."""
import json

import pytest

from benchmarks import history, plot

DESCRIPTION = {"machine": "box-cpu", "os": "Linux", "arch": "x86_64 cpu",
               "cpu": "Some CPU (2 cores); device: cpu (Some CPU)", "num_cpu": "2",
               "ram": "24 GiB", "version": 1}
COLUMNS = ["result", "params", "version"]


def _asv_result(directory, commit, python_path, kernel, results):
    """A result file as ``asv run --python=same`` writes it (path and kernel in the keys)."""
    env_name = "existing-py" + python_path.replace("/", "_")
    params = {**{k: v for k, v in DESCRIPTION.items() if k != "version"},
              "os": f"Linux {kernel}", "python": python_path}
    data = {"commit_hash": commit, "env_name": env_name, "date": 1, "params": params,
            "python": python_path, "requirements": {}, "env_vars": {},
            "result_columns": COLUMNS, "results": results, "durations": {}, "version": 2}
    path = directory / f"{commit[:8]}-{env_name}.json"
    path.write_text(json.dumps(data))
    return path


def _environment(python_path, kernel, jax="0.10.2"):
    return {"python": "3.11.7", "python_executable": python_path, "kernel": kernel,
            "jax": jax, "jaxlib": jax, "numpy": "2.0.0", "devices": ["cpu:cpu"]}


def test_two_venvs_and_kernels_give_one_series(tmp_path):
    machine_dir = tmp_path / "box-cpu"
    machine_dir.mkdir()
    runs = [("a" * 40, "/venv-one/bin/python", "6.1.0-v1"),
            ("b" * 40, "/home/x/venv-two/bin/python3", "6.1.0-v2")]
    for commit, python_path, kernel in runs:
        _asv_result(machine_dir, commit, python_path, kernel, {"bench.t": [1.0, [], "v"]})
    paths = history.normalize_new_results(str(tmp_path), "box-cpu", DESCRIPTION,
                                          _environment("/ignored", "ignored"))
    assert len(paths) == 2
    datas = [json.loads(open(p).read()) for p in paths]
    assert {d["env_name"] for d in datas} == {"existing-py3.11"}
    assert datas[0]["params"] == datas[1]["params"]
    assert "/" not in json.dumps(datas[0]["params"]) and datas[0]["params"]["os"] == "Linux"
    assert sorted(p.name for p in machine_dir.iterdir()) == [
        "aaaaaaaa-existing-py3.11.json", "bbbbbbbb-existing-py3.11.json", "environments.jsonl"]
    envs = plot.read_environments(str(tmp_path), "box-cpu")
    assert set(envs) == {"a" * 40, "b" * 40}
    graph = pytest.importorskip("asv.graph")
    files = {graph.Graph.get_file_path({**d["params"], "branch": "main"}, "bench.t")
             for d in datas}
    assert len(files) == 1  # asv publish draws both commits in one graph


def test_a_partial_rerun_merges_into_the_commits_results(tmp_path):
    machine_dir = tmp_path / "box-cpu"
    machine_dir.mkdir()
    env = _environment("/v/bin/python", "k1")
    _asv_result(machine_dir, "c" * 40, "/v/bin/python", "k1",
                {"bench.a": [1.0, [], "v"], "bench.b": [2.0, [], "v"]})
    history.normalize_new_results(str(tmp_path), "box-cpu", DESCRIPTION, env)
    _asv_result(machine_dir, "c" * 40, "/w/bin/python", "k2", {"bench.b": [3.0, [], "v"]})
    path, = history.normalize_new_results(str(tmp_path), "box-cpu", DESCRIPTION,
                                          _environment("/w/bin/python", "k2"))
    results = json.loads(open(path).read())["results"]
    assert results == {"bench.a": [1.0, [], "v"], "bench.b": [3.0, [], "v"]}
    assert plot.read_environments(str(tmp_path), "box-cpu")["c" * 40]["kernel"] == "k2"


def test_plots_break_the_lines_where_the_environment_changed():
    commits = ["c1", "c2", "c3", "c4"]
    envs = {"c1": _environment("/a", "k1"), "c2": _environment("/b", "k1"),
            "c3": _environment("/b", "k1", jax="0.11.0"), "c4": _environment("/c", "k2",
                                                                               jax="0.11.0")}
    changes = plot.environment_changes(commits, envs)
    assert [b for b, _ in changes] == [1.5, 2.5]  # the venv path alone is no change
    assert "jax 0.10.2 -> 0.11.0" in changes[0][1] and "kernel k1 -> k2" in changes[1][1]
    xs, ys = plot._broken_line([(0, 1.0), (1, 2.0), (2, 3.0), (3, 4.0)], [1.5, 2.5])
    assert xs == [0, 1, 1.5, 2, 2.5, 3]
    assert [y != y for y in ys] == [False, False, True, False, True, False]


def test_a_recorded_machine_description_is_never_overwritten(tmp_path, monkeypatch):
    pytest.importorskip("asv")
    from benchmarks import machine

    monkeypatch.setenv("HOME", str(tmp_path))
    results = tmp_path / "results"
    (results / "box-cpu").mkdir(parents=True)
    recorded = dict(DESCRIPTION, cpu="the CPU recorded last year")
    (results / "box-cpu" / "machine.json").write_text(json.dumps(recorded))
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"version": 1, "results_dir": "results"}))
    assert machine.ensure_registered("box-cpu", str(config)) == recorded
    assert json.loads((results / "box-cpu" / "machine.json").read_text()) == recorded
    known = json.loads((tmp_path / ".asv-machine.json").read_text())
    assert known["box-cpu"]["cpu"] == "the CPU recorded last year"


@pytest.mark.parametrize("kind, unit, values, label, log, labelled", [
    ("time", "seconds", [2e-3, 3e-3], "time per call [ms]", False, None),
    ("time", "seconds", [2e-4, 1e-2], "time per call [ms]", True, [0.2, 0.5, 1, 2, 5, 10]),
    ("time", "seconds", [1e-4, 1.0], "time per call [s]", True, [1e-4, 1e-3, 0.01, 0.1, 1]),
    ("peakmem", "bytes", [500 * 2 ** 20], "peak RSS [MiB]", False, None),
    ("track", "examples/s", [10.0, 50.0], "examples/s", False, None),
])
def test_every_value_axis_has_its_unit_and_readable_ticks(kind, unit, values, label, log,
                                                          labelled):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    scale = plot._value_axis(ax, kind, unit, values)
    ax.plot([0, 1], [v / scale for v in (min(values), max(values))])
    fig.canvas.draw()
    assert ax.get_ylabel() == label
    assert (ax.get_yscale() == "log") == log
    shown = [t.get_position()[1] for t in ax.yaxis.get_majorticklabels()
             if t.get_text() and ax.get_ylim()[0] <= t.get_position()[1] <= ax.get_ylim()[1]]
    if labelled is not None:
        assert [round(v, 6) for v in shown] == labelled
    else:
        assert len(shown) >= 3 and ax.get_ylim()[0] == 0
    plt.close(fig)
