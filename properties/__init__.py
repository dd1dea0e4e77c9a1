"""Laws of function transformations, checked on random programs.

``properties.laws`` states the laws (plain functions ``law(backend, case)``),
``properties.suites`` checks them with pytest + hypothesis, the checkers
below run them on users' own functions, and ``python -m properties`` runs
everything and writes reports.  See docs/properties.md.

Importing this package enables float64 in JAX (``jax_enable_x64``): laws
compare against float64 references.
"""
from .backends import Backend, LawSkipped, MissingName, load_backend  # noqa: F401
from .checkers import (check_custom_jvp, check_custom_vjp, check_grads,  # noqa: F401
                       check_linear_call, check_vmap)

__all__ = ["Backend", "LawSkipped", "MissingName", "load_backend", "check_grads",
           "check_custom_jvp", "check_custom_vjp", "check_linear_call", "check_vmap"]
