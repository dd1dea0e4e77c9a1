"""`reduce`: XLA's reduction with a user-given computation, with all of its rules.

The primitive holds the computation as a closed program on scalars, `jaxpr`, taking the
accumulated values then the next elements (one scalar per operand each) and returning
the new accumulated values; `dimensions` are the reduced axes. Operands come first, then
one scalar initial value per operand. (lax.reduce with add, mul, max, min and the
bitwise monoids never gets here: it binds the dedicated reductions.)

* jvp: as in JAX, the reduction is rewritten as a balanced tree of pairwise applications
  of the computation (halving the reduced axis, padding with the initial value when it is
  odd) and that tree is differentiated. Initial values must have zero tangents
  (NotImplementedError otherwise, as JAX).
* batching: the batch axis joins the kept axes; batched initial values are not
  supported (NotImplementedError, as JAX).
* lowering: jax.lax.reduce running the program.
"""
from __future__ import annotations

import math
import weakref

import jax
import numpy as np
from jax import tree_util

from impl import core
from impl.core import ShapedArray, get_aval
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero
from impl.primitives import sharding_rules
from impl.primitives._define import define
from impl.primitives.indexing import pad, slice_in_dim
from impl.primitives.shape import broadcast_in_dim, reshape, squeeze, transpose


def _reduce_aval(*avals, jaxpr, dimensions):
    n = len(avals) // 2
    operands, inits = avals[:n], avals[n:]
    if any(a.shape != () for a in inits):
        raise ValueError(f"reduce found non-scalar initial value: {[a.shape for a in inits]}")
    if [a.dtype for a in operands] != [a.dtype for a in inits]:
        raise TypeError("reduce operand dtypes should match corresponding initial value "
                        f"dtypes, got operands={list(operands)} and "
                        f"initial_values={list(inits)}")
    if len({a.shape for a in operands}) > 1:
        raise ValueError("reduce operands must all have the same shape, got "
                         f"{[a.shape for a in operands]}")
    ndim = operands[0].ndim
    if any(not 0 <= d < ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise IndexError(f"reduce: dimensions {dimensions} are not distinct axes of an "
                         f"operand of rank {ndim}")
    return [ShapedArray(tuple(s for i, s in enumerate(op.shape) if i not in dimensions),
                        op.dtype, op.weak_type and init.weak_type)
            for op, init in zip(operands, inits)]


def _reduce_lower(*args, jaxpr, dimensions):
    n = len(args) // 2

    def computation(acc, x):
        return lowering.eval_jaxpr_lowered(jaxpr.jaxpr, jaxpr.consts, list(acc) + list(x))
    return list(jax.lax.reduce(list(args[:n]), list(args[n:]), computation, dimensions))


def _reduce_eager(*args, jaxpr, dimensions):
    """Compiled once per program and reduced axes (cached on the program)."""
    _reduce_aval(*[get_aval(a) for a in args], jaxpr=jaxpr, dimensions=dimensions)
    key = ("eager-reduce", dimensions)
    fn = jaxpr._cache.get(key)
    if fn is None:
        fn = jaxpr._cache[key] = jax.jit(
            lambda *xs: _reduce_lower(*xs, jaxpr=jaxpr, dimensions=dimensions))
    return fn(*args)


def _elementwise(jaxpr, args):
    """The scalar program `jaxpr` applied to equally shaped arrays, element by element."""
    shape = get_aval(args[0]).shape
    size = math.prod(shape)
    flat = [reshape(a, (size,)) for a in args]
    outs = batching.batch_with_dims(core.jaxpr_as_fun(jaxpr), flat, [0] * len(flat), size,
                                    None)
    return [reshape(x if d is not None else batching.broadcast_batch(x, size, 0), shape)
            for x, d in outs]


def _tree_reduce(jaxpr, inits, xs):
    """Reduce the leading axis of each of `xs` by halving it repeatedly."""
    rest = get_aval(xs[0]).shape[1:]
    while get_aval(xs[0]).shape[0] > 1:
        n = get_aval(xs[0]).shape[0]
        half = (n + 1) // 2
        firsts = [slice_in_dim(x, 0, half) for x in xs]
        seconds = [slice_in_dim(x, half, n) for x in xs]
        if n % 2:
            config = [(0, 1, 0)] + [(0, 0, 0)] * len(rest)
            seconds = [pad(x, init, config) for x, init in zip(seconds, inits)]
        xs = _elementwise(jaxpr, firsts + seconds)
    if get_aval(xs[0]).shape[0] == 0:
        return [broadcast_in_dim(init, rest, ()) for init in inits]
    return [squeeze(x, (0,)) for x in xs]


def _reduced_axes_first(x, dimensions):
    """`x` with the reduced axes moved to the front and flattened into one."""
    shape = get_aval(x).shape
    kept = tuple(i for i in range(len(shape)) if i not in dimensions)
    size = math.prod(shape[d] for d in dimensions)
    return reshape(transpose(x, tuple(dimensions) + kept), (size,) + tuple(shape[k] for k in kept))


def _reduce_jvp(primals, tangents, *, jaxpr, dimensions):
    # The rule reduces by other primitives: check the operands as `reduce` would first.
    _reduce_aval(*[get_aval(p) for p in primals], jaxpr=jaxpr, dimensions=dimensions)
    n = len(primals) // 2
    if any(type(t) is not Zero for t in tangents[n:]):
        raise NotImplementedError("Gradient of general lax.reduce with non-zero tangents for "
                                  "initial values to reduction not implemented")
    xs = [_reduced_axes_first(x, dimensions) for x in primals[:n]]
    ts = [Zero(ad.tangent_aval(get_aval(x))) if type(t) is Zero
          else _reduced_axes_first(t, dimensions) for x, t in zip(xs, tangents[:n])]
    inits = primals[n:]
    return ad.jvp_flat(lambda *a: _tree_reduce(jaxpr, inits, list(a)), xs, ts)


def _reduce_batch(axis_data, vals, dims, *, jaxpr, dimensions):
    n = len(vals) // 2
    if any(d is not None for d in dims[n:]):
        raise NotImplementedError("vmap of lax.reduce with batched initial values is not "
                                  "supported (as in JAX); batch only the operands")
    operands = [batching.bdim_at_front(x, d, axis_data.size)
                for x, d in zip(vals[:n], dims[:n])]
    outs = reduce_p.bind(*operands, *vals[n:], jaxpr=jaxpr,
                         dimensions=tuple(d + 1 for d in dimensions))
    return outs, [0] * n


def _reduce_sharding(*avals, jaxpr, dimensions):
    """Each result: its operand's spec without the reduced axes (XLA combines the parts
    of a sharded one), as JAX's."""
    drop = sharding_rules.drop_axes("dimensions")
    return [drop(x, dimensions=dimensions) for x in avals[:len(avals) // 2]]


reduce_p = define("reduce", abstract_eval=_reduce_aval, lowering=_reduce_lower,
                  impl=_reduce_eager, jvp=_reduce_jvp, batching=_reduce_batch,
                  sharding_rule=_reduce_sharding, multiple_results=True)


# ------------------------------------------------------------ the computation

_programs = weakref.WeakKeyDictionary()   # computation -> {(init types, tree): program}
core.register_cache(_programs.clear)


def _trace_computation(computation, init_avals, tree):
    """`computation((accumulated...), (next...))` (pytrees shaped like the initial values)
    staged on scalars, as a flat program; cached per function and types."""
    key = (tuple(init_avals), tree)
    per_fn = pe.programs_of(_programs, computation)
    hit = per_fn.get(key)
    if hit is not None:
        return hit
    n = len(init_avals)

    def flat_computation(*args):
        acc = tree_util.tree_unflatten(tree, args[:n])
        nxt = tree_util.tree_unflatten(tree, args[n:])
        outs, out_tree = tree_util.tree_flatten(computation(acc, nxt))
        if out_tree != tree:
            raise TypeError(f"lax.reduce: the computation must return the structure of the "
                            f"initial values {tree}, got {out_tree}")
        return outs

    program = pe.make_closed_jaxpr(flat_computation, list(init_avals) * 2)
    if any(isinstance(c, core.Tracer) for c in program.consts):
        raise NotImplementedError("lax.reduce: the computation cannot close over traced "
                                  "values (as in JAX); pass them as operands instead")
    for got, want in zip(program.out_avals, init_avals):
        if got.shape != () or got.dtype != want.dtype:
            raise TypeError(f"lax.reduce: the computation must return scalars of the "
                            f"initial values' types {[a.str_short() for a in init_avals]}, "
                            f"got {[a.str_short() for a in program.out_avals]}")
    per_fn[key] = program
    return program


def reduce_general(operands, init_values, computation, tree, dimensions):
    """Bind `reduce` on flat operands and initial values (the pytree structure `tree`)."""
    init_avals = [ShapedArray((), a.dtype, a.weak_type)
                  for a in (get_aval(v) for v in init_values)]
    program = _trace_computation(computation, init_avals, tree)
    return reduce_p.bind(*operands, *init_values, jaxpr=program,
                         dimensions=tuple(dimensions))


def canonical_dimensions(dimensions, ndim):
    """Reduced axes as non-negative ints (negative ones count from the end)."""
    out = []
    for d in dimensions:
        d = int(np.asarray(d))
        out.append(d + ndim if -ndim <= d < 0 else d)
    return tuple(out)
