"""The `jit` primitive: a call of a staged program, with every rule.

A jitted function called inside another transformation binds `jit_p` with its program
as a parameter. The rules transform the program itself (jvp, batching, partial
evaluation, transposition), so the result stays one staged call that XLA compiles as a
whole. The call carries one sharding per input and per output (None: unspecified),
which every rule keeps: tangents share their primal's sharding, a batched value's
sharding gains its batch axis, a transpose swaps input and output shardings.
"""
from __future__ import annotations

from impl import core
from impl.core import get_aval
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero
from impl.primitives._define import define
from impl.primitives.sharding import batch_sharding


def _jit_impl(*args, jaxpr, name, in_shardings, out_shardings):
    return lowering.compile_closed_jaxpr(jaxpr, in_shardings, out_shardings)(*args)


def _jit_abstract_eval(*avals, jaxpr, name, in_shardings, out_shardings):
    expected = jaxpr.in_avals
    if len(avals) != len(expected) or any(
            a.shape != e.shape or a.dtype != e.dtype for a, e in zip(avals, expected)):
        raise TypeError(f"jit call of {name}: argument types "
                        f"{[a.str_short() for a in avals]} do not match the program's "
                        f"{[e.str_short() for e in expected]}")
    return jaxpr.out_avals


def _jit_lowering(*args, jaxpr, name, in_shardings, out_shardings):
    # A jitted call inside a program stays a call (a nested jax.jit, which also carries
    # the shardings), as in JAX: XLA then sees JAX's program structure, so it fuses and
    # rounds floating point the same way (impl.random's draws are bit-for-bit JAX's).
    return _jit_impl(*args, jaxpr=jaxpr, name=name, in_shardings=in_shardings,
                     out_shardings=out_shardings)


def _nonzero(values, nonzeros):
    return tuple(v for v, nz in zip(values, nonzeros) if nz)


def _jit_jvp(primals, tangents, *, jaxpr, name, in_shardings, out_shardings):
    nonzeros = [type(t) is not Zero for t in tangents]
    new, out_nonzero = ad.jvp_jaxpr(jaxpr, nonzeros)
    outs = jit_p.bind(*primals, *[t for t in tangents if type(t) is not Zero],
                      jaxpr=new, name=name,
                      in_shardings=in_shardings + _nonzero(in_shardings, nonzeros),
                      out_shardings=out_shardings + _nonzero(out_shardings, out_nonzero))
    n = len(jaxpr.out_avals)
    primal_outs, t_iter = outs[:n], iter(outs[n:])
    out_ts = [next(t_iter) if nz else Zero(ad.tangent_aval(a))
              for nz, a in zip(out_nonzero, jaxpr.out_avals)]
    return primal_outs, out_ts


def _jit_transpose(cts, *args, jaxpr, name, in_shardings, out_shardings):
    linear = [ad.is_undefined_primal(x) for x in args]
    ct_nonzero = [type(ct) is not Zero for ct in cts]
    new, in_nonzero = ad.transpose_jaxpr(jaxpr, linear, ct_nonzero)
    linear_shardings = _nonzero(in_shardings, linear)
    outs = iter(jit_p.bind(
        *[x for x, lin in zip(args, linear) if not lin],
        *[ct for ct in cts if type(ct) is not Zero], jaxpr=new, name=name,
        in_shardings=(_nonzero(in_shardings, [not lin for lin in linear])
                      + _nonzero(out_shardings, ct_nonzero)),
        out_shardings=_nonzero(linear_shardings, in_nonzero)))
    nonzero = iter(in_nonzero)
    return [(next(outs) if next(nonzero) else None) if lin else None for lin in linear]


def _jit_batch(axis_data, vals, dims, *, jaxpr, name, in_shardings, out_shardings):
    new, out_dims = batching.batch_jaxpr(jaxpr, axis_data, [get_aval(v) for v in vals], dims)
    spmd = axis_data.spmd_name
    return jit_p.bind(
        *vals, jaxpr=new, name=name,
        in_shardings=tuple(s if d is None else batch_sharding(s, d, spmd, what="jit")
                           for s, d in zip(in_shardings, dims)),
        out_shardings=tuple(s if d is None else batch_sharding(s, d, spmd, what="jit")
                            for s, d in zip(out_shardings, out_dims))), out_dims


def _jit_partial_eval(trace, args, *, jaxpr, name, in_shardings, out_shardings):
    unknowns = [trace.is_own(x) for x in args]
    key = ("pe", tuple(unknowns))
    hit = jaxpr._cache.get(key)
    if hit is None:
        hit = jaxpr._cache[key] = pe.partial_eval_jaxpr(jaxpr, unknowns)
    known, unknown, out_unknowns, num_res = hit
    known_args = [x for x, u in zip(args, unknowns) if not u]
    knowns = [not u for u in unknowns]
    out_knowns = [not u for u in out_unknowns]
    known_outs = trace.bind_known(
        jit_p, known_args,
        dict(jaxpr=known, name=name,
             in_shardings=_nonzero(in_shardings, knowns),
             out_shardings=_nonzero(out_shardings, out_knowns) + (None,) * num_res))
    n_known = len(known_outs) - num_res
    residuals = known_outs[n_known:]
    unknown_args = [x for x, u in zip(args, unknowns) if u]
    invars = [trace.get_var(x) for x in list(residuals) + unknown_args]
    staged = trace.add_eqn(jit_p, invars, unknown.out_avals,
                           dict(jaxpr=unknown, name=name,
                                in_shardings=(None,) * num_res + _nonzero(in_shardings,
                                                                          unknowns),
                                out_shardings=_nonzero(out_shardings, out_unknowns)))
    k_iter, u_iter = iter(known_outs[:n_known]), iter(staged)
    return [next(u_iter) if u else next(k_iter) for u in out_unknowns]


jit_p = define("jit", multiple_results=True, abstract_eval=_jit_abstract_eval,
               lowering=_jit_lowering, impl=_jit_impl, jvp=_jit_jvp,
               transpose=_jit_transpose, batching=_jit_batch,
               partial_eval=_jit_partial_eval,
               sharding_rule=core.TYPED_BY_ABSTRACT_EVAL, vma_rule=core.TYPED_BY_ABSTRACT_EVAL)


def _jit_printed_params(eqn, namer):
    """As JAX prints a jit call: its name and program, whose variables are named as the
    call's arguments and results; shardings only where some are given."""
    program = eqn.params["jaxpr"]
    if id(program.jaxpr) not in namer.shared:   # (a shared one is printed first)
        namer.suggest(program.jaxpr.invars, eqn.invars)
        namer.suggest(program.jaxpr.outvars, eqn.outvars)
    shown = [("name", eqn.params["name"]), ("jaxpr", program)]
    return shown + [(k, eqn.params[k]) for k in ("in_shardings", "out_shardings")
                    if any(s is not None for s in eqn.params[k])]


core.pp_params_rules[jit_p] = _jit_printed_params
