"""User-defined transformation rules: custom_jvp, custom_vjp, custom_gradient,
closure_convert, linear_call and custom_vmap.

Each API stages the user's function to a program and binds a primitive whose
parameters carry that program together with the user's rule (a Python callable over
flat lists of arrays). The rules of each primitive live here, beside it:

* `custom_jvp_call`: evaluates its program; its jvp calls the user's jvp rule (with
  the current trace set to the JVPTrace's parent, so higher orders just work); its
  batching rule batches the program and wraps the rule in a vmap; its transpose
  transposes the program (for linear functions).
* `custom_vjp_call`: evaluates its program; its jvp runs `fwd` and emits `custom_lin`
  on the tangents. `custom_lin` is linear in the tangents: its transpose calls `bwd`
  (reverse mode), and evaluating it transposes `bwd` (forward mode, which needs `bwd`
  to be linear in the cotangent).
* `linear_call`: its transpose is a `linear_call` with callee and transpose swapped.
* `custom_vmap_call`: its batching rule is the user's; its jvp is a pair of
  `custom_vmap_call`s (primal, tangent) whose rules are the user's and its jvp.

When no transformation is active (the current trace is the evaluation trace) the
custom functions simply call the underlying Python function.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np
from jax import tree_util

from impl import core
from impl.core import Tracer, float0, get_aval
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero
from impl.primitives._define import define
from impl.primitives.elementwise import convert_element_type, stop_gradient_p

tree_flatten = tree_util.tree_flatten
tree_unflatten = tree_util.tree_unflatten

__all__ = ["custom_jvp", "custom_vjp", "custom_gradient", "closure_convert", "linear_call",
           "custom_vmap", "CustomJVPException", "CustomVJPException"]


class CustomJVPException(TypeError):
    """A custom_jvp function was differentiated with respect to a closed-over value."""


class CustomVJPException(TypeError):
    """A custom_vjp function was differentiated with respect to a closed-over value."""


class MissingCustomRuleError(TypeError, AttributeError):
    """A custom function was called before its rule was defined."""


# ------------------------------------------------------------------------ helpers

def _name(fun):
    return getattr(fun, "__name__", type(fun).__name__)


def _eager():
    return core.current_trace() is core.eval_trace


def _resolve_kwargs(fun, args, kwargs):
    """Keyword arguments become positional ones (defaults filled in)."""
    if not kwargs:
        try:
            sig = inspect.signature(fun)
        except (TypeError, ValueError):
            return tuple(args)
        if not any(p.default is not p.empty for p in sig.parameters.values()):
            return tuple(args)
    try:
        ba = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{_name(fun)}: {e}") from None
    ba.apply_defaults()
    if ba.kwargs:
        raise TypeError(f"{_name(fun)}: keyword arguments {sorted(ba.kwargs)} could not be "
                        "resolved to positions (a custom-rule function cannot take **kwargs)")
    return tuple(ba.args)


def _check_leaves(leaves, what):
    for x in leaves:
        if not core.valid_jaxtype(x):
            raise TypeError(f"{what} must be arrays or scalars (or pytrees of them), but got "
                            f"a value of type {type(x).__name__}: {x!r}")


class _SubstTrace(core.Trace):
    """Replaces given tracers (by identity) with other values, then binds on its parent.

    A custom rule is a Python closure: the traced values it closes over are the ones
    that existed when the custom function was called. When a transformation later runs
    the rule at another level (a vmap's batching rule wrapping it in a new vmap, or a
    jit program being differentiated after its trace ended), those values are stood in
    for by the current values of the matching operands (the function's closed-over
    constants, which the primitive carries as explicit operands)."""

    __slots__ = ("mapping",)

    def __init__(self, parent, mapping):
        super().__init__(parent)
        self.mapping = mapping

    def process_primitive(self, prim, args, params):
        args = [self.mapping.get(id(a), a) if isinstance(a, Tracer) else a for a in args]
        with core.set_current_trace(self.parent):
            return prim.bind(*args, **params)


def _call_substituted(originals, values, fn, *args):
    """fn(*args), with the tracers among `originals` standing for `values`."""
    mapping = {id(o): v for o, v in zip(originals, values)
               if isinstance(o, Tracer) and o is not v}
    if not mapping:
        return fn(*args)
    # The traces of replaced tracers may have ended; staging a nested custom function
    # inside the rule must still be able to capture them (they are replaced on bind).
    revived = [o._trace for o in originals
               if isinstance(o, Tracer) and id(o) in mapping and not o._trace.alive]
    for t in revived:
        t.alive = True
    try:
        with core.set_current_trace(_SubstTrace(core.current_trace(), mapping)):
            return fn(*args)
    finally:
        for t in revived:
            t.alive = False


def _stage(flat_fun, avals):
    """Stage `flat_fun`; constants (including outer tracers) become leading inputs."""
    closed, _ = pe.trace_to_jaxpr(flat_fun, avals)
    return pe.convert_constvars_to_invars(closed)


def _is_float(aval):
    return core.is_float_dtype(aval.dtype)


def _zero_tangent_value(aval):
    """A materialised zero tangent for a primal of type `aval` (float0 for non-floats)."""
    if not _is_float(aval):
        return np.zeros(aval.shape, float0)
    return core.ops.zeros(aval)


def _instantiate(t, primal_aval):
    if type(t) is Zero:
        return _zero_tangent_value(primal_aval)
    return t


def _aval_str(a):
    return a.str_short()


def _move0(vals, dims):
    out = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(vals, dims)]
    return out, [None if d is None else 0 for d in dims]


def _batched_zero(aval, size, dim):
    if dim is None:
        return Zero(aval)
    shape = list(aval.shape)
    shape.insert(dim, size)
    return Zero(aval.update(shape=tuple(shape)))


def _match(size, src, dst, x, sum_if_needed=False):
    """Move the batch axis of x (or a Zero) from src to dst (None: unbatched)."""
    if type(x) is Zero:
        aval = x.aval
        if src is not None:
            shape = list(aval.shape)
            del shape[src]
            aval = aval.update(shape=tuple(shape))
        return _batched_zero(aval, size, dst)
    if dst is None and src is not None:
        if sum_if_needed:
            return core.ops.reduce_sum(x, (src,))
        raise ValueError("batched value where an unbatched one is required")
    return batching.matchaxis(size, src, dst, x)


def _jaxpr_fun(closed):
    return core.jaxpr_as_fun(closed)


def _batch_forced(closed, axis_data, in_avals, in_dims, out_dims):
    """Batch `closed`; outputs get batch axis 0 where out_dims says 0, and are summed
    over the batch where out_dims says None (the transpose of a broadcast)."""
    size, name = axis_data.size, axis_data.name

    def fun(*args):
        res = batching.batch_with_dims(_jaxpr_fun(closed), args, in_dims, size, name)
        return [_match(size, d, t, x, sum_if_needed=True) for (x, d), t in zip(res, out_dims)]

    return pe.make_closed_jaxpr(fun, in_avals)


def _check_program_args(prim_name, avals, expected):
    if len(avals) != len(expected) or any(a.shape != e.shape or a.dtype != e.dtype
                                          for a, e in zip(avals, expected)):
        raise TypeError(f"{prim_name}: argument types {[_aval_str(a) for a in avals]} do not "
                        f"match the program's {[_aval_str(e) for e in expected]}")


def _eval_program(closed, args):
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _program_call_rules(prim_name):
    """Evaluation, abstract evaluation and lowering of a primitive whose `call` parameter
    is the staged primal program it applies to all of its arguments."""
    def impl(*args, call, name, **_):
        return _eval_program(call, args)

    def abstract_eval(*avals, call, name, **_):
        _check_program_args(f"{prim_name} of {name}", avals, call.in_avals)
        return call.out_avals

    def lower(*args, call, **_):
        return lowering.eval_jaxpr_lowered(call.jaxpr, call.consts, args)

    return dict(multiple_results=True, impl=impl, abstract_eval=abstract_eval, lowering=lower)


# ============================================================================ custom_jvp



def _closed_over_error(kind, name, exc):
    return exc(
        f"Detected differentiation of the {kind} function {name} with respect to a value it "
        f"closes over. The custom rule only says how to differentiate {name} with respect "
        "to its explicit arguments. Pass the value to the function as an argument (and "
        "adapt the rule), or use impl.closure_convert to hoist it into arguments.")


def _custom_jvp_call_jvp(primals, tangents, *, call, jvp, num_consts, name):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise _closed_over_error("custom_jvp", name, CustomJVPException)
    args = list(primals[num_consts:])
    ts = [_instantiate(t, get_aval(p)) for p, t in zip(args, tangents[num_consts:])]
    outs, out_ts = jvp(list(primals[:num_consts]), args, ts)
    return outs, out_ts




def _custom_jvp_call_transpose(cts, *args, call, jvp, num_consts, name):
    # A custom_jvp function that is linear: transpose its primal program.
    return ad.backward_pass(call.jaxpr, call.consts, args, cts)




def _custom_jvp_call_batch(axis_data, vals, dims, *, call, jvp, num_consts, name):
    size, aname = axis_data.size, axis_data.name
    vals, dims = _move0(vals, dims)
    bcall, out_dims = batching.batch_jaxpr(call, axis_data, [get_aval(v) for v in vals], dims)
    const_dims, arg_dims = dims[:num_consts], dims[num_consts:]
    box = {"out_dims": list(out_dims), "frozen": False}

    def batched_jvp(consts, args, ts):
        nc, n = len(consts), len(args)

        def flat(*xs):
            o, t = jvp(list(xs[:nc]), list(xs[nc:nc + n]), list(xs[nc + n:]))
            return list(o) + list(t)

        res = batching.batch_with_dims(flat, list(consts) + list(args) + list(ts),
                                       const_dims + arg_dims * 2, size, aname)
        k = len(res) // 2
        targets = []
        for i in range(k):
            (p, pd), (t, td) = res[i], res[k + i]
            want = box["out_dims"][i]
            if want is None and (pd is not None or (td is not None and type(t) is not Zero)):
                if box["frozen"]:
                    raise TypeError(
                        f"custom_jvp rule of {name} under vmap produced a batched output "
                        f"{i} where the primal function's output is not batched")
                want = 0
            targets.append(want)
        box["out_dims"] = targets
        outs = [_match(size, pd, want, p) for (p, pd), want in zip(res[:k], targets)]
        out_ts = [_match(size, td, want, t) for (t, td), want in zip(res[k:], targets)]
        return outs, out_ts

    outs = custom_jvp_call_p.bind(*vals, call=bcall, jvp=batched_jvp, num_consts=num_consts,
                                  name=name)
    box["frozen"] = True
    # If the rule ran while binding, its outputs already follow box["out_dims"].
    return outs, box["out_dims"]


custom_jvp_call_p = define("custom_jvp_call", **_program_call_rules("custom_jvp_call"),
                           jvp=_custom_jvp_call_jvp, transpose=_custom_jvp_call_transpose,
                           batching=_custom_jvp_call_batch)


class _ArgLayout:
    """How positional arguments map to flat operands.

    Leaves of differentiable arguments are operands; leaves of nondiff arguments are
    operands when they are arrays (never differentiated) and static otherwise."""

    def __init__(self, args, nondiff_argnums, what, arrays_only_for_nondiff=False):
        self.nargs = len(args)
        self.nondiff = tuple(sorted({i % self.nargs for i in nondiff_argnums})) \
            if self.nargs else ()
        self.trees, self.kinds, self.static = [], [], []
        self.operands = []
        for i, a in enumerate(args):
            leaves, tree = tree_flatten(a)
            self.trees.append(tree)
            kinds = []
            for x in leaves:
                if i in self.nondiff:
                    if core.valid_jaxtype(x) and not arrays_only_for_nondiff:
                        kinds.append("nondiff")
                        self.operands.append(x)
                    else:
                        kinds.append("static")
                        self.static.append(x)
                else:
                    if not core.valid_jaxtype(x):
                        raise TypeError(
                            f"{what}: argument {i} must be an array, a scalar or a pytree of "
                            f"them (mark it in nondiff_argnums otherwise), but a leaf has "
                            f"type {type(x).__name__}: {x!r}")
                    kinds.append("diff")
                    self.operands.append(x)
            self.kinds.append(kinds)
        self.is_diff = [k == "diff" for ks in self.kinds for k in ks if k != "static"]

    def rebuild(self, operands):
        it, st = iter(operands), iter(self.static)
        out = []
        for tree, kinds in zip(self.trees, self.kinds):
            leaves = [next(st) if k == "static" else next(it) for k in kinds]
            out.append(tree_unflatten(tree, leaves))
        return out

    def split(self, args):
        nondiff = [args[i] for i in self.nondiff]
        diff = tuple(a for i, a in enumerate(args) if i not in self.nondiff)
        return nondiff, diff

    def diff_trees(self):
        return [t for i, t in enumerate(self.trees) if i not in self.nondiff]


def _check_primal_tangent_outs(name, what, out_tree, p_leaves, p_tree, t_leaves, t_tree,
                               expected_avals):
    if p_tree != t_tree:
        raise TypeError(f"Custom JVP rule {what} must produce primal and tangent outputs with "
                        f"equal container (pytree) structures, but got {p_tree} and {t_tree} "
                        "respectively.")
    if out_tree is not None and p_tree != out_tree:
        raise TypeError(f"Custom JVP rule {what} must produce a primal output with the same "
                        f"container (pytree) structure as the output of {name}, {out_tree}, "
                        f"but got {p_tree}.")
    _check_leaves(p_leaves, f"The primal outputs of custom JVP rule {what}")
    _check_leaves(t_leaves, f"The tangent outputs of custom JVP rule {what}")
    p_avals = [get_aval(x) for x in p_leaves]
    if expected_avals is not None:
        bad = [f"  output {i}: rule gives {_aval_str(a)}, {name} gives {_aval_str(e)}"
               for i, (a, e) in enumerate(zip(p_avals, expected_avals))
               if a.shape != e.shape or a.dtype != e.dtype]
        if bad:
            raise TypeError(f"Custom JVP rule {what} must produce primal outputs with the "
                            f"shapes and dtypes of the outputs of {name}, but got:\n"
                            + "\n".join(bad))
    disagreements = []
    for i, (p, t) in enumerate(zip(p_avals, t_leaves)):
        ta = get_aval(t)
        expected = ad.tangent_aval(p)
        if expected.dtype == float0:
            if ta.shape != p.shape and ta.shape != ():
                disagreements.append((i, p, ta))
            continue
        if ta.shape != p.shape or ta.dtype != p.dtype:
            disagreements.append((i, p, ta))
    if disagreements:
        if len(p_avals) == 1:
            (_, p, ta), = disagreements
            raise TypeError(f"Custom JVP rule {what} must produce primal and tangent outputs "
                            f"with equal shapes and dtypes, but got {_aval_str(p)} and "
                            f"{_aval_str(ta)} respectively.")
        lines = "\n".join(f"  output {i}: primal {_aval_str(p)} for tangent {_aval_str(ta)}"
                          for i, p, ta in disagreements)
        raise TypeError(f"Custom JVP rule {what} must produce primal and tangent outputs with "
                        f"equal shapes and dtypes, but got:\n{lines}")


class _CustomRuleFunction:
    """A Python function plus user rules; it behaves like the function, also as a method."""

    def __init__(self, fun, nondiff_argnums=()):
        if isinstance(nondiff_argnums, int):
            nondiff_argnums = (nondiff_argnums,)
        functools.update_wrapper(self, fun)   # first: fun's __dict__ must not shadow ours
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def _stage_primal(self, layout, what):
        """Stage the function on the layout's operands: (program, consts, out_tree)."""
        store = {}
        fun = self.fun

        def flat_fun(*ops):
            out = fun(*layout.rebuild(ops))
            leaves, store["out_tree"] = tree_flatten(out)
            _check_leaves(leaves, f"The outputs of {what}")
            return leaves

        program, consts = _stage(flat_fun, [get_aval(x) for x in layout.operands])
        return program, consts, store["out_tree"]


class custom_jvp(_CustomRuleFunction):
    """Give a Python function a custom JVP rule (used by jvp, grad, linearize, at every
    order), while vmap, jit and evaluation keep using the function itself."""

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None

    def defjvp(self, jvp, symbolic_zeros=False):
        """Set the rule jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out).

        Returns the rule, so it can be used as a decorator."""
        if not callable(jvp):
            raise TypeError(f"defjvp of {_name(self.fun)} expects a callable, got "
                            f"{type(jvp).__name__}")
        _no_symbolic_zeros(symbolic_zeros, "defjvp")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, fn(tangent, primal_out, *primals), or None (no
        dependence); the tangent output is the sum of their results."""
        if self.nondiff_argnums:
            raise TypeError("Can't use defjvps with nondiff_argnums; use defjvp instead.")

        def jvp(primals, tangents):
            primal_out = self(*primals)
            out_leaves, out_tree = tree_flatten(primal_out)
            acc = None
            for fn, t in zip(jvps, tangents):
                if fn is None:
                    continue
                contrib = fn(t, primal_out, *primals)
                c_leaves, c_tree = tree_flatten(contrib)
                if c_tree != out_tree:
                    raise TypeError(f"defjvps rule of {_name(self.fun)} must return a value "
                                    f"with the structure of the primal output {out_tree}, "
                                    f"got {c_tree}")
                acc = c_leaves if acc is None else [a + c for a, c in zip(acc, c_leaves)]
            if acc is None:
                import impl.numpy as jnp
                acc = [jnp.zeros_like(o) for o in out_leaves]
            return primal_out, tree_unflatten(out_tree, acc)

        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        if self.jvp is None:
            raise MissingCustomRuleError(
                f"No JVP defined for custom_jvp function {name} using defjvp: define the "
                f"rule with {name}.defjvp(rule) (or defjvps) before calling it.")
        args = _resolve_kwargs(self.fun, args, kwargs)
        if _eager():
            return self.fun(*args)
        if self.nondiff_argnums:
            # traced values in nondiff_argnums are never differentiated, at any order
            nd = {i % len(args) for i in self.nondiff_argnums} if args else set()
            args = tuple(tree_util.tree_map(_stop_gradient, a) if i in nd else a
                         for i, a in enumerate(args))
        layout = _ArgLayout(args, self.nondiff_argnums, f"custom_jvp function {name}")
        rule = self.jvp
        program, consts, out_tree = self._stage_primal(layout, f"custom_jvp function {name}")
        out_avals = program.out_avals
        rule_name = _name(rule)

        def flat_jvp(const_vals, ops, ts):
            return _call_substituted(consts, const_vals, flat_jvp_, ops, ts)

        def flat_jvp_(ops, ts):
            full = layout.rebuild(ops)
            nondiff, primals = layout.split(full)
            diff_ts = [t for t, d in zip(ts, layout.is_diff) if d]
            t_trees = layout.diff_trees()
            it = iter(diff_ts)
            tangents = tuple(tree_unflatten(tr, [next(it) for _ in range(tr.num_leaves)])
                             for tr in t_trees)
            pair = rule(*nondiff, primals, tangents)
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"Custom JVP rule {rule_name} of {name} must produce a pair "
                                "(list or tuple of length two) representing primal and "
                                f"tangent outputs, but got {_describe(pair)}.")
            p_leaves, p_tree = tree_flatten(pair[0])
            t_leaves, t_tree = tree_flatten(pair[1])
            _check_primal_tangent_outs(name, rule_name, out_tree, p_leaves, p_tree, t_leaves,
                                       t_tree, out_avals)
            out_ts = [t if _is_float(get_aval(p)) else Zero(ad.tangent_aval(get_aval(p)))
                      for p, t in zip(p_leaves, t_leaves)]
            return list(p_leaves), out_ts

        outs = custom_jvp_call_p.bind(*consts, *layout.operands, call=program, jvp=flat_jvp,
                                      num_consts=len(consts), name=name)
        return tree_unflatten(out_tree, outs)


def _no_symbolic_zeros(flag, where):
    if flag:
        raise NotImplementedError(
            f"{where}(symbolic_zeros=True) is not supported by impl: rules always receive "
            "materialised zero tangents/cotangents; define the rule without it.")


def _stop_gradient(x):
    return stop_gradient_p.bind(x) if isinstance(x, Tracer) else x


def _describe(x):
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    return f"a value of type {type(x).__name__}"


# ============================================================================ custom_vjp



def _custom_vjp_call_jvp(primals, tangents, *, call, fwd, bwd, num_consts, name):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise _closed_over_error("custom_vjp", name, CustomVJPException)
    consts, args = list(primals[:num_consts]), list(primals[num_consts:])
    ts = tangents[num_consts:]
    outs, res = fwd(consts, args)
    res = consts + list(res)   # bwd gets the closed-over constants too
    arg_avals = [get_aval(a) for a in args]
    arg_float = tuple(_is_float(a) for a in arg_avals)
    float_ts = [ad.instantiate_zeros(t) for t, f in zip(ts, arg_float) if f]
    out_avals = tuple(get_aval(o) for o in outs)
    lin_outs = custom_lin_p.bind(
        *res, *float_ts, num_res=len(res), num_consts=num_consts, bwd=bwd,
        res_avals=tuple(get_aval(r) for r in res), ct_avals=out_avals,
        arg_avals=tuple(arg_avals), name=name)
    it = iter(lin_outs)
    out_ts = [next(it) if _is_float(a) else Zero(ad.tangent_aval(a)) for a in out_avals]
    return outs, out_ts




def _custom_vjp_call_batch(axis_data, vals, dims, *, call, fwd, bwd, num_consts, name):
    size, aname = axis_data.size, axis_data.name
    vals, dims = _move0(vals, dims)
    avals = [get_aval(v) for v in vals]
    bcall, out_dims = batching.batch_jaxpr(call, axis_data, avals, dims)
    const_dims, arg_dims = dims[:num_consts], dims[num_consts:]
    arg_avals = avals[num_consts:]
    n_out = len(call.out_avals)
    box = {}

    def batched_fwd(consts, args):
        nc = len(consts)

        def flat(*xs):
            o, r = fwd(list(xs[:nc]), list(xs[nc:]))
            return list(o) + list(r)

        res = batching.batch_with_dims(flat, list(consts) + list(args), const_dims + arg_dims,
                                       size, aname)
        outs = []
        for i, ((o, d), want) in enumerate(zip(res[:n_out], out_dims)):
            if want is None and d is not None:
                raise TypeError(f"custom_vjp fwd of {name} under vmap produced a batched "
                                f"primal output {i} where the primal function's output is "
                                "not batched")
            outs.append(batching.matchaxis(size, d, want, o))
        box["res_dims"] = [None if d is None else 0 for _, d in res[n_out:]]
        rvals = [r if d is None else batching.moveaxis(r, d, 0) for r, d in res[n_out:]]
        return outs, rvals

    def batched_bwd(consts, res, cts):
        nc, nr = len(consts), len(res)

        def flat(*xs):
            return bwd(list(xs[:nc]), list(xs[nc:nc + nr]), list(xs[nc + nr:]))

        outs = batching.batch_with_dims(flat, list(consts) + list(res) + list(cts),
                                        const_dims + box["res_dims"] + list(out_dims), size,
                                        aname)
        result = []
        for (c, d), want, a in zip(outs, arg_dims, arg_avals):
            if type(c) is Zero:
                result.append(Zero(ad.tangent_aval(a)))
            elif not _is_float(a):
                result.append(Zero(ad.tangent_aval(a)))
            else:
                # a cotangent batched for an unbatched input is summed over the batch
                result.append(_match(size, d, want, c, sum_if_needed=True))
        return result

    outs = custom_vjp_call_p.bind(*vals, call=bcall, fwd=batched_fwd, bwd=batched_bwd,
                                  num_consts=num_consts, name=name)
    return outs, out_dims


custom_vjp_call_p = define("custom_vjp_call", **_program_call_rules("custom_vjp_call"),
                           jvp=_custom_vjp_call_jvp, batching=_custom_vjp_call_batch)


# custom_lin: linear in its tangent operands; params carry bwd.

def _custom_lin_abstract_eval(*avals, num_res, num_consts, bwd, res_avals, ct_avals,
                              arg_avals, name):
    return [a for a in ct_avals if _is_float(a)]


_bwd_programs = {}


def _bwd_program(bwd, num_consts, res_avals, ct_avals, arg_avals, name):
    """bwd staged as a program over (residuals, float cotangents) -> nonzero float cts."""
    key = (bwd, num_consts, res_avals, ct_avals, arg_avals)
    hit = _bwd_programs.get(key)
    if hit is not None:
        return hit
    nr = len(res_avals)
    ct_float = [_is_float(a) for a in ct_avals]
    in_avals = list(res_avals) + [a for a, f in zip(ct_avals, ct_float) if f]
    box = {}

    def g(*xs):
        it = iter(xs[nr:])
        cts = [next(it) if f else np.zeros(a.shape, float0) for a, f in zip(ct_avals, ct_float)]
        cts_in = bwd(list(xs[:num_consts]), list(xs[num_consts:nr]), cts)
        outs = [c for c, a in zip(cts_in, arg_avals) if _is_float(a)]
        box["nonzero"] = [type(c) is not Zero for c in outs]
        return [c for c in outs if type(c) is not Zero]

    prog = pe.make_closed_jaxpr(g, in_avals)
    hit = (prog, box["nonzero"])
    if not any(isinstance(c, Tracer) for c in prog.consts):   # never keep tracers alive
        if len(_bwd_programs) > 256:
            _bwd_programs.clear()
        _bwd_programs[key] = hit
    return hit


def _custom_lin_apply(*args, num_res, num_consts, bwd, res_avals, ct_avals, arg_avals, name):
    """Forward mode through custom_vjp: the transpose of ct -> bwd(res, ct) applied to
    the input tangents. Needs bwd to be linear (and transposable) in ct."""
    res, ts = args[:num_res], args[num_res:]
    prog, nonzero = _bwd_program(bwd, num_consts, res_avals, ct_avals, arg_avals, name)
    ct_float = [_is_float(a) for a in ct_avals]
    lin_in = [ad.UndefinedPrimal(a) for a, f in zip(ct_avals, ct_float) if f]
    cts = [t for t, nz in zip(ts, nonzero) if nz]
    try:
        out = ad.backward_pass(prog.jaxpr, prog.consts, list(res) + lin_in, cts)
    except (core.MissingRuleError, TypeError) as e:
        raise TypeError(
            f"Forward-mode differentiation (jvp, jacfwd, hessian) of the custom_vjp function "
            f"{name} computes its tangents by transposing its bwd rule, which therefore must "
            f"be linear in the output cotangent, built from transposable operations; "
            f"transposing bwd failed: {e}") from None
    out = out[num_res:]
    float_avals = [a for a, f in zip(ct_avals, ct_float) if f]
    return [ad.instantiate_zeros(o) if type(o) is Zero else o
            for o, a in zip(out, float_avals)]


def _custom_lin_impl(*args, **params):
    return _custom_lin_apply(*args, **params)


def _custom_lin_lowering(*args, **params):
    with core.set_current_trace(core.eval_trace):
        return _custom_lin_apply(*args, **params)


def _custom_lin_jvp(primals, tangents, **params):
    return ad.jvp_flat(lambda *xs: _custom_lin_apply(*xs, **params), list(primals),
                       list(tangents))


def _custom_lin_batch(axis_data, vals, dims, **params):
    res = batching.batch_with_dims(lambda *xs: _custom_lin_apply(*xs, **params), list(vals),
                                   list(dims), axis_data.size, axis_data.name)
    return [v for v, _ in res], [d for _, d in res]


def _custom_lin_transpose(cts, *args, num_res, num_consts, bwd, res_avals, ct_avals,
                          arg_avals, name):
    res, lin = args[:num_res], args[num_res:]
    if any(ad.is_undefined_primal(r) for r in res):
        raise TypeError(f"custom_vjp of {name}: residuals depend on the linear inputs")
    it = iter(cts)
    full = [_instantiate(next(it), a) if _is_float(a) else np.zeros(a.shape, float0)
            for a in ct_avals]
    cts_in = bwd(list(res[:num_consts]), list(res[num_consts:]), full)
    float_cts = [c for c, a in zip(cts_in, arg_avals) if _is_float(a)]
    return [None] * num_res + [c if ad.is_undefined_primal(x) else None
                               for c, x in zip(float_cts, lin)]


custom_lin_p = define("custom_lin", multiple_results=True, impl=_custom_lin_impl,
                      abstract_eval=_custom_lin_abstract_eval, lowering=_custom_lin_lowering,
                      jvp=_custom_lin_jvp, transpose=_custom_lin_transpose,
                      batching=_custom_lin_batch)


def _nondiff_tracer_error(name, i):
    return core.UnexpectedTracerError(
        f"custom_vjp function {name} got a traced value (a Tracer) as argument {i}, which "
        "nondiff_argnums marks as non-differentiable. Arguments in nondiff_argnums must "
        "not be traced values: use nondiff_argnums only for values that are not arrays "
        "(functions, Python configuration). Pass array arguments as ordinary arguments "
        "instead, and have bwd return None as their cotangent if they need none.")


class custom_vjp(_CustomRuleFunction):
    """Give a Python function a custom VJP rule: fwd(*args) -> (out, residuals) and
    bwd(*nondiff_args, residuals, out_cotangent) -> one cotangent (or None) per argument."""

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = None
        self.bwd = None

    def defvjp(self, fwd, bwd, symbolic_zeros=False):
        _no_symbolic_zeros(symbolic_zeros, "defvjp")
        if not callable(fwd) or not callable(bwd):
            raise TypeError(f"defvjp of {_name(self.fun)} expects two callables (fwd, bwd), "
                            f"got {type(fwd).__name__} and {type(bwd).__name__}")
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        if self.fwd is None or self.bwd is None:
            raise MissingCustomRuleError(
                f"No VJP defined for custom_vjp function {name} using defvjp: define the "
                f"rules with {name}.defvjp(fwd, bwd) before calling it.")
        args = _resolve_kwargs(self.fun, args, kwargs)
        nargs = len(args)
        nondiff = sorted({i % nargs for i in self.nondiff_argnums}) if nargs else []
        for i in nondiff:
            for x in tree_util.tree_leaves(args[i]):
                if isinstance(x, Tracer):
                    raise _nondiff_tracer_error(name, i)
        if _eager():
            return self.fun(*args)
        layout = _ArgLayout(args, nondiff, f"custom_vjp function {name}",
                            arrays_only_for_nondiff=True)
        fwd_fn, bwd_fn = self.fwd, self.bwd
        program, consts, out_tree = self._stage_primal(layout, f"custom_vjp function {name}")
        out_avals = program.out_avals
        fwd_name, bwd_name = _name(fwd_fn), _name(bwd_fn)
        store = {}   # the residual tree, known once fwd has run

        def flat_fwd(const_vals, ops):
            return _call_substituted(consts, const_vals, flat_fwd_, ops)

        def flat_fwd_(ops):
            pair = fwd_fn(*layout.rebuild(ops))
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"Custom VJP fwd rule {fwd_name} of {name} must produce a pair "
                                "(list or tuple of length two) of the primal output and the "
                                f"residuals, but got {_describe(pair)}.")
            o_leaves, o_tree = tree_flatten(pair[0])
            if o_tree != out_tree:
                raise TypeError(f"Custom VJP fwd rule {fwd_name} of {name} must produce a "
                                "primal output with the container (pytree) structure of the "
                                f"output of {name}, {out_tree}, but got {o_tree}.")
            _check_leaves(o_leaves, f"The primal outputs of fwd rule {fwd_name}")
            bad = [f"  output {i}: fwd gives {_aval_str(get_aval(o))}, {name} gives "
                   f"{_aval_str(e)}" for i, (o, e) in enumerate(zip(o_leaves, out_avals))
                   if get_aval(o).shape != e.shape or get_aval(o).dtype != e.dtype]
            if bad:
                raise TypeError(f"Custom VJP fwd rule {fwd_name} of {name} must produce "
                                "primal outputs with the shapes and dtypes of the outputs of "
                                f"{name}, but got:\n" + "\n".join(bad))
            r_leaves, store["res_tree"] = tree_flatten(pair[1])
            _check_leaves(r_leaves, f"The residuals of fwd rule {fwd_name}")
            return list(o_leaves), list(r_leaves)

        static_nondiff = [args[i] for i in nondiff]
        diff_trees = layout.diff_trees()
        diff_avals = [get_aval(x) for x in layout.operands]

        def flat_bwd(const_vals, res, cts):
            return _call_substituted(consts, const_vals, flat_bwd_, res, cts)

        def flat_bwd_(res, cts):
            py_res = tree_unflatten(store["res_tree"], res)
            py_cts = tree_unflatten(out_tree, cts)
            out = bwd_fn(*static_nondiff, py_res, py_cts)
            return _flatten_bwd_output(out, diff_trees, diff_avals, name, bwd_name)

        outs = custom_vjp_call_p.bind(*consts, *layout.operands, call=program, fwd=flat_fwd,
                                      bwd=flat_bwd, num_consts=len(consts), name=name)
        return tree_unflatten(out_tree, outs)


def _flatten_bwd_output(out, trees, avals, name, bwd_name):
    """Check bwd's output (one entry per argument, None for zero) and flatten it."""
    n = len(trees)
    if not isinstance(out, tuple) or len(out) != n:
        raise TypeError(f"Custom VJP bwd rule {bwd_name} of {name} must produce a tuple with "
                        f"one entry per argument of the primal function (length {n}), but "
                        f"got {_describe(out)}: {_short_repr(out)}.")
    flat = []
    is_none = lambda x: x is None  # noqa: E731
    it_avals = iter(avals)
    for i, (ct, tree) in enumerate(zip(out, trees)):
        arg_avals = [next(it_avals) for _ in range(tree.num_leaves)]
        if ct is None:
            flat.extend(Zero(ad.tangent_aval(a)) for a in arg_avals)
            continue
        leaves, ct_tree = tree_flatten(ct, is_leaf=is_none)
        if ct_tree != tree and not _none_leaves_match(leaves, ct_tree, tree):
            raise TypeError(f"Custom VJP bwd rule {bwd_name} of {name} must produce an output "
                            "with the same container (pytree) structure as the arguments of "
                            f"the primal function, but for argument {i} it produced "
                            f"structure {ct_tree} where the argument has structure {tree}.")
        for j, (c, a) in enumerate(zip(leaves, arg_avals)):
            if c is None or not _is_float(a):
                flat.append(Zero(ad.tangent_aval(a)))
                continue
            if isinstance(c, Zero):
                flat.append(Zero(ad.tangent_aval(a)))
                continue
            if not core.valid_jaxtype(c):
                raise TypeError(f"Custom VJP bwd rule {bwd_name} of {name} produced a value of "
                                f"type {type(c).__name__} for argument {i}; expected an array")
            ca = get_aval(c)
            if ca.shape != a.shape:
                raise TypeError(f"Custom VJP bwd rule {bwd_name} of {name} must produce "
                                "cotangents with the shapes of the primal arguments, but for "
                                f"argument {i} (leaf {j}) it produced shape {ca.shape} "
                                f"({_aval_str(ca)}) where the argument has shape {a.shape} "
                                f"({_aval_str(a)}).")
            if ca.dtype != a.dtype:
                if ca.weak_type or isinstance(c, (int, float)):
                    c = convert_element_type(c, a.dtype)
                else:
                    raise TypeError(f"Custom VJP bwd rule {bwd_name} of {name} must produce "
                                    "cotangents with the dtypes of the primal arguments, but "
                                    f"for argument {i} (leaf {j}) it produced {_aval_str(ca)} "
                                    f"where the argument is {_aval_str(a)}.")
            flat.append(c)
    return flat


def _none_leaves_match(leaves, ct_tree, tree):
    """Whether a cotangent tree equals `tree` once its None leaves are read as arrays."""
    if len(leaves) != tree.num_leaves:
        return False
    filled = tree_unflatten(ct_tree, [object()] * len(leaves))
    return tree_flatten(filled)[1] == tree


def _short_repr(x):
    r = repr(x)
    return r if len(r) < 200 else r[:200] + "..."


# ======================================================================= custom_gradient

class _GradientResiduals:
    """Residuals of custom_gradient: the staged gradient function and its constants."""

    def __init__(self, program, out_tree, none_mask, consts):
        self.program, self.out_tree, self.none_mask = program, out_tree, none_mask
        self.consts = consts


tree_util.register_pytree_node(
    _GradientResiduals,
    lambda r: (r.consts, (r.program, r.out_tree, r.none_mask)),
    lambda aux, consts: _GradientResiduals(aux[0], aux[1], aux[2], list(consts)))


def custom_gradient(fun):
    """Custom VJP in one function: fun(*args) returns (value, vjp_fn) with vjp_fn mapping
    the output cotangent to a tuple of argument cotangents (TensorFlow's style).

    The vjp_fn is staged when the forward pass runs; its closed-over values become
    residuals, so it works under every transformation custom_vjp supports."""
    def primal(*args):
        value, _ = fun(*args)
        return value

    primal.__name__ = _name(fun)
    wrapped = custom_vjp(primal)
    is_none = lambda x: x is None  # noqa: E731

    def fwd(*args):
        value, rule = fun(*args)
        v_leaves, v_tree = tree_flatten((value,))
        store = {}

        def flat_rule(*cts):
            (ct,) = tree_unflatten(v_tree, cts)
            leaves, store["tree"] = tree_flatten(rule(ct), is_leaf=is_none)
            store["mask"] = tuple(x is None for x in leaves)
            return [x for x in leaves if x is not None]

        program, consts = _stage(flat_rule, [get_aval(x) for x in v_leaves])
        return value, _GradientResiduals(program, store["tree"], store["mask"], consts)

    def bwd(res, ct):
        outs = iter(core.eval_jaxpr(res.program.jaxpr, [], *res.consts,
                                    *tree_flatten((ct,))[0]))
        filled = [None if m else next(outs) for m in res.none_mask]
        out = tree_unflatten(res.out_tree, filled)
        return out if isinstance(out, tuple) else (out,)

    wrapped.defvjp(fwd, bwd)
    return wrapped


# ======================================================================= closure_convert

def closure_convert(fun, *example_args):
    """Hoist the float constants and traced values that `fun` closes over (as seen when
    running it on arguments like `example_args`) into explicit trailing arguments.

    Returns (converted_fun, hoisted): converted_fun(*args, *hoisted) equals fun(*args),
    and the hoisted values can cross a custom-rule boundary as ordinary arguments."""
    flat, in_tree = tree_flatten(example_args)
    _check_leaves(flat, "closure_convert example arguments")
    store = {}

    def flat_fun(*leaves):
        out = fun(*tree_unflatten(in_tree, leaves))
        out_leaves, store["out_tree"] = tree_flatten(out)
        return out_leaves

    closed, _ = pe.trace_to_jaxpr(flat_fun, [get_aval(x) for x in flat])
    out_tree = store["out_tree"]
    consts = closed.consts
    hoist = [isinstance(c, Tracer) or _is_float(get_aval(c)) for c in consts]
    kept = [c for c, h in zip(consts, hoist) if not h]
    hoisted = [c for c, h in zip(consts, hoist) if h]
    n_hoisted = len(hoisted)
    jaxpr = closed.jaxpr

    def converted_fun(*args_and_consts):
        n_args = len(args_and_consts) - n_hoisted
        args, hconsts = args_and_consts[:n_args], args_and_consts[n_args:]
        leaves, tree = tree_flatten(tuple(args))
        if tree != in_tree:
            raise TypeError(f"closure-converted {_name(fun)} expects arguments with structure "
                            f"{in_tree} followed by {n_hoisted} hoisted constants, got {tree}")
        ik, ih = iter(kept), iter(hconsts)
        all_consts = [next(ih) if h else next(ik) for h in hoist]
        return tree_unflatten(out_tree, core.eval_jaxpr(jaxpr, all_consts, *leaves))

    return converted_fun, hoisted


# =========================================================================== linear_call


def _split4(args, nfc, ntc, nres):
    a, b, c = nfc, nfc + ntc, nfc + ntc + nres
    return list(args[:a]), list(args[a:b]), list(args[b:c]), list(args[c:])


def _linear_call_impl(*args, callee, transpose, num_callee_consts, num_transpose_consts,
                      num_res):
    fc, _, res, lin = _split4(args, num_callee_consts, num_transpose_consts, num_res)
    return _eval_program(callee, fc + res + lin)


def _linear_call_abstract_eval(*avals, callee, transpose, num_callee_consts,
                               num_transpose_consts, num_res):
    fc, _, res, lin = _split4(avals, num_callee_consts, num_transpose_consts, num_res)
    _check_program_args("linear_call", fc + res + lin, callee.in_avals)
    return callee.out_avals


def _linear_call_lowering(*args, callee, transpose, num_callee_consts, num_transpose_consts,
                          num_res):
    fc, _, res, lin = _split4(args, num_callee_consts, num_transpose_consts, num_res)
    return lowering.eval_jaxpr_lowered(callee.jaxpr, callee.consts, fc + res + lin)


def _linear_call_transpose(cts, *args, callee, transpose, num_callee_consts,
                           num_transpose_consts, num_res):
    fc, tc, res, lin = _split4(args, num_callee_consts, num_transpose_consts, num_res)
    if any(ad.is_undefined_primal(x) for x in fc + tc + res):
        raise TypeError("linear_call is linear only in its linear_args; a residual argument "
                        "(or a value its functions close over) depends on the inputs being "
                        "transposed")
    cts = [_instantiate(ct, a) for ct, a in zip(cts, callee.out_avals)]
    outs = linear_call_p.bind(*tc, *fc, *res, *cts, callee=transpose, transpose=callee,
                              num_callee_consts=num_transpose_consts,
                              num_transpose_consts=num_callee_consts, num_res=num_res)
    return [None] * (len(fc) + len(tc) + len(res)) + [
        o if ad.is_undefined_primal(x) else None for o, x in zip(outs, lin)]


def _linear_call_jvp(primals, tangents, *, callee, transpose, num_callee_consts,
                     num_transpose_consts, num_res):
    params = dict(callee=callee, transpose=transpose, num_callee_consts=num_callee_consts,
                  num_transpose_consts=num_transpose_consts, num_res=num_res)
    outs = linear_call_p.bind(*primals, **params)
    fc, tc, res, lin = _split4(primals, num_callee_consts, num_transpose_consts, num_res)
    tfc, _, tres, tlin = _split4(tangents, num_callee_consts, num_transpose_consts, num_res)
    out_ts = [Zero(ad.tangent_aval(a)) for a in callee.out_avals]
    if any(type(t) is not Zero for t in tlin):
        lin_ts = [ad.instantiate_zeros(t) for t in tlin]
        t1 = linear_call_p.bind(*fc, *tc, *res, *lin_ts, **params)
        out_ts = [ad.add_tangents(a, b) for a, b in zip(out_ts, t1)]
    if any(type(t) is not Zero for t in tfc + tres):
        # the function is not linear in its residuals: differentiate its program there
        zeros = [Zero(ad.tangent_aval(get_aval(x))) for x in lin]
        _, t2 = ad.jvp_flat(_jaxpr_fun(callee), fc + res + lin, tfc + tres + zeros)
        out_ts = [ad.add_tangents(a, b) for a, b in zip(out_ts, t2)]
    return outs, out_ts


def _linear_call_batch(axis_data, vals, dims, *, callee, transpose, num_callee_consts,
                       num_transpose_consts, num_res):
    vals, dims = _move0(vals, dims)
    avals = [get_aval(v) for v in vals]
    split = lambda xs: _split4(xs, num_callee_consts, num_transpose_consts, num_res)  # noqa
    fc_d, tc_d, res_d, lin_d = split(dims)
    fc_a, tc_a, res_a, lin_a = split(avals)
    bcallee, out_dims = batching.batch_jaxpr(callee, axis_data, fc_a + res_a + lin_a,
                                          fc_d + res_d + lin_d)
    btrans = _batch_forced(transpose, axis_data, tc_a + res_a + list(bcallee.out_avals),
                           tc_d + res_d + list(out_dims), lin_d)
    outs = linear_call_p.bind(*vals, callee=bcallee, transpose=btrans,
                              num_callee_consts=num_callee_consts,
                              num_transpose_consts=num_transpose_consts, num_res=num_res)
    return outs, out_dims


linear_call_p = define("linear_call", multiple_results=True, impl=_linear_call_impl,
                       abstract_eval=_linear_call_abstract_eval,
                       lowering=_linear_call_lowering, jvp=_linear_call_jvp,
                       transpose=_linear_call_transpose, batching=_linear_call_batch)


def linear_call(fun, fun_transpose, residual_args, linear_args):
    """Call fun(residual_args, linear_args), linear in linear_args, with a custom
    transpose: transposing gives fun_transpose(residual_args, cotangent), whose own
    transpose is `fun` again."""
    res_flat, res_tree = tree_flatten(residual_args)
    lin_flat, lin_tree = tree_flatten(linear_args)
    _check_leaves(res_flat, "linear_call residual_args")
    _check_leaves(lin_flat, "linear_call linear_args")
    res_avals = [get_aval(x) for x in res_flat]
    lin_avals = [get_aval(x).strip_weak_type() for x in lin_flat]
    nres = len(res_flat)
    store = {}

    def f_flat(*xs):
        out = fun(tree_unflatten(res_tree, xs[:nres]), tree_unflatten(lin_tree, xs[nres:]))
        leaves, store["out_tree"] = tree_flatten(out)
        _check_leaves(leaves, f"The outputs of linear_call function {_name(fun)}")
        return leaves

    callee, f_consts = _stage(f_flat, res_avals + lin_avals)
    out_tree = store["out_tree"]
    out_avals = [a.strip_weak_type() for a in callee.out_avals]
    t_name = _name(fun_transpose)

    def t_flat(*xs):
        out = fun_transpose(tree_unflatten(res_tree, xs[:nres]),
                            tree_unflatten(out_tree, xs[nres:]))
        leaves, tree = tree_flatten(out)
        if tree != lin_tree:
            raise TypeError(
                f"linear_call transpose {t_name} must produce an output with the container "
                f"(pytree) structure of the linear inputs, but got output structure {tree} "
                f"and linear input structure {lin_tree}.")
        _check_leaves(leaves, f"The outputs of linear_call transpose {t_name}")
        bad = [f"  leaf {i}: transpose gives {_aval_str(get_aval(x))}, linear input is "
               f"{_aval_str(a)}" for i, (x, a) in enumerate(zip(leaves, lin_avals))
               if get_aval(x).shape != a.shape]
        if bad:
            raise TypeError(f"linear_call transpose {t_name} must produce outputs with the "
                            "shapes of the linear inputs, but got:\n" + "\n".join(bad))
        return [x if get_aval(x).dtype == a.dtype and not get_aval(x).weak_type
                else convert_element_type(x, a.dtype) for x, a in zip(leaves, lin_avals)]

    transpose, t_consts = _stage(t_flat, res_avals + out_avals)
    outs = linear_call_p.bind(*f_consts, *t_consts, *res_flat, *lin_flat, callee=callee,
                              transpose=transpose, num_callee_consts=len(f_consts),
                              num_transpose_consts=len(t_consts), num_res=nres)
    return tree_unflatten(out_tree, outs)


# ========================================================================== custom_vmap



def _custom_vmap_call_batch(axis_data, vals, dims, *, call, rule, num_consts, name):
    size = axis_data.size
    vals, dims = _move0(vals, dims)
    if any(d is not None for d in dims[:num_consts]):
        # A closed-over value is batched: the rule cannot see it, so batch the program.
        bcall, out_dims = batching.batch_jaxpr(call, axis_data, [get_aval(v) for v in vals], dims)
        return _eval_program(bcall, vals), out_dims
    args = vals[num_consts:]
    in_batched = [d is not None for d in dims[num_consts:]]
    outs, out_batched = rule(size, in_batched, vals[:num_consts], args, axis_data.name)
    for i, (o, b, a) in enumerate(zip(outs, out_batched, call.out_avals)):
        shape = get_aval(o).shape
        want = (size,) + a.shape if b else a.shape
        if shape != want:
            raise TypeError(f"custom_vmap rule of {name} produced output {i} of shape {shape}, "
                            f"but the output is {'batched' if b else 'unbatched'} so its shape "
                            f"should be {want}")
    return list(outs), [0 if b else None for b in out_batched]


def _custom_vmap_tangent_program(call, nonzeros, num_consts):
    """The tangent half of jvp(call): (consts, args, nonzero tangents) -> tangents."""
    key = ("cvmap_tangent", tuple(nonzeros))
    hit = call._cache.get(key)
    if hit is not None:
        return hit
    n = len(nonzeros)
    t_avals = [ad.tangent_aval(a) for a, nz in zip(call.in_avals, nonzeros) if nz]
    box = {}

    def fun(*xs):
        it = iter(xs[n:])
        ts = [next(it) if nz else Zero(ad.tangent_aval(a))
              for a, nz in zip(call.in_avals, nonzeros)]
        _, out_ts = ad.jvp_flat(_jaxpr_fun(call), list(xs[:n]), ts)
        box["out_nonzero"] = [type(t) is not Zero for t in out_ts]
        return [t for t in out_ts if type(t) is not Zero]

    prog = pe.make_closed_jaxpr(fun, list(call.in_avals) + t_avals)
    call._cache[key] = hit = (prog, box["out_nonzero"])
    return hit


def _custom_vmap_call_jvp(primals, tangents, *, call, rule, num_consts, name):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise TypeError(f"custom_vmap function {name} was differentiated with respect to a "
                        "value it closes over; pass that value as an argument instead")
    outs = custom_vmap_call_p.bind(*primals, call=call, rule=rule, num_consts=num_consts,
                                   name=name)
    nonzeros = [type(t) is not Zero for t in tangents]
    tprog, out_nonzero = _custom_vmap_tangent_program(call, nonzeros, num_consts)
    if not any(out_nonzero):
        return outs, [Zero(ad.tangent_aval(a)) for a in call.out_avals]
    arg_nz = nonzeros[num_consts:]
    n_args = len(arg_nz)
    arg_avals = call.in_avals[num_consts:]
    out_avals = call.out_avals

    def tangent_rule(size, in_batched, consts, vals, axis_name):
        args, ts = list(vals[:n_args]), list(vals[n_args:])
        p_b, t_b = in_batched[:n_args], in_batched[n_args:]
        tb_full, it = [], iter(t_b)
        for nz in arg_nz:
            tb_full.append(next(it) if nz else False)
        flags = [pb or tb for pb, tb in zip(p_b, tb_full)]
        args = [batching.broadcast_batch(a, size, 0) if f and not pb else a
                for a, f, pb in zip(args, flags, p_b)]
        it = iter(zip(ts, t_b))
        full_ts = []
        for a, nz, f in zip(arg_avals, arg_nz, flags):
            if nz:
                t, tb = next(it)
                full_ts.append(batching.broadcast_batch(t, size, 0) if f and not tb else t)
            else:
                shape = ((size,) if f else ()) + a.shape
                full_ts.append(Zero(ad.tangent_aval(a.update(shape=shape))))
        box = {}

        def primal_rule(*xs):
            o, ob = rule(size, flags, consts, list(xs), axis_name)
            box["ob"] = ob
            return o

        _, out_ts = ad.jvp_flat(primal_rule, args, full_ts)
        ob = box["ob"]
        res, res_b = [], []
        for t, b, a, nz in zip(out_ts, ob, out_avals, out_nonzero):
            if not nz:
                continue
            if type(t) is Zero:
                t = core.ops.zeros(ad.tangent_aval(a.update(shape=((size,) if b else ())
                                                            + a.shape)))
            res.append(t)
            res_b.append(b)
        return res, res_b

    nz_ts = [t for t in tangents if type(t) is not Zero]
    t_outs = custom_vmap_call_p.bind(*primals, *nz_ts, call=tprog, rule=tangent_rule,
                                     num_consts=num_consts, name=f"jvp({name})")
    it = iter(t_outs)
    out_ts = [next(it) if nz else Zero(ad.tangent_aval(a))
              for nz, a in zip(out_nonzero, out_avals)]
    return outs, out_ts


def _custom_vmap_call_transpose(cts, *args, call, rule, num_consts, name):
    # The tangent call is linear in its tangent operands: transpose its program.
    return ad.backward_pass(call.jaxpr, call.consts, args, cts)


custom_vmap_call_p = define("custom_vmap_call", **_program_call_rules("custom_vmap_call"),
                            jvp=_custom_vmap_call_jvp, transpose=_custom_vmap_call_transpose,
                            batching=_custom_vmap_call_batch)


def _accepts_axis_name(fn):
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "axis_name" or p.kind is p.VAR_KEYWORD for p in params)


class custom_vmap:
    """A function with a user batching rule, as jax.custom_batching.custom_vmap:
    rule(axis_size, in_batched, *args) -> (out, out_batched). A rule that accepts an
    `axis_name` keyword also gets the name of the vmapped axis. Differentiation (jvp,
    grad, linearize) differentiates through the rule and the function."""

    def __init__(self, fun):
        self.fun = fun
        self.vmap_rule = None
        functools.update_wrapper(self, fun)

    def def_vmap(self, rule):
        if not callable(rule):
            raise TypeError(f"def_vmap of {_name(self.fun)} expects a callable, got "
                            f"{type(rule).__name__}")
        self.vmap_rule = rule
        return rule

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        if self.vmap_rule is None:
            raise MissingCustomRuleError(
                f"No batching rule defined for custom_vmap function {name}: define it with "
                f"{name}.def_vmap(rule) before calling it.")
        args = _resolve_kwargs(self.fun, args, kwargs)
        if _eager():
            return self.fun(*args)
        flat, in_tree = tree_flatten(args)
        _check_leaves(flat, f"The arguments of custom_vmap function {name}")
        store = {}
        fun, user_rule = self.fun, self.vmap_rule
        pass_name = _accepts_axis_name(user_rule)

        def flat_fun(*leaves):
            out = fun(*tree_unflatten(in_tree, leaves))
            out_leaves, store["out_tree"] = tree_flatten(out)
            _check_leaves(out_leaves, f"The outputs of custom_vmap function {name}")
            return out_leaves

        program, consts = _stage(flat_fun, [get_aval(x) for x in flat])
        out_tree = store["out_tree"]
        rule_name = _name(user_rule)

        def flat_rule(size, in_batched, const_vals, vals, axis_name):
            return _call_substituted(consts, const_vals, flat_rule_, size, in_batched, vals,
                                     axis_name)

        def flat_rule_(size, in_batched, vals, axis_name):
            py_args = tree_unflatten(in_tree, list(vals))
            py_batched = tree_unflatten(in_tree, list(in_batched))
            kw = {"axis_name": axis_name} if pass_name else {}
            pair = user_rule(size, list(py_batched), *py_args, **kw)
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"custom_vmap rule {rule_name} of {name} must return a pair "
                                f"(outputs, out_batched), but got {_describe(pair)}.")
            o_leaves, o_tree = tree_flatten(pair[0])
            if o_tree != out_tree:
                raise TypeError(f"custom_vmap rule {rule_name} of {name} must return outputs "
                                f"with the structure of the function's output {out_tree}, "
                                f"but got {o_tree}.")
            try:
                b_leaves = _broadcast_prefix(pair[1], o_tree)
            except ValueError:
                raise TypeError(f"custom_vmap rule {rule_name} of {name} must return "
                                "out_batched as a pytree of bools matching the outputs "
                                f"{out_tree}, but got {pair[1]!r}.") from None
            return list(o_leaves), [bool(b) for b in b_leaves]

        outs = custom_vmap_call_p.bind(*consts, *flat, call=program, rule=flat_rule,
                                       num_consts=len(consts), name=name)
        return tree_unflatten(out_tree, outs)


def _broadcast_prefix(prefix, tree):
    """Leaves of `prefix` (a tree prefix of `tree`) repeated for each leaf of `tree`."""
    proxy = tree_unflatten(tree, [object()] * tree.num_leaves)
    out = []

    def add(p, sub):
        if not isinstance(p, (bool, np.bool_)):
            raise ValueError
        out.extend([p] * len(tree_util.tree_leaves(sub)))

    tree_util.tree_map(add, prefix, proxy)
    if len(out) != tree.num_leaves:
        raise ValueError
    return out
