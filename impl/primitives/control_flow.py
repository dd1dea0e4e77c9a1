"""Control flow as primitives holding sub-programs: `cond`, `while` and `scan`.

Each primitive carries its bodies as `ClosedJaxpr` parameters without constants: what a
body closes over is passed as leading operands (`num_consts`, `cond_nconsts`, ...), so
every transformation sees it. The rules transform the bodies instead of unrolling:

* jvp of a loop is a loop over the body's jvp (`ad.jvp_jaxpr`); which carries get a
  tangent is found by a fixpoint, since a carry's tangent type must be the same on
  entry and exit.
* vmap batches the bodies (`batching.batch_jaxpr`), again with a fixpoint over the
  carries. A batched `cond` predicate runs every branch and selects; a batched `while`
  condition keeps iterating until every element is done, freezing finished elements.
* partial evaluation (linearize, vjp) splits a body into a known loop, which also
  returns per-iteration residuals stacked like outputs, and an unknown loop consuming
  them; the known/unknown split of the carries is a fixpoint too. Transposing the
  unknown (linear) scan runs its body's transpose in the opposite direction.
* lowering emits XLA control flow (JAX's `cond`, `jax.lax.while_loop`, `jax.lax.scan`)
  inside the one jitted program.

The control-flow primitives are `collective`: a body may use a named vmap axis (`psum`
inside a scan under `vmap(..., axis_name=...)`), so vmap shows them to their batching
rule even when no operand is batched.
"""
from __future__ import annotations

import jax
import numpy as np

from impl import core
from impl.core import get_aval
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero, instantiate_zeros, is_undefined_primal
from impl.primitives._define import define
from impl.primitives.elementwise import convert_element_type, eq, select_n, stop_gradient_p
from impl.primitives.reductions import reduce_max
from impl.primitives.shape import broadcast_in_dim, reduce_sum


# ------------------------------------------------------------------------ helpers

def _split(values, *sizes):
    """`values` cut into consecutive pieces of the given sizes, plus the rest."""
    out, start = [], 0
    for n in sizes:
        out.append(list(values[start:start + n]))
        start += n
    out.append(list(values[start:]))
    return out


def _pick(flags, values):
    return [v for v, f in zip(values, flags) if f]


def _merge(unknowns, known, unknown):
    """Interleave two lists: from `unknown` where the flag is set, else from `known`."""
    k, u = iter(known), iter(unknown)
    return [next(u) if f else next(k) for f in unknowns]


def _eval(closed, *args):
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def eval_eagerly(closed, *args):
    """Evaluate `closed` on concrete values; outputs are jax arrays even where the
    program returns one of its literals (a Python scalar stays weakly typed)."""
    return [x if isinstance(x, jax.Array) else jax.numpy.asarray(x)
            for x in _eval(closed, *args)]


def _lowered(closed):
    """`closed` as a function of jax values (for use inside jax.lax control flow)."""
    def fun(*args):
        return lowering.eval_jaxpr_lowered(closed.jaxpr, closed.consts, args)
    return fun


def _memo(closed, key, make):
    """A program derived from `closed`, cached on it so that repeated transformations
    give the same object (which keeps the compiled-program caches warm)."""
    hit = closed._cache.get(key)
    if hit is None:
        hit = closed._cache[key] = make()
    return hit


def _same_type(a, b):
    """Types match up to weak typing (as JAX's typematch)."""
    return a.shape == b.shape and a.dtype == b.dtype


def _type_list(avals):
    return "[" + ", ".join(a.str_short() for a in avals) + "]"


def _check_operands(name, what, avals, expected):
    if len(avals) != len(expected) or not all(map(_same_type, avals, expected)):
        raise TypeError(f"{name}: {what} of types {_type_list(avals)} do not match the "
                        f"program's inputs {_type_list(expected)}")


def _compiled_impl(abstract_eval, lower, program_param):
    """Eager evaluation of a loop: the lowering compiled once with jax.jit, cached on
    the loop's body program."""
    def impl(*args, **params):
        abstract_eval(*[get_aval(a) for a in args], **params)
        key = ("eager", tuple(sorted((k, v) for k, v in params.items())))
        fn = _memo(params[program_param], key,
                   lambda: jax.jit(lambda *xs: lower(*xs, **params)))
        return fn(*args)
    return impl


def _batched_aval(aval, size):
    """`aval` with a leading axis of `size` (a batch, or the steps of a scan), not
    sharded."""
    sharding = aval.explicit_sharding
    if sharding is not None:
        sharding = sharding.update(spec=sharding.spec.update(
            partitions=(None,) + tuple(sharding.spec.partitions)))
    return aval.update(shape=(size,) + aval.shape, explicit_sharding=sharding)


def example_aval(aval):
    """The type of one step of a scanned-over value of type `aval` (its leading axis,
    which must not be sharded, removed)."""
    sharding = aval.explicit_sharding
    if sharding is not None:
        sharding = core.sharding_with_partitions(sharding,
                                                 tuple(sharding.spec.partitions)[1:])
    return aval.update(shape=aval.shape[1:], explicit_sharding=sharding)


def _batch_program(program, axis_data, batched, instantiate=False):
    """`batching.batch_jaxpr` for a body whose batched inputs (flags `batched`) carry
    the batch axis first."""
    avals = [_batched_aval(a, axis_data.size) if b else a
             for a, b in zip(program.in_avals, batched)]
    return batching.batch_jaxpr(program, axis_data, avals,
                                [0 if b else None for b in batched], instantiate)


def _batch_dims_to(vals, dims, dst):
    """Move every batched value's batch axis to `dst`; unbatched values stay as they are."""
    return [x if d is None else batching.moveaxis(x, d, dst) for x, d in zip(vals, dims)]


# --------------------------------------------------------------------------- cond
# cond(index, *operands, branches): runs branches[index] on the operands. `index` is an
# int32 scalar already clamped to range (lax.switch clamps, lax.cond converts a bool).

def _cond_aval(index, *ops, branches):
    if index.shape != () or index.dtype != np.int32:
        raise TypeError(f"cond: the branch index must be an int32 scalar, got "
                        f"{index.str_short()}")
    out = branches[0].out_avals
    for i, b in enumerate(branches):
        _check_operands("cond", f"operands of branch {i}", ops, b.in_avals)
        if not (len(b.out_avals) == len(out) and all(map(_same_type, b.out_avals, out))):
            raise TypeError(f"cond: branch {i} returns {_type_list(b.out_avals)} but branch "
                            f"0 returns {_type_list(out)}")
    return list(out)


def _cond_impl(index, *ops, branches):
    _cond_aval(get_aval(index), *[get_aval(x) for x in ops], branches=branches)
    i = min(max(int(index), 0), len(branches) - 1)
    outs = eval_eagerly(branches[i], *ops)
    # typed as the first branch's outputs (the cond's type), as when compiled
    return [o if get_aval(o).weak_type == a.weak_type
            else convert_element_type(o, a.dtype, weak_type=a.weak_type)
            for o, a in zip(outs, branches[0].out_avals)]


try:  # JAX's own cond primitive: jax.lax.switch would clamp the index once more
    from jax._src.lax.control_flow.conditionals import cond_p as _jax_cond_p
except ImportError:  # pragma: no cover
    _jax_cond_p = None


def _cond_lower(index, *ops, branches):
    fns = [_lowered(b) for b in branches]
    if len(fns) == 1:
        return fns[0](*ops)
    if _jax_cond_p is not None:
        programs = tuple(jax.make_jaxpr(fn)(*ops) for fn in fns)
        return _jax_cond_p.bind(index, *ops, branches=programs)
    return jax.lax.switch(index, fns, *ops)


def _cond_jvp(primals, tangents, *, branches):
    index, *ops = primals
    nonzeros = [type(t) is not Zero for t in tangents[1:]]
    out_nz = [any(nz) for nz in zip(*[ad.jvp_jaxpr(b, nonzeros)[1] for b in branches])]
    new = tuple(ad.jvp_jaxpr(b, nonzeros, instantiate=out_nz)[0] for b in branches)
    outs = cond_p.bind(index, *ops, *_pick(nonzeros, tangents[1:]), branches=new)
    n = len(branches[0].out_avals)
    ts = iter(outs[n:])
    return outs[:n], [next(ts) if nz else Zero(ad.tangent_aval(a))
                      for nz, a in zip(out_nz, branches[0].out_avals)]


def _cond_batch(axis_data, vals, dims, *, branches):
    (index, *ops), (index_dim, *op_dims) = vals, dims
    ops = _batch_dims_to(ops, op_dims, 0)
    batched = [d is not None for d in op_dims]
    if index_dim is not None:
        # Each element picks its own branch: run every branch on the whole batch and
        # select, as JAX does. A branch sees its operands through stop_gradient where
        # another branch is selected: its derivative there, maybe infinite (sqrt at 0),
        # then meets no cotangent, which would make a NaN of it (0 * inf). Not when a
        # branch applies a collective over the vmapped axis: an element's operands then
        # reach the results of elements that do select the branch, and their cotangents
        # must pass (JAX stops them too, and its gradient is wrong).
        index = batching.moveaxis(index, index_dim, 0)
        size = axis_data.size
        ops = [batching.matchaxis(size, 0 if b else None, 0, x) for x, b in zip(ops, batched)]
        every = [True] * len(ops)
        guard = not batching.collective_over([b.jaxpr for b in branches], axis_data.name)
        results = []
        for i, b in enumerate(branches):
            if guard:
                taken = eq(index, np.int32(i))
                ops_i = [_select_batched(taken, stop_gradient_p.bind(x), x) for x in ops]
            results.append(_eval(_batch_program(b, axis_data, every, True)[0],
                                 *(ops_i if guard else ops)))
        outs = [_select_batched(index, *cases) for cases in zip(*results)]
        return outs, [0] * len(outs)
    out_batched = [any(d is not None for d in ds) for ds in zip(
        *[_batch_program(b, axis_data, batched)[1] for b in branches])]
    new = tuple(_batch_program(b, axis_data, batched, out_batched)[0] for b in branches)
    outs = cond_p.bind(index, *ops, branches=new)
    return outs, [0 if b else None for b in out_batched]


def _select_batched(which, *cases):
    """select_n with a predicate (or index) of one value per batch element (axis 0),
    broadcast to the cases' type (their sharding over Explicit mesh axes included)."""
    case = get_aval(cases[0])
    return select_n(broadcast_in_dim(which, case.shape, (0,),
                                     out_sharding=case.explicit_sharding), *cases)


def _zeros(aval):
    return core.ops.zeros(aval)


def _cond_partial_eval(trace, args, *, branches):
    index, *ops = args
    if trace.is_own(index):
        return trace.stage(cond_p, args, dict(branches=branches))
    unknowns = [trace.is_own(x) for x in ops]

    def split():
        out_uk = [any(u) for u in zip(*[pe.partial_eval_jaxpr(b, unknowns)[2]
                                        for b in branches])]
        parts = [pe.partial_eval_jaxpr(b, unknowns, instantiate=out_uk) for b in branches]
        # Each branch has its own residuals; the joined cond returns all of them, the
        # branch not taken filling its slots with zeros.
        res_avals = [known.out_avals[len(known.out_avals) - n:] for known, _, _, n in parts]
        all_res = [a for avals in res_avals for a in avals]
        n_known_out = len(out_uk) - sum(out_uk)
        known_branches, unknown_branches, offset = [], [], 0
        for (known, unknown, _, n), avals in zip(parts, res_avals):
            before, after = all_res[:offset], all_res[offset + n:]

            def known_fun(*args, known=known, before=before, after=after, n=n):
                outs = _eval(known, *args)
                return (outs[:n_known_out] + [_zeros(a) for a in before]
                        + outs[n_known_out:] + [_zeros(a) for a in after])
            known_branches.append(pe.make_closed_jaxpr(
                known_fun, [a for a, u in zip(branches[0].in_avals, unknowns) if not u]))
            unknown = pe.add_unused_inputs(unknown, before, at=0)
            unknown_branches.append(pe.add_unused_inputs(unknown, after, at=offset + n))
            offset += n
        return tuple(known_branches), tuple(unknown_branches), out_uk, len(all_res)

    known_branches, unknown_branches, out_uk, num_res = _memo(
        branches[0], ("cond_pe", branches, tuple(unknowns)), split)
    known_ops = [x for x, u in zip(ops, unknowns) if not u]
    known_outs = trace.bind_known(cond_p, [index, *known_ops], dict(branches=known_branches))
    n_known = len(known_outs) - num_res
    staged = trace.stage(cond_p, [index, *known_outs[n_known:], *_pick(unknowns, ops)],
                         dict(branches=unknown_branches))
    return _merge(out_uk, known_outs[:n_known], staged)


def _cond_transpose(cts, index, *ops, branches):
    if is_undefined_primal(index):
        raise TypeError("cond is not linear in its branch index")
    linear = [is_undefined_primal(x) for x in ops]
    res = [x for x, lin in zip(ops, linear) if not lin]
    ct_nonzero = [type(ct) is not Zero for ct in cts]
    new = tuple(ad.transpose_jaxpr(b, linear, ct_nonzero, instantiate=True)[0]
                for b in branches)
    outs = iter(cond_p.bind(index, *res, *_pick(ct_nonzero, cts), branches=new))
    return [None] + [next(outs) if lin else None for lin in linear]


def _cond_dce(used_outputs, eqn):
    """Drop unused outputs from every branch, then the operands no branch reads."""
    branches = eqn.params["branches"]
    index, *ops = eqn.invars
    read = [any(flags) for flags in zip(*[pe.dce_closed_jaxpr(b, used_outputs)[1]
                                           for b in branches])]
    new = tuple(pe.dce_closed_jaxpr(b, used_outputs, keep_inputs=read)[0] for b in branches)
    return core.JaxprEqn(cond_p, [index, *_pick(read, ops)], _pick(used_outputs, eqn.outvars),
                         dict(branches=new))


cond_p = define(
    "cond", multiple_results=True, collective=True,
    abstract_eval=_cond_aval, lowering=_cond_lower, impl=_cond_impl,
    jvp=_cond_jvp, transpose=_cond_transpose, batching=_cond_batch,
    partial_eval=_cond_partial_eval, dce=_cond_dce,
    sharding_rule=core.TYPED_BY_ABSTRACT_EVAL, vma_rule=core.TYPED_BY_ABSTRACT_EVAL)


# ------------------------------------------------------------------------- while
# while(*cond_consts, *body_consts, *init, cond_jaxpr, body_jaxpr, cond_nconsts,
# body_nconsts): carry = init; while cond(*cond_consts, *carry): carry = body(...).

def _while_aval(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts, bconsts, init = _split(args, cond_nconsts, body_nconsts)
    _check_operands("while_loop", "cond_fun inputs", cconsts + init, cond_jaxpr.in_avals)
    _check_operands("while_loop", "body_fun inputs", bconsts + init, body_jaxpr.in_avals)
    _check_operands("while_loop", "body_fun outputs", body_jaxpr.out_avals, init)
    (pred,) = cond_jaxpr.out_avals
    if pred.shape != () or pred.dtype != np.bool_:
        raise TypeError(f"while_loop: cond_fun must return a boolean scalar, got "
                        f"{pred.str_short()}")
    return list(body_jaxpr.out_avals)


def _while_lower(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts, bconsts, init = _split(args, cond_nconsts, body_nconsts)
    cond_fn, body_fn = _lowered(cond_jaxpr), _lowered(body_jaxpr)
    return jax.lax.while_loop(lambda c: cond_fn(*cconsts, *c)[0],
                              lambda c: body_fn(*bconsts, *c), list(init))


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts, bconsts, init = _split(primals, cond_nconsts, body_nconsts)
    _, bconst_t, init_t = _split(tangents, cond_nconsts, body_nconsts)
    bconst_nz = [type(t) is not Zero for t in bconst_t]
    carry_nz = [type(t) is not Zero for t in init_t]
    while True:   # a carry has a tangent if its tangent can become nonzero in any step
        jvp_body, out_nz = ad.jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, carry_nz)
        grown = [a or b for a, b in zip(carry_nz, out_nz)]
        if grown == carry_nz:
            break
        carry_nz = grown
    nb, nk, tb, tk = len(bconsts), len(init), sum(bconst_nz), sum(carry_nz)
    # jvp_body takes (bconsts, carry, bconst tangents, carry tangents): tangents of
    # consts become consts, tangents of carries become carries.
    body = _memo(body_jaxpr, ("while_jvp", tuple(bconst_nz), tuple(carry_nz)),
                 lambda: pe.reorder_jaxpr(jvp_body, in_order=[
                     *range(nb), *range(nb + nk, nb + nk + tb), *range(nb, nb + nk),
                     *range(nb + nk + tb, nb + nk + tb + tk)]))
    cond = _memo(cond_jaxpr, ("while_jvp", tuple(carry_nz)), lambda: pe.add_unused_inputs(
        cond_jaxpr, [ad.tangent_aval(get_aval(x)) for x in _pick(carry_nz, init)]))
    carry_t = [instantiate_zeros(t) for t, nz in zip(init_t, carry_nz) if nz]
    outs = while_p.bind(*cconsts, *bconsts, *_pick(bconst_nz, bconst_t), *init, *carry_t,
                        cond_jaxpr=cond, body_jaxpr=body, cond_nconsts=cond_nconsts,
                        body_nconsts=nb + tb)
    ts = iter(outs[nk:])
    return outs[:nk], [next(ts) if nz else Zero(ad.tangent_aval(get_aval(x)))
                       for nz, x in zip(carry_nz, outs[:nk])]


def _while_batch(axis_data, vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts,
                 body_nconsts):
    cconsts, bconsts, init = _split(vals, cond_nconsts, body_nconsts)
    cdims, bdims, idims = _split(dims, cond_nconsts, body_nconsts)
    cconst_b = [d is not None for d in cdims]
    bconst_b = [d is not None for d in bdims]
    carry_b = [d is not None for d in idims]
    while True:
        _, (pred_dim,) = _batch_program(cond_jaxpr, axis_data, cconst_b + carry_b)
        # A batched condition needs every carry batched (elements stop at different
        # steps); a carry is batched if it can become batched in any step.
        grown = [True] * len(carry_b) if pred_dim is not None else list(carry_b)
        new_body, out_dims = _batch_program(body_jaxpr, axis_data, bconst_b + grown, grown)
        grown = [a or d is not None for a, d in zip(grown, out_dims)]
        if grown == carry_b:
            break
        carry_b = grown
    new_cond, (pred_dim,) = _batch_program(cond_jaxpr, axis_data, cconst_b + carry_b)
    cconsts = _batch_dims_to(cconsts, cdims, 0)
    bconsts = _batch_dims_to(bconsts, bdims, 0)
    init = [batching.matchaxis(axis_data.size, d, 0 if b else None, x)
            for x, d, b in zip(init, idims, carry_b)]
    if pred_dim is None:
        outs = while_p.bind(*cconsts, *bconsts, *init, cond_jaxpr=new_cond,
                            body_jaxpr=new_body, cond_nconsts=cond_nconsts,
                            body_nconsts=body_nconsts)
        return outs, [0 if b else None for b in carry_b]
    # Every element runs until all are done: loop while any predicate holds, and let
    # the body leave the carries of finished elements unchanged.
    nc = cond_nconsts

    def any_cond(*args):
        (pred,) = _eval(new_cond, *args)
        return [reduce_max(pred, (0,))]

    def masked_body(*args):
        cc, bc, carry = _split(args, nc, body_nconsts)
        (pred,) = _eval(new_cond, *cc, *carry)
        new = _eval(new_body, *bc, *carry)
        return [_select_batched(pred, c, n) for c, n in zip(carry, new)]

    carry_avals = [get_aval(x) for x in init]
    cond_avals = new_cond.in_avals
    any_cond_jaxpr = pe.make_closed_jaxpr(any_cond, cond_avals)
    masked = pe.make_closed_jaxpr(masked_body, list(cond_avals[:nc]) + list(
        new_body.in_avals[:body_nconsts]) + carry_avals)
    outs = while_p.bind(*cconsts, *cconsts, *bconsts, *init, cond_jaxpr=any_cond_jaxpr,
                        body_jaxpr=masked, cond_nconsts=nc, body_nconsts=nc + body_nconsts)
    return outs, [0] * len(outs)


def _while_partial_eval(trace, args, *, cond_jaxpr, body_jaxpr, cond_nconsts,
                        body_nconsts):
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    unknowns = [trace.is_own(x) for x in args]
    cconst_uk, bconst_uk, carry_uk = _split(unknowns, cond_nconsts, body_nconsts)
    while True:
        _, _, out_uk, _ = pe.partial_eval_jaxpr(body_jaxpr, bconst_uk + carry_uk, carry_uk)
        grown = [a or b for a, b in zip(carry_uk, out_uk)]
        if grown == carry_uk:
            break
        carry_uk = grown
    cond_known, _, (pred_uk,), _ = pe.partial_eval_jaxpr(cond_jaxpr, cconst_uk + carry_uk)
    if pred_uk or any(cconst_uk) or all(carry_uk):
        return trace.stage(while_p, args, params)
    # The known carries are computed by a loop over the known part alone; the unknown
    # ones (tangents, under linearize) by the whole loop, staged. A while loop cannot
    # save residuals per iteration, so it is not reverse-differentiable (as in JAX).
    body_known, _, _, _ = pe.partial_eval_jaxpr(body_jaxpr, bconst_uk + carry_uk, carry_uk)
    n_known = len(carry_uk) - sum(carry_uk)
    body_known = pe.reorder_jaxpr(body_known, out_order=range(n_known))
    body_known = core.ClosedJaxpr(pe.drop_unused_eqns(body_known.jaxpr), body_known.consts)
    cconsts, bconsts, init = _split(args, cond_nconsts, body_nconsts)
    known_cc = [x for x, u in zip(cconsts, cconst_uk) if not u]
    known_bc = [x for x, u in zip(bconsts, bconst_uk) if not u]
    known_init = [x for x, u in zip(init, carry_uk) if not u]
    known_outs = trace.bind_known(while_p, known_cc + known_bc + known_init, dict(
        cond_jaxpr=cond_known, body_jaxpr=body_known, cond_nconsts=len(known_cc),
        body_nconsts=len(known_bc)))
    if not any(carry_uk):
        return known_outs
    staged = trace.stage(while_p, args, params)
    return _merge(carry_uk, known_outs, _pick(carry_uk, staged))


_while_transpose = core.always_raises(
    ValueError, "Reverse-mode differentiation does not work for lax.while_loop or "
    "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or using fori_loop "
    "with static start/stop.")


def _live_carries(body, n_consts, used_carry, used_ys=(), extra=None):
    """Fixpoint of the carries a loop must keep: those used after the loop, those the
    body reads to compute what is kept (`used_ys`: a scan's stacked outputs), and
    `extra` (those a while condition reads)."""
    used_carry = [a or b for a, b in zip(used_carry, extra or used_carry)]
    n = len(used_carry)
    while True:
        _, read = pe.dce_closed_jaxpr(body, used_carry + list(used_ys))
        grown = [a or b for a, b in zip(used_carry, read[n_consts:n_consts + n])]
        if grown == used_carry:
            return used_carry
        used_carry = grown


def _while_dce(used_outputs, eqn):
    """Drop the carries that neither the condition nor a used carry depends on."""
    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, init = _split(eqn.invars, cn, bn)
    cond_read = pe.dce_closed_jaxpr(p["cond_jaxpr"], [True])[1][cn:]
    keep = _live_carries(p["body_jaxpr"], bn, list(used_outputs), extra=cond_read)
    body, b_read = pe.dce_closed_jaxpr(p["body_jaxpr"], keep, [False] * bn + keep)
    cond, c_read = pe.dce_closed_jaxpr(p["cond_jaxpr"], [True], [False] * cn + keep)
    return core.JaxprEqn(
        while_p, _pick(c_read[:cn], cconsts) + _pick(b_read[:bn], bconsts) + _pick(keep, init),
        _pick(keep, eqn.outvars),
        dict(cond_jaxpr=cond, body_jaxpr=body, cond_nconsts=sum(c_read[:cn]),
             body_nconsts=sum(b_read[:bn])))


while_p = define(
    "while", multiple_results=True, collective=True,
    abstract_eval=_while_aval, lowering=_while_lower,
    impl=_compiled_impl(_while_aval, _while_lower, "body_jaxpr"),
    jvp=_while_jvp, transpose=_while_transpose, batching=_while_batch,
    partial_eval=_while_partial_eval, dce=_while_dce,
    sharding_rule=core.TYPED_BY_ABSTRACT_EVAL, vma_rule=core.TYPED_BY_ABSTRACT_EVAL)


# -------------------------------------------------------------------------- scan
# scan(*consts, *init, *xs, jaxpr, length, reverse, unroll, num_consts, num_carry):
# the body maps (consts, carry, x slices) to (carry, y slices); ys are stacked.

def _scan_aval(*args, jaxpr, length, reverse, unroll, num_consts, num_carry,
               _split_transpose):
    consts, init, xs = _split(args, num_consts, num_carry)
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise TypeError(f"scan: every scanned-over operand needs a leading axis of "
                            f"length {length}, got {x.str_short()}")
    x_avals = [example_aval(x) for x in xs]
    _check_operands("scan", "operands", consts + init + x_avals, jaxpr.in_avals)
    carry_out, ys = _split(jaxpr.out_avals, num_carry)
    _check_operands("scan", "carry outputs", carry_out, init)
    return list(carry_out) + [_batched_aval(y, length) for y in ys]


def _scan_lower(*args, jaxpr, length, reverse, unroll, num_consts, num_carry,
                _split_transpose):
    consts, init, xs = _split(args, num_consts, num_carry)
    body_fn = _lowered(jaxpr)

    def body(carry, x):
        outs = body_fn(*consts, *carry, *x)
        return outs[:num_carry], outs[num_carry:]

    carry, ys = jax.lax.scan(body, list(init), list(xs), length=length, reverse=reverse,
                             unroll=unroll)
    return list(carry) + list(ys)


def _scan_jvp(primals, tangents, *, jaxpr, length, reverse, unroll, num_consts, num_carry,
              _split_transpose):
    consts, init, xs = _split(primals, num_consts, num_carry)
    const_t, init_t, xs_t = _split(tangents, num_consts, num_carry)
    const_nz = [type(t) is not Zero for t in const_t]
    xs_nz = [type(t) is not Zero for t in xs_t]
    carry_nz = [type(t) is not Zero for t in init_t]
    num_ys = len(jaxpr.out_avals) - num_carry
    while True:   # a carry has a tangent if its tangent can become nonzero in any step
        jvp_body, out_nz = ad.jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz,
                                        carry_nz + [False] * num_ys)
        grown = [a or b for a, b in zip(carry_nz, out_nz)]
        if grown == carry_nz:
            break
        carry_nz = grown
    ys_nz = out_nz[num_carry:]
    nc, nk, nx = len(consts), len(init), len(xs)
    tc, tk, tx, ty = sum(const_nz), sum(carry_nz), sum(xs_nz), sum(ys_nz)

    def reorder():
        # jvp_body: (consts, carry, xs, tangents of each) -> (carry, ys, tangents of
        # each); a scan body needs (consts, carry, xs) groups, each with its tangents.
        p, t = 0, nc + nk + nx
        ins = [*range(p, p + nc), *range(t, t + tc), *range(p + nc, p + nc + nk),
               *range(t + tc, t + tc + tk), *range(p + nc + nk, t),
               *range(t + tc + tk, t + tc + tk + tx)]
        n = nk + num_ys
        outs = [*range(nk), *range(n, n + tk), *range(nk, n), *range(n + tk, n + tk + ty)]
        return pe.reorder_jaxpr(jvp_body, ins, outs)

    body = _memo(jaxpr, ("scan_jvp", tuple(const_nz), tuple(carry_nz), tuple(xs_nz)),
                 reorder)
    carry_t = [instantiate_zeros(t) for t, nz in zip(init_t, carry_nz) if nz]
    outs = scan_p.bind(*consts, *_pick(const_nz, const_t), *init, *carry_t, *xs,
                       *_pick(xs_nz, xs_t), jaxpr=body, length=length, reverse=reverse,
                       unroll=unroll, num_consts=nc + tc, num_carry=nk + tk,
                       _split_transpose=_split_transpose)
    carry, carry_t, ys, ys_t = _split(outs, nk, tk, num_ys)
    carry_t, ys_t = iter(carry_t), iter(ys_t)
    out_t = ([next(carry_t) if nz else Zero(ad.tangent_aval(get_aval(c)))
              for nz, c in zip(carry_nz, carry)]
             + [next(ys_t) if nz else Zero(ad.tangent_aval(get_aval(y)))
                for nz, y in zip(ys_nz, ys)])
    return carry + ys, out_t


def _scan_batch(axis_data, vals, dims, *, jaxpr, length, reverse, unroll, num_consts,
                num_carry, _split_transpose):
    consts, init, xs = _split(vals, num_consts, num_carry)
    cdims, idims, xdims = _split(dims, num_consts, num_carry)
    const_b = [d is not None for d in cdims]
    xs_b = [d is not None for d in xdims]
    carry_b = [d is not None for d in idims]
    num_ys = len(jaxpr.out_avals) - num_carry
    while True:   # a carry is batched if it can become batched in any step
        body, out_dims = _batch_program(jaxpr, axis_data, const_b + carry_b + xs_b,
                                        carry_b + [False] * num_ys)
        grown = [a or d is not None for a, d in zip(carry_b, out_dims)]
        if grown == carry_b:
            break
        carry_b = grown
    consts = _batch_dims_to(consts, cdims, 0)
    init = [batching.matchaxis(axis_data.size, d, 0 if b else None, x)
            for x, d, b in zip(init, idims, carry_b)]
    xs = _batch_dims_to(xs, xdims, 1)    # axis 0 is the scanned one
    outs = scan_p.bind(*consts, *init, *xs, jaxpr=body, length=length, reverse=reverse,
                       unroll=unroll, num_consts=num_consts, num_carry=num_carry,
                       _split_transpose=_split_transpose)
    out_dims = ([0 if b else None for b in carry_b]
                + [None if d is None else 1 for d in out_dims[num_carry:]])
    return outs, out_dims


def _scan_split_body(jaxpr, num_consts, num_carry, unknowns):
    """The known/unknown split of a scan body, with the carries' fixpoint: a carry is
    unknown if it can become unknown in any step."""
    const_uk, carry_uk, xs_uk = _split(unknowns, num_consts, num_carry)
    num_ys = len(jaxpr.out_avals) - num_carry
    while True:
        known, unknown, out_uk, num_res = pe.partial_eval_jaxpr(
            jaxpr, const_uk + carry_uk + xs_uk, carry_uk + [False] * num_ys)
        grown = [a or b for a, b in zip(carry_uk, out_uk)]
        if grown == carry_uk:
            break
        carry_uk = grown
    # Residuals that are known inputs of the body need no per-iteration copy: a const
    # is passed to the unknown loop as a const, a scanned-over operand as itself.
    # Residuals computed from the known consts alone are the same in every step: they
    # are computed once before the loop ("hoisted") and passed as consts too.
    kj = known.jaxpr
    n_kc = num_consts - sum(const_uk)
    n_kk = num_carry - sum(carry_uk)
    n_known_out = len(kj.outvars) - num_res
    res_src = pe.forwarded_inputs(known)[n_known_out:]
    from_const = [s is not None and s < n_kc for s in res_src]
    from_xs = [s is not None and s >= n_kc + n_kk for s in res_src]
    _, _, varying, _ = pe.partial_eval_jaxpr(known, [i >= n_kc for i in range(len(kj.invars))])
    invariant = [not (v or c or x) for v, c, x in
                 zip(varying[n_known_out:], from_const, from_xs)]
    stacked = [not (c or x or h) for c, x, h in zip(from_const, from_xs, invariant)]
    idx = lambda flags: [i for i, f in enumerate(flags) if f]  # noqa: E731
    known_loop = pe.reorder_jaxpr(known, out_order=[
        *range(n_known_out), *[n_known_out + i for i in idx(stacked)]])
    known_loop = core.ClosedJaxpr(pe.drop_unused_eqns(known_loop.jaxpr), known_loop.consts)

    # The residuals computed from the consts alone, without the body's effects: the
    # loop inputs are placeholders here (a print would show them).
    invariant_part = pe.reorder_jaxpr(known, out_order=[n_known_out + i
                                                         for i in idx(invariant)])
    invariant_part = core.ClosedJaxpr(pe.drop_unused_eqns(invariant_part.jaxpr, False),
                                      known.consts)

    def hoisted(*consts):
        return _eval(invariant_part, *consts, *[_zeros(a) for a in known.in_avals[n_kc:]])

    hoist = pe.make_closed_jaxpr(hoisted, known.in_avals[:n_kc])
    n_uk_in = sum(const_uk) + sum(carry_uk) + sum(xs_uk)
    # unknown: (residuals, unknown consts, carries, xs) -> scan order (const and hoisted
    # residuals, unknown consts, unknown carries, unknown xs, residual xs, stacked).
    nuc = sum(const_uk)
    unknown_loop = pe.reorder_jaxpr(unknown, in_order=[
        *idx(from_const), *idx(invariant), *range(num_res, num_res + nuc + sum(carry_uk)),
        *range(num_res + nuc + sum(carry_uk), num_res + n_uk_in),
        *idx(from_xs), *idx(stacked)])
    return dict(known=known_loop, unknown=unknown_loop, hoist=hoist, out_uk=out_uk,
                carry_uk=carry_uk, res_src=res_src, from_const=from_const,
                from_xs=from_xs, n_kc=n_kc, n_kk=n_kk)


def _scan_partial_eval(trace, args, *, jaxpr, length, reverse, unroll, num_consts,
                       num_carry, _split_transpose):
    unknowns = [trace.is_own(x) for x in args]
    s = _memo(jaxpr, ("scan_pe", num_consts, num_carry, tuple(unknowns)),
              lambda: _scan_split_body(jaxpr, num_consts, num_carry, unknowns))
    consts, init, xs = _split(args, num_consts, num_carry)
    const_uk, _, xs_uk = _split(unknowns, num_consts, num_carry)
    carry_uk = s["carry_uk"]
    known_in = ([x for x, u in zip(consts, const_uk) if not u]
                + [x for x, u in zip(init, carry_uk) if not u]
                + [x for x, u in zip(xs, xs_uk) if not u])
    n_kc, n_kk = s["n_kc"], s["n_kk"]
    outs = trace.bind_known(scan_p, known_in, dict(
        jaxpr=s["known"], length=length, reverse=reverse, unroll=unroll,
        num_consts=n_kc, num_carry=n_kk, _split_transpose=_split_transpose))
    num_ys = len(jaxpr.out_avals) - num_carry
    n_known_out = n_kk + num_ys - sum(s["out_uk"][num_carry:])
    known_outs, res_stacked = outs[:n_known_out], outs[n_known_out:]
    res_src = s["res_src"]
    const_res = ([known_in[i] for i, f in zip(res_src, s["from_const"]) if f]
                 + _eval(s["hoist"], *known_in[:n_kc]))
    xs_res = [known_in[i] for i, f in zip(res_src, s["from_xs"]) if f]
    staged_in = (const_res + _pick(const_uk, consts) + _pick(carry_uk, init)
                 + _pick(xs_uk, xs) + xs_res + res_stacked)
    staged = trace.stage(scan_p, staged_in, dict(
        jaxpr=s["unknown"], length=length, reverse=reverse, unroll=unroll,
        num_consts=len(const_res) + sum(const_uk), num_carry=sum(carry_uk),
        _split_transpose=_split_transpose))
    return _merge(s["out_uk"], known_outs, staged)


def _scan_transpose(cts, *args, jaxpr, length, reverse, unroll, num_consts, num_carry,
                    _split_transpose):
    consts, init, xs = _split(args, num_consts, num_carry)
    const_lin = [is_undefined_primal(x) for x in consts]
    xs_lin = [is_undefined_primal(x) for x in xs]
    # The carries of a linear scan are linear. One may start from a known value (the
    # zero tangent of a carry whose tangent appears later): it gets no cotangent.
    init_lin = [is_undefined_primal(x) for x in init]
    ct_carry, ct_ys = cts[:num_carry], cts[num_carry:]
    ys_nz = [type(ct) is not Zero for ct in ct_ys]
    res_consts = [x for x, lin in zip(consts, const_lin) if not lin]
    res_xs = [x for x, lin in zip(xs, xs_lin) if not lin]
    lin_const_avals = [x.aval for x in consts if is_undefined_primal(x)]
    res_c_avals = tuple(get_aval(x) for x in res_consts)
    res_x_avals = tuple(example_aval(a) for a in map(get_aval, res_xs))

    def body_t(part):
        return _memo(jaxpr, ("scan_transpose", part, tuple(const_lin), tuple(xs_lin),
                             tuple(ys_nz), res_c_avals, res_x_avals),
                     lambda: _scan_transposed_body(jaxpr, num_consts, num_carry, const_lin,
                                                   xs_lin, ys_nz, res_c_avals, res_x_avals,
                                                   part))

    loop = dict(length=length, reverse=not reverse, unroll=unroll,
                num_consts=len(res_consts), _split_transpose=_split_transpose)
    ct_carry = [instantiate_zeros(ct) for ct in ct_carry]
    ct_ys = _pick(ys_nz, ct_ys)
    if _split_transpose and lin_const_avals:
        # Two loops: the carry recurrence (also giving the xs' cotangents and, stacked,
        # the carry cotangent each step received), then the consts' cotangents of every
        # step from those, independent of each other, summed over the steps.
        outs = scan_p.bind(*res_consts, *ct_carry, *ct_ys, *res_xs,
                           jaxpr=body_t("carries"), num_carry=num_carry, **loop)
        ct_init, ct_xs, ct_carry_steps = _split(outs, num_carry, sum(xs_lin))
        per_step = scan_p.bind(*res_consts, *ct_carry_steps, *ct_ys, *res_xs,
                               jaxpr=body_t("consts"), num_carry=0, **loop)
        ct_consts = [reduce_sum(c, (0,)) for c in per_step]
    else:
        outs = scan_p.bind(*res_consts, *[_zeros(a) for a in lin_const_avals], *ct_carry,
                           *ct_ys, *res_xs, jaxpr=body_t("whole"),
                           num_carry=len(lin_const_avals) + num_carry, **loop)
        ct_consts, ct_init, ct_xs = _split(outs, len(lin_const_avals), num_carry)
    ct_consts, ct_xs = iter(ct_consts), iter(ct_xs)
    return ([next(ct_consts) if lin else None for lin in const_lin]
            + [ct if lin else None for ct, lin in zip(ct_init, init_lin)]
            + [next(ct_xs) if lin else None for lin in xs_lin])


def _scan_transposed_body(jaxpr, num_consts, num_carry, const_lin, xs_lin, ys_nz,
                          res_c_avals, res_x_avals, part):
    """Body of the transposed scan, one step of the body's backward pass. `part`
    "whole": (residual consts; cotangent accumulators of the linear consts, carry
    cotangents; output cotangents, residual xs) -> (accumulators, carry cotangents;
    cotangents of the linear xs). For the split transpose, "carries": (residual consts;
    carry cotangents; output cotangents, residual xs) -> (carry cotangents; cotangents
    of the linear xs, the carry cotangents received), and "consts": (residual consts;
    ; carry cotangents received, output cotangents, residual xs) -> (; the step's
    cotangents of the linear consts)."""
    c_avals, k_avals, x_avals = _split(jaxpr.in_avals, num_consts, num_carry)
    _, y_avals = _split(jaxpr.out_avals, num_carry)
    acc_avals = _pick(const_lin, c_avals) if part == "whole" else []
    n_rc, n_acc, n_k, n_y = len(res_c_avals), len(acc_avals), num_carry, sum(ys_nz)

    def body(*args):
        res_c, acc, ct_carry, ct_y, res_x = _split(args, n_rc, n_acc, n_k, n_y)
        rc, rx, cy = iter(res_c), iter(res_x), iter(ct_y)
        primals = ([ad.UndefinedPrimal(a) if lin else next(rc)
                    for a, lin in zip(c_avals, const_lin)]
                   + [ad.UndefinedPrimal(a) for a in k_avals]
                   + [ad.UndefinedPrimal(a) if lin else next(rx)
                      for a, lin in zip(x_avals, xs_lin)])
        cts_out = list(ct_carry) + [next(cy) if nz else Zero(a)
                                    for nz, a in zip(ys_nz, y_avals)]
        cts_in = ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, primals, cts_out)
        ct_c, ct_k, ct_x = _split(cts_in, num_consts, num_carry)
        ct_c = _pick(const_lin, ct_c)
        if part == "consts":
            return [instantiate_zeros(c) for c in ct_c]
        carries_and_xs = ([instantiate_zeros(c) for c in ct_k]
                          + [instantiate_zeros(c) for c in _pick(xs_lin, ct_x)])
        if part == "carries":
            return carries_and_xs + list(ct_carry)
        return [instantiate_zeros(ad.add_tangents(a, c))
                for a, c in zip(acc, ct_c)] + carries_and_xs

    in_avals = [*res_c_avals, *acc_avals, *k_avals,
                *[a for a, nz in zip(y_avals, ys_nz) if nz], *res_x_avals]
    # staging drops what a part does not return (the backward pass computes every
    # cotangent)
    return pe.make_closed_jaxpr(body, in_avals)


def _scan_dce(used_outputs, eqn):
    """Drop unused stacked outputs, the carries no used output depends on (a
    fixpoint), and the operands the remaining body does not read."""
    p = eqn.params
    nc, nk = p["num_consts"], p["num_carry"]
    used_ys = list(used_outputs[nk:])
    n_body_in = len(p["jaxpr"].in_avals)
    used_carry = _live_carries(p["jaxpr"], nc, list(used_outputs[:nk]), used_ys)
    keep_in = [False] * nc + used_carry + [False] * (n_body_in - nc - nk)
    body, read = pe.dce_closed_jaxpr(p["jaxpr"], used_carry + used_ys, keep_in)
    return core.JaxprEqn(scan_p, _pick(read, eqn.invars),
                         _pick(used_carry + used_ys, eqn.outvars),
                         dict(p, jaxpr=body, num_consts=sum(read[:nc]),
                              num_carry=sum(used_carry)))


def _scan_printed_params(eqn, namer):
    """JAX 0.10 has no `_split_transpose` parameter: printed only when set."""
    return sorted((k, v) for k, v in eqn.params.items()
                  if k != "_split_transpose" or v)


scan_p = define(
    "scan", multiple_results=True, collective=True,
    abstract_eval=_scan_aval, lowering=_scan_lower,
    impl=_compiled_impl(_scan_aval, _scan_lower, "jaxpr"),
    jvp=_scan_jvp, transpose=_scan_transpose, batching=_scan_batch,
    partial_eval=_scan_partial_eval, dce=_scan_dce,
    sharding_rule=core.TYPED_BY_ABSTRACT_EVAL, vma_rule=core.TYPED_BY_ABSTRACT_EVAL)
core.pp_params_rules[scan_p] = _scan_printed_params
