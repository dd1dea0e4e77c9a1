"""Staging Python functions into the IR, and partial evaluation for linearize.

`JaxprTrace` records each primitive applied to its tracers as an equation. Values
that are not its own tracers (concrete arrays, tracers of outer transformations) are
captured as constvars. With `forward_known=True` an equation none of whose inputs is
one of its tracers is not staged but sent to the parent trace: this splits a
computation into the part that can run now (known) and the part that depends on the
staged inputs (unknown). Linearize uses it to stage only the tangent computation.
"""
from __future__ import annotations

import jax
import numpy as np

from impl import core
from impl.core import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, ShapedArray, Tracer, Var,
                       get_aval)

# Rules for primitives that must be split rather than staged whole when some of their
# inputs are known and some unknown (call-like primitives):
#   rule(trace, tracers_or_values, **params) -> outputs (known values or tracers)
partial_eval_rules: dict = {}
# Rules for equations that dead-code removal may rewrite when only some of their
# outputs are used: rule(used_outputs, eqn) -> the equation to keep.
dce_rules: dict = {}
# Primitives whose dce rule is asked also when every output is used (remat_opt: with
# no residual among its outputs, the primal function replaces fwd).
dce_fully_used: set = set()
# How a checkpoint's known half evaluates a primitive whose outputs its policy does not
# save: rule(trace, args, **params) -> outputs (known values, or the trace's tracers
# for what only the recomputation computes), or None to evaluate it as usual.
recomputed_known_rules: dict = {}
# How staging answers a primitive without recording an equation, as JAX's forwarding
# and constant-folding rules do (a conversion to its operand's own type is the operand;
# of a scalar constant, a literal of the new type):
#   rule(trace, args, **params) -> outputs (the trace's tracers), or None to stage it.
staging_rules: dict = {}
# Primitives with side effects (host callbacks): dead-code removal keeps them.
effectful: set = set()
# Effectful primitives a checkpoint's recomputation runs again unless its policy saves
# them (debug prints): RecomputingTrace stages them into the recomputation as well.
replayed_by_remat: set = set()


class DynamicJaxprTracer(Tracer):
    __slots__ = ("var",)

    def __init__(self, trace, var):
        self._trace = trace
        self.var = var

    @property
    def aval(self):
        return self.var.aval

    def __repr__(self):   # a value being staged, as JAX names it under jit
        return f"JitTracer({self.aval})"


def _is_literal_scalar(x):
    # Scalar constants are written into the program (as JAX does), so XLA sees them as
    # constants wherever the program is compiled, not as arguments of a call.
    return (type(x) in (int, float, bool, complex) or isinstance(x, np.generic)
            or (type(x) is np.ndarray and x.ndim == 0)
            or (isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)
                and x.ndim == 0))


class JaxprTrace(core.Trace):
    """Stages equations. `literal_arrays=False` keeps rank-0 jax arrays as constants
    rather than literals (only Python and NumPy scalars are written inline): linearize's
    residuals are values computed on the way, which its result exposes as pytree leaves."""
    __slots__ = ("eqns", "invars", "constvars", "consts", "const_ids", "forward_known",
                 "literal_arrays")

    def __init__(self, parent, forward_known=False, literal_arrays=True):
        super().__init__(parent)
        self.eqns = []
        self.invars = []
        self.constvars = []
        self.consts = []
        self.const_ids = {}
        self.forward_known = forward_known
        self.literal_arrays = literal_arrays

    def new_arg(self, aval):
        var = Var(aval)
        self.invars.append(var)
        return DynamicJaxprTracer(self, var)

    def is_own(self, x):
        return isinstance(x, DynamicJaxprTracer) and x._trace is self

    def get_var(self, x):
        if isinstance(x, DynamicJaxprTracer) and x._trace is self:
            return x.var
        if isinstance(x, Tracer):
            self.check_alive(x)
        elif _is_literal_scalar(x) and (self.literal_arrays
                                        or not isinstance(x, jax.Array)):
            return Literal(x, get_aval(x))
        key = id(x)
        var = self.const_ids.get(key)
        if var is None:
            var = self.const_ids[key] = Var(get_aval(x))
            self.constvars.append(var)
            self.consts.append(x)
        return var

    def forwards_to(self, args):
        if self.forward_known and not any(self.is_own(x) for x in args):
            return self.parent
        return None

    def instantiate(self, x):
        """`x` as one of this trace's tracers (a known value becomes a constant)."""
        return x if self.is_own(x) else DynamicJaxprTracer(self, self.get_var(x))

    def scalar_constant(self, x):
        """The value of `x` when it is a rank-0 constant of the program being staged (a
        literal, Python or NumPy scalar or concrete array), else None."""
        if self.is_own(x):
            return x.var.val if type(x.var) is Literal else None
        if isinstance(x, Tracer) or np.ndim(x) != 0:
            return None
        return x

    def new_literal(self, value, aval):
        return DynamicJaxprTracer(self, Literal(value, aval))

    def bind_known(self, prim, args, params):
        """Run `prim` on known values: on the parent trace. Partial-evaluation rules
        bind the known half of a split primitive through this method."""
        with core.set_current_trace(self.parent):
            return prim.bind(*args, **params)

    def process_primitive(self, prim, args, params):
        if self.forward_known:
            if not any(isinstance(x, DynamicJaxprTracer) and x._trace is self for x in args):
                return self.bind_known(prim, args, params)
            rule = partial_eval_rules.get(prim)
            if rule is not None:
                return rule(self, args, **params)
        for x in args:
            if isinstance(x, Tracer) and not isinstance(x, DynamicJaxprTracer):
                self.check_alive(x)
        return self.stage(prim, args, params)

    def stage(self, prim, args, params):
        """Record `prim` applied to `args` (own tracers or constants) as an equation,
        unless the primitive's staging rule answers without one."""
        rule = staging_rules.get(prim)
        if rule is not None:
            out = rule(self, args, **params)
            if out is not None:
                return out
        invars = [self.get_var(x) for x in args]
        out_avals = core.abstract_eval(prim, [v.aval for v in invars], params)
        return self.add_eqn(prim, invars, out_avals, params)

    def add_eqn(self, prim, invars, out_avals, params):
        if prim.multiple_results:
            outvars = [Var(a) for a in out_avals]
            self.eqns.append(JaxprEqn(prim, invars, outvars, params))
            return [DynamicJaxprTracer(self, v) for v in outvars]
        outvar = Var(out_avals)
        self.eqns.append(JaxprEqn(prim, invars, [outvar], params))
        return DynamicJaxprTracer(self, outvar)

    def to_closed_jaxpr(self, outs, dce=True) -> ClosedJaxpr:
        outvars = [self.get_var(x) for x in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, outvars, self.eqns)
        if not dce:
            return ClosedJaxpr(jaxpr, self.consts)
        jaxpr = drop_unused_eqns(jaxpr)
        # Constants only dropped equations used are dropped too (fewer residuals).
        used = {v.id for e in jaxpr.eqns for v in e.invars if type(v) is Var}
        used.update(v.id for v in jaxpr.outvars if type(v) is Var)
        keep = [v.id in used for v in self.constvars]
        if all(keep):
            return ClosedJaxpr(jaxpr, self.consts)
        constvars = [v for v, k in zip(self.constvars, keep) if k]
        consts = [c for c, k in zip(self.consts, keep) if k]
        return ClosedJaxpr(Jaxpr(constvars, jaxpr.invars, jaxpr.outvars, jaxpr.eqns), consts)


def has_effects(eqn) -> bool:
    """Whether `eqn` has a side effect, itself or in a program it holds (a jit body, a
    branch of cond, a loop body)."""
    if eqn.primitive in effectful:
        return True
    return any(has_effects(e) for p in eqn.params.values() for j in core.programs_in(p)
               for e in j.eqns)


def drop_unused_eqns(jaxpr: Jaxpr, keep_effects=True) -> Jaxpr:
    """Drop equations whose outputs nothing uses (except those with side effects, unless
    not `keep_effects`)."""
    live = {v.id for v in jaxpr.outvars if isinstance(v, Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        used = [v.id in live for v in eqn.outvars]
        if any(used) or (keep_effects and has_effects(eqn)):
            rule = dce_rules.get(eqn.primitive)
            if rule is not None and any(used) and (
                    not all(used) or eqn.primitive in dce_fully_used):
                eqn = rule(used, eqn)
            kept.append(eqn)
            live.update(v.id for v in eqn.invars if isinstance(v, Var))
    kept.reverse()
    if len(kept) == len(jaxpr.eqns) and all(a is b for a, b in zip(kept, jaxpr.eqns)):
        return jaxpr
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, kept)


def dce_closed_jaxpr(closed: ClosedJaxpr, used_outputs, keep_inputs=False):
    """The program computing only the outputs flagged in `used_outputs`, without the
    inputs it no longer reads (except those flagged in `keep_inputs`, a bool or one
    flag per input: a loop keeps a carry's input with its output). Returns it with
    the flags of the inputs kept. Rules of primitives holding programs use this to
    drop what nothing downstream reads."""
    j = closed.jaxpr
    keep = core.bools_per(keep_inputs, len(j.invars))
    body = drop_unused_eqns(Jaxpr(j.constvars, j.invars,
                           [v for v, u in zip(j.outvars, used_outputs) if u], j.eqns))
    read = {v.id for e in body.eqns for v in e.invars if type(v) is Var}
    read.update(v.id for v in body.outvars if type(v) is Var)
    used_inputs = [k or v.id in read for v, k in zip(j.invars, keep)]
    invars = [v for v, u in zip(j.invars, used_inputs) if u]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, body.outvars, body.eqns),
                       closed.consts), used_inputs


def dce_jaxpr(jaxpr: Jaxpr, used_outputs, instantiate=False) -> tuple[Jaxpr, list]:
    """JAX's signature: the program computing only the outputs flagged in
    `used_outputs`, without the inputs it no longer reads (unless `instantiate`, a bool
    or one flag per input, keeps them), and the flags of the inputs kept."""
    closed, used_inputs = dce_closed_jaxpr(ClosedJaxpr(jaxpr, ()), used_outputs,
                                           instantiate)
    return closed.jaxpr, used_inputs


def close_jaxpr(jaxpr: Jaxpr) -> ClosedJaxpr:
    """A program without constvars as a closed program (JAX's name)."""
    return ClosedJaxpr(jaxpr, ())


def trace_to_jaxpr(fun, in_avals, *, forward_known=False, dce=True
                   ) -> tuple[ClosedJaxpr, list]:
    """Stage `fun(*tracers)` (a function of flat arrays returning a flat list).

    Returns the closed program and the raw outputs (tracers or constants). With
    `dce=False` equations nothing uses stay in the program, as the user wrote them
    (what jit and make_jaxpr show)."""
    trace = JaxprTrace(core.current_trace(), forward_known=forward_known)
    with core.new_trace(trace):
        args = [trace.new_arg(a) for a in in_avals]
        outs = fun(*args)
        closed = trace.to_closed_jaxpr(outs, dce=dce)
    return closed, outs


def make_closed_jaxpr(fun, in_avals) -> ClosedJaxpr:
    return trace_to_jaxpr(fun, in_avals)[0]


def programs_of(table, fn) -> dict:
    """The programs already staged from the user's function `fn` (a dict, by whatever
    key the caller gives their types), kept in `table` (a WeakKeyDictionary: they live
    as long as fn); an empty dict, not kept, when fn cannot be weakly referenced."""
    try:
        return table.setdefault(fn, {})
    except TypeError:
        return {}


def convert_constvars_to_invars(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Move the constants of a program to leading arguments (closure conversion)."""
    jaxpr = closed.jaxpr
    open_jaxpr = Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns)
    return ClosedJaxpr(open_jaxpr, []), list(closed.consts)


class RecomputingTrace(JaxprTrace):
    """A partial-evaluation trace that remembers how each known value was computed.

    When staged work needs a known value, `saveable(prim, *in_avals, **params)` decides
    between keeping it (it becomes a residual) and computing it again inside the staged
    program from its own inputs: this is how checkpoint policies choose residuals."""

    __slots__ = ("saveable", "recipes", "replayed", "computed")

    def __init__(self, parent, saveable):
        super().__init__(parent, forward_known=True)
        self.saveable = saveable
        self.recipes = {}    # id(known value) -> (prim, args, params, outs, index)
        self.replayed = {}   # id(known value) -> Var of its recomputation
        self.computed = {}   # id(known value) -> the value, for each computed here

    def forwards_to(self, args):
        return None   # known values are recorded here (recipes), not only passed on

    def bind_known(self, prim, args, params):
        rule = recomputed_known_rules.get(prim)
        if rule is not None and not self.saveable(prim, *[get_aval(a) for a in args],
                                                  **params):
            outs = rule(self, args, **params)
            if outs is not None:
                return outs
        outs = super().bind_known(prim, args, params)
        flat = outs if prim.multiple_results else [outs]
        if prim in replayed_by_remat and (
                not self.saveable(prim, *[get_aval(a) for a in args], **params)
                or all(self._available_to_staged(a) for a in args)):
            # shown again by the recomputation too, as JAX's debug prints are: unless
            # the policy saves it and it would need values the recomputation lacks
            self.eqns.append(JaxprEqn(prim, [self.get_var(a) for a in args],
                                      [Var(get_aval(o)) for o in flat], params))
        arg_ids = {id(a) for a in args}
        for i, o in enumerate(flat):
            if id(o) not in arg_ids:
                self.computed[id(o)] = o
                if not _is_literal_scalar(o):
                    self.recipes[id(o)] = (prim, args, params, flat, i)
        return outs

    def _available_to_staged(self, x):
        """Whether staged work can read `x` without saving a residual computed here: an
        input (or constant), or a value already recomputed."""
        return self.is_own(x) or id(x) not in self.computed or id(x) in self.replayed

    def get_var(self, x):
        if self.is_own(x):
            return x.var
        var = self.replayed.get(id(x))
        if var is not None:
            return var
        recipe = self.recipes.get(id(x))
        if recipe is None:
            return super().get_var(x)
        prim, args, params, outs, i = recipe
        if self.saveable(prim, *[get_aval(a) for a in args], **params):
            return super().get_var(x)
        invars = [self.get_var(a) for a in args]
        outvars = [Var(get_aval(o)) for o in outs]
        self.eqns.append(JaxprEqn(prim, invars, outvars, params))
        for o, v in zip(outs, outvars):
            self.replayed[id(o)] = v
        return outvars[i]


def split_evaluate(closed: ClosedJaxpr, known_args, unknown_avals, in_unknowns, *,
                   instantiate=False, saveable=None):
    """Run the known half of `closed` on the current trace and stage the rest.

    Returns (known outputs (None where unknown), out_unknowns, staged, residuals):
    `staged` maps residuals followed by the unknown inputs to the unknown outputs.
    `instantiate` (a bool or one per output) makes outputs unknown even when known;
    `saveable` (a checkpoint policy) recomputes the known values it does not save.
    """
    inst = core.bools_per(instantiate, len(closed.out_avals))
    parent = core.current_trace()
    inner = (JaxprTrace(parent, forward_known=True) if saveable is None
             else RecomputingTrace(parent, saveable))
    with core.new_trace(inner):
        unknown_args = [inner.new_arg(a) for a in unknown_avals]
        it_k, it_u = iter(known_args), iter(unknown_args)
        args = [next(it_u) if u else next(it_k) for u in in_unknowns]
        outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
        outs = [inner.instantiate(o) if i else o for o, i in zip(outs, inst)]
        out_unknowns = [inner.is_own(o) for o in outs]
        staged = inner.to_closed_jaxpr([o for o, u in zip(outs, out_unknowns) if u])
    staged_open, residuals = convert_constvars_to_invars(staged)
    known_outs = [None if u else o for o, u in zip(outs, out_unknowns)]
    return known_outs, out_unknowns, staged_open, residuals


def partial_eval_jaxpr(closed: ClosedJaxpr, in_unknowns, instantiate=False, saveable=None):
    """Split a program into a known part and an unknown part.

    Returns (known, unknown, out_unknowns, num_res): `known` maps the known inputs to
    the known outputs followed by residuals; `unknown` maps residuals followed by the
    unknown inputs to the unknown outputs. `instantiate` and `saveable` are as in
    `split_evaluate`.
    """
    avals = closed.in_avals
    known_avals = [a for a, u in zip(avals, in_unknowns) if not u]
    unknown_avals = [a for a, u in zip(avals, in_unknowns) if u]
    box = {}

    def known_fun(*known_args):
        outs, out_unknowns, staged, residuals = split_evaluate(
            closed, known_args, unknown_avals, in_unknowns, instantiate=instantiate,
            saveable=saveable)
        box.update(out_unknowns=out_unknowns, unknown=staged, num_res=len(residuals))
        return [o for o, u in zip(outs, out_unknowns) if not u] + residuals

    known = make_closed_jaxpr(known_fun, known_avals)
    return known, box["unknown"], box["out_unknowns"], box["num_res"]


def reorder_jaxpr(closed: ClosedJaxpr, in_order=None, out_order=None) -> ClosedJaxpr:
    """The same program with its inputs (outputs) listed in the order of the indices
    `in_order` (`out_order`); loops need their carries in a fixed place."""
    j = closed.jaxpr
    invars = j.invars if in_order is None else [j.invars[i] for i in in_order]
    outvars = j.outvars if out_order is None else [j.outvars[i] for i in out_order]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, outvars, j.eqns), closed.consts)


def forwarded_inputs(closed: ClosedJaxpr) -> list:
    """For each output of `closed`, the position of the input it returns unchanged, or
    None."""
    j = closed.jaxpr
    position = {v.id: i for i, v in enumerate(j.invars)}
    return [position.get(v.id) if type(v) is Var else None for v in j.outvars]


def add_unused_inputs(closed: ClosedJaxpr, avals, at=None) -> ClosedJaxpr:
    """The same program taking extra inputs of types `avals` that it ignores, inserted
    at position `at` (appended by default)."""
    j = closed.jaxpr
    at = len(j.invars) if at is None else at
    invars = j.invars[:at] + [Var(a) for a in avals] + j.invars[at:]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.outvars, j.eqns), closed.consts)
