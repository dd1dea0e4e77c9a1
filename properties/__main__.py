"""``python -m properties``: run the law suites through pytest and write reports.

    python -m properties [--backend B] [--profile P] [-k EXPR] [-n WORKERS]
                         [--report-dir DIR] [--db DIR] [--jax-cache DIR | --no-jax-cache]
                         [-- extra pytest args]
    python -m properties --list [--markdown]

Runs the suites installed with this package under the package's own pytest
configuration (``properties/suites/suite.ini``, rootdir the suites folder),
from whatever folder it is started in, and writes nothing there: the
reports go to ``--report-dir`` (default ``$PROPERTIES_REPORT_DIR``, else
``~/.cache/impl-properties/reports``) as ``properties-<backend>.{md,json}``;
hypothesis keeps its files (``$HYPOTHESIS_STORAGE_DIRECTORY``, default the
same cache folder's ``hypothesis``) and the example database (``--db``,
default ``hypothesis/properties`` there) out of the current folder too, and JAX's
persistent compilation cache is ``--jax-cache`` (default ``jax-cache`` there;
``--no-jax-cache``: none), so a repeated run reads its compiled programs from disk.
It runs the law suites (``suites/test_*_laws.py``); ``--self-check`` adds the
harness' own tests (the negative tests that break each law on purpose, the
checkers' and the harness' tests), which do not depend on the backend.
Exits with pytest's status: non-zero when any law (or self-check) fails.
``--list`` prints the declared laws (``--markdown``: the tables of docs/properties.md).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys

from .profiles import PROFILES

SUITES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suites")
CONFIG = os.path.join(SUITES, "suite.ini")


def cache_dir():
    """``$XDG_CACHE_HOME/impl-properties`` (``~/.cache/impl-properties``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "impl-properties")


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m properties", description=__doc__.splitlines()[0])
    p.add_argument("--backend", default=os.environ.get("PROPERTIES_BACKEND", "impl"),
                   help="impl (default), jax, or any importable module with JAX's API")
    p.add_argument("--profile", default="default", choices=sorted(PROFILES))
    p.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    p.add_argument("-n", dest="workers", default=None,
                   help="pytest-xdist workers (a number or 'auto')")
    p.add_argument("--report-dir", default=os.environ.get("PROPERTIES_REPORT_DIR")
                   or os.path.join(cache_dir(), "reports"),
                   help="where properties-<backend>.{md,json} go (default: %(default)s)")
    p.add_argument("--db", default=os.environ.get("PROPERTIES_DB")
                   or os.path.join(cache_dir(), "hypothesis", "properties"),
                   help="hypothesis example database directory (default: %(default)s)")
    p.add_argument("--jax-cache", default=os.environ.get("PROPERTIES_JAX_CACHE")
                   or os.path.join(cache_dir(), "jax-cache"),
                   help="JAX's persistent compilation cache: a second run of the derandomized "
                        "quick profile reads its compiled programs from here "
                        "(default: %(default)s)")
    p.add_argument("--no-jax-cache", dest="jax_cache", action="store_const", const=None,
                   help="compile everything again, without the persistent cache")
    p.add_argument("--self-check", action="store_true",
                   help="also run the harness' own tests: negative tests, checkers, harness")
    p.add_argument("--list", action="store_true", help="list the declared laws and exit")
    p.add_argument("--markdown", action="store_true",
                   help="with --list: the law tables of docs/properties.md")
    p.add_argument("pytest_args", nargs="*", help="extra arguments passed to pytest (after --)")
    args = p.parse_args(argv)
    if args.workers not in (None, "0", "1") and importlib.util.find_spec("xdist") is None:
        p.error(f"-n {args.workers} needs pytest-xdist, which is not installed "
                "(pip install pytest-xdist, or the project's [test] extra); "
                "without -n the laws run in one process")
    return args


def law_suites():
    """The suite files that hold the laws (the others test the harness itself)."""
    return sorted(os.path.join(SUITES, f) for f in os.listdir(SUITES) if f.startswith("test_")
                  and f.endswith("_laws.py"))


def command(args):
    suites = [SUITES] if args.self_check else law_suites()
    cmd = [sys.executable, "-m", "pytest", *suites, "-c", CONFIG, "--rootdir", SUITES,
           "-p", "properties.plugin", "-q", "-rs", "--properties-progress",
           "--backend", args.backend, "--profile", args.profile,
           "--properties-db", os.path.abspath(args.db),
           "--properties-report", os.path.abspath(args.report_dir)]
    if args.jax_cache:
        cmd += ["--jax-cache", os.path.abspath(args.jax_cache)]
    if args.keyword:
        cmd += ["-k", args.keyword]
    if args.workers not in (None, "0", "1"):
        cmd += ["-n", str(args.workers)]
    return cmd + list(args.pytest_args)


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.list:
        from . import listing
        print(listing.markdown() if args.markdown else "\n".join(listing.text()))
        return 0
    cmd = command(args)
    print("running:", " ".join(cmd), flush=True)
    env = dict(os.environ)
    env.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(cache_dir(), "hypothesis"))
    if not args.jax_cache:  # --no-jax-cache wins over $PROPERTIES_JAX_CACHE in the plugin
        env.pop("PROPERTIES_JAX_CACHE", None)
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
