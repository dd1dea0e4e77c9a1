"""numpy.convolve and numpy.correlate of 1-D arrays, as one conv_general_dilated."""
from __future__ import annotations

from impl.core import get_aval
from impl.numpy import _ufuncs as uf
from impl.numpy._util import promote
from impl.primitives import indexing as ix
from impl.primitives import shape as sh
from impl.primitives.convolution import conv_general_dilated

__all__ = ["convolve", "correlate"]


def _correlate_1d(name, x, y, mode, flip_kernel, precision, preferred_element_type):
    if get_aval(x).ndim != 1 or get_aval(y).ndim != 1:
        raise ValueError(f"{name}() only support 1-dimensional inputs.")
    if preferred_element_type is None:
        x, y = promote(uf._float_operand(x), uf._float_operand(y))
    nx, ny = get_aval(x).shape[0], get_aval(y).shape[0]
    if nx == 0 or ny == 0:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {get_aval(x).shape} "
                         f"and {get_aval(y).shape}.")
    # The longer array slides under the shorter one; for correlate, swapping them
    # reverses the output.
    swapped = ny > nx
    if swapped:
        x, y, nx, ny = y, x, ny, nx
    if flip_kernel:
        y = ix.rev(y, (0,))
    if mode == "valid":
        padding = ((0, 0),)
    elif mode == "same":
        padding = ((ny // 2, ny - ny // 2 - 1),)
    elif mode == "full":
        padding = ((ny - 1, ny - 1),)
    else:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    out = conv_general_dilated(sh.reshape(x, (1, 1, nx)), sh.reshape(y, (1, 1, ny)), (1,),
                               padding, precision=precision,
                               preferred_element_type=preferred_element_type)
    out = sh.reshape(out, get_aval(out).shape[2:])
    return ix.rev(out, (0,)) if swapped and not flip_kernel else out


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """Discrete linear convolution of two 1-D arrays."""
    return _correlate_1d("convolve", a, v, mode, True, precision, preferred_element_type)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """Cross-correlation of two 1-D arrays."""
    return _correlate_1d("correlate", a, v, mode, False, precision, preferred_element_type)
