"""Primitive families; importing this package registers every rule of every primitive."""
from impl.primitives import elementwise, shape, linalg, call  # noqa: F401
from impl.primitives import collectives  # noqa: F401
from impl.primitives import indexing  # noqa: F401
from impl.primitives import reductions  # noqa: F401
