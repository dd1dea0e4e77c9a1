"""User batching rules, as jax.custom_batching: custom_vmap and sequential_vmap.

Calling a custom_vmap function inside a transformation binds `custom_vmap_call` with the
staged function (`call`) and the user's rule. vmap runs the rule; evaluation, jit and
lowering run the function. Its jvp is two calls: the primal one, and a tangent one whose
program is the tangent half of the jvp of `call` (linear in the tangents, so reverse
mode transposes it, which JAX does not support) and whose rule is the jvp of the user's
rule. So `defjvp` on a custom_vmap function (through a nested custom_jvp, in either
order) differentiates in forward and reverse mode.
"""
from __future__ import annotations

import inspect

import numpy as np
from jax import tree_util

import impl.numpy as jnp
from impl import core
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

def _custom_vmap_call_batch(axis_data, vals, dims, *, call, rule, num_consts, name):
    size = axis_data.size
    vals, dims = move_batch_to_front(vals, dims)
    if any(d is not None for d in dims[:num_consts]):
        raise ValueError(
            f"custom_vmap function {name} closes over a value that is batched by this "
            "vmap, which its batching rule cannot see: pass the value as an argument.")
    outs, out_batched = rule(size, [d is not None for d in dims[num_consts:]],
                             vals[:num_consts], vals[num_consts:], axis_data.name)
    for i, (o, b, a) in enumerate(zip(outs, out_batched, call.out_avals)):
        shape = get_aval(o).shape
        want = (size,) + a.shape if b else a.shape
        if shape != want:
            raise ValueError(f"custom vmap rule of {name} produced output {i} of shape "
                             f"{shape}, but the output is {'batched' if b else 'unbatched'} "
                             f"so its shape should be {want}")
    return list(outs), [0 if b else None for b in out_batched]


def _tangent_program(call, nonzeros, num_consts):
    """The tangent half of the jvp of `call`: (consts, nonzero tangents of the consts,
    args, nonzero tangents of the args) -> nonzero output tangents, and which output
    tangents are nonzero. (The constants and their tangents lead: they are the tangent
    call's constants, which its batching rule keeps unbatched.)"""
    key = ("custom_vmap_tangents", tuple(nonzeros), num_consts)
    hit = call._cache.get(key)
    if hit is None:
        jvp, out_nonzero = ad.jvp_jaxpr(call, nonzeros)
        j, n = jvp.jaxpr, len(call.out_avals)
        n_in, n_const_ts = len(nonzeros), sum(nonzeros[:num_consts])
        order = (list(range(num_consts)) + list(range(n_in, n_in + n_const_ts)) +
                 list(range(num_consts, n_in)) + list(range(n_in + n_const_ts,
                                                            len(j.invars))))
        tangents = pe.dce_jaxpr(core.Jaxpr(j.constvars, [j.invars[i] for i in order],
                                           j.outvars[n:], j.eqns))
        call._cache[key] = hit = (core.ClosedJaxpr(tangents, jvp.consts), out_nonzero)
    return hit


def _jvp_of_rule(rule, const_avals, arg_avals, out_avals, nonzeros, out_nonzero):
    """The batching rule of the tangent call: forward mode through the user's rule
    (with respect to the arguments and the function's constants), with primals and
    tangents batched alike."""
    nc, n_args = len(const_avals), len(arg_avals)
    const_nonzero, arg_nonzero = nonzeros[:nc], nonzeros[nc:]

    def tangent_rule(size, in_batched, consts, vals, axis_name):
        const_ts = iter(consts[nc:])
        const_ts = [next(const_ts) if nz else Zero(ad.tangent_aval(a))
                    for a, nz in zip(const_avals, const_nonzero)]
        consts = list(consts[:nc])
        args, ts = list(vals[:n_args]), iter(vals[n_args:])
        p_batched, t_batched = in_batched[:n_args], iter(in_batched[n_args:])
        t_batched = [next(t_batched) if nz else False for nz in arg_nonzero]
        batched = [p or t for p, t in zip(p_batched, t_batched)]
        args = [batching.broadcast_batch(a, size, 0) if b and not p else a
                for a, b, p in zip(args, batched, p_batched)]
        tangents = []
        for a, nz, b, tb in zip(arg_avals, arg_nonzero, batched, t_batched):
            if nz:
                t = next(ts)
                tangents.append(batching.broadcast_batch(t, size, 0) if b and not tb else t)
            else:
                shape = ((size,) if b else ()) + a.shape
                tangents.append(Zero(ad.tangent_aval(a.update(shape=shape))))
        store = {}

        def primal_rule(*xs):
            outs, store["out_batched"] = rule(size, batched, list(xs[:nc]), list(xs[nc:]),
                                              axis_name)
            return outs

        _, out_ts = ad.jvp_flat(primal_rule, consts + args, const_ts + tangents)
        res, res_batched = [], []
        for t, b, a, nz in zip(out_ts, store["out_batched"], out_avals, out_nonzero):
            if nz:
                shape = ((size,) if b else ()) + a.shape
                res.append(materialize(Zero(ad.tangent_aval(a.update(shape=shape))))
                           if type(t) is Zero else t)
                res_batched.append(b)
        return res, res_batched

    return tangent_rule


def _custom_vmap_call_jvp(primals, tangents, *, call, rule, num_consts, name):
    outs = custom_vmap_call_p.bind(*primals, call=call, rule=rule, num_consts=num_consts,
                                   name=name)
    nonzeros = [type(t) is not Zero for t in tangents]
    tangent_call, out_nonzero = _tangent_program(call, nonzeros, num_consts)
    out_avals = call.out_avals
    if not any(out_nonzero):
        return outs, [Zero(ad.tangent_aval(a)) for a in out_avals]
    tangent_rule = _jvp_of_rule(rule, call.in_avals[:num_consts], call.in_avals[num_consts:],
                                out_avals, nonzeros, out_nonzero)
    nz = [t for t in tangents if type(t) is not Zero]
    n_const_ts = sum(nonzeros[:num_consts])
    t_outs = custom_vmap_call_p.bind(*primals[:num_consts], *nz[:n_const_ts],
                                     *primals[num_consts:], *nz[n_const_ts:],
                                     call=tangent_call, rule=tangent_rule,
                                     num_consts=num_consts + n_const_ts, name=f"jvp({name})")
    it = iter(t_outs)
    return outs, [next(it) if nz else Zero(ad.tangent_aval(a))
                  for nz, a in zip(out_nonzero, out_avals)]


def _custom_vmap_call_transpose(cts, *args, call, rule, num_consts, name):
    # A tangent call is linear in its tangent operands: transpose its program.
    return ad.backward_pass(call.jaxpr, call.consts, args, cts)


custom_vmap_call_p = define("custom_vmap_call", **program_call_rules("custom_vmap_call"),
                            jvp=_custom_vmap_call_jvp, transpose=_custom_vmap_call_transpose,
                            batching=_custom_vmap_call_batch)


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

        outs = custom_vmap_call_p.bind(*consts, *layout.operands, call=program,
                                       rule=flat_rule, num_consts=len(consts), name=name)
        return tree_unflatten(out_tree, outs)


def sequential_vmap(f):
    """A custom_vmap function whose batching rule calls `f` on one example at a time
    (for functions that cannot be batched otherwise) and stacks the results."""
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        outs = []
        for i in range(axis_size):
            example = tree_util.tree_map(lambda b, x: x[i] if b else x, in_batched,
                                         list(args))
            outs.append(f(*example))
        stacked = tree_util.tree_map(lambda *xs: jnp.stack(xs), *outs)
        return stacked, tree_util.tree_map(lambda _: True, stacked)

    return f


__all__ = ["custom_vmap", "sequential_vmap", "custom_vmap_call_p"]
