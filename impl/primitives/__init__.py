"""Primitive families; importing this package registers every rule of every primitive.

Each primitive is one block in its family's module: its rule functions, then a single
`define` call (see `_define.py`) that creates the primitive and fills every
transformation's table, then the function users call. For example `cumsum`:

    def _cumsum_aval(x, *, axis, reverse):            # abstract evaluation: types only
        _check_axis("cumsum", axis, x.shape)
        return x

    def _cumsum_transpose(ct, x, *, axis, reverse):   # x is an UndefinedPrimal
        return [cumsum_p.bind(ct, axis=axis, reverse=not reverse)]

    def _cumsum_batch(axis_data, vals, dims, *, axis, reverse):
        (x,), (d,) = vals, dims                       # d: x's batch axis
        return cumsum_p.bind(x, axis=axis + (d <= axis), reverse=reverse), d

    cumsum_p = define(
        "cumsum", abstract_eval=_cumsum_aval,
        lowering=lambda x, *, axis, reverse: jax.lax.cumsum(x, axis, reverse),
        jvp=ad.linear_jvp,               # linear: its jvp applies cumsum to the tangent
        transpose=_cumsum_transpose, batching=_cumsum_batch)

    def cumsum(operand, axis=0, reverse=False):       # exported by impl.lax
        return cumsum_p.bind(operand, axis=axis, reverse=reverse)

Arrays are positional arguments of `bind`, static metadata (axes, shapes, dtypes) are
keyword parameters. `lowering` also evaluates eagerly (after `abstract_eval` has checked
the arguments). Common rule shapes come ready-made: `ad.jvp_by_parts`, `ad.linear_jvp`,
`ad.linear_in_jvp`, `ad.bilinear_jvp`/`ad.bilinear_transpose`, `ad.zero_jvp`,
`batching.vectorized`, `batching.broadcasting`, `batching.reducer`.
"""
from impl.primitives import elementwise, shape, linalg, call  # noqa: F401
from impl.primitives import collectives  # noqa: F401
from impl.primitives import indexing  # noqa: F401
from impl.primitives import reductions  # noqa: F401
from impl.primitives import linalg_decompositions  # noqa: F401
from impl.primitives import convolution  # noqa: F401
from impl.primitives import windows  # noqa: F401
from impl.primitives import control_flow, remat  # noqa: F401
from impl.primitives import sharding  # noqa: F401
from impl.primitives import mapping  # noqa: F401,E402
from impl.primitives import prng  # noqa: F401
from impl.primitives import callbacks  # noqa: F401
from impl.primitives import special  # noqa: F401
from impl.primitives import complex_parts, fft  # noqa: F401
from impl.primitives import compiler_controls, general_reduce, linear_solve  # noqa: F401
