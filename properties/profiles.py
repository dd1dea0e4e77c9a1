"""Hypothesis profiles for the law suites, and the example database.

* ``quick``    -- CI: derandomized, few examples per law.  Hypothesis turns
  the example database off when derandomizing, so quick neither saves nor
  replays failures; being derandomized, it fails the same way every run.
* ``default``  -- random, saves failures to the database and replays them first.
* ``thorough`` -- nightly: many examples, same database.

The database is a directory: ``--properties-db`` / ``$PROPERTIES_DB``,
default ``.hypothesis/properties`` under the current directory.
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

PROFILES = {"quick": 10, "default": 60, "thorough": 400}
DEFAULT_DB = os.path.join(".hypothesis", "properties")

#: compiling with XLA makes first examples slow; that is not a test problem
_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]


def profile_settings(name, database=None):
    """The hypothesis settings of profile ``name``."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose from {sorted(PROFILES)}")
    common = dict(max_examples=PROFILES[name], deadline=None, print_blob=True,
                  suppress_health_check=_SUPPRESSED)
    if name == "quick":
        return settings(derandomize=True, database=None, **common)
    path = database or os.environ.get("PROPERTIES_DB") or DEFAULT_DB
    return settings(database=DirectoryBasedExampleDatabase(path), **common)


def register_profiles(database=None):
    """Register ``properties-<name>`` profiles with hypothesis."""
    for name in PROFILES:
        settings.register_profile(f"properties-{name}", profile_settings(name, database))


def load_profile(name, database=None):
    register_profiles(database)
    settings.load_profile(f"properties-{name}")
    return settings.default
