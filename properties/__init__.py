"""Laws of function transformations, checked on random programs.

``properties.laws`` states the laws (plain functions ``law(backend, case)``),
``properties.suites`` checks them with pytest + hypothesis, the checkers
below run them on users' own functions, and ``python -m properties`` runs
everything and writes reports.  See docs/properties.md.

Loading a backend for the laws (``load_backend``, the checkers, the pytest
plugin) enables float64 in JAX (``jax_enable_x64``): laws compare against
float64 references.  The checkers are imported on first use, so that
``properties.backends`` (which the benchmarks share) stays light to import.
"""
from .backends import Backend, LawSkipped, MissingName, load_backend  # noqa: F401

_CHECKERS = ("check_grads", "check_custom_jvp", "check_custom_vjp", "check_linear_call",
             "check_vmap")

__all__ = ["Backend", "LawSkipped", "MissingName", "load_backend", *_CHECKERS]


def __getattr__(name):
    if name in _CHECKERS:
        from . import checkers
        return getattr(checkers, name)
    raise AttributeError(f"module 'properties' has no attribute {name!r}")
