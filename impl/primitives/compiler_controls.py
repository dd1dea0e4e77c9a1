"""Primitives that steer XLA rather than compute: `optimization_barrier` and
`reduce_precision`, each with all of its rules.

* `optimization_barrier` returns its operands unchanged but stops XLA from moving,
  fusing or deduplicating computation across it (remat relies on that). It is the
  identity, so it is linear: its jvp puts the tangents through a barrier of their own
  and its transpose puts the cotangents through one, as JAX 0.10 does.
* `reduce_precision` rounds floats to a narrower exponent and mantissa (emulating
  bfloat16 or float8 inside a wider dtype). JAX treats it as linear: the tangent and
  the cotangent are rounded the same way.
"""
from __future__ import annotations

import operator

import jax
import numpy as np
from jax import tree_util

from impl import core
from impl.interpreters import ad, batching
from impl.interpreters.ad import Zero
from impl.primitives import sharding_rules
from impl.primitives._define import define


# --------------------------------------------------------- optimization_barrier

def _barrier_lower(*args):
    return list(jax.lax.optimization_barrier(list(args)))


def _through_barrier(values):
    """`values` through one barrier; symbolic zeros of float0 (integer inputs) have no
    array to hold back and stay symbolic."""
    real = [i for i, v in enumerate(values)
            if not (type(v) is Zero and v.aval.dtype == core.float0)]
    outs = list(values)
    if real:
        for i, v in zip(real, optimization_barrier_p.bind(
                *[ad.instantiate_zeros(values[i]) for i in real])):
            outs[i] = v
    return outs


def _barrier_jvp(primals, tangents):
    return optimization_barrier_p.bind(*primals), _through_barrier(tangents)


def _barrier_transpose(cts, *args):
    return _through_barrier(cts)


def _barrier_batch(axis_data, vals, dims):
    return optimization_barrier_p.bind(*vals), list(dims)


optimization_barrier_p = define(
    "optimization_barrier", abstract_eval=lambda *avals: list(avals),
    lowering=_barrier_lower, jvp=_barrier_jvp, transpose=_barrier_transpose,
    batching=_barrier_batch, multiple_results=True, vma_rule=core.TYPED_BY_ABSTRACT_EVAL,
    sharding_rule=core.TYPED_BY_ABSTRACT_EVAL)


def optimization_barrier(operand, /):
    """`operand` (a pytree of arrays) unchanged, with XLA kept from optimizing across."""
    leaves, tree = tree_util.tree_flatten(operand)
    return tree_util.tree_unflatten(tree, optimization_barrier_p.bind(*leaves))


# -------------------------------------------------------------- reduce_precision

def _reduce_precision_aval(x, *, exponent_bits, mantissa_bits):
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"reduce_precision does not accept dtype {np.dtype(x.dtype).name}. "
                        "Accepted dtypes are subtypes of floating.")
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got "
                         f"{exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError(f"reduce_precision: mantissa_bits must be non-negative; got "
                         f"{mantissa_bits}")
    return x


def _reduce_precision_transpose(ct, x, **params):
    return [None if type(ct) is Zero else reduce_precision_p.bind(ct, **params)]


reduce_precision_p = define(
    "reduce_precision", abstract_eval=_reduce_precision_aval,
    lowering=lambda x, *, exponent_bits, mantissa_bits: jax.lax.reduce_precision(
        x, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits),
    jvp=ad.linear_jvp, transpose=_reduce_precision_transpose, batching=batching.vectorized,
    sharding_rule=sharding_rules.same_as_operand, unreduced_rule=sharding_rules.keeps_unreduced)


def _static_index(value, what):
    if isinstance(value, core.Tracer):
        value = value.concrete_value()
        if value is None:
            raise TypeError(f"{what} of lax.reduce_precision must be a concrete integer, "
                            "not a traced value")
    return operator.index(value)


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """`operand` rounded to `exponent_bits` exponent and `mantissa_bits` mantissa bits."""
    return reduce_precision_p.bind(
        operand, exponent_bits=_static_index(exponent_bits, "exponent_bits"),
        mantissa_bits=_static_index(mantissa_bits, "mantissa_bits"))
