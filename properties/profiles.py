"""Hypothesis profiles for the law suites, and the example database.

Registered with hypothesis when this module is imported (the pytest plugin
imports it), under the names ``properties-quick``, ``properties-default`` and
``properties-thorough``; ``--profile quick`` and ``--hypothesis-profile
properties-quick`` select the same one.

* ``quick``    -- CI: derandomized, few examples per law.  Hypothesis turns
  the example database off when derandomizing, so quick neither saves nor
  replays failures; being derandomized, it fails the same way every run.
  With ``--hypothesis-seed N`` it draws from that seed instead (hypothesis
  ignores the seed of a derandomized test), so the seed is never ignored.
* ``default``  -- random, saves failures to the database and replays them first.
* ``thorough`` -- nightly: many examples, same database.

The database (:func:`example_database`) is a directory -- ``--properties-db`` /
``$PROPERTIES_DB``, default ``.hypothesis/properties`` under the current
directory (the CLI passes its own, see ``properties/__main__.py``) -- or a Redis
server, ``redis://host:port[/db]`` (hypothesis' RedisExampleDatabase; needs the
``redis`` package, the project's ``[hunt]`` extra): hunts on several machines
sharing one replay each other's failures.
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

#: examples per law; quick's 6 keep all laws within 5 minutes on 2 cores (``-n 2``)
PROFILES = {"quick": 6, "default": 60, "thorough": 400}
PREFIX = "properties-"
DEFAULT_DB = os.path.join(".hypothesis", "properties")

#: compiling with XLA makes first examples slow, which is not a test problem;
#: the law tests' ``law_run`` fixture is function-scoped on purpose: it keeps
#: one law's counts across all of that test's examples.
_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large,
               HealthCheck.function_scoped_fixture]


def example_database(spec):
    """The hypothesis example database ``spec`` names: a directory, or ``redis://...``."""
    if spec.startswith(("redis://", "rediss://", "unix://")):
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError as exc:
            raise ValueError(f"the example database {spec!r} needs the redis package "
                             "(pip install redis, or the project's [hunt] extra)") from exc
        return RedisExampleDatabase(redis.Redis.from_url(spec))
    return DirectoryBasedExampleDatabase(spec)


def profile_settings(name, database=None, seeded=False):
    """The hypothesis settings of profile ``name`` (``quick``, ``default``, ``thorough``);
    ``seeded``: a ``--hypothesis-seed`` was given, so nothing is derandomized."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose from {sorted(PROFILES)}")
    common = dict(max_examples=PROFILES[name], deadline=None, print_blob=True,
                  suppress_health_check=_SUPPRESSED)
    if name == "quick":
        return settings(derandomize=not seeded, database=None, **common)
    path = database or os.environ.get("PROPERTIES_DB") or DEFAULT_DB
    return settings(database=example_database(path), **common)


def register_profiles(database=None, seeded=False):
    """Register (or re-register with another database, or for a seeded run) the
    ``properties-*`` profiles."""
    for name in PROFILES:
        settings.register_profile(PREFIX + name, profile_settings(name, database, seeded))


def profile_name(option_value):
    """``quick`` for ``quick`` or ``properties-quick``; None for other profiles."""
    if not option_value:
        return None
    name = option_value[len(PREFIX):] if option_value.startswith(PREFIX) else option_value
    return name if name in PROFILES else None


#: the profile the law tests use; the plugin sets it from the command line
_active = {"name": "default"}


def select(name):
    """Make ``name`` the law tests' profile (the plugin calls this at configure time)."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose from {sorted(PROFILES)}")
    _active["name"] = name


def active_name():
    return _active["name"]


def law_settings():
    """The settings each law test is decorated with: the selected profile, with
    hypothesis' current verbosity (``--hypothesis-verbosity`` still works)."""
    return settings(settings.get_profile(PREFIX + _active["name"]),
                    verbosity=settings.default.verbosity)


register_profiles()
