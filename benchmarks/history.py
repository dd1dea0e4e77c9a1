"""Benchmark the last N commits with the current suite, without virtualenvs.

    python -m benchmarks.history --last 3            # run, then plot
    python -m benchmarks.history --commits HEAD      # just the checked-out commit
    python -m benchmarks.history --last 5 -- -b Dispatch   # extra asv args
    python -m benchmarks.history --report-only       # stored results only: regressions
    python -m benchmarks.history --commits HEAD --fail-on-regression   # for CI

Every run ends with the benchmarks whose impl/JAX ratio rose by more than
``--threshold`` in a step that still stands at the newest commit, found by
asv's step detection on the ratio series (``benchmarks.regressions``), with
the commits of the step; ``--fail-on-regression`` then exits non-zero.

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

from benchmarks import plot
from benchmarks.plot import ENVIRONMENTS, read_environment_rows, read_environments

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def temp_config(tmp, suite_dir, config):
    """``config`` with absolute paths and the snapshot as benchmark_dir."""
    from asv.util import load_json

    conf = load_json(config, js_comments=True)
    for key in ("results_dir", "html_dir", "env_dir"):
        conf[key] = os.path.join(os.path.dirname(os.path.abspath(config)), conf[key])
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


def report_regressions(args, machines):
    """Print the standing impl/JAX regressions of ``machines``; how many."""
    from benchmarks import regressions

    conf, results_dir = plot.load_config(args.config)
    order = plot.commit_order(ROOT, (conf.branches or ["main"])[0] or "HEAD")
    since = git("rev-parse", args.since) if args.since else None
    total = 0
    for machine in machines:
        found, commits = regressions.stored_regressions(results_dir, machine, args.device,
                                                        order, args.threshold)
        if since:
            found = regressions.after_commit(found, since, order)
        found = regressions.annotate(found, ROOT, read_environments(results_dir, machine))
        print(regressions.format_report(found, machine, args.device, commits, args.threshold))
        total += len(found)
    return total


def stored_machines(config):
    _, results_dir = plot.load_config(config)
    return sorted(d for d in os.listdir(results_dir)
                  if os.path.isdir(os.path.join(results_dir, d)))


def main(argv=None):
    from benchmarks.regressions import DEFAULT_THRESHOLD

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(ROOT, "asv.conf.json"),
                        help="asv configuration: results directory and branch")
    parser.add_argument("--last", type=int, help="commits back from --branch (default 3)")
    parser.add_argument("--branch", help="default main")
    parser.add_argument("--commits", nargs="+", help="explicit commits (oldest first)")
    parser.add_argument("--machine", help="asv machine name (default: benchmarks.machine; "
                        "with --report-only: every machine with stored results)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"],
                        help="device whose parameters are plotted and checked")
    parser.add_argument("--no-plot", action="store_true", help="skip benchmarks.plot")
    parser.add_argument("--exclude", action="append", default=[],
                        help="benchmark module to leave out, e.g. bench_strategies")
    parser.add_argument("--report-only", "--regressions", action="store_true",
                        help="run nothing: report regressions from the stored results")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="smallest relative rise of an impl/JAX ratio reported "
                        f"(default {DEFAULT_THRESHOLD})")
    parser.add_argument("--since", metavar="COMMIT",
                        help="report only steps that end after COMMIT on the branch")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit non-zero when a regression is reported")
    parser.add_argument("asv_args", nargs=argparse.REMAINDER, help="after --: passed to asv run")
    args = parser.parse_args(argv)
    if args.threshold < 0:
        parser.error("--threshold must be >= 0 (a fraction of the ratio before the step)")

    if args.report_only:
        given = {"--last": args.last is not None, "--branch": args.branch,
                 "--commits": args.commits, "--exclude": args.exclude,
                 "--no-plot": args.no_plot, "asv arguments": args.asv_args}
        unused = [name for name, value in given.items() if value]
        if unused:
            parser.error(f"--report-only runs nothing; {', '.join(unused)} would be ignored")
        machines = [args.machine] if args.machine else stored_machines(args.config)
        found = report_regressions(args, machines)
        return 1 if found and args.fail_on_regression else 0

    failed, machine = run_history(args)
    found = report_regressions(args, [machine])
    if failed:
        print(f"asv reported failing benchmarks at: {' '.join(c[:8] for c in failed)}")
    return 1 if failed or (found and args.fail_on_regression) else 0


def run_history(args):
    """asv run per commit, results normalized, then the plots; returns the
    commits where asv reported failures and the machine name."""
    if args.commits:
        commits = [git("rev-parse", c) for c in args.commits]
    else:
        last = 3 if args.last is None else args.last
        commits = git("rev-list", f"--max-count={last}", args.branch or "main").split()[::-1]
    from benchmarks import machine as machine_cmd

    description = machine_cmd.ensure_registered(args.machine, args.config)
    machine = description["machine"]
    environment = machine_cmd.environment_info()
    results_dir = machine_cmd.results_dir(args.config)
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
                config = temp_config(os.path.dirname(os.path.dirname(suite)), suite, args.config)
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
        subprocess.run([sys.executable, "-m", "benchmarks.plot", "--config", args.config,
                        "--machine", machine, "--device", args.device], cwd=ROOT, check=True)
    return failed, machine


if __name__ == "__main__":
    sys.exit(main())
