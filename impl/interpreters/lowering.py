"""Lowering: run a program of the IR as `jax.lax` calls inside one `jax.jit`.

Every primitive has a lowering rule `(*args, **params) -> out` that calls `jax.lax`.
The same rules evaluate primitives eagerly (see `impl.primitives._define`), so eager
results are `jax.Array`s on JAX's default device, and a staged program compiles as a
whole.
"""
from __future__ import annotations

import contextlib

import jax
import numpy as np

from impl import core
from impl.core import Literal

lowering_rules: dict = {}


def _jax_scopes(names):
    stack = contextlib.ExitStack()
    for n in names:
        stack.enter_context(jax.named_scope(n))
    return stack


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
        invals = [_literal(v.val) if type(v) is Literal else env[v.id] for v in eqn.invars]
        mesh = _other_mesh(eqn)
        if eqn.name_stack or mesh is not None:
            # impl.named_scope names become XLA op names, as in JAX
            with _jax_scopes(eqn.name_stack), _mesh_scope(mesh):
                outs = rule(*invals, **eqn.params)
        else:
            outs = rule(*invals, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = (outs,)
        for v, x in zip(eqn.outvars, outs):
            if v.aval.explicit_sharding is not None:
                x = _as_typed(x, v.aval.explicit_sharding)
            env[v.id] = x
    return [v.val if type(v) is Literal else env[v.id] for v in jaxpr.outvars]


def _other_mesh(eqn):
    """The mesh of an equation's explicitly typed results when it is not the mesh in
    context (values inside explicit_axes), else None."""
    for v in eqn.outvars:
        sharding = v.aval.explicit_sharding
        if sharding is not None:
            context = jax.sharding.get_abstract_mesh()
            if not context.empty and sharding.mesh != context:
                return sharding.mesh
            return None
    return None


def _mesh_scope(mesh):
    return (contextlib.nullcontext() if mesh is None
            else jax.sharding.use_abstract_mesh(mesh))


def _literal(val):
    """A scalar literal operand enters JAX as a host scalar (a Python scalar when
    weakly typed): a jax array there is a value closed over, which JAX's shard_map
    refuses on meshes with Explicit axes and which, made while tracing under another
    mesh context (explicit_axes), carries that mesh in its type."""
    if isinstance(val, jax.Array):
        return val.item() if val.aval.weak_type else np.asarray(val)[()]
    return val


def _as_typed(x, sharding):
    """The type's explicit sharding is what XLA partitions by: where JAX's own
    propagation through the lowering gave the value another one, reshard it."""
    if core.jax_explicit_sharding(x) != sharding:
        return jax.sharding.reshard(x, sharding)
    return x


def compile_closed_jaxpr(closed, in_shardings=None, out_shardings=None):
    """A `jax.jit`-compiled callable for `closed` (cached on the program), optionally
    with one sharding (or None) per argument and per result, as jax.jit takes them."""
    key = ("compiled", in_shardings, out_shardings)
    fn = closed._cache.get(key)
    if fn is None:
        jaxpr = closed.jaxpr

        def run(consts, args):
            return eval_jaxpr_lowered(jaxpr, consts, args)

        shardings = {}
        if in_shardings is not None:
            shardings["in_shardings"] = (None, list(in_shardings))
        if out_shardings is not None:
            shardings["out_shardings"] = list(out_shardings)
        jitted = jax.jit(run, **shardings)
        consts = closed.consts

        def fn(*args):
            return jitted(consts, list(args))

        closed._cache[key] = fn
    return fn
