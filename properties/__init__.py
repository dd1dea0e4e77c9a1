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
import os as _os

# JAX 0.10's CPU runtime deadlocks when independent batched LAPACK calls (triangular_solve,
# cholesky, qr) run at once and fill its thread pool (tests/test_known_jax_bugs.py); drawn
# programs under vmap/hessian hit that.  XLA reads XLA_FLAGS when it creates the CPU client,
# so the harness sets the flag that avoids it on import, unless the user chose a value.
_NO_CONCURRENT_SCHEDULER = "--xla_cpu_enable_concurrency_optimized_scheduler"
if _NO_CONCURRENT_SCHEDULER not in _os.environ.get("XLA_FLAGS", ""):
    _os.environ["XLA_FLAGS"] = f"{_os.environ.get('XLA_FLAGS', '')} {_NO_CONCURRENT_SCHEDULER}=false".strip()

from .backends import Backend, LawSkipped, MissingName, load_backend  # noqa: F401

_CHECKERS = ("check_grads", "check_custom_jvp", "check_custom_vjp", "check_linear_call",
             "check_vmap")

__all__ = ["Backend", "LawSkipped", "MissingName", "load_backend", *_CHECKERS]


def __getattr__(name):
    if name in _CHECKERS:
        from . import checkers
        return getattr(checkers, name)
    raise AttributeError(f"module 'properties' has no attribute {name!r}")
