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
from hypothesis.control import current_build_context
from hypothesis.database import ExampleDatabase

from . import findings, tolerances
from .backends import LawSkipped, MissingName
from .laws import CaseFiltered

#: after this many unsupported cases and none checked, stop drawing more
GIVE_UP_AFTER = 5
#: the prefix of the strategies' hypothesis events the report's coverage section counts
REACH_PREFIX = "reach: "


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
    outcome: str = "not run"       # passed / failed / skipped / interrupted
    reason: str = ""               # skip reason or failure message
    counterexample: str = ""       # runnable source of the minimal failing case
    seconds: float = 0.0
    failures: list = field(default_factory=list)    # findings.entry per distinct failure
    inherited: dict = field(default_factory=dict)   # cause key -> smallest findings.entry
    events: Counter = field(default_factory=Counter)  # "reach: " and outcome events
    first_failure: int = 0         # the example (1-based) that failed first; 0: none
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
                "failures": self.failures, "inherited": list(self.inherited.values()),
                "events": dict(self.events), "first_failure": self.first_failure,
                "cpu_seconds": round(self.cpu_seconds, 3),
                "examples_per_cpu_second": round(self.examples_per_cpu_second, 3)}


#: Every record made in this process, newest last.
RECORDS: list[LawRecord] = []


class StopRequest:
    """Why the run was asked to stop (a signal's name), or None.  The pytest plugin's
    signal handler sets it as well as raising KeyboardInterrupt: Python drops a
    KeyboardInterrupt raised inside a garbage-collection callback, and then the next
    example (``LawRun.check``) or the next test raises it again."""
    reason = None


def request_stop(reason):
    StopRequest.reason = reason


class LawRun:
    """One law checked on one backend, one case at a time.

    With a ``reference`` backend (JAX by default in the plugin), a case that fails
    is replayed on it: a failure the reference shares is *inherited* -- recorded
    (the smallest case of each cause) and rejected, not the backend's own failure;
    any other failure carries what the reference did, for the report."""

    def __init__(self, law, backend, nodeid="", reference=None):
        self.law = law
        self.backend = backend
        self.reference = reference if reference is not None and \
            reference.name != backend.name else None
        self.record = LawRecord(law.name, backend.name, nodeid)
        self.last_case = None
        self.smallest_failure = None   # (exception, case): kept if a run is interrupted
        RECORDS.append(self.record)

    def check(self, case):
        """Check the law on ``case``; call it inside a hypothesis test."""
        if StopRequest.reason is not None:
            raise KeyboardInterrupt(StopRequest.reason)
        record = self.record
        record.examples += 1
        self.last_case = case
        self._count_reach_events()
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
        except hypothesis.errors.UnsatisfiedAssumption:
            raise
        except Exception as exc:
            self._failed(case, exc)
            raise
        record.passed += 1
        self._event("checked")

    def _event(self, name):
        self.record.events[name] += 1
        event(name)

    def _count_reach_events(self):
        """The strategies' ``reach: `` events of the case just drawn, counted per law."""
        try:
            events = current_build_context().data.events
        except Exception:  # outside a hypothesis test: nothing drawn
            return
        self.record.events.update(k for k in events if str(k).startswith(REACH_PREFIX))

    def _failed(self, case, exc):
        """``exc`` escaped the law on ``case``: inherited from the reference (rejected),
        or the backend's own failure (counted, re-raised by the caller)."""
        shared, result = self.replay_on_reference(case, exc)
        name = self.reference.name if self.reference is not None else None
        findings.attach(exc, self.law.name, case, name, result)
        if shared:
            e = findings.entry(exc, whose="inherited")
            findings.add_to_group(self.record.inherited, findings.cause_key(e["cause"]), e)
            self._event(f"inherited from {name}")
            hypothesis.reject()
        record = self.record
        record.failed += 1
        record.first_failure = record.first_failure or record.examples
        source = findings.case_source(case)
        if self.smallest_failure is None or len(source) <= len(self.smallest_failure[2]):
            self.smallest_failure = (exc, case, source)
        self._event("failed")

    def replay_on_reference(self, case, exc):
        """``(shared, what the reference did)`` for a case that raised ``exc`` on the
        backend: shared when the reference raises the same exception type, or filters
        the case as a known bug of its own."""
        if self.reference is None:
            return False, ""
        try:
            self.law(self.reference, case)
        except CaseFiltered as ref:
            return ref.reason.startswith("known JAX bug"), f"filtered: {ref.reason}"
        except (LawSkipped, MissingName) as ref:
            return False, f"cannot run the law: {ref}"
        except Exception as ref:
            text = findings.message(ref).splitlines()[0][:300]
            return type(ref) is type(exc), f"fails too: {text}"
        return False, "the law holds"

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
        if isinstance(exc, KeyboardInterrupt):
            self._interrupted()
            return None
        if isinstance(exc, unittest.SkipTest):
            if record.outcome != "skipped":
                record.outcome, record.reason = "skipped", str(exc)
            return None
        if isinstance(exc, (hypothesis.errors.Unsatisfiable,
                            hypothesis.errors.FailedHealthCheck)) \
                and record.unsupported and not record.failed:
            return self._skip()  # rejected because unsupported, not because filtered
        record.failures = findings.failure_entries(exc, self.law.name, self.last_case)
        record.outcome = "failed"
        record.reason = findings.message(exc) if len(record.failures) == 1 else (
            f"{len(record.failures)} distinct failures: " + "; ".join(
                f["message"].splitlines()[0][:200] for f in record.failures))
        # hypothesis replays each minimal case last; the first failure's program
        record.counterexample = next((f["program"] for f in record.failures if f["program"]),
                                     findings.case_source(self.last_case)
                                     if self.last_case is not None else "")
        return None

    def _interrupted(self):
        """Stopped by Ctrl-C, SIGTERM or a time limit: keep what was found."""
        record = self.record
        record.outcome = "interrupted"
        record.reason = f"interrupted after {record.examples} examples"
        if self.smallest_failure is not None:
            exc, case, _ = self.smallest_failure
            record.failures = [findings.entry(
                exc, self.law.name, case,
                note="interrupted before hypothesis finished shrinking: not minimal")]
            record.counterexample = record.failures[0]["program"]
            record.reason += f"; {record.failed} failing examples, the smallest kept"

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


def run_law(law, backend, strategy=None, *, settings=None, nodeid="", examples=(), reference=None):
    """Check ``law`` on cases from ``strategy`` (default: the law's own), outside pytest.

    Raises AssertionError when the law fails, LawSkipped when the backend
    cannot run it; returns the LawRecord otherwise.  ``examples`` run first; failures
    are replayed on ``reference`` (a Backend), if given.
    """
    run = LawRun(law, backend, nodeid, reference=reference)

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
