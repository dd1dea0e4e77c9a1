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


class JaxprTracer(Tracer):
    __slots__ = ("var",)

    def __init__(self, trace, var):
        self._trace = trace
        self.var = var

    @property
    def aval(self):
        return self.var.aval


def _is_literal_scalar(x):
    # Scalar constants are written into the program (as JAX does), so XLA sees them as
    # constants wherever the program is compiled, not as arguments of a call.
    return (type(x) in (int, float, bool, complex) or isinstance(x, np.generic)
            or (type(x) is np.ndarray and x.ndim == 0)
            or (isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)
                and x.ndim == 0))


class JaxprTrace(core.Trace):
    __slots__ = ("eqns", "invars", "constvars", "consts", "const_ids", "forward_known")

    def __init__(self, parent, forward_known=False):
        super().__init__(parent)
        self.eqns = []
        self.invars = []
        self.constvars = []
        self.consts = []
        self.const_ids = {}
        self.forward_known = forward_known

    def new_arg(self, aval):
        var = Var(aval)
        self.invars.append(var)
        return JaxprTracer(self, var)

    def is_own(self, x):
        return isinstance(x, JaxprTracer) and x._trace is self

    def get_var(self, x):
        if isinstance(x, JaxprTracer) and x._trace is self:
            return x.var
        if isinstance(x, Tracer):
            self.check_alive(x)
        elif _is_literal_scalar(x):
            return Literal(x, get_aval(x))
        key = id(x)
        var = self.const_ids.get(key)
        if var is None:
            var = self.const_ids[key] = Var(get_aval(x))
            self.constvars.append(var)
            self.consts.append(x)
        return var

    def process_primitive(self, prim, args, params):
        if self.forward_known:
            if not any(isinstance(x, JaxprTracer) and x._trace is self for x in args):
                with core.set_current_trace(self.parent):
                    return prim.bind(*args, **params)
            rule = partial_eval_rules.get(prim)
            if rule is not None:
                return rule(self, args, **params)
        for x in args:
            if isinstance(x, Tracer) and not isinstance(x, JaxprTracer):
                self.check_alive(x)
        invars = [self.get_var(x) for x in args]
        out_avals = core.abstract_eval(prim, [v.aval for v in invars], params)
        return self.add_eqn(prim, invars, out_avals, params)

    def add_eqn(self, prim, invars, out_avals, params):
        if prim.multiple_results:
            outvars = [Var(a) for a in out_avals]
            self.eqns.append(JaxprEqn(prim, invars, outvars, params))
            return [JaxprTracer(self, v) for v in outvars]
        outvar = Var(out_avals)
        self.eqns.append(JaxprEqn(prim, invars, [outvar], params))
        return JaxprTracer(self, outvar)

    def to_closed_jaxpr(self, outs, dce=True) -> ClosedJaxpr:
        outvars = [self.get_var(x) for x in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, outvars, self.eqns)
        if dce:
            jaxpr = dce_jaxpr(jaxpr)
        return ClosedJaxpr(jaxpr, self.consts)


def dce_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    """Drop equations whose outputs nothing uses (all primitives are pure)."""
    live = {v.id for v in jaxpr.outvars if isinstance(v, Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if any(v.id in live for v in eqn.outvars):
            kept.append(eqn)
            live.update(v.id for v in eqn.invars if isinstance(v, Var))
    kept.reverse()
    if len(kept) == len(jaxpr.eqns):
        return jaxpr
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, kept)


def trace_to_jaxpr(fun, in_avals, *, forward_known=False) -> tuple[ClosedJaxpr, list]:
    """Stage `fun(*tracers)` (a function of flat arrays returning a flat list).

    Returns the closed program and the raw outputs (tracers or constants)."""
    trace = JaxprTrace(core.current_trace(), forward_known=forward_known)
    with core.new_trace(trace):
        args = [trace.new_arg(a) for a in in_avals]
        outs = fun(*args)
        closed = trace.to_closed_jaxpr(outs)
    return closed, outs


def make_closed_jaxpr(fun, in_avals) -> ClosedJaxpr:
    return trace_to_jaxpr(fun, in_avals)[0]


def convert_constvars_to_invars(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Move the constants of a program to leading arguments (closure conversion)."""
    jaxpr = closed.jaxpr
    open_jaxpr = Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns)
    return ClosedJaxpr(open_jaxpr, []), list(closed.consts)


def partial_eval_jaxpr(closed: ClosedJaxpr, in_unknowns):
    """Split a program into a known part and an unknown part.

    Returns (known, unknown, out_unknowns, num_res): `known` maps the known inputs to
    the known outputs followed by residuals; `unknown` maps residuals followed by the
    unknown inputs to the unknown outputs.
    """
    avals = closed.in_avals
    known_avals = [a for a, u in zip(avals, in_unknowns) if not u]
    unknown_avals = [a for a, u in zip(avals, in_unknowns) if u]
    box = {}

    def known_fun(*known_args):
        inner = JaxprTrace(core.current_trace(), forward_known=True)
        with core.new_trace(inner):
            unknown_args = [inner.new_arg(a) for a in unknown_avals]
            it_k, it_u = iter(known_args), iter(unknown_args)
            args = [next(it_u) if u else next(it_k) for u in in_unknowns]
            outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
            out_unknowns = [inner.is_own(o) for o in outs]
            unknown_outs = [o for o, u in zip(outs, out_unknowns) if u]
            staged = inner.to_closed_jaxpr(unknown_outs)
        staged_open, residuals = convert_constvars_to_invars(staged)
        box.update(out_unknowns=out_unknowns, unknown=staged_open, num_res=len(residuals))
        return [o for o, u in zip(outs, out_unknowns) if not u] + residuals

    known = make_closed_jaxpr(known_fun, known_avals)
    return known, box["unknown"], box["out_unknowns"], box["num_res"]
