"""dot_general: batched tensor contraction, with its bilinear AD rules."""
from __future__ import annotations

from jax import lax

from impl import core
from impl.core import get_aval
from impl.interpreters import ad, batching
from impl.primitives import sharding_rules
from impl.primitives._define import SHAPE_FROM_LOWERING, define
from impl.primitives.shape import batch_explicit_sharding, transpose


def _lower_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                       preferred_element_type=None, out_sharding=None):
    return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                           preferred_element_type=preferred_element_type,
                           out_sharding=out_sharding)


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                out_sharding=None):
    """`out_sharding`: the result's sharding over Explicit mesh axes (a PartitionSpec
    read against the mesh in context, or a NamedSharding); needed when both operands
    are sharded along a contracted axis. The parameter is left out of the equation when
    not given."""
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(int(a) for a in lc), tuple(int(a) for a in rc)),
          (tuple(int(a) for a in lb), tuple(int(a) for a in rb)))
    if out_sharding is not None:
        ndim = (get_aval(lhs).ndim + get_aval(rhs).ndim - 2 * len(dn[0][0]) - len(dn[1][0]))
        out_sharding = sharding_rules.canonical_out_sharding(
            out_sharding, ndim, "`out_sharding` argument of dot_general")
        return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=precision,
                                  preferred_element_type=preferred_element_type,
                                  out_sharding=out_sharding)
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=precision,
                              preferred_element_type=preferred_element_type)


def _free_axes(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _transpose_lhs(ct, x, y, *, dimension_numbers, precision=None,
                   preferred_element_type=None, out_sharding=None, ct_rhs_first=False):
    # The output of dot_general is laid out [batch, lhs free, rhs free]. Contract the
    # cotangent's rhs-free axes against y's free axes (batching over the batch axes),
    # which gives [batch, lhs free, lhs contracted (in y's order)]; then permute back.
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_ndim = x.aval.ndim
    y_ndim = get_aval(y).ndim
    x_free = _free_axes(x_ndim, x_contract, x_batch)
    y_free = _free_axes(y_ndim, y_contract, y_batch)
    nb = len(x_batch)
    if ct_rhs_first:
        ct_y_free = list(range(nb, nb + len(y_free)))
    else:
        ct_y_free = list(range(nb + len(x_free), nb + len(x_free) + len(y_free)))
    dims = ((tuple(ct_y_free), tuple(y_free)), (tuple(range(nb)), tuple(y_batch)))
    x_contract_in_y_order = [x_contract[i] for i in core.argsort(y_contract)]
    layout = list(x_batch) + x_free + x_contract_in_y_order
    out = dot_general(ct, y, dims, precision=precision,
                      preferred_element_type=preferred_element_type,
                      out_sharding=sharding_rules.cotangent_sharding_in_layout(
                          x.aval, layout, ct, y))
    out = transpose(out, core.argsort(layout))
    dtype = x.aval.dtype
    if get_aval(out).dtype != dtype:
        from impl.primitives.elementwise import convert_element_type
        out = convert_element_type(out, dtype)
    return out


def _transpose_rhs(ct, x, y, *, dimension_numbers, precision=None,
                   preferred_element_type=None, out_sharding=None):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    swapped = ((y_contract, x_contract), (y_batch, x_batch))
    return _transpose_lhs(ct, y, x, dimension_numbers=swapped, precision=precision,
                          preferred_element_type=preferred_element_type, ct_rhs_first=True)


def _skip_axis(axes, batch_axis):
    """Unbatched axis numbers renumbered for an operand with an extra axis at batch_axis."""
    return tuple(a if a < batch_axis else a + 1 for a in axes)


def _free_axes_before(batch_axis, contract, batch):
    return sum(1 for a in range(batch_axis) if a not in contract and a not in batch)


def _dot_general_batch(axis_data, vals, dims, *, dimension_numbers, precision=None,
                       preferred_element_type=None, out_sharding=None):
    lhs, rhs = vals
    ld, rd = dims
    (lc, rc), (lb, rb) = dimension_numbers
    shift = lambda axes: tuple(a + 1 for a in axes)
    if ld is not None and rd is not None:
        lhs = batching.moveaxis(lhs, ld, 0)
        rhs = batching.moveaxis(rhs, rd, 0)
        dn = ((shift(lc), shift(rc)), ((0,) + shift(lb), (0,) + shift(rb)))
        out_dim = 0
    elif ld is not None:
        # Only one operand is batched: its batch axis stays where it is, as one more free
        # axis, so no transpose is staged; the output's batch axis is where that free axis
        # lands in dot_general's [batch, lhs free, rhs free] layout.
        lc, lb = _skip_axis(lc, ld), _skip_axis(lb, ld)
        dn = ((lc, rc), (lb, rb))
        out_dim = len(lb) + _free_axes_before(ld, lc, lb)
    else:
        rc, rb = _skip_axis(rc, rd), _skip_axis(rb, rd)
        dn = ((lc, rc), (lb, rb))
        lhs_free = get_aval(lhs).ndim - len(lc) - len(lb)
        out_dim = len(lb) + lhs_free + _free_axes_before(rd, rc, rb)
    sharding = {}
    if out_sharding is not None:
        # the batched operand and its batch axis (moved to the front when both are batched)
        batched, batch_dim = ((lhs, 0) if ld is not None and rd is not None
                              else (lhs, ld) if ld is not None else (rhs, rd))
        sharding["out_sharding"] = batch_explicit_sharding(out_sharding, axis_data, batched,
                                                           batch_dim, out_dim)
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=precision,
                             preferred_element_type=preferred_element_type, **sharding)
    return out, out_dim


dot_general_p = define(
    "dot_general", abstract_eval=SHAPE_FROM_LOWERING, lowering=_lower_dot_general,
    jvp=ad.bilinear_jvp, transpose=ad.bilinear_transpose(_transpose_lhs, _transpose_rhs),
    batching=_dot_general_batch, sharding_rule=sharding_rules.dot_general,
    unreduced_rule=sharding_rules.dot_general_unreduced)


class _AsList(tuple):
    """Axis numbers printed as a list, as JAX prints dot_general's."""

    def __repr__(self):
        return repr(list(self))


def _dot_general_printed_params(eqn, namer):
    """As JAX prints it: the dimension numbers as lists, without the parameters that
    are None and without the sharding (the result's type shows it)."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    params = {k: v for k, v in eqn.params.items() if v is not None and k != "out_sharding"}
    params["dimension_numbers"] = ((_AsList(lc), _AsList(rc)), (_AsList(lb), _AsList(rb)))
    return sorted(params.items())


core.pp_params_rules[dot_general_p] = _dot_general_printed_params
