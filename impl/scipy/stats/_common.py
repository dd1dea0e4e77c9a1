"""What the distributions share: argument promotion (JAX's promote_args_inexact) and
the standardisation (x - loc) / scale."""
from impl.scipy.special._args import inexact_args, promote_inexact  # noqa: F401


def standardized(x, loc, scale):
    return (x - loc) / scale
