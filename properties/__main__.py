"""``python -m properties``: run the law suites through pytest and write reports.

    python -m properties [--backend B] [--reference R] [--profile P] [-k EXPR] [-n WORKERS]
                         [--report-dir DIR] [--database DIR|redis://HOST:PORT]
                         [--time-limit MINUTES] [--jax-cache DIR | --no-jax-cache]
                         [--fast-compile | --no-fast-compile] [--fresh-mlir-contexts]
                         [-- extra pytest args]
    python -m properties --hunt MINUTES [same options]
    python -m properties --list [--markdown]

Runs the suites installed with this package under the package's own pytest
configuration (``properties/suites/suite.ini``, rootdir the suites folder),
from whatever folder it is started in, and writes nothing there: the
reports go to ``--report-dir`` (default ``$PROPERTIES_REPORT_DIR``, else
``~/.cache/impl-properties/reports``) as ``properties-<backend>.{md,json}``;
hypothesis keeps its files (``$HYPOTHESIS_STORAGE_DIRECTORY``, default the
same cache folder's ``hypothesis``) and the example database (``--db``,
default ``hypothesis/properties`` there; ``--database`` is the same option, and
takes a ``redis://`` URL too) out of the current folder too.  ``--backend`` takes a
module, or a module with breaks of ``properties/broken.py`` (``jax+vmap_slice0``);
each failing case is replayed on ``--reference`` (JAX by default) and a failure it
shares is reported as inherited from it.  JAX's persistent compilation cache is ``--jax-cache``
(default ``jax-cache`` in the cache folder; ``--no-jax-cache``: none), so a repeated
run reads its compiled programs from disk, and XLA compiles without optimising
(``--no-fast-compile``: with XLA's defaults, which a hunt uses unless ``--fast-compile``;
properties/xla_options.py), and JAX lowers the programs into shared MLIR contexts
(``--fresh-mlir-contexts``: a fresh one per program, JAX's way; properties/mlir_contexts.py).
It runs the law suites (``suites/test_*_laws.py``); ``--self-check`` adds the
harness' own tests (the negative tests that break each law on purpose, the
checkers' and the harness' tests), which do not depend on the backend.
Exits with pytest's status: non-zero when any law (or self-check) fails.
Ctrl-C, SIGTERM or the end of ``--time-limit`` stop the run cleanly: the report of
what it checked is written, marked interrupted, and the status is pytest's
interrupted one (2).  ``--hunt MINUTES`` looks for bugs on fresh random cases until
the time is up and writes a script per group of failures (properties/hunt.py).
``--list`` prints the declared laws (``--markdown``: the tables of docs/properties.md).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from . import compilation_cache, mlir_contexts, process
from .profiles import PROFILES

SUITES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suites")
CONFIG = os.path.join(SUITES, "suite.ini")


def cache_dir():
    """``$XDG_CACHE_HOME/impl-properties`` (``~/.cache/impl-properties``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "impl-properties")


def jax_cache_dir():
    """JAX's persistent compilation cache: ``$PROPERTIES_JAX_CACHE``, else ``jax-cache`` in
    :func:`cache_dir` (never in the checkout)."""
    return (os.environ.get(compilation_cache.ENVIRONMENT_VARIABLE)
            or os.path.join(cache_dir(), "jax-cache"))


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m properties", description=__doc__.splitlines()[0])
    p.add_argument("--backend", default=os.environ.get("PROPERTIES_BACKEND", "impl"),
                   help="impl (default), jax, or any importable module with JAX's API; "
                        "with breaks of properties/broken.py: jax+vmap_slice0")
    p.add_argument("--reference", default="jax",
                   help="the differential laws' reference, on which failing cases are also "
                        "replayed (default jax; 'none': no replay, JAX as reference)")
    p.add_argument("--profile", default=None, choices=sorted(PROFILES),
                   help="hypothesis profile (default: default; thorough for --hunt)")
    p.add_argument("-k", dest="keyword", default=None,
                   help="pytest -k expression (with --hunt: a law's name or a part of names)")
    p.add_argument("-n", dest="workers", default=None,
                   help="pytest-xdist workers (a number or 'auto'; default: the usable cores, "
                        f"at most {DEFAULT_MAX_WORKERS}, and one process for --hunt; "
                        "1: one process; each law file goes to one worker, "
                        "--dist loadfile, except in a hunt)")
    p.add_argument("--report-dir", default=os.environ.get("PROPERTIES_REPORT_DIR")
                   or os.path.join(cache_dir(), "reports"),
                   help="where properties-<backend>.{md,json} go (default: %(default)s)")
    p.add_argument("--database", "--db", dest="db", default=os.environ.get("PROPERTIES_DB")
                   or os.path.join(cache_dir(), "hypothesis", "properties"),
                   help="hypothesis example database: a directory (may be shared) or "
                        "redis://HOST:PORT (needs the [hunt] extra) (default: %(default)s)")
    p.add_argument("--time-limit", type=float, default=None, metavar="MINUTES",
                   help="stop cleanly after this many minutes (report marked interrupted)")
    p.add_argument("--hunt", type=float, default=None, metavar="MINUTES",
                   help="run fresh random cases with the thorough profile until the time is up; "
                        "write a script per group of failures under REPORT_DIR/repro")
    p.add_argument("--hunt-seed", type=int, default=None,
                   help="with --hunt: seed of the order in which the laws are run")
    p.add_argument("--jax-cache", default=jax_cache_dir(),
                   help="JAX's persistent compilation cache: a second run of the derandomized "
                        "quick profile reads its compiled programs from here "
                        "(default: %(default)s)")
    p.add_argument("--no-jax-cache", dest="jax_cache", action="store_const", const=None,
                   help="compile everything again, without the persistent cache")
    compiling = p.add_mutually_exclusive_group()
    compiling.add_argument("--fast-compile", dest="fast_compile", action="store_true",
                           default=None, help="compile without XLA's optimisations (the "
                           "default, except for --hunt; see properties/xla_options.py)")
    compiling.add_argument("--no-fast-compile", dest="fast_compile", action="store_false",
                           help="compile with XLA's default optimisations (the default of "
                                "--hunt: bugs of the optimised programs users run are found "
                                "too)")
    p.add_argument("--fresh-mlir-contexts", dest="reuse_mlir_contexts", action="store_false",
                   help="let JAX lower every program into a fresh MLIR context, as it does by "
                        "default (the harness shares them: a third less CPU time; see "
                        "properties/mlir_contexts.py)")
    p.add_argument("--self-check", action="store_true",
                   help="also run the harness' own tests: negative tests, checkers, harness")
    p.add_argument("--list", action="store_true", help="list the declared laws and exit")
    p.add_argument("--markdown", action="store_true",
                   help="with --list: the law tables of docs/properties.md")
    p.add_argument("pytest_args", nargs="*", help="extra arguments passed to pytest (after --)")
    args = p.parse_args(argv)
    if args.profile is None:
        args.profile = "thorough" if args.hunt is not None else "default"
    if args.fast_compile is None:
        args.fast_compile = args.hunt is None
    if args.hunt is not None and args.hunt <= 0:
        p.error("--hunt takes a positive number of minutes")
    if args.hunt is not None and args.time_limit is not None:
        p.error("--time-limit with --hunt: a hunt's MINUTES are its time limit")
    if args.hunt is None and args.hunt_seed is not None:
        p.error("--hunt-seed is for --hunt")
    if args.workers is None:
        # a hunt's rounds end by being stopped, which one process survives with all it found
        args.workers = "1" if args.hunt is not None else default_workers()
    if args.workers not in ("0", "1") and importlib.util.find_spec("xdist") is None:
        p.error(f"-n {args.workers} needs pytest-xdist, which is not installed "
                "(pip install pytest-xdist, a dependency of this package); "
                "without -n the laws run in one process")
    return args


#: More workers than this cost more CPU than they save time: each imports JAX and compiles
#: the operations the laws share again.
DEFAULT_MAX_WORKERS = 4


def default_workers():
    """The cores this process may use, at most DEFAULT_MAX_WORKERS ("1": one process,
    also when pytest-xdist is not installed)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        cores = os.cpu_count() or 1
    if cores < 2 or importlib.util.find_spec("xdist") is None:
        return "1"
    return str(min(cores, DEFAULT_MAX_WORKERS))


def law_suites():
    """The suite files that hold the laws (the others test the harness itself)."""
    return sorted(os.path.join(SUITES, f) for f in os.listdir(SUITES) if f.startswith("test_")
                  and f.endswith("_laws.py"))


def database_spec(spec):
    """A directory made absolute (the child runs elsewhere); a URL as it is."""
    return spec if "://" in spec else os.path.abspath(spec)


def command(args):
    suites = [SUITES] if args.self_check else law_suites()
    cmd = [sys.executable, "-m", "pytest", *suites, "-c", CONFIG, "--rootdir", SUITES,
           "-p", "properties.plugin", "-q", "-rs", "--properties-progress",
           "--backend", args.backend, "--profile", args.profile,
           "--reference", args.reference, "--properties-db", database_spec(args.db),
           "--properties-report", os.path.abspath(args.report_dir)]
    if args.jax_cache:
        cmd += ["--jax-cache", os.path.abspath(args.jax_cache)]
    if args.fast_compile:
        cmd += ["--fast-compile"]
    if args.reuse_mlir_contexts:
        cmd += ["--reuse-mlir-contexts"]
    if args.keyword:
        cmd += ["-k", args.keyword]
    if args.workers not in ("0", "1"):
        cmd += ["-n", str(args.workers)]
        if args.hunt is None:
            # the laws of a file draw the same programs: one worker then compiles or
            # reads each of them (a hunt spreads its few long tests instead)
            cmd += ["--dist", "loadfile"]
    return cmd + list(args.pytest_args)


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.list:
        from . import listing
        print(listing.markdown() if args.markdown else "\n".join(listing.text()))
        return 0
    env = dict(os.environ)
    env.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(cache_dir(), "hypothesis"))
    # the plugin's defaults come from the environment: --no-jax-cache and
    # --fresh-mlir-contexts win over it
    if not args.jax_cache:
        env.pop(compilation_cache.ENVIRONMENT_VARIABLE, None)
    if not args.reuse_mlir_contexts:
        env.pop(mlir_contexts.ENVIRONMENT_VARIABLE, None)
    if args.hunt is not None:
        from .hunt import hunt
        return hunt(args, command, env)
    cmd = command(args)
    print("running:", " ".join(cmd), flush=True)
    stopped = process.Stopped()
    status = process.run(cmd, env=env, stopped=stopped,
                         seconds=None if args.time_limit is None else args.time_limit * 60)
    if stopped.why:
        print(f"stopped ({stopped.why}): the report of what was checked is in "
              f"{os.path.abspath(args.report_dir)}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
