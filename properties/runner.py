"""Run one law on hypothesis-drawn cases, counting what happens.

Used by the pytest suites and by the public checkers.  Filtered cases are
counted per reason and rejected; if too many are filtered the law fails
rather than passing on a handful of cases.  A backend that cannot run the
law (a missing name, NotImplementedError) makes it *skipped*, with the reason.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import hypothesis
import hypothesis.errors
from hypothesis import given

from . import tolerances
from .backends import LawSkipped, MissingName
from .laws import CaseFiltered


@dataclass
class LawRecord:
    """What happened when one law ran against one backend."""
    law: str
    backend: str
    nodeid: str = ""
    examples: int = 0
    filtered: Counter = field(default_factory=Counter)
    unsupported: Counter = field(default_factory=Counter)
    passed: int = 0
    failed: int = 0
    outcome: str = "not run"       # passed / failed / skipped
    reason: str = ""               # skip reason or failure message
    counterexample: str = ""       # runnable source of the minimal failing case
    seconds: float = 0.0

    def as_dict(self):
        return {"law": self.law, "backend": self.backend, "nodeid": self.nodeid,
                "examples": self.examples, "filtered": sum(self.filtered.values()),
                "filtered_reasons": dict(self.filtered),
                "unsupported": sum(self.unsupported.values()),
                "unsupported_reasons": dict(self.unsupported), "passed": self.passed,
                "failed": self.failed, "outcome": self.outcome, "reason": self.reason,
                "counterexample": self.counterexample, "seconds": round(self.seconds, 3)}


#: Every record made in this process (the pytest plugin reports them).
RECORDS: list[LawRecord] = []


def _case_source(case):
    try:
        return case.source()
    except Exception as exc:  # the report must not die on a broken case
        return f"# case.source() failed: {exc!r}\n# {case!r}"


#: after this many unsupported cases and none checked, stop drawing more
GIVE_UP_AFTER = 5


def _give_up_if_nothing_runs(record):
    if record.passed == 0 and record.failed == 0 and \
            sum(record.unsupported.values()) >= GIVE_UP_AFTER:
        _skip_unsupported(record)


def _skip_unsupported(record):
    """Some cases needed what the backend lacks: the law is not a pass."""
    n = sum(record.unsupported.values())
    reasons = "; ".join(f"{k} (x{v})" for k, v in record.unsupported.most_common(5))
    record.outcome = "skipped"
    record.reason = (f"{n} of {record.examples} cases need what {record.backend} lacks: {reasons}."
                     f" The other cases: {record.passed} passed, {record.failed} failed.")
    raise LawSkipped(record.reason)


def run_law(law, backend, strategy=None, *, settings=None, nodeid="", examples=()):
    """Check ``law`` on cases from ``strategy`` (default: the law's own).

    Raises AssertionError when the law fails, LawSkipped when the backend
    cannot run it; returns the LawRecord otherwise.
    """
    strategy = strategy if strategy is not None else law.cases()
    record = LawRecord(law.name, backend.name, nodeid)
    RECORDS.append(record)
    last = {}

    def check(case):
        record.examples += 1
        last["case"] = case
        try:
            law(backend, case)
        except CaseFiltered as exc:
            record.filtered[exc.reason] += 1
            hypothesis.reject()
        except LawSkipped:
            raise
        except MissingName as exc:
            if not exc.op:  # the law needs a transformation the backend lacks
                raise LawSkipped(str(exc)) from exc
            record.unsupported[str(exc)] += 1
            _give_up_if_nothing_runs(record)
            hypothesis.reject()
        except NotImplementedError as exc:
            record.unsupported[f"NotImplementedError: {str(exc)[:200]}"] += 1
            _give_up_if_nothing_runs(record)
            hypothesis.reject()
        except AssertionError:
            record.failed += 1
            raise
        record.passed += 1

    # one database key (and derandomized seed) per law and backend: every law
    # shares this inner function's source, which hypothesis would digest alike
    check._hypothesis_internal_add_digest = f"properties|{law.name}|{backend.name}".encode()
    test = check
    for case in reversed(list(examples)):  # explicit cases run first
        test = hypothesis.example(case)(test)
    test = given(strategy)(test)
    if settings is not None:
        test = settings(test)
    start = time.perf_counter()
    try:
        test()
    except LawSkipped as exc:
        record.outcome, record.reason = "skipped", str(exc)
        raise
    except (hypothesis.errors.Unsatisfiable, hypothesis.errors.FailedHealthCheck) as exc:
        if not record.unsupported or record.failed:
            record.outcome, record.reason = "failed", f"{type(exc).__name__}: {exc}"
            raise
        _skip_unsupported(record)
    except BaseException as exc:
        record.outcome = "failed"
        record.reason = f"{type(exc).__name__}: {exc}"
        if "case" in last:  # hypothesis replays the minimal case last
            record.counterexample = _case_source(last["case"])
        raise
    finally:
        record.seconds = time.perf_counter() - start
    if record.unsupported:
        _skip_unsupported(record)
    filtered = sum(record.filtered.values())
    if record.examples and filtered / record.examples > tolerances.MAX_FILTERED_FRACTION:
        record.outcome = "failed"
        record.reason = (f"law {law.name}: {filtered} of {record.examples} cases filtered "
                         f"({dict(record.filtered)}); the law was not exercised")
        raise AssertionError(record.reason)
    if record.passed == 0:
        record.outcome = "failed"
        record.reason = f"law {law.name}: no case was checked"
        raise AssertionError(record.reason)
    record.outcome = "passed"
    return record
