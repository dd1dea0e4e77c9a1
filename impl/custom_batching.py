"""User batching rules, as jax.custom_batching: custom_vmap and sequential_vmap.

Calling a custom_vmap function inside a transformation binds `custom_vmap_call` with the
staged function (`call_jaxpr`) and the user's rule. vmap runs the rule; evaluation, jit and
lowering run the function. Its jvp is one call, as in JAX: its program is the jvp of
`call_jaxpr` and its rule the jvp of the user's rule (told which arguments have both primal
and tangent batched, under a vmap of those batched alone). Reverse mode (linearize,
grad, vjp) reaching that call raises JAX's ValueError, as JAX cannot split it into a
known primal and a linear tangent part; vmap outside the differentiation runs the rule
first, which then differentiates. `defjvp` on a custom_vmap function (through a nested
custom_jvp, in either order) differentiates in forward and reverse mode.
"""
from __future__ import annotations

import inspect

import numpy as np
from jax import tree_util

from impl import core, lax
from impl.core import get_aval
from impl.custom_derivatives.common import (
    ArgLayout, CustomRuleFunction, call_substituted, describe,
    is_eager, materialize, move_batch_to_front, name_of, program_call_rules, tree_flatten,
    tree_unflatten)
from impl.interpreters import ad, batching
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero
from impl.primitives._define import define


# ------------------------------------------------------------------ the primitive

def _custom_vmap_call_batch(axis_data, vals, dims, *, call_jaxpr, rule, num_consts, name,
                            jvp_of=None):
    size = axis_data.size
    vals, dims = move_batch_to_front(vals, dims)
    if any(d is not None for d in dims[:num_consts]):
        raise ValueError(
            f"custom_vmap function {name} closes over a value that is batched by this "
            "vmap, which its batching rule cannot see: pass the value as an argument.")
    # As in JAX, the rule's outputs are not checked against the function's output
    # types (a rule may broadcast a closed-over value differently); only a batched
    # output must have the vmapped axis in front.
    outs, out_batched = rule(size, [d is not None for d in dims[num_consts:]],
                             vals[:num_consts], vals[num_consts:], axis_data.name)
    for i, (o, b) in enumerate(zip(outs, out_batched)):
        shape = get_aval(o).shape
        if b and shape[:1] != (size,):
            raise ValueError(f"custom vmap rule of {name} produced output {i} of shape "
                             f"{shape}, but the output is batched, so its leading axis "
                             f"should be the vmapped axis, of size {size}")
    return list(outs), [0 if b else None for b in out_batched]


def _jvp_program(call, nonzeros, num_consts):
    """The jvp of `call` with its operands ordered (consts, nonzero tangents of the
    consts, args, nonzero tangents of the args), giving the primal outputs and the
    nonzero output tangents; and which output tangents are nonzero. (The constants and
    their tangents lead: they are the call's constants, which its batching rule keeps
    unbatched.)"""
    key = ("custom_vmap_jvp", tuple(nonzeros), num_consts)
    hit = call._cache.get(key)
    if hit is None:
        jvp, out_nonzero = ad.jvp_jaxpr(call, nonzeros)
        j = jvp.jaxpr
        n_in, n_const_ts = len(nonzeros), sum(nonzeros[:num_consts])
        order = (list(range(num_consts)) + list(range(n_in, n_in + n_const_ts)) +
                 list(range(num_consts, n_in)) + list(range(n_in + n_const_ts,
                                                            len(j.invars))))
        program = pe.drop_unused_eqns(core.Jaxpr(j.constvars, [j.invars[i] for i in order],
                                          j.outvars, j.eqns))
        call._cache[key] = hit = (core.ClosedJaxpr(program, jvp.consts), out_nonzero)
    return hit


def _jvp_of_rule(rule, const_avals, arg_avals, nonzeros, out_nonzero):
    """The batching rule of the jvp of a call (operands ordered as in `_jvp_program`):
    forward mode through the user's rule, with respect to the arguments and the
    function's constants. As in JAX, the rule is told that an argument is batched only
    where its primal and its tangent both are; a primal or a tangent batched alone
    ("extra batched", as jacfwd's tangents) is handled by a vmap around the
    differentiated rule, so outputs may come out batched by it (primal outputs too)."""
    nc, n_args = len(const_avals), len(arg_avals)
    const_nonzero, arg_nonzero = nonzeros[:nc], nonzeros[nc:]

    def jvp_rule(size, in_batched, consts, vals, axis_name):
        const_ts = iter(consts[nc:])
        const_ts = [next(const_ts) if nz else Zero(ad.tangent_aval(a))
                    for a, nz in zip(const_avals, const_nonzero)]
        consts = list(consts[:nc])
        args, nz_ts = list(vals[:n_args]), list(vals[n_args:])
        p_batched, t_batched = in_batched[:n_args], iter(in_batched[n_args:])
        t_batched = [next(t_batched) if nz else False for nz in arg_nonzero]
        mutual = [p and t for p, t in zip(p_batched, t_batched)]
        extra = [p and not t for p, t in zip(p_batched, t_batched)] + \
            [t and not p for p, t, nz in zip(p_batched, t_batched, arg_nonzero) if nz]
        store = {}

        def differentiated_rule(*xs):
            args_, ts = xs[:n_args], iter(xs[n_args:])
            tangents = [next(ts) if nz else Zero(ad.tangent_aval(get_aval(a)))
                        for a, nz in zip(args_, arg_nonzero)]

            def primal_rule(*ys):
                outs, store["out_batched"] = rule(size, mutual, list(ys[:nc]),
                                                  list(ys[nc:]), axis_name)
                return outs

            outs, out_ts = ad.jvp_flat(primal_rule, consts + list(args_),
                                       const_ts + tangents)
            out_ts = [materialize(Zero(ad.tangent_aval(get_aval(o)))) if type(t) is Zero
                      else t for o, t, nz in zip(outs, out_ts, out_nonzero) if nz]
            return list(outs) + out_ts

        res = batching.batch_with_dims(differentiated_rule, args + nz_ts,
                                       [0 if e else None for e in extra], size,
                                       axis_name, None)
        out_batched = list(store["out_batched"]) + [
            b for b, nz in zip(store["out_batched"], out_nonzero) if nz]
        return ([t if d is None else batching.moveaxis(t, d, 0) for t, d in res],
                [b or d is not None for b, (_, d) in zip(out_batched, res)])

    return jvp_rule


def _split_jvp_operands(primals, tangents, num_consts):
    """The operands of the jvp of a call, ordered as in `_jvp_program`."""
    nz = [t for t in tangents if type(t) is not Zero]
    n_const_ts = sum(type(t) is not Zero for t in tangents[:num_consts])
    return ([*primals[:num_consts], *nz[:n_const_ts], *primals[num_consts:],
             *nz[n_const_ts:]], num_consts + n_const_ts)


def _custom_vmap_call_jvp(primals, tangents, *, call_jaxpr, rule, num_consts, name,
                          jvp_of=None):
    # One call computes primal outputs and tangents, as in JAX, so that its batching
    # rule sees primals and tangents together. Partial evaluation (reverse mode) splits
    # it into the primal call and a call linear in the tangents.
    call = call_jaxpr
    nonzeros = [type(t) is not Zero for t in tangents]
    jvp_call, out_nonzero = _jvp_program(call, nonzeros, num_consts)
    jvp_rule = _jvp_of_rule(rule, call.in_avals[:num_consts], call.in_avals[num_consts:],
                            nonzeros, out_nonzero)
    operands, nc = _split_jvp_operands(primals, tangents, num_consts)
    outs = custom_vmap_call_p.bind(*operands, call_jaxpr=jvp_call, rule=jvp_rule, num_consts=nc,
                                   name=name, jvp_of=(call, rule, num_consts, tuple(nonzeros)))
    n = len(call.out_avals)
    it = iter(outs[n:])
    return outs[:n], [next(it) if nz else Zero(ad.tangent_aval(a))
                      for nz, a in zip(out_nonzero, call.out_avals)]


LINEARIZE_ERROR = (
    "Linearization failed to produce known values for all output primals. This is "
    "typically caused by attempting to differentiate a function uses an operation "
    "that does not support reverse-mode autodiff.")


def _custom_vmap_call_partial_eval(trace, args, *, call_jaxpr, rule, num_consts, name,
                                   jvp_of=None):
    """Staged whole when an operand is unknown. The jvp of a call with known primals
    and unknown tangents (linearize, reverse mode) would need its primal outputs known:
    as in JAX, that raises."""
    params = dict(call_jaxpr=call_jaxpr, rule=rule, num_consts=num_consts, name=name)
    if jvp_of is not None:
        p_call, p_nc, nonzeros = jvp_of[0], jvp_of[2], jvp_of[3]
        n_primal_consts = p_nc + sum(nonzeros[:p_nc])
        n_args = len(p_call.in_avals) - p_nc
        primals = (list(args[:p_nc])
                   + list(args[n_primal_consts:n_primal_consts + n_args]))
        if not any(trace.is_own(x) for x in primals):
            raise ValueError(LINEARIZE_ERROR)
        params["jvp_of"] = jvp_of
    return trace.stage(custom_vmap_call_p, args, params)


def _custom_vmap_call_transpose(cts, *args, call_jaxpr, rule, num_consts, name,
                                jvp_of=None):
    # A custom_vmap function that is linear: transpose its program.
    return ad.backward_pass(call_jaxpr.jaxpr, call_jaxpr.consts, args, cts)


custom_vmap_call_p = define("custom_vmap_call", **program_call_rules("custom_vmap_call"),
                            jvp=_custom_vmap_call_jvp, transpose=_custom_vmap_call_transpose,
                            batching=_custom_vmap_call_batch)
pe.partial_eval_rules[custom_vmap_call_p] = _custom_vmap_call_partial_eval


# ------------------------------------------------------------------ the user API

def _accepts_axis_name(fn):
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "axis_name" or p.kind is p.VAR_KEYWORD for p in params)


def _check_rule_output(rule_name, out_tree, pair):
    """Validate what a vmap rule returned: (output leaves, out_batched leaves)."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise ValueError(f"custom vmap rule ({rule_name}) must return a pair (outputs, "
                         f"out_batched), but got {describe(pair)}.")
    o_leaves, o_tree = tree_flatten(pair[0])
    b_leaves, b_tree = tree_flatten(pair[1])
    if o_tree != b_tree:
        raise ValueError("structure of output value and output batching specification "
                         f"returned by custom vmap rule ({rule_name}) do not match.\n"
                         f"Output values: {o_tree}\nBatching spec: {b_tree}")
    if o_tree != out_tree:
        raise ValueError(f"structure of output returned by custom vmap rule ({rule_name}) "
                         "does not match that of original custom-vmapped function.\n"
                         f"Original output: {out_tree}\nRule output: {o_tree}")
    if not all(isinstance(b, (bool, np.bool_)) for b in b_leaves):
        raise ValueError(f"custom vmap rule ({rule_name}) must return out_batched as a "
                         f"pytree of bools, but got {describe(pair[1])}.")
    return list(o_leaves), [bool(b) for b in b_leaves]


class custom_vmap(CustomRuleFunction):
    """A function with a user batching rule, as jax.custom_batching.custom_vmap:
    rule(axis_size, in_batched, *args) -> (out, out_batched). A rule that accepts an
    `axis_name` keyword also gets the name of the vmapped axis (an impl extension).
    Differentiation goes through the function (forward) and the rule (under vmap)."""

    api = "custom_vmap"

    def __init__(self, fun):
        super().__init__(fun)
        self.vmap_rule = None

    def def_vmap(self, vmap_rule):
        """Set the batching rule; returns it, so it can be used as a decorator."""
        if not callable(vmap_rule):
            raise TypeError(f"def_vmap of {name_of(self.fun)}: the rule must be callable, "
                            f"got {type(vmap_rule).__name__}")
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args, **kwargs):
        name = name_of(self.fun)
        args = self._positional(args, kwargs)
        if self.vmap_rule is None:
            raise AttributeError(f"No batching rule defined for custom_vmap function {name} "
                                 "using def_vmap.")
        if is_eager():
            return self.fun(*args)
        layout = ArgLayout(args, (), f"custom_vmap function {name}")
        program, consts, out_tree = self._stage_primal(layout, f"custom_vmap function {name}")
        user_rule = self.vmap_rule
        rule_name, pass_name = name_of(user_rule), _accepts_axis_name(user_rule)
        in_tree = tree_util.treedef_tuple(layout.trees)

        def run_rule(size, in_batched, vals, axis_name):
            kw = {"axis_name": axis_name} if pass_name else {}
            pair = user_rule(size, list(tree_unflatten(in_tree, list(in_batched))),
                             *tree_unflatten(in_tree, list(vals)), **kw)
            return _check_rule_output(rule_name, out_tree, pair)

        def flat_rule(size, in_batched, const_vals, vals, axis_name):
            return call_substituted(consts, const_vals, run_rule, size, in_batched, vals,
                                    axis_name)

        outs = custom_vmap_call_p.bind(*consts, *layout.operands, call_jaxpr=program,
                                       rule=flat_rule, num_consts=len(consts), name=name)
        return tree_unflatten(out_tree, outs)


def sequential_vmap(f):
    """A custom_vmap function whose batching rule maps `f` over the examples one at a
    time with `lax.map` (a loop in the program, for functions that cannot be batched
    otherwise), as JAX's does."""
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        arg_leaves, tree = tree_flatten(list(args))
        batched = tree_util.tree_leaves(in_batched)
        mapped = [x for x, b in zip(arg_leaves, batched) if b]

        def one_example(xs):
            it = iter(xs)
            example = [next(it) if b else x for x, b in zip(arg_leaves, batched)]
            return f(*tree_unflatten(tree, example))

        out = lax.map(one_example, mapped)
        return out, tree_util.tree_map(lambda _: True, out)

    return f


__all__ = ["custom_vmap", "sequential_vmap", "custom_vmap_call_p"]
