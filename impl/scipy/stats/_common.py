"""What the distributions share: argument promotion (JAX's promote_args_inexact) and
the standardisation (x - loc) / scale."""
from impl.core import get_aval
from impl.primitives import elementwise as ew
from impl.scipy.special._args import inexact_args, promote_inexact  # noqa: F401


def const_typed_args(*args):
    """inexact_args, then strongly typed unless they are weakly typed scalars: the
    functions whose JAX versions compute with constants made like their argument
    (lax._const: a Python scalar only for a weak scalar) return strong types there."""
    args = inexact_args(*args)
    aval = get_aval(args[0])
    if aval.weak_type and aval.ndim:
        args = [ew.convert_element_type(a, aval.dtype, weak_type=False) for a in args]
    return args


def standardized(x, loc, scale):
    return (x - loc) / scale
