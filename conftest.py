"""Root conftest: registers the properties pytest plugin (options --backend, --profile, ...)
for every test run from the repository, so `pytest -n 2 --dist loadfile --profile quick` works here.

The CI budget: tests marked ``slow`` run nightly only (``pytest -m slow`` or ``-m ""``), so
that the README's test command stays under 20 minutes on 2 cores.  The tests under tests/
carry their marks themselves (``@pytest.mark.slow``, or the helpers ``nightly``,
``floats_in_ci`` and ``first_in_ci`` of tests/helpers.py in their parametrisations).  What
stays in CI: every function of the op tables under value, jit, jvp, grad and vmap (one dtype
where a test has both); every law; for the negative tests, one law for each of 10 kinds of
break (every law's own negative test runs nightly).  The tables below mark the law suites'
tests.
"""
import pytest

pytest_plugins = ["properties.plugin"]

# file -> test functions that run nightly only, each with why it is not in CI.
NIGHTLY = {
    # Checks of the harness itself that run whole law suites in subprocesses.
    "properties/suites/test_harness.py": ("test_failures_replay_first_from_the_database",
                                          "test_cases_with_ops_the_backend_lacks_make_the_law_skipped",
                                          "test_hypothesis_options_work_on_the_law_tests",
                                          "test_a_law_that_filters_too_much_fails"),
    # Controls showing the emulations used by negative tests are correct.
    "properties/suites/test_negative.py": ("test_law_holds_on_a_correct_emulation",),
}

# Negative tests: in CI, the first law of each of the first kinds of break (the break set
# in the id), but not the breaks whose laws take longest; every law's negative test runs nightly.
NEGATIVE_BREAK_KINDS_IN_CI = 10
NEGATIVE_BREAKS_NIGHTLY = ("hessian_drops_term",)  # 25 s of hypothesis search over hessians
ONE_PER_BREAK = "properties/suites/test_negative.py::test_law_catches_broken_backend"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    seen_breaks = set()
    for item in items:
        path, _, name = item.nodeid.partition("::")
        function = name.split("[")[0]
        key = f"{path}::{function}"
        nightly = function in NIGHTLY.get(path, ())
        if key == ONE_PER_BREAK and "[" in name:
            breaks = name[name.index("[") + 1:-1].split("-", 1)[-1]
            nightly = (breaks in seen_breaks or breaks in NEGATIVE_BREAKS_NIGHTLY
                       or len(seen_breaks) >= NEGATIVE_BREAK_KINDS_IN_CI)
            if breaks not in NEGATIVE_BREAKS_NIGHTLY:
                seen_breaks.add(breaks)
        if nightly:
            item.add_marker(pytest.mark.slow)
