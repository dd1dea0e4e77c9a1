"""Operators and methods of traced arrays, registered into core.tracer_methods."""
from __future__ import annotations

from impl import core
from impl.numpy import _ufuncs as uf
from impl.numpy import _core as c
from impl.numpy import _reductions as red


def _swap(f):
    return lambda self, other: f(other, self)


_OPERATORS = {
    "__neg__": uf.negative, "__pos__": uf.positive, "__abs__": uf.absolute,
    "__invert__": uf.invert,
    "__add__": uf.add, "__radd__": _swap(uf.add),
    "__sub__": uf.subtract, "__rsub__": _swap(uf.subtract),
    "__mul__": uf.multiply, "__rmul__": _swap(uf.multiply),
    "__truediv__": uf.true_divide, "__rtruediv__": _swap(uf.true_divide),
    "__floordiv__": uf.floor_divide, "__rfloordiv__": _swap(uf.floor_divide),
    "__mod__": uf.remainder, "__rmod__": _swap(uf.remainder),
    "__pow__": uf.power, "__rpow__": _swap(uf.power),
    "__matmul__": c.matmul, "__rmatmul__": _swap(c.matmul),
    "__lt__": uf.less, "__le__": uf.less_equal, "__gt__": uf.greater,
    "__ge__": uf.greater_equal, "__eq__": uf.equal, "__ne__": uf.not_equal,
    "__and__": uf.bitwise_and, "__rand__": _swap(uf.bitwise_and),
    "__or__": uf.bitwise_or, "__ror__": _swap(uf.bitwise_or),
    "__xor__": uf.bitwise_xor, "__rxor__": _swap(uf.bitwise_xor),
}

_METHODS = {
    "sum": c.sum, "mean": c.mean, "var": c.var, "std": c.std,
    "reshape": lambda self, *shape, **kw: c.reshape(
        self, shape[0] if len(shape) == 1 else shape, **kw),
    "transpose": lambda self, *axes: c.transpose(self, axes[0] if len(axes) == 1 and
                                                 not isinstance(axes[0], int) else
                                                 (axes or None)),
    "squeeze": c.squeeze, "astype": c.astype, "dot": c.dot, "clip": uf.clip,
    "max": red.max, "min": red.min, "prod": red.prod, "argmax": red.argmax,
    "argmin": red.argmin, "all": red.all, "any": red.any,
}

core.tracer_methods.update(_OPERATORS)
core.tracer_methods.update(_METHODS)
core.tracer_methods["T"] = property(lambda self: c.transpose(self))


# indexing: x[idx] and x.at[idx].set/add/get on traced arrays
from impl.numpy import _indexing as _ix  # noqa: E402

core.tracer_methods["__getitem__"] = _ix.getitem
core.tracer_methods["at"] = property(_ix._IndexUpdateHelper)


# The other array methods of jax.Array that are jax.numpy functions of the array. They are
# looked up on impl.numpy when called: several live in modules imported after this one.
def _numpy_method(name):
    def method(self, *args, **kwargs):
        import impl.numpy as jnp
        return getattr(jnp, name)(self, *args, **kwargs)
    method.__name__ = name
    return method


# (Those taking static arguments must be impl.numpy's public functions, which check them.)
for _name in ("conj", "conjugate", "round", "sort", "argsort", "cumsum", "cumprod", "diagonal",
              "repeat", "take", "trace", "searchsorted", "nonzero", "ptp", "compress",
              "argpartition", "copy", "ravel", "swapaxes"):
    core.tracer_methods.setdefault(_name, _numpy_method(_name))
core.tracer_methods.setdefault("flatten", _numpy_method("ravel"))
core.tracer_methods.setdefault("choose", lambda self, choices, out=None, mode="raise":
                               _numpy_method("choose")(self, choices, out=out, mode=mode))
for _name, _fn in (("real", "real"), ("imag", "imag"), ("mT", "matrix_transpose")):
    core.tracer_methods.setdefault(_name, property(_numpy_method(_fn)))
