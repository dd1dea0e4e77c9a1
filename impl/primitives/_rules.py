"""Small registrars shared by the primitive modules.

A primitive module defines each primitive and, right beside it, registers its rules in
the tables of core (evaluation, abstract evaluation) and of each interpreter (ad,
batching, lowering). These helpers cover the common shapes of those rules.
"""
from __future__ import annotations

import jax
import numpy as np

from impl import core
from impl.core import ShapedArray
from impl.interpreters import lowering


def standard_primitive(name, multiple_results=False):
    return core.Primitive(name, multiple_results)


def _hashable(params):
    try:
        key = tuple(sorted(params.items()))
        hash(key)
        return key
    except TypeError:
        return None


def def_abstract_eval_by_shape(prim, lower_fn):
    """Abstract evaluation by asking JAX for the shape of the lowering (cached)."""
    cache = {}

    def rule(*avals, **params):
        pkey = _hashable(params)
        key = None if pkey is None else (tuple(avals), pkey)
        if key is not None:
            hit = cache.get(key)
            if hit is not None:
                return hit
        out = jax.eval_shape(lambda *xs: lower_fn(*xs, **params),
                             *[a.to_shape_dtype() for a in avals])
        if prim.multiple_results:
            res = [ShapedArray(o.shape, o.dtype, getattr(o, "weak_type", False)) for o in out]
        else:
            res = ShapedArray(out.shape, out.dtype, getattr(out, "weak_type", False))
        if key is not None:
            cache[key] = res
        return res

    core.abstract_eval_rules[prim] = rule


def def_lowering(prim, lower_fn, abstract_eval=None):
    """Lowering and eager evaluation through `lower_fn`; abstract eval given or derived."""
    lowering.register(prim, lower_fn)
    if abstract_eval is None:
        def_abstract_eval_by_shape(prim, lower_fn)
    else:
        core.abstract_eval_rules[prim] = abstract_eval


def cast_to(x, dtype):
    """Cast a jax value to `dtype` inside a lowering rule, if it differs."""
    if isinstance(x, (int, float, complex, bool)):
        return np.asarray(x, dtype)
    if np.dtype(x.dtype) != dtype:
        return jax.lax.convert_element_type(x, dtype)
    return x
