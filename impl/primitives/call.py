"""The `jit` primitive: a call of a staged program, with every rule.

A jitted function called inside another transformation binds `jit_p` with its program
as a parameter. The rules transform the program itself (jvp, batching, partial
evaluation), so the result stays one staged call that XLA compiles as a whole.
"""
from __future__ import annotations

from impl.core import get_aval
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero
from impl.primitives._define import define


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
    # A jitted call inside a program stays a call (a nested jax.jit), as in JAX: XLA
    # then sees the same program structure as JAX's, so it fuses and rounds floating
    # point the same way (bit-for-bit equal results).
    return lowering.compile_closed_jaxpr(jaxpr)(*args)


def _jit_jvp(primals, tangents, *, jaxpr, name):
    nonzeros = [type(t) is not Zero for t in tangents]
    new, out_nonzero = ad.jvp_jaxpr(jaxpr, nonzeros)
    outs = jit_p.bind(*primals, *[t for t in tangents if type(t) is not Zero],
                      jaxpr=new, name=f"jvp({name})")
    n = len(jaxpr.out_avals)
    primal_outs, t_iter = outs[:n], iter(outs[n:])
    out_ts = [next(t_iter) if nz else Zero(ad.tangent_aval(a))
              for nz, a in zip(out_nonzero, jaxpr.out_avals)]
    return primal_outs, out_ts


def _jit_transpose(cts, *args, jaxpr, name):
    return ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, args, cts)


def _jit_batch(axis_data, vals, dims, *, jaxpr, name):
    new, out_dims = batching.batch_jaxpr(jaxpr, axis_data, [get_aval(v) for v in vals], dims)
    return jit_p.bind(*vals, jaxpr=new, name=f"vmap({name})"), out_dims


def _jit_partial_eval(trace, args, *, jaxpr, name):
    unknowns = [trace.is_own(x) for x in args]
    key = ("pe", tuple(unknowns))
    hit = jaxpr._cache.get(key)
    if hit is None:
        hit = jaxpr._cache[key] = pe.partial_eval_jaxpr(jaxpr, unknowns)
    known, unknown, out_unknowns, num_res = hit
    known_args = [x for x, u in zip(args, unknowns) if not u]
    known_outs = trace.bind_known(jit_p, known_args, dict(jaxpr=known, name=f"known({name})"))
    n_known = len(known_outs) - num_res
    residuals = known_outs[n_known:]
    unknown_args = [x for x, u in zip(args, unknowns) if u]
    invars = [trace.get_var(x) for x in list(residuals) + unknown_args]
    staged = trace.add_eqn(jit_p, invars, unknown.out_avals,
                           dict(jaxpr=unknown, name=f"unknown({name})"))
    k_iter, u_iter = iter(known_outs[:n_known]), iter(staged)
    return [next(u_iter) if u else next(k_iter) for u in out_unknowns]


jit_p = define("jit", multiple_results=True, abstract_eval=_jit_abstract_eval,
               lowering=_jit_lowering, impl=_jit_impl, jvp=_jit_jvp,
               transpose=_jit_transpose, batching=_jit_batch,
               partial_eval=_jit_partial_eval)
