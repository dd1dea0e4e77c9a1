"""Lowering: run a program of the IR as `jax.lax` calls inside one `jax.jit`.

Every primitive has a lowering rule `(*args, **params) -> out` that calls `jax.lax`.
The same rules evaluate primitives eagerly (see `impl.primitives._define`), so eager
results are `jax.Array`s on JAX's default device, and a staged program compiles as a
whole.
"""
from __future__ import annotations

import jax

from impl import core
from impl.core import Literal

lowering_rules: dict = {}


def eval_jaxpr_lowered(jaxpr, consts, args):
    """Interpret `jaxpr` with lowering rules (on jax values or jax tracers)."""
    env = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v.id] = x
    for v, x in zip(jaxpr.invars, args):
        env[v.id] = x
    for eqn in jaxpr.eqns:
        rule = lowering_rules.get(eqn.primitive)
        if rule is None:
            raise core.missing_rule("Lowering", eqn.primitive)
        invals = [v.val if type(v) is Literal else env[v.id] for v in eqn.invars]
        outs = rule(*invals, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = (outs,)
        for v, x in zip(eqn.outvars, outs):
            env[v.id] = x
    return [v.val if type(v) is Literal else env[v.id] for v in jaxpr.outvars]


def compile_closed_jaxpr(closed):
    """A `jax.jit`-compiled callable for `closed` (cached on the program)."""
    fn = closed._cache.get("compiled")
    if fn is None:
        jaxpr = closed.jaxpr

        def run(consts, args):
            return eval_jaxpr_lowered(jaxpr, consts, args)

        jitted = jax.jit(run)
        consts = closed.consts

        def fn(*args):
            return jitted(consts, list(args))

        closed._cache["compiled"] = fn
    return fn
