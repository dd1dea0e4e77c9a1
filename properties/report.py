"""Reports: one row per law test, written as properties-<backend>.{json,md}.

The pytest plugin turns each law test's report (its outcome, and the law
record the test attached in ``user_properties``, which pytest-xdist carries
from the workers) into a row with :func:`law_row`; :func:`build` adds the
negative tests and the run's settings; :func:`write_reports` writes the
files and :func:`terminal_table` the table printed at the end of a run.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re

import jax

from .features import DECLARED
from .laws import LAWS
from .tolerances import AGREE, MAX_FILTERED_FRACTION, REFERENCE

#: which check catches a failure: the laws, or agreement with JAX (the differential laws)
CAUGHT_BY = {"law": "a law of the transformations",
             "differential": "the differential oracle (the backend disagrees with JAX)"}


def _declared(law_name):
    return next((law for law in LAWS if law.name == law_name), None)


def caught_by(law_name):
    """``differential`` for the laws declared differential (they compare with JAX), else ``law``."""
    law = _declared(law_name)
    return "differential" if law is not None and law.differential else "law"


def law_row(nodeid, record, outcome, message=""):
    """The report row of one law test.

    ``record`` is the LawRecord dict the test attached (None when the test
    never got to run its law, e.g. an error in a fixture; only some fields when a
    multi-device law was skipped or crashed in its process); ``outcome`` and
    ``message`` are pytest's.
    """
    name = nodeid.rsplit("::", 1)[-1].removeprefix("test_")
    row = {"law": name, "backend": "?", "nodeid": nodeid, "examples": 0, "filtered": 0,
           "filtered_reasons": {}, "unsupported": 0, "unsupported_reasons": {}, "passed": 0,
           "failed": 0, "reason": "", "counterexample": "", "seconds": 0.0, "cpu_seconds": 0.0,
           "examples_per_cpu_second": 0.0, **(record or {})}
    row["nodeid"] = nodeid
    row["outcome"] = outcome
    if outcome != "passed" and message and not row.get("reason"):
        row["reason"] = message
    law = _declared(row["law"])
    row["topic"] = law.topic if law else None
    row["order"] = LAWS.index(law) if law else len(LAWS)
    row["doc"] = law.doc if law else ""
    row["caught_by"] = caught_by(row["law"]) if outcome == "failed" else None
    return row


def build(rows, negative, *, backend, profile, seconds=None, interrupted=False,
          reference="jax", declared_unsupported=None):
    """The report data: ``rows`` from :func:`law_row`, ``negative`` maps the
    negative tests' nodeids to (outcome, message); ``interrupted``: the run was
    stopped (Ctrl-C, SIGTERM, a time limit) and the rows are what it checked;
    ``declared_unsupported``: what the backend declares unsupported
    (``properties.features.declared_unsupported``; None: it could not be read)."""
    rows = sorted(rows, key=lambda r: (r["order"], r["law"], r["backend"]))
    return {
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "backend": backend, "profile": profile, "interrupted": interrupted,
        "reference": reference,
        "declared_unsupported": None if declared_unsupported is None else dict(declared_unsupported),
        "jax_version": jax.__version__,
        "float64_enabled": bool(jax.config.jax_enable_x64),
        "max_filtered_fraction": MAX_FILTERED_FRACTION,
        "total_seconds": seconds,
        "examples_per_cpu_second": examples_per_cpu_second(rows),
        "summary": {k: sum(1 for r in rows if r["outcome"] == k)
                    for k in ("passed", "failed", "skipped", "interrupted")},
        "laws": rows,
        "negative_tests": [{"test": n.rsplit("::", 1)[-1], "nodeid": n, "outcome": o,
                            "message": m} for n, (o, m) in sorted(negative.items())],
    }


def examples_per_cpu_second(rows):
    """All the laws' examples over all their CPU-seconds (the harness' throughput)."""
    cpu = sum(r.get("cpu_seconds", 0.0) for r in rows)
    return round(sum(r["examples"] for r in rows) / cpu, 3) if cpu > 0 else 0.0


def _md_table(rows, header):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(data):
    out = [f"# Law report: backend `{data['backend']}`, profile `{data['profile']}`"
           + (" (INTERRUPTED)" if data.get("interrupted") else ""), "",
           *(["**Interrupted** (Ctrl-C, SIGTERM or a time limit): the laws below are what the "
              "run checked before it stopped; failures found are in the example database.", ""]
             if data.get("interrupted") else []),
           f"Generated {data['generated']} with jax {data['jax_version']}; float64 enabled: "
           f"{data['float64_enabled']} (the harness turns on `jax_enable_x64` for its float64 "
           "references).", "",
           f"Summary: {data['summary']}" + (f", {data['total_seconds']:.1f} s"
                                            if data.get("total_seconds") else "")
           + f", {data.get('examples_per_cpu_second', 0.0):.2f} examples per CPU-second", ""]
    table = [(r["topic"], f"`{r['law']}`", r["backend"], r["outcome"].upper(), r["examples"],
              r["filtered"], r.get("unsupported", 0), r["passed"], r["failed"],
              f"{r['seconds']:.1f}", f"{r.get('cpu_seconds', 0.0):.1f}",
              f"{r.get('examples_per_cpu_second', 0.0):.2f}") for r in data["laws"]]
    out += [_md_table(table, ["topic", "law", "backend", "outcome", "examples", "filtered",
                              "unsupported", "passed", "failed", "seconds", "CPU s",
                              "examples/CPU s"]), "",
            "*examples*: calls of the law, shrinking included; *unsupported*: cases that need a "
            "numpy/lax function the backend lacks or on which it raised NotImplementedError; a "
            "law with any is reported SKIPPED, never passed (a failure on the other cases still "
            "fails it); *examples/CPU s*: examples per CPU-second of the process running the "
            "law (XLA's compiler threads included).", ""]
    out += declared_section(data)
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
    out += failures_section(data)
    out += inherited_section(data)
    out += coverage_section(data)
    if data["negative_tests"]:
        out += ["## Negative tests (a broken backend or rule each law must catch)", ""]
        out += [_md_table([(f"`{n['test']}`", n["outcome"].upper())
                           for n in data["negative_tests"]], ["test", "outcome"]), ""]
    out += ["## Tolerances", "", "Norm-wise: `max|a - b| <= atol + rtol * max|b|`.", ""]
    out += [_md_table([(str(d), f"{AGREE[d].rtol:g}", f"{AGREE[d].atol:g}",
                        f"{REFERENCE[d].rtol:g}", f"{REFERENCE[d].atol:g}") for d in AGREE],
                      ["dtype", "agree rtol", "agree atol", "reference rtol", "reference atol"]), ""]
    return "\n".join(out)


def declared_section(data):
    """What the backend declares unsupported: a crash on a case reaching one of those
    features counts as unsupported; any other crash on a case the reference runs is a
    finding (a failure, with its minimal program)."""
    declared = data.get("declared_unsupported")
    out = ["## Declared unsupported", ""]
    if declared is None:
        return out + [f"Backend `{data['backend']}`: its declared-unsupported list "
                      f"(`{DECLARED}`) could not be read.", ""]
    if not declared:
        return out + [f"Backend `{data['backend']}` declares no feature unsupported (no "
                      f"`{DECLARED}`, or an empty one): every crash on a case the reference "
                      "runs is a finding.", ""]
    out += [f"Backend `{data['backend']}` declares these features unsupported (`{DECLARED}`): "
            "a crash on a case that reaches one counts as unsupported, any other crash on a "
            "case the reference runs is a finding.", ""]
    return out + [_md_table([(f"`{k}`", v) for k, v in sorted(declared.items())],
                            ["feature", "why"]), ""]


def _failure_lines(f):
    """Markdown of one failure entry (properties.findings.entry)."""
    out = ["```", f["message"].strip()[:4000], "```", ""]
    cause = f.get("cause") or {}
    if cause.get("check") or cause.get("primitives"):
        out += [f"Cause: check `{cause.get('check') or '?'}`, {cause.get('exception')}, "
                f"primitives {', '.join(cause.get('primitives') or []) or '-'}.", ""]
    if f.get("reference"):
        whose = (f"inherited from `{f['reference']}`" if f["whose"] == "inherited"
                 else "the backend's own")
        out += [f"Whose: {whose} (the same case on `{f['reference']}`: "
                f"{f.get('reference_result') or '?'}).", ""]
    if f.get("note"):
        out += [f"Note: {f['note']}.", ""]
    if f.get("program"):
        out += ["Program:" if f.get("note") else "Minimal program:", "", "```python",
                f["program"].rstrip(), "```", ""]
    return out


def failures_section(data):
    """Every distinct failure of every failed (or interrupted) law: message, cause,
    whose it is, program."""
    failed = [r for r in data["laws"] if r["outcome"] == "failed" or r.get("failures")]
    if not failed:
        return []
    out = ["## Failures", ""]
    for r in failed:
        entries = r.get("failures") or []
        out += [f"### `{r['law']}` on `{r['backend']}`"
                + (f": {len(entries)} distinct failures" if len(entries) > 1 else ""), "",
                f"Caught by {CAUGHT_BY[r.get('caught_by') or 'law']}.", ""]
        if not entries:  # no record of the failures (an error outside the law)
            out += ["```", r["reason"].strip()[:4000], "```", ""]
            if r.get("counterexample"):
                out += ["Minimal counterexample:", "", "```python",
                        r["counterexample"].rstrip(), "```", ""]
        for i, f in enumerate(entries, 1):
            if len(entries) > 1:
                out += [f"#### Failure {i} of {len(entries)}", ""]
            out += _failure_lines(f)
    return out


def inherited_section(data):
    """Failures the reference backend shares: not the backend's own, listed per law."""
    rows = [r for r in data["laws"] if r.get("inherited")]
    if not rows:
        return []
    out = [f"## Inherited from `{data.get('reference') or 'the reference'}`", "",
           "Cases that fail on the backend and on the reference alike (the reference raises "
           "the same exception, or filters the case as a known bug of its own): not counted "
           "as the backend's failures.  The smallest case of each cause:", ""]
    for r in rows:
        for f in r["inherited"]:
            out += [f"### `{r['law']}` ({f.get('count', 1)} cases)", ""] + _failure_lines(f)
    return out


def coverage(rows):
    """``{event: {law: count}}`` over the rows' hypothesis events (the strategies'
    ``reach: `` events and the runner's outcome events)."""
    table = {}
    for r in rows:
        for name, n in (r.get("events") or {}).items():
            table.setdefault(name, {})[r["law"]] = n
    return table


def coverage_section(data):
    """What the run reached: each event's total examples and the laws that drew it."""
    table = coverage(data["laws"])
    if not table:
        return []
    out = ["## Coverage", "",
           "Examples per hypothesis event: the strategies' `reach: ` events (which parameters, "
           "dtypes, shape corners and stack shapes the drawn cases reached) and the outcomes. "
           "Shrinking and replays count as examples.", ""]
    lines = [(f"`{name}`", sum(per_law.values()), len(per_law),
              ", ".join(f"{law} {n}" for law, n in sorted(per_law.items(), key=lambda kv: -kv[1])[:6])
              + (" ..." if len(per_law) > 6 else ""))
             for name, per_law in sorted(table.items(), key=lambda kv: (not kv[0].startswith("reach: "), kv[0]))]
    return out + [_md_table(lines, ["event", "examples", "laws", "most in"]), ""]


def terminal_table(rows):
    """Lines of the laws x outcome/examples/time table shown at the end of a run."""
    header = (f"{'topic':<12} {'law':<34} {'outcome':<8} {'examples':>8} {'filtered':>8} "
              f"{'unsupp.':>7} {'seconds':>8} {'ex/CPU-s':>8}  caught by")
    lines = [header, "-" * len(header)]
    for r in sorted(rows, key=lambda r: (r["order"], r["law"])):
        lines.append(f"{r['topic'] or '?':<12} {r['law']:<34} {r['outcome'].upper():<8} "
                     f"{r['examples']:>8} {r['filtered']:>8} {r.get('unsupported', 0):>7} "
                     f"{r['seconds']:>8.1f} {r.get('examples_per_cpu_second', 0.0):>8.2f}  "
                     f"{r.get('caught_by') or ''}")
    return lines


def report_paths(directory, backend):
    """``properties-<backend>.json`` and ``.md`` in ``directory``."""
    stem = "properties-" + re.sub(r"[^A-Za-z0-9_.+-]+", "_", backend)
    return os.path.join(directory, stem + ".json"), os.path.join(directory, stem + ".md")


def write_reports(directory, data):
    os.makedirs(directory, exist_ok=True)
    json_path, md_path = report_paths(directory, data["backend"])
    with open(json_path, "w") as fh:
        json.dump(data, fh, indent=2, default=str)
    with open(md_path, "w") as fh:
        fh.write(render_markdown(data))
    return json_path, md_path
