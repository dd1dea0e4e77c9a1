"""custom_jvp: a Python function with its own forward-mode rule.

Calling a custom_jvp function inside a transformation stages the function to a program
and binds `custom_jvp_call` with that program (`call_jaxpr`) and the user's rule, wrapped as a
function of flat operands (`jvp`). Its jvp rule runs the user's rule with the current
trace set to the JVPTrace's parent, so higher orders just work; vmap batches the program
and wraps the rule in a vmap; a linear custom_jvp function transposes through its
program. Reverse mode is forward mode plus transposition, as for every primitive.

Rules defined with `symbolic_zeros=True` see a `SymbolicZero` (not an array) for every
tangent known to be zero, and any rule may return one.
"""
from __future__ import annotations

import functools

from jax import tree_util

from impl import core
from impl.core import Tracer, get_aval
from impl.custom_derivatives.common import (
    ArgLayout, BatchedOutDims, CustomRuleFunction, DifferentiatedCall, SymbolicZero,
    batch_flat_rule, call_substituted, check_jaxtypes, closed_over_error, describe,
    from_rule, is_eager, is_float, landing, match_batch, move_batch_to_front, name_of,
    named_as, printed_call_params, program_call_rules, run_at_eval, to_rule, tree_flatten,
    tree_unflatten, type_str, zero_tangent_value)
from impl.interpreters import ad, batching
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero
from impl.primitives._define import define
from impl.primitives.elementwise import stop_gradient_p


class CustomJVPException(core.UnexpectedTracerError):
    """A custom_jvp function was differentiated with respect to a value it closes over
    (JAX reports this as an UnexpectedTracerError)."""


def zero_from_primal(val, symbolic_zeros=False):
    """A zero tangent for every leaf of `val`: SymbolicZero objects, or arrays (float0
    for non-float leaves)."""
    def zero(x):
        aval = get_aval(x)
        return SymbolicZero(ad.tangent_aval(aval)) if symbolic_zeros else \
            zero_tangent_value(aval)
    return tree_util.tree_map(zero, val)


def _stop_gradient(x):
    return stop_gradient_p.bind(x) if isinstance(x, Tracer) else x


# ------------------------------------------------------------------ the primitive

def _custom_jvp_call_jvp(primals, tangents, *, call_jaxpr, jvp, num_consts, name,
                         symbolic_zeros):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise closed_over_error("custom_jvp", name, CustomJVPException)
    return jvp(list(primals[:num_consts]), list(primals[num_consts:]),
               list(tangents[num_consts:]))


def _custom_jvp_call_transpose(cts, *args, call_jaxpr, jvp, num_consts, name,
                               symbolic_zeros):
    # A custom_jvp function that is linear (its rule applies it to the tangents):
    # transpose its program.
    return ad.backward_pass(call_jaxpr.jaxpr, call_jaxpr.consts, args, cts)


def _custom_jvp_call_batch(axis_data, vals, dims, *, call_jaxpr, jvp, num_consts, name,
                           symbolic_zeros):
    vals, dims = move_batch_to_front(vals, dims)
    bcall, out_dims = batching.batch_jaxpr(call_jaxpr, axis_data, [get_aval(v) for v in vals],
                                           dims)
    const_dims, arg_dims = dims[:num_consts], dims[num_consts:]
    out_dims = BatchedOutDims(out_dims, f"custom_jvp rule of {name}")
    size = axis_data.size

    @functools.partial(named_as, user_fn=jvp)
    def batched_jvp(consts, args, ts):
        nc, n = len(consts), len(args)

        def flat(*xs):
            outs, out_ts = jvp(list(xs[:nc]), list(xs[nc:nc + n]), list(xs[nc + n:]))
            return list(outs) + list(out_ts)

        res = batch_flat_rule(flat, axis_data, list(consts) + list(args) + list(ts),
                              list(const_dims) + list(arg_dims) * 2)
        k = len(res) // 2
        want = [out_dims.target(i, pd, td)
                for i, ((_, pd), (_, td)) in enumerate(zip(res[:k], res[k:]))]
        return ([match_batch(size, pd, w, p) for (p, pd), w in zip(res[:k], want)],
                [match_batch(size, td, w, t) for (t, td), w in zip(res[k:], want)])

    outs = custom_jvp_call_p.bind(*vals, call_jaxpr=bcall, jvp=batched_jvp,
                                  num_consts=num_consts, name=name,
                                  symbolic_zeros=symbolic_zeros)
    out_dims.staged = True
    return outs, out_dims.dims


def _custom_jvp_call_dce(used_outputs, eqn):
    """The call computing the used outputs only: its program pruned, its rule giving
    those outputs (and their tangents)."""
    p = eqn.params
    program, _ = pe.dce_closed_jaxpr(p["call_jaxpr"], used_outputs, keep_inputs=True)
    jvp = p["jvp"]

    @functools.partial(named_as, user_fn=jvp)
    def used_jvp(consts, args, ts):
        outs, out_ts = jvp(consts, args, ts)
        return ([o for o, u in zip(outs, used_outputs) if u],
                [t for t, u in zip(out_ts, used_outputs) if u])

    return core.JaxprEqn(eqn.primitive, eqn.invars,
                         [v for v, u in zip(eqn.outvars, used_outputs) if u],
                         dict(p, call_jaxpr=program, jvp=used_jvp))


custom_jvp_call_p = define("custom_jvp_call", **program_call_rules("custom_jvp_call"),
                           jvp=_custom_jvp_call_jvp, transpose=_custom_jvp_call_transpose,
                           batching=_custom_jvp_call_batch, dce=_custom_jvp_call_dce)
core.pp_params_rules[custom_jvp_call_p] = printed_call_params


# --------------------------------------------------------------- validating rules

def _tree_of_types(tree, avals):
    return str(tree_unflatten(tree, [type_str(a) for a in avals])).replace("'", "")


def _check_rule_outputs(name, rule_name, expected, pair):
    """Validate what a JVP rule returned; return (primal leaves, tangent leaves, output
    tree). `expected`: the function's (output tree, output avals), or None when the
    function has not been run (the rule is then only checked against itself)."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f"Custom JVP rule {rule_name} for function {name} must produce a "
                        "pair (list or tuple of length two) representing primal and "
                        f"tangent outputs, but got {describe(pair)}.")
    p_leaves, p_tree = tree_flatten(pair[0])
    t_leaves, t_tree = tree_flatten(pair[1])
    if p_tree != t_tree:
        raise TypeError(f"Custom JVP rule {rule_name} for function {name} must produce "
                        "primal and tangent outputs with equal container (pytree) "
                        f"structures, but got {p_tree} and {t_tree} respectively.")
    check_jaxtypes(p_leaves, f"The primal outputs of custom JVP rule {rule_name}")
    check_jaxtypes([t for t in t_leaves if type(t) is not SymbolicZero],
                   f"The tangent outputs of custom JVP rule {rule_name}")
    p_avals = [get_aval(x) for x in p_leaves]
    lead = (f"Custom JVP rule {rule_name} for function {name} must produce a pair (list or "
            "tuple of length two) where the first element represents the primal output "
            f"(equal in value to the output of the custom_jvp-decorated function {name}, "
            "and in particular ")
    out_tree, out_avals = expected or (p_tree, p_avals)
    if p_tree != out_tree:
        raise TypeError(lead + "of the same container/pytree structure), but instead the "
                        "JVP rule output's first element had container/pytree structure:\n"
                        f"    {_tree_of_types(p_tree, p_avals)}\nwhile the "
                        f"custom_jvp-decorated function {name} had output container/pytree "
                        f"structure:\n    {_tree_of_types(out_tree, out_avals)}.")
    if any(a.shape != e.shape or a.dtype != e.dtype for a, e in zip(p_avals, out_avals)):
        raise TypeError(lead + "with leaves of the same shape/dtype), but instead the JVP "
                        "rule output's first element had shapes/dtypes of:\n"
                        f"    {_tree_of_types(p_tree, p_avals)}\nwhile the "
                        f"custom_jvp-decorated function {name} had output shapes/dtypes "
                        f"of:\n    {_tree_of_types(out_tree, out_avals)}")
    t_expected = [ad.tangent_aval(a) for a in p_avals]
    got = [t.aval if type(t) is SymbolicZero else get_aval(t) for t in t_leaves]
    bad = [(p, e, g) for p, e, g in zip(p_avals, t_expected, got)
           if e.shape != g.shape or e.dtype != g.dtype]
    if len(bad) == 1 and len(p_avals) == 1:
        (p, e, g), = bad
        raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                        f"corresponding shapes and dtypes. Expected {type_str(e)} (tangent "
                        f"type of {type_str(p)}) but got {type_str(g)}.")
    if bad:
        lines = "\n".join(f"  primal {type_str(p)} with tangent {type_str(g)}, expecting "
                          f"tangent {type_str(e)}" for p, e, g in bad)
        raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                        f"corresponding shapes and dtypes, but got:\n{lines}")
    return p_leaves, t_leaves, p_tree


# ------------------------------------------------------------------ the user API

class custom_jvp(CustomRuleFunction):
    """Give a Python function a custom JVP rule (used by jvp, grad, linearize, at every
    order), while vmap, jit and evaluation keep using the function itself."""

    api = "custom_jvp"

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        super().__init__(fun, nondiff_argnums, nondiff_argnames)
        self.jvp = None
        self.symbolic_zeros = False

    def defjvp(self, jvp, symbolic_zeros=False):
        """Set the rule jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out).
        With symbolic_zeros=True the rule sees SymbolicZero for known-zero tangents.
        Returns the rule, so it can be used as a decorator."""
        if not callable(jvp):
            raise TypeError(f"defjvp of {name_of(self.fun)}: the rule must be callable, got "
                            f"{type(jvp).__name__}")
        self.jvp = jvp
        self.symbolic_zeros = bool(symbolic_zeros)
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, fn(tangent, primal_out, *primals), or None (the output
        does not depend on that argument); the tangent output is their sum."""
        if self.nondiff_argnums:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals, tangents):
            primal_out = self(*primals)
            out_leaves, out_tree = tree_flatten(primal_out)
            acc = [None] * len(out_leaves)
            for fn, t in zip(jvps, tangents):
                if fn is None:
                    continue
                part = fn(t, primal_out, *primals)
                leaves, tree = tree_flatten(part)
                if tree != out_tree:
                    raise TypeError(f"defjvps rule of {name_of(self.fun)} must return a value "
                                    f"with the structure of the primal output {out_tree}, "
                                    f"but got {tree}")
                acc = [c if a is None else a + c for a, c in zip(acc, leaves)]
            return primal_out, tree_unflatten(out_tree, [
                SymbolicZero.from_primal_value(o) if a is None else a
                for a, o in zip(acc, out_leaves)])

        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        name = name_of(self.fun)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using "
                                 "defjvp.")
        args = self._positional(args, kwargs)
        nondiff = self._nondiff(args)
        if is_eager():
            return self.fun(*args)
        # traced values in nondiff arguments are never differentiated, at any order
        args = tuple(tree_util.tree_map(_stop_gradient, a) if i in nondiff else a
                     for i, a in enumerate(args))
        layout = ArgLayout(args, nondiff, f"custom_jvp function {name}")
        trace, vmaps = landing(layout.operands)
        if trace is core.eval_trace and not vmaps:
            return run_at_eval(self.fun, args, "custom_jvp", CustomJVPException)
        if type(trace) is ad.JVPTrace:
            return self._rule_only(DifferentiatedCall(
                trace, vmaps, layout.operands, "custom_jvp", name, CustomJVPException),
                layout)
        program, consts, out_tree = self._stage_primal(layout, f"custom_jvp function {name}")
        out_avals = program.out_avals

        @functools.partial(named_as, user_fn=self.jvp)
        def flat_jvp(const_vals, ops, ts):
            return call_substituted(consts, const_vals, self._run_rule, layout, ops, ts,
                                    (out_tree, out_avals))[:2]

        outs = custom_jvp_call_p.bind(*consts, *layout.operands, call_jaxpr=program,
                                      jvp=flat_jvp, num_consts=len(consts), name=name,
                                      symbolic_zeros=self.symbolic_zeros)
        return tree_unflatten(out_tree, outs)

    def _rule_only(self, call, layout):
        """At a JVP trace perturbing an operand (under vmaps or not): the rule gives the
        primal and tangent outputs; the function itself is not run (as in JAX)."""
        outs, out_ts, out_tree = self._run_rule(layout, call.primals, call.tangents, None)
        return tree_unflatten(out_tree, [call.join(p, t) for p, t in zip(outs, out_ts)])

    def _run_rule(self, layout, ops, ts, expected):
        """Run the user's rule on flat operands and tangents. `expected`: the function's
        (output tree, output avals) when it has been staged, to check the rule against.
        Returns (primal leaves, tangent leaves or Zeros, output tree)."""
        name, rule_name = name_of(self.fun), name_of(self.jvp)
        nondiff_args, primals = layout.split(layout.rebuild(ops))
        ts = [to_rule(t, self.symbolic_zeros) for t in ts]
        pair = self.jvp(*nondiff_args, primals, layout.diff_values(ts))
        p_leaves, t_leaves, out_tree = _check_rule_outputs(name, rule_name, expected, pair)
        out_ts = [from_rule(t) if is_float(get_aval(p)) else Zero(ad.tangent_aval(get_aval(p)))
                  for p, t in zip(p_leaves, t_leaves)]
        return list(p_leaves), out_ts, out_tree


__all__ = ["custom_jvp", "custom_jvp_call_p", "SymbolicZero", "zero_from_primal",
           "CustomJVPException"]
