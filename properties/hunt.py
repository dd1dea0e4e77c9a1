"""``python -m properties --hunt MINUTES``: look for bugs until the time is up.

Each round runs a chunk of the laws (``CHUNK`` of them, in a shuffled order that
goes round all of them) with the thorough profile, for at most its share of the time
left in the pass over all laws (a thorough law can take many minutes: without shares
a short hunt would spend its time on its first few laws), drawing from hypothesis' own
fresh randomness (a seed --
``--hypothesis-seed`` or ``@seed`` -- would turn the example database off), as
one ``python -m properties`` run would, writing its report in
``<report dir>/hunt/round-<n>``.  The failures of all rounds are grouped by cause
(law, check of the law -- its transformation stack --, exception type, primitives
of the case; :func:`properties.findings.group`), the smallest program of each
group kept, and each written as ``<report dir>/repro/<group>.py``: a script that
imports only the backend and NumPy (:mod:`properties.repro`; where a law cannot be
printed that way, one that needs the harness, saying so), prints the versions, the
expected and the actual behaviour and exits 1 while the bug is present.
``<report dir>/hunt.md`` and ``hunt.json`` list the groups.  Failures stay in the
example database, so the next hunt (or a plain run) on the same database replays them
first.

Stopped by Ctrl-C or SIGTERM, a hunt stops its round cleanly, writes what it
found and exits 2 (pytest's interrupted status); at the end of its time it exits
1 when it found a failure of the backend's own, else 0.
"""
from __future__ import annotations

import json
import os
import random
import signal
import time

from . import findings, process, repro
from .laws import LAWS
from .report import report_paths

#: laws per round: small enough that a round ends within a short hunt
CHUNK = 6
#: a round needs at least this many seconds (starting pytest and JAX takes several)
MIN_ROUND_SECONDS = 20


def law_chunks(names, rng, size=CHUNK):
    """Chunks of ``names`` without end: each pass over them in a new shuffled order."""
    while True:
        order = list(names)
        rng.shuffle(order)
        for i in range(0, len(order), size):
            yield order[i:i + size]


def keyword(chunk):
    """The pytest -k expression selecting the law tests of ``chunk``."""
    return " or ".join(f"test_{name}" for name in chunk)


def round_entries(report_json):
    """The failure entries of one round's report, and the report."""
    with open(report_json) as fh:
        data = json.load(fh)
    out = []
    for row in data["laws"]:
        out += [dict(f, whose=f.get("whose", "own")) for f in row.get("failures") or []]
        out += [dict(f, whose="inherited") for f in row.get("inherited") or []]
    return out, data


def write_summary(directory, backend, groups, rounds, stopped, reference=None):
    """hunt.json and hunt.md in ``directory``; the scripts of the groups in repro/
    (``reference``: the loaded reference backend, whose results the differential laws'
    scripts record)."""
    rows = []
    for key, e in sorted(groups.items()):
        path, standalone = repro.write_repro(directory, key, e, backend, reference)
        rows.append({"group": key, "whose": e["whose"], "count": e["count"],
                     "cause": e["cause"], "message": e["message"], "script": path,
                     "standalone": standalone,
                     "round": e.get("round"), "reference": e.get("reference"),
                     "reference_result": e.get("reference_result", ""),
                     "program": e["program"]})
    data = {"backend": backend, "rounds": rounds, "interrupted": stopped,
            "groups": rows}
    with open(os.path.join(directory, "hunt.json"), "w") as fh:
        json.dump(data, fh, indent=2, default=str)
    lines = [f"# Hunt on backend `{backend}`" + (f" (interrupted: {stopped})" if stopped else ""),
             "", f"{len(rounds)} rounds; {len(rows)} groups of failures "
             f"({sum(r['whose'] == 'own' for r in rows)} the backend's own).", ""]
    lines += ["| round | laws | pytest status |", "|---|---|---|"]
    lines += [f"| {i} | {', '.join(r['laws'])} | {r['status']} |"
              for i, r in enumerate(rounds, 1)]
    lines += ["", "pytest status: 0 every law passed or was skipped; 1 a law failed; 2 the "
              "round was stopped when its share of the time was up (what it checked is in "
              "its report, its failures in the database); -N the stop reached the process "
              "while it was exiting, by signal N (its report is complete).", ""]
    for r in rows:
        lines += [f"## `{r['group']}` ({r['whose']}, {r['count']} failures)", "",
                  "```", r["message"].strip()[:3000], "```", "",
                  (f"Script: `{r['script']}`" + ("" if r["standalone"] else
                                                  " (needs the harness: see its header)"))
                  if r["script"] else "No script (case not saved).",
                  "", "```python", r["program"].rstrip(), "```", ""]
    with open(os.path.join(directory, "hunt.md"), "w") as fh:
        fh.write("\n".join(lines))
    return data


def round_seconds(left, n, rounds_per_pass):
    """The time round ``n`` (from 1) may take: an equal share of what is ``left`` among
    the rounds still to come in its pass over the laws."""
    still_to_come = rounds_per_pass - (n - 1) % rounds_per_pass
    return min(left, max(left / still_to_come, MIN_ROUND_SECONDS))


def hunt(args, command, env):
    """Hunt for ``args.hunt`` minutes; ``command(args)`` is the pytest command of a run."""
    end = time.monotonic() + args.hunt * 60
    rng = random.Random(args.hunt_seed)
    names = [law.name for law in LAWS]
    if args.keyword:  # a law's name, or a part of the names of the laws to hunt with
        names = [args.keyword] if args.keyword in names else [n for n in names
                                                               if args.keyword in n]
    if not names:
        raise SystemExit(f"--hunt: no law matches -k {args.keyword!r}")
    base_dir = os.path.abspath(args.report_dir)
    reference = _reference(args.reference)
    stopped = process.Stopped()

    def on_signal(signum, frame):  # between rounds (process.run handles them within one)
        stopped.why = signal.Signals(signum).name
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    groups, rounds, entries = {}, [], []
    rounds_per_pass = -(-len(names) // CHUNK)
    try:
        for n, chunk in enumerate(law_chunks(names, rng), 1):
            left = end - time.monotonic()
            if stopped.why or (rounds and left < MIN_ROUND_SECONDS):
                break
            round_dir = os.path.join(base_dir, "hunt", f"round-{n}")
            round_args = _round_args(args, chunk, round_dir)
            print(f"hunt round {n} ({left:.0f} s left): {', '.join(chunk)}", flush=True)
            status = process.run(command(round_args), env=env,
                                 seconds=max(round_seconds(left, n, rounds_per_pass), 1.0),
                                 stopped=stopped)
            if stopped.why == "time limit":
                stopped.why = None  # the round's share is used up: not an interruption
            rounds.append({"laws": chunk, "status": status, "report": round_dir})
            json_path = report_paths(round_dir, args.backend)[0]
            if os.path.exists(json_path):
                found, _ = round_entries(json_path)
                entries += [dict(e, round=n) for e in found]
                groups = findings.group(entries)
            write_summary(base_dir, args.backend, groups, rounds, stopped.why, reference)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    data = write_summary(base_dir, args.backend, groups, rounds, stopped.why, reference)
    own = [g for g in data["groups"] if g["whose"] == "own"]
    print(f"hunt: {len(rounds)} rounds, {len(data['groups'])} groups "
          f"({len(own)} the backend's own): {os.path.join(base_dir, 'hunt.md')}", flush=True)
    for g in data["groups"]:
        print(f"  {g['whose']:<9} {g['group']}: {g['script']}")
    if stopped.why:
        return process.INTERRUPTED
    return 1 if own else 0


def _reference(name):
    """The reference backend the differential laws' scripts record results of (None:
    ``--reference none``, JAX then)."""
    from .broken import load
    return load("jax" if name in (None, "", "none") else name)


def _round_args(args, chunk, round_dir):
    import argparse
    out = argparse.Namespace(**vars(args))
    out.keyword = keyword(chunk)
    out.report_dir = round_dir
    out.pytest_args = list(args.pytest_args)
    return out
