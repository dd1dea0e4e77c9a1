"""Laws of function transformations, checked on random programs.

Importing this package enables float64 in JAX (``jax_enable_x64``): laws
compare against float64 references.
"""
from .backends import Backend, LawSkipped, MissingName, load_backend  # noqa: F401
