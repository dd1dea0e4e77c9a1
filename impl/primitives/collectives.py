"""Collectives over named vmap axes: psum, pmean, pmax, pmin, axis_index.

`vmap(f, axis_name="i")` names its batch axis; inside `f`, `psum(x, "i")` sums `x` over
that axis. A BatchTrace handles a collective whose axis name is its own and passes any
other (keeping its own batch axis) to its parent, so collectives over nested vmaps find
their axis by name. Collectives are `collective=True` primitives: vmap shows them to
their batching rule even when no operand is batched.
"""
from __future__ import annotations

import jax
import numpy as np
from jax import lax as jax_lax

from impl.core import ShapedArray
from impl.interpreters import ad, batching
from impl.primitives import elementwise as ew
from impl.primitives import reductions as red
from impl.primitives import shape as sh
from impl.primitives._define import define, registry


def _unbound(name):
    """Eager evaluation of a collective: no vmap binds its axis."""
    def impl(*args, axis_name, **params):
        raise NameError(f"Found an unbound axis name: {axis_name}. To fix this, please call "
                        f"{name} under a vmap (or shard_map) with axis_name={axis_name!r}.")
    return impl


def _reducing_batch_rule(name, reduce_batched, scale_unbatched):
    def rule(axis_data, vals, dims, *, axis_name):
        (x,), (d,) = vals, dims
        if axis_name != axis_data.name:
            # Not our axis: reduce over it further out, keeping our batch axis in place.
            return registry[name].bind(x, axis_name=axis_name), d
        if d is None:
            return scale_unbatched(x, axis_data.size), None
        return reduce_batched(x, d), None
    return rule


def _same_type(x, *, axis_name):
    return x

# ----------------------------------------------------------------------- psum

psum_p = define(
    "psum", collective=True, abstract_eval=_same_type, lowering=None, impl=_unbound("psum"),
    jvp=ad.linear_jvp,
    transpose=lambda ct, x, *, axis_name: [psum_p.bind(ct, axis_name=axis_name)],
    batching=_reducing_batch_rule("psum", lambda x, d: sh.reduce_sum(x, (d,)),
                                  lambda x, n: ew.mul(x, n)))

# ----------------------------------------------------------------- pmax / pmin

pmax_p = define(
    "pmax", collective=True, abstract_eval=_same_type, lowering=None, impl=_unbound("pmax"),
    jvp=None,
    batching=_reducing_batch_rule("pmax", lambda x, d: red.reduce_max(x, (d,)),
                                  lambda x, n: x))
pmin_p = define(
    "pmin", collective=True, abstract_eval=_same_type, lowering=None, impl=_unbound("pmin"),
    jvp=None,
    batching=_reducing_batch_rule("pmin", lambda x, d: red.reduce_min(x, (d,)),
                                  lambda x, n: x))

# ----------------------------------------------------------------- axis_index


def _axis_index_batch(axis_data, vals, dims, *, axis_name):
    if axis_name != axis_data.name:
        return axis_index_p.bind(axis_name=axis_name), None
    return jax_lax.iota(np.int32, axis_data.size), 0


axis_index_p = define(
    "axis_index", collective=True, lowering=None, impl=_unbound("axis_index"),
    abstract_eval=lambda *, axis_name: ShapedArray((), np.int32),
    jvp=ad.zero_jvp, batching=_axis_index_batch)


# ------------------------------------------------------------------- the API

def psum(x, axis_name):
    """Sum `x` over the vmap axis called `axis_name` (each leaf of a pytree)."""
    return jax.tree_util.tree_map(lambda v: psum_p.bind(v, axis_name=axis_name), x)


def pmean(x, axis_name):
    return jax.tree_util.tree_map(
        lambda v: ew.div(psum_p.bind(v, axis_name=axis_name), axis_size(axis_name)), x)


def pmax(x, axis_name):
    return jax.tree_util.tree_map(lambda v: pmax_p.bind(v, axis_name=axis_name), x)


def pmin(x, axis_name):
    return jax.tree_util.tree_map(lambda v: pmin_p.bind(v, axis_name=axis_name), x)


def axis_size(axis_name):
    """The size of the enclosing vmap axis called `axis_name`."""
    return batching.find_axis(axis_name).axis_data.size


def axis_index(axis_name):
    """The position of the current example along the vmap axis called `axis_name`."""
    return axis_index_p.bind(axis_name=axis_name)
