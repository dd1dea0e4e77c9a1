"""custom_gradient (TensorFlow's one-function spelling of a custom VJP) and
closure_convert (hoisting the traced values a function closes over into arguments, so
they can cross a custom-rule boundary)."""
from __future__ import annotations

from jax import tree_util

from impl import core
from impl.core import Tracer, get_aval
from impl.custom_derivatives.common import (check_jaxtypes, name_of, stage, tree_flatten,
                                            tree_unflatten)
from impl.custom_derivatives.vjp import custom_vjp
from impl.interpreters import ad, batching
from impl.interpreters import partial_eval as pe


class _GradientResiduals:
    """Residuals of custom_gradient: the staged gradient function and its constants."""

    def __init__(self, program, out_tree, consts):
        self.program, self.out_tree, self.consts = program, out_tree, consts


tree_util.register_pytree_node(
    _GradientResiduals,
    lambda r: (r.consts, (r.program, r.out_tree)),
    lambda aux, consts: _GradientResiduals(aux[0], aux[1], list(consts)))


def custom_gradient(fun):
    """A custom VJP in one function: fun(*args) returns (value, vjp_fn), vjp_fn mapping
    the output cotangent to the argument cotangents (a tuple, or a single value for one
    argument). The value may be any pytree (integer parts included, e.g. auxiliary
    outputs read with has_aux).

    vjp_fn is staged when the forward pass runs; the values it closes over become
    residuals, so it works under every transformation custom_vjp supports."""
    def primal(*args, **kwargs):
        value, _ = fun(*args, **kwargs)
        return value

    primal.__name__ = primal.__qualname__ = name_of(fun)
    primal.__doc__ = getattr(fun, "__doc__", None)
    wrapped = custom_vjp(primal)

    def fwd(*args):
        value, rule = fun(*args)
        v_leaves, v_tree = tree_flatten((value,))
        store = {}

        def flat_rule(*cts):
            (ct,) = tree_unflatten(v_tree, cts)
            leaves, store["tree"] = tree_flatten(rule(ct))
            return leaves

        ct_avals = [ad.tangent_aval(get_aval(x)) for x in v_leaves]
        program, consts = stage(flat_rule, ct_avals)
        return value, _GradientResiduals(program, store["tree"], consts)

    def bwd(res, ct):
        cts = core.eval_jaxpr(res.program.jaxpr, [], *res.consts, *tree_flatten((ct,))[0])
        out = tree_unflatten(res.out_tree, cts)
        return (out,) if tree_util.treedef_is_leaf(res.out_tree) else out

    wrapped.defvjp(fwd, bwd)
    return wrapped


def _maybe_perturbed(x):
    """Whether a value a function closes over may carry a nonzero tangent (JAX's
    heuristic): a traced value of a differentiation or of a staging trace (unless it is
    not a float), looking through vmap's tracers to the value they batch."""
    if not isinstance(x, Tracer):
        return False
    if isinstance(x, ad.JVPTracer):
        return type(x.tangent) is not ad.Zero or _maybe_perturbed(x.primal)
    if isinstance(x, pe.DynamicJaxprTracer):
        return core.is_float_dtype(x.aval.dtype)
    if isinstance(x, batching.BatchTracer):
        return _maybe_perturbed(x.val)
    return True


def closure_convert(fun, *example_args):
    """Hoist the values `fun` closes over that may be differentiated (as seen when
    running it on arguments like `example_args`) into explicit trailing arguments.

    Returns (converted_fun, hoisted): converted_fun(*args, *hoisted) equals fun(*args),
    and the hoisted values can cross a custom-rule boundary as ordinary arguments."""
    flat, in_tree = tree_flatten(example_args)
    check_jaxtypes(flat, "closure_convert example arguments")
    store = {}

    def flat_fun(*leaves):
        out = fun(*tree_unflatten(in_tree, leaves))
        out_leaves, store["out_tree"] = tree_flatten(out)
        return out_leaves

    closed, _ = pe.trace_to_jaxpr(flat_fun, [get_aval(x) for x in flat])
    out_tree, jaxpr = store["out_tree"], closed.jaxpr
    hoist = [_maybe_perturbed(c) for c in closed.consts]
    kept = [c for c, h in zip(closed.consts, hoist) if not h]
    hoisted = [c for c, h in zip(closed.consts, hoist) if h]

    def converted_fun(*args_and_consts):
        n_args = len(args_and_consts) - len(hoisted)
        args, hconsts = args_and_consts[:n_args], args_and_consts[n_args:]
        leaves, tree = tree_flatten(tuple(args))
        if tree != in_tree:
            raise TypeError("The inputs to the closure produced by closure_convert must have "
                            "the same Pytree structure as the example arguments passed when "
                            f"closure_convert was called. Expected {in_tree}, but got {tree}")
        ik, ih = iter(kept), iter(hconsts)
        consts = [next(ih) if h else next(ik) for h in hoist]
        return tree_unflatten(out_tree, core.eval_jaxpr(jaxpr, consts, *leaves))

    return converted_fun, hoisted


__all__ = ["custom_gradient", "closure_convert"]
