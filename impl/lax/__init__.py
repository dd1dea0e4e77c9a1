"""Primitive-level functions, as in jax.lax."""
from impl.primitives.elementwise import (  # noqa: F401
    add, sub, mul, div, neg, sin, cos, exp, log, sqrt, rsqrt, sign, select_n,
    convert_element_type,
)
from impl.primitives.shape import (  # noqa: F401
    broadcast_in_dim, reshape, transpose, squeeze, expand_dims, reduce_sum,
)
from impl.primitives.linalg import dot_general  # noqa: F401
from impl.primitives.collectives import psum, pmean, pmax, pmin, axis_index, axis_size  # noqa: F401,E402
from impl.primitives.indexing import (  # noqa: F401,E402
    concatenate, pad, slice, slice_in_dim, index_in_dim, dynamic_slice, dynamic_update_slice,
    dynamic_slice_in_dim, dynamic_index_in_dim, dynamic_update_slice_in_dim, gather,
    scatter_add, scatter, rev, GatherDimensionNumbers, ScatterDimensionNumbers,
    GatherScatterMode,
)
from impl.primitives.reductions import (  # noqa: F401,E402
    reduce_max, reduce_min, reduce_prod, argmax, argmin, cumsum, cumprod, cummax, cummin,
    sort, sort_key_val, iota, broadcasted_iota,
)
