"""Benchmark the last N commits with the current suite, without virtualenvs.

    python -m benchmarks.history --last 3            # run, then plot
    python -m benchmarks.history --commits HEAD      # just the checked-out commit
    python -m benchmarks.history --last 5 -- -b Dispatch   # extra asv args

For each commit (oldest first) a detached ``git worktree`` is made under a
temporary directory, the suite is snapshotted (modules asv cannot discover
against that commit are left out with a message, instead of aborting the
run), and ``asv run --python=same --set-commit-hash <sha>`` runs the
*current* benchmarks with ``ASV_PYTHONPATH`` set so that ``import impl``
resolves to the commit's impl while the measuring code -- the benchmarks,
the backend loader and law harness (``properties``, ``strategies``) -- and
jax are the current checkout's and the running interpreter's.  The working tree and HEAD are
never touched.  This is the fast path; ``asv run <range>`` builds a
virtualenv per commit from pyproject.toml instead (see docs/benchmarks.md).

One machine, one series: asv names an ``--python=same`` environment after
the interpreter's path (``existing-py_work_venv_bin_python3``) and puts that
path in every result's keys, so a new venv would start a new series.  After
each run the results are renamed to the stable environment
``existing-py<major.minor>`` and keyed only by the machine's stable
description (``benchmarks/machine.py``); the interpreter path, kernel
version and jax/jaxlib/numpy versions go to ``environments.jsonl`` beside
them, as information.  The machine description is registered once and
never overwritten.
"""

import argparse
import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENVIRONMENTS = "environments.jsonl"


def git(*args):
    return subprocess.run(
        ["git", "-C", ROOT, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def asv_exe():
    return os.path.join(os.path.dirname(sys.executable), "asv")


def _discovers(pkg_dir, tmp, env):
    """True if asv can discover the package at ``pkg_dir`` (a benchmarks dir)."""
    import asv

    script = os.path.join(os.path.dirname(asv.__file__), "benchmark.py")
    out = os.path.join(tmp, "discover.json")
    rc = subprocess.run([sys.executable, script, "discover", pkg_dir, out], env=env,
                        capture_output=True, text=True)
    return rc.returncode == 0


def _commit_impl_path(tmp, sha, tree):
    """A path on which ``impl`` is the commit's and everything else the checkout's."""
    only_impl = os.path.join(tmp, "impl-" + sha[:12])
    os.makedirs(only_impl)
    os.symlink(os.path.join(tree, "impl"), os.path.join(only_impl, "impl"))
    return os.pathsep.join([only_impl, ROOT])


def snapshot_suite(tmp, env, exclude):
    """Copy benchmarks/ leaving out modules asv cannot discover.

    asv aborts the whole run when one module of the suite fails to import or
    to be discovered (e.g. a neighbour's module mid-edit), so each bench_*
    module is checked on its own and left out, with a message, if broken.
    """
    src = os.path.join(ROOT, "benchmarks")
    files = [f for f in os.listdir(src) if f.endswith(".py")]
    support = [f for f in files if not f.startswith("bench_")]
    keep = []
    for f in sorted(set(files) - set(support)):
        if f[:-3] in exclude:
            print(f"history: excluding {f} (--exclude)", file=sys.stderr)
            continue
        probe = os.path.join(tmp, "probe", f[:-3], "benchmarks")
        os.makedirs(probe)
        for g in support + [f]:
            shutil.copy(os.path.join(src, g), probe)
        if _discovers(probe, tmp, env):
            keep.append(f)
        else:
            print(f"history: excluding {f}: asv cannot discover it", file=sys.stderr)
    dst = os.path.join(tmp, "suite", "benchmarks")
    os.makedirs(dst)
    for g in support + keep:
        shutil.copy(os.path.join(src, g), dst)
    return dst


def temp_config(tmp, suite_dir):
    """asv.conf.json with absolute paths and the snapshot as benchmark_dir."""
    from asv.util import load_json

    conf = load_json(os.path.join(ROOT, "asv.conf.json"), js_comments=True)
    for key in ("results_dir", "html_dir", "env_dir"):
        conf[key] = os.path.join(ROOT, conf[key])
    conf["repo"] = ROOT
    conf["benchmark_dir"] = suite_dir
    path = os.path.join(tmp, "asv.conf.json")
    with open(path, "w") as fh:
        json.dump(conf, fh, indent=2)
    return path


def stable_env_name(python_version):
    """``existing-py3.11``: asv's --python=same environment, without the path."""
    return "existing-py" + ".".join(str(python_version).split(".")[:2])


def _record_environment(machine_dir, commit, env_name, environment):
    """Write ``environment`` for (commit, env_name) into environments.jsonl."""
    path = os.path.join(machine_dir, ENVIRONMENTS)
    rows = [r for r in read_environment_rows(path)
            if (r["commit"], r["env_name"]) != (commit, env_name)]
    rows.append({"commit": commit, "env_name": env_name,
                 "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(
                     timespec="seconds"), **environment})
    rows.sort(key=lambda r: (r["recorded"], r["commit"]))
    with open(path, "w") as fh:
        fh.writelines(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def _read_json(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except OSError:
        return {}


def read_environment_rows(path):
    try:
        with open(path) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except OSError:
        return []


def read_environments(results_dir, machine):
    """{commit: environment} recorded for ``machine`` (newest record wins)."""
    rows = read_environment_rows(os.path.join(results_dir, machine, ENVIRONMENTS))
    return {r["commit"]: r for r in rows}


def normalize_result(path, description, environment):
    """Rename one ``--python=same`` result to the stable environment and key it
    by ``description`` only; merge into an existing result of the same commit;
    record ``environment``.  Returns the new path."""
    with open(path) as fh:
        data = json.load(fh)
    python = ".".join(environment["python"].split(".")[:2])
    env_name = stable_env_name(python)
    data.update(env_name=env_name, python=python, requirements={})
    data["params"] = {**{k: str(v) for k, v in description.items() if k != "version"},
                      "python": python}
    machine_dir = os.path.dirname(path)
    target = os.path.join(machine_dir, f"{data['commit_hash'][:8]}-{env_name}.json")
    if target != path and os.path.exists(target):
        with open(target) as fh:
            old = json.load(fh)
        if old.get("result_columns") == data.get("result_columns"):
            data["results"] = {**old.get("results", {}), **data.get("results", {})}
            data["durations"] = {**old.get("durations", {}), **data.get("durations", {})}
    with open(target, "w") as fh:
        json.dump(data, fh, separators=(",", ":"))
    if target != path:
        os.remove(path)
    _record_environment(machine_dir, data["commit_hash"], env_name, environment)
    return target


def keep_benchmark_metadata(results_dir, before):
    """asv rewrites benchmarks.json with only the benchmarks it ran; keep the
    descriptions of the others (their stored results still need them)."""
    path = os.path.join(results_dir, "benchmarks.json")
    with open(path) as fh:
        now = json.load(fh)
    merged = {**before, **now}
    if merged != now:
        with open(path, "w") as fh:
            json.dump(merged, fh, indent=4, sort_keys=True)


def normalize_new_results(results_dir, machine, description, environment):
    """Normalize the ``existing-py_<path>`` results asv just wrote for ``machine``."""
    out = []
    for path in sorted(glob.glob(os.path.join(results_dir, machine, "*-existing-py_*.json"))):
        out.append(normalize_result(path, description, environment))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--last", type=int, default=3, help="commits back from --branch")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--commits", nargs="+", help="explicit commits (oldest first)")
    parser.add_argument("--machine", help="asv machine name (default: benchmarks.machine)")
    parser.add_argument("--no-plot", action="store_true", help="skip benchmarks.plot")
    parser.add_argument("--exclude", action="append", default=[],
                        help="benchmark module to leave out, e.g. bench_strategies")
    parser.add_argument("asv_args", nargs=argparse.REMAINDER, help="after --: passed to asv run")
    args = parser.parse_args(argv)

    if args.commits:
        commits = [git("rev-parse", c) for c in args.commits]
    else:
        commits = git("rev-list", f"--max-count={args.last}", args.branch).split()[::-1]
    from benchmarks import machine as machine_cmd

    description = machine_cmd.ensure_registered(args.machine)
    machine = description["machine"]
    environment = machine_cmd.environment_info()
    results_dir = machine_cmd.results_dir()
    extra = [a for a in args.asv_args if a != "--"]

    failed = []
    with tempfile.TemporaryDirectory(prefix="impl-asv-history-") as tmp:
        for sha in commits:
            tree = os.path.join(tmp, sha[:12])
            git("worktree", "add", "--detach", tree, sha)
            try:
                print(f"== {git('log', '-1', '--format=%h %s', sha)}", flush=True)
                env = dict(os.environ, ASV_PYTHONPATH=_commit_impl_path(tmp, sha, tree))
                suite = snapshot_suite(os.path.join(tmp, "s-" + sha[:12]), env, args.exclude)
                config = temp_config(os.path.dirname(os.path.dirname(suite)), suite)
                cmd = [asv_exe(), "run", "--config", config, "--python=same",
                       "--set-commit-hash", sha, "--machine", machine, *extra]
                before = _read_json(os.path.join(results_dir, "benchmarks.json"))
                rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
                keep_benchmark_metadata(results_dir, before)
                if rc:
                    failed.append(sha)  # asv exits non-zero if any benchmark failed
                normalize_new_results(results_dir, machine, description, environment)
            finally:
                git("worktree", "remove", "--force", tree)
    if not args.no_plot:
        subprocess.run([sys.executable, "-m", "benchmarks.plot", "--machine", machine],
                       cwd=ROOT, check=True)
    if failed:
        print(f"asv reported failing benchmarks at: {' '.join(c[:8] for c in failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
