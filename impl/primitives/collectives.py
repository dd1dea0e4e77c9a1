"""Collectives over named vmap axes: psum, pmean, pmax, pmin, axis_index.

`vmap(f, axis_name="i")` names its batch axis; inside `f`, `psum(x, "i")` sums `x` over
that axis. A BatchTrace handles a collective whose axis name is its own and passes any
other (keeping its own batch axis) to its parent, so collectives over nested vmaps find
their axis by name.
"""
from __future__ import annotations

import numpy as np
from jax import lax as jax_lax

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import ad, batching
from impl.primitives import elementwise as ew
from impl.primitives import shape as sh


def _unbound(name):
    def impl(*args, axis_name, **params):
        raise NameError(f"unbound axis name: {axis_name!r}. {name} must be called inside a "
                        f"vmap with axis_name={axis_name!r}")
    return impl


def _collective(name, reduce_batched, scale_unbatched):
    p = core.Primitive(name)
    core.impl_rules[p] = _unbound(name)
    core.abstract_eval_rules[p] = lambda x, *, axis_name: x

    def rule(axis_data, vals, dims, *, axis_name):
        (x,), (d,) = vals, dims
        if axis_name != axis_data.name:
            # Not our axis: reduce over it further out, keeping our batch axis in place.
            return p.bind(x, axis_name=axis_name), d
        if d is None:
            return scale_unbatched(x, axis_data.size), None
        return reduce_batched(x, d), None

    rule.sees_unbatched = True
    batching.batching_rules[p] = rule
    return p


psum_p = _collective("psum", lambda x, d: sh.reduce_sum(x, (d,)),
                     lambda x, n: ew.mul(x, n))


def _reduce(name):
    def reduce(x, d):
        from impl.primitives import reductions
        return getattr(reductions, name)(x, (d,))
    return reduce


pmax_p = _collective("pmax", _reduce("reduce_max"), lambda x, n: x)
pmin_p = _collective("pmin", _reduce("reduce_min"), lambda x, n: x)

ad.deflinear(psum_p, lambda ct, x, *, axis_name: [psum_p.bind(ct, axis_name=axis_name)])


def psum(x, axis_name):
    """Sum `x` over the vmap axis called `axis_name` (each leaf of a pytree)."""
    import jax
    return jax.tree_util.tree_map(lambda v: psum_p.bind(v, axis_name=axis_name), x)


def pmean(x, axis_name):
    import jax
    return jax.tree_util.tree_map(
        lambda v: ew.div(psum_p.bind(v, axis_name=axis_name), axis_size(axis_name)), x)


def pmax(x, axis_name):
    import jax
    return jax.tree_util.tree_map(lambda v: pmax_p.bind(v, axis_name=axis_name), x)


def pmin(x, axis_name):
    import jax
    return jax.tree_util.tree_map(lambda v: pmin_p.bind(v, axis_name=axis_name), x)


def axis_size(axis_name):
    """The size of the enclosing vmap axis called `axis_name`."""
    return batching.find_axis(axis_name).axis_data.size


axis_index_p = core.Primitive("axis_index")
core.impl_rules[axis_index_p] = _unbound("axis_index")
core.abstract_eval_rules[axis_index_p] = lambda *, axis_name: ShapedArray((), np.int32)
ad.defjvp_zero(axis_index_p)


def _axis_index_batch(axis_data, vals, dims, *, axis_name):
    if axis_name != axis_data.name:
        return axis_index_p.bind(axis_name=axis_name), None
    return core.ops.iota(np.int32, axis_data.size), 0


_axis_index_batch.sees_unbatched = True
batching.batching_rules[axis_index_p] = _axis_index_batch


def axis_index(axis_name):
    """The position of the current example along the vmap axis called `axis_name`."""
    return axis_index_p.bind(axis_name=axis_name)


def _iota(dtype, size):
    return jax_lax.iota(dtype, size)


if not hasattr(core.ops, "iota"):
    core.ops.iota = _iota
