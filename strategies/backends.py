"""Finding the custom-rule APIs on a backend module (``jax`` or ``impl``).

JAX keeps ``linear_call`` in ``jax.custom_derivatives`` only, while a
JAX-like module may export it at top level; programs and linear functions
look it up here so they work with either layout.
"""

from __future__ import annotations


def linear_call_of(backend):
    """Return ``backend``'s ``linear_call`` (top level or custom_derivatives)."""
    fn = getattr(backend, "linear_call", None)
    if fn is None:
        fn = getattr(getattr(backend, "custom_derivatives", None), "linear_call", None)
    if fn is None:
        raise TypeError(
            f"backend {getattr(backend, '__name__', backend)!r} has no linear_call "
            "(looked for backend.linear_call and backend.custom_derivatives.linear_call)"
        )
    return fn


def check_backend(backend) -> None:
    """Raise TypeError early when ``backend`` lacks the JAX-style modules."""
    for attr in ("numpy", "lax"):
        if not hasattr(backend, attr):
            raise TypeError(
                f"backend must be a module with JAX's API (e.g. jax or impl); "
                f"{backend!r} has no attribute {attr!r}"
            )
