"""Benchmark the last N commits with the current suite, without virtualenvs.

    python -m benchmarks.history --last 3            # run, then publish + plot
    python -m benchmarks.history --commits A B C     # explicit commits
    python -m benchmarks.history --last 5 -- -b Dispatch   # extra asv args

For each commit (oldest first) a detached ``git worktree`` is made under a
temporary directory, and ``asv run --python=same --set-commit-hash <sha>``
runs the *current* benchmarks with ``ASV_PYTHONPATH`` pointing at that
worktree, so ``import impl`` (and ``properties``) resolve to the commit's
code while jax is the running interpreter's.  The working tree and HEAD are
never touched.  This is the fast path; ``asv run <range>`` builds a
virtualenv per commit from pyproject.toml instead (see docs/benchmarks.md).
"""

import argparse
import os
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
                cmd = [asv_exe(), "run", "--python=same", "--set-commit-hash", sha,
                       "--machine", machine, *extra]
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
