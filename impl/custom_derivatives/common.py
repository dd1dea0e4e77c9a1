"""What the custom-rule APIs share.

* `CustomRuleFunction`: the base of custom_jvp, custom_vjp and custom_vmap objects (a
  wrapped Python function, nondiff arguments, method binding, and JAX's forwarding of
  `def*` attributes to a wrapped custom function, which is how rules of nested custom
  functions are defined: `custom_jvp(custom_vmap(f)).def_vmap(...)`).
* `ArgLayout`: how positional arguments map to the flat operands of a primitive.
* `stage`: a flat Python function to a program whose constants are leading inputs, so
  that the values a function closes over travel as operands of the primitive.
* `call_substituted`: running a user rule at another level than the one it was
  created at. A rule is a Python closure over the values its function saw; when a
  transformation later runs it (a vmap wrapping it in a new vmap, a jit program being
  differentiated after its trace ended), `SubstitutionTrace` replaces those values by
  their current counterparts, the operands the primitive carries for them.
* evaluation, abstract evaluation and lowering of primitives that carry their primal
  program as the `call_jaxpr` parameter.
* `SymbolicZero` (what rules see of a zero tangent) and the conversions between it,
  impl's internal `Zero` and arrays; running a rule under a new vmap
  (`batch_flat_rule`) and fixing its output batch dims (`BatchedOutDims`).
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
from impl.primitives.elementwise import convert_element_type

tree_flatten = tree_util.tree_flatten
tree_unflatten = tree_util.tree_unflatten


# ----------------------------------------------------------------------- naming

def name_of(fun):
    return getattr(fun, "__name__", type(fun).__name__)


def named_as(fn, user_fn):
    """`fn`, a flat wrapper of the user's rule `user_fn`, named as it: programs print a
    rule parameter by its function's name, which is the user's in JAX."""
    fn.__name__ = name_of(user_fn)
    return fn


def printed_call_params(eqn, namer):
    """A custom call's parameters as JAX prints them: `name` first, then the others in
    name order; the count of closed-over constants among the operands, which JAX keeps
    in its program instead, only when there are some."""
    p = eqn.params
    return [("name", p["name"])] + sorted(
        (k, v) for k, v in p.items() if k != "name" and (k != "num_consts" or v))


def type_str(aval):
    """An abstract value as JAX's error messages spell it (float32[3])."""
    dtype = "float0" if aval.dtype == float0 else aval.dtype.name
    return f"{dtype}[{','.join(map(str, aval.shape))}]"


def is_eager():
    return core.current_trace() is core.eval_trace


def is_float(aval):
    return core.is_float_dtype(aval.dtype)


# ------------------------------------------------------------------- arguments

def resolve_kwargs(fun, args, kwargs, api):
    """Keyword arguments (and defaults) become positional ones, as JAX resolves them."""
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        if kwargs:
            raise TypeError(f"The input arguments to the {api}-decorated function "
                            f"{name_of(fun)} could not be resolved to positional-only "
                            "arguments: its signature cannot be inspected.") from None
        return tuple(args)
    try:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        unresolved = [k for k in bound.kwargs if k in kwargs]
        if unresolved:
            raise TypeError("The following keyword arguments could not be resolved to "
                            f"positions: {', '.join(unresolved)}")
    except TypeError as e:
        raise TypeError(f"The input arguments to the {api}-decorated function "
                        f"{name_of(fun)} could not be resolved to positional-only "
                        f"arguments. Binding failed with the error:\n{e}") from None
    return tuple(bound.args)


def nondiff_positions(fun, nondiff_argnums, nondiff_argnames, api):
    """The sorted positions named by nondiff_argnums and nondiff_argnames."""
    if isinstance(nondiff_argnums, int):
        nondiff_argnums = (nondiff_argnums,)
    if isinstance(nondiff_argnames, str):
        nondiff_argnames = (nondiff_argnames,)
    positions = set()
    for i in nondiff_argnums:
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            raise TypeError(f"{api}: nondiff_argnums must be integers, got {i!r}")
        positions.add(int(i))
    if nondiff_argnames:
        params = list(inspect.signature(fun).parameters.values())
        by_name = {p.name: i for i, p in enumerate(params)
                   if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)}
        for name in nondiff_argnames:
            if name not in by_name:
                raise ValueError(f"{api}: nondiff_argnames names {name!r}, which is not a "
                                 f"positional parameter of {name_of(fun)} (parameters: "
                                 f"{list(by_name)})")
            positions.add(by_name[name])
    return tuple(sorted(positions))


def check_jaxtypes(leaves, where):
    for x in leaves:
        if not core.valid_jaxtype(x):
            raise TypeError(f"{where}: argument {x!r} of type {type(x)} is not a valid "
                            "JAX type (arrays, scalars or pytrees of them are).")


_PY_SCALARS = (bool, int, float, complex)


class ArgLayout:
    """How positional arguments map to the flat operands of a custom primitive.

    Leaves of differentiable arguments are operands. Leaves of nondiff arguments are
    operands when they are arrays or tracers (`nondiff_operands`, never differentiated)
    and stay static Python values otherwise: Python scalars too, as shapes or other
    static parameters of the function, as in JAX."""

    def __init__(self, args, nondiff, where, nondiff_operands=True):
        self.nondiff = nondiff
        self.trees, self.kinds, self.static, self.operands = [], [], [], []
        for i, a in enumerate(args):
            leaves, tree = tree_flatten(a)
            kinds = []
            for x in leaves:
                if i in nondiff and not (nondiff_operands and core.valid_jaxtype(x)
                                         and not isinstance(x, _PY_SCALARS)):
                    kinds.append("static")
                    self.static.append(x)
                    continue
                if i not in nondiff and not core.valid_jaxtype(x):
                    raise TypeError(
                        f"{where}: argument {i} must be an array, a scalar or a pytree of "
                        f"them (or be marked in nondiff_argnums), but a leaf {x!r} has "
                        f"type {type(x)}, which is not a valid JAX type.")
                kinds.append("nondiff" if i in nondiff else "diff")
                self.operands.append(x)
            self.trees.append(tree)
            self.kinds.append(kinds)
        self.is_diff = [k == "diff" for ks in self.kinds for k in ks if k != "static"]

    def rebuild(self, operands):
        """The positional arguments, with `operands` in place of the operand leaves."""
        ops, static = iter(operands), iter(self.static)
        return [tree_unflatten(tree, [next(static) if k == "static" else next(ops)
                                      for k in kinds])
                for tree, kinds in zip(self.trees, self.kinds)]

    def split(self, args):
        """(nondiff arguments, differentiable arguments) of a rebuilt argument list."""
        return ([args[i] for i in self.nondiff],
                tuple(a for i, a in enumerate(args) if i not in self.nondiff))

    def diff_trees(self):
        return [t for i, t in enumerate(self.trees) if i not in self.nondiff]

    def diff_values(self, values):
        """Pytrees (one per differentiable argument) of per-operand `values`."""
        it = iter(v for v, d in zip(values, self.is_diff) if d)
        return tuple(tree_unflatten(tree, [next(it) for _ in range(tree.num_leaves)])
                     for tree in self.diff_trees())


# --------------------------------------------------------------- the wrapped function

class CustomRuleFunction:
    """A Python function plus user rules; it behaves like the function (also as a
    method), and forwards `def*` attributes to a wrapped custom function."""

    api = "custom function"

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)   # first: fun's __dict__ must not shadow ours
        self.fun = fun
        self.nondiff_argnums = nondiff_positions(fun, nondiff_argnums, nondiff_argnames,
                                                 self.api)

    def __getattr__(self, name):
        fun = self.__dict__.get("fun")
        if name.startswith("def") and fun is not None:
            return getattr(fun, name)
        raise AttributeError(f"{type(self).__name__} object has no attribute {name!r}")

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def _positional(self, args, kwargs):
        return resolve_kwargs(self.fun, args, kwargs, self.api)

    def _nondiff(self, args):
        n = len(args)
        bad = [i for i in self.nondiff_argnums if not -n <= i < n]
        if bad:
            raise ValueError(f"{self.api} function {name_of(self.fun)}: nondiff_argnums "
                             f"{bad} out of range for {n} arguments")
        return tuple(sorted({i % n for i in self.nondiff_argnums}))

    def _flat_primal(self, layout, what, store=None):
        """The function of the layout's operands, returning its output leaves (their
        tree goes to store["out_tree"])."""
        fun = self.fun

        def flat_fun(*ops):
            leaves, out_tree = tree_flatten(fun(*layout.rebuild(ops)))
            if store is not None:
                store["out_tree"] = out_tree
            check_jaxtypes(leaves, f"The outputs of {what}")
            return leaves
        return flat_fun

    def _stage_primal(self, layout, what):
        """Stage the function on the layout's operands: (program, consts, out_tree)."""
        store = {}
        program, consts = stage(self._flat_primal(layout, what, store),
                                [get_aval(x) for x in layout.operands])
        return program, consts, store["out_tree"]


# ------------------------------------------------------------ where a call lands

def landing(operands):
    """(trace, vmaps): where a custom call on `operands` would land if it were bound
    now, and the vmaps (BatchTraces, outermost first) it would be batched by on the
    way. Traces that would pass it on untransformed (`Trace.forwards_to`) are skipped,
    and so is a vmap, which would batch the call and bind it on its parent.

    Custom calls use it to do what JAX does: at the evaluation trace (with no vmap on
    the way) the function itself runs, on concrete values, so Python control flow on
    them works; at a JVP trace that perturbs an operand, under vmaps or not, only the
    user's rule runs, never the function (`DifferentiatedCall`); elsewhere (staging,
    evaluation under vmap, checkpoint policies) the function is staged and bound."""
    trace, vmaps = core.current_trace(), []
    while True:
        passed_to = trace.forwards_to(operands)
        if passed_to is not None:
            trace = passed_to
            continue
        if type(trace) is batching.BatchTrace:
            below = unbatched(trace, operands)
            if not any(type(d) is batching.ConcatAxis for _, d in below):   # not a pile
                vmaps.append(trace)
                operands = [v for v, _ in below]
                trace = trace.parent
                continue
        return trace, vmaps


def unbatched(trace, values):
    """(value, batch dim) at the parent of the vmap `trace` of each of `values` (dim
    None for values that are not its tracers)."""
    return [(x.val, x.batch_dim) if type(x) is batching.BatchTracer and x._trace is trace
            else (x, None) for x in values]


def run_at_eval(fun, args, kind, exc):
    """fun(*args) at the evaluation trace (where a custom call on no perturbed operand
    lands). A live tracer reaching evaluation there was closed over by the function:
    the value of a transformation that the call passed by, being differentiated."""
    try:
        with core.set_current_trace(core.eval_trace):
            return fun(*args)
    except core.UnexpectedTracerError as e:
        if isinstance(e, exc):
            raise
        raise closed_over_error(kind, name_of(fun), exc) from e


class DifferentiatedCall:
    """A custom call landing on the JVP trace `trace` through the vmaps `vmaps`
    (see `landing`), as its rule sees it, so that the rule runs where the call was
    made, without the function being staged.

    An operand at the call is a tower: a tracer of each vmap that batches it, around a
    JVP tracer (primal, tangent) of `trace`. `primals` and `tangents` are the same
    towers around the primal and around the tangent (a Zero where the operand is not
    perturbed): values the rule can compute with at the call's level, whose
    operations the JVP trace passes on. `join` builds an output tower back from the
    rule's primal and tangent outputs."""

    def __init__(self, trace, vmaps, operands, kind, name, exc):
        self.trace, self.vmaps = trace, vmaps
        self._error = (kind, name, exc)
        self.primals, self.tangents = [], []
        for x in operands:
            inner = self.innermost(x)
            if type(inner) is ad.JVPTracer and inner._trace is trace:
                self.primals.append(self._tower(x, inner.primal))
                self.tangents.append(self._tower(x, inner.tangent))
            else:
                self.primals.append(x)
                self.tangents.append(Zero(ad.tangent_aval(get_aval(x))))

    def innermost(self, x):
        """The value inside x's tracers of the vmaps (at the JVP trace's level)."""
        for vmap in self.vmaps:
            if type(x) is batching.BatchTracer and x._trace is vmap:
                x = x.val
        return x

    def _tower(self, x, inner, i=0):
        """x's tracers of the vmaps from the i-th on, around `inner`."""
        if i == len(self.vmaps):
            return inner
        vmap = self.vmaps[i]
        if type(x) is batching.BatchTracer and x._trace is vmap:
            return batching.BatchTracer(vmap, self._tower(x.val, inner, i + 1), x.batch_dim)
        return self._tower(x, inner, i + 1)

    def check_not_perturbed(self, values):
        """A value the rule computed that the JVP trace perturbs was computed from a
        perturbed value the rule closes over, which the rule cannot differentiate."""
        for x in values:
            inner = self.innermost(x)
            if type(inner) is ad.JVPTracer and inner._trace is self.trace:
                raise closed_over_error(*self._error)

    def join(self, primal, tangent):
        """The output whose primal and tangent (values at the call's level) are given."""
        self.check_not_perturbed([primal] if type(tangent) is Zero else [primal, tangent])
        if type(tangent) is Zero:
            return primal
        return self._join(primal, tangent, 0)

    def _join(self, p, t, i):
        if i == len(self.vmaps):
            return self.trace.wrap(p, t)
        vmap = self.vmaps[i]
        ((p, pd), (t, td)), size = unbatched(vmap, [p, t]), vmap.axis_data.size
        dim = td if pd is None else pd
        with core.set_current_trace(vmap.parent):
            p = p if pd == dim else match_batch(size, pd, dim, p)
            t = t if td == dim else match_batch(size, td, dim, t)
            return vmap.wrap(self._join(p, t, i + 1), dim)


# ---------------------------------------------------------------------- staging

def stage(flat_fun, avals):
    """Stage `flat_fun`; its constants (outer tracers included) become leading inputs.
    Returns (program, constants)."""
    closed, _ = pe.trace_to_jaxpr(flat_fun, avals)
    return pe.convert_constvars_to_invars(closed)


def eval_program(closed, args):
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def check_program_args(what, avals, expected):
    if len(avals) != len(expected) or any(a.shape != e.shape or a.dtype != e.dtype
                                          for a, e in zip(avals, expected)):
        raise TypeError(f"{what}: argument types {[type_str(a) for a in avals]} do not "
                        f"match the program's {[type_str(e) for e in expected]}")


def program_call_rules(prim_name):
    """Evaluation, abstract evaluation and lowering of a primitive whose `call_jaxpr`
    parameter is the staged primal program it applies to all of its operands."""
    def impl(*args, call_jaxpr, name, **_):
        return eval_program(call_jaxpr, args)

    def abstract_eval(*avals, call_jaxpr, name, **_):
        check_program_args(f"{prim_name} of {name}", avals, call_jaxpr.in_avals)
        return call_jaxpr.out_avals

    def lower(*args, call_jaxpr, **_):
        return lowering.eval_jaxpr_lowered(call_jaxpr.jaxpr, call_jaxpr.consts, args)

    return dict(multiple_results=True, impl=impl, abstract_eval=abstract_eval, lowering=lower,
                sharding_rule=core.TYPED_BY_ABSTRACT_EVAL, vma_rule=core.TYPED_BY_ABSTRACT_EVAL)


# ------------------------------------------------------- rules run at another level

class SubstitutionTrace(core.Trace):
    """Binds on its parent with some tracers replaced by other values:
    `replacement(tracer)` is the value standing for a tracer (the tracer itself when
    it is not replaced).

    Traces nested inside it may meet the replaced tracers even when the transformation
    that made them has finished (core's `stands_in_for`): they are placeholders that
    this trace replaces before anything reaches the level the rule runs at."""

    __slots__ = ("replacement",)

    def __init__(self, parent, replacement):
        super().__init__(parent)
        self.replacement = replacement

    def stands_in_for(self, tracer):
        return self.replacement(tracer) is not tracer

    def substitute(self, x):
        return self.replacement(x) if isinstance(x, Tracer) else x

    def process_primitive(self, prim, args, params):
        args = [self.substitute(a) for a in args]
        with core.set_current_trace(self.parent):
            return prim.bind(*args, **params)


def call_substituted(originals, values, fn, *args):
    """fn(*args) with the tracers among `originals` standing for `values`; returned
    leaves that are such tracers are replaced too."""
    mapping = {id(o): v for o, v in zip(originals, values)
               if isinstance(o, Tracer) and o is not v}
    if not mapping:
        return fn(*args)
    return _call_replacing(lambda t: mapping.get(id(t), t), fn, *args)


def call_in_vmap_of(closed_vmap, fn, *args):
    """fn(*args) at the current vmap, a rule closing over tracers of `closed_vmap` (a
    vmap the rule was made under, perhaps finished) being run batched again: each of
    them stands for the current vmap's tracer of the same value and batch dim."""
    vmap = core.current_trace()

    def replacement(t):
        if type(t) is batching.BatchTracer and t._trace is closed_vmap:
            return batching.BatchTracer(vmap, t.val, t.batch_dim)
        return t
    return _call_replacing(replacement, fn, *args)


def _call_replacing(replacement, fn, *args):
    trace = SubstitutionTrace(core.current_trace(), replacement)
    with core.set_current_trace(trace):
        out = fn(*args)
    return tree_util.tree_map(trace.substitute, out)


# ------------------------------------------------------------- zeros and batching

class SymbolicZero:
    """A tangent or cotangent known to be zero, passed to rules defined with
    symbolic_zeros=True in place of an array (and accepted from any rule). It has the
    zero's shape and dtype but is not an array, so array functions refuse it."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __repr__(self):
        return "SymbolicZero"

    @staticmethod
    def from_primal_value(val):
        return SymbolicZero(ad.tangent_aval(get_aval(val)))


def materialize(t):
    """A Zero made an array (float0 for the tangents of non-floats; weak types kept)."""
    if type(t) is not Zero:
        return t
    aval = t.aval
    if aval.dtype == float0:
        return np.zeros(aval.shape, float0)
    return core.ops.zeros(aval)


def zero_tangent_value(aval):
    """A materialised zero tangent for a primal of type `aval`."""
    return materialize(Zero(ad.tangent_aval(aval)))


def instantiate(t, primal_aval):
    return zero_tangent_value(primal_aval) if type(t) is Zero else t


def to_rule(t, symbolic_zeros):
    """A (co)tangent as a user rule receives it: a Zero becomes a SymbolicZero (rules
    defined with symbolic_zeros=True) or an array."""
    if type(t) is not Zero:
        return t
    return SymbolicZero(t.aval) if symbolic_zeros else materialize(t)


def from_rule(t):
    """A (co)tangent a user rule returned: a SymbolicZero becomes a Zero."""
    return Zero(t.aval) if type(t) is SymbolicZero else t


def move_batch_to_front(vals, dims):
    out = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(vals, dims)]
    return out, [None if d is None else 0 for d in dims]


def drop_axis(aval, dim):
    """The aval of one example of a value of type `aval` batched along `dim` (or None)."""
    if dim is None:
        return aval
    return aval.update(shape=aval.shape[:dim] + aval.shape[dim + 1:])


def match_batch(size, src, dst, x, sum_if_unbatched=False):
    """Move the batch axis of x (or of a Zero) from src to dst (None: unbatched). A
    batched value made unbatched is summed over the batch when `sum_if_unbatched` (the
    cotangent of an input that vmap broadcast)."""
    if type(x) is Zero:
        aval = drop_axis(x.aval, src)
        if dst is None:
            return Zero(aval)
        shape = list(aval.shape)
        shape.insert(dst, size)
        return Zero(aval.update(shape=tuple(shape)))
    if dst is None and src is not None:
        if sum_if_unbatched:
            return core.ops.reduce_sum(x, (src,))
        raise ValueError("a batched value where an unbatched one is required")
    return batching.matchaxis(size, src, dst, x)


def batch_flat_rule(fn, axis_data, vals, dims, closed_vmap=None):
    """Run fn(*vals) under a new vmap where `vals` have batch dims `dims`; Zero inputs
    stay symbolic (per-example Zeros). `closed_vmap`: a vmap whose tracers fn may close
    over (see `call_in_vmap_of`). Returns the outputs as (value, dim) pairs."""
    keep = [type(v) is not Zero for v in vals]

    def per_example(*xs):
        it = iter(xs)
        args = [next(it) if k else Zero(drop_axis(v.aval, d))
                for v, d, k in zip(vals, dims, keep)]
        if closed_vmap is None:
            return fn(*args)
        return call_in_vmap_of(closed_vmap, fn, *args)

    return batching.batch_with_dims(per_example, [v for v, k in zip(vals, keep) if k],
                                    [d for d, k in zip(dims, keep) if k],
                                    axis_data.size, axis_data.name,
                                    axis_data.spmd_name)


class BatchedOutDims:
    """The output batch dims of a custom call under vmap. Its batched program decides
    them, but a rule running while the call is bound may batch an output the program
    leaves unbatched (a tangent mixing in a batched value): that output then gets batch
    dim 0. Once the call has been staged (`staged = True`) they are fixed."""

    def __init__(self, dims, what):
        self.dims = list(dims)
        self.what = what
        self.staged = False

    def target(self, i, *dims):
        """The dim output i must have, given the dims the rule produced for it."""
        if self.dims[i] is None and any(d is not None for d in dims):
            if self.staged:
                raise ValueError(f"{self.what} under vmap produced a batched output {i} "
                                 "where the function's own output is not batched")
            self.dims[i] = 0
        return self.dims[i]


def closed_over_error(kind, name, exc):
    return exc(
        f"Detected differentiation of the {kind} function {name} with respect to a value it "
        f"closes over. The custom rule only says how to differentiate {name} with respect "
        "to its explicit arguments. Pass the value to the function as an argument (and "
        "adapt the rule), or use impl.closure_convert to hoist it into arguments.")


def describe(x):
    r = repr(x)
    return r if len(r) < 200 else r[:200] + "..."

