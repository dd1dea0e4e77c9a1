"""The names of jax.experimental that impl has."""
from impl.runtime import io_callback  # noqa: F401

__all__ = ["io_callback"]
