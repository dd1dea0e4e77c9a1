"""Windowed reductions (sum, max, min pooling) with all of their rules.

Primitives:

* `reduce_window_sum` is linear; its transpose spreads each output cotangent back over
  its window: a `pad` that undoes strides and padding, then another windowed sum whose
  stride is the forward base dilation (a convolution with a kernel of ones, transposed).
* `reduce_window_max` / `reduce_window_min` take the tangent of the element that wins
  each window (the first one, on ties, as in JAX): `select_and_gather_add`, linear in
  the tangent. Its transpose, `select_and_scatter_add`, adds each output cotangent at
  the winner of its window -- the max-pool gradient.

Every windowed primitive is batched by giving the mapped axis a window of size 1.
The lowerings use jax.lax.reduce_window and, for the two selection primitives, JAX's
own derivative of it (jax.jvp / jax.vjp of a windowed max or min), which XLA compiles
to its select-and-scatter operations.
"""
from __future__ import annotations

import jax
import numpy as np
from jax import lax

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import ad, batching
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero, is_undefined_primal
from impl.primitives import indexing as ix
from impl.primitives import sharding_rules
from impl.primitives._define import define

_WINDOW_PARAMS = ("window_dimensions", "window_strides", "padding", "base_dilation",
                  "window_dilation")


def _dilated(n, d):
    return 0 if n == 0 else 1 + d * (n - 1)


def _window_shape(name, shape, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation):
    """The output shape of a windowed reduction, or a TypeError naming the bad field."""
    n = len(shape)
    for what, vals in (("window_dimensions", window_dimensions),
                       ("window_strides", window_strides), ("padding", padding),
                       ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
        if len(vals) != n:
            raise TypeError(f"{name}: {what} {vals} must have one entry per operand axis "
                            f"(operand shape {shape})")
    for what, vals in (("window_dimensions", window_dimensions),
                       ("window_strides", window_strides), ("base_dilation", base_dilation),
                       ("window_dilation", window_dilation)):
        if any(v < 1 for v in vals):
            raise TypeError(f"{name}: {what} must be positive, got {vals}")
    out = []
    for d, k, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding,
                                         base_dilation, window_dilation):
        span = lo + _dilated(d, bd) + hi - _dilated(k, wd)
        out.append(0 if span < 0 else span // s + 1)
    return tuple(out)


def _reduce_window_aval(name):
    def rule(x, **params):
        if x.dtype == core.float0:
            raise TypeError(f"{name} does not accept dtype float0")
        return ShapedArray(_window_shape(name, x.shape, **params), x.dtype, x.weak_type)
    return rule


def _windowed_shape(x, **params):
    return _window_shape("reduce_window", x.shape, **params)


def _windowed_shape_of_operand(x, *, kind, **params):
    return _windowed_shape(x, **params)


_WINDOW_SHARDING = sharding_rules.windowed(_windowed_shape)


def _with_unit_window(params, axis):
    """The window parameters with a size-1 window inserted at `axis` (a batch axis)."""
    new = dict(params)
    for key, unit in (("window_dimensions", 1), ("window_strides", 1), ("padding", (0, 0)),
                      ("base_dilation", 1), ("window_dilation", 1)):
        vals = list(params[key])
        vals.insert(axis, unit)
        new[key] = tuple(vals)
    return new


def _make_window_batch(prim):
    """All array operands get the batch axis first, with a unit window over it."""
    def rule(axis_data, vals, dims, **params):
        vals = [batching.bdim_at_front(x, d, axis_data.size) for x, d in zip(vals, dims)]
        return prim.bind(*vals, **_with_unit_window(params, 0)), 0
    return rule


_window_batch = core.RuleMaker(_make_window_batch)


def _identity(kind, dtype):
    """The initial value of a windowed max (-inf, or the smallest integer) or min."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.inexact):
        return np.array(-np.inf if kind == "max" else np.inf, dtype)
    if dtype == np.bool_:
        return np.array(kind != "max", dtype)
    info = np.iinfo(dtype)
    return np.array(info.min if kind == "max" else info.max, dtype)


def _lax_window(kind, x, params):
    """jax.lax.reduce_window computing a windowed max, min or sum of a jax value."""
    op = {"max": lax.max, "min": lax.min, "sum": lax.add}[kind]
    init = np.array(0, x.dtype) if kind == "sum" else _identity(kind, x.dtype)
    return lax.reduce_window(x, init, op, params["window_dimensions"],
                             params["window_strides"], params["padding"],
                             params["base_dilation"], params["window_dilation"])


# ------------------------------------------------------------ reduce_window_sum

def _reduce_window_sum_transpose(ct, x, **params):
    if type(ct) is Zero:
        return [None]
    shape = x.aval.shape
    ct_shape = get_aval(ct).shape
    config = []
    for n, k, o, s, (lo, _), bd, wd in zip(shape, params["window_dimensions"], ct_shape,
                                           params["window_strides"], params["padding"],
                                           params["base_dilation"], params["window_dilation"]):
        before = _dilated(k, wd) - 1 - lo
        after = _dilated(n, bd) + _dilated(k, wd) - 1 - _dilated(o, s) - before
        config.append((before, after, s - 1))
    spread = ix.pad(ct, np.zeros((), get_aval(ct).dtype), config)
    ones = (1,) * len(shape)
    out = reduce_window_sum_p.bind(
        spread, window_dimensions=params["window_dimensions"],
        window_strides=params["base_dilation"], padding=((0, 0),) * len(shape),
        base_dilation=ones, window_dilation=params["window_dilation"])
    return [out]


reduce_window_sum_p = define(
    "reduce_window_sum", abstract_eval=_reduce_window_aval("reduce_window_sum"),
    lowering=lambda x, **params: _lax_window("sum", x, params), jvp=ad.linear_jvp,
    transpose=_reduce_window_sum_transpose, batching=_window_batch,
    sharding_rule=_WINDOW_SHARDING)


# ---------------------------------------------- select_and_gather_add (max jvp)

def _select_aval(name):
    def rule(t, x, *, kind, **params):
        if t.shape != x.shape:
            raise TypeError(f"{name}: tangent {t.str_short()} and operand {x.str_short()} "
                            "must have the same shape")
        return ShapedArray(_window_shape(name, x.shape, **params), t.dtype)
    return rule


def _select_and_gather_lower(t, x, *, kind, **params):
    return jax.jvp(lambda v: _lax_window(kind, v, params), (x,), (t,))[1]


def _select_and_gather_transpose(ct, t, x, *, kind, **params):
    if is_undefined_primal(x):
        raise TypeError("select_and_gather_add is not linear in its operand")
    if any(d != 1 for d in params["window_dilation"]):
        raise NotImplementedError(
            "VJP not implemented for select_and_gather (MaxPool) with window dilation, got "
            f"window_dilation={params['window_dilation']}.")
    if type(ct) is Zero:
        return [None, None]
    dilation = params["base_dilation"]
    dilated = any(d != 1 for d in dilation)
    if dilated:
        # Holes of the dilated operand never win a window: fill them with the identity.
        x = ix.pad(x, _identity(kind, get_aval(x).dtype), tuple((0, 0, d - 1)
                                                                 for d in dilation))
    out = select_and_scatter_add_p.bind(
        ct, x, kind=kind, window_dimensions=params["window_dimensions"],
        window_strides=params["window_strides"], padding=params["padding"])
    if dilated:
        shape = get_aval(out).shape
        out = ix.slice(out, (0,) * len(shape), shape, dilation)
    return [out, None]


select_and_gather_add_p = define(
    "select_and_gather_add", abstract_eval=_select_aval("select_and_gather_add"),
    lowering=_select_and_gather_lower, jvp=ad.linear_in_jvp((0,)),
    transpose=_select_and_gather_transpose, batching=_window_batch,
    sharding_rule=sharding_rules.gathered_window(_windowed_shape_of_operand))


# --------------------------------------------- select_and_scatter_add (its transpose)

def _scatter_aval(source, x, *, kind, window_dimensions, window_strides, padding):
    ones = (1,) * x.ndim
    out = _window_shape("select_and_scatter_add", x.shape, window_dimensions,
                        window_strides, padding, ones, ones)
    if source.shape != out:
        raise TypeError(f"select_and_scatter_add: source {source.str_short()} must have the "
                        f"windowed shape {out} of the operand {x.str_short()}")
    return ShapedArray(x.shape, source.dtype)


def _select_and_scatter_lower(source, x, *, kind, **window):
    ones = (1,) * np.ndim(x)
    params = dict(window, base_dilation=ones, window_dilation=ones)
    return jax.vjp(lambda v: _lax_window(kind, v, params), x)[1](source)[0]


def _select_and_scatter_transpose(ct, source, x, *, kind, **window):
    if is_undefined_primal(x):
        raise TypeError("select_and_scatter_add is not linear in its operand")
    if type(ct) is Zero:
        return [None, None]
    ones = (1,) * get_aval(x).ndim
    return [select_and_gather_add_p.bind(ct, x, kind=kind, base_dilation=ones,
                                         window_dilation=ones, **window), None]


def _select_and_scatter_batch(axis_data, vals, dims, *, kind, window_dimensions,
                              window_strides, padding):
    vals = [batching.bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims)]
    return select_and_scatter_add_p.bind(
        *vals, kind=kind, window_dimensions=(1,) + window_dimensions,
        window_strides=(1,) + window_strides, padding=((0, 0),) + padding), 0


select_and_scatter_add_p = define(
    "select_and_scatter_add", abstract_eval=_scatter_aval,
    lowering=_select_and_scatter_lower, jvp=ad.linear_in_jvp((0,)),
    transpose=_select_and_scatter_transpose, batching=_select_and_scatter_batch,
    sharding_rule=sharding_rules.scattered_window)


# ---------------------------------------------------- reduce_window_max / min

def _make_chooser_jvp(kind):
    def make(prim):
        def rule(primals, tangents, **params):
            (x,), (t,) = primals, tangents
            out = prim.bind(x, **params)
            if type(t) is Zero:
                return out, Zero(ad.tangent_aval(get_aval(out)))
            return out, select_and_gather_add_p.bind(t, x, kind=kind, **params)
        return rule
    return core.RuleMaker(make)


reduce_window_max_p = define(
    "reduce_window_max", abstract_eval=_reduce_window_aval("reduce_window_max"),
    lowering=lambda x, **params: _lax_window("max", x, params),
    jvp=_make_chooser_jvp("max"), batching=_window_batch, sharding_rule=_WINDOW_SHARDING)
reduce_window_min_p = define(
    "reduce_window_min", abstract_eval=_reduce_window_aval("reduce_window_min"),
    lowering=lambda x, **params: _lax_window("min", x, params),
    jvp=_make_chooser_jvp("min"), batching=_window_batch, sharding_rule=_WINDOW_SHARDING)


# ------------------------------------------------------------ user function

def _window_params(shape, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    n = len(shape)
    window_dimensions = tuple(int(k) for k in window_dimensions)
    fill = lambda v: (1,) * n if v is None else tuple(int(i) for i in v)  # noqa: E731
    window_strides, base_dilation, window_dilation = map(
        fill, (window_strides, base_dilation, window_dilation))
    if isinstance(padding, str):
        dilated = tuple(_dilated(k, d) for k, d in zip(window_dimensions, window_dilation))
        padding = lax.padtype_to_pads(shape, dilated, window_strides, padding)
    padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    return dict(window_dimensions=window_dimensions, window_strides=window_strides,
                padding=padding, base_dilation=base_dilation, window_dilation=window_dilation)


def concrete_scalar(x):
    """The value of `x` as a numpy scalar when it is known and scalar, else None."""
    if isinstance(x, core.Tracer):
        x = x.concrete_value()
    if x is None:
        return None
    x = np.asarray(x)
    return x if x.shape == () else None


def _monoid(computation, dtype):
    """'sum', 'max' or 'min' when `computation`, staged on two scalars, is a single add,
    max or min of its two arguments (lax.add, jnp.maximum, lambda a, b: a + b, ...)."""
    from impl.primitives import elementwise as ew
    for kind, jax_fn in (("sum", lax.add), ("max", lax.max), ("min", lax.min)):
        if computation is jax_fn:
            return kind
    scalar = ShapedArray((), dtype)
    try:
        closed = pe.make_closed_jaxpr(lambda a, b: [computation(a, b)], [scalar, scalar])
    except Exception:  # not a function of two arrays impl can trace
        return None
    jaxpr = closed.jaxpr
    kinds = {ew.add_p: "sum", ew.add_any_p: "sum", ew.max_p: "max", ew.min_p: "min"}
    if len(jaxpr.eqns) != 1 or closed.consts:
        return None
    eqn = jaxpr.eqns[0]
    if (eqn.primitive not in kinds or jaxpr.outvars != eqn.outvars
            or {v.id for v in eqn.invars if hasattr(v, "id")} != {v.id for v in jaxpr.invars}):
        return None
    return kinds[eqn.primitive]


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """Reduce each window of `operand` with `computation` (an add, max or min of two
    arrays), starting from `init_value`."""
    if not isinstance(operand, core.Tracer) and isinstance(operand, (list, tuple, dict)):
        raise NotImplementedError("reduce_window: several operands (a pytree) are not "
                                  "supported by impl; reduce one array at a time")
    aval = get_aval(operand)
    kind = _monoid(computation, aval.dtype)
    if kind is None:
        raise NotImplementedError(
            f"reduce_window: computation {getattr(computation, '__name__', computation)!r} "
            "is not supported by impl; use lax.add, lax.max or lax.min")
    params = _window_params(aval.shape, window_dimensions, window_strides, padding,
                            base_dilation, window_dilation)
    init = concrete_scalar(init_value)
    if init is None:
        raise NotImplementedError("reduce_window: init_value must be a concrete scalar in "
                                  "impl (a traced initial value is not supported)")
    _check_init_dtype(kind, init, get_aval(init_value).dtype, aval.dtype)
    prim = {"sum": reduce_window_sum_p, "max": reduce_window_max_p,
            "min": reduce_window_min_p}[kind]
    out = prim.bind(operand, **params)
    identity = np.zeros((), aval.dtype) if kind == "sum" else _identity(kind, aval.dtype)
    if init == identity:
        return out
    return _with_initial(kind, out, np.asarray(init, aval.dtype))


def _check_init_dtype(kind, init, init_dtype, operand_dtype):
    """As jax.lax: an initial value that is its monoid's identity in its own dtype (a
    Python 0 for a sum) may have any dtype; any other must have the operand's."""
    identity = 0 if kind == "sum" else _identity(kind, init_dtype)
    if init != identity and init_dtype != operand_dtype:
        raise TypeError("reduce_window got inconsistent dtypes for operands and init_values: "
                        f"got operand dtypes {[operand_dtype]} and init_value dtypes "
                        f"{[init_dtype]}.")


def _with_initial(kind, out, init):
    """Fold a non-identity initial value in: each window's reduction starts from it."""
    from impl.primitives import elementwise as ew
    prim = {"sum": ew.add_p, "max": ew.max_p, "min": ew.min_p}[kind]
    return prim.bind(out, init)
