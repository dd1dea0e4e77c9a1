"""Lowering: run a program of the IR as `jax.lax` calls inside one `jax.jit`.

Every primitive has a lowering rule `(*args, **params) -> out` that calls `jax.lax`.
The same rules evaluate primitives eagerly (see `impl.primitives._define`), so eager
results are `jax.Array`s on JAX's default device, and a staged program compiles as a
whole.
"""
from __future__ import annotations

import contextlib
import functools
import inspect

import jax
import numpy as np
from jax._src.array import ArrayImpl

from impl import core
from impl.interpreters import dispatch
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
    context (values inside explicit_axes), the empty one for the results off any mesh
    of a primitive that JAX would put on the mesh in context (zeros of a cotangent off
    it), else None."""
    for v in eqn.outvars:
        sharding = v.aval.explicit_sharding
        if sharding is not None:
            context = jax.sharding.get_abstract_mesh()
            if not context.empty and sharding.mesh != context:
                return sharding.mesh
            return None
    if (eqn.outvars and eqn.primitive in core.results_on_context_mesh
            and all(v.aval.mesh is None for v in eqn.outvars)
            and not jax.sharding.get_abstract_mesh().empty):
        return core.EMPTY_MESH
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


@contextlib.contextmanager
def staging_for_jax():
    """While jax.jit traces impl code: impl evaluates primitives (its eval trace), so
    they lower to jax.lax calls on JAX's tracers, and JAX's compile-time evaluation keeps
    the concrete constants impl builds with jax.numpy (creation functions) concrete."""
    with core.set_current_trace(core.eval_trace), jax.ensure_compile_time_eval():
        yield


def compiled_when_eager(fn):
    """`fn` (an array function over impl's primitives, of one or two array parameters)
    that, called outside every transformation with concrete jax arrays as its required
    arguments and nothing else, runs as one jax.jit-compiled program, as jax.numpy's
    functions are jitted: an eager call then costs jax.jit's C++ dispatch and no Python
    (the function returned is a dispatcher of `impl.interpreters.dispatch`), not impl's
    type rules and one JAX dispatch per primitive. Any other call, and a call whose
    compiled path fails (the error is then raised by `fn` itself, as impl reports it),
    runs `fn`.

    `.with_argument_check(check)`: the same function (sharing the compiled programs)
    calling `check(args, kwargs)` before `fn` on the path that runs `fn` (arrays alone
    need no check)."""
    def staged(*args):
        with staging_for_jax():
            return fn(*args)
    # Named as the jax.numpy function it is (the dispatcher's repr shows it).
    fn.__qualname__ = staged.__name__ = staged.__qualname__ = fn.__name__
    params = inspect.signature(fn).parameters.values()
    arity = sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                for p in params)
    if arity not in (1, 2):
        raise TypeError(f"compiled_when_eager: {fn.__name__} has {arity} required "
                        "parameters; one or two are supported")
    return _eager_dispatcher(fn, jax.jit(staged, inline=True), arity, None)


def _eager_dispatcher(fn, compiled, arity, check_arguments):
    state, eval_trace = core._state, core.eval_trace

    # A function of this dispatcher alone (the dispatch cache is weak on it), also what
    # runs under jax.disable_jit(). The dispatcher's signature is its, so fn's.
    @functools.wraps(fn)
    def run_fn(*args, **kwargs):
        if check_arguments is not None:
            check_arguments(args, kwargs)
        return fn(*args, **kwargs)

    def cache_miss(*args, **kwargs):
        if (len(args) == arity and not kwargs and state.trace is eval_trace
                and all(type(a) is ArrayImpl for a in args)):
            try:
                return compiled._cache_miss(*args)
            except Exception:
                pass
        # Calls like this one come back here: their executable is not cached.
        return run_fn(*args, **kwargs), None, False

    out = dispatch.dispatcher(fn, fn.__name__, run_fn, cache_miss)
    out.with_argument_check = lambda check: _eager_dispatcher(fn, compiled, arity, check)
    return out
