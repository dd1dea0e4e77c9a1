"""Gradient checkpointing (rematerialization), with JAX's API: `checkpoint` / `remat`,
the `checkpoint_policies`, `checkpoint_name`, and `saved_residuals` /
`print_saved_residuals` to see what a function's reverse pass keeps.

`checkpoint(f)` stages `f` into a `checkpoint` primitive (impl/primitives/remat.py).
Differentiating it saves only what the policy allows and recomputes the rest on the
backward pass; the gradient is the same as without it.
"""
from __future__ import annotations

import functools
import inspect
import types

from jax import tree_util

from impl import core
from impl.api import StagedFunction, new_trace_cache
from impl.core import get_aval
from impl.interpreters import ad
from impl.interpreters import partial_eval as pe
from impl.primitives.remat import checkpoint_p, name_p

__all__ = ["checkpoint", "remat", "checkpoint_name", "checkpoint_policies",
           "saved_residuals", "print_saved_residuals"]


# ----------------------------------------------------------------------- policies
# A policy is called as policy(prim, *input_avals, **params) for each equation whose
# result the backward pass needs, and says whether to save that result (True) or
# recompute it (False). Inputs of the checkpointed function are always available.

def everything_saveable(*_, **__) -> bool:
    """Save every needed value: as if there were no checkpoint."""
    return True


def nothing_saveable(*_, **__) -> bool:
    """Save nothing but the inputs; recompute the rest (the default policy)."""
    return False


class _DotsSaveable:
    """Save the results of matrix multiplications (and convolutions)."""

    def __init__(self, only_without_batch_dims):
        self.only_without_batch_dims = only_without_batch_dims

    def __call__(self, prim, *avals, **params):
        if prim.name == "dot_general":
            if not self.only_without_batch_dims:
                return True
            (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
            return not lhs_batch and not rhs_batch
        return prim.name == "conv_general_dilated" and not self.only_without_batch_dims


dots_saveable = checkpoint_dots = _DotsSaveable(False)
dots_with_no_batch_dims_saveable = checkpoint_dots_with_no_batch_dims = _DotsSaveable(True)


class _Names:
    """Save the values named (by `checkpoint_name`) in `names` (or, with
    `exclude=True`, the values named otherwise), and no other result."""

    def __init__(self, names, exclude):
        self.names, self.exclude = frozenset(names), exclude

    def __call__(self, prim, *avals, **params):
        if prim is not name_p:
            return False
        return (params["name"] in self.names) != self.exclude


def save_only_these_names(*names):
    """Save only values named with one of `names`."""
    return _Names(names, exclude=False)


def save_any_names_but_these(*names):
    """Save only named values, except those named with one of `names`."""
    return _Names(names, exclude=True)


def save_anything_except_these_names(*names):
    """Save every value, as JAX 0.10.2's policy of this name does: its `names` do not
    restrict what is saved there (a named value is saved under its name too), and impl
    follows JAX's behaviour rather than the name."""
    del names
    return everything_saveable


def save_from_both_policies(policy_1, policy_2):
    """Save a value if either policy saves it."""
    def policy(prim, *avals, **params):
        out1, out2 = policy_1(prim, *avals, **params), policy_2(prim, *avals, **params)
        if not (isinstance(out1, bool) and isinstance(out2, bool)):
            raise ValueError("The return value of the policies should be a boolean. Got: "
                             f"{out1} and {out2}. Please write a custom policy function "
                             "directly, rather than using this helper function.")
        return out1 or out2
    return policy


def _no_offloading(name):
    def policy_maker(*args, **kwargs):
        raise NotImplementedError(f"checkpoint_policies.{name}: impl does not offload "
                                  "residuals to host memory; use a saving policy instead")
    policy_maker.__name__ = name
    return policy_maker


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=checkpoint_dots,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=checkpoint_dots_with_no_batch_dims,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_anything_except_these_names=save_anything_except_these_names,
    save_from_both_policies=save_from_both_policies,
    offload_dot_with_no_batch_dims=_no_offloading("offload_dot_with_no_batch_dims"),
    save_and_offload_only_these_names=_no_offloading("save_and_offload_only_these_names"),
)


# --------------------------------------------------------------------------- API

def checkpoint_name(x, name):
    """`x` (any pytree) unchanged, its values named `name` for checkpoint policies."""
    return tree_util.tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


class _Deprecated:
    pass


_checkpoint_traces = new_trace_cache()


_DEPRECATED = _Deprecated()


def _static_argnums(static_argnums):
    if isinstance(static_argnums, int) and not isinstance(static_argnums, bool):
        return (static_argnums,)
    if not (type(static_argnums) is tuple and all(type(d) is int for d in static_argnums)):
        raise TypeError("the `static_argnums` argument to `jax.checkpoint` / `jax.remat` must "
                        f"be an int, tuple of ints or, bool, but got value {static_argnums}")
    return static_argnums


def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=(),
               static_argnames=(), concrete=_DEPRECATED):
    """`fun`, made to recompute on the backward pass what `policy` does not save (by
    default everything but its inputs). Arguments in `static_argnums` /
    `static_argnames` are Python values the function may branch on."""
    if concrete is not _DEPRECATED:
        raise NotImplementedError(
            "The `concrete` option to `jax.checkpoint` was deprecated in JAX v0.8.2, and "
            "removed in JAX v0.10.0. In its place please use `static_argnums`; for details "
            "refer to https://docs.jax.dev/en/latest/jep/11830-new-remat-checkpoint.html.")
    static_argnames = ((static_argnames,) if isinstance(static_argnames, str)
                       else tuple(static_argnames))
    if isinstance(prevent_cse, (list, tuple)):
        prevent_cse = tuple(bool(p) for p in prevent_cse)
    elif not isinstance(prevent_cse, bool):
        raise TypeError("prevent_cse must be a bool or tuple of bools, got "
                        f"type(prevent_cse)={type(prevent_cse)}")
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be a callable or None, got {policy!r}")

    @functools.wraps(fun)
    def fun_remat(*args, **kwargs):
        argnums = _static_argnums(static_argnums)     # checked at call time, as in JAX
        if not all(-len(args) <= d < len(args) for d in argnums):
            raise ValueError(
                "the `static_argnums` argument to `jax.checkpoint` / `jax.remat` can only take "
                "integer values greater than or equal to `-len(args)` and less than "
                f"`len(args)`, but got {static_argnums}, while `len(args)` = {len(args)}")
        static = tuple(sorted({d % len(args) for d in argnums}))
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in static_argnames}
        # Traced once per function and argument types, as JAX's checkpoint caches
        # (its own cache, apart from jit's).
        staged, flat = StagedFunction(fun, static, static_argnames,
                                      cache=_checkpoint_traces).stage(args, kwargs)
        program, consts = staged.program, staged.consts
        if isinstance(prevent_cse, tuple):
            # One flag per positional argument, for all of its leaves.
            if len(prevent_cse) != len(dyn_args):
                raise ValueError(f"checkpoint: prevent_cse has {len(prevent_cse)} flags for "
                                 f"{len(dyn_args)} positional arguments")
            per_leaf = [flag for flag, a in zip(prevent_cse, dyn_args)
                        for _ in tree_util.tree_leaves(a)]
            cse = ((False,) * len(consts) + tuple(per_leaf)
                   + (True,) * len(tree_util.tree_leaves(dyn_kwargs)))
        else:
            cse = prevent_cse
        outs = checkpoint_p.bind(*consts, *flat, jaxpr=program, prevent_cse=cse,
                                 differentiated=False, policy=policy)
        return tree_util.tree_unflatten(staged.out_tree, outs)

    return fun_remat


def remat(fun, *, prevent_cse=True, policy=None, static_argnums=(), concrete=_DEPRECATED):
    """Alias of `checkpoint`."""
    return checkpoint(fun, prevent_cse=prevent_cse, policy=policy,
                      static_argnums=static_argnums, concrete=concrete)


# ----------------------------------------------------------- residual inspection

def _arg_names(f, args, kwargs):
    """A name per flattened argument, as `x`, `params['w']`, `args[1][0]`."""
    try:
        bound = inspect.signature(f).bind(*args, **kwargs)
        named = dict(bound.arguments)
    except (TypeError, ValueError):
        named = {f"args[{i}]": a for i, a in enumerate(args)} | dict(kwargs)
    names = []
    for name, value in named.items():
        for path, _ in tree_util.tree_flatten_with_path(value)[0]:
            names.append(name + tree_util.keystr(path))
    return names


def saved_residuals(f, *args, **kwargs):
    """The values reverse-mode differentiation of `f` at `args` keeps for the backward
    pass: a list of (abstract value, description), as JAX lists them: constants, then
    arguments in order, then computed values in the order they were computed, each with
    where in the user's code it was computed."""
    flat, in_tree = tree_util.tree_flatten((args, kwargs))

    def flat_fun(*leaves):
        a, k = tree_util.tree_unflatten(in_tree, leaves)
        return tree_util.tree_leaves(f(*a, **k))

    staging = pe.JaxprTrace(core.current_trace())
    with core.recording_sources(), core.new_trace(staging):
        arg_tracers = [staging.new_arg(get_aval(x)) for x in flat]
        _, lin = ad.linearize_flat(flat_fun, arg_tracers)
    names = _arg_names(f, args, kwargs)
    arg_index = {t.var.id: i for i, t in enumerate(arg_tracers)}
    order = {v.id: n for n, e in enumerate(staging.eqns) for v in e.outvars}
    producers = {v.id: e for e in staging.eqns for v in e.outvars}
    constants, arguments, computed = [], [], []
    for r in lin.jaxpr.consts:
        aval = get_aval(r)
        var = r.var if staging.is_own(r) else None
        if var is None:
            constants.append((aval, "from a constant"))
        elif var.id in arg_index:
            i = arg_index[var.id]
            arguments.append((i, (aval, f"from the argument {names[i]}" if i < len(names)
                                  else f"from the argument at flattened index {i}")))
        else:
            eqn = producers[var.id]
            where = core.summarize_source(eqn.source)
            if eqn.primitive is name_p:
                what = f"named '{eqn.params['name']}'"
            elif eqn.primitive.name == "jit":
                what = f"output of jitted function '{eqn.params['name']}'"
            else:
                what = f"output of {eqn.primitive.name}"
            computed.append((order[var.id], (aval, f"{what} from {where}")))
    return (constants + [r for _, r in sorted(arguments, key=lambda p: p[0])]
            + [r for _, r in sorted(computed, key=lambda p: p[0])])


def print_saved_residuals(f, *args, **kwargs):
    """Print what `saved_residuals` returns, one residual a line."""
    for aval, description in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {description}")
