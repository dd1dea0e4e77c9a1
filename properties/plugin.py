"""pytest plugin for the law suites: options, profiles, fixtures, reports.

Loaded by ``properties/suites/conftest.py``, so it is active for
``pytest properties/suites`` and for a bare ``pytest`` at the repo root
(``testpaths`` includes properties/suites).

Options: ``--backend`` (impl | jax | any module with JAX's API),
``--profile`` (quick | default | thorough), ``--properties-db`` (example
database directory), ``--properties-stats`` (directory for per-process
record fragments) and ``--properties-report`` (write reports there).
"""
from __future__ import annotations

import os
import tempfile
import time

import pytest

from . import profiles
from .backends import DEFAULT_BACKEND, load_backend
from .laws import get as get_law
from .runner import RECORDS, run_law


def pytest_addoption(parser):
    group = parser.getgroup("properties", "law suites (properties package)")
    group.addoption("--backend", default=DEFAULT_BACKEND,
                    help="module whose transformations are checked: impl (default), jax, "
                         "or any importable module with JAX's API")
    group.addoption("--profile", default=os.environ.get("PROPERTIES_PROFILE"),
                    choices=sorted(profiles.PROFILES),
                    help="hypothesis profile: quick (CI), default, thorough (nightly); given "
                         "explicitly it also becomes hypothesis' default for other tests")
    group.addoption("--properties-db", default=None,
                    help="directory of the hypothesis example database "
                         f"(default $PROPERTIES_DB or {profiles.DEFAULT_DB})")
    group.addoption("--properties-stats", default=os.environ.get("PROPERTIES_STATS_DIR"),
                    help="directory where each pytest process writes its law records")
    group.addoption("--properties-report", default=None,
                    help="directory to write properties.json and properties.md into")


def _is_worker(config):
    return hasattr(config, "workerinput")


def pytest_configure(config):
    config.addinivalue_line("markers", "law: a law of the transformations")
    name = config.getoption("--profile")
    db = config.getoption("--properties-db")
    if name:  # asked for: make it every hypothesis test's default too
        profiles.load_profile(name, db)
    config._properties_settings = profiles.profile_settings(name or "default", db)
    if not _is_worker(config) and config.getoption("--properties-report"):
        stats = config.getoption("--properties-stats")
        if not stats:
            stats = config.option.properties_stats = tempfile.mkdtemp(prefix="properties-stats-")
        # xdist workers parse their own options; the environment reaches them
        os.environ["PROPERTIES_STATS_DIR"] = stats
    config._properties_outcomes = {}
    config._properties_start = time.perf_counter()


@pytest.fixture(scope="session")
def backend(pytestconfig):
    """The backend named by --backend.  An unimportable name makes every law
    test *error* (not skip): a typo must not look like a run of skips."""
    return load_backend(pytestconfig.getoption("--backend"))


@pytest.fixture
def check_law(backend, request):
    """check_law(name, strategy=None): run one law on drawn cases."""
    def check(name, strategy=None):
        return run_law(get_law(name), backend, strategy, nodeid=request.node.nodeid,
                       settings=request.config._properties_settings)
    return check


def pytest_runtest_logreport(report):
    config = getattr(report, "config", None) or _CONFIG.get("config")
    if config is None:
        return
    outcomes = getattr(config, "_properties_outcomes", None)
    if outcomes is None:
        return
    if report.when == "call" or report.outcome != "passed":
        message = ""
        if report.skipped and isinstance(report.longrepr, tuple):
            message = report.longrepr[2]
        elif report.failed:
            message = str(report.longrepr)[-3000:]
        previous = outcomes.get(report.nodeid)
        if previous is None or previous[0] == "passed":
            outcomes[report.nodeid] = (report.outcome, message)


_CONFIG = {}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG["config"] = session.config


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    stats = config.getoption("--properties-stats")
    if stats:
        tag = config.workerinput["workerid"] if _is_worker(config) else "main"
        from .report import write_fragment
        write_fragment(stats, RECORDS, tag)
    report_dir = config.getoption("--properties-report")
    if report_dir and not _is_worker(config):
        from .report import build, read_fragments, write_reports
        data = build(read_fragments(stats), config._properties_outcomes,
                     backend=config.getoption("--backend"),
                     profile=config.getoption("--profile") or "default",
                     seconds=time.perf_counter() - config._properties_start)
        paths = write_reports(report_dir, data)
        config._properties_report_paths = paths


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    paths = getattr(config, "_properties_report_paths", None)
    if paths:
        terminalreporter.write_line(f"properties reports: {paths[0]}, {paths[1]}")
    terminalreporter.write_line(
        f"properties: backend={config.getoption('--backend')} profile="
        f"{config.getoption('--profile') or 'default'} (jax_enable_x64 turned on for float64 references)")
