"""Benchmark the last N commits with the current suite, without virtualenvs.

    python -m benchmarks.history --last 3            # run, then publish + plot
    python -m benchmarks.history --commits A B C     # explicit commits
    python -m benchmarks.history --last 5 -- -b Dispatch   # extra asv args

For each commit (oldest first) a detached ``git worktree`` is made under a
temporary directory, the suite is snapshotted (modules asv cannot discover
against that commit are left out with a message, instead of aborting the
run), and ``asv run --python=same --set-commit-hash <sha>``
runs the *current* benchmarks with ``ASV_PYTHONPATH`` pointing at that
worktree, so ``import impl`` (and ``properties``) resolve to the commit's
code while jax is the running interpreter's.  The working tree and HEAD are
never touched.  This is the fast path; ``asv run <range>`` builds a
virtualenv per commit from pyproject.toml instead (see docs/benchmarks.md).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

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


def _ensure_machine(machine):
    """Register the machine (device + jax version) if asv does not know it."""
    from asv.machine import MachineCollection
    from asv.util import UserError

    try:
        MachineCollection.load(machine)
    except UserError:
        from benchmarks import machine as machine_cmd

        machine_cmd.main([])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--last", type=int, default=3, help="commits back from --branch")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--commits", nargs="+", help="explicit commits (oldest first)")
    parser.add_argument("--machine", help="asv machine name (default: benchmarks.machine)")
    parser.add_argument("--no-publish", action="store_true", help="skip asv publish + plot")
    parser.add_argument("--exclude", action="append", default=[],
                        help="benchmark module to leave out, e.g. bench_strategies")
    parser.add_argument("asv_args", nargs=argparse.REMAINDER, help="after --: passed to asv run")
    args = parser.parse_args(argv)

    if args.commits:
        commits = [git("rev-parse", c) for c in args.commits]
    else:
        commits = git("rev-list", f"--max-count={args.last}", args.branch).split()[::-1]
    if args.machine:
        machine = args.machine
    else:
        from benchmarks.machine import machine_info

        machine = machine_info()["machine"]
    extra = [a for a in args.asv_args if a != "--"]
    _ensure_machine(machine)

    failed = []
    with tempfile.TemporaryDirectory(prefix="impl-asv-history-") as tmp:
        for sha in commits:
            tree = os.path.join(tmp, sha[:12])
            git("worktree", "add", "--detach", tree, sha)
            try:
                print(f"== {git('log', '-1', '--format=%h %s', sha)}", flush=True)
                env = dict(os.environ, ASV_PYTHONPATH=tree)
                suite = snapshot_suite(os.path.join(tmp, "s-" + sha[:12]), env, args.exclude)
                config = temp_config(os.path.dirname(os.path.dirname(suite)), suite)
                cmd = [asv_exe(), "run", "--config", config, "--python=same",
                       "--set-commit-hash", sha, "--machine", machine, *extra]
                rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
                if rc:
                    failed.append(sha)  # asv exits non-zero if any benchmark failed
            finally:
                git("worktree", "remove", "--force", tree)
    if not args.no_publish:
        subprocess.run([asv_exe(), "publish"], cwd=ROOT, check=True)
        subprocess.run([sys.executable, "-m", "benchmarks.plot", "--machine", machine],
                       cwd=ROOT, check=True)
    if failed:
        print(f"asv reported failing benchmarks at: {' '.join(c[:8] for c in failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
