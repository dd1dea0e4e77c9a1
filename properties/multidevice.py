"""Run the laws that need 8 devices, in a process of their own.

XLA creates its CPU devices once per process, from ``XLA_FLAGS`` as it is
when JAX first starts a backend, so laws over meshes of 8 host devices run
in a subprocess whose environment carries
``--xla_force_host_platform_device_count=8``::

    python -m properties.multidevice --backend jax --profile quick
    python -m properties.multidevice --negative sharded_jit_matches_unsharded:jit_drops_shardings

The pytest suites call :func:`run_in_subprocess` and turn its records into
passes, failures and skips. The last line of output is a JSON list of records.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

FLAG = "--xla_force_host_platform_device_count=8"


def _environment():
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "")
    if FLAG not in flags:
        env["XLA_FLAGS"] = (flags + " " + FLAG).strip()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def device_laws():
    from .laws import LAWS
    return [law for law in LAWS if law.devices > 1]


def run(law_names=None, backend="impl", profile="quick", breaks=()):
    """Run the device laws here (the process must have 8 devices); a list of records."""
    from .backends import LawSkipped
    from .broken import broken
    from .profiles import profile_settings
    from .runner import run_law
    chosen = [law for law in device_laws() if not law_names or law.name in law_names]
    target = broken(backend, *breaks) if breaks else backend
    from .backends import load_backend
    target = load_backend(target)
    records = []
    for law in chosen:
        try:
            rec = run_law(law, target, settings=profile_settings(profile),
                          reference=load_backend("jax"))
            records.append(rec.as_dict())
        except LawSkipped as exc:
            records.append({"law": law.name, "backend": target.name, "outcome": "skipped",
                            "reason": str(exc)})
        except BaseException as exc:  # noqa: BLE001 - reported, not swallowed
            from .runner import RECORDS
            rec = RECORDS[-1].as_dict() if RECORDS and RECORDS[-1].law == law.name else {
                "law": law.name, "backend": target.name}
            rec.update(outcome="failed", reason=f"{type(exc).__name__}: {exc}"[:4000])
            records.append(rec)
    return records


def negative(pairs, max_examples=60):
    """For each (law, breaks): does the law catch the break on JAX, and does the
    found case pass without the last break?  A list of records."""
    from .backends import LawSkipped, load_backend
    from .broken import broken, find_counterexample
    from .laws import CaseFiltered, get
    out = []
    for name, breaks in pairs:
        law = get(name)
        found = find_counterexample(law, broken("jax", *breaks), max_examples=max_examples)
        rec = {"law": name, "breaks": list(breaks), "caught": found is not None}
        if found is not None:
            rec["message"] = str(found[1])[:2000]
            good = broken("jax", *breaks[:-1]) if len(breaks) > 1 else load_backend("jax")
            try:
                law(good, found[0])
                rec["control"] = "passed"
            except (CaseFiltered, LawSkipped):
                rec["control"] = "not applicable"
            except AssertionError as exc:
                rec["control"] = f"failed: {exc}"[:2000]
        out.append(rec)
    return out


def run_in_subprocess(law_names=None, backend="impl", profile="quick", breaks=(), negative_pairs=(),
                      timeout=1800):
    """Run :func:`run` (or :func:`negative`) in a fresh process with 8 host devices."""
    cmd = [sys.executable, "-m", "properties.multidevice", "--backend", str(backend), "--profile", profile]
    for name in law_names or ():
        cmd += ["-k", name]
    for b in breaks:
        cmd += ["--break", b]
    for name, bs in negative_pairs:
        cmd += ["--negative", f"{name}:{'+'.join(bs)}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_environment(), timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    if proc.returncode not in (0, 1) or not lines:  # 1: a law failed, its record says how
        raise RuntimeError(f"properties.multidevice failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m properties.multidevice", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="impl")
    parser.add_argument("--profile", default="quick")
    parser.add_argument("-k", dest="laws", action="append", default=[], help="law name (repeatable)")
    parser.add_argument("--break", dest="breaks", action="append", default=[],
                        help="apply a break from properties.broken (repeatable)")
    parser.add_argument("--negative", action="append", default=[],
                        help="LAW:BREAK[+BREAK]: check that the law catches the break (repeatable)")
    args = parser.parse_args(argv)
    if FLAG not in os.environ.get("XLA_FLAGS", ""):
        # re-run with the flag in place before JAX starts its backend
        return subprocess.call([sys.executable, "-m", "properties.multidevice"] + list(argv or sys.argv[1:]),
                               env=_environment())
    from . import compilation_cache, mlir_contexts
    if os.environ.get(mlir_contexts.ENVIRONMENT_VARIABLE) == "1":
        mlir_contexts.reuse()
    if os.environ.get(compilation_cache.ENVIRONMENT_VARIABLE):   # the law run's, if any
        compilation_cache.enable(os.environ[compilation_cache.ENVIRONMENT_VARIABLE])
    import jax
    if jax.device_count() < 8:
        print(f"only {jax.device_count()} devices despite XLA_FLAGS={os.environ.get('XLA_FLAGS')!r}",
              file=sys.stderr)
        return 2
    if args.negative:
        pairs = [(item.split(":")[0], tuple(item.split(":")[1].split("+"))) for item in args.negative]
        records = negative(pairs)
        failed = [r for r in records if not r["caught"] or r.get("control", "passed").startswith("failed")]
    else:
        records = run(args.laws, args.backend, args.profile, tuple(args.breaks))
        failed = [r for r in records if r["outcome"] == "failed"]
    for r in records:
        print(f"{r['law']}: {r.get('outcome', 'caught' if r.get('caught') else 'not caught')} "
              f"{r.get('reason', r.get('message', ''))[:300]}")
    print(json.dumps(records))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
