"""The `jit` primitive: a call of a staged program, with every rule.

A jitted function called inside another transformation binds `jit_p` with its program
as a parameter. The rules transform the program itself (jvp, batching, partial
evaluation), so the result stays one staged call that XLA compiles as a whole.
"""
from __future__ import annotations

from impl import core
from impl.core import ClosedJaxpr, get_aval
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero

jit_p = core.Primitive("jit", multiple_results=True)


def _jit_impl(*args, jaxpr, name):
    return lowering.compile_closed_jaxpr(jaxpr)(*args)


def _jit_abstract_eval(*avals, jaxpr, name):
    expected = jaxpr.in_avals
    if len(avals) != len(expected) or any(
            a.shape != e.shape or a.dtype != e.dtype for a, e in zip(avals, expected)):
        raise TypeError(f"jit call of {name}: argument types "
                        f"{[a.str_short() for a in avals]} do not match the program's "
                        f"{[e.str_short() for e in expected]}")
    return jaxpr.out_avals


def _jit_lowering(*args, jaxpr, name):
    return lowering.eval_jaxpr_lowered(jaxpr.jaxpr, jaxpr.consts, args)


core.impl_rules[jit_p] = _jit_impl
core.abstract_eval_rules[jit_p] = _jit_abstract_eval
lowering.lowering_rules[jit_p] = _jit_lowering


# ------------------------------------------------------------------------ jvp

def jvp_jaxpr(closed: ClosedJaxpr, nonzeros):
    """A program computing (primal outs, nonzero tangent outs), and which are nonzero."""
    key = ("jvp", tuple(nonzeros))
    hit = closed._cache.get(key)
    if hit is not None:
        return hit
    n = len(nonzeros)
    t_avals = [ad.tangent_aval(a) for a, nz in zip(closed.in_avals, nonzeros) if nz]
    box = {}

    def fun(*args):
        primals, ts = args[:n], iter(args[n:])
        tangents = [next(ts) if nz else Zero(ad.tangent_aval(a))
                    for a, nz in zip(closed.in_avals, nonzeros)]
        outs, out_ts = ad.jvp_flat(core.jaxpr_as_fun(closed), primals, tangents)
        box["out_nonzero"] = [type(t) is not Zero for t in out_ts]
        return list(outs) + [t for t in out_ts if type(t) is not Zero]

    new = pe.make_closed_jaxpr(fun, list(closed.in_avals) + t_avals)
    closed._cache[key] = result = (new, box["out_nonzero"])
    return result


def _jit_jvp(primals, tangents, *, jaxpr, name):
    nonzeros = [type(t) is not Zero for t in tangents]
    new, out_nonzero = jvp_jaxpr(jaxpr, nonzeros)
    outs = jit_p.bind(*primals, *[t for t in tangents if type(t) is not Zero],
                      jaxpr=new, name=f"jvp({name})")
    n = len(jaxpr.out_avals)
    primal_outs, t_iter = outs[:n], iter(outs[n:])
    out_ts = [next(t_iter) if nz else Zero(ad.tangent_aval(a))
              for nz, a in zip(out_nonzero, jaxpr.out_avals)]
    return primal_outs, out_ts


ad.jvp_rules[jit_p] = _jit_jvp


def _jit_transpose(cts, *args, jaxpr, name):
    return ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, args, cts)


ad.transpose_rules[jit_p] = _jit_transpose


# ------------------------------------------------------------------- batching

def batch_jaxpr(closed: ClosedJaxpr, axis_data, in_avals, in_dims):
    """A program over batched inputs; its batched outputs carry the batch axis first."""
    key = ("batch", axis_data.size, axis_data.name, tuple(in_avals), tuple(in_dims))
    hit = closed._cache.get(key)
    if hit is not None:
        return hit
    box = {}

    def fun(*args):
        res = batching.batch_with_dims(core.jaxpr_as_fun(closed), args, in_dims,
                                       axis_data.size, axis_data.name)
        box["out_dims"] = [None if d is None else 0 for _, d in res]
        return [x if d is None else batching.moveaxis(x, d, 0) for x, d in res]

    new = pe.make_closed_jaxpr(fun, in_avals)
    closed._cache[key] = result = (new, box["out_dims"])
    return result


def _jit_batch(axis_data, vals, dims, *, jaxpr, name):
    new, out_dims = batch_jaxpr(jaxpr, axis_data, [get_aval(v) for v in vals], dims)
    return jit_p.bind(*vals, jaxpr=new, name=f"vmap({name})"), out_dims


batching.batching_rules[jit_p] = _jit_batch


# ------------------------------------------------------------ partial evaluation

def _jit_partial_eval(trace, args, *, jaxpr, name):
    unknowns = [trace.is_own(x) for x in args]
    key = ("pe", tuple(unknowns))
    hit = jaxpr._cache.get(key)
    if hit is None:
        hit = jaxpr._cache[key] = pe.partial_eval_jaxpr(jaxpr, unknowns)
    known, unknown, out_unknowns, num_res = hit
    known_args = [x for x, u in zip(args, unknowns) if not u]
    with core.set_current_trace(trace.parent):
        known_outs = jit_p.bind(*known_args, jaxpr=known, name=f"known({name})")
    n_known = len(known_outs) - num_res
    residuals = known_outs[n_known:]
    unknown_args = [x for x, u in zip(args, unknowns) if u]
    invars = [trace.get_var(x) for x in list(residuals) + unknown_args]
    staged = trace.add_eqn(jit_p, invars, unknown.out_avals,
                           dict(jaxpr=unknown, name=f"unknown({name})"))
    k_iter, u_iter = iter(known_outs[:n_known]), iter(staged)
    return [next(u_iter) if u else next(k_iter) for u in out_unknowns]


pe.partial_eval_rules[jit_p] = _jit_partial_eval
