"""custom_vjp: a Python function with its own reverse-mode rule (fwd, bwd).

Calling a custom_vjp function inside a transformation binds `custom_vjp_call` with the
staged function (`call_jaxpr`) and the user's fwd and bwd wrapped as functions of flat
operands. Its jvp rule runs fwd and emits `custom_lin` on the input tangents:
`custom_lin` is linear in them, and its transpose calls bwd (reverse mode). Evaluating
`custom_lin` transposes bwd (forward mode, which JAX refuses: impl supports it when bwd
is linear in the output cotangent).

With `symbolic_zeros=True`, fwd receives `CustomVJPPrimal(value, perturbed)` leaves and
bwd receives `SymbolicZero` for output cotangents known to be zero. With
`optimize_remat=True`, fwd is staged and bound as `remat_opt`, which dead-code removal
replaces by the primal function when no residual is used.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
from jax import tree_util

from impl import core
from impl.core import Tracer, get_aval
from impl.custom_derivatives.common import (
    ArgLayout, BatchedOutDims, CustomRuleFunction, DifferentiatedCall, SymbolicZero,
    batch_flat_rule, call_substituted, check_jaxtypes, closed_over_error, describe,
    eval_program, is_eager, is_float, landing, materialize, match_batch,
    move_batch_to_front, name_of, named_as, printed_call_params, program_call_rules,
    run_at_eval, stage, to_rule, tree_flatten, tree_unflatten, type_str, unbatched)
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero
from impl.primitives._define import define
from impl.primitives.call import jit_p
from impl.primitives.elementwise import convert_element_type


class CustomVJPException(core.UnexpectedTracerError):
    """A custom_vjp function was differentiated with respect to a value it closes over
    (JAX reports this as an UnexpectedTracerError)."""


@dataclasses.dataclass
class CustomVJPPrimal:
    """A primal argument leaf as fwd sees it when defined with symbolic_zeros=True:
    its value and whether it is perturbed (has a nonzero tangent)."""
    value: Any
    perturbed: bool


def custom_vjp_primal_tree_values(tree):
    """The values of a pytree of CustomVJPPrimal leaves (what fwd receives with
    symbolic_zeros=True), as the plain arguments."""
    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}: expected CustomVJPPrimal")
        return leaf.value
    return tree_util.tree_map(value, tree)


# ------------------------------------------------------------------ custom_vjp_call

def _custom_vjp_call_jvp(primals, tangents, *, call_jaxpr, fwd, bwd, num_consts, name,
                         symbolic_zeros):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise closed_over_error("custom_vjp", name, CustomVJPException)
    consts, args = list(primals[:num_consts]), list(primals[num_consts:])
    ts = tangents[num_consts:]
    arg_avals = tuple(get_aval(a) for a in args)
    perturbed = [type(t) is not Zero and is_float(a) for t, a in zip(ts, arg_avals)]
    outs, res = fwd(consts, args, perturbed)
    res = consts + list(res)   # bwd runs with the closed-over constants too
    out_avals = tuple(get_aval(o) for o in outs)
    lin_outs = custom_lin_p.bind(
        *res, *[t for t, p in zip(ts, perturbed) if p], num_res=len(res),
        num_consts=num_consts, bwd=bwd, res_avals=tuple(get_aval(r) for r in res),
        ct_avals=out_avals, perturbed=tuple(perturbed), name=name,
        symbolic_zeros=symbolic_zeros)
    it = iter(lin_outs)
    return outs, [next(it) if is_float(a) else Zero(ad.tangent_aval(a)) for a in out_avals]


def _custom_vjp_call_batch(axis_data, vals, dims, *, call_jaxpr, fwd, bwd, num_consts,
                           name, symbolic_zeros):
    vals, dims = move_batch_to_front(vals, dims)
    avals = [get_aval(v) for v in vals]
    bcall, call_dims = batching.batch_jaxpr(call_jaxpr, axis_data, avals, dims)
    const_dims, arg_dims = dims[:num_consts], dims[num_consts:]
    n_out = len(call_jaxpr.out_avals)
    out_dims = BatchedOutDims(call_dims, f"custom_vjp fwd of {name}")
    res_dims = {}
    size = axis_data.size

    @functools.partial(named_as, user_fn=fwd)
    def batched_fwd(consts, args, perturbed):
        nc = len(consts)

        def flat(*xs):
            o, r = fwd(list(xs[:nc]), list(xs[nc:]), perturbed)
            return list(o) + list(r)

        res = batching.batch_with_dims(flat, list(consts) + list(args),
                                       list(const_dims) + list(arg_dims), size,
                                       axis_data.name, axis_data.spmd_name)
        outs = [match_batch(size, d, out_dims.target(i, d), o)
                for i, (o, d) in enumerate(res[:n_out])]
        res_dims["dims"] = [None if d is None else 0 for _, d in res[n_out:]]
        return outs, [match_batch(size, d, None if d is None else 0, r)
                      for r, d in res[n_out:]]

    batched_bwd = _batched_bwd(
        bwd, axis_data, lambda: list(const_dims) + res_dims["dims"] + out_dims.dims,
        arg_dims)
    outs = custom_vjp_call_p.bind(*vals, call_jaxpr=bcall, fwd=batched_fwd, bwd=batched_bwd,
                                  num_consts=num_consts, name=name,
                                  symbolic_zeros=symbolic_zeros)
    out_dims.staged = True
    return outs, out_dims.dims


def _batched_bwd(bwd, axis_data, in_dims, arg_dims, closed_vmap=None):
    """bwd(consts, residuals, cotangents) of a call batched by a vmap: `in_dims()`
    gives the batch dims of those (known once fwd has run); the cotangent of each
    argument gets the batch dim in `arg_dims` (summed over the batch for an argument
    that vmap broadcast). `closed_vmap`: the vmap itself, when bwd may close over its
    tracers (it was made under it)."""
    size = axis_data.size

    @functools.partial(named_as, user_fn=bwd)
    def batched_bwd(consts, res, cts):
        nc, nr = len(consts), len(res)

        def flat(*xs):
            return bwd(list(xs[:nc]), list(xs[nc:nc + nr]), list(xs[nc + nr:]))

        outs = batch_flat_rule(flat, axis_data, list(consts) + list(res) + list(cts),
                               in_dims(), closed_vmap)
        return [match_batch(size, d, want, c, sum_if_unbatched=True)
                for (c, d), want in zip(outs, arg_dims)]
    return batched_bwd


def _custom_vjp_call_dce(used_outputs, eqn):
    """The call computing the used outputs only: its program pruned, fwd giving those
    outputs (and every residual), bwd seeing zero cotangents for the others."""
    p = eqn.params
    program, _ = pe.dce_closed_jaxpr(p["call_jaxpr"], used_outputs, keep_inputs=True)
    fwd, bwd, out_avals = p["fwd"], p["bwd"], p["call_jaxpr"].out_avals

    @functools.partial(named_as, user_fn=fwd)
    def used_fwd(consts, args, perturbed):
        outs, res = fwd(consts, args, perturbed)
        return [o for o, u in zip(outs, used_outputs) if u], res

    @functools.partial(named_as, user_fn=bwd)
    def used_bwd(consts, res, cts):
        it = iter(cts)
        return bwd(consts, res, [next(it) if u else Zero(ad.tangent_aval(a))
                                 for u, a in zip(used_outputs, out_avals)])

    return core.JaxprEqn(eqn.primitive, eqn.invars,
                         [v for v, u in zip(eqn.outvars, used_outputs) if u],
                         dict(p, call_jaxpr=program, fwd=used_fwd, bwd=used_bwd))


custom_vjp_call_p = define("custom_vjp_call", **program_call_rules("custom_vjp_call"),
                           jvp=_custom_vjp_call_jvp, batching=_custom_vjp_call_batch,
                           dce=_custom_vjp_call_dce)
core.pp_params_rules[custom_vjp_call_p] = printed_call_params


# ---------------------------------------------------------------------- custom_lin
# Linear in its operands after the residuals (the nonzero input tangents); params
# carry bwd. Outputs: the tangents of the float outputs.

def _custom_lin_abstract_eval(*avals, ct_avals, **_):
    return [a for a in ct_avals if is_float(a)]


def _full_cts(cts, ct_avals):
    """Cotangents (Zero or arrays) for every output from those of the float outputs."""
    it = iter(cts)
    return [next(it) if is_float(a) else Zero(ad.tangent_aval(a)) for a in ct_avals]


_bwd_programs = {}
core.register_cache(_bwd_programs.clear)


def _bwd_program(bwd, num_consts, res_avals, ct_avals, perturbed):
    """bwd staged as a program: (residuals, float cotangents) -> the nonzero cotangents
    of the perturbed inputs, and which those are."""
    key = (bwd, num_consts, res_avals, ct_avals, perturbed)
    hit = _bwd_programs.get(key)
    if hit is not None:
        return hit
    nr = len(res_avals)
    box = {}

    def g(*xs):
        cts = _full_cts(xs[nr:], ct_avals)
        cts_in = [c for c, p in zip(bwd(list(xs[:num_consts]), list(xs[num_consts:nr]), cts),
                                    perturbed) if p]
        box["nonzero"] = [type(c) is not Zero for c in cts_in]
        return [c for c in cts_in if type(c) is not Zero]

    prog = pe.make_closed_jaxpr(g, list(res_avals) + [a for a in ct_avals if is_float(a)])
    hit = (prog, box["nonzero"])
    if not any(isinstance(c, Tracer) for c in prog.consts):   # never keep tracers alive
        if len(_bwd_programs) > 256:
            _bwd_programs.clear()
        _bwd_programs[key] = hit
    return hit


def _custom_lin_apply(*args, num_res, num_consts, bwd, res_avals, ct_avals, perturbed, name,
                      symbolic_zeros):
    """Forward mode through custom_vjp: the transpose of ct -> bwd(res, ct) applied to
    the input tangents. Needs bwd to be linear (and transposable) in ct."""
    res, ts = args[:num_res], args[num_res:]
    prog, nonzero = _bwd_program(bwd, num_consts, res_avals, ct_avals, perturbed)
    float_avals = [a for a in ct_avals if is_float(a)]
    try:
        out = ad.backward_pass(prog.jaxpr, prog.consts,
                               list(res) + [ad.UndefinedPrimal(a) for a in float_avals],
                               [t for t, nz in zip(ts, nonzero) if nz])
    except (NotImplementedError, TypeError) as e:
        raise TypeError(
            f"Forward-mode differentiation (jvp, jacfwd, hessian) of the custom_vjp function "
            f"{name} computes its tangents by transposing its bwd rule, which therefore must "
            f"be linear in the output cotangent, built from transposable operations; "
            f"transposing bwd failed: {e}") from None
    return [materialize(o) for o in out[num_res:]]


def _custom_lin_lowering(*args, **params):
    with core.set_current_trace(core.eval_trace):
        return _custom_lin_apply(*args, **params)


def _custom_lin_jvp(primals, tangents, **params):
    return ad.jvp_flat(lambda *xs: _custom_lin_apply(*xs, **params), list(primals),
                       list(tangents))


def _custom_lin_batch(axis_data, vals, dims, **params):
    res = batching.batch_with_dims(lambda *xs: _custom_lin_apply(*xs, **params), list(vals),
                                   list(dims), axis_data.size, axis_data.name,
                                   axis_data.spmd_name)
    return [v for v, _ in res], [d for _, d in res]


def _custom_lin_transpose(cts, *args, num_res, num_consts, bwd, res_avals, ct_avals,
                          perturbed, name, symbolic_zeros):
    res = args[:num_res]
    if any(ad.is_undefined_primal(r) for r in res):
        raise TypeError(f"custom_vjp of {name}: residuals depend on the linear inputs")
    cts_in = bwd(list(res[:num_consts]), list(res[num_consts:]), _full_cts(cts, ct_avals))
    return [None] * num_res + [c for c, p in zip(cts_in, perturbed) if p]


custom_lin_p = define("custom_lin", multiple_results=True, impl=_custom_lin_apply,
                      abstract_eval=_custom_lin_abstract_eval, lowering=_custom_lin_lowering,
                      jvp=_custom_lin_jvp, transpose=_custom_lin_transpose,
                      batching=_custom_lin_batch, vma_rule=core.TYPED_BY_ABSTRACT_EVAL,
                      # the outputs' types are the primal outputs' (their shardings too)
                      sharding_rule=core.TYPED_BY_ABSTRACT_EVAL)


def _custom_lin_printed_params(eqn, namer):
    """As JAX prints custom_lin: which inputs have no tangent (`in_zeros`) rather than
    which are perturbed; the types and names it derives from its operands left out."""
    p = eqn.params
    return [("bwd", p["bwd"]), ("in_zeros", [not x for x in p["perturbed"]]),
            *([("num_consts", p["num_consts"])] if p["num_consts"] else []),
            ("num_res", p["num_res"] - p["num_consts"]),
            ("symbolic_zeros", p["symbolic_zeros"])]


core.pp_params_rules[custom_lin_p] = _custom_lin_printed_params


# ----------------------------------------------------------------------- remat_opt
# fwd staged as a program (optimize_remat=True). Operands: fwd's constants, the primal
# function's constants (when its program was staged before), the arguments. Outputs:
# the primal outputs, then residuals. The primal function's program is made only if
# dead-code removal finds no residual used (`fun_jaxpr_thunk`, as JAX names it).

class LazyProgram:
    """A program made on first use and kept. `get()` is None when it cannot be made
    here: a function closing over values of transformations, which a program staged
    outside them cannot hold."""

    __slots__ = ("_make", "_program")

    def __init__(self, make=None, program=None):
        self._make, self._program = make, program

    def get(self):
        if self._make is not None:
            self._program, self._make = self._make(), None
        return self._program

    def __repr__(self):
        return "<function fun_jaxpr_thunk>"


def _primal_thunk(flat_primal, avals):
    """The primal function (flat) as a program of its arguments (of types `avals`),
    its closed-over values as constants, staged on first use."""
    def make():
        try:
            with core.set_current_trace(core.eval_trace):
                program = pe.make_closed_jaxpr(flat_primal, avals)
        except core.UnexpectedTracerError:   # it closes over a finished transformation's
            return None
        if any(isinstance(c, Tracer) for c in program.consts):   # or a running one's
            return None
        return program
    return LazyProgram(make)


def _remat_opt_split(args, num_fwd_consts, num_call_consts):
    a, b = num_fwd_consts, num_fwd_consts + num_call_consts
    return list(args[:a]), list(args[a:b]), list(args[b:])


def _remat_opt_impl(*args, fwd, fun_jaxpr_thunk, num_fwd_consts, num_call_consts, num_res):
    fc, _, ops = _remat_opt_split(args, num_fwd_consts, num_call_consts)
    return eval_program(fwd, fc + ops)


def _remat_opt_lowering(*args, fwd, fun_jaxpr_thunk, num_fwd_consts, num_call_consts,
                        num_res):
    fc, _, ops = _remat_opt_split(args, num_fwd_consts, num_call_consts)
    return lowering.eval_jaxpr_lowered(fwd.jaxpr, fwd.consts, fc + ops)


def _remat_opt_jvp(primals, tangents, *, fwd, fun_jaxpr_thunk, num_fwd_consts,
                   num_call_consts, num_res):
    # Differentiating fwd itself (higher-order AD of a custom_vjp function): the
    # remat optimization only concerns the first-order backward pass.
    fc, _, ops = _remat_opt_split(primals, num_fwd_consts, num_call_consts)
    tfc, _, tops = _remat_opt_split(tangents, num_fwd_consts, num_call_consts)
    return ad.jvp_flat(core.jaxpr_as_fun(fwd), fc + ops, tfc + tops)


def _remat_opt_batch(axis_data, vals, dims, *, fwd, fun_jaxpr_thunk, num_fwd_consts,
                     num_call_consts, num_res):
    vals, dims = move_batch_to_front(vals, dims)
    avals = [get_aval(v) for v in vals]
    fc_a, cc_a, ops_a = _remat_opt_split(avals, num_fwd_consts, num_call_consts)
    fc_d, cc_d, ops_d = _remat_opt_split(dims, num_fwd_consts, num_call_consts)
    # every output batched, so that the primal program can replace fwd (see the dce rule)
    bfwd, out_dims = batching.batch_jaxpr(fwd, axis_data, fc_a + ops_a, fc_d + ops_d,
                                          instantiate=True)

    def batched_call():
        call = fun_jaxpr_thunk.get()
        return None if call is None else batching.batch_jaxpr(
            call, axis_data, cc_a + ops_a, cc_d + ops_d, instantiate=True)[0]

    return remat_opt_p.bind(*vals, fwd=bfwd, fun_jaxpr_thunk=LazyProgram(batched_call),
                            num_fwd_consts=num_fwd_consts, num_call_consts=num_call_consts,
                            num_res=num_res), out_dims


def _primal_call_params(call, n_in, n_out):
    """The parameters of the jit call computing the primal outputs in fwd's place."""
    return dict(jaxpr=call, name="custom_vjp_primal", in_shardings=(None,) * n_in,
                out_shardings=(None,) * n_out)


def _remat_opt_dce(used_outputs, eqn):
    """No residual used: compute the primal outputs with the primal function."""
    p = eqn.params
    if any(used_outputs[len(used_outputs) - p["num_res"]:]):
        return eqn
    call = p["fun_jaxpr_thunk"].get()
    if call is None:
        return eqn
    n_out = len(used_outputs) - p["num_res"]
    invars = eqn.invars[p["num_fwd_consts"]:]
    return core.JaxprEqn(jit_p, invars, eqn.outvars[:n_out],
                         _primal_call_params(call, len(invars), n_out))


def _remat_opt_recomputed(trace, args, **params):
    """In a checkpoint's known half, whose residuals the recomputation computes again:
    the primal outputs by the primal function (what dead-code removal of the known
    program gives in JAX), the residuals only where the recomputation stages fwd."""
    call = params["fun_jaxpr_thunk"].get()
    if call is None:
        return None
    _, cc, ops = _remat_opt_split(args, params["num_fwd_consts"], params["num_call_consts"])
    n_out = len(params["fwd"].out_avals) - params["num_res"]
    primal = trace.bind_known(jit_p, cc + ops, _primal_call_params(call, len(cc + ops), n_out))
    residuals = trace.stage(remat_opt_p, args, params)[n_out:] if params["num_res"] else []
    return list(primal) + list(residuals)


remat_opt_p = define("remat_opt", multiple_results=True, impl=_remat_opt_impl,
                     abstract_eval=lambda *avals, fwd, **_: fwd.out_avals,
                     lowering=_remat_opt_lowering, jvp=_remat_opt_jvp,
                     batching=_remat_opt_batch, dce=_remat_opt_dce, dce_fully_used=True,
                     recomputed_known=_remat_opt_recomputed,
                     vma_rule=core.TYPED_BY_ABSTRACT_EVAL)


# ------------------------------------------------------------- validating the rules

def _tree_of_types(tree, avals):
    return str(tree_unflatten(tree, [type_str(a) for a in avals])).replace("'", "")


def _check_fwd_outputs(name, fwd_name, expected, pair):
    """Validate what fwd returned; return (primal output leaves, residual leaves,
    residual tree, output tree). `expected`: the function's (output tree, output avals),
    or None when the function has not been run."""
    lead = (f"Custom VJP fwd rule {fwd_name} for function {name} must produce a pair (list "
            "or tuple of length two) where the first element represents the primal output "
            f"(equal to the output of the custom_vjp-decorated function {name}) and the "
            "second element represents residuals (i.e. values stored from the forward pass "
            "for use on the backward pass), but ")
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(lead + f"instead of a pair the fwd rule {fwd_name} produced "
                        f"{describe(pair)}.")
    o_leaves, o_tree = tree_flatten(pair[0])
    check_jaxtypes(o_leaves, f"The primal outputs of custom VJP fwd rule {fwd_name}")
    o_avals = [get_aval(o) for o in o_leaves]
    out_tree, out_avals = expected or (o_tree, o_avals)
    if o_tree != out_tree:
        raise TypeError(lead + "instead the fwd rule output's first element had "
                        f"container/pytree structure:\n    {_tree_of_types(o_tree, o_avals)}"
                        f"\nwhile the custom_vjp-decorated function {name} had output "
                        "container/pytree structure:\n"
                        f"    {_tree_of_types(out_tree, out_avals)}.")
    if any(a.shape != e.shape or a.dtype != e.dtype for a, e in zip(o_avals, out_avals)):
        raise TypeError(lead + "instead the fwd rule output's first element had "
                        f"shapes/dtypes of:\n    {_tree_of_types(o_tree, o_avals)}\nwhile "
                        f"the custom_vjp-decorated function {name} had output shapes/dtypes "
                        f"of:\n    {_tree_of_types(out_tree, out_avals)}")
    r_leaves, res_tree = tree_flatten(pair[1])
    check_jaxtypes(r_leaves, f"The residuals of custom VJP fwd rule {fwd_name}")
    return list(o_leaves), list(r_leaves), res_tree, o_tree


def _flatten_bwd_output(out, in_tree, avals):
    """Check bwd's output against the differentiable arguments (a tuple with one entry
    per argument; None for a zero cotangent of any subtree) and flatten it: one
    cotangent (or Zero) per operand."""
    if isinstance(out, list) and len(out) == len(tree_util.treedef_children(in_tree)):
        out = tuple(out)
    zero = object()
    proxy = tree_unflatten(in_tree, [object()] * in_tree.num_leaves)
    flat = []
    try:
        if not isinstance(out, tuple):
            raise ValueError
        # bwd's output is a prefix of the arguments (None for a whole subtree); it is
        # matched without rebuilding user pytrees holding None
        cts, prefix = tree_flatten(out, is_leaf=lambda x: x is None)
        for ct, sub in zip(cts, prefix.flatten_up_to(proxy)):
            flat.extend([zero if ct is None else ct] * len(tree_util.tree_leaves(sub)))
    except ValueError:
        raise TypeError("Custom VJP bwd rule must produce an output with the same container "
                        "(pytree) structure as the args tuple of the primal function, and in "
                        "particular must produce a tuple of length equal to the number of "
                        "arguments to the primal function, but got bwd output structure "
                        f"{tree_flatten(out)[1]} for primal input structure {in_tree}.") \
            from None
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(proxy)[0]]
    result = []
    for path, a, ct in zip(paths, avals, flat):
        t_aval = ad.tangent_aval(a)
        if ct is zero or not is_float(a):
            result.append(Zero(t_aval))
            continue
        if type(ct) is SymbolicZero:
            if ct.aval.shape != a.shape or ct.aval.dtype != t_aval.dtype:
                raise ValueError(
                    "Custom VJP bwd rule produced a SymbolicZero with a shape/dtype that "
                    "does not match the corresponding input tangent shape/dtype: at "
                    f"output{path} the SymbolicZero had shape/dtype {type_str(ct.aval)} "
                    f"while the corresponding input had shape/dtype {type_str(a)}. Consider "
                    "just returning a None here instead of a SymbolicZero object.")
            result.append(Zero(t_aval))
            continue
        check_jaxtypes([ct], f"The output of custom VJP bwd rule at output{path}")
        c_aval = get_aval(ct)
        if c_aval.shape != a.shape and not jax.config.jax_disable_bwd_checks:
            raise ValueError("Custom VJP bwd rule must produce an output with the same type "
                             "as the args tuple of the primal function, but at "
                             f"output{path} the bwd rule produced an output of type "
                             f"{type_str(c_aval)} corresponding to an input of type "
                             f"{type_str(a)}, so the shapes do not match")
        # JAX accepts another float dtype for a float input; impl converts it, so that
        # cotangents keep their primal's dtype.
        result.append(ct if c_aval.dtype == a.dtype else convert_element_type(ct, a.dtype))
    return result


def _staged_fwd(flat_fwd, primal, op_avals):
    """fwd staged and bound as remat_opt (optimize_remat=True); `primal` (a
    LazyProgram) is the function's program of its constants (`const_vals`) and
    arguments."""
    @functools.partial(named_as, user_fn=flat_fwd)
    def staged(const_vals, ops, perturbed):
        n_out = {}

        def fwd_outputs(*xs):
            outs, res = flat_fwd(const_vals, xs, perturbed)
            n_out["n"] = len(outs)
            return list(outs) + list(res)

        fwd, fwd_consts = stage(fwd_outputs, op_avals)
        n = n_out["n"]
        # A residual that is one of fwd's inputs is taken from there, not made an output
        # of remat_opt (as JAX forwards them): then a use of it does not keep fwd from
        # being replaced by the primal function.
        fwd_inputs = list(fwd_consts) + list(ops)
        forwarded = [None] * n + pe.forwarded_inputs(fwd)[n:]
        fwd, _ = pe.dce_closed_jaxpr(fwd, [f is None for f in forwarded], keep_inputs=True)
        computed = iter(remat_opt_p.bind(
            *fwd_consts, *const_vals, *ops, fwd=fwd, fun_jaxpr_thunk=primal,
            num_fwd_consts=len(fwd_consts), num_call_consts=len(const_vals),
            num_res=len(fwd.out_avals) - n))
        both = [next(computed) if f is None else fwd_inputs[f] for f in forwarded]
        return both[:n], both[n:]
    return staged


def _nondiff_tracer_error():
    return core.UnexpectedTracerError(
        "Found a JAX Tracer object passed as an argument to a custom_vjp function in a "
        "position indicated by nondiff_argnums as non-differentiable. Tracers cannot be "
        "passed as non-differentiable arguments to custom_vjp functions; instead, "
        "nondiff_argnums should only be used for arguments that can't be or contain JAX "
        "tracers, e.g. function-valued arguments. In particular, array-valued arguments "
        "should typically not be indicated as nondiff_argnums.")


# ------------------------------------------------------------------ the user API

class custom_vjp(CustomRuleFunction):
    """Give a Python function a custom VJP rule: fwd(*args) -> (out, residuals) and
    bwd(*nondiff_args, residuals, out_cotangent) -> one cotangent (or None) per argument."""

    api = "custom_vjp"

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        super().__init__(fun, nondiff_argnums, nondiff_argnames)
        self.fwd = None
        self.bwd = None
        self.symbolic_zeros = False
        self.optimize_remat = False

    def defvjp(self, fwd, bwd, symbolic_zeros=False, optimize_remat=False):
        """Set the rules. symbolic_zeros=True: fwd gets CustomVJPPrimal leaves and bwd
        gets SymbolicZero for zero output cotangents. optimize_remat=True: fwd is staged,
        and the primal function replaces it where no residual is used."""
        if not callable(fwd) or not callable(bwd):
            raise TypeError(f"defvjp of {name_of(self.fun)} expects two callables (fwd, "
                            f"bwd), got {type(fwd).__name__} and {type(bwd).__name__}")
        if symbolic_zeros and optimize_remat:
            raise NotImplementedError(
                "remat optimization for custom_vjp does not support symbolic zeros")
        self.fwd, self.bwd = fwd, bwd
        self.symbolic_zeros = bool(symbolic_zeros)
        self.optimize_remat = bool(optimize_remat)

    def __call__(self, *args, **kwargs):
        name = name_of(self.fun)
        if self.fwd is None or self.bwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using "
                                 "defvjp.")
        args = self._positional(args, kwargs)
        nondiff = self._nondiff(args)
        for i in nondiff:
            if any(isinstance(x, Tracer) for x in tree_util.tree_leaves(args[i])):
                raise _nondiff_tracer_error()
        if is_eager():
            return self.fun(*args)
        layout = ArgLayout(args, nondiff, f"custom_vjp function {name}",
                           nondiff_operands=False)
        trace, vmaps = landing(layout.operands)
        if trace is core.eval_trace and not vmaps:
            return run_at_eval(self.fun, args, "custom_vjp", CustomVJPException)
        rules = _VJPRules(self, layout, [args[i] for i in nondiff])
        what = f"custom_vjp function {name}"
        if type(trace) is ad.JVPTrace:
            fwd = named_as(lambda consts, ops, perturbed: rules.run_fwd(ops, perturbed),
                           self.fwd)
            if self.optimize_remat:
                fwd = _staged_fwd(fwd, _primal_thunk(self._flat_primal(layout, what),
                                                     rules.op_avals), rules.op_avals)
            return rules.fwd_only(DifferentiatedCall(
                trace, vmaps, layout.operands, "custom_vjp", name, CustomVJPException), fwd)
        program, consts, out_tree = self._stage_primal(layout, what)
        rules.expect(out_tree, program.out_avals)

        @functools.partial(named_as, user_fn=self.fwd)
        def flat_fwd(const_vals, ops, perturbed):
            return call_substituted(consts, const_vals, rules.run_fwd, ops, perturbed)

        if self.optimize_remat:
            flat_fwd = _staged_fwd(flat_fwd, LazyProgram(program=program), rules.op_avals)

        @functools.partial(named_as, user_fn=self.bwd)
        def flat_bwd(const_vals, res, cts):
            return call_substituted(consts, const_vals, rules.run_bwd, res, cts)

        outs = custom_vjp_call_p.bind(*consts, *layout.operands, call_jaxpr=program,
                                      fwd=flat_fwd, bwd=flat_bwd, num_consts=len(consts),
                                      name=name, symbolic_zeros=self.symbolic_zeros)
        return tree_unflatten(out_tree, outs)


class _VJPRules:
    """The user's fwd and bwd of one call, as functions of flat operands. The output
    tree is the function's once it has been staged (`expect`); when only fwd runs (at a
    JVP trace) it is that of fwd's primal output."""

    def __init__(self, fn, layout, static_nondiff):
        self.name, self.fwd_name = name_of(fn.fun), name_of(fn.fwd)
        self.fwd, self.bwd, self.symbolic = fn.fwd, fn.bwd, fn.symbolic_zeros
        self.layout, self.static_nondiff = layout, static_nondiff
        self.diff_tree = tree_util.treedef_tuple(layout.diff_trees())
        self.op_avals = [get_aval(x) for x in layout.operands]
        self.expected = None
        self.res_tree = self.out_tree = None   # known once fwd has run

    def expect(self, out_tree, out_avals):
        self.expected = (out_tree, out_avals)
        self.out_tree = out_tree

    def run_fwd(self, ops, perturbed):
        if self.symbolic:
            ops = [CustomVJPPrimal(x, p) for x, p in zip(ops, perturbed)]
        pair = self.fwd(*self.layout.rebuild(ops))
        outs, res, self.res_tree, out_tree = _check_fwd_outputs(
            self.name, self.fwd_name, self.expected, pair)
        self.out_tree = out_tree
        return outs, res

    def run_bwd(self, res, cts):
        py_res = tree_unflatten(self.res_tree, res)
        py_cts = tree_unflatten(self.out_tree, [to_rule(c, self.symbolic) for c in cts])
        return _flatten_bwd_output(self.bwd(*self.static_nondiff, py_res, py_cts),
                                   self.diff_tree, self.op_avals)

    def fwd_only(self, call, fwd):
        """At a JVP trace perturbing an operand (under vmaps or not): fwd(consts, ops,
        perturbed) gives the primal outputs and the residuals, and `custom_lin` (whose
        transpose runs bwd) the output tangents; the function itself is not run (as in
        JAX)."""
        perturbed = [type(t) is not Zero and is_float(a)
                     for t, a in zip(call.tangents, self.op_avals)]
        outs, res = fwd([], call.primals, perturbed)
        call.check_not_perturbed(res)
        bwd = named_as(lambda consts, res, cts: self.run_bwd(res, cts), self.bwd)
        lin_outs = self._linear(call, 0, call.primals, list(res),
                                [t for t, p in zip(call.tangents, perturbed) if p],
                                list(outs), bwd, tuple(perturbed))
        it = iter(lin_outs)
        out_ts = [next(it) if is_float(get_aval(o)) else Zero(ad.tangent_aval(get_aval(o)))
                  for o in outs]
        return tree_unflatten(self.out_tree, [call.join(p, t) for p, t in zip(outs, out_ts)])

    def _linear(self, call, i, ops, res, ts, outs, bwd, perturbed):
        """The tangents of the float outputs `outs`: custom_lin of the residuals and the
        tangents `ts` of the perturbed operands, bound below the vmaps from the i-th on
        (all values at the level of the i-th), with bwd batched by each of them."""
        if i == len(call.vmaps):
            with core.set_current_trace(call.trace.parent):
                return custom_lin_p.bind(
                    *res, *ts, num_res=len(res), num_consts=0, bwd=bwd,
                    res_avals=tuple(get_aval(r) for r in res),
                    ct_avals=tuple(get_aval(o) for o in outs), perturbed=perturbed,
                    name=self.name, symbolic_zeros=self.symbolic)
        # below the vmap, each tangent keeps the batch dim of its primal
        vmap = call.vmaps[i]
        (ops, op_dims), (res, res_dims), (ts, _), (outs, out_dims) = [
            _unzip(unbatched(vmap, xs)) for xs in (ops, res, ts, outs)]
        bwd = _batched_bwd(bwd, vmap.axis_data, lambda: res_dims + out_dims, op_dims,
                           closed_vmap=vmap)
        with core.set_current_trace(vmap.parent):
            lin_outs = self._linear(call, i + 1, ops, res, ts, outs, bwd, perturbed)
        float_dims = [d for o, d in zip(outs, out_dims) if is_float(get_aval(o))]
        return [vmap.wrap(t, d) for t, d in zip(lin_outs, float_dims)]


def _unzip(pairs):
    return [a for a, _ in pairs], [b for _, b in pairs]


__all__ = ["custom_vjp", "custom_vjp_call_p", "CustomVJPPrimal",
           "custom_vjp_primal_tree_values", "remat_opt_p", "CustomVJPException"]
