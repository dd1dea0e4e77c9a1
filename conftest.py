"""Root conftest: registers the properties pytest plugin (options --backend, --profile, ...)
for every test run from the repository, so `pytest -n 2 --dist loadfile --profile quick` works here.

The CI budget: tests marked ``slow`` run nightly only (``pytest -m slow`` or ``-m ""``), so
that the README's test command stays under 20 minutes on 2 cores.  Each test carries its own
tier: the tests under tests/ are marked where they are defined (``@pytest.mark.slow``, or the
helpers ``nightly``, ``floats_in_ci`` and ``first_in_ci`` of tests/helpers.py in their
parametrisations); the law suites' tests (properties/suites) take theirs from the law
declarations (properties/laws) or carry their own mark.
"""

pytest_plugins = ["properties.plugin"]
