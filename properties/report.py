"""Reports: merge per-process law records, write reports/properties.{json,md}.

Every pytest process (the controller or an xdist worker) writes its law
records as a JSON fragment into a stats directory; the controller merges
the fragments with the test outcomes it saw and writes the reports.
"""
from __future__ import annotations

import datetime as _dt
import glob
import json
import os

import jax

from .laws import BY_NAME
from .tolerances import AGREE, MAX_FILTERED_FRACTION, REFERENCE


def write_fragment(directory, records, tag):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"fragment-{tag}-{os.getpid()}.json")
    with open(path, "w") as fh:
        json.dump([r.as_dict() for r in records], fh)
    return path


def read_fragments(directory):
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "fragment-*.json"))):
        with open(path) as fh:
            out.extend(json.load(fh))
    return out


def merge(records, outcomes):
    """One row per law test: its record, with pytest's outcome when known.

    ``outcomes`` maps nodeid -> (outcome, message) as seen by the controller;
    a law test that never reached its record (an error in setup) still
    appears, from its outcome.
    """
    rows = {}
    for r in records:
        if not r.get("nodeid") or (outcomes and r["nodeid"] not in outcomes):
            continue  # checkers, harness tests: not a law run of this session
        rows[r["nodeid"]] = dict(r)
    for nodeid, (outcome, message) in outcomes.items():
        if nodeid in rows:
            row = rows[nodeid]
            row["outcome"] = outcome
            if outcome != "passed" and message and not row.get("reason"):
                row["reason"] = message
        elif "_laws.py::" in nodeid:
            rows[nodeid] = {"law": nodeid.rsplit("::", 1)[-1], "backend": "?", "nodeid": nodeid,
                            "examples": 0, "filtered": 0, "filtered_reasons": {},
                            "unsupported": 0, "unsupported_reasons": {}, "passed": 0,
                            "failed": 0, "outcome": outcome, "reason": message,
                            "counterexample": "", "seconds": 0.0}
    for row in rows.values():
        law = BY_NAME.get(row["law"])
        row["item"] = law.item if law else None
        row["doc"] = law.doc if law else ""
        row["caught_by"] = caught_by(law)
    return sorted(rows.values(), key=lambda r: (r["item"] or 99, r["law"], r["backend"]))


def caught_by(law):
    """Who judges this law's cases: the law alone, or the differential oracle (JAX)."""
    if law is None:
        return "unknown"
    return "differential oracle (JAX)" if law.differential else "law"


def negative_rows(outcomes):
    return [{"test": n.rsplit("::", 1)[-1], "nodeid": n, "outcome": o, "message": m}
            for n, (o, m) in sorted(outcomes.items()) if "test_negative" in n]


def build(records, outcomes, *, backend, profile, seconds=None):
    rows = merge(records, outcomes)
    return {
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "backend": backend, "profile": profile,
        "jax_version": jax.__version__,
        "float64_enabled": bool(jax.config.jax_enable_x64),
        "max_filtered_fraction": MAX_FILTERED_FRACTION,
        "total_seconds": seconds,
        "summary": {k: sum(1 for r in rows if r["outcome"] == k)
                    for k in ("passed", "failed", "skipped")},
        "failures_caught_by": {k: sum(1 for r in rows if r["outcome"] == "failed" and r["caught_by"] == k)
                               for k in ("law", "differential oracle (JAX)")},
        "laws": rows,
        "negative_tests": negative_rows(outcomes),
    }


def _md_table(rows, header):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(data):
    out = [f"# Law report: backend `{data['backend']}`, profile `{data['profile']}`", "",
           f"Generated {data['generated']} with jax {data['jax_version']}; float64 enabled: "
           f"{data['float64_enabled']} (the harness turns on `jax_enable_x64` for its float64 "
           "references).", "",
           f"Summary: {data['summary']}" + (f", {data['total_seconds']:.1f} s"
                                            if data.get("total_seconds") else ""), ""]
    table = [(r["item"], f"`{r['law']}`", r["backend"], r["outcome"].upper(), r["examples"],
              r["filtered"], r.get("unsupported", 0), r["passed"], r["failed"],
              f"{r['seconds']:.1f}") for r in data["laws"]]
    out += [_md_table(table, ["item", "law", "backend", "outcome", "examples", "filtered",
                              "unsupported", "passed", "failed", "seconds"]), "",
            "*unsupported*: cases that need a numpy/lax function the backend lacks or on which "
            "it raised NotImplementedError; a law with any is reported SKIPPED, never passed "
            "(a failure on the other cases still fails it).", ""]
    filtered = [r for r in data["laws"] if r["filtered"]]
    if filtered:
        out += ["## Filtered cases", "",
                f"A law fails when more than {data['max_filtered_fraction']:.0%} of its "
                "cases are filtered.", ""]
        out += [f"- `{r['law']}`: " + ", ".join(f"{k}: {v}" for k, v in
                                                r["filtered_reasons"].items()) for r in filtered]
        out.append("")
    skipped = [r for r in data["laws"] if r["outcome"] == "skipped"]
    if skipped:
        out += ["## Skipped", ""] + [f"- `{r['law']}`: {r['reason']}" for r in skipped] + [""]
    failed = [r for r in data["laws"] if r["outcome"] == "failed"]
    if failed:
        by = data.get("failures_caught_by", {})
        out += ["## Failures", "", "Caught by the laws alone: " + str(by.get("law", 0)) +
                "; by the differential comparison with JAX: " + str(by.get("differential oracle (JAX)", 0)) + ".", ""]
        for r in failed:
            out += [f"### `{r['law']}` on `{r['backend']}`", "", f"Caught by: {r['caught_by']}.", "",
                    "```", r["reason"].strip()[:4000],
                    "```", ""]
            if r["counterexample"]:
                out += ["Minimal counterexample:", "", "```python", r["counterexample"].rstrip(),
                        "```", ""]
    if data["negative_tests"]:
        out += ["## Negative tests (a broken backend or rule each law must catch)", ""]
        out += [_md_table([(f"`{n['test']}`", n["outcome"].upper())
                           for n in data["negative_tests"]], ["test", "outcome"]), ""]
    out += ["## Tolerances", "", "Norm-wise: `max|a - b| <= atol + rtol * max|b|`.", ""]
    out += [_md_table([(str(d), f"{AGREE[d].rtol:g}", f"{AGREE[d].atol:g}",
                        f"{REFERENCE[d].rtol:g}", f"{REFERENCE[d].atol:g}") for d in AGREE],
                      ["dtype", "agree rtol", "agree atol", "reference rtol", "reference atol"]), ""]
    return "\n".join(out)


def write_reports(directory, data):
    os.makedirs(directory, exist_ok=True)
    json_path = os.path.join(directory, "properties.json")
    md_path = os.path.join(directory, "properties.md")
    with open(json_path, "w") as fh:
        json.dump(data, fh, indent=2, default=str)
    with open(md_path, "w") as fh:
        fh.write(render_markdown(data))
    return json_path, md_path
