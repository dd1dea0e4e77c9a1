"""jax.scipy's surface over impl (special functions)."""
from impl.scipy import special  # noqa: F401
from impl.scipy import stats  # noqa: F401,E402
from impl.scipy import linalg  # noqa: F401,E402
from impl.scipy import signal  # noqa: F401,E402
