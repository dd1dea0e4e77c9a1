"""Run a law on hypothesis-drawn cases, counting what happens.

:class:`LawRun` is the body of every law test: ``run.check(case)`` checks one
case and counts it (checked, filtered and why, unsupported and why), and
``with run.running():`` around the whole hypothesis test turns the counts into
the verdict.  The pytest law tests (``properties/suites``) put ``@given`` on
the test function itself and call ``check`` in its body; :func:`run_law` does
the same for the checkers and for code outside pytest.

Verdicts: a filtered case is rejected (``hypothesis.reject``) and when more
than ``MAX_FILTERED_FRACTION`` of the cases are filtered the law fails
rather than passing on a handful.  A backend that cannot run the law (a
missing name, NotImplementedError) makes it *skipped*, with the reason --
never passed.  Each outcome is also a hypothesis ``event``, so
``--hypothesis-show-statistics`` shows the counts per law.
"""
from __future__ import annotations

import contextlib
import time
import unittest
from collections import Counter
from dataclasses import dataclass, field

import hypothesis
import hypothesis.errors
from hypothesis import event, given
from hypothesis.database import ExampleDatabase

from . import tolerances
from .backends import LawSkipped, MissingName
from .laws import CaseFiltered

#: after this many unsupported cases and none checked, stop drawing more
GIVE_UP_AFTER = 5


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
    cpu_seconds: float = 0.0       # the process' CPU time (all its threads: XLA's too)

    @property
    def examples_per_cpu_second(self):
        """The harness' throughput on this law: examples checked per CPU-second."""
        return self.examples / self.cpu_seconds if self.cpu_seconds > 0 else 0.0

    def as_dict(self):
        return {"law": self.law, "backend": self.backend, "nodeid": self.nodeid,
                "examples": self.examples, "filtered": sum(self.filtered.values()),
                "filtered_reasons": dict(self.filtered),
                "unsupported": sum(self.unsupported.values()),
                "unsupported_reasons": dict(self.unsupported), "passed": self.passed,
                "failed": self.failed, "outcome": self.outcome, "reason": self.reason,
                "counterexample": self.counterexample, "seconds": round(self.seconds, 3),
                "cpu_seconds": round(self.cpu_seconds, 3),
                "examples_per_cpu_second": round(self.examples_per_cpu_second, 3)}


#: Every record made in this process, newest last.
RECORDS: list[LawRecord] = []


def _case_source(case):
    try:
        return case.source()
    except Exception as exc:  # the report must not die on a broken case
        return f"# case.source() failed: {exc!r}\n# {case!r}"


class LawRun:
    """One law checked on one backend, one case at a time."""

    def __init__(self, law, backend, nodeid=""):
        self.law = law
        self.backend = backend
        self.record = LawRecord(law.name, backend.name, nodeid)
        self.last_case = None
        RECORDS.append(self.record)

    def check(self, case):
        """Check the law on ``case``; call it inside a hypothesis test."""
        record = self.record
        record.examples += 1
        self.last_case = case
        try:
            self.law(self.backend, case)
        except CaseFiltered as exc:
            record.filtered[exc.reason] += 1
            event(f"filtered: {exc.reason}")
            hypothesis.reject()
        except LawSkipped:
            raise
        except MissingName as exc:
            if not exc.op:  # the law needs a transformation the backend lacks
                raise LawSkipped(str(exc)) from exc
            self._unsupported(str(exc))
        except NotImplementedError as exc:
            self._unsupported(f"NotImplementedError: {str(exc)[:200]}")
        except AssertionError:
            record.failed += 1
            event("failed")
            raise
        record.passed += 1
        event("checked")

    def _unsupported(self, reason):
        record = self.record
        record.unsupported[reason] += 1
        event("unsupported by the backend")
        if record.passed == 0 and record.failed == 0 and \
                sum(record.unsupported.values()) >= GIVE_UP_AFTER:
            raise self._skip()  # nothing runs: do not draw the other cases
        hypothesis.reject()

    def _skip(self):
        """Some cases needed what the backend lacks: the law is not a pass."""
        record = self.record
        n = sum(record.unsupported.values())
        reasons = "; ".join(f"{k} (x{v})" for k, v in record.unsupported.most_common(5))
        record.outcome = "skipped"
        record.reason = (f"{n} of {record.examples} cases need what {record.backend} lacks: "
                         f"{reasons}. The other cases: {record.passed} passed, "
                         f"{record.failed} failed.")
        return LawSkipped(record.reason)

    def _fail(self, reason):
        self.record.outcome, self.record.reason = "failed", reason
        return AssertionError(reason)

    def _verdict(self):
        """After all cases ran without an exception: skip, fail or pass."""
        record = self.record
        if record.unsupported:
            raise self._skip()
        filtered = sum(record.filtered.values())
        if record.examples and filtered / record.examples > tolerances.MAX_FILTERED_FRACTION:
            raise self._fail(f"law {record.law}: {filtered} of {record.examples} cases "
                             f"filtered ({dict(record.filtered)}); the law was not exercised")
        if record.passed == 0:
            raise self._fail(f"law {record.law}: no case was checked")
        record.outcome = "passed"

    def _stopped(self, exc):
        """The hypothesis test raised ``exc``: record why, and return the
        exception to raise in its place (None: re-raise ``exc``)."""
        record = self.record
        if isinstance(exc, unittest.SkipTest):
            if record.outcome != "skipped":
                record.outcome, record.reason = "skipped", str(exc)
            return None
        if isinstance(exc, (hypothesis.errors.Unsatisfiable,
                            hypothesis.errors.FailedHealthCheck)) \
                and record.unsupported and not record.failed:
            return self._skip()  # rejected because unsupported, not because filtered
        record.outcome, record.reason = "failed", f"{type(exc).__name__}: {exc}"
        if self.last_case is not None:  # hypothesis replays the minimal case last
            record.counterexample = _case_source(self.last_case)
        return None

    @contextlib.contextmanager
    def running(self):
        """Wrap the whole hypothesis test: time it, then give the verdict."""
        start, cpu_start = time.perf_counter(), time.process_time()
        try:
            yield self
        except BaseException as exc:
            replacement = self._stopped(exc)
            if replacement is not None:
                raise replacement from exc
            raise
        else:
            self._verdict()
        finally:
            self.record.seconds = time.perf_counter() - start
            self.record.cpu_seconds = time.process_time() - cpu_start


class KeyedDatabase(ExampleDatabase):
    """``database`` with every key prefixed: one example store per law and backend.

    :func:`run_law` builds its hypothesis test from one inner function for
    every law, so hypothesis' own key (a digest of the test's source) would
    be the same for all of them."""

    def __init__(self, database, prefix):
        super().__init__()
        self.database = database
        self.prefix = prefix.encode() + b"|"

    def save(self, key, value):
        self.database.save(self.prefix + key, value)

    def fetch(self, key):
        return self.database.fetch(self.prefix + key)

    def delete(self, key, value):
        self.database.delete(self.prefix + key, value)

    def move(self, src, dest, value):
        self.database.move(self.prefix + src, self.prefix + dest, value)


def run_law(law, backend, strategy=None, *, settings=None, nodeid="", examples=()):
    """Check ``law`` on cases from ``strategy`` (default: the law's own), outside pytest.

    Raises AssertionError when the law fails, LawSkipped when the backend
    cannot run it; returns the LawRecord otherwise.  ``examples`` run first.
    """
    run = LawRun(law, backend, nodeid)

    def check(case):
        run.check(case)

    test = check
    for case in reversed(list(examples)):
        test = hypothesis.example(case)(test)
    test = given(strategy if strategy is not None else law.cases())(test)
    if settings is not None:
        if settings.database is not None:
            settings = hypothesis.settings(settings, database=KeyedDatabase(
                settings.database, f"{law.name}|{backend.name}"))
        test = settings(test)
    with run.running():
        test()
    return run.record
