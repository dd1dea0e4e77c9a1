"""Activates the properties pytest plugin (options --backend, --profile, ...)."""
from properties.plugin import (  # noqa: F401  (pytest finds hooks and fixtures by name)
    backend, check_law, pytest_addoption, pytest_configure, pytest_runtest_logreport,
    pytest_sessionfinish, pytest_sessionstart, pytest_terminal_summary)
