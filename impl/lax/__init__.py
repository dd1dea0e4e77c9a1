"""Primitive-level functions, as in jax.lax: strict about their operands' dtypes where
jax.lax is (impl/lax/_checked.py), unlike impl's internal functions."""
from impl.primitives.elementwise import (  # noqa: F401
    neg, sin, cos, exp, log, sqrt, rsqrt, sign,
)
from impl.primitives.shape import (  # noqa: F401
    broadcast_in_dim, reshape, transpose, squeeze, expand_dims, reduce_sum,
)
from impl.primitives.linalg import dot_general  # noqa: F401
from impl.primitives.collectives import psum, pmean, pmax, pmin, axis_index, axis_size  # noqa: F401,E402
from impl.primitives.sharding import with_sharding_constraint  # noqa: F401,E402
from impl.primitives.indexing import (  # noqa: F401,E402
    slice, slice_in_dim, index_in_dim, dynamic_slice, dynamic_slice_in_dim,
    dynamic_index_in_dim, gather, rev, GatherDimensionNumbers, ScatterDimensionNumbers,
    GatherScatterMode,
)
from impl.primitives.reductions import (  # noqa: F401,E402
    reduce_max, reduce_min, reduce_prod, argmax, argmin, cumsum, cumprod, cummax, cummin,
    sort, sort_key_val, iota, broadcasted_iota, cumlogsumexp, top_k,
)

# The remaining elementwise operations of jax.lax, as thin binds of their primitives.
from jax import tree_util as _tree_util  # noqa: E402
from impl import core as _core  # noqa: E402
from impl.primitives import elementwise as _ew  # noqa: E402
from impl.primitives import indexing as _ix  # noqa: E402
from impl.primitives import _operand_dtypes as _dt  # noqa: E402
from impl.lax._checked import bind_checked as _lax_fn, checked as _checked  # noqa: E402

add, sub, mul, div = (_checked(f, p, "x", "y") for f, p in (
    (_ew.add, _ew.add_p), (_ew.sub, _ew.sub_p), (_ew.mul, _ew.mul_p), (_ew.div, _ew.div_p)))
_select_n_of_one_dtype = _checked(_ew.select_n, _ew.select_n_p, "which", "*cases")


def select_n(which, *cases):
    _ew.check_select_cases(cases)
    return _select_n_of_one_dtype(which, *cases)


concatenate = _checked(_ix.concatenate, _ix.concatenate_p, "*operands")
pad = _checked(_ix.pad, _ix.pad_p, "operand", "padding_value")
dynamic_update_slice, dynamic_update_slice_in_dim = (
    _checked(f, _ix.dynamic_update_slice_p, "operand", "update")
    for f in (_ix.dynamic_update_slice, _ix.dynamic_update_slice_in_dim))
scatter_add, scatter, scatter_mul, scatter_min, scatter_max, scatter_sub = (
    _checked(f, p, "operand", "scatter_indices", "updates") for f, p in (
        (_ix.scatter_add, _ix.scatter_add_p), (_ix.scatter, _ix.scatter_p),
        (_ix.scatter_mul, _ix.scatter_mul_p), (_ix.scatter_min, _ix.scatter_min_p),
        (_ix.scatter_max, _ix.scatter_max_p), (_ix.scatter_sub, _ix.scatter_add_p)))
from impl.primitives.scatter_apply import scatter_apply  # noqa: F401,E402


tan, asin, acos, atan, sinh, cosh, tanh, log1p, expm1, logistic, erf, floor, ceil = (
    _lax_fn(p) for p in (_ew.tan_p, _ew.asin_p, _ew.acos_p, _ew.atan_p, _ew.sinh_p,
                         _ew.cosh_p, _ew.tanh_p, _ew.log1p_p, _ew.expm1_p, _ew.logistic_p,
                         _ew.erf_p, _ew.floor_p, _ew.ceil_p))
abs = _lax_fn(_ew.abs_p)  # noqa: A001
is_finite = _lax_fn(_ew.is_finite_p)
pow, max, min, atan2, rem = (  # noqa: A001
    _lax_fn(p) for p in (_ew.pow_p, _ew.max_p, _ew.min_p, _ew.atan2_p, _ew.rem_p))
eq, ne, lt, le, gt, ge = (_lax_fn(p) for p in (_ew.eq_p, _ew.ne_p, _ew.lt_p, _ew.le_p,
                                                _ew.gt_p, _ew.ge_p))
bitwise_and, bitwise_or, bitwise_xor = (_lax_fn(p, n) for p, n in (
    (_ew.and_p, "bitwise_and"), (_ew.or_p, "bitwise_or"), (_ew.xor_p, "bitwise_xor")))
bitwise_not = _lax_fn(_ew.not_p, "bitwise_not")
clamp = _lax_fn(_ew.clamp_p)


def round(x, rounding_method=0):  # noqa: A001
    return _ew.round_p.bind(x, rounding_method=int(rounding_method))


def integer_pow(x, y):
    return _ew.integer_pow_p.bind(x, y=int(y))


def square(x):
    return _ew.square_p.bind(x)


def stop_gradient(x):
    """Stops derivatives flowing through every leaf of the pytree `x`."""
    return _tree_util.tree_map(_ew.stop_gradient_p.bind, x)


from impl.lax import linalg  # noqa: E402,F401  (jax.lax.linalg)
from impl.primitives.convolution import (  # noqa: E402,F401
    ConvDimensionNumbers, conv, conv_general_dilated, conv_transpose, conv_with_general_padding,
)
from jax.lax import conv_dimension_numbers, padtype_to_pads  # noqa: E402,F401
from impl.primitives.windows import reduce_window  # noqa: E402,F401
# Structured control flow (primitives holding sub-programs; see impl/primitives/control_flow.py).
from impl.lax._control_flow import (  # noqa: F401,E402
    cond, switch, while_loop, fori_loop, scan, map, associative_scan, platform_dependent,
)
from impl.primitives.collectives import (  # noqa: F401,E402
    all_gather, all_to_all, ppermute, psum_scatter, pbroadcast, pshuffle, pswapaxes, pcast,
)

# Bit-level operations and erf_inv (what impl.random builds on).
shift_left, shift_right_logical, shift_right_arithmetic, nextafter = (
    _lax_fn(p) for p in (_ew.shift_left_p, _ew.shift_right_logical_p,
                         _ew.shift_right_arithmetic_p, _ew.nextafter_p))
clz, erf_inv = _lax_fn(_ew.clz_p), _lax_fn(_ew.erf_inv_p)
bitcast_convert_type = _ew.bitcast_convert_type

def convert_element_type(operand, new_dtype):
    """`operand` as `new_dtype` (a strongly typed result, as in JAX)."""
    new_dtype = _core.user_dtype(new_dtype, "convert_element_type")
    _ew.warn_if_complex_to_real(_ew.get_aval(operand).dtype, new_dtype)
    return _ew.convert_element_type(operand, new_dtype)

# Compositions of impl's primitives and the special functions (impl/lax/_composites.py).
from impl.lax._composites import (  # noqa: E402,F401
    acosh, asinh, atanh, cbrt, exp2, erfc, lgamma, digamma, polygamma, igamma, igammac,
    igamma_grad_a, zeta, betainc, bessel_i0e, bessel_i1e, population_count, reciprocal,
    select, full, full_like, empty, broadcast, broadcast_to_rank, collapse, tile, split,
    stack, unstack, dynamic_update_index_in_dim, dtype, dot, batch_matmul, reduce_and,
    reduce_or, reduce_xor, random_gamma_grad,
)
# Types and shape arithmetic with no arrays involved: JAX's own.
from jax.lax import (  # noqa: E402,F401
    Precision, RoundingMethod, PrecisionLike, DotDimensionNumbers,
    ConvGeneralDilatedDimensionNumbers, broadcast_shapes, FftType, conv_general_shape_tuple,
    conv_shape_tuple, conv_transpose_shape_tuple, reduce_window_shape_tuple,
)
# The parts of complex numbers (jax.lax.complex, real, imag, conj).
from impl.primitives import complex_parts as _cp  # noqa: E402
from impl.primitives.complex_parts import conj, imag, real  # noqa: E402,F401
complex = _checked(_cp.complex, _cp.complex_p, "x", "y")  # noqa: A001


def _primitives_named_as_jax():
    """impl's primitives under JAX's names (`sin_p`, ...): a program's equations name
    them, so an interpreter of impl's IR can test `eqn.primitive is lax.sin_p`."""
    import jax.lax as _jax_lax
    from impl.primitives._define import registry, defined_in
    return {f"{name}_p": prim for name, prim in registry.items()
            if hasattr(_jax_lax, f"{name}_p") and defined_in[name].startswith("impl.")}


globals().update(_primitives_named_as_jax())

# Directives to XLA (impl/primitives/compiler_controls.py).
from impl.primitives.compiler_controls import (  # noqa: E402,F401
    optimization_barrier, reduce_precision,
)

# lax.reduce (impl/lax/_reduce.py), recognising impl.lax's monoids as well as JAX's.
from impl.lax import _reduce  # noqa: E402
from impl.lax._reduce import reduce  # noqa: E402,F401
_reduce.monoid_functions.update({add: "add", mul: "mul", max: "max", min: "min",
                                 bitwise_and: "bitwise_and", bitwise_or: "bitwise_or",
                                 bitwise_xor: "bitwise_xor"})
# Solvers differentiated implicitly (impl/lax/_solves.py).
from impl.lax._solves import custom_linear_solve, custom_root  # noqa: E402,F401
from impl.lax._composites import broadcast_like, index_take  # noqa: E402,F401
from impl.primitives.fft import fft  # noqa: E402,F401


def __getattr__(name):
    if name == "pvary":   # gone from JAX 0.10, which answers as this does
        raise AttributeError("jax.lax.pvary was deprecated in JAX v0.8.2 and removed in JAX "
                             "v0.10.0; use `jax.lax.pcast(..., to='varying')")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
