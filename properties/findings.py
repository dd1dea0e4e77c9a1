"""Failures as findings a maintainer can act on: each with its message, its
minimal program, its cause and whose it is.

A law test can fail in several distinct ways at once (hypothesis then raises an
ExceptionGroup, one exception per distinct failure); :func:`failure_entries`
turns what a test raised into one entry per failure.  The runner attaches to
each failure's exception the case it failed on and whether the reference
backend shares it (:func:`attach`), so an entry has the case's runnable
program and says whose the failure is.

A failure's *cause* -- law, the check of the law that failed (the line of the
law's code: it fixes the transformation stack), the exception type, and the
primitives of the minimal case for a law's own failure (wrong values), or the
crash's message for any other exception (the message names what broke, while the
programs that reach it differ in every other op) -- groups failures across runs
(``python -m properties --hunt``); ``properties.repro`` writes a group's smallest
case as a script.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
import pickle
import re
import traceback

#: the attribute of an exception that carries its failure's details
_ATTR = "properties_failure"
#: the folder of the laws' own code: the deepest frame there is the check that failed
_LAWS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "laws")
_HELPERS = ("_common.py", "__init__.py")


def case_source(case):
    """Runnable source of ``case`` (a report must not die on a broken case)."""
    try:
        return case.source()
    except Exception as exc:
        return f"# case.source() failed: {exc!r}\n# {case!r}"


def case_primitives(case):
    """The sorted distinct op names a case is made of (programs' nodes, named-axis steps)."""
    found = set()

    def visit(obj, depth):
        if depth > 3 or obj is None or isinstance(obj, (str, bytes, int, float)):
            return
        ops = getattr(type(obj), "ops", None) and getattr(obj, "ops", None)
        if isinstance(ops, tuple) and all(isinstance(o, str) for o in ops):
            found.update(ops)
            return
        op = getattr(obj, "op", None)
        if isinstance(op, str):
            found.add(op)
            return
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                visit(getattr(obj, f.name, None), depth + 1)
        elif isinstance(obj, (tuple, list)):
            for item in obj:
                visit(item, depth + 1)

    try:
        visit(case, 0)
    except Exception:  # grouping is best effort; the failure is reported regardless
        pass
    return tuple(sorted(found))


def failing_check(exc):
    """``module.function:line`` of the deepest frame of the laws' own code in ``exc``'s
    traceback (helpers such as assert_close excluded): which check of the law failed."""
    site = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.abspath(frame.filename)
        if os.path.dirname(path) == _LAWS_DIR and os.path.basename(path) not in _HELPERS:
            site = f"{os.path.basename(path)[:-3]}.{frame.name}:{frame.lineno}"
    return site


def message(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def attach(exc, law, case, reference=None, reference_result=""):
    """Record on ``exc`` the failure of ``law`` on ``case``; ``reference_result`` says what
    the reference backend did on the same case."""
    setattr(exc, _ATTR, {"law": law, "case": case, "reference": reference,
                         "reference_result": reference_result})


def entry(exc, law="", case=None, *, whose="own", note=""):
    """One failure: message, runnable program, cause, whose it is."""
    info = getattr(exc, _ATTR, None) or {}
    law = info.get("law", law)
    case = info.get("case", case)
    program = case_source(case) if case is not None else ""
    reference = info.get("reference")
    return {
        "message": message(exc), "exception": type(exc).__name__,
        "program": program, "case_pickle": _pickled(case),
        "cause": {"law": law, "exception": type(exc).__name__,
                  "primitives": list(case_primitives(case)) if case is not None else [],
                  "check": failing_check(exc), "crash": crash_signature(exc)},
        "whose": whose, "reference": reference,
        "reference_result": info.get("reference_result", ""), "note": note}


def _pickled(case):
    if case is None:
        return ""
    try:
        return base64.b64encode(pickle.dumps(case)).decode()
    except Exception:
        return ""


def _flatten(exc):
    if isinstance(exc, BaseExceptionGroup):
        return [e for sub in exc.exceptions for e in _flatten(sub)]
    return [exc]


def failure_entries(exc, law="", last_case=None):
    """One entry per distinct failure in what a law test raised (an exception, or
    hypothesis' ExceptionGroup of several)."""
    excs = _flatten(exc)
    single = len(excs) == 1
    return [entry(e, law, last_case if single else None) for e in excs]


def crash_signature(exc):
    """What identifies a crash's cause in its message (its first line, numbers and
    addresses left out); "" for a law's own failure (an AssertionError)."""
    if isinstance(exc, AssertionError):
        return ""
    first = (str(exc).strip().splitlines() or [""])[0]
    return re.sub(r"0x[0-9a-fA-F]+|\d+", "#", first)[:300]


def cause_key(cause):
    """A file-name-safe key of a cause: law, check, exception, and the primitives of a
    law's own failure or the first words and a digest of a crash's message."""
    crash = cause.get("crash", "")
    what = ("-".join(cause["primitives"]) or "none") if not crash else (
        "_".join(re.findall(r"[A-Za-z]+", crash)[:4]) + "-"
        + hashlib.sha1(crash.encode()).hexdigest()[:8])
    parts = [cause["law"], cause["check"].split(":")[0].split(".")[-1], cause["exception"], what]
    key = "__".join(re.sub(r"[^A-Za-z0-9_.-]+", "_", p) for p in parts if p)
    return key[:150]


def group(entries):
    """``{cause key: smallest entry}`` over failure entries (smallest program kept), with
    ``count`` the number of failures of each group."""
    groups = {}
    for e in entries:
        add_to_group(groups, ("inherited-" if e["whose"] == "inherited" else "")
                     + cause_key(e["cause"]), e)
    return groups


def add_to_group(groups, key, e):
    """Count failure ``e`` in ``groups[key]``, keeping the smaller program."""
    kept = groups.get(key)
    count = e.get("count", 1) + (kept["count"] if kept else 0)
    if kept is None or _size(e) < _size(kept):
        groups[key] = dict(e, count=count)
    else:
        kept["count"] = count


def _size(e):
    """How big a failure's program is (a failure without one is the biggest)."""
    return len(e["program"]) if e.get("program") else float("inf")
