"""`chunk_map`: a program applied to successive slices of its inputs, one at a time.

This is what `vmap(f, chunk_size=k)` binds: its inputs are cut into chunks of k
elements, the program (f vmapped over one chunk) runs on one chunk after the other, and
the outputs are stacked. It lowers to a `jax.lax.scan` without carry, so XLA keeps one
chunk's intermediates alive at a time: peak memory is bounded by the chunk, not the
batch. Its rules transform the program itself (jvp, partial evaluation and transpose for
grad, batching), so the result stays one sequential loop under every transformation.

Operands are either mapped (a leading axis of `num_chunks` slices, one per iteration)
or unmapped (the same value in every iteration), per `mapped`.
"""
from __future__ import annotations

import jax
import numpy as np

from impl import core
from impl.core import Jaxpr, Var, get_aval
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero, is_undefined_primal
from impl.primitives import indexing as ix
from impl.primitives import shape as sh
from impl.primitives._define import define


def _row(aval):
    """The type of one slice of `aval` along its leading axis (strongly typed)."""
    return aval.update(shape=aval.shape[1:], weak_type=False, explicit_sharding=None)


def _stacked(aval, num_chunks):
    return aval.update(shape=(num_chunks,) + aval.shape, explicit_sharding=None)


def _chunk_map_aval(*avals, jaxpr, mapped, num_chunks):
    expected = jaxpr.in_avals
    if len(avals) != len(expected):
        raise TypeError(f"chunk_map: {len(avals)} operands for a program of {len(expected)}")
    for i, (a, e, m) in enumerate(zip(avals, expected, mapped)):
        one = _row(a) if m else a
        if (m and (not a.shape or a.shape[0] != num_chunks)) or \
                one.shape != e.shape or one.dtype != e.dtype:
            raise TypeError(f"chunk_map: operand {i} is {a.str_short()}, but the program "
                            f"expects {e.str_short()}" + (f" in each of {num_chunks} slices"
                                                          if m else ""))
    return [_stacked(o, num_chunks) for o in jaxpr.out_avals]


def _chunk_map_lower(*args, jaxpr, mapped, num_chunks):
    sliced = [a for a, m in zip(args, mapped) if m]
    fixed = [a for a, m in zip(args, mapped) if not m]

    def step(carry, slices):
        its, itf = iter(slices), iter(fixed)
        ins = [next(its) if m else next(itf) for m in mapped]
        return carry, lowering.eval_jaxpr_lowered(jaxpr.jaxpr, jaxpr.consts, ins)

    return jax.lax.scan(step, None, sliced, length=num_chunks)[1]


def _chunk_map_impl(*args, jaxpr, mapped, num_chunks):
    key = ("chunk_map", mapped, num_chunks)
    fn = jaxpr._cache.get(key)
    if fn is None:
        fn = jaxpr._cache[key] = jax.jit(
            lambda *xs: _chunk_map_lower(*xs, jaxpr=jaxpr, mapped=mapped,
                                         num_chunks=num_chunks))
    return fn(*args)


def bind_chunk_map(closed, args, mapped, num_chunks):
    """Bind chunk_map for a program that may have constants (they become unmapped
    operands)."""
    program, consts = pe.convert_constvars_to_invars(closed)
    return chunk_map_p.bind(*consts, *args, jaxpr=program,
                            mapped=(False,) * len(consts) + tuple(mapped),
                            num_chunks=num_chunks)


def _chunk_map_jvp(primals, tangents, *, jaxpr, mapped, num_chunks):
    nonzeros = [type(t) is not Zero for t in tangents]
    new, out_nonzero = ad.jvp_jaxpr(jaxpr, nonzeros)
    outs = bind_chunk_map(new, list(primals) + [t for t in tangents if type(t) is not Zero],
                          tuple(mapped) + tuple(m for m, nz in zip(mapped, nonzeros) if nz),
                          num_chunks)
    n = len(jaxpr.out_avals)
    t_iter = iter(outs[n:])
    out_ts = [next(t_iter) if nz else Zero(ad.tangent_aval(_stacked(a, num_chunks)))
              for nz, a in zip(out_nonzero, jaxpr.out_avals)]
    return outs[:n], out_ts


def _chunk_map_partial_eval(trace, args, *, jaxpr, mapped, num_chunks):
    unknowns = [trace.is_own(x) for x in args]
    known, unknown, out_unknowns, num_res = pe.partial_eval_jaxpr(jaxpr, unknowns)
    known_args = [x for x, u in zip(args, unknowns) if not u]
    known_mapped = [m for m, u in zip(mapped, unknowns) if not u]
    n_known = len(known.out_avals) - num_res
    # A residual that is an unmapped known input is passed on as it is, not stacked
    # once per chunk (the parameters a chunked vmap is differentiated for, typically).
    position = {v.id: j for j, v in enumerate(known.jaxpr.invars)}
    forwarded = [position.get(v.id) if type(v) is Var else None
                 for v in known.jaxpr.outvars[n_known:]]
    forwarded = [j if j is not None and not known_mapped[j] else None for j in forwarded]
    kept = known.jaxpr.outvars[:n_known] + [v for v, j in zip(known.jaxpr.outvars[n_known:],
                                                                forwarded) if j is None]
    known = core.ClosedJaxpr(pe.drop_unused_eqns(Jaxpr(known.jaxpr.constvars, known.jaxpr.invars,
                                                kept, known.jaxpr.eqns)), known.consts)
    with core.set_current_trace(trace.parent):
        known_outs = bind_chunk_map(known, known_args, known_mapped, num_chunks)
    stacked = iter(known_outs[n_known:])
    residuals = [known_args[j] if j is not None else next(stacked) for j in forwarded]
    res_mapped = [j is None for j in forwarded]
    unknown_args = [x for x, u in zip(args, unknowns) if u]
    unknown_mapped = [m for m, u in zip(mapped, unknowns) if u]
    invars = [trace.get_var(x) for x in residuals + unknown_args]
    staged = trace.add_eqn(chunk_map_p, invars,
                           [_stacked(a, num_chunks) for a in unknown.out_avals],
                           dict(jaxpr=unknown, mapped=tuple(res_mapped + unknown_mapped),
                                num_chunks=num_chunks))
    k_iter, u_iter = iter(known_outs[:n_known]), iter(staged)
    return [next(u_iter) if u else next(k_iter) for u in out_unknowns]


def _chunk_map_transpose(cts, *args, jaxpr, mapped, num_chunks):
    linear = [is_undefined_primal(a) for a in args]
    fixed = [a for a, lin in zip(args, linear) if not lin]
    fixed_mapped = [m for m, lin in zip(mapped, linear) if not lin]
    fixed_avals = [a for a, lin in zip(jaxpr.in_avals, linear) if not lin]

    def backward(*xs):
        vals, cts_out = iter(xs[:len(fixed)]), xs[len(fixed):]
        ins = [ad.UndefinedPrimal(a) if lin else next(vals)
               for a, lin in zip(jaxpr.in_avals, linear)]
        cts_in = ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, ins, list(cts_out))
        return [ad.instantiate_zeros(c) for c, lin in zip(cts_in, linear) if lin]

    transposed = pe.make_closed_jaxpr(backward, fixed_avals + list(jaxpr.out_avals))
    cts = [ad.instantiate_zeros(c) for c in cts]
    outs = iter(bind_chunk_map(transposed, fixed + cts,
                               fixed_mapped + [True] * len(cts), num_chunks))
    result = []
    for lin, m in zip(linear, mapped):
        if not lin:
            result.append(None)
        else:   # an unmapped linear input collects its cotangent from every chunk
            ct = next(outs)
            result.append(ct if m else sh.reduce_sum(ct, (0,)))
    return result


def _chunk_map_batch(axis_data, vals, dims, *, jaxpr, mapped, num_chunks):
    args, in_avals, in_dims = [], [], []
    for v, d, m in zip(vals, dims, mapped):
        if d is not None and m:    # the vmapped axis goes right after the chunk axis
            v, d = batching.moveaxis(v, d, 1), 0
            in_avals.append(_row(get_aval(v)))
        else:
            in_avals.append(_row(get_aval(v)) if m else get_aval(v))
        args.append(v)
        in_dims.append(d)
    new, out_dims = batching.batch_jaxpr(jaxpr, axis_data, in_avals, in_dims)
    outs = bind_chunk_map(new, args, mapped, num_chunks)
    return outs, [None if d is None else 1 for d in out_dims]


chunk_map_p = define(
    "chunk_map", multiple_results=True, abstract_eval=_chunk_map_aval,
    lowering=_chunk_map_lower, impl=_chunk_map_impl, jvp=_chunk_map_jvp,
    transpose=_chunk_map_transpose, batching=_chunk_map_batch,
    partial_eval=_chunk_map_partial_eval, vma_rule=core.TYPED_BY_ABSTRACT_EVAL)


# ------------------------------------------------------------ chunked vmap

def vmap_chunked(fun, args, in_dims, axis_size, out_dims_fn, chunk_size, name, sum_match):
    """`batching.vmap_flat` computed `chunk_size` elements at a time (flat arrays, int
    or None batch dims; the chunked axis has no name)."""
    k = int(chunk_size)
    n_chunks = axis_size // k
    full = n_chunks * k
    front = [batching.moveaxis(x, d, 0) if d is not None else x for x, d in zip(args, in_dims)]
    mapped = [d is not None for d in in_dims]
    body_dims = [0 if m else None for m in mapped]
    box = {}

    def chunk_specs(n):
        box["specs"] = out_dims_fn(n)
        return [None if s is None else 0 for s in box["specs"]]

    mapped_outs = []

    def body(*xs):
        return batching.vmap_flat(fun, list(xs), body_dims, k, None, chunk_specs, name,
                                  sum_match, mapped_outs)

    avals = [_stacked(_row(get_aval(x)), k) if m else get_aval(x)
             for x, m in zip(front, mapped)]
    closed = pe.make_closed_jaxpr(body, avals)
    main_args = [sh.reshape(ix.slice_in_dim(x, 0, full, 1, 0),
                            (n_chunks, k) + get_aval(x).shape[1:]) if m else x
                 for x, m in zip(front, mapped)]
    main = bind_chunk_map(closed, main_args, mapped, n_chunks)
    specs = box["specs"]
    tail = None
    if full < axis_size:   # the last, shorter chunk: an ordinary vmap of its elements
        tail_args = [ix.slice_in_dim(x, full, axis_size, 1, 0) if m else x
                     for x, m in zip(front, mapped)]
        tail = batching.vmap_flat(fun, tail_args, body_dims, axis_size - full, None,
                                  lambda n: [None if s is None else 0 for s in specs], name,
                                  sum_match)
    outs = []
    for i, (y, s) in enumerate(zip(main, specs)):
        if s is None:   # the same in every chunk, or (sum_match) a per-chunk sum
            summed = sum_match and mapped_outs[i]
            y = sh.reduce_sum(y, (0,)) if summed else ix.index_in_dim(y, 0, 0, False)
            if summed and tail is not None:
                y = core.ops.add_any(y, tail[i])
        else:
            y = sh.reshape(y, (full,) + get_aval(y).shape[2:])
            if tail is not None:
                y = ix.concatenate([y, tail[i]], 0)
            y = batching.moveaxis(y, 0, s)
        outs.append(y)
    return outs


def check_chunk_size(chunk_size):
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or chunk_size < 1:
        raise ValueError(f"vmap: chunk_size must be a positive int, got {chunk_size!r}")
    return int(chunk_size)

