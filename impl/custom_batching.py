"""User batching rules (as jax.custom_batching): see impl.custom_derivatives."""
from impl.custom_derivatives import custom_vmap, custom_vmap_call_p  # noqa: F401

__all__ = ["custom_vmap"]
