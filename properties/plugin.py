"""pytest plugin for the law suites: options, profiles, law tests, reports.

Active for ``pytest`` in the repository (the root conftest.py registers it),
for ``pytest properties/suites`` (its conftest.py does), and for
``python -m properties`` (which passes ``-p properties.plugin``).  Importing
it registers the ``properties-*`` hypothesis profiles and enables float64
in JAX for the test session.

The law tests are generated from the declarations (``properties.laws.LAWS``):
``suites/test_<topic>_laws.py`` holds ``globals().update(law_tests("<topic>"))``,
which makes ``test_<law>(law_run, case)`` for each law of that topic, with
``@given(case=<the law's strategy>)`` and ``@settings(<the profile>)`` on the
test function itself, so hypothesis' pytest options
(``--hypothesis-show-statistics``, ``--hypothesis-seed``, ...) work on it as
on any hypothesis test, and the ``slow`` mark when the law's tier is nightly.
The ``law_run`` fixture counts the cases; a hook turns the counts into the
verdict after the last example and attaches them to the test's report.

Options: ``--backend`` (impl | jax | any module with JAX's API, or one with
breaks of ``properties/broken.py``: ``jax+vmap_slice0``), ``--reference``
(the backend a failing case is replayed on, JAX by default: a failure it shares
is reported as inherited from it), ``--profile`` (quick | default | thorough), ``--properties-db`` (example
database directory), ``--properties-report DIR`` (write the reports there)
``--properties-progress`` (one line per law as it finishes), ``--jax-cache DIR``
(JAX's persistent compilation cache, see properties/compilation_cache.py) and
``--fast-compile`` (XLA compiles without optimising, see properties/xla_options.py) and
``--reuse-mlir-contexts`` (JAX lowers into shared MLIR contexts, see
properties/mlir_contexts.py).
"""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from hypothesis import given, settings

from . import compilation_cache, mlir_contexts, profiles
from .backends import DEFAULT_BACKEND, enable_float64
from .laws import LAWS, NIGHTLY
from .laws import get as get_law
from .runner import LawRun, StopRequest, request_stop

enable_float64()

LAW_RUN = pytest.StashKey[LawRun]()


def law_test(law):
    """The pytest test of ``law``: ``test_<law>(law_run, case)``, a hypothesis test."""
    def test(law_run, case):
        law_run.check(case)
    # hypothesis keys its example database by the test's name (the source is shared)
    test.__name__ = test.__qualname__ = f"test_{law.name}"
    test.__doc__ = law.doc
    test = given(case=law.cases())(test)
    test = profiles.law_settings()(test)
    test = pytest.mark.law(law.name)(test)
    return pytest.mark.slow(test) if law.tier == NIGHTLY else test


def law_tests(topic):
    """``{"test_<law>": test}`` for the laws of ``topic`` that run in this process (the
    8-device laws run in a subprocess of their own: suites/test_sharding_laws.py)."""
    return {f"test_{law.name}": law_test(law) for law in LAWS
            if law.topic == topic and law.devices == 1}


def pytest_addoption(parser):
    group = parser.getgroup("properties", "law suites (properties package)")
    group.addoption("--backend", default=DEFAULT_BACKEND,
                    help="module whose transformations are checked: impl (default), jax, "
                         "or any importable module with JAX's API; a module with breaks of "
                         "properties/broken.py: jax+vmap_slice0")
    group.addoption("--reference", default="jax",
                    help="the backend the differential laws compare with, and on which each "
                         "failing case is replayed (default jax): a failure it shares is "
                         "reported as inherited from it; 'none': no replay, JAX as reference")
    group.addoption("--profile", default=os.environ.get("PROPERTIES_PROFILE"),
                    choices=sorted(profiles.PROFILES),
                    help="hypothesis profile: quick (CI), default, thorough (nightly); also "
                         "hypothesis' default for the session's other tests. "
                         "--hypothesis-profile properties-<name> selects the same")
    group.addoption("--properties-db", default=None,
                    help="directory of the hypothesis example database "
                         f"(default $PROPERTIES_DB or {profiles.DEFAULT_DB})")
    group.addoption("--properties-report", default=None, metavar="DIR",
                    help="write properties-<backend>.json and .md into DIR")
    group.addoption("--properties-progress", action="store_true",
                    help="print one line per law as it finishes (the CLI does)")
    group.addoption("--jax-cache",
                    default=os.environ.get(compilation_cache.ENVIRONMENT_VARIABLE) or None,
                    metavar="DIR",
                    help="JAX's persistent compilation cache folder (default "
                         "$PROPERTIES_JAX_CACHE; unset: no persistent cache)")
    group.addoption("--fast-compile", action="store_true",
                    default=os.environ.get("PROPERTIES_FAST_COMPILE") == "1",
                    help="XLA compiles without optimising: about half the CPU time of a "
                         "law run without the persistent cache (default $PROPERTIES_FAST_COMPILE"
                         "=1; see properties/xla_options.py)")
    group.addoption("--reuse-mlir-contexts", action="store_true",
                    default=os.environ.get(mlir_contexts.ENVIRONMENT_VARIABLE) == "1",
                    help="JAX lowers into shared MLIR contexts instead of a fresh one per "
                         "program: about a third less CPU time and memory in a law run "
                         f"(default ${mlir_contexts.ENVIRONMENT_VARIABLE}=1; see "
                         "properties/mlir_contexts.py)")


def pytest_configure(config):
    config.addinivalue_line("markers", "law(name): the pytest test of a law")
    # a law of the nightly tier (the repository's pyproject declares it too; the CLI's
    # suite.ini does not)
    config.addinivalue_line("markers", "slow: a law of the nightly tier")
    if config.getoption("--fast-compile"):
        from . import xla_options
        xla_options.fast_compile()
    _use_mlir_contexts(config)
    _use_compilation_cache(config)
    db = config.getoption("--properties-db")
    seeded = config.getoption("--hypothesis-seed", None) is not None
    if db or seeded:
        profiles.register_profiles(db, seeded=seeded)
    name = config.getoption("--profile")
    if name:  # asked for: make it every hypothesis test's default too
        settings.load_profile(profiles.PREFIX + name)
    else:
        name = profiles.profile_name(config.getoption("--hypothesis-profile", None))
        if name and (db or seeded):  # hypothesis loaded it before it was re-registered
            settings.load_profile(profiles.PREFIX + name)
    profiles.select(name or "default")
    if not hasattr(config, "workerinput"):  # the controller (or the only process)
        config.pluginmanager.register(LawSession(config), "properties-session")
        if config.getoption("--properties-report"):
            _stop_on_signals()


#: set once the tests are over: a stop arriving while the reports are written (a hunt's
#: round reaching its share of the time then) is recorded, not raised, so that it does
#: not cut the writing short
_finishing = False


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    global _finishing
    _finishing = True


def _interrupt(signum, frame):
    name = signal.Signals(signum).name
    request_stop(name)
    if not _finishing:
        raise KeyboardInterrupt(name)


def _stop_on_signals():
    """A run writing reports stops on SIGINT and SIGTERM alike (pytest handles only
    the first), and for sure: the stop is also recorded (runner.request_stop) and
    acted on at the next example or test.  The report of what it checked is written,
    marked interrupted."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)


def pytest_runtest_teardown(item):
    if StopRequest.reason is not None:  # pytest ends the session as interrupted
        item.session.shouldstop = f"stopped by {StopRequest.reason}"


def _use_mlir_contexts(config):
    """--reuse-mlir-contexts: JAX lowers into shared MLIR contexts (every process of the
    session, and the 8-device laws' subprocess, which reads the environment)."""
    if config.getoption("--reuse-mlir-contexts"):
        mlir_contexts.reuse()
        os.environ[mlir_contexts.ENVIRONMENT_VARIABLE] = "1"


def _use_compilation_cache(config):
    """--jax-cache: compiled programs are read from and written to that folder (every
    process of the session, xdist workers included, before their first compile, and the
    8-device laws' subprocess, which reads the environment)."""
    path = config.getoption("--jax-cache")
    if path:
        compilation_cache.enable(path)
        os.environ[compilation_cache.ENVIRONMENT_VARIABLE] = path


@pytest.fixture(scope="session")
def backend(pytestconfig, reference_backend):
    """The backend named by --backend, compared by the differential laws with --reference
    (JAX when that is 'none').  An unimportable name makes every law test *error* (not
    skip): a typo must not look like a run of skips."""
    from .broken import load
    chosen = load(pytestconfig.getoption("--backend"))
    chosen.reference = reference_backend
    return chosen


@pytest.fixture(scope="session")
def reference_backend(pytestconfig):
    """The backend failing cases are replayed on (None: ``--reference none``)."""
    from .broken import load
    name = pytestconfig.getoption("--reference")
    return None if name in (None, "", "none") else load(name)


@pytest.fixture
def law_run(request, backend, reference_backend):
    """The LawRun of this law test; it lives across all of the test's examples."""
    marker = request.node.get_closest_marker("law")
    if marker is None:
        raise TypeError(f"{request.node.name}: the law_run fixture is for the law tests "
                        "(properties.plugin.law_tests)")
    run = LawRun(get_law(marker.args[0]), backend, request.node.nodeid,
                 reference=reference_backend)
    request.node.stash[LAW_RUN] = run
    return run


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Around a law test's examples: the verdict from its counts, and its record
    attached to the report (xdist sends it to the controller)."""
    run = item.stash.get(LAW_RUN, None)
    if run is None:
        return (yield)
    try:
        with run.running():
            return (yield)
    finally:
        item.user_properties.append(("law_record", run.record.as_dict()))


def _message(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        return report.longrepr[2]
    if report.failed:
        return str(report.longrepr)[-3000:]
    return ""


def _count_laws(nodeids):
    """How many laws the collected tests run: one per law test, and the multi-device laws
    of the one test that runs them all."""
    from .multidevice import device_laws
    names = {law.name for law in LAWS}
    total = 0
    for nodeid in nodeids:
        test = nodeid.rsplit("::", 1)[-1]
        if "_laws.py::" in nodeid and test.removeprefix("test_") in names:
            total += 1
        elif test == "test_device_laws":
            total += len(device_laws())
    return total


def _declared_unsupported(name):
    """What backend ``name`` declares unsupported, for the report (None: it does not load,
    or its declaration is malformed -- the law tests say why)."""
    from .broken import load
    from .features import declared_unsupported
    try:
        return declared_unsupported(load(name))
    except (ValueError, TypeError):
        return None


class LawSession:
    """On the controlling process: rows from the law tests' reports, progress
    lines, the final table and the report files."""

    def __init__(self, config):
        self.config = config
        self.rows = {}
        self.negative = {}
        self.start = time.perf_counter()
        self.progress = config.getoption("--properties-progress")
        self.report_paths = None
        self.total = "?"
        self.letters_written = False  # pytest's -q letters since our last line

    @staticmethod
    def _is_law(report):
        return "law" in report.keywords and "::test_" in report.nodeid

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report, config):
        if self.progress and report.when == "call" and self._is_law(report):
            return report.outcome, "", ""  # the progress line below says it
        return None

    def pytest_runtest_logreport(self, report):
        if report.when != "call" and report.passed:
            return
        several = dict(report.user_properties).get("law_records")
        if several is not None:  # one test running several laws (the multi-device ones)
            for record in several:
                self._add_row(f"{report.nodeid}[{record['law']}]", record, record["outcome"])
            return
        if not self._is_law(report):
            self.letters_written = True
            if "test_negative" in report.nodeid:
                self.negative.setdefault(report.nodeid, (report.outcome, _message(report)))
            return
        if report.nodeid in self.rows:
            return
        record = dict(report.user_properties).get("law_record")
        outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        self._add_row(report.nodeid, record, outcome, _message(report))

    def _add_row(self, nodeid, record, outcome, message=""):
        from .report import law_row
        row = self.rows[nodeid] = law_row(nodeid, record, outcome, message)
        if self.progress:
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            if tr is not None:
                if self.letters_written:  # finish the line of other tests' letters
                    tr.write("\n")
                    self.letters_written = False
                tr.write_line(f"[law {len(self.rows):>2}/{self.total}] {row['law']:<34} "
                              f"{row['outcome'].upper():<8} {row['examples']:>4} examples "
                              f"{row['seconds']:>7.1f} s")

    def pytest_collection_finish(self, session):
        self.total = _count_laws(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        self.total = _count_laws(ids)

    def _add_interrupted(self):
        """The law that was running when the run was interrupted (its test has no
        report): its record, with the failures it had found."""
        from .report import law_row
        from .runner import RECORDS
        for record in RECORDS:
            if record.outcome == "interrupted" and record.nodeid and \
                    record.nodeid not in self.rows:
                self.rows[record.nodeid] = law_row(record.nodeid, record.as_dict(),
                                                   "interrupted")

    def pytest_sessionfinish(self, session, exitstatus):
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if interrupted:
            self._add_interrupted()
        report_dir = self.config.getoption("--properties-report")
        if not report_dir or not self.rows:
            return
        from .report import build, write_reports
        data = build(self.rows.values(), self.negative,
                     backend=self.config.getoption("--backend"), profile=profiles.active_name(),
                     seconds=time.perf_counter() - self.start, interrupted=interrupted,
                     reference=self.config.getoption("--reference"),
                     declared_unsupported=_declared_unsupported(self.config.getoption("--backend")))
        self.report_paths = write_reports(report_dir, data)

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if not self.rows:
            return
        from .report import terminal_table
        terminalreporter.write_sep("=", "laws")
        for line in terminal_table(self.rows.values()):
            terminalreporter.write_line(line)
        terminalreporter.write_line(
            f"backend={config.getoption('--backend')} profile={profiles.active_name()} "
            "(jax_enable_x64 on for the float64 references)")
        if self.report_paths:
            terminalreporter.write_line(f"reports: {self.report_paths[1]}, "
                                        f"{self.report_paths[0]}")
