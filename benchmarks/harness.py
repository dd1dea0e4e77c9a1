"""Throughput of the property harness: examples per CPU-second of each law, on impl and on JAX.

    python -m benchmarks.harness                          # the default laws, impl and jax
    python -m benchmarks.harness --all                    # every law that runs on one device
    python -m benchmarks.harness --laws jit_matches_eager --backends impl --repeats 5
    python -m benchmarks.harness --cache off warm --json harness.json
    python -m benchmarks.harness --compile default       # XLA's optimising compiles
    python -m benchmarks.harness --fresh-mlir-contexts   # JAX's fresh MLIR context per program

One measurement is one law on one backend under a hypothesis profile (``quick`` by default:
derandomized, so the cases are the ones ``python -m properties --profile quick`` draws: the
law runs through the plugin's own law test), in a fresh interpreter, so no law reuses the
programs another one compiled.  The child process reports the law's examples, its CPU-seconds
(``time.process_time``: every thread of the process, XLA's compiler threads included) and its
wall seconds, from the first example to the verdict: imports and JAX's start-up are left out.
CPU-seconds are the measure because the machine may be shared; wall seconds are printed too.

Persistent compilation cache (``--cache``, see properties/compilation_cache.py):

* ``off``  -- none: every program compiled in the process (a run without the cache);
* ``cold`` -- an empty cache folder: compiled and written (a first run with the cache);
* ``warm`` -- the folder the ``cold`` run of the same law and backend just filled: what a
  repeated run of the derandomized quick profile pays.

XLA compiles without optimising, as in ``python -m properties`` (``--compile fast``, see
properties/xla_options.py), or with its defaults (``--compile default``); JAX lowers into
shared MLIR contexts, as in ``python -m properties`` (properties/mlir_contexts.py), or into a
fresh one per program, JAX's own way (``--fresh-mlir-contexts``).

Repeats go round-robin over backends, laws and modes, so drift in the machine's load hits all
of them alike.  Reported per law and backend: the median examples per CPU-second over the
repeats with a distribution-free 95% interval, and in total (all the laws' examples over all
their CPU-seconds, per repeat) with the machine.  ``--json`` writes every sample.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

#: a few laws of each kind: finite differences, transformations against each other,
#: jacobians (compiled), vmap against a loop, jit, control flow, custom rules
DEFAULT_LAWS = ("jvp_matches_finite_differences", "vjp_adjoint_of_jvp", "grad_matches_vjp",
                "jacfwd_matches_jacrev", "vmap_matches_loop", "jit_matches_eager",
                "control_flow_matches_python", "custom_vjp_uses_rule")
MODES = ("off", "cold", "warm")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_child(law_name, backend_name, profile, jax_cache, compile_mode="fast",
              shared_contexts=True):
    """In the child: run one law test as the plugin makes it; return its numbers (the
    record's seconds and CPU-seconds, from the first example to the verdict)."""
    from properties import compilation_cache, mlir_contexts, profiles, xla_options
    if compile_mode == "fast":
        xla_options.fast_compile()
    if shared_contexts:
        mlir_contexts.reuse()
    if jax_cache:
        compilation_cache.enable(jax_cache)
    profiles.select(profile)
    from properties.backends import load_backend
    from properties.laws import get
    from properties.plugin import law_test
    from properties.runner import LawRun

    law, backend = get(law_name), load_backend(backend_name)
    test = law_test(law)
    run = LawRun(law, backend)
    error = ""
    try:
        with run.running():
            test(law_run=run)
    except Exception as exc:  # a failing or skipped law still ran its examples
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
    record = run.record
    return {"law": law_name, "backend": backend_name, "profile": profile,
            "compile": compile_mode,
            "mlir_contexts": "shared" if shared_contexts else "fresh",
            "examples": record.examples, "outcome": record.outcome,
            "error": error,
            "cpu_seconds": record.cpu_seconds, "seconds": record.seconds}


def measure(law_name, backend_name, profile, jax_cache, compile_mode="fast",
            shared_contexts=True):
    """One measurement in a fresh interpreter (the numbers ``run_child`` returns)."""
    cmd = [sys.executable, "-m", "benchmarks.harness", "--child", law_name, backend_name,
           "--profile", profile, "--compile", compile_mode]
    if not shared_contexts:
        cmd += ["--fresh-mlir-contexts"]
    if jax_cache:
        cmd += ["--jax-cache", jax_cache]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return json.loads(lines[-1])


def rate(sample):
    return sample["examples"] / sample["cpu_seconds"] if sample["cpu_seconds"] > 0 else 0.0


def collect(laws, backends, modes, repeats, profile, log=print, compile_mode="fast",
            shared_contexts=True):
    """Samples: a list of dicts (run_child's, with ``mode`` and ``repeat``)."""
    samples = []
    for repeat in range(repeats):
        for backend in backends:
            for law in laws:
                folder = tempfile.mkdtemp(prefix="harness-jax-cache-")
                try:
                    for mode in modes:
                        # warm reads what cold wrote; alone, it first fills the folder itself
                        try:
                            if mode == "warm" and "cold" not in modes:
                                measure(law, backend, profile, folder, compile_mode,
                                        shared_contexts)
                            s = measure(law, backend, profile, None if mode == "off" else folder,
                                        compile_mode, shared_contexts)
                        except RuntimeError as exc:  # a crashed child: said, not counted
                            log(f"  [{repeat + 1}/{repeats}] {backend:<4} {mode:<4} {law}: {exc}")
                            continue
                        s.update(mode=mode, repeat=repeat)
                        samples.append(s)
                        log(f"  [{repeat + 1}/{repeats}] {backend:<4} {mode:<4} {law:<40} "
                            f"{s['examples']:>3} examples {s['cpu_seconds']:7.2f} CPU-s "
                            f"{s['seconds']:7.2f} s  {rate(s):6.2f} examples/CPU-s "
                            f"{s['outcome']}")
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
    return samples


def summarize(samples):
    """{(backend, mode, law or 'total'): (median, low, high, n)} of examples per CPU-second."""
    from benchmarks.ratios import median_interval

    groups = {}
    for s in samples:
        groups.setdefault((s["backend"], s["mode"], s["law"]), []).append(rate(s))
    per_repeat = {}
    for s in samples:
        key = (s["backend"], s["mode"], s["repeat"])
        examples, cpu = per_repeat.get(key, (0, 0.0))
        per_repeat[key] = (examples + s["examples"], cpu + s["cpu_seconds"])
    for (backend, mode, _), (examples, cpu) in per_repeat.items():
        groups.setdefault((backend, mode, "total"), []).append(examples / cpu if cpu else 0.0)
    return {key: (statistics.median(v), *median_interval(v), len(v)) for key, v in groups.items()}


def table(summary, laws, backends, modes):
    lines = []
    header = f"{'law':<42}" + "".join(f" {b + ' ' + m:>22}" for b in backends for m in modes)
    lines += [header, "-" * len(header)]
    for law in [*laws, "total"]:
        cells = []
        for b in backends:
            for m in modes:
                med, low, high, _ = summary.get((b, m, law), (0.0, 0.0, 0.0, 0))
                cells.append(f" {med:7.2f} [{low:5.2f}, {high:5.2f}]")
        lines.append(f"{law:<42}" + "".join(f"{c:>23}" for c in cells))
    if "off" in modes and "warm" in modes:
        for b in backends:
            off, warm = summary.get((b, "off", "total")), summary.get((b, "warm", "total"))
            if off and warm and off[0] > 0:
                lines.append(f"{b}: warm cache / no cache, total examples per CPU-second: "
                             f"{warm[0] / off[0]:.2f}x")
    return lines


def single_device_laws():
    from properties.laws import LAWS
    return [law.name for law in LAWS if law.devices == 1]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.harness",
                                description=__doc__.splitlines()[0])
    p.add_argument("--laws", nargs="+", default=None, help=f"default: {' '.join(DEFAULT_LAWS)}")
    p.add_argument("--all", action="store_true", help="every law that runs on one device")
    p.add_argument("--backends", nargs="+", default=["impl", "jax"])
    p.add_argument("--cache", nargs="+", default=list(MODES), choices=MODES,
                   help="persistent compilation cache modes to measure (default: all)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--profile", default="quick", help="hypothesis profile (default: quick)")
    p.add_argument("--compile", default="fast", choices=("fast", "default"),
                   help="XLA compiling without optimising, as python -m properties does "
                        "(fast, the default), or with XLA's defaults")
    p.add_argument("--fresh-mlir-contexts", dest="shared_contexts", action="store_false",
                   help="JAX lowers every program into a fresh MLIR context, its own way (by "
                        "default they are shared, as python -m properties does)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the samples and summary")
    p.add_argument("--child", nargs=2, metavar=("LAW", "BACKEND"), help=argparse.SUPPRESS)
    p.add_argument("--jax-cache", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(*args.child, args.profile, args.jax_cache, args.compile,
                                   args.shared_contexts)))
        return 0
    from benchmarks.ratios import machine_line

    laws = single_device_laws() if args.all else (args.laws or list(DEFAULT_LAWS))
    modes = [m for m in MODES if m in args.cache]
    machine = machine_line("cpu")
    contexts = "shared" if args.shared_contexts else "fresh"
    print(f"harness throughput, profile {args.profile}, {args.compile} compiling, {contexts} "
          f"MLIR contexts, {args.repeats} repeats; {machine}", flush=True)
    samples = collect(laws, args.backends, modes, args.repeats, args.profile,
                      log=lambda line: print(line, flush=True), compile_mode=args.compile,
                      shared_contexts=args.shared_contexts)
    summary = summarize(samples)
    print("\nexamples per CPU-second: median [95% interval]")
    print("\n".join(table(summary, laws, args.backends, modes)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "profile": args.profile, "compile": args.compile,
                       "mlir_contexts": contexts,
                       "repeats": args.repeats,
                       "samples": samples,
                       "summary": [{"backend": b, "mode": m, "law": law, "median": med,
                                    "low": low, "high": high, "n": n}
                                   for (b, m, law), (med, low, high, n) in summary.items()]},
                      fh, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
