"""Type promotion and broadcasting for the array API, over impl's primitives."""
from __future__ import annotations

import numpy as np
import jax
import jax.numpy as jax_jnp
from jax.sharding import NamedSharding, PartitionSpec

from impl import core
from impl.core import Tracer, get_aval
from impl.interpreters import partial_eval as pe
from impl.primitives import elementwise as ew
from impl.primitives import indexing as ix
from impl.primitives import shape as sh


def is_array_like(x):
    return isinstance(x, (Tracer, jax.Array, np.ndarray, np.generic, int, float, bool, complex))


def _arraylike(x):
    return (isinstance(x, (Tracer, jax.Array, np.ndarray)) or np.isscalar(x)
            or getattr(x, "__jax_array__", None) is not None)


def _not_arraylike(fun_name, arg, position):
    return TypeError(f"{fun_name} requires ndarray or scalar arguments, got {type(arg)} at "
                     f"position {position}.")


def check_arraylike(fun_name, *args):
    """JAX's rule for array arguments: arrays and scalars only. A list or tuple where an
    array is expected raises TypeError (jnp.array/asarray are the way to convert one)."""
    for position, arg in enumerate(args):
        if not _arraylike(arg):
            raise _not_arraylike(fun_name, arg, position)


def asarray(a, dtype=None):
    """A value impl's primitives accept: tracers stay as they are, the rest become arrays."""
    return to_array(a, dtype, "asarray")


def staged_constant(x):
    """`x`, a concrete array a jax.numpy function made, as JAX gives it: inside a
    transformation the transformation's value (under jit a literal or a constant of the
    program, with no equation: a tracer whose methods stage equations and whose repr is
    a tracer's), outside any the array itself. A conversion to its own type does it:
    staging answers it with the value, the other transformations hand it on."""
    if core.current_trace() is core.eval_trace or isinstance(x, Tracer):
        return x
    aval = get_aval(x)
    return ew.convert_element_type_p.bind(x, new_dtype=aval.dtype, weak_type=aval.weak_type)


def to_array(x, dtype, fun_name):
    """`asarray` for the public function `fun_name` (named in JAX's dtype warnings)."""
    if dtype is not None:
        dtype = core.user_dtype(dtype, fun_name)
    if isinstance(x, Tracer):
        return x if dtype is None else ew.convert_element_type(x, dtype)
    if isinstance(x, (list, tuple)):
        leaves = jax.tree_util.tree_leaves(x)
        if any(isinstance(e, Tracer) for e in leaves):
            # A (nested) sequence holding tracers: each element converted to the
            # (strongly typed) result dtype, then stacked along a new axis, as JAX does.
            return _stacked(x, result_dtype(*leaves)[0] if dtype is None else dtype)
    return _constant(x, dtype)


def _staging_trace():
    """The trace staging a program (jit, make_jaxpr) that values made now are constants
    of, if any; JAX's constants there are on no mesh."""
    trace = core.current_trace()
    while trace is not None:
        if isinstance(trace, pe.JaxprTrace) and not trace.forward_known:
            return trace
        trace = trace.parent
    return None


def _constant(x, dtype):
    """`x` (no tracer in it) as an array: while a program is staged under a mesh, one of
    its constants, typed on no mesh as JAX's are there (an operation's sharding rule then
    takes it as unsharded, not as replicated on the mesh)."""
    out = jax_jnp.asarray(x, dtype=dtype)
    if (not isinstance(x, jax.Array) and not out.weak_type
            and not jax.sharding.get_abstract_mesh().empty):
        trace = _staging_trace()
        if trace is not None:
            return trace.instantiate(np.asarray(out))
    return out


def _stacked(x, dtype):
    """A nested sequence as one array: the parts holding no tracer are constants."""
    if isinstance(x, Tracer):
        return ew.convert_element_type(x, dtype)
    if isinstance(x, (list, tuple)) and any(isinstance(e, Tracer)
                                            for e in jax.tree_util.tree_leaves(x)):
        return ix.concatenate([sh.expand_dims(_stacked(e, dtype), (0,)) for e in x], 0)
    return _constant(x, dtype)


def result_dtype(*args):
    """JAX's promotion of the operands' types, weak types included: a weakly typed
    operand (a Python scalar, or a value computed from Python scalars only) takes part as
    the Python type of its kind, exactly as JAX's type lattice treats it, so that the
    result and the configured promotion mode (`jax_numpy_dtype_promotion='strict'`) are
    JAX's, also for operands that are tracers."""
    reps = tuple(_lattice_rep(get_aval(a)) for a in args)
    key = (reps, jax.config.jax_numpy_dtype_promotion, jax.config.jax_enable_x64)
    known = _promotions.get(key)
    if known is None:   # (a promotion the mode forbids raises, and is asked again)
        dtype, weak = jax.dtypes.result_type(*reps, return_weak_type_flag=True)
        known = _promotions[key] = (core.canonical_dtype(dtype), bool(weak))
    return known


# result_dtype's answers by operand types and the two settings they depend on: every
# jnp function asks, with the same few combinations, and JAX's lattice walk is slow
_promotions: dict = {}


_WEAK_REPS = {"u": int, "i": int, "f": float, "c": complex}


def _lattice_rep(aval):
    if aval.weak_type and aval.dtype.kind in _WEAK_REPS:
        return _WEAK_REPS[aval.dtype.kind]
    return aval.dtype


def _weak_scalar(a, dtype):
    """The Python scalar `a` as one of the kind of `dtype` (a weak result's)."""
    if dtype.kind == "c":
        return complex(a)
    if dtype.kind in "biu":
        return a
    return float(a)   # float dtypes, ml_dtypes' (bfloat16, ...) included


def promote(*args):
    """Cast operands to their common dtype (keeping Python scalars weak)."""
    dtype, weak = result_dtype(*args)
    out = []
    for a in args:
        aval = get_aval(a)
        if isinstance(a, (int, float, complex, bool)) and not isinstance(a, np.generic):
            # a weak result keeps the scalar a Python scalar, of the result's kind (2 in
            # 2 * x for a weak float x enters the program as 2.0, as in JAX)
            out.append(np.array(a, dtype) if not weak else _weak_scalar(a, dtype))
        elif aval.dtype != dtype or aval.weak_type != weak:
            # A weakly typed operand meeting a strong one is converted even when its dtype
            # already fits, as JAX does: the conversion's transpose gives its cotangent
            # the operand's weak type back.
            out.append(ew.convert_element_type(a, dtype, weak_type=weak))
        else:
            out.append(a)
    return out


def strong(x):
    """`x` without its weak type: JAX's reductions (sum, max, min, ...) give a strongly
    typed result even for a weakly typed operand."""
    aval = get_aval(x)
    return ew.convert_element_type(x, aval.dtype, weak_type=False) if aval.weak_type else x


def broadcast_shapes(*shapes):
    """NumPy's broadcasting, comparing sizes with == only, so that a size that is not a
    static int (the ragged length of a pile element under vmap) broadcasts with itself."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i and not _is_one(s[i])}
        if len(sizes) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: "
                             f"{', '.join(map(str, shapes))}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _is_one(size):
    return isinstance(size, (int, np.integer)) and size == 1


def broadcast_to(array, shape, *, out_sharding=None):
    x = array
    aval = get_aval(x)
    if aval.shape == tuple(shape):
        # Even when nothing grows the result is an array, never the scalar passed in.
        return x if isinstance(x, (Tracer, jax.Array)) else asarray(x)
    shape = tuple(int(d) for d in shape)
    nd = len(shape) - aval.ndim
    if nd < 0:
        raise ValueError(f"cannot broadcast array of shape {aval.shape} to shape {shape}")
    for i, d in enumerate(aval.shape):
        if d != 1 and d != shape[nd + i]:
            raise ValueError(f"Incompatible shapes for broadcasting: {aval.shape} and "
                             f"requested shape {shape}")
    if aval.explicit_sharding is None and out_sharding is None:
        # one broadcast, size-1 axes growing in it, as JAX's broadcast_to stages it
        return sh.broadcast_in_dim(x, shape, tuple(range(nd, len(shape))))
    # size-1 axes that grow are dropped first, then broadcast.
    keep = [i for i, d in enumerate(aval.shape) if d == shape[nd + i]]
    if len(keep) != aval.ndim:
        x = sh.reshape(x, tuple(aval.shape[i] for i in keep))
    return sh.broadcast_in_dim(x, shape, tuple(nd + i for i in keep), out_sharding=out_sharding)


def keep_reduced_axes(out, x_shape, axes):
    """A reduction's result with its reduced `axes` kept, of size 1 (keepdims=True), as
    JAX's expand_dims stages it: a broadcast."""
    shape = tuple(1 if i in axes else d for i, d in enumerate(x_shape))
    return sh.broadcast_in_dim(out, shape, tuple(i for i in range(len(shape)) if i not in axes))


def broadcast_sharding(args, shape, op=None):
    """The sharding operands broadcast together to `shape` share over Explicit mesh
    axes (each result axis sharded as the operands that have it at full size are), so
    that broadcast operands meet elementwise operations sharded alike; None when no
    operand is explicitly sharded."""
    avals = [get_aval(a) for a in args]
    if all(a.explicit_sharding is None for a in avals):
        return None
    entries = [None] * len(shape)
    for a in avals:
        if a.explicit_sharding is None:
            continue
        lead = len(shape) - a.ndim
        for i, (e, d) in enumerate(zip(a.explicit_sharding.spec.partitions, a.shape)):
            if e is None or d != shape[lead + i]:
                continue
            if entries[lead + i] not in (None, e):
                raise core.ShardingTypeError(
                    "broadcast_shardings got incompatible shardings for broadcasting: "
                    + ", ".join(str(tuple(b.sharding.spec.partitions)) for b in avals) + ".")
            entries[lead + i] = e
    names = [n for e in entries if e is not None for n in (e if isinstance(e, tuple) else (e,))]
    if len(set(names)) != len(names):   # one mesh axis would split two result axes
        ranked = ", ".join(
            f"{core.dtype_short_name(a.dtype)}[" + core.spec_dims_str(
                (1,) * (len(shape) - a.ndim) + a.shape,
                (None,) * (len(shape) - a.ndim) + tuple(a.sharding.spec.partitions)) + "]"
            for a in avals)
        raise core.ShardingTypeError(
            f"{op or 'broadcast'} operation with inputs: {ranked} produces an illegally "
            f"sharded result: {core.dtype_short_name(avals[0].dtype)}["
            f"{core.spec_dims_str(shape, entries)}]")
    return NamedSharding(core.common_mesh(avals), PartitionSpec(*entries))


def broadcast_arrays(*args):
    """jax.numpy.broadcast_arrays: the operands broadcast to their common shape, each
    keeping its own dtype."""
    args = [asarray(a) for a in args]
    if not args:
        return []
    shape = broadcast_shapes(*(get_aval(a).shape for a in args))
    sharding = broadcast_sharding(args, shape)
    return [broadcast_to(a, shape, out_sharding=sharding) for a in args]


def broadcast_promoted(*args):
    """Promote then broadcast operands; rank-0 operands are left for the primitive."""
    return broadcast_operands(None, *args)


def broadcast_operands(op, *args):
    """broadcast_promoted for the operands of the elementwise operation `op`: shapes that
    do not broadcast are a TypeError naming the operation, as jax.lax reports them."""
    args = promote(*args)
    shapes = [get_aval(a).shape for a in args]
    if shapes and all(s == shapes[0] for s in shapes):   # nothing to broadcast (common)
        shape = shapes[0]
    elif op is None:
        shape = broadcast_shapes(*shapes)
    else:
        try:
            shape = broadcast_shapes(*shapes)
        except ValueError:
            raise TypeError(f"{op} got incompatible shapes for broadcasting: "
                            f"{', '.join(map(str, shapes))}.") from None
    sharding = broadcast_sharding(args, shape, op)
    if sharding is None and op is not None:
        # As JAX's elementwise functions: operands of lower rank get leading axes of size
        # 1, and the operation itself broadcasts axes of size 1 (and scalars).
        rank = len(shape)
        return [a if get_aval(a).ndim in (0, rank) else sh.broadcast_in_dim(
            a, (1,) * (rank - get_aval(a).ndim) + get_aval(a).shape,
            tuple(range(rank - get_aval(a).ndim, rank))) for a in args]
    return [a if get_aval(a).shape == shape or not get_aval(a).shape
            else broadcast_to(a, shape, out_sharding=sharding) for a in args]


def canonicalize_axis(axis, ndim, what="axis"):
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise ValueError(f"{what} {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else 0


def flat_or_axis(x, axis):
    """`x` and the canonical `axis` an operation runs along; axis None is NumPy's
    convention for the flattened array (along its axis 0)."""
    if axis is None:
        return sh.reshape(x, (get_aval(x).size,)), 0
    return x, canonicalize_axis(axis, get_aval(x).ndim)


def canonicalize_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    axes = tuple(canonicalize_axis(a, ndim) for a in axis)
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis in {axis}")
    return axes


def check_no_out(name, out):
    """jax.numpy has no `out=` (arrays are immutable); refuse it as JAX does."""
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported.")


def mask_where(x, where, fill):
    """`x` where the boolean mask `where` (broadcast to x's shape) holds, else `fill`:
    how a reduction's `where=` leaves the masked-out elements to its identity."""
    if where is None:
        return x
    aval = get_aval(x)
    mask = asarray(where) if not isinstance(where, Tracer) else where
    if get_aval(mask).dtype != np.bool_:
        mask = ew.ne_p.bind(mask, np.zeros((), get_aval(mask).dtype))
    mask = broadcast_to(mask, aval.shape)
    fill = ew.full_like(x, fill)
    return ew.select_n(mask, fill, x)


# Parameter names that hold arrays in jax.numpy's signatures (impl's signatures are JAX's).
# JAX checks these with check_arraylike; shapes, axes, index lists and sequences of arrays
# go by other names (shape, axis, indices_or_sections, arrays, condlist, ...).
ARRAY_PARAMETERS = frozenset({
    "a", "x", "x1", "x2", "y", "ary", "arr", "array", "m", "v", "ar", "ar1", "ar2",
    "test_elements", "condition", "xp", "fp", "p", "weights", "values", "a1", "a2",
    "u", "b", "c", "k", "ind", "indices", "val", "mask", "vals", "coef",
    "fill_value", "prototype", "element", "q", "obj", "w", "lhs", "rhs",
    "z", "A", "sample", "seq_of_zeros", "filt",
})
# Variadic parameters that take arrays one by one (jnp.atleast_3d(*arys), jnp.meshgrid(*xi)).
ARRAY_VARARGS = frozenset({"arys", "xi", "args"})
# Functions whose job is to turn Python sequences into arrays: JAX accepts lists there.
ACCEPT_SEQUENCES = frozenset({
    "array", "asarray", "iscomplexobj", "isrealobj", "isscalar", "iterable",
    "array_equal", "array_equiv",  # these answer False for what cannot be compared
})


# The parameters JAX's jax.numpy functions take as static arguments of their jit: the
# value keys JAX's cache, so an unhashable one (a traced value, an array, a list) is
# JAX's ValueError before anything is computed.
STATIC_PARAMETERS = {
    "allclose": ("equal_nan",), "angle": ("deg",), "append": ("axis",),
    "argpartition": ("kth", "axis"),
    "argsort": ("axis", "kind", "order", "stable", "descending", "dtype"),
    "around": ("decimals",), "convolve": ("mode", "precision", "preferred_element_type"),
    "corrcoef": ("rowvar", "dtype"),
    "correlate": ("mode", "precision", "preferred_element_type"),
    "count_nonzero": ("axis", "keepdims"), "cov": ("rowvar", "bias", "ddof", "dtype"),
    "cross": ("axisa", "axisb", "axisc", "axis"), "cumprod": ("axis", "dtype"),
    "cumsum": ("axis", "dtype"), "diagonal": ("offset", "axis1", "axis2"),
    "diff": ("n", "axis"), "digitize": ("right", "method"),
    "gradient": ("axis", "edge_order"), "inner": ("precision", "preferred_element_type"),
    "isclose": ("equal_nan",), "lexsort": ("axis",),
    "median": ("axis", "overwrite_input", "keepdims"), "nancumprod": ("axis", "dtype"),
    "nancumsum": ("axis", "dtype"), "nanmax": ("axis", "keepdims"),
    "nanmean": ("axis", "dtype", "keepdims"),
    "nanmedian": ("axis", "overwrite_input", "keepdims"), "nanmin": ("axis", "keepdims"),
    "nanpercentile": ("axis", "overwrite_input", "keepdims", "method"),
    "nanprod": ("axis", "dtype", "keepdims"),
    "nanquantile": ("axis", "overwrite_input", "keepdims", "method"),
    "nanstd": ("axis", "dtype", "keepdims"), "nansum": ("axis", "dtype", "keepdims"),
    "nanvar": ("axis", "dtype", "keepdims"), "packbits": ("axis", "bitorder"),
    "partition": ("kth", "axis"),
    "percentile": ("axis", "overwrite_input", "keepdims", "method", "out_sharding"),
    "polyder": ("m",), "polyfit": ("deg", "rcond", "full", "cov"), "polyint": ("m",),
    "polyval": ("unroll",), "put_along_axis": ("axis", "inplace", "mode"),
    "quantile": ("axis", "overwrite_input", "keepdims", "method"),
    "ravel": ("order", "out_sharding"), "resize": ("new_shape",),
    "rollaxis": ("axis", "start"), "rot90": ("k", "axes"), "round": ("decimals",),
    "searchsorted": ("side", "method"),
    "sort": ("axis", "kind", "order", "stable", "descending"),
    "swapaxes": ("axis1", "axis2"), "trace": ("axis1", "axis2", "dtype"),
    "trapezoid": ("axis",), "tril": ("k",), "triu": ("k",),
    "unpackbits": ("axis", "count", "bitorder"), "unstack": ("axis",), "unwrap": ("axis",),
    "vander": ("N", "increasing"), "vdot": ("precision", "preferred_element_type"),
}


def checking_arguments(fn):
    """`fn` raising JAX's errors for the arguments JAX refuses before computing: a list
    or tuple where an array goes (a parameter named in ARRAY_PARAMETERS; TypeError), an
    unhashable value for a static parameter (STATIC_PARAMETERS; ValueError)."""
    import functools
    import inspect
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn
    name = fn.__name__
    kind = inspect.Parameter
    named = (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD, kind.KEYWORD_ONLY)
    checked = {p.name: i for i, p in enumerate(params)
               if p.name in ARRAY_PARAMETERS and p.kind in named}
    static = {p.name: i for i, p in enumerate(params)
              if p.name in STATIC_PARAMETERS.get(name, ()) and p.kind in named}
    varargs = next((i for i, p in enumerate(params)
                    if p.kind == p.VAR_POSITIONAL and p.name in ARRAY_VARARGS), None)
    if not checked and not static and varargs is None:
        return fn
    # Called on every jax.numpy call: positional arguments by index, keywords only when
    # given (a parameter filled positionally cannot also come as a keyword).
    positions = tuple(checked.values())

    def check(args, kwargs):
        nargs = len(args)
        for i in positions:
            if i < nargs and isinstance(args[i], (list, tuple)):
                raise _not_arraylike(name, args[i], i)
        if kwargs:
            for pname, i in checked.items():
                if i >= nargs and isinstance(kwargs.get(pname), (list, tuple)):
                    raise _not_arraylike(name, kwargs[pname], i)
        if varargs is not None:
            for i in range(varargs, nargs):
                if isinstance(args[i], (list, tuple)):
                    raise _not_arraylike(name, args[i], i)
        for pname, i in static.items():
            if i < nargs:
                core.check_static_hashable(args[i])
            elif pname in kwargs:
                core.check_static_hashable(kwargs[pname])

    with_check = getattr(fn, "with_argument_check", None)
    if with_check is not None:   # compiled when eager: its array-only path needs no check
        return with_check(check)

    @functools.wraps(fn)
    def checked_fn(*args, **kwargs):
        check(args, kwargs)
        return fn(*args, **kwargs)
    return checked_fn
