"""Rematerialization: the `checkpoint` primitive and `name` (for checkpoint_name).

`checkpoint(*args, jaxpr, prevent_cse, differentiated, policy)` evaluates its program.
What makes it more than a call is its partial-evaluation rule: when linearize splits
it, the known work runs now, and the staged (tangent) work gets only the values the
`policy` saves, `policy(prim, *in_avals, **params) -> bool` asked about each known
equation; everything else is computed again inside the staged program from the saved
values and the inputs (`pe.RecomputingTrace`). Its transpose keeps that recomputation
inside a `checkpoint`, whose lowering puts an optimization barrier on the inputs
(`prevent_cse`) so XLA cannot merge the recomputation with the forward pass.
"""
from __future__ import annotations

import jax

from impl import core
from impl.core import get_aval
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero, is_undefined_primal
from impl.primitives import sharding_rules
from impl.primitives._define import define
from impl.primitives.control_flow import eval_eagerly


def _nothing_saveable(*_, **__):
    return False


def _cse_flags(prevent_cse, n):
    return (prevent_cse,) * n if isinstance(prevent_cse, bool) else prevent_cse


def _extend_cse(prevent_cse, keep, n_new, new_first=False):
    """prevent_cse for a derived checkpoint: the kept operands' flags, and True for
    `n_new` new operands (tangents, residuals, cotangents) after them or before."""
    if isinstance(prevent_cse, bool):
        return prevent_cse
    kept = tuple(f for f, k in zip(prevent_cse, keep) if k)
    return (True,) * n_new + kept if new_first else kept + (True,) * n_new


def _checkpoint_aval(*avals, jaxpr, prevent_cse, differentiated, policy):
    expected = jaxpr.in_avals
    if len(avals) != len(expected) or any(a.shape != e.shape or a.dtype != e.dtype
                                          for a, e in zip(avals, expected)):
        raise TypeError(f"checkpoint: argument types {[a.str_short() for a in avals]} do "
                        f"not match the program's {[e.str_short() for e in expected]}")
    if not isinstance(prevent_cse, bool) and len(prevent_cse) != len(avals):
        raise TypeError(f"checkpoint: prevent_cse has {len(prevent_cse)} flags for "
                        f"{len(avals)} operands")
    return list(jaxpr.out_avals)


def _checkpoint_impl(*args, jaxpr, **params):
    _checkpoint_aval(*[get_aval(a) for a in args], jaxpr=jaxpr, **params)
    return eval_eagerly(jaxpr, *args)


def _checkpoint_lower(*args, jaxpr, prevent_cse, differentiated, policy):
    args = list(args)
    if differentiated:
        # A recomputation: the barrier hides that its inputs are the forward pass's, so
        # XLA cannot reuse the forward values and undo the rematerialization.
        barred = [i for i, f in enumerate(_cse_flags(prevent_cse, len(args)))
                  if f and isinstance(args[i], jax.Array)]
        for i, x in zip(barred, jax.lax.optimization_barrier([args[i] for i in barred])):
            args[i] = x
    return lowering.eval_jaxpr_lowered(jaxpr.jaxpr, jaxpr.consts, args)


def _checkpoint_jvp(primals, tangents, *, jaxpr, prevent_cse, differentiated, policy):
    nonzeros = [type(t) is not Zero for t in tangents]
    new, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros)
    outs = checkpoint_p.bind(
        *primals, *[t for t in tangents if type(t) is not Zero], jaxpr=new,
        prevent_cse=_extend_cse(prevent_cse, [True] * len(primals), sum(nonzeros)),
        differentiated=differentiated, policy=policy)
    n = len(jaxpr.out_avals)
    ts = iter(outs[n:])
    return outs[:n], [next(ts) if nz else Zero(ad.tangent_aval(a))
                      for nz, a in zip(out_nz, jaxpr.out_avals)]


def _checkpoint_batch(axis_data, vals, dims, *, jaxpr, **params):
    new, out_dims = batching.batch_jaxpr(jaxpr, axis_data, [get_aval(v) for v in vals], dims)
    return checkpoint_p.bind(*vals, jaxpr=new, **params), out_dims


def _checkpoint_partial_eval(trace, args, *, jaxpr, prevent_cse, differentiated, policy):
    unknowns = [trace.is_own(x) for x in args]
    # Known work runs on `trace` itself (which forwards it to its parent), so that an
    # enclosing checkpoint's policy also sees it.
    known_outs, out_uk, staged, residuals = pe.split_evaluate(
        jaxpr, [x for x, u in zip(args, unknowns) if not u],
        [get_aval(x) for x, u in zip(args, unknowns) if u], unknowns,
        saveable=policy or _nothing_saveable)
    staged_outs = trace.stage(checkpoint_p, residuals + [x for x, u in zip(args, unknowns) if u],
                              dict(jaxpr=staged, differentiated=True, policy=policy,
                                   prevent_cse=_extend_cse(prevent_cse, unknowns,
                                                           len(residuals), True)))
    it = iter(staged_outs)
    return [next(it) if u else k for k, u in zip(known_outs, out_uk)]


def _checkpoint_transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    linear = [is_undefined_primal(x) for x in args]
    res = [x for x in args if not is_undefined_primal(x)]
    ct_nonzero = [type(ct) is not Zero for ct in cts]
    transposed, _ = ad.transpose_jaxpr(jaxpr, linear, ct_nonzero, instantiate=True)
    outs = iter(checkpoint_p.bind(
        *res, *[ct for ct in cts if type(ct) is not Zero], jaxpr=transposed,
        prevent_cse=_extend_cse(prevent_cse, [not lin for lin in linear], sum(ct_nonzero)),
        differentiated=True, policy=policy))
    return [next(outs) if lin else None for lin in linear]


def _checkpoint_dce(used_outputs, eqn):
    """Drop unused outputs and the operands only they needed."""
    jaxpr, read = pe.dce_closed_jaxpr(eqn.params["jaxpr"], used_outputs)
    prevent_cse = eqn.params["prevent_cse"]
    if not isinstance(prevent_cse, bool):
        prevent_cse = tuple(f for f, r in zip(prevent_cse, read) if r)
    return core.JaxprEqn(checkpoint_p, [v for v, r in zip(eqn.invars, read) if r],
                         [v for v, u in zip(eqn.outvars, used_outputs) if u],
                         dict(eqn.params, jaxpr=jaxpr, prevent_cse=prevent_cse))


checkpoint_p = define(
    "checkpoint", multiple_results=True, abstract_eval=_checkpoint_aval,
    lowering=_checkpoint_lower, impl=_checkpoint_impl, jvp=_checkpoint_jvp,
    transpose=_checkpoint_transpose, batching=_checkpoint_batch,
    partial_eval=_checkpoint_partial_eval, dce=_checkpoint_dce,
    sharding_rule=core.TYPED_BY_ABSTRACT_EVAL, vma_rule=core.TYPED_BY_ABSTRACT_EVAL)


# --------------------------------------------------------------------------- name
# name(x, name): the identity, marking x for policies such as save_only_these_names.

def _name_jvp(primals, tangents, *, name):
    (x,), (t,) = primals, tangents
    return name_p.bind(x, name=name), t     # the tangent is not named


name_p = define(
    "name", abstract_eval=lambda x, *, name: x, lowering=lambda x, *, name: x,
    jvp=_name_jvp, transpose=lambda ct, x, *, name: [ct], batching=batching.vectorized,
    sharding_rule=core.TYPED_BY_ABSTRACT_EVAL, unreduced_rule=sharding_rules.keeps_unreduced)
