"""conv_general_dilated: N-d convolution with strides, padding, dilations and groups.

The primitive is bilinear. Both transposes are convolutions again (derived per spatial
axis, with D(n, d) = 1 + d (n - 1) the length of n taps spread d apart):

* for the input: the cotangent, spread out by the forward strides, is correlated with
  the spatially flipped kernel whose input and output feature axes swap roles; the
  forward input dilation becomes the stride, and the padding is chosen so that
  exactly the input positions come out;
* for the kernel: the input is correlated with the cotangent (spread by the forward
  strides, as a kernel dilation); the forward kernel dilation becomes the stride and
  the input's batch axis is contracted.

Feature groups of the forward convolution become batch groups of the kernel
transpose and vice versa. vmap folds the mapped axis into the batch axis (only the
input mapped), the output-feature axis (only the kernel mapped) or the groups (both).
"""
from __future__ import annotations

import numpy as np
from jax import lax

from impl.core import get_aval
from impl.interpreters import ad, batching
from impl.primitives import elementwise as ew
from impl.primitives import indexing as ix
from impl.primitives import shape as sh
from impl.primitives import sharding_rules
from impl.primitives._define import SHAPE_FROM_LOWERING, define

ConvDimensionNumbers = lax.ConvDimensionNumbers


def _dilated(n, d):
    return 0 if n == 0 else 1 + d * (n - 1)


def _spatial(shape, spec):
    return [shape[i] for i in spec[2:]]


def _swap_first_two(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _split_axis(x, axis, outer):
    """Axis `axis` of size outer * inner becomes two axes (outer, inner)."""
    shape = get_aval(x).shape
    return sh.reshape(x, shape[:axis] + (outer, shape[axis] // outer) + shape[axis + 1:])


def _merge_axis(x, src, dst):
    """Axis `src` becomes the major part of axis `dst` (and disappears)."""
    x = batching.moveaxis(x, src, dst - (src < dst))
    dst = dst - (src < dst)
    shape = get_aval(x).shape
    return sh.reshape(x, shape[:dst] + (shape[dst] * shape[dst + 1],) + shape[dst + 2:])


def _conv_lower(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                dimension_numbers, feature_group_count, batch_group_count, precision,
                preferred_element_type, out_sharding=None):
    return lax.conv_general_dilated(
        lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
        feature_group_count, batch_group_count, precision=precision,
        preferred_element_type=preferred_element_type, out_sharding=out_sharding)


def _conv_shape(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                dimension_numbers, feature_group_count, batch_group_count, **params):
    """The result's shape (for the sharding rule; the abstract evaluation asks JAX)."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    out = [0] * lhs.ndim
    out[out_spec[0]] = lhs.shape[lhs_spec[0]] // batch_group_count
    out[out_spec[1]] = rhs.shape[rhs_spec[0]]
    for i, (n, k, st, (lo, hi), ld, rd) in enumerate(zip(
            _spatial(lhs.shape, lhs_spec), _spatial(rhs.shape, rhs_spec), window_strides,
            padding, lhs_dilation, rhs_dilation)):
        span = lo + _dilated(n, ld) + hi - _dilated(k, rd)
        out[out_spec[2 + i]] = 0 if span < 0 else span // st + 1
    return tuple(out)


def _cast_like(x, aval):
    return x if get_aval(x).dtype == aval.dtype else ew.convert_element_type(x, aval.dtype)


def _transpose_lhs(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type, out_sharding=None):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    in_shape = _spatial(lhs.aval.shape, lhs_spec)
    groups = feature_group_count
    if feature_group_count > 1 or batch_group_count > 1:
        # The kernel's output-feature axis holds the groups (major); they move into its
        # input-feature axis, which becomes the transposed convolution's output axis.
        groups = max(feature_group_count, batch_group_count)
        rhs = _split_axis(rhs, rhs_spec[0], groups)
        rhs = _merge_axis(rhs, rhs_spec[0], rhs_spec[1] + (rhs_spec[1] > rhs_spec[0]))
    k_shape = _spatial(get_aval(rhs).shape, rhs_spec)
    out_shape = _spatial(get_aval(ct).shape, out_spec)
    pads = []
    for n, k, o, s, (lo, _), ld, rd in zip(in_shape, k_shape, out_shape, window_strides,
                                           padding, lhs_dilation, rhs_dilation):
        before = _dilated(k, rd) - 1 - lo
        after = _dilated(n, ld) + _dilated(k, rd) - 1 - _dilated(o, s) - before
        pads.append((before, after))
    flipped = ix.rev(rhs, tuple(rhs_spec[2:]))
    dn = ConvDimensionNumbers(out_spec, _swap_first_two(rhs_spec), lhs_spec)
    out = conv_general_dilated_p.bind(
        ct, flipped, window_strides=tuple(lhs_dilation), padding=tuple(pads),
        lhs_dilation=tuple(window_strides), rhs_dilation=tuple(rhs_dilation),
        dimension_numbers=dn, feature_group_count=groups, batch_group_count=1,
        precision=precision, preferred_element_type=preferred_element_type,
        # the cotangent goes back to the input's type (contracting sharded features)
        out_sharding=(None if batch_group_count > 1 else
                      sharding_rules.cotangent_sharding_in_layout(
                          lhs.aval, range(lhs.aval.ndim), ct, rhs)))
    if batch_group_count > 1:
        # The output features hold the batch groups (major): back into the batch axis.
        out = _split_axis(out, lhs_spec[1], batch_group_count)
        out = _merge_axis(out, lhs_spec[1], lhs_spec[0] + (lhs_spec[0] > lhs_spec[1]))
    return _cast_like(out, lhs.aval)


def _transpose_rhs(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type, out_sharding=None):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    in_shape = _spatial(get_aval(lhs).shape, lhs_spec)
    k_shape = _spatial(rhs.aval.shape, rhs_spec)
    out_shape = _spatial(get_aval(ct).shape, out_spec)
    pads = []
    for n, k, o, s, (lo, _), ld, rd in zip(in_shape, k_shape, out_shape, window_strides,
                                           padding, lhs_dilation, rhs_dilation):
        after = _dilated(k, rd) - 1 + _dilated(o, s) - lo - _dilated(n, ld)
        pads.append((lo, after))
    dn = ConvDimensionNumbers(_swap_first_two(lhs_spec), _swap_first_two(out_spec),
                              _swap_first_two(rhs_spec))
    out = conv_general_dilated_p.bind(
        lhs, ct, window_strides=tuple(rhs_dilation), padding=tuple(pads),
        lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(window_strides),
        dimension_numbers=dn, feature_group_count=batch_group_count,
        batch_group_count=feature_group_count, precision=precision,
        preferred_element_type=preferred_element_type,
        # the kernel's cotangent contracts the (maybe sharded) batch: the kernel's type
        out_sharding=sharding_rules.cotangent_sharding_in_layout(
            rhs.aval, range(rhs.aval.ndim), ct, lhs))
    return _cast_like(out, rhs.aval)


def _conv_batch(axis_data, vals, dims, **params):
    (lhs, rhs), (ld, rd) = vals, dims
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    fgc, bgc = params["feature_group_count"], params["batch_group_count"]
    size = axis_data.size
    merged_out_axis = out_spec[0] if rd is None else out_spec[1]
    if (params.get("out_sharding") is not None
            and params["out_sharding"].spec[merged_out_axis] is not None):
        raise NotImplementedError(
            "vmap of conv_general_dilated with an out_sharding that shards the output "
            f"axis the batch joins ({params['out_sharding'].spec})")
    if ld is not None and rd is not None:
        # Every example is its own group: the mapped axis becomes the major part of the
        # groups (the input's feature axis, or its batch axis for batch groups).
        rhs = _merge_axis(rhs, rd, rhs_spec[0] + (rd <= rhs_spec[0]))
        if bgc == 1:
            lhs = _merge_axis(lhs, ld, lhs_spec[1] + (ld <= lhs_spec[1]))
            out = conv_general_dilated_p.bind(lhs, rhs, **dict(params,
                                              feature_group_count=fgc * size))
        else:
            lhs = _merge_axis(lhs, ld, lhs_spec[0] + (ld <= lhs_spec[0]))
            out = conv_general_dilated_p.bind(lhs, rhs, **dict(params,
                                              batch_group_count=bgc * size))
        return _split_axis(out, out_spec[1], size), out_spec[1]
    if ld is not None:
        if bgc == 1:
            lhs = _merge_axis(lhs, ld, lhs_spec[0] + (ld <= lhs_spec[0]))
            out = conv_general_dilated_p.bind(lhs, rhs, **params)
            return _split_axis(out, out_spec[0], size), out_spec[0]
        # Batch groups are the major part of the batch axis: the examples go inside
        # each group.
        n_axis = lhs_spec[0] + (ld <= lhs_spec[0])
        lhs = _split_axis(lhs, n_axis, bgc)
        lhs = _merge_axis(lhs, ld + (ld > n_axis), n_axis + 1)
        lhs = _merge_axis(lhs, lhs_spec[0], lhs_spec[0] + 1)
        out = conv_general_dilated_p.bind(lhs, rhs, **params)
        return _split_axis(out, out_spec[0], size), out_spec[0]
    groups = max(fgc, bgc)
    o_axis = rhs_spec[0] + (rd <= rhs_spec[0])
    if groups == 1:
        rhs = _merge_axis(rhs, rd, o_axis)
        out = conv_general_dilated_p.bind(lhs, rhs, **params)
        return _split_axis(out, out_spec[1], size), out_spec[1]
    # Groups are the major part of the output features: the examples go inside each.
    rhs = _split_axis(rhs, o_axis, groups)
    rhs = _merge_axis(rhs, rd + (rd > o_axis), o_axis + 1)
    rhs = _merge_axis(rhs, rhs_spec[0], rhs_spec[0] + 1)
    out = conv_general_dilated_p.bind(lhs, rhs, **params)
    c = out_spec[1]
    out = _split_axis(_split_axis(out, c, groups), c + 1, size)   # (groups, size, per)
    out = batching.moveaxis(out, c + 1, 0)
    return _merge_axis(out, c + 1, c + 2), 0


conv_general_dilated_p = define(
    "conv_general_dilated", abstract_eval=SHAPE_FROM_LOWERING, lowering=_conv_lower,
    jvp=ad.bilinear_jvp, transpose=ad.bilinear_transpose(_transpose_lhs, _transpose_rhs),
    batching=_conv_batch, sharding_rule=sharding_rules.convolution(_conv_shape))


# ------------------------------------------------------------ user functions

def _ints(xs, n, what):
    if xs is None:
        return (1,) * n
    xs = tuple(int(x) for x in xs)
    if len(xs) != n:
        raise ValueError(f"conv_general_dilated: {what} {xs} must have one entry per "
                         f"spatial dimension ({n})")
    return xs


def _dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(tuple(int(i) for i in spec)
                                      for spec in dimension_numbers))
    return lax.conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None,
                         out_sharding=None):
    """General N-d convolution, as jax.lax.conv_general_dilated (`out_sharding=`: the
    result's sharding over Explicit mesh axes)."""
    lhs_shape, rhs_shape = get_aval(lhs).shape, get_aval(rhs).shape
    if len(lhs_shape) != len(rhs_shape) or len(lhs_shape) < 2:
        raise ValueError(f"conv_general_dilated: lhs and rhs must have the same number of "
                         f"dimensions (at least 2), got shapes {lhs_shape} and {rhs_shape}")
    dn = _dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    n = len(lhs_shape) - 2
    window_strides = _ints(window_strides, n, "window_strides")
    lhs_dilation = _ints(lhs_dilation, n, "lhs_dilation")
    rhs_dilation = _ints(rhs_dilation, n, "rhs_dilation")
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dilation):
            raise ValueError("String padding is not implemented for transposed convolution "
                             "using this op. Please either exactly specify the required "
                             "padding or use conv_transpose.")
        kernel = [_dilated(k, r) for k, r in zip(_spatial(rhs_shape, dn.rhs_spec),
                                                 rhs_dilation)]
        padding = lax.padtype_to_pads(_spatial(lhs_shape, dn.lhs_spec), kernel,
                                      window_strides, padding)
    try:
        padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise ValueError("padding argument to conv_general_dilated should be a string or a "
                         f"sequence of (low, high) pairs, got {padding}") from None
    if len(padding) != n:
        raise ValueError(f"conv_general_dilated: padding {padding} must have one (low, high) "
                         f"pair per spatial dimension ({n})")
    if preferred_element_type is not None:
        preferred_element_type = np.dtype(preferred_element_type)
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dn,
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        precision=precision, preferred_element_type=preferred_element_type,
        out_sharding=sharding_rules.canonical_out_sharding(out_sharding, len(lhs_shape)))


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """Convolution in NCHW / OIHW layout without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation,
                              rhs_dilation, precision=None, preferred_element_type=None):
    """Convolution in NCHW / OIHW layout with dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation,
                                rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _transpose_padding(k, s, padding):
    """(before, after) padding of a transposed convolution along one axis, following
    Keras' Conv2DTranspose conventions for 'SAME' and 'VALID'."""
    if padding == "SAME":
        total = k + s - 2
        before = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        before = k - 1
    elif isinstance(padding, tuple):
        before, total = k - padding[0] - 1, 2 * k - padding[0] - padding[1] - 2
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return before, total - before


_TRANSPOSE_DEFAULT_DN = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                         4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """Transposed convolution (a convolution with the input dilated by the strides)."""
    lhs_shape, rhs_shape = get_aval(lhs).shape, get_aval(rhs).shape
    nd = len(lhs_shape)
    if nd != len(rhs_shape) or nd < 2:
        raise ValueError(f"conv_transpose: lhs and rhs must have the same rank (at least 2), "
                         f"got shapes {lhs_shape} and {rhs_shape}")
    if dimension_numbers is None:
        if nd not in _TRANSPOSE_DEFAULT_DN:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = _TRANSPOSE_DEFAULT_DN[nd]
    dn = _dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    rhs_dilation = _ints(rhs_dilation, nd - 2, "rhs_dilation")
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        kernel = [_dilated(k, r) for k, r in zip(_spatial(rhs_shape, dn.rhs_spec),
                                                 rhs_dilation)]
        per_axis = [padding] * len(strides) if isinstance(padding, str) else \
            [tuple(p) for p in padding]
        pads = tuple(_transpose_padding(k, s, p) for k, s, p in zip(kernel, strides,
                                                                      per_axis))
    else:
        pads = padding
    if transpose_kernel:
        rhs = ix.rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(nd))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = sh.transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * (nd - 2), pads, strides, rhs_dilation, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)
