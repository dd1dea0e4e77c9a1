"""`vectorize` (a function of core-shaped arrays mapped over broadcast loop dimensions
with impl's vmap) and index grids (indices, triangle and diagonal indices)."""
from __future__ import annotations

import functools
import re

import numpy as np

from impl import core
from impl.api import vmap
from impl.core import get_aval
from impl.numpy import _core as c
from impl.numpy import _converters as conv
from impl.numpy._util import asarray, broadcast_to

__all__ = ["vectorize", "indices", "tril_indices", "triu_indices",
           "diag_indices", "tril_indices_from", "triu_indices_from", "diag_indices_from"]

_DIMS = r"\w+"
_CORE = rf"\((?:{_DIMS}(?:,{_DIMS})*)?\)"
_SIGNATURE = re.compile(rf"^{_CORE}(?:,{_CORE})*->{_CORE}(?:,{_CORE})*$")


def _parse_signature(signature):
    sig = signature.replace(" ", "")
    if not _SIGNATURE.match(sig):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    ins, outs = sig.split("->")
    parse = lambda side: [tuple(d for d in group.split(",") if d)  # noqa: E731
                          for group in re.findall(r"\((.*?)\)", side)]
    return parse(ins), parse(outs)


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """Map `pyfunc` over the broadcast leading (loop) dimensions of its arguments; the
    trailing dimensions named in `signature` (NumPy's gufunc syntax) reach `pyfunc`
    whole. Arguments whose position or name is in `excluded` are passed unchanged."""
    core_in, core_out = _parse_signature(signature) if signature else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        mapped = [i for i in range(len(args)) if i not in excluded]
        fixed_kwargs = {k: v for k, v in kwargs.items() if k in excluded}
        mapped_kwargs = {k: v for k, v in kwargs.items() if k not in excluded}
        if mapped_kwargs:
            raise NotImplementedError("vectorize: keyword arguments must be in `excluded`")
        arrays = [asarray(args[i]) for i in mapped]
        cores = core_in or [()] * len(arrays)
        if len(cores) != len(arrays):
            raise TypeError(f"wrong number of positional arguments: expected {len(cores)}, "
                            f"got {len(arrays)}")
        sizes, loops = {}, []
        for x, dims in zip(arrays, cores):
            shape = get_aval(x).shape
            if len(shape) < len(dims):
                raise ValueError(f"input with shape {shape} does not have enough dimensions "
                                 f"for its core dimensions {dims}")
            for d, n in zip(dims, shape[len(shape) - len(dims):]):
                if sizes.setdefault(d, n) != n:
                    raise ValueError(f"inconsistent size for core dimension {d!r}: "
                                     f"{sizes[d]} vs {n}")
            loops.append(shape[:len(shape) - len(dims)])
        loop_shape = tuple(np.broadcast_shapes(*loops)) if loops else ()
        arrays = [broadcast_to(x, loop_shape + get_aval(x).shape[len(lp):])
                  for x, lp in zip(arrays, loops)]

        def call(*xs):
            full = list(args)
            for i, x in zip(mapped, xs):
                full[i] = x
            return pyfunc(*full, **fixed_kwargs)

        f = call
        for _ in loop_shape:
            f = vmap(f)
        out = f(*arrays)
        if core_out is not None and len(core_out) == 1 and isinstance(out, tuple):
            raise ValueError("vectorize: the function returned a tuple where the signature "
                             "has one output")
        return out

    return wrapped


def indices(dimensions, dtype=None, sparse=False):
    dtype = np.dtype(dtype or _index_dtype())
    grids = np.indices(tuple(dimensions), dtype=dtype, sparse=sparse)
    return tuple(conv.asarray(g) for g in grids) if sparse else conv.asarray(grids)


def _index_dtype():
    return core.canonical_dtype(np.int64)


def tril_indices(n, k=0, m=None):
    return tuple(conv.asarray(i.astype(_index_dtype())) for i in np.tril_indices(n, k, m))


def triu_indices(n, k=0, m=None):
    return tuple(conv.asarray(i.astype(_index_dtype())) for i in np.triu_indices(n, k, m))


def diag_indices(n, ndim=2):
    return tuple(conv.asarray(i.astype(_index_dtype())) for i in np.diag_indices(n, ndim))


def tril_indices_from(arr, k=0):
    shape = get_aval(asarray(arr)).shape
    return tril_indices(shape[-2], k, shape[-1])


def triu_indices_from(arr, k=0):
    shape = get_aval(asarray(arr)).shape
    return triu_indices(shape[-2], k, shape[-1])


def diag_indices_from(arr):
    shape = get_aval(asarray(arr)).shape
    if len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(shape[0], len(shape))
