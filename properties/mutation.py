"""Mutation testing of impl's rule tables: do the laws alone catch wrong rules?

``python -m properties.mutation [--profile quick] [-n WORKERS] [--sample N]``
generates mutants of impl's jvp, transpose and batching rules -- one wrong
rule each: outputs scaled by 1.5, a tangent or cotangent term dropped,
operands swapped, batch axes moved or batch elements shifted by one, an axis
parameter off by one -- and runs every law that can reach the mutated
primitive (never the differential laws, which compare with JAX) against
impl with that one rule replaced, each mutant in a process of its own.
A mutant is *killed* when some law fails on a case that passes with the
true rule. Results go to ``reports/mutation.json`` and ``reports/mutation.md``.

Mutants are generated from the tables themselves, so a primitive joins the
run the day it is defined; its family (elementwise, reductions, indexing,
collectives, control flow, custom rules, ...) is the impl module defining it.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import pkgutil
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from . import multidevice

#: factor of the "scale" operators: big enough to be seen in float32
SCALE = 1.5
TABLES = ("jvp", "transpose", "batching")
#: focused examples each law gets per mutant, at least (quick's are sized for the
#: whole suite's time budget, not for one primitive's)
MIN_EXAMPLES = 10
#: ... and the laws that check a table against an independent reference get this many times more
INDEPENDENT_FACTOR = 3

#: mutants known to be equivalent to the original (the wrong rule computes
#: the same function on every input the rule can receive), with the reason.
EQUIVALENT: dict[str, str] = {
    "transpose:scatter_add_along_axis:swap": "the second operand is the integer index array, whose "
    "cotangent is always absent, so the swap never applies: the rule is unchanged",
    "transpose:scatter_add:swap": "the second operand is the integer index array, whose cotangent is "
    "always absent (the rule returns None for it), so the swap never applies: the rule is unchanged",
    "jvp:take_along_axis:swap": "the operands are the array and its integer indices, never of the same "
    "type, so the swap never applies: the rule is unchanged",
    "jvp:take_along_axis:drop_last": "the last operand is the integer index array; the rule (linear in "
    "operand 0 only) never reads its tangent, so dropping it changes nothing",
    **{f"transpose:while:{op}": "while's transpose rule always raises (while_loop has no reverse mode), "
       "before the mutant's change could apply: the mutant raises the same error" for op in ("scale", "drop_first",
                                                                                           "swap")},
    "transpose:div:swap": "div is linear only in its numerator: the rule returns [ct / y, None] (it raises "
    "when the denominator is linear), so the swap, which needs two non-zero same-typed cotangents, never "
    "applies: the rule is unchanged",
    "transpose:gather:swap": "gather is linear only in its operand: the rule returns [cotangent, None] (it "
    "raises when the indices are linear), so the swap never applies: the rule is unchanged",
    "transpose:dynamic_slice:swap": "dynamic_slice is linear only in its operand: the rule returns the "
    "operand's cotangent followed by None for each start index (it raises when an index is linear), so the "
    "swap never applies: the rule is unchanged",
    "transpose:add:swap": "as transpose:add_any:swap: when both operands are linear and of the same type "
    "both cotangents are unbroadcast(ct) to that type, equal, so swapping them changes nothing",
    "transpose:add_any:swap": "the swap applies only when both operands are linear and of the same type; "
    "both cotangents are then unbroadcast(ct) to that same type, i.e. equal: swapping them changes nothing",
    **{f"jvp:debug_callback:{op}": "debug_callback has no outputs and its jvp rule never reads the tangents "
       "(the callback sees primals only): a scaled, dropped or swapped tangent changes nothing"
       for op in ("scale", "drop_first", "drop_last", "swap")},
    **{f"transpose:debug_callback:{op}": "debug_callback's transpose returns None for every operand (it has "
       "no outputs to transpose): there is nothing to scale, drop or swap" for op in ("scale", "drop_first",
                                                                                        "swap")},
    **{f"batching:debug_callback:{op}": "debug_callback has no outputs: the batching mutants move or shift "
       "the batch of each output, and there is none (the callback's own per-element calls are unchanged)"
       for op in ("move_batch_axis", "shift_batch")},
    "jvp:psum_unmapped:drop_first": "psum_unmapped(primal, ct) reads its first operand only for which axes "
    "it is mapped along; the rule never reads that operand's tangent, so dropping it changes nothing",
    "transpose:psum_unmapped:swap": "the rule returns None for the first operand (the primal, never linear), "
    "so the swap, which needs two same-typed cotangents, never applies: the rule is unchanged",
    # An operand of integer dtype (indices, a predicate, a branch index) has a symbolic-zero
    # tangent and no cotangent, whatever the program: the mutants below touch only such slots.
    **{f"jvp:{prim}:swap": f"{prim}'s operands 0 and 1 are {what}: the swap applies only when both have one "
       "type, i.e. both are integer, and then both tangents are symbolic zeros: the rule is unchanged"
       for prim, what in (("gather", "the array and its integer indices"),
                          ("dynamic_slice", "the array (rank >= 1) and a scalar integer start index"),
                          ("scatter", "the array and its integer indices"),
                          ("scatter_add", "the array and its integer indices"),
                          ("scatter_mul", "the array and its integer indices"),
                          ("scatter_min", "the array and its integer indices"),
                          ("scatter_max", "the array and its integer indices"),
                          ("scatter_add_along_axis", "the updates and their integer indices"),
                          ("cond", "the integer branch index and the first branch operand"),
                          ("select_n", "the boolean or integer predicate and the first case"))},
    **{f"jvp:{prim}:{op}": f"the {which} operand of {prim} is {what}, whose tangent is always a symbolic "
       "zero (the rule never reads it): dropping it changes nothing"
       for prim, op, which, what in (("gather", "drop_last", "last", "the integer index array"),
                                     ("dynamic_slice", "drop_last", "last", "an integer start index"),
                                     ("scatter_add_along_axis", "drop_last", "last", "the integer index array"),
                                     ("cond", "drop_first", "first", "the integer branch index"),
                                     ("select_n", "drop_first", "first", "the predicate"))},
    **{f"transpose:{prim}:swap": f"{prim}'s rule returns None for its {what} (never linear), so the swap, "
       "which needs two same-typed cotangents, never applies: the rule is unchanged"
       for prim, what in (("cond", "branch index, operand 0"), ("select_n", "predicate, operand 0"),
                          ("scatter", "indices, operand 1"), ("scatter_mul", "indices and updates"),
                          ("take_along_axis", "indices, operand 1"))},
    **{f"transpose:{prim}:swap": f"{prim} is bilinear: in a linear program (what transposition sees) at most "
       "one operand is linear, so the rule returns None for the other and the swap, which needs two "
       "same-typed cotangents, never applies" for prim in ("mul", "dot_general", "conv_general_dilated")},
    **{f"transpose:{prim}:swap": f"{prim} is linear only in {what}: the rule returns None for {other} (it "
       "raises when that is linear), so the swap, which needs two same-typed cotangents, never applies: the "
       "rule is unchanged"
       for prim, what, other in (("triangular_solve", "b", "the matrix a"),
                                 ("linear_recurrence", "b", "the coefficients a"),
                                 ("select_and_gather_add", "the tangent", "the operand"),
                                 ("cumchooser_tangent", "the tangent", "the operand"),
                                 ("cumchooser_cotangent", "the cotangent", "the operand"))},
    **{f"jvp:{prim}:swap": f"{prim}'s tangent is the sum of its operands' tangents, and the swap applies only "
       "when both have one type (then one shape, no broadcasting): the sum is unchanged"
       for prim in ("add", "add_any")},
    "jvp:select_and_scatter_add:drop_last": "the rule is linear in operand 0 only (ad.linear_in_jvp((0,))) and "
    "never reads the tangent of operand 1 (the values that select): dropping it changes nothing",
    **{f"jvp:{prim}:drop_last": "the rule is linear in operand 0 only (ad.linear_in_jvp((0,))) and never "
       "reads the tangent of operand 1 (the values that select): dropping it changes nothing"
       for prim in ("select_and_gather_add", "cumchooser_tangent", "cumchooser_cotangent")},
    "jvp:regularized_incomplete_beta:swap": "the rule raises the same error for a tangent of a and of b (no "
    "derivative in a or b, as in JAX): with either nonzero it raises before and after the swap, with both "
    "zero the swap exchanges two zeros",
    **{f"jvp:pure_callback:{op}": "pure_callback's jvp rule always raises (callbacks are not "
       "differentiable, as in JAX) whatever the tangents: the mutant raises the same error"
       for op in ("scale", "drop_first", "drop_last", "swap")},
}

#: survivors analysed and found NOT equivalent: the reason names the gap (a strategy that
#: never draws the exposing program, or a law too weak) that lets them live -- work left.
OPEN_GAPS: dict[str, str] = {
    **{f"transpose:name:{op}": "checkpoint_name's jvp passes the tangent through unnamed (in impl and "
    "JAX), so grad, vjp and linearize never transpose a `name`; only linear_transpose of a function that "
    "names a linear value reaches this rule, and JAX has no transpose rule for `name` (NotImplementedError), "
    "so no law that must also pass on JAX can draw it. Not equivalent: tests/test_remat.py checks the rule "
    "against the transpose of the unnamed function" for op in ("scale", "drop_first")},
    **{f"{t}:chunk_map:swap": "swaps the (co)tangents of chunk_map's first two operands, which applies only "
       "when they have one type: two arguments of one shape batched along the same axis (or two closed-over "
       "constants). chunked_vmap_matches_vmap kills it on such a case, but its focused cases (programs of "
       "independent random input shapes and in_axes) seldom draw one (gap)" for t in ("jvp", "transpose")},
    "jvp:clamp:drop_first": "drops the tangent of clamp's lower bound, which only a traced bound has "
    "(strategies.ops.Clamp draws one of the operand's shape) and which shows only where the operand is below "
    "it and that clamp reaches the output; the focused programs keep dead nodes and further clamps, so of "
    "the piecewise law's 30 cases about one fails, and not always on a case the true rule passes (gap: "
    "programs whose every node feeds the output would expose it)",
    **{f"jvp:{prim}:drop_first": f"{prim}'s rule raises for a tangent of its first operand ({what}: no "
       "derivative there, as in JAX); the mutant drops that tangent and returns a silent zero instead. The "
       "laws must also pass on JAX, which raises there, so none perturbs it; "
       "tests/test_lax_breadth.py::test_derivatives_jax_lacks_raise_as_jax checks the error (gap)"
       for prim, what in (("polygamma", "the order m"), ("regularized_incomplete_beta", "a"))},
    **{f"jvp:{prim}:{op}": f"{prim}(tangent, operand) is the tangent map of {what}: its own jvp runs only in "
       "second-order forward derivatives of that op, which no law takes (the Hessian laws draw smooth "
       "programs, and it is not smooth; cummax's transpose map, cumchooser_cotangent, is differentiated by "
       "vjp_of_vjp_matches_jvp, which kills its mutants) (gap)"
       for prim, what in (("select_and_gather_add", "max/min pooling"), ("cumchooser_tangent", "cummax/cummin"))
       for op in ("scale", "drop_first", "swap")},
    "batching:igamma_grad_a:move_batch_axis": "igamma_grad_a is the derivative of igamma in a; it is batched "
    "only when that derivative is taken under vmap over the inputs, which the vmap-of-grad laws do for smooth "
    "programs only, and igamma in a is not smooth in the strategies (its own derivative, igamma_grad_a's, is "
    "missing in JAX) (gap)",
    "jvp:pad:drop_last": "drops the tangent of pad's padding value, which is traced only in strategies.ops.Pad "
    "with another scalar value as padding value (everywhere else pad is a transpose, padding with 0); pad's "
    "focus takes in every op whose derivatives pad (slices, indexing), so the focused cases seldom hold that "
    "form: a targeted run (quick) still let it live after 298 s (gap)",
    "transpose:shard_map:swap": "swaps the cotangents of shard_map's first two operands; the drawn shard_map "
    "cases (strategies.sharding) take one input, so there is never a second (gap)",
    **{f"batching:shard_map:{op}": "no law vmaps a shard_map (shard_map_matches_reference checks values, jvp "
       "and vjp) (gap)" for op in ("move_batch_axis", "shift_batch")},
    "batching:pmax:move_batch_axis": "the mutant changes only the rule's branch for a pmax over names "
    "other than the vmap's own (there the output keeps its batch axis; over its own axis the output is "
    "unbatched and the mutant does nothing): it needs two nested named vmaps, pmax over the outer name, "
    "a value of rank >= 1 batched along the inner one. named_collectives_match_reference kills it when "
    "that is drawn (with --profile default it did, in 18 s); the 10 derandomized quick cases "
    "focused on pmax draw none (gap of the quick profile)",
}



@dataclass(frozen=True)
class Mutant:
    table: str
    primitive: str
    operator: str
    family: str

    @property
    def name(self):
        return f"{self.table}:{self.primitive}:{self.operator}"


# ------------------------------------------------------------------ impl's rules


def _tables():
    from properties.primitives import rule_tables
    tables = rule_tables()
    return {"jvp": tables["jvp"], "transpose": tables["transpose"], "batching": tables["batching"]}


def families():
    """{primitive name: family}: the impl module that defines the primitive."""
    import impl
    import impl.primitives as prims
    out = {}
    modules = [importlib.import_module(f"impl.primitives.{m.name}") for m in pkgutil.iter_modules(prims.__path__)]
    for extra in ("impl.custom_derivatives", "impl.custom_batching", "impl.interpreters.ad", "impl.api"):
        with contextlib.suppress(ImportError):
            modules.append(importlib.import_module(extra))
    from impl import core
    for module in modules:
        fam = module.__name__.rsplit(".", 1)[-1].lstrip("_")
        fam = {"custom_derivatives": "custom rules", "custom_batching": "custom rules", "ad": "ad",
               "call": "call", "api": "call"}.get(fam, fam)
        for value in vars(module).values():
            if isinstance(value, core.Primitive):
                out.setdefault(value.name, fam)
    del impl
    return out


def _operators(table, prim, rule):
    """The mutation operators that apply to ``prim``'s rule in ``table``."""
    qual = getattr(rule, "__qualname__", "")
    axis = ["axis_off_by_one"] if _has_axis_param(prim) else []
    binary = _arity(prim) >= 2
    if table == "jvp":
        if "defjvp_zero" in qual or "zero_jvp" in qual:
            return []  # the tangent is symbolically zero: every mutant would be equivalent
        return ["scale", "drop_first"] + (["drop_last", "swap"] if binary else []) + axis
    if table == "transpose":
        return ["scale", "drop_first"] + (["swap"] if binary else []) + axis
    return ["move_batch_axis", "shift_batch"] + axis


_AXIS_PARAMS = ("axis", "axes", "dimension", "split_axis", "concat_axis", "scatter_dimension")


def _has_axis_param(prim):
    """Whether the primitive takes an axis-like parameter (read from its lowering's signature)."""
    import inspect

    from properties.primitives import rule_tables
    for name in ("lowering", "abstract_eval"):
        fn = rule_tables()[name].get(prim)
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        # a collective's ``axes`` holds axis names, which the operator leaves alone
        names = ("axes",) if prim.collective else ()
        if any(p in params and p not in names for p in _AXIS_PARAMS):
            return True
    return False


def _arity(prim):
    """Number of array operands the primitive takes (2 for binary ops), from its abstract eval."""
    from impl import core
    rule = core.abstract_eval_rules.get(prim)
    code = getattr(rule, "__code__", None)
    if code is None:
        return 1
    if code.co_flags & 0x04:  # *args: n-ary abstract eval; a unary lowering refuses two operands
        return 1 if _lowering_is_unary(prim) else 2
    return code.co_argcount


def _lowering_is_unary(prim):
    """Whether ``prim``'s lowering takes exactly one operand (elementwise unops share
    an n-ary abstract eval, so their arity shows only in the lowering)."""
    import numpy as np

    from properties.primitives import rule_tables
    lower = rule_tables()["lowering"].get(prim)
    try:
        lower(np.float32(1.0), np.float32(2.0))
    except TypeError as exc:
        return "takes 1 positional argument" in str(exc)
    except Exception:  # noqa: BLE001 - any other refusal says nothing about arity
        return False
    return False


def generate():
    """Every mutant of impl's jvp, transpose and batching tables (impl's own primitives:
    tests that define primitives share the tables in their process)."""
    from properties.primitives import impl_primitives
    fams, own = families(), set(impl_primitives())
    out = []
    for table, rules in _tables().items():
        for prim, rule in rules.items():
            if prim.name not in own:
                continue
            for op in _operators(table, prim, rule):
                out.append(Mutant(table, prim.name, op, fams.get(prim.name, "other")))
    return sorted(out, key=lambda m: m.name)


# ------------------------------------------------------------------ operators


def _is_zero(x):
    from impl.interpreters import ad
    return x is None or type(x) is ad.Zero or type(x).__name__ == "UndefinedPrimal"


def _map_arrays(fn, x):
    if isinstance(x, (list, tuple)):
        return type(x)(_map_arrays(fn, v) for v in x)
    return x if _is_zero(x) else fn(x)


def _scale(c):
    import numpy as np

    import impl.numpy as jnp
    from impl import core

    def fn(x):
        dtype = core.get_aval(x).dtype
        if not core.is_float_dtype(dtype):
            return x
        return jnp.multiply(x, np.asarray(c, dtype))
    return fn


def _operand_aval(x):
    """The aval of a rule's operand: a transpose rule's linear operands are
    UndefinedPrimal (their aval is ``.aval``); None for absent ones."""
    from impl import core
    if x is None or type(x).__name__ == "Zero":
        return None
    if type(x).__name__ == "UndefinedPrimal":
        return x.aval
    return core.get_aval(x)


def _shift_axis_params(params, args):
    """params with an axis-like parameter moved by one (mod the operand's rank)."""
    ranks = [_operand_aval(a).ndim for a in args if _operand_aval(a) is not None
             and hasattr(_operand_aval(a), "ndim")]
    rank = max(ranks) if ranks else 0
    new = dict(params)
    for key in ("axis", "dimension", "split_axis", "concat_axis", "scatter_dimension"):
        if isinstance(new.get(key), int) and rank > 1:
            new[key] = (new[key] + 1) % rank
            return new, True
    axes = new.get("axes")
    if isinstance(axes, tuple) and axes and all(isinstance(a, int) for a in axes) and rank > 1:
        new["axes"] = tuple(sorted({(a + 1) % rank for a in axes}))
        return new, len(new["axes"]) == len(axes)
    return params, False


def mutate(rule, table, operator):
    """A wrong version of ``rule`` (a rule of ``table``) per ``operator``."""
    from impl.interpreters import ad
    from impl.interpreters import batching as bt

    if table == "jvp":
        def mutant(primals, tangents, **params):
            tangents = list(tangents)
            if operator == "drop_first":
                tangents[0] = ad.Zero(ad.tangent_aval(_aval(primals[0])))
            elif operator == "drop_last":
                tangents[-1] = ad.Zero(ad.tangent_aval(_aval(primals[-1])))
            elif operator == "swap" and _same_type(primals[0], primals[1]):
                tangents[0], tangents[1] = tangents[1], tangents[0]
            if operator == "axis_off_by_one":
                params, _ = _shift_axis_params(params, primals)
            out, t = rule(primals, tangents, **params)
            if operator == "scale":
                t = _map_arrays(_scale(SCALE), t)
            return out, t
        return mutant
    if table == "transpose":
        def mutant(cts, *args, **params):
            if operator == "axis_off_by_one":
                params, _ = _shift_axis_params(params, args)
            out = list(rule(cts, *args, **params))
            if operator == "scale":
                out = _map_arrays(_scale(SCALE), out)
            elif operator == "drop_first":
                i = next((k for k, c in enumerate(out) if not _is_zero(c)), None)
                if i is not None:
                    out[i] = None
            elif operator == "swap" and len(out) >= 2 and _same_type(out[0], out[1]):
                out[0], out[1] = out[1], out[0]
            return out
        return mutant

    def mutant(axis_data, vals, dims, **params):
        if operator == "axis_off_by_one":
            params, _ = _shift_axis_params(params, vals)
        out, out_dims = rule(axis_data, vals, dims, **params)
        if operator == "axis_off_by_one":
            return out, out_dims
        many = isinstance(out_dims, (list, tuple))
        outs, ds = (list(out), list(out_dims)) if many else ([out], [out_dims])
        for i, (o, d) in enumerate(zip(outs, ds)):
            if d is None or _is_zero(o):
                continue
            outs[i] = _batch_mutation(operator, o, d, axis_data.size, bt)
        return (type(out)(outs) if many else outs[0]), out_dims
    return mutant


def _batch_mutation(operator, x, d, size, bt):
    from impl import core, lax
    if operator == "move_batch_axis":
        nd = core.get_aval(x).ndim
        return bt.moveaxis(x, d, (d + 1) % nd) if nd > 1 else x
    if operator == "shift_batch":  # element i gets element i+1's result
        if size < 2:
            return x
        return lax.concatenate([lax.slice_in_dim(x, 1, size, axis=d), lax.slice_in_dim(x, 0, 1, axis=d)], d)
    raise ValueError(operator)


def _aval(x):
    from impl import core
    return core.get_aval(x)


def _same_type(a, b):
    if _is_zero(a) or _is_zero(b):
        return False
    x, y = _aval(a), _aval(b)
    return x.shape == y.shape and x.dtype == y.dtype


@contextlib.contextmanager
def applied(mutant):
    """impl with ``mutant``'s rule in place of the true one."""
    table = _tables()[mutant.table]
    prim = next(p for p in table if p.name == mutant.primitive)
    original = table[prim]
    table[prim] = mutate(original, mutant.table, mutant.operator)
    try:
        yield
    finally:
        table[prim] = original


def forget_derived_programs():
    """Empty impl's caches (the jvp, transpose, batched and compiled programs derived
    from each staged program, the traces of jitted and checkpointed functions, custom_vjp
    bwd programs): a program derived under a wrong rule must not serve the true rule's
    run, nor the next mutant's."""
    from impl import core
    core.clear_caches()


# ------------------------------------------------------------------ focus


def coverage(per_source=3, seed=0):
    """{source: primitives}: what each strategy source binds in impl.

    Sources: ("op", name) for each vocabulary op, ("named", op) for each
    named-axis op, ("control", kind), and whole families ("custom", "remat",
    "prng", "piles")."""
    import impl
    import strategies as S
    from properties.backends import load_backend
    from strategies.coverage import (draw_examples, primitives_of_jaxpr, primitives_of_program,
                                     recording_binds)
    load_backend("impl")   # float64 on, as in the laws (astype(float64) is a no-op without it)

    rnd = random.Random(seed)
    out = {}

    def draws(strategy, n):
        return draw_examples(strategy, n, rnd)

    def trace(names, f, args):
        with recording_binds(impl, names):
            for fn in (f, lambda *xs: impl.vjp(f, *xs)[1](f(*xs)),
                       lambda *xs: impl.jvp(f, xs, xs)):
                with contextlib.suppress(Exception):
                    names |= primitives_of_jaxpr(impl.make_jaxpr(fn)(*args))

    for op in S.OP_NAMES:
        names = set()
        kw = dict(custom_rules=(op,)) if op in S.CUSTOM_KINDS else dict(ops=(op,), min_ops=1)
        drawn = draws(S.program_cases(max_ops=3, **kw), 4 * per_source)
        # a draw whose inputs the op does not accept (e.g. scalars) is a program without it
        for p, args in [(p, a) for p, a in drawn if op in p.ops + p.custom_ops][:per_source]:
            with recording_binds(impl, names):
                names |= primitives_of_program(impl, p, args)
        out[("op", op)] = names
    for op in S.COLLECTIVES + S.named.ELEMENTWISE:
        names = set()
        for c in draws(S.named_axis_cases(ops=(op,) + S.named.ELEMENTWISE, require=(op,)), per_source):
            with contextlib.suppress(Exception):
                trace(names, c.program(impl), c.args)
        out[("named", op)] = names
    for kind in S.CONTROL_KINDS:
        names = set()
        for c in draws(S.control_flow_cases(kinds=(kind,)), per_source):
            with contextlib.suppress(Exception):
                trace(names, c.build(impl), c.args)
        out[("control", kind)] = names
    # chunk_map and psum_unmapped are bound by what two laws wrap around a program of any
    # ops (vmap(f, chunk_size=k); vmap(grad(g, reduce_axes=...))): counted for `sin`'s programs
    for p, (x, y) in draws(S.program_cases(ops=("sin",), min_ops=1, max_ops=2, num_inputs=2, smooth=True),
                           per_source):
        f = p.build(impl)
        xs, ys = (impl.numpy.stack([v, v]) for v in (x, y))
        g = impl.grad(lambda a, b: impl.numpy.sum(f(a, b)), reduce_axes=("batch",))
        for fn, args in ((impl.vmap(f, chunk_size=1), (xs, ys)),
                         (impl.vmap(g, in_axes=(None, 0), axis_name="batch"), (x, ys))):
            with contextlib.suppress(Exception):
                trace(out[("op", "sin")], fn, args)
    from properties.laws.batching import _pile_run

    def prng_map(c):   # what prng_vmap_matches_loop runs: vmap over the split keys
        return lambda x: impl.vmap(c.program(impl), in_axes=(0, None))(c.keys(impl), x)

    family_cases = {"custom": (S.custom_wrapper_cases(), lambda c: c.make(impl)[0], lambda c: c.args),
                    "remat": (S.remat_cases(), lambda c: c.build(impl), lambda c: c.args),
                    "prng": (S.prng_cases(), prng_map, lambda c: c.args),
                    "piles": (S.pile_cases(), lambda c: lambda w: _pile_run(load_backend("impl"), c, w),
                              lambda c: (c.w,))}
    for fam, (strategy, build, args) in family_cases.items():
        names = set()
        for c in draws(strategy, per_source):
            with contextlib.suppress(Exception):
                trace(names, build(c), args(c))
        out[(fam,)] = names
    # bound by some draws only (optimize_remat=True; checkpoint_name tags), which a few draws can miss
    out[("custom",)] |= {"custom_jvp_call", "custom_vjp_call", "custom_lin", "linear_call", "remat_opt"} & _all_names()
    out[("remat",)] |= {"name"} & _all_names()
    # strategies.sharding's cases need 8 devices to trace, which this process may not have;
    # they bind these two (with_sharding_constraint, shard_map), which nothing else draws
    out[("sharding",)] = {"sharding_constraint", "shard_map"} & _all_names()
    return out


def _all_names():
    from properties.primitives import impl_primitives
    return set(impl_primitives())


def focus_for(primitive, cov):
    """Keyword arguments of cases.focus that reach ``primitive``."""
    ops = sorted(s[1] for s, names in cov.items() if s[0] == "op" and primitive in names)
    named = sorted(s[1] for s, names in cov.items() if s[0] == "named" and primitive in names)
    control = sorted(s[1] for s, names in cov.items() if s[0] == "control" and primitive in names)
    fams = sorted(s[0] for s, names in cov.items() if len(s) == 1 and primitive in names)
    return {"ops": ops or None, "named": named or None, "control": control or None, "families": fams}


# ------------------------------------------------------------------ running one mutant


_KEYWORDS = {
    "jvp": ("jvp", "grad", "finite", "jac", "hessian", "linearize", "named", "control", "custom", "remat"),
    "transpose": ("vjp", "grad", "transpose", "jacrev", "hessian", "linear", "named", "control"),
    "batching": ("vmap", "loop", "batch", "jacfwd", "hessian", "named", "chunk", "pile", "prng"),
}


#: laws that check a table's rules against something independent of the other rules
#: (finite differences, references, loops): a wrong rule that the other rules agree
#: with (a jvp scaled consistently through grad and vjp) only these can kill, so
#: they run first; the order changes only how soon a kill is found, not whether.
_INDEPENDENT = {
    "jvp": ("finite_differences", "reference"),
    "transpose": ("adjoint", "dot_product", "vjp_matches_finite", "vjp_of_vjp", "reference"),
    "batching": ("vmap_matches_loop", "loops", "reference"),
}


def _is_independent(law, table):
    return any(k in law.name for k in _INDEPENDENT[table])


def laws_for(table):
    """The laws alone (no differential law), most relevant first. The 8-device laws run in
    the workers, which have 8 host devices (elsewhere they skip themselves)."""
    from properties.laws import LAWS
    laws = [law for law in LAWS if not law.differential]
    keys = _KEYWORDS[table]
    return sorted(laws, key=lambda law: (not any(k in law.name for k in keys),
                                         not _is_independent(law, table), LAWS.index(law)))


def run_one(mutant, focus, profile="quick", seed=0):
    """Run the laws against impl with ``mutant`` applied; a result dict."""
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample

    from properties import cases
    from properties.backends import LawSkipped, MissingName, load_backend
    from properties.laws import CaseFiltered
    from properties.profiles import PROFILES

    backend = load_backend("impl")
    examples = max(PROFILES[profile], MIN_EXAMPLES)
    config = settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                      phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    # the laws with an independent reference are cheap and kill most: they get more cases
    independent = settings(config, max_examples=INDEPENDENT_FACTOR * examples)
    start = time.perf_counter()
    ran = []

    def outcome(law, case):
        """'pass', 'law' (AssertionError) or 'error' (another exception)."""
        try:
            law(backend, case)
        except (CaseFiltered, LawSkipped, MissingName, NotImplementedError):
            return "pass"
        except AssertionError:
            return "law"
        except Exception:  # noqa: BLE001 - a crash caused by the wrong rule also kills it
            return "error"
        return "pass"

    for law in laws_for(mutant.table):
        try:
            with cases.focus(**focus):
                strategy = law.cases()
        except cases.Irrelevant:
            continue
        ran.append(law.name)
        caught = {}

        def killed(case):
            with applied(mutant):
                kind = outcome(law, case)
            if kind == "pass":
                return False
            forget_derived_programs()
            true_kind = outcome(law, case)
            forget_derived_programs()
            if true_kind != "pass":  # fails with the true rule too: not the mutant's doing
                return False
            caught.update(kind=kind, case=case)
            return True
        try:
            with cases.focus(**focus):
                find(strategy, killed, settings=independent if _is_independent(law, mutant.table) else config)
        except NoSuchExample:
            continue
        except Exception as exc:  # noqa: BLE001 - a strategy that cannot draw under this focus
            ran[-1] += f" (could not draw: {type(exc).__name__})"
            continue
        message = ""
        with applied(mutant):
            try:
                law(backend, caught["case"])
            except BaseException as exc:  # noqa: BLE001
                message = f"{type(exc).__name__}: {exc}"[:1500]
        return {"mutant": mutant.name, **asdict(mutant), "killed": True, "by": law.name, "kind": caught["kind"],
                "message": message, "laws_run": ran, "seconds": round(time.perf_counter() - start, 1)}
    return {"mutant": mutant.name, **asdict(mutant), "killed": False, "by": None, "kind": None,
            "message": "", "laws_run": ran, "seconds": round(time.perf_counter() - start, 1)}


# ------------------------------------------------------------------ the whole run


def _reachable(focus):
    return any([focus["ops"], focus["named"], focus["control"], focus["families"]])


def _sample(mutants, n, seed, cov=None):
    """n mutants spread over families and tables (round robin over shuffled groups), of
    primitives some strategy draws: the sample measures the laws, not the strategies'
    coverage (which tests/test_strategies.py checks against impl's registry)."""
    rnd = random.Random(seed)
    cov = cov or coverage()
    groups = {}
    for m in mutants:
        if _reachable(focus_for(m.primitive, cov)):
            groups.setdefault((m.family, m.table), []).append(m)
    for g in groups.values():
        rnd.shuffle(g)
    keys = sorted(groups)
    rnd.shuffle(keys)
    out = []
    while len(out) < n and any(groups.values()):
        for k in keys:
            if groups[k] and len(out) < n:
                out.append(groups[k].pop())
    return sorted(out, key=lambda m: m.name)


def _unreachable(m):
    return {"mutant": m.name, **asdict(m), "killed": False, "by": None, "kind": None, "message": "",
            "laws_run": [], "seconds": 0.0, "why": "no strategy draws this primitive"}


def _unfinished(m, seconds, why, err=""):
    return {"mutant": m.name, **asdict(m), "killed": False, "by": None, "kind": None,
            "message": err[-1500:], "laws_run": [], "seconds": round(seconds, 1), "why": why}


class _Worker:
    """A process that runs mutants one after another, so the imports and JAX's warm-up
    are paid once per worker, not once per mutant. Between mutants it forgets every
    program impl derived (``forget_derived_programs``); after ``RECYCLE`` mutants it is
    replaced by a fresh process."""

    RECYCLE = 40

    def __init__(self, profile, env):
        import queue
        import tempfile
        import threading
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "properties.mutation", "--worker", "--profile", profile],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, env=env, bufsize=1)
        self.lines = queue.Queue()
        self.job, self.started, self.done = None, 0.0, 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, m, focus):
        self.job, self.started = m, time.perf_counter()
        self.proc.stdin.write(json.dumps({"mutant": asdict(m), "focus": focus}) + "\n")
        self.proc.stdin.flush()

    def poll(self, timeout):
        """The finished job's result, an error result if the process died or ran out of
        time, or None while the job runs."""
        import queue
        try:
            line = self.lines.get_nowait()
        except queue.Empty:
            if time.perf_counter() - self.started < timeout:
                return None
            self.kill()
            return _unfinished(self.job, time.perf_counter() - self.started,
                               f"the mutant's run did not finish in {timeout:.0f} s")
        if line is None:
            self.proc.wait()
            return _unfinished(self.job, time.perf_counter() - self.started,
                               f"the mutant's run failed (exit {self.proc.returncode})", self.error_tail())
        self.done += 1
        return json.loads(line)

    def error_tail(self):
        self.stderr.seek(0)
        return self.stderr.read()[-1500:]

    def close(self):
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
        self.stderr.close()

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def _worker_loop(profile):
    """``--worker``: run the mutants named on stdin (one JSON line each), one JSON
    result line each on stdout. Laws printing go to stderr, so stdout stays the protocol."""
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        job = json.loads(line)
        m = Mutant(**job["mutant"])
        results.write(json.dumps(run_one(m, job["focus"], profile)) + "\n")
        forget_derived_programs()


def run(mutants, profile="quick", workers=2, timeout=900, log=print, progress=None, done=None, minutes=None,
        cov=None):
    """Run ``mutants`` in that order on ``workers`` worker processes; results in order of
    completion. Each result is appended to ``progress`` (a JSON-lines file) as it
    arrives; ``done`` holds results of an earlier run to keep. With ``minutes``, no
    mutant is started after that many minutes (the run is then a prefix of ``mutants``)."""
    cov = cov or coverage()
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + multidevice.FLAG).strip()   # for the 8-device laws
    done = dict(done or {})
    pending = [m for m in mutants if m.name not in done]
    results = [done[m.name] for m in mutants if m.name in done]
    start = time.perf_counter()
    pool = []

    def record(r):
        results.append(r)
        if progress:
            with open(progress, "a") as fh:
                fh.write(json.dumps({**r, "profile": profile}) + "\n")
        log(f"[{len(results)}/{len(mutants)} {time.perf_counter() - start:.0f}s] "
            f"{'KILLED ' if r['killed'] else 'SURVIVED'} {r['mutant']}"
            f"{' by ' + r['by'] if r['killed'] else ''} ({r['seconds']}s)")

    def out_of_time():
        return minutes is not None and time.perf_counter() - start > 60 * minutes

    try:
        while pending and not out_of_time() or any(w.job for w in pool):
            for w in list(pool):
                if w.job is None and (w.done >= w.RECYCLE or w.proc.poll() is not None):
                    w.close()
                    pool.remove(w)
            while len(pool) < workers and pending and not out_of_time():
                pool.append(_Worker(profile, env))
            for w in pool:
                while w.job is None and pending and not out_of_time():
                    m = pending.pop(0)
                    focus = focus_for(m.primitive, cov)
                    if m.name in EQUIVALENT:
                        record(_unfinished(m, 0.0, "equivalent (analysed, not run): " + EQUIVALENT[m.name]))
                    elif _reachable(focus):
                        w.send(m, focus)
                    else:
                        record(_unreachable(m))
            time.sleep(0.2)
            for w in list(pool):
                if w.job is None:
                    continue
                r = w.poll(timeout)
                if r is not None:
                    w.job = None
                    record(r)
                    if w.proc.poll() is not None:
                        w.close()
                        pool.remove(w)
    finally:
        for w in pool:
            if w.job:
                w.kill()
            else:
                w.close()
    return results


def wilson(k, n, z=1.96):
    """95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def report(results, report_dir="reports", profile="quick", seconds=None, total=None, workers=None, planned=None,
           notes=()):
    """Write mutation.json and mutation.md; return their paths. ``total`` mutants were
    generated and ``planned`` chosen; when ``results`` cover fewer (a run cut short: a
    random prefix of the shuffled list), the kill rate is given with its 95% Wilson interval."""
    os.makedirs(report_dir, exist_ok=True)
    results = sorted(results, key=lambda r: r["mutant"])
    survivors = []
    for r in results:
        if r["killed"]:
            continue
        analysed = EQUIVALENT.get(r["mutant"]) or OPEN_GAPS.get(r["mutant"])
        why = analysed or r.get("why") or (
            f"no law failed ({len(r['laws_run'])} laws run, {profile} profile): " + ", ".join(r["laws_run"]))
        if analysed and r.get("why"):
            why += f" [this run: {r['why']}]"
        survivors.append({"mutant": r["mutant"], "rule": f"{r['table']} rule of {r['primitive']}", "why": why})
    n, k = len(results), sum(r["killed"] for r in results)
    drawn = [r for r in results if r.get("why") != "no strategy draws this primitive"]
    equivalent = sum(r["mutant"] in EQUIVALENT and not r["killed"] for r in results)
    data = {"mutants": n, "killed": k, "equivalent": equivalent, "survivors": survivors, "profile": profile,
            "kill_rate_non_equivalent": k / max(n - equivalent, 1), "generated": total,
            "seconds": seconds, "workers": workers,
            "reachable": {"mutants": len(drawn), "killed": sum(r["killed"] for r in drawn)},
            "planned": planned, "notes": list(notes),
            "kill_rate_ci95": list(wilson(k, n)) if planned and n < planned else None,
            "kill_rate_non_equivalent_ci95": list(wilson(k, n - equivalent)) if planned and n < planned else None,
            "results": results}
    json_path = os.path.join(report_dir, "mutation.json")
    with open(json_path, "w") as fh:
        json.dump(data, fh, indent=1)
    md_path = os.path.join(report_dir, "mutation.md")
    with open(md_path, "w") as fh:
        fh.write(_markdown(data))
    return json_path, md_path


def _markdown(data):
    n, k = data["mutants"], data["killed"]
    reach = data.get("reachable") or {"mutants": n, "killed": k}
    head = (f"{k} of {n} mutants killed ({100.0 * k / max(n, 1):.1f}%) by the laws alone (no differential "
            f"law), profile `{data['profile']}`"
            + (f", {data['generated']} mutants generated" if data.get("generated") else "")
            + (f", {data['seconds']:.0f} s" if data.get("seconds") else "")
            + (f" with {data['workers']} workers" if data.get("workers") else "") + ".")
    lines = ["# Mutation testing of impl's rule tables", "", head, ""]
    e = data.get("equivalent") or 0
    if e:
        lines += [f"{e} of the survivors are equivalent mutants (the wrong rule computes what the true one does "
                  f"on every input it can receive; the reasons are below): {k} of the {n - e} others were killed "
                  f"({100.0 * k / max(n - e, 1):.1f}%).", ""]
    if data.get("kill_rate_ci95"):
        lo, hi = data["kill_rate_ci95"]
        lines += [f"The run was cut short: this is a uniform random sample of {n} of the {data['planned']} mutants "
                  f"(the first {n} of the shuffled list), not the whole run: the kill rate of all mutants lies in "
                  f"[{100 * lo:.1f}%, {100 * hi:.1f}%] (95% Wilson interval)"
                  + (", that of the non-equivalent ones in [{:.1f}%, {:.1f}%]".format(
                      *(100 * v for v in data["kill_rate_non_equivalent_ci95"])) if e else "") + ".", ""]
    lines += [f"Of the mutants of primitives some strategy draws, {reach['killed']} of {reach['mutants']} were "
              f"killed ({100.0 * reach['killed'] / max(reach['mutants'], 1):.1f}%); the other "
              f"{n - reach['mutants']} mutate primitives no strategy draws yet, which no law can reach.", "",
              "Regenerate: `python -m properties.mutation --profile quick -n 2 --report-dir reports` "
              "(all mutants; `--minutes M` for a sample of what fits in M minutes).", "", "## By family", "", "| family | table | mutants | killed |", "|---|---|---|---|"]
    groups = {}
    for r in data["results"]:
        g = groups.setdefault((r["family"], r["table"]), [0, 0])
        g[0] += 1
        g[1] += r["killed"]
    for (fam, table), (total, killed) in sorted(groups.items()):
        lines.append(f"| {fam} | {table} | {total} | {killed} |")
    if data.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in data["notes"]]
    lines += ["", "## Survivors", ""]
    if not data["survivors"]:
        lines.append("None.")
    for s in data["survivors"]:
        lines.append(f"- `{s['mutant']}` ({s['rule']}): {s['why']}")
    lines += ["", "## Kills", "", "| mutant | law | kind | seconds |", "|---|---|---|---|"]
    for r in data["results"]:
        if r["killed"]:
            lines.append(f"| `{r['mutant']}` | {r['by']} | {r['kind']} | {r['seconds']} |")
    return "\n".join(lines) + "\n"


PROGRESS = "mutation.progress.jsonl"


def _earlier_results(path, profile, names):
    """Results of an interrupted run (``--resume``), kept when run with the same profile."""
    out = {}
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("profile") == profile and r["mutant"] in names:
                    out[r["mutant"]] = r
    return out


def main(argv=None):
    from properties.__main__ import cache_dir
    parser = argparse.ArgumentParser(prog="python -m properties.mutation", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="quick", choices=("quick", "default", "thorough"))
    parser.add_argument("-n", "--workers", type=int, default=2, help="mutants run at once")
    parser.add_argument("--sample", type=int, default=None, help="run N mutants spread over families")
    parser.add_argument("--seed", type=int, default=0, help="which sample, and the order of a full run")
    parser.add_argument("--mutant", action="append", default=[], help="run these mutants (table:primitive:op)")
    parser.add_argument("--minutes", type=float, default=None,
                        help="start no mutant after this many minutes: the report is then of a random sample")
    parser.add_argument("--resume", action="store_true",
                        help=f"keep the results in REPORT_DIR/{PROGRESS} of an interrupted run")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--report-dir", default=os.environ.get("PROPERTIES_REPORT_DIR")
                        or os.path.join(cache_dir(), "reports"),
                        help="where mutation.{json,md} go (default: %(default)s); the committed reference "
                        "report is written with --report-dir reports")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("-n must be at least 1")
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")
    if args.minutes is not None and args.minutes <= 0:
        parser.error("--minutes must be positive")
    import properties  # noqa: F401  (x64 on, as in every law run)
    if args.worker:
        _worker_loop(args.profile)
        return 0
    mutants = generate()
    by_name = {m.name: m for m in mutants}
    if args.list:
        for m in mutants:
            print(m.name, m.family)
        return 0
    unknown = [n for n in args.mutant if n not in by_name]
    if unknown:
        parser.error(f"unknown mutants {unknown}; see --list")
    cov = coverage()   # which strategy sources reach each primitive (the focus of its laws)
    if args.mutant:
        chosen = [by_name[n] for n in args.mutant]
    elif args.sample:
        chosen = _sample(mutants, args.sample, args.seed, cov)
    else:  # shuffled, so that a run cut short by --minutes is a uniform random sample
        chosen = list(mutants)
        random.Random(args.seed).shuffle(chosen)
    os.makedirs(args.report_dir, exist_ok=True)
    progress = os.path.join(args.report_dir, PROGRESS)
    done = _earlier_results(progress, args.profile, {m.name for m in chosen}) if args.resume else {}
    if not args.resume and os.path.exists(progress):
        os.remove(progress)
    start = time.perf_counter()
    results = run(chosen, args.profile, args.workers, progress=progress, done=done, minutes=args.minutes, cov=cov)
    paths = report(results, args.report_dir, args.profile, time.perf_counter() - start, len(mutants), args.workers,
                   len(chosen))
    killed = sum(r["killed"] for r in results)
    print(f"{killed} of {len(results)} mutants killed; reports: {paths[0]}, {paths[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
