"""The everyday jax.numpy surface, built only on impl's primitives."""
import numpy as _np
from numpy import inf, nan, pi, e, newaxis  # noqa: F401
from jax.numpy import dtype, iinfo, finfo, promote_types, result_type  # noqa: F401

from impl.numpy._util import broadcast_to, broadcast_shapes  # noqa: F401,E402
from impl.numpy._ufuncs import *  # noqa: F401,F403,E402
from impl.numpy._ufuncs import abs, round  # noqa: F401,E402
from impl.numpy._core import *  # noqa: F401,F403,E402
from impl.numpy._core import sum  # noqa: F401,E402
from impl.numpy._reductions import *  # noqa: F401,F403,E402
from impl.numpy._reductions import max, min, all, any  # noqa: F401,E402
from impl.numpy._indexing import *  # noqa: F401,F403,E402
from impl.numpy import _methods  # noqa: F401,E402  (array methods of tracers)
from impl.numpy import linalg  # noqa: F401,E402  (after the star imports: the module)
from impl.numpy._convolve import convolve, correlate  # noqa: F401,E402
from impl.numpy._statistics import *  # noqa: F401,F403,E402
from impl.numpy._arrays import *  # noqa: F401,F403,E402
from impl.numpy import _concrete_arrays  # noqa: F401,E402  (jax.Array indexed by tracers)
from impl.numpy._searching import *  # noqa: F401,F403,E402
from impl.numpy._histogram import *  # noqa: F401,F403,E402
from impl.numpy._comparison import *  # noqa: F401,F403,E402
from impl.numpy._vectorize import *  # noqa: F401,F403,E402
from impl.numpy import fft  # noqa: F401,E402  (the module jax.numpy.fft)
from impl.numpy._scalar_types import *  # noqa: F401,F403,E402
from impl.numpy._math import *  # noqa: F401,F403,E402
from impl.numpy._manipulation import *  # noqa: F401,F403,E402
from impl.numpy._polynomials import *  # noqa: F401,F403,E402
from impl.numpy._more import *  # noqa: F401,F403,E402
# after the star imports, which bring the internal converter of the same name
from impl.numpy._converters import array, asarray  # noqa: F401,E402

# Exported: the public names above that jax.numpy also has (nothing impl-only).
import jax.numpy as _jax_numpy  # noqa: E402
__all__ = sorted(_n for _n in dir() if not _n.startswith("_") and hasattr(_jax_numpy, _n))
del _jax_numpy

# JAX's functions take arrays, not Python lists, for their array arguments (jnp.sum([1, 2])
# is a TypeError); only the converters take sequences. Their static arguments must be
# hashable (jnp.round(x, traced_decimals) is a ValueError). One wrapper per exported function.
from impl.numpy._util import ACCEPT_SEQUENCES as _accept, checking_arguments as _check  # noqa: E402
import types as _types  # noqa: E402
globals().update({_n: _check(globals()[_n]) for _n in __all__
                  if _n not in _accept and (isinstance(globals()[_n], _types.FunctionType)
                                            or hasattr(globals()[_n], "with_argument_check"))})
del _accept, _check, _types
