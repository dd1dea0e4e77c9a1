"""``python -m properties``: run the law suites through pytest and write reports.

    python -m properties [--backend B] [--profile P] [-k EXPR] [-n WORKERS]
                         [--report-dir reports] [--db DIR] [-- extra pytest args]

Exits with pytest's status: non-zero when any law (or negative test) fails.
Each pytest process writes its law records to a temporary directory; the
controlling process merges them into reports/properties.{json,md}.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from .profiles import PROFILES

SUITES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suites")


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m properties", description=__doc__.splitlines()[0])
    p.add_argument("--backend", default=os.environ.get("PROPERTIES_BACKEND", "impl"),
                   help="impl (default), jax, or any importable module with JAX's API")
    p.add_argument("--profile", default="default", choices=sorted(PROFILES))
    p.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    p.add_argument("-n", dest="workers", default=None,
                   help="pytest-xdist workers (a number or 'auto')")
    p.add_argument("--report-dir", default="reports")
    p.add_argument("--db", default=None, help="hypothesis example database directory")
    p.add_argument("pytest_args", nargs="*", help="extra arguments passed to pytest (after --)")
    return p.parse_args(argv)


def command(args, stats_dir):
    cmd = [sys.executable, "-m", "pytest", SUITES, "--backend", args.backend,
           "--profile", args.profile, "--properties-stats", stats_dir,
           "--properties-report", os.path.abspath(args.report_dir), "-rs"]
    if args.keyword:
        cmd += ["-k", args.keyword]
    if args.workers not in (None, "0", "1"):
        cmd += ["-n", str(args.workers)]
    if args.db:
        cmd += ["--properties-db", args.db]
    return cmd + list(args.pytest_args)


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="properties-stats-") as stats:
        cmd = command(args, stats)
        print("running:", " ".join(cmd), flush=True)
        env = dict(os.environ, PROPERTIES_STATS_DIR=stats)
        status = subprocess.call(cmd, env=env)
    md = os.path.join(args.report_dir, "properties.md")
    if os.path.exists(md):
        print(f"reports: {os.path.join(args.report_dir, 'properties.json')}, {md}")
    return status


if __name__ == "__main__":
    sys.exit(main())
