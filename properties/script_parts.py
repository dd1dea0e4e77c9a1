"""What only the standalone scripts run: ``properties/repro.py`` prints these definitions'
source into each script, next to the law's own code.

Some of the harness' helpers need the harness (hypothesis, JAX as a float64 reference, the
backend adapter); the functions here take their place in a script (:data:`OVERRIDES`,
same names).  ``main`` checks the law once and sets the exit status.  The names they use
and do not define -- ``jax`` (the backend), ``case``, ``LAW``, ``BACKEND``, ``EXPECTED``,
``CHECK`` and, for differential laws, ``SIDE``, ``COMPARE``, ``WHAT``, ``WANT`` -- are
the script's own (:data:`SCRIPT_NAMES`).
"""
# ruff: noqa: F821  (the script's own names, see SCRIPT_NAMES)
from __future__ import annotations

import sys
import traceback
from importlib import metadata

import numpy as np

from .inline import NotStandalone
from .laws._common import CaseFiltered, evaluate

#: names every script defines itself, before these functions run
SCRIPT_NAMES = ("jax", "case", "LAW", "BACKEND", "EXPECTED", "CHECK", "SIDE", "COMPARE",
                "WHAT", "WANT")


def evaluate_reference(f, *args):
    """A script's float64 reference: ``f`` evaluated eagerly on the backend under test
    (in the harness, JAX stages it out; the values agree to float64 rounding)."""
    return evaluate(f, *args)


def report_reach(case):
    """Outside a hypothesis test there are no events to count."""


def _event(what):
    """Outside a hypothesis test there are no events to count."""


def declared_unsupported(backend):
    """What the backend declares unsupported: its ``UNSUPPORTED_FEATURES`` (feature -> why)."""
    return dict(getattr(backend, "UNSUPPORTED_FEATURES", None) or {})


def _require_symbolic(backend, case):
    """The harness probes symbolic zeros first (a backend without them skips the case);
    here the law's own calls show whether the backend has them."""


class MissingFeature(Exception):
    """The case reaches a feature the backend declares unsupported."""


def compared_with_recorded(backend, case):
    """A differential law in a script: the backend's side of it against the reference's
    results, recorded (``WANT``) when the script was written."""
    COMPARE(case, WHAT, SIDE(backend, case), WANT)


def versions():
    """Python's, NumPy's and the backend's versions (and JAX's, when the backend runs on it)."""
    module = BACKEND.split("+")[0]
    version = getattr(jax, "__version__", None)
    if version is None:
        try:
            version = metadata.version(module)
        except metadata.PackageNotFoundError:
            version = "(no version)"
    parts = [f"python {sys.version.split()[0]}", f"numpy {np.__version__}", f"{module} {version}"]
    if module != "jax" and "jax" in sys.modules:
        parts.append(f"jax {sys.modules['jax'].__version__}")
    return ", ".join(parts)


def main():
    """Check the law once on the case: 1 while the bug is present, 0 once it is fixed."""
    print(versions())
    print(f"law {LAW} on {BACKEND}")
    print(f"expected: {EXPECTED}")
    try:
        CHECK(jax, case)
    except CaseFiltered as exc:
        print(f"actual: the case is outside the law's domain now ({exc.reason}): nothing to judge")
        return 0
    except MissingFeature as exc:
        print(f"actual: the backend declares the feature unsupported now ({exc})")
        return 0
    except AssertionError as exc:
        print(f"actual: {exc}")
        print("the bug is present")
        return 1
    except Exception as exc:  # a crash where the reference runs the case: the finding
        print(f"actual: raised {type(exc).__name__}: {exc}")
        traceback.print_exc(limit=-4, file=sys.stdout)
        print("expected no exception: the bug is present")
        return 1
    print("actual: the law holds -- the bug is fixed")
    return 0


#: the harness helpers a script replaces, by name; an exception: a law that calls that
#: helper cannot be written standalone, for that reason
OVERRIDES = {f.__name__: f for f in (evaluate_reference, report_reach, _event, _require_symbolic,
                                     declared_unsupported, MissingFeature)}
OVERRIDES["differential_reference"] = NotStandalone(
    "the law runs the reference backend inside its own code")
