"""Reductions, cumulative reductions, sorting and iota, each with all of its rules.

Primitives: reduce_max, reduce_min, reduce_prod, argmax, argmin, cumsum, cumprod,
cummax, cummin, cumlogsumexp, sort, top_k, iota. Helper primitives make their
derivatives linear and transposable, so that reverse mode works through every one:

* `shift` moves an array one step along an axis (filling the vacated slot); it gives
  exclusive prefix products without dividing (division breaks at zeros).
* `linear_recurrence` computes y[i] = a[i] * y[i-1] + b[i] (or from the end when
  `reverse`); it is linear in `b`, and its transpose is the opposite recurrence. It is
  the tangent map of cumprod and cumlogsumexp.
* `cumchooser_tangent` / `cumchooser_cotangent` are the tangent map of cummax/cummin
  and its transpose (JAX's weights on ties).
* `take_along_axis` gathers along one axis with an index array (the tangent map of
  sort and top_k) and `scatter_add_along_axis` is its transpose.
"""
from __future__ import annotations

import numpy as np
import jax
import jax.numpy as jax_jnp
from jax import lax

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import ad, batching
from impl.interpreters.ad import Zero, is_undefined_primal
from impl.primitives import _operand_dtypes as dt
from impl.primitives import elementwise as ew
from impl.primitives import sharding_rules
from impl.primitives._define import define
from impl.primitives.shape import broadcast_in_dim, reduce_sum, reshape, transpose


# ------------------------------------------------------------------ validation

def _check_axis(name, axis, shape, what="axis"):
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{name}: {what} must be an int, got {axis!r}")
    if not 0 <= axis < len(shape):
        raise TypeError(f"{name}: {what} {axis} is out of range for an operand of shape "
                        f"{shape} (rank {len(shape)})")


def _check_numeric(name, dtype):
    dt.check_unary(name, (np.number,), dtype)


def _check_floating(name, dtype):
    """A number (JAX's check), and floating: JAX's integer cumlogsumexp crashes
    (OverflowError) where impl refuses."""
    _check_numeric(name, dtype)
    dt.check_unary(name, dt.INEXACT, dtype)


def _normalize_axis(axis, ndim):
    """Negative axes count from the end; out-of-range ones are left for the type rule."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"axis must be an int, got {axis!r}")
    axis = int(axis)
    return axis + ndim if -ndim <= axis < 0 else axis


def _tangent_zero(x):
    return Zero(ad.tangent_aval(get_aval(x)))


def _shift_axis(axis, d):
    """The position of per-example axis `axis` when the batch axis sits at `d`."""
    return axis + (d <= axis)


def _all_to_front(axis_data, vals, dims):
    """Every operand with its batch axis first (unbatched ones are broadcast)."""
    return [batching.bdim_at_front(x, d, axis_data.size) for x, d in zip(vals, dims)]


# ------------------------------------------------- reduce_max / reduce_min / prod

def _reduce_aval(name, accepted):
    def rule(x, *, axes):
        accepted(name, x.dtype)
        if len(set(axes)) != len(axes):
            raise TypeError(f"{name}: repeated axes in {axes}")
        for a in axes:
            _check_axis(name, a, x.shape, "reduction axis")
        return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in axes),
                           x.dtype, x.weak_type)
    return rule


def _any_dtype(name, dtype):
    if dtype == core.float0:
        raise TypeError(f"{name} does not accept dtype float0")


def _kept_axes(ndim, axes):
    return tuple(i for i in range(ndim) if i not in axes)


def _canonical_axes(axes, ndim):
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    return tuple(sorted(_normalize_axis(a, ndim) for a in axes))


def _reduced(prim, operand, axes):
    """`prim` over `axes` (any order, negative ones from the end); none: the operand."""
    axes = _canonical_axes(axes, get_aval(operand).ndim)
    return prim.bind(operand, axes=axes) if axes else operand


def reduce_max(operand, axes):
    return _reduced(reduce_max_p, operand, axes)


def reduce_min(operand, axes):
    return _reduced(reduce_min_p, operand, axes)


def reduce_prod(operand, axes):
    return _reduced(reduce_prod_p, operand, axes)


def _make_chooser_jvp(prim):
    # The tangent flows from the location of the extremum; ties share it equally
    # (mean of the tangents at the tied locations), as in JAX.
    def rule(primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, axes=axes)
        if type(t) is Zero:
            return ans, _tangent_zero(ans)
        shape = get_aval(x).shape
        at_ans = ew.eq(x, broadcast_in_dim(ans, shape, _kept_axes(len(shape), axes)))
        mask = ew.convert_element_type(at_ans, get_aval(t).dtype)
        return ans, ew.div(reduce_sum(ew.mul(t, mask), axes), reduce_sum(mask, axes))
    return rule


_chooser_jvp = core.RuleMaker(_make_chooser_jvp)


def _move_axes_last(x, axes):
    """`x` with the reduced `axes` flattened into one trailing axis."""
    shape = get_aval(x).shape
    kept = _kept_axes(len(shape), axes)
    n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    x = transpose(x, kept + tuple(axes))
    return reshape(x, tuple(shape[k] for k in kept) + (n,))


def _reduce_prod_jvp(primals, tangents, *, axes):
    # d prod(x) = sum_j t_j * prod_{k != j} x_k. The products of the other elements are
    # exclusive prefix products from the left times those from the right: no division,
    # so zeros in x are handled exactly.
    (x,), (t,) = primals, tangents
    ans = reduce_prod_p.bind(x, axes=axes)
    if type(t) is Zero:
        return ans, _tangent_zero(ans)
    flat = _move_axes_last(x, axes)
    last = get_aval(flat).ndim - 1
    left = shift(cumprod(flat, last), last, fill=1)
    right = shift(cumprod(flat, last, reverse=True), last, reverse=True, fill=1)
    others = ew.mul(left, right)
    return ans, reduce_sum(ew.mul(_move_axes_last(t, axes), others), (last,))


reduce_max_p = define("reduce_max", abstract_eval=_reduce_aval("reduce_max", _any_dtype),
                      lowering=lambda x, *, axes: lax.reduce_max(x, axes),
                      jvp=_chooser_jvp, batching=batching.reducer,
                      sharding_rule=sharding_rules.drop_axes("axes"))
reduce_min_p = define("reduce_min", abstract_eval=_reduce_aval("reduce_min", _any_dtype),
                      lowering=lambda x, *, axes: lax.reduce_min(x, axes),
                      jvp=_chooser_jvp, batching=batching.reducer,
                      sharding_rule=sharding_rules.drop_axes("axes"))
reduce_prod_p = define("reduce_prod",
                       abstract_eval=_reduce_aval("reduce_prod", _check_numeric),
                       lowering=lambda x, *, axes: lax.reduce_prod(x, axes),
                       jvp=_reduce_prod_jvp, batching=batching.reducer,
                       sharding_rule=sharding_rules.drop_axes("axes"))



def _logical_reduction_dtype(name, dtype):
    if dtype != np.bool_ and np.dtype(dtype).kind not in "iu":
        raise TypeError("logical reduction requires operand dtype bool or int, got "
                        f"{np.dtype(dtype).name}.")


# or / and of booleans (bitwise of integers) along axes, as jnp.any / jnp.all stage them
reduce_or_p = define("reduce_or", abstract_eval=_reduce_aval("reduce_or",
                                                             _logical_reduction_dtype),
                     lowering=lambda x, *, axes: lax.reduce_or(x, axes), jvp=ad.zero_jvp,
                     batching=batching.reducer, sharding_rule=sharding_rules.drop_axes("axes"))
reduce_and_p = define("reduce_and", abstract_eval=_reduce_aval("reduce_and",
                                                               _logical_reduction_dtype),
                      lowering=lambda x, *, axes: lax.reduce_and(x, axes), jvp=ad.zero_jvp,
                      batching=batching.reducer,
                      sharding_rule=sharding_rules.drop_axes("axes"))


def reduce_or(operand, axes):
    return _reduced(reduce_or_p, operand, axes)


def reduce_and(operand, axes):
    return _reduced(reduce_and_p, operand, axes)


# ------------------------------------------------------------- argmax / argmin

def _argminmax_aval(name):
    def rule(x, *, axes, index_dtype):
        if len(axes) != 1:
            raise TypeError(f"{name}: axes must hold exactly one axis, got {axes}")
        _check_axis(name, axes[0], x.shape)
        if not np.issubdtype(np.dtype(index_dtype), np.integer):
            raise TypeError(f"{name}: index_dtype must be an integer dtype, got {index_dtype}")
        _any_dtype(name, x.dtype)
        return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i != axes[0]),
                           index_dtype)
    return rule


argmax_p = define("argmax", abstract_eval=_argminmax_aval("argmax"),
                  lowering=lambda x, *, axes, index_dtype: lax.argmax(x, axes[0], index_dtype),
                  jvp=ad.zero_jvp, batching=batching.reducer,
                  sharding_rule=sharding_rules.drop_axes("axes"))
argmin_p = define("argmin", abstract_eval=_argminmax_aval("argmin"),
                  lowering=lambda x, *, axes, index_dtype: lax.argmin(x, axes[0], index_dtype),
                  jvp=ad.zero_jvp, batching=batching.reducer,
                  sharding_rule=sharding_rules.drop_axes("axes"))


def argmax(operand, axis, index_dtype):
    axis = _normalize_axis(axis, get_aval(operand).ndim)
    return argmax_p.bind(operand, axes=(axis,), index_dtype=np.dtype(index_dtype))


def argmin(operand, axis, index_dtype):
    axis = _normalize_axis(axis, get_aval(operand).ndim)
    return argmin_p.bind(operand, axes=(axis,), index_dtype=np.dtype(index_dtype))


# --------------------------------------------------------------------- shift

def _shift_aval(x, *, axis, reverse, fill):
    _check_axis("shift", axis, x.shape)
    return x


def _shift_lower(x, *, axis, reverse, fill):
    config = [(0, 0, 0)] * np.ndim(x)
    config[axis] = (-1, 1, 0) if reverse else (1, -1, 0)
    return lax.pad(x, np.array(fill, x.dtype), config)


def shift(x, axis, reverse=False, fill=0):
    """out[i] = x[i-1] with out[0] = fill (or out[i] = x[i+1] from the end if reverse)."""
    return shift_p.bind(x, axis=int(axis), reverse=bool(reverse), fill=fill)


def _shift_jvp(primals, tangents, *, axis, reverse, fill):
    (x,), (t,) = primals, tangents
    out = shift_p.bind(x, axis=axis, reverse=reverse, fill=fill)
    if type(t) is Zero:
        return out, _tangent_zero(out)
    return out, shift_p.bind(t, axis=axis, reverse=reverse, fill=0)


def _shift_transpose(ct, x, *, axis, reverse, fill):
    if fill != 0:
        raise TypeError(f"shift with fill={fill} is affine, not linear; cannot transpose it")
    if type(ct) is Zero:
        return [None]
    return [shift_p.bind(ct, axis=axis, reverse=not reverse, fill=0)]


def _shift_batch(axis_data, vals, dims, *, axis, reverse, fill):
    (x,), (d,) = vals, dims
    return shift_p.bind(x, axis=_shift_axis(axis, d), reverse=reverse, fill=fill), d


shift_p = define("shift", abstract_eval=_shift_aval, lowering=_shift_lower, jvp=_shift_jvp,
                 transpose=_shift_transpose, batching=_shift_batch,
                 sharding_rule=sharding_rules.alike_along_unsharded_axis("shift"))


# --------------------------------------------------------- linear_recurrence

def _linrec_aval(a, b, *, axis, reverse):
    if a.shape != b.shape or a.dtype != b.dtype:
        raise TypeError(f"linear_recurrence: coefficients {a.str_short()} and inputs "
                        f"{b.str_short()} must have the same shape and dtype")
    _check_axis("linear_recurrence", axis, b.shape)
    _check_numeric("linear_recurrence", b.dtype)
    return ShapedArray(b.shape, b.dtype, b.weak_type and a.weak_type)


def _linrec_combine(first, second):
    # Composition of the affine maps y -> a1*y + b1, then y -> a2*y + b2.
    a1, b1 = first
    a2, b2 = second
    return a1 * a2, a2 * b1 + b2


def _linrec_lower(a, b, *, axis, reverse):
    return lax.associative_scan(_linrec_combine, (a, b), reverse=reverse, axis=axis)[1]


def linear_recurrence(a, b, axis, reverse=False):
    """y[i] = a[i] * y[i-1] + b[i] along `axis` (y[-1] = 0); from the end if reverse."""
    return linear_recurrence_p.bind(a, b, axis=int(axis), reverse=bool(reverse))


def _linrec_jvp(primals, tangents, *, axis, reverse):
    (a, b), (ta, tb) = primals, tangents
    y = linear_recurrence_p.bind(a, b, axis=axis, reverse=reverse)
    # dy[i] = a[i] dy[i-1] + (da[i] y[i-1] + db[i]): the same recurrence, new inputs.
    drive = tb
    if type(ta) is not Zero:
        drive = ad.add_tangents(drive, ew.mul(ta, shift(y, axis, reverse)))
    if type(drive) is Zero:
        return y, _tangent_zero(y)
    return y, linear_recurrence_p.bind(a, drive, axis=axis, reverse=reverse)


def _linrec_transpose(ct, a, b, *, axis, reverse):
    if is_undefined_primal(a):
        raise TypeError("linear_recurrence is not linear in its coefficients; cannot "
                        "transpose it with respect to them")
    if type(ct) is Zero:
        return [None, None]
    # y = L b with L[i, j] = a[j+1] ... a[i]; L^T runs the recurrence the other way with
    # the coefficients moved one step: z[j] = ct[j] + a[j+1] z[j+1].
    a_moved = shift(a, axis, not reverse)
    return [None, linear_recurrence_p.bind(a_moved, ct, axis=axis, reverse=not reverse)]


def _linrec_batch(axis_data, vals, dims, *, axis, reverse):
    a, b = _all_to_front(axis_data, vals, dims)
    return linear_recurrence_p.bind(a, b, axis=axis + 1, reverse=reverse), 0


linear_recurrence_p = define(
    "linear_recurrence", abstract_eval=_linrec_aval, lowering=_linrec_lower, jvp=_linrec_jvp,
    transpose=_linrec_transpose, batching=_linrec_batch,
    sharding_rule=sharding_rules.alike_along_unsharded_axis("linear_recurrence"))


# ------------------------------------------------------- cumulative reductions

def _cumulative_aval(name, accepted):
    def rule(x, *, axis, reverse):
        accepted(name, x.dtype)
        _check_axis(name, axis, x.shape)
        return x
    return rule


def _make_cumulative_batch(prim):
    def rule(axis_data, vals, dims, *, axis, reverse):
        (x,), (d,) = vals, dims
        return prim.bind(x, axis=_shift_axis(axis, d), reverse=reverse), d
    return rule


_cumulative_batch = core.RuleMaker(_make_cumulative_batch)


def _cumulative(name, lax_fn, jvp, transpose=None, accepted=None):
    return define(name, abstract_eval=_cumulative_aval(name, accepted or _check_numeric),
                  lowering=lambda x, *, axis, reverse: lax_fn(x, axis=axis, reverse=reverse),
                  jvp=jvp, transpose=transpose, batching=_cumulative_batch,
                  sharding_rule=sharding_rules.along_unsharded_axis)


def _cumsum_transpose(ct, x, *, axis, reverse):
    return [None if type(ct) is Zero else cumsum_p.bind(ct, axis=axis, reverse=not reverse)]


def _cumprod_jvp(primals, tangents, *, axis, reverse):
    # out[i] = out[i-1] * x[i], so dout[i] = x[i] dout[i-1] + out[i-1] t[i]: a linear
    # recurrence driven by t times the exclusive prefix product (no division by x).
    (x,), (t,) = primals, tangents
    out = cumprod_p.bind(x, axis=axis, reverse=reverse)
    if type(t) is Zero:
        return out, _tangent_zero(out)
    exclusive = shift(out, axis, reverse, fill=1)
    return out, linear_recurrence_p.bind(x, ew.mul(t, exclusive), axis=axis, reverse=reverse)


# The running extremum takes its tangent from the position that wins; on ties JAX's
# weights come from its parallel-prefix scan (each tied max splits its tangent evenly
# between the two halves it combines), so the tangent map is a primitive of its own,
# linear in the tangent, whose lowering is that scan's derivative in JAX. Its transpose
# is the matching cotangent map, and the two transpose into each other.

def _extremum_scan(kind, axis, reverse):
    op = lax.max if kind == "max" else lax.min
    return lambda v: lax.associative_scan(op, v, reverse=reverse, axis=axis)


def _cumchooser_map_aval(t, x, *, kind, axis, reverse):
    if t.shape != x.shape:
        raise TypeError(f"cum{kind} tangent map: tangent {t.str_short()} and operand "
                        f"{x.str_short()} must have the same shape")
    _check_axis(f"cum{kind}", axis, x.shape)
    return ShapedArray(t.shape, t.dtype)


def _make_cumchooser_map_transpose(other):
    def rule(ct, t, x, **params):
        if is_undefined_primal(x):
            raise TypeError("the tangent map of a running extremum is not linear in the "
                            "operand")
        if type(ct) is Zero:
            return [None, None]
        return [other().bind(ct, x, **params), None]
    return rule


def _cumchooser_map_batch(prim):
    def rule(axis_data, vals, dims, *, kind, axis, reverse):
        t, x = _all_to_front(axis_data, vals, dims)
        return prim().bind(t, x, kind=kind, axis=axis + 1, reverse=reverse), 0
    return rule


cumchooser_tangent_p = define(
    "cumchooser_tangent", abstract_eval=_cumchooser_map_aval,
    lowering=lambda t, x, *, kind, axis, reverse:
        jax.jvp(_extremum_scan(kind, axis, reverse), (x,), (t,))[1],
    jvp=ad.linear_in_jvp((0,)),
    transpose=_make_cumchooser_map_transpose(lambda: cumchooser_cotangent_p),
    batching=_cumchooser_map_batch(lambda: cumchooser_tangent_p),
    sharding_rule=sharding_rules.alike_along_unsharded_axis("cumchooser_tangent"))
cumchooser_cotangent_p = define(
    "cumchooser_cotangent", abstract_eval=_cumchooser_map_aval,
    lowering=lambda ct, x, *, kind, axis, reverse:
        jax.vjp(_extremum_scan(kind, axis, reverse), x)[1](ct)[0],
    jvp=ad.linear_in_jvp((0,)),
    transpose=_make_cumchooser_map_transpose(lambda: cumchooser_tangent_p),
    batching=_cumchooser_map_batch(lambda: cumchooser_cotangent_p),
    sharding_rule=sharding_rules.alike_along_unsharded_axis("cumchooser_cotangent"))


def _cumchooser_jvp(kind):
    def make(prim):
        def rule(primals, tangents, *, axis, reverse):
            (x,), (t,) = primals, tangents
            out = prim.bind(x, axis=axis, reverse=reverse)
            if type(t) is Zero:
                return out, _tangent_zero(out)
            return out, cumchooser_tangent_p.bind(t, x, kind=kind, axis=axis,
                                                  reverse=reverse)
        return rule
    return core.RuleMaker(make)


def _cumlogsumexp_jvp(primals, tangents, *, axis, reverse):
    # dout[i] = sum_{j<=i} exp(x[j] - out[i]) t[j]: a linear recurrence with coefficients
    # exp(out[i-1] - out[i]) <= 1 and inputs exp(x[i] - out[i]) t[i], so nothing
    # overflows.
    (x,), (t,) = primals, tangents
    out = cumlogsumexp_p.bind(x, axis=axis, reverse=reverse)
    if type(t) is Zero:
        return out, _tangent_zero(out)
    prev = shift(out, axis, reverse, fill=-np.inf)
    starts = ew.eq(prev, np.asarray(-np.inf, get_aval(out).dtype))
    decay = ew.select_n(starts, ew.exp(ew.sub(prev, out)), ew.zeros_like(out))
    weights = ew.exp(ew.sub(x, out))
    return out, linear_recurrence_p.bind(decay, ew.mul(t, weights), axis=axis,
                                         reverse=reverse)


cumsum_p = _cumulative("cumsum", lax.cumsum, ad.linear_jvp, _cumsum_transpose)
cumprod_p = _cumulative("cumprod", lax.cumprod, _cumprod_jvp)
cummax_p = _cumulative("cummax", lax.cummax, _cumchooser_jvp("max"))
cummin_p = _cumulative("cummin", lax.cummin, _cumchooser_jvp("min"))
cumlogsumexp_p = _cumulative("cumlogsumexp", lax.cumlogsumexp, _cumlogsumexp_jvp,
                             accepted=_check_floating)


def _cumulative_fn(prim):
    def fn(operand, axis=0, reverse=False):
        axis = _normalize_axis(axis, get_aval(operand).ndim)
        return prim.bind(operand, axis=axis, reverse=bool(reverse))
    fn.__name__ = prim.name
    fn.__doc__ = f"lax.{prim.name}: the running {prim.name[3:]} along `axis`."
    fn.__qualname__ = prim.name
    return fn


cumsum = _cumulative_fn(cumsum_p)
cumprod = _cumulative_fn(cumprod_p)
cummax = _cumulative_fn(cummax_p)
cummin = _cumulative_fn(cummin_p)
cumlogsumexp = _cumulative_fn(cumlogsumexp_p)


# ------------------------------------------- take_along_axis / scatter_add_along_axis

def _check_indices(name, idx, shape, axis):
    if not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"{name}: indices must have an integer dtype, got {idx.dtype}")
    if idx.ndim != len(shape) or any(i != axis and s != t for i, (s, t)
                                     in enumerate(zip(idx.shape, shape))):
        raise TypeError(f"{name}: indices of shape {idx.shape} must match the operand "
                        f"shape {shape} except along axis {axis}")


def _take_aval(x, idx, *, axis):
    _check_axis("take_along_axis", axis, x.shape)
    _check_indices("take_along_axis", idx, x.shape, axis)
    return ShapedArray(idx.shape, x.dtype, x.weak_type)


def _scatter_aval(upd, idx, *, axis, shape):
    _check_axis("scatter_add_along_axis", axis, shape)
    if upd.shape != idx.shape:
        raise TypeError(f"scatter_add_along_axis: updates {upd.shape} and indices "
                        f"{idx.shape} must have the same shape")
    _check_indices("scatter_add_along_axis", idx, shape, axis)
    return ShapedArray(shape, upd.dtype, upd.weak_type)


def _full_index(idx, axis):
    return tuple(idx if k == axis else lax.broadcasted_iota(idx.dtype, idx.shape, k)
                 for k in range(idx.ndim))


def _take_lower(x, idx, *, axis):
    # (JAX's take_along_axis gathers with batch axes, which keep their sharding)
    return jax_jnp.take_along_axis(x, idx, axis=axis, mode="clip")


def _scatter_lower(upd, idx, *, axis, shape):
    zeros = jax_jnp.zeros(shape, upd.dtype)
    sharded = [core.jax_explicit_sharding(v) for v in (upd, idx)]
    if sharded == [None, None]:
        return zeros.at[_full_index(idx, axis)].add(upd)
    # The result's sharding, as the sharding rule says, for JAX's scatter (whose
    # indices here index every axis) to place it.
    mesh = next(s for s in sharded if s is not None).mesh
    entries = [next((s.spec[k] for s in sharded if s is not None and s.spec[k] is not None),
                    None) if k != axis else None for k in range(len(shape))]
    return zeros.at[_full_index(idx, axis)].add(
        upd, out_sharding=jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*entries)))


def take_along_axis(x, idx, axis):
    """out[..., i, ...] = x[..., idx[..., i, ...], ...] along `axis` (indices in range)."""
    return take_along_axis_p.bind(x, idx, axis=int(axis))


def scatter_add_along_axis(upd, idx, axis, shape):
    """zeros(shape) with upd[..., i, ...] added at [..., idx[..., i, ...], ...]."""
    return scatter_add_along_axis_p.bind(upd, idx, axis=int(axis),
                                         shape=tuple(int(s) for s in shape))


def _take_transpose(ct, x, idx, *, axis):
    if is_undefined_primal(idx):
        raise TypeError("take_along_axis is not linear in its indices")
    if type(ct) is Zero:
        return [None, None]
    return [scatter_add_along_axis(ct, idx, axis, x.aval.shape), None]


def _scatter_transpose(ct, upd, idx, *, axis, shape):
    if is_undefined_primal(idx):
        raise TypeError("scatter_add_along_axis is not linear in its indices")
    if type(ct) is Zero:
        return [None, None]
    return [take_along_axis(ct, idx, axis), None]


def _take_batch(axis_data, vals, dims, *, axis):
    x, idx = _all_to_front(axis_data, vals, dims)
    return take_along_axis_p.bind(x, idx, axis=axis + 1), 0


def _scatter_batch(axis_data, vals, dims, *, axis, shape):
    upd, idx = _all_to_front(axis_data, vals, dims)
    return scatter_add_along_axis_p.bind(upd, idx, axis=axis + 1,
                                         shape=(axis_data.size,) + shape), 0


take_along_axis_p = define(
    "take_along_axis", abstract_eval=_take_aval, lowering=_take_lower,
    jvp=ad.linear_in_jvp((0,)), transpose=_take_transpose, batching=_take_batch,
    sharding_rule=sharding_rules.take_along_axis)
scatter_add_along_axis_p = define(
    "scatter_add_along_axis", abstract_eval=_scatter_aval, lowering=_scatter_lower,
    jvp=ad.linear_in_jvp((0,)), transpose=_scatter_transpose, batching=_scatter_batch,
    sharding_rule=sharding_rules.scatter_add_along_axis)


# ---------------------------------------------------------------------- iota

def _iota_aval(*, dtype, shape, dimension, out_sharding=None):
    if not (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)):
        raise TypeError(f"iota: dtype must be an integer or floating dtype, got {dtype}")
    if any(s < 0 for s in shape):
        raise TypeError(f"iota: shape {shape} has a negative size")
    _check_axis("iota", dimension, shape, "dimension")
    return ShapedArray(shape, dtype)


iota_p = define("iota", abstract_eval=_iota_aval,
                lowering=lambda *, dtype, shape, dimension, out_sharding=None:
                    lax.broadcasted_iota(dtype, shape, dimension, out_sharding=out_sharding),
                jvp=ad.zero_jvp, batching=None,  # no operands: vmap never batches it
                sharding_rule=lambda *, out_sharding, **params: out_sharding,
                unreduced_rule=sharding_rules.created_unreduced)
# As JAX prints it: its sharding parameter is named sharding
core.pp_params_rules[iota_p] = lambda eqn, namer: [
    *sorted((k, v) for k, v in eqn.params.items() if k != "out_sharding"),
    ("sharding", eqn.params.get("out_sharding"))]


def broadcasted_iota(dtype, shape, dimension, *, out_sharding=None):
    """0, 1, 2, ... along `dimension` of an array of `shape`, constant along the others
    (sharded over Explicit mesh axes as `out_sharding` says)."""
    shape = tuple(int(s) for s in shape)
    out_sharding = sharding_rules.canonical_out_sharding(out_sharding, len(shape))
    return iota_p.bind(dtype=core.canonical_dtype(dtype), shape=shape,
                       dimension=_normalize_axis(dimension, len(shape)),
                       **({} if out_sharding is None else {"out_sharding": out_sharding}))


def iota(dtype, size):
    """0, 1, ..., size - 1."""
    return broadcasted_iota(dtype, (int(size),), 0)


# ---------------------------------------------------------------------- sort

def _sort_aval(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise TypeError("sort: needs at least one operand")
    shape = operands[0].shape
    if any(o.shape != shape for o in operands):
        raise TypeError(f"sort: all operands must have the same shape, got "
                        f"{[o.shape for o in operands]}")
    _check_axis("sort", dimension, shape, "dimension")
    if not 1 <= num_keys <= len(operands):
        raise TypeError(f"sort: num_keys={num_keys} must be between 1 and the number of "
                        f"operands ({len(operands)})")
    for o in operands:
        _any_dtype("sort", o.dtype)
    return list(operands)


def _sort_lower(*operands, dimension, is_stable, num_keys):
    return list(lax.sort(tuple(operands), dimension=dimension, is_stable=is_stable,
                         num_keys=num_keys))


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    # Sort a position iota along with the operands: it comes out as the permutation,
    # and each tangent is gathered by it (a linear map, transposed by a scatter-add).
    shape = get_aval(primals[0]).shape
    positions = broadcasted_iota(np.int32 if shape[dimension] < 2 ** 31 else np.int64,
                                 shape, dimension)
    *outs, perm = sort_p.bind(*primals, positions, dimension=dimension,
                              is_stable=is_stable, num_keys=num_keys)
    out_t = [t if type(t) is Zero else take_along_axis(t, perm, dimension)
             for t in tangents]
    return outs, out_t


def _sort_batch(axis_data, vals, dims, *, dimension, is_stable, num_keys):
    operands = _all_to_front(axis_data, vals, dims)
    outs = sort_p.bind(*operands, dimension=dimension + 1, is_stable=is_stable,
                       num_keys=num_keys)
    return outs, [0] * len(outs)


sort_p = define("sort", multiple_results=True, abstract_eval=_sort_aval,
                lowering=_sort_lower, jvp=_sort_jvp, batching=_sort_batch,
                sharding_rule=sharding_rules.sort,
                unreduced_rule=sharding_rules.sort_unreduced)


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sort along `dimension`; a sequence of operands is sorted by its first num_keys."""
    single = not isinstance(operand, (tuple, list))
    operands = (operand,) if single else tuple(operand)
    if not operands:
        raise TypeError("sort: needs at least one operand")
    dimension = _normalize_axis(dimension, get_aval(operands[0]).ndim)
    outs = sort_p.bind(*operands, dimension=dimension, is_stable=bool(is_stable),
                       num_keys=int(num_keys))
    return outs[0] if single else tuple(outs)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """Sort `keys` along `dimension` and permute `values` the same way."""
    return sort((keys, values), dimension, is_stable, num_keys=1)


# --------------------------------------------------------------------- top_k

def _top_k_aval(x, *, k, axis):
    if np.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("top_k is not compatible with complex inputs.")
    if x.ndim == 0:
        raise TypeError(f"top_k operand must have >= 1 dimension, got {x.shape}")
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
    if not 0 <= axis < x.ndim:
        raise ValueError(f"axis argument out of range: axis={axis} for operand.shape="
                         f"{x.shape}")
    if x.shape[axis] < k:
        raise ValueError(f"k argument to top_k must be no larger than size along axis; got "
                         f"k={k} with shape={list(x.shape)} and axis={axis}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, np.int32)]


def _top_k_jvp(primals, tangents, *, k, axis):
    (x,), (t,) = primals, tangents
    values, indices = top_k_p.bind(x, k=k, axis=axis)
    t_out = _tangent_zero(values) if type(t) is Zero else take_along_axis(t, indices, axis)
    return [values, indices], [t_out, _tangent_zero(indices)]


def _top_k_batch(axis_data, vals, dims, *, k, axis):
    (x,), (d,) = vals, dims
    outs = top_k_p.bind(x, k=k, axis=_shift_axis(axis, d))
    return outs, [d, d]


top_k_p = define("top_k", multiple_results=True, abstract_eval=_top_k_aval,
                 lowering=lambda x, *, k, axis: list(lax.top_k(x, k, axis=axis)),
                 jvp=_top_k_jvp, batching=_top_k_batch,
                 sharding_rule=sharding_rules.top_k,
                 unreduced_rule=sharding_rules.top_k_unreduced)


def top_k(operand, k, *, axis=-1):
    """The k largest entries along `axis` (largest first; ties keep the lower index)
    and their int32 indices."""
    k = int(k)
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
    ndim = get_aval(operand).ndim
    if ndim == 0:
        raise TypeError(f"top_k operand must have >= 1 dimension, got {get_aval(operand).shape}")
    axis = _normalize_axis(axis, ndim)
    return list(top_k_p.bind(operand, k=k, axis=axis))
