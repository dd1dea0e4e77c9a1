"""jax.scipy's surface over impl (special functions)."""
from impl.scipy import special  # noqa: F401
