"""Mutation testing of impl's rule tables: do the laws alone catch wrong rules?

``python -m tools.mutation [--profile quick] [-n WORKERS] [--sample N] [--jax-cache DIR | --no-jax-cache]
[--no-fast-compile]`` generates mutants of impl's jvp, transpose and batching rules -- one wrong
rule each: outputs scaled by 1.5, a tangent or cotangent term dropped,
operands swapped, batch axes moved or batch elements shifted by one, an axis
parameter off by one -- and runs every law that can reach the mutated
primitive (never the differential laws, which compare with JAX) against
impl with that one rule replaced, in a pool of worker processes; a primitive's
mutants run one after the other in one worker, which skips the laws an earlier
one's run showed never call their rule.
A mutant is *killed* when some law fails on a case that passes with the
true rule, in a run where the wrong rule changed something (each rule call is
counted). Results go to ``mutation.json`` and ``mutation.md``.

It is a tool for impl, outside the backend-agnostic harness (``properties``):
it replaces entries of impl's rule tables, reads each primitive's declaration
(``impl.primitives._define``: its module, its operand count) and forgets
derived programs with ``impl.clear_caches()``. Mutants are generated from the
tables themselves, so a primitive joins the run the day it is defined; its family
(elementwise, reductions, indexing, collectives, control flow, custom rules, ...)
is the impl module defining it. The analysed survivors are data: ``ledger.py``.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import functools
import importlib
import itertools
import json
import multiprocessing
import os
import pkgutil
import random
import signal
import time
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field

from properties import multidevice
from properties.laws import TABLES

from .ledger import EQUIVALENT, OPEN_GAPS

#: factor of the "scale" operators: big enough to be seen in float32
SCALE = 1.5
#: focused examples each law gets per mutant, at least (quick's are sized for the
#: whole suite's time budget, not for one primitive's)
MIN_EXAMPLES = 10
#: ... and the laws that check a table against an independent reference get this many times more
INDEPENDENT_FACTOR = 3


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
    return {name: tables[name] for name in TABLES}


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


def not_mutated(table, prim, rule):
    """Why ``prim``'s rule in ``table`` gets no mutants -- every one would be equivalent by
    what its declaration says -- or None."""
    from impl import core
    if getattr(rule, "always_raises", False):
        return "the rule always raises (declared with core.always_raises)"
    if core.abstract_eval_rules.get(prim) is core.no_results:
        return "the primitive has no results (declared with core.no_results)"
    qual = getattr(rule, "__qualname__", "")
    if table == "jvp" and ("defjvp_zero" in qual or "zero_jvp" in qual):
        return "the tangent is symbolically zero"
    return None


def _operators(table, prim, rule):
    """The mutation operators that apply to ``prim``'s rule in ``table``."""
    from impl.primitives._define import operand_counts
    if not_mutated(table, prim, rule):
        return []
    axis = ["axis_off_by_one"] if _has_axis_param(prim) else []
    operands = operand_counts[prim.name]   # None: any number of operands
    binary = operands is None or operands >= 2
    if table == "jvp":
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


def _own_rules():
    """(table, primitive, rule) of impl's own primitives (tests that define primitives share
    the tables in their process)."""
    from properties.primitives import impl_primitives
    own = set(impl_primitives())
    return [(table, prim, rule) for table, rules in _tables().items()
            for prim, rule in rules.items() if prim.name in own]


def generate():
    """Every mutant of impl's jvp, transpose and batching tables."""
    fams = families()
    out = [Mutant(table, prim.name, op, fams.get(prim.name, "other"))
           for table, prim, rule in _own_rules() for op in _operators(table, prim, rule)]
    return sorted(out, key=lambda m: m.name)


def rules_not_mutated():
    """{"table:primitive": why} for the rules that get no mutants."""
    return {f"{table}:{prim.name}": why for table, prim, rule in _own_rules()
            if (why := not_mutated(table, prim, rule))}


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


def mutate(rule, table, operator, took_effect=None):
    """A wrong version of ``rule`` (a rule of ``table``) per ``operator``. ``took_effect``
    (no arguments) is called whenever the wrong rule's change applies to a call -- a term
    dropped that was not already a symbolic zero, two different terms swapped, an axis moved,
    a result scaled, moved or shifted -- and when a call raises; on the other calls the
    wrong rule passes the true rule its arguments and returns its results as they are."""
    from impl.interpreters import ad
    from impl.interpreters import batching as bt
    took_effect = took_effect or (lambda: None)

    def effect_if(changed):
        if changed:
            took_effect()

    def wrong_jvp(primals, tangents, **params):
        given, tangents = tangents, list(tangents)
        if operator == "drop_first":
            effect_if(not _is_zero(tangents[0]))
            tangents[0] = ad.Zero(ad.tangent_aval(_aval(primals[0])))
        elif operator == "drop_last":
            effect_if(not _is_zero(tangents[-1]))
            tangents[-1] = ad.Zero(ad.tangent_aval(_aval(primals[-1])))
        elif operator == "swap" and len(primals) >= 2 and _same_type(primals[0], primals[1]):
            effect_if(tangents[0] is not tangents[1] and not (_is_zero(tangents[0]) and _is_zero(tangents[1])))
            tangents[0], tangents[1] = tangents[1], tangents[0]
        if operator == "axis_off_by_one":
            params, moved = _shift_axis_params(params, primals)
            effect_if(moved)
        if isinstance(given, tuple):   # as the true rule receives them
            tangents = tuple(tangents)
        out, t = rule(primals, tangents, **params)
        if operator == "scale":
            scaled = _map_arrays(_scale(SCALE), t)
            effect_if(_replaced(t, scaled))
            t = scaled
        return out, t

    def wrong_transpose(cts, *args, **params):
        if operator == "axis_off_by_one":
            params, moved = _shift_axis_params(params, args)
            effect_if(moved)
        true_out = rule(cts, *args, **params)
        out = list(true_out)
        if operator == "scale":
            scaled = _map_arrays(_scale(SCALE), out)
            effect_if(_replaced(out, scaled))
            out = scaled
        elif operator == "drop_first":
            i = next((k for k, c in enumerate(out) if not _is_zero(c)), None)
            if i is not None:
                out[i] = None
                took_effect()
        elif operator == "swap" and len(out) >= 2 and _same_type(out[0], out[1]):
            effect_if(out[0] is not out[1])
            out[0], out[1] = out[1], out[0]
        return type(true_out)(out) if isinstance(true_out, (list, tuple)) else out

    def wrong_batching(axis_data, vals, dims, **params):
        if operator == "axis_off_by_one":
            params, moved = _shift_axis_params(params, vals)
            effect_if(moved)
        out, out_dims = rule(axis_data, vals, dims, **params)
        if operator == "axis_off_by_one":
            return out, out_dims
        many = isinstance(out_dims, (list, tuple))
        outs, ds = (list(out), list(out_dims)) if many else ([out], [out_dims])
        for i, (o, d) in enumerate(zip(outs, ds)):
            if d is None or _is_zero(o):
                continue
            outs[i] = _batch_mutation(operator, o, d, axis_data.size, bt)
            effect_if(outs[i] is not o)
        return (type(out)(outs) if many else outs[0]), out_dims

    wrong = {"jvp": wrong_jvp, "transpose": wrong_transpose, "batching": wrong_batching}[table]

    @functools.wraps(rule)   # with the rule's attributes, which impl reads (handles_ragged, ...)
    def mutant(*args, **params):
        try:
            return wrong(*args, **params)
        except BaseException:
            # a call that raises may differ from the true rule's call (the true rule's own error
            # counts too: the true rules' rerun of the case then fails alike, which is no kill)
            took_effect()
            raise
    return mutant


def _replaced(old, new):
    """Whether ``_map_arrays`` replaced some array of ``old`` in ``new``."""
    if isinstance(old, (list, tuple)):
        return any(_replaced(a, b) for a, b in zip(old, new))
    return old is not new


def _batch_mutation(operator, x, d, size, bt):
    from impl import core, lax
    if operator == "move_batch_axis":
        shape = core.get_aval(x).shape
        order = [a for a in range(len(shape)) if a != d]
        order.insert((d + 1) % len(shape), d)   # the axes' order once the batch axis moved
        moved = [a for a in order if shape[a] != 1]
        if [shape[a] for a in order] == list(shape) and moved == sorted(moved):
            return x   # the same shape, the same elements in the same order (size-one axes)
        return bt.moveaxis(x, d, (d + 1) % len(shape))
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


def _primitive_of(table, name):
    return next((p for p in table if p.name == name), None)


@contextlib.contextmanager
def applied(mutant, took_effect=None):
    """impl with ``mutant``'s rule in place of the true one (``took_effect``: see ``mutate``)."""
    table = _tables()[mutant.table]
    prim = _primitive_of(table, mutant.primitive)
    original = table[prim]
    table[prim] = mutate(original, mutant.table, mutant.operator, took_effect)
    try:
        yield
    finally:
        table[prim] = original


@contextlib.contextmanager
def recording_calls(primitive, called):
    """Each rule of ``primitive`` (whichever is in its tables now: a mutant's too) adds its
    table's name to the set ``called`` when impl calls it. impl reads a rule from its table
    at each use (``ad.jvp_rules.get(prim)``, ...), so a rule not called is not used: a run
    in which a mutated rule is never called computes what the true rule's run does."""
    saved = []
    for name, table in _tables().items():
        prim = _primitive_of(table, primitive)
        if prim is None:
            continue
        rule = table[prim]
        saved.append((table, prim, rule))
        table[prim] = _recorder(rule, name, called)
    try:
        yield
    finally:
        for table, prim, rule in saved:
            table[prim] = rule


def _recorder(rule, name, called):
    @functools.wraps(rule)   # with the rule's attributes, which impl reads (handles_ragged, ...)
    def recorded(*args, **params):
        called.add(name)
        return rule(*args, **params)
    return recorded


def forget_derived_programs():
    """Empty impl's caches (the jvp, transpose, batched and compiled programs derived
    from each staged program, the traces of jitted and checkpointed functions, custom_vjp
    bwd programs): a program derived under a wrong rule must not serve the true rule's
    run, nor the next mutant's. The registry impl.clear_caches() empties, without JAX's
    compilation caches: mutants change impl's rules, never what JAX compiles for a program."""
    from impl import core
    core.clear_caches()


# ------------------------------------------------------------------ focus


#: coverage's entry of the primitives some source binds as it is or under vmap, without a
#: derivative (the others appear only in derivatives: in jvp, vjp, transpose rules' programs)
PRIMAL = ("primal", None)


def coverage(per_source=3, seed=0):
    """{source: primitives}: what each strategy source binds in impl.

    Sources: ("op", name) for each vocabulary op, ("named", op) for each
    named-axis op, ("control", kind), ("manual", step) for each step of the one-device
    shard_map cases, whole families ("custom", "remat",
    "prng", "piles", "sharding") and wrappers ("chunked", "reduce_axes"); and
    ``PRIMAL``: what they bind without differentiating."""
    import impl
    import strategies as S
    from properties.backends import load_backend
    from strategies.coverage import (draw_examples, primitives_of_jaxpr, primitives_of_program,
                                     recording_binds)
    load_backend("impl")   # float64 on, as in the laws (astype(float64) is a no-op without it)

    rnd = random.Random(seed)
    out = {}
    primal = set()

    def draws(strategy, n):
        return draw_examples(strategy, n, rnd)

    def trace(names, f, args):
        with recording_binds(impl, primal), contextlib.suppress(Exception):
            primal.update(primitives_of_jaxpr(impl.make_jaxpr(f)(*args)))
        with recording_binds(impl, names):
            for fn in (f, lambda *xs: impl.vjp(f, *xs)[1](f(*xs)),
                       lambda *xs: impl.jvp(f, xs, xs)):
                with contextlib.suppress(Exception):
                    names |= primitives_of_jaxpr(impl.make_jaxpr(fn)(*args))

    for op in S.OP_NAMES:
        names = set()
        kw = dict(custom_rules=(op,)) if op in S.CUSTOM_KINDS else dict(ops=(op,), min_ops=1, forward_only_ops=True)
        drawn = draws(S.program_cases(max_ops=3, **kw), 4 * per_source)
        # a draw whose inputs the op does not accept (e.g. scalars) is a program without it
        for p, args in [(p, a) for p, a in drawn if op in p.ops + p.custom_ops][:per_source]:
            with recording_binds(impl, names):
                names |= primitives_of_program(impl, p, args)
            f = p.build(impl)
            for fn, xs in ((f, args), (impl.vmap(f), [impl.numpy.stack([x, x]) for x in args])):
                with recording_binds(impl, primal), contextlib.suppress(Exception):
                    primal.update(primitives_of_jaxpr(impl.make_jaxpr(fn)(*xs)))
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
    # two laws wrap programs of any ops in something that binds primitives of its own
    # (vmap(f, chunk_size=k): chunk_map; vmap(grad(g, reduce_axes=...)): psum_unmapped): what
    # the wrapper binds around `sin`'s programs beyond what the ops do is the wrapper's, a
    # focus family of its own, so that only the wrapping law runs for those primitives
    # (psum_unmapped only where the program's output depends on the shared input: more draws)
    wrapped = {"chunked": set(), "reduce_axes": set()}
    for p, (x, y) in draws(S.program_cases(ops=("sin",), min_ops=1, max_ops=2, num_inputs=2, smooth=True),
                           4 * per_source):
        f = p.build(impl)
        xs, ys = (impl.numpy.stack([v, v]) for v in (x, y))
        g = impl.grad(lambda a, b: impl.numpy.sum(f(a, b)), reduce_axes=("batch",))
        for wrapper, fn, args in (("chunked", impl.vmap(f, chunk_size=1), (xs, ys)),
                                  ("reduce_axes", impl.vmap(g, in_axes=(None, 0), axis_name="batch"), (x, ys))):
            with contextlib.suppress(Exception):
                trace(wrapped[wrapper], fn, args)
    by_ops = set().union(*(names for source, names in out.items() if source[0] == "op"))
    for wrapper, names in wrapped.items():
        out[(wrapper,)] = names - by_ops
    # the one-device shard_map cases, by step: what they bind beyond the ops (the elementwise
    # steps and the products with w bind primitives whose own ops the program laws draw)
    for step in S.MANUAL_OPS:
        names = set()
        for c in draws(S.manual_axis_cases(require=(step,)), per_source):
            with contextlib.suppress(Exception):
                trace(names, c.program(impl), c.args)
        out[("manual", step)] = names - by_ops
    from properties.laws.batching import _pile_run

    def prng_map(c):   # what prng_vmap_matches_loop runs: vmap over the split keys
        return lambda x: impl.vmap(c.program(impl), in_axes=(0, None))(c.keys(impl), x)

    family_cases = {"custom": (S.custom_wrapper_cases(), lambda c: c.make(impl)[0], lambda c: c.args),
                    "remat": (S.remat_cases(), lambda c: c.build(impl), lambda c: c.args),
                    "prng": (S.prng_cases(), prng_map, lambda c: c.args),
                    **{fam: (S.prng_cases(samplers=samplers), prng_map, lambda c: c.args)
                       for fam, samplers in S.prng.SAMPLER_FAMILIES.items()},
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
    out[PRIMAL] = primal | out[("sharding",)]
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
    manual = sorted(s[1] for s, names in cov.items() if s[0] == "manual" and primitive in names)
    return {"ops": ops or None, "named": named or None, "control": control or None, "families": fams,
            "manual": manual or None}


# ------------------------------------------------------------------ running one mutant


def _is_independent(law, table):
    """The law checks ``table``'s rules against a reference independent of the other rules
    (declared: ``Law.references``): a wrong rule the other rules agree with (a jvp scaled
    consistently through grad and vjp) only such laws can kill, so they run first and on
    ``INDEPENDENT_FACTOR`` times the cases."""
    return table in law.references


def laws_for(table, derivative_only=False):
    """The laws alone (no differential law), most relevant first: those that reach ``table``
    (``Law.reaches``), among them the independent ones, then declaration order; for a
    primitive bound only in derivatives (``derivative_only``: add_any, the tangent maps of
    pooling, ...), the laws that also reach the jvp or transpose tables (that differentiate)
    before the others. Every law runs: the order changes how soon a kill is found, never
    whether. The 8-device laws run in the workers, which have 8 host devices (elsewhere they
    skip themselves)."""
    from properties.laws import LAWS
    laws = [law for law in LAWS if not law.differential]
    return sorted(laws, key=lambda law: (table not in law.reaches,
                                         derivative_only and not {"jvp", "transpose"} & set(law.reaches),
                                         not _is_independent(law, table), LAWS.index(law)))


def derivative_only(primitive, cov):
    """Whether the strategies bind ``primitive`` only in derivatives (``PRIMAL``)."""
    return primitive not in cov[PRIMAL]


@dataclass
class Siblings:
    """What the runs of one primitive's mutants, one after the other in a worker, learn for
    the next ones.

    ``uncalled``: {(law, examples): tables}, from a run of the law on that many examples
    in which the mutated rule never changed a result (never called, or called where its
    change does not apply), hence computed what the true rules compute: the tables whose
    rule of the primitive that run never called. A law draws the same
    cases for every mutant of the primitive (derandomized, the same focus, from emptied
    caches), so a mutant of one of those tables would repeat that run exactly, its rule
    never called: it cannot fail there, and the law is skipped for it.
    ``killers``: {table: the laws that killed a mutant of the primitive's rule in that
    table, in the order of the kills}: the next mutants of that table try them first.
    ``elsewhere``: how often each law killed the mutants of other primitives so far in the
    run (bound only in derivatives or not, as this one), {(table, operator, law): kills} and
    {(table, law): kills}: after the siblings' killers, the laws that killed most such
    mutants of the same table (and operator) go first."""
    uncalled: dict = field(default_factory=dict)
    killers: dict = field(default_factory=dict)
    elsewhere: dict = field(default_factory=dict)

    def order(self, laws, mutant):
        """``laws`` in the order to try them on ``mutant``: a sibling's killers, then the
        run's, most kills first, then as given (the order changes how soon a kill is found,
        never whether)."""
        first = self.killers.get(mutant.table, [])
        counts = self.elsewhere
        return sorted(laws, key=lambda law: (first.index(law.name) if law.name in first else len(first),
                                             -counts.get((mutant.table, mutant.operator, law.name), 0),
                                             -counts.get((mutant.table, law.name), 0)))


def _count_kill(counts, result):
    """Add a killed mutant's law to the run's ``counts`` (``Siblings.elsewhere``)."""
    for key in ((result["table"], result["operator"], result["by"]), (result["table"], result["by"])):
        counts[key] = counts.get(key, 0) + 1


def run_one(mutant, focus, profile="quick", derivative_only=False, siblings=None):
    """Run the laws against impl with ``mutant`` applied (``derivative_only``: its primitive is
    bound only in derivatives, which orders the laws; ``siblings``: what the runs of the
    primitive's other mutants learnt, updated with this one's); a result dict."""
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample

    from properties import cases
    from properties.backends import LawSkipped, MissingName, load_backend
    from properties.laws import CaseFiltered
    from properties.profiles import PROFILES

    backend = load_backend("impl")
    siblings = siblings if siblings is not None else Siblings()
    examples = max(PROFILES[profile], MIN_EXAMPLES)
    config = settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                      phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    # the laws with an independent reference are cheap and kill most: they get more cases
    independent = settings(config, max_examples=INDEPENDENT_FACTOR * examples)
    start = time.perf_counter()
    ran, law_seconds, calling, applying, skipped = [], [], [], [], []

    def outcome(law, case):
        """('pass', None), ('law', message) (AssertionError) or ('error', message) (another
        exception)."""
        try:
            law(backend, case)
        except (CaseFiltered, LawSkipped, MissingName, NotImplementedError):
            return "pass", None
        except AssertionError as exc:
            return "law", _message(exc)
        except Exception as exc:  # noqa: BLE001 - a crash caused by the wrong rule also kills it
            return "error", _message(exc)
        return "pass", None

    def result(**fields):
        return {"mutant": mutant.name, **asdict(mutant), **fields, "laws_run": ran, "law_seconds": law_seconds,
                "laws_calling_rule": calling, "laws_mutation_applied": applying, "laws_skipped": skipped,
                "seconds": round(time.perf_counter() - start, 1)}

    def law_ended(law, called, changes, law_start):
        law_seconds.append(round(time.perf_counter() - law_start, 1))
        if mutant.table in called:
            calling.append(law.name)
        if changes[0]:
            applying.append(law.name)

    for law in siblings.order(laws_for(mutant.table, derivative_only), mutant):
        try:
            with cases.focus(**focus):
                strategy = law.cases()
        except cases.Irrelevant:
            continue
        law_settings = independent if _is_independent(law, mutant.table) else config
        key = (law.name, law_settings.max_examples)
        if mutant.table in siblings.uncalled.get(key, ()):
            skipped.append(law.name)
            continue
        ran.append(law.name)
        law_start = time.perf_counter()
        caught = {}
        # from emptied caches, so that what this law's cases use is derived in this law's run:
        # a rule not called in it has not made anything they use
        forget_derived_programs()
        called = set()   # the tables whose rule of the primitive the mutant's runs called
        changes = [0]    # the calls of the mutated rule where its change applied

        def took_effect():
            changes[0] += 1

        def killed(case):
            with applied(mutant, took_effect), recording_calls(mutant.primitive, called):
                kind, message = outcome(law, case)
            if kind == "pass":
                return False
            if not changes[0]:   # the wrong rule has changed nothing yet: not the mutant's doing
                return False
            forget_derived_programs()
            true_kind, _ = outcome(law, case)
            forget_derived_programs()
            if true_kind != "pass":  # fails with the true rule too: not the mutant's doing
                return False
            caught.update(kind=kind, message=message)
            return True
        try:
            with cases.focus(**focus):
                find(strategy, killed, settings=law_settings)
        except cases.Irrelevant:   # raised as it draws: none of its sources reaches the primitive
            ran.pop()
            continue
        except NoSuchExample:   # every case drawn, none kills
            law_ended(law, called, changes, law_start)
            if not changes[0]:   # the run computed what the true rules' run does
                uncalled = set(TABLES) - called
                siblings.uncalled[key] = siblings.uncalled.get(key, uncalled) & uncalled
            continue
        except Exception as exc:  # noqa: BLE001 - a strategy that cannot draw under this focus
            ran[-1] += f" (could not draw: {type(exc).__name__})"
            law_ended(law, called, changes, law_start)
            continue
        law_ended(law, called, changes, law_start)
        kills = siblings.killers.setdefault(mutant.table, [])
        if law.name not in kills:
            kills.append(law.name)
        return result(killed=True, by=law.name, kind=caught["kind"], message=caught["message"])
    return result(killed=False, by=None, kind=None, message="")


def _message(exc):
    return f"{type(exc).__name__}: {exc}"[:1500]


# ------------------------------------------------------------------ the whole run


def _reachable(focus):
    return any([focus["ops"], focus["named"], focus["control"], focus["families"], focus["manual"]])


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


#: a worker process is replaced by a fresh one after this many primitives' mutants (what
#: JAX keeps in memory, the programs of every shape it compiled, grows with them)
RECYCLE = 10


class _OutOfTime(BaseException):
    """A mutant's run took longer than its limit. Not an Exception: the law runs treat any
    Exception as a kill (a crash the wrong rule caused), and this must not be one."""


def _alarm(signum, frame):
    raise _OutOfTime()


def _start_worker(jax_cache=None, fast_compile=True):
    """In each worker, before JAX starts a backend: 8 host devices for the 8-device laws,
    XLA compiling without optimising (``fast_compile``: properties/xla_options.py; the
    programs are tiny and run a few times each), JAX lowering into shared MLIR contexts,
    float64 on as in every law run, SIGALRM
    to stop a mutant out of time, and JAX's persistent compilation cache in the folder
    ``jax_cache`` (None: none). The cache is sound across mutants: a mutant changes impl's
    rules, so the programs they derive, and JAX keys an entry on the lowered program
    itself; most programs of a mutant's cases (the true rules' runs, the reference
    evaluations, the mutants of the same primitive, which draw the same focused cases) are
    read instead of compiled, in this run and the next."""
    flags = os.environ.get("XLA_FLAGS", "")
    if multidevice.FLAG not in flags:
        os.environ["XLA_FLAGS"] = (flags + " " + multidevice.FLAG).strip()
    if fast_compile:
        from properties import xla_options
        xla_options.fast_compile()
    import properties  # noqa: F401
    from properties import mlir_contexts
    mlir_contexts.reuse()   # as a law run lowers: a third less CPU (properties/mlir_contexts.py)
    if jax_cache:
        from properties import compilation_cache
        compilation_cache.enable(jax_cache)
    signal.signal(signal.SIGALRM, _alarm)


def _run_in_worker(mutant, focus, profile, timeout, derivative_only=False, siblings=None):
    """One mutant in a worker process: its result, then impl's caches cleared."""
    m = Mutant(**mutant)
    start = time.perf_counter()
    signal.alarm(int(timeout))
    try:
        return run_one(m, focus, profile, derivative_only=derivative_only, siblings=siblings)
    except _OutOfTime:
        return _unfinished(m, time.perf_counter() - start, f"the mutant's run did not finish in {timeout:.0f} s")
    finally:
        signal.alarm(0)
        forget_derived_programs()


def _run_group_in_worker(mutants, focus, profile, timeout, derivative_only=False, elsewhere=None):
    """One primitive's mutants in one worker process, one after the other: the programs
    their cases share (the focused cases are the same for all) are compiled in the
    worker's memory already, and each run learns from the earlier ones (``Siblings``;
    ``elsewhere``: the run's kills so far). Their results, in order."""
    siblings = Siblings(elsewhere=dict(elsewhere or {}))
    return [_run_in_worker(m, focus, profile, timeout, derivative_only, siblings) for m in mutants]


def _pool(workers, jax_cache=None, fast_compile=True):
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker, initargs=(jax_cache, fast_compile), max_tasks_per_child=RECYCLE)


def run(mutants, profile="quick", workers=2, timeout=900, log=print, progress=None, done=None, minutes=None,
        cov=None, jax_cache=None, fast_compile=True):
    """Run ``mutants`` in that order on a pool of ``workers`` processes; results in order of
    completion. Consecutive mutants of one primitive run together in one worker (one task).
    Each result is appended to ``progress`` (a JSON-lines file) as it
    arrives; ``done`` holds results of an earlier run to keep. With ``minutes``, no
    task is started after that many minutes (the run is then a prefix of ``mutants``).
    A worker that dies breaks the pool: the tasks it held run again once in a new one.
    ``jax_cache``: the folder of JAX's persistent compilation cache the workers share
    (None: every program is compiled); ``fast_compile``: XLA compiles without optimising."""
    cov = cov or coverage()
    done = dict(done or {})
    pending = collections.deque(
        list(group) for _, group in itertools.groupby((m for m in mutants if m.name not in done),
                                                      key=lambda m: m.primitive))
    results = [done[m.name] for m in mutants if m.name in done]
    start = time.perf_counter()
    retried = set()
    kills = {False: {}, True: {}}   # derivative_only -> Siblings.elsewhere
    for r in results:
        if r["killed"]:
            _count_kill(kills[derivative_only(r["primitive"], cov)], r)

    def record(r):
        results.append(r)
        if r["killed"]:
            _count_kill(kills[derivative_only(r["primitive"], cov)], r)
        if progress:
            with open(progress, "a") as fh:
                fh.write(json.dumps({**r, "profile": profile}) + "\n")
        log(f"[{len(results)}/{len(mutants)} {time.perf_counter() - start:.0f}s] "
            f"{'KILLED ' if r['killed'] else 'SURVIVED'} {r['mutant']}"
            f"{' by ' + r['by'] if r['killed'] else ''} ({r['seconds']}s)")

    def out_of_time():
        return minutes is not None and time.perf_counter() - start > 60 * minutes

    def next_job():
        """The next primitive's mutants to run and their focus, recording those not to run;
        None at the end."""
        while pending and not out_of_time():
            group = pending.popleft()
            focus = focus_for(group[0].primitive, cov)
            chosen = []
            for m in group:
                if m.name in EQUIVALENT:
                    record(_unfinished(m, 0.0, "equivalent (analysed, not run): " + EQUIVALENT[m.name]))
                elif not _reachable(focus):
                    record(_unreachable(m))
                else:
                    chosen.append(m)
            if chosen:
                return chosen, focus
        return None

    while pending and not out_of_time():
        with _pool(workers, jax_cache, fast_compile) as pool:
            running = {}
            while True:
                while len(running) < workers and (job := next_job()) is not None:
                    group, focus = job
                    only = derivative_only(group[0].primitive, cov)
                    running[pool.submit(_run_group_in_worker, [asdict(m) for m in group], focus, profile, timeout,
                                        only, kills[only])] = (group, time.perf_counter())
                if not running:
                    break
                finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                broken = False
                for future in finished:
                    group, started = running.pop(future)
                    try:
                        for r in future.result():
                            record(r)
                    except BrokenProcessPool:
                        broken = True
                        key = group[0].name
                        if key in retried:
                            for m in group:
                                record(_unfinished(m, time.perf_counter() - started,
                                                   "the worker process died running it (twice)"))
                        else:
                            retried.add(key)
                            pending.appendleft(group)
                if broken:  # every task still running in this pool is lost with it: run them again
                    for group, _ in running.values():
                        retried.add(group[0].name)
                        pending.appendleft(group)
                    break
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
           notes=(), not_mutated=None):
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
        why = analysed or r.get("why") or _no_kill(r, profile)
        if analysed and r.get("why") and not r["why"].endswith(analysed):
            why += f" [this run: {r['why']}]"
        elif analysed and r["laws_run"]:   # what the laws did: which called the rule
            why += f" [this run: {_no_kill(r, profile)}]"
        survivors.append({"mutant": r["mutant"], "rule": f"{r['table']} rule of {r['primitive']}", "why": why})
    n, k = len(results), sum(r["killed"] for r in results)
    drawn = [r for r in results if r.get("why") != "no strategy draws this primitive"]
    without_effect = [r["mutant"] for r in results if _ran_without_effect(r)]
    equivalent = sum(r["mutant"] in EQUIVALENT and not r["killed"] for r in results)
    data = {"mutants": n, "killed": k, "equivalent": equivalent, "survivors": survivors, "profile": profile,
            "kill_rate_non_equivalent": k / max(n - equivalent, 1), "generated": total,
            "seconds": seconds, "workers": workers,
            "reachable": {"mutants": len(drawn), "killed": sum(r["killed"] for r in drawn)},
            "without_effect": without_effect,
            "planned": planned, "notes": list(notes), "rules_not_mutated": not_mutated or {},
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


def _ran_without_effect(r):
    """A survivor whose laws all ran (or were skipped, their runs on a sibling having called
    none of its table's rules) without the mutation changing any call's result: on every drawn
    case it computed what the true rule computes."""
    return (not r["killed"] and "laws_mutation_applied" in r and not r["laws_mutation_applied"]
            and bool(r["laws_run"] or r["laws_skipped"]) and not r.get("why"))


def _no_kill(r, profile):
    """Why no law killed ``r``: which of the laws run called its rule, and in which the
    mutation changed a result."""
    if "laws_calling_rule" not in r:   # a result of the tool before it counted the calls
        return f"no law failed ({len(r['laws_run'])} laws run, {profile} profile): " + ", ".join(r["laws_run"])
    calling, applied = r["laws_calling_rule"], r["laws_mutation_applied"]
    skipped = (f"; {len(r['laws_skipped'])} skipped, as a sibling's run of them called none of the "
               f"primitive's rules of this table: " + ", ".join(r["laws_skipped"])) if r["laws_skipped"] else ""
    if not calling:
        ran = (f"none of the {len(r['laws_run'])} laws run ({profile} profile) called it on its cases: "
               + ", ".join(r["laws_run"])) if r["laws_run"] else "no law ran"
        return "the mutated rule is never called: " + ran + skipped
    if not applied:
        return (f"the mutation never applied: {len(calling)} of the {len(r['laws_run'])} laws run ({profile} "
                f"profile) called the rule, but never where the change applies (a dropped term was a symbolic "
                f"zero, a moved axis of size one, ...): " + ", ".join(calling) + skipped)
    return (f"no law failed ({profile} profile): of the {len(r['laws_run'])} laws run, the mutation changed results "
            f"in " + ", ".join(applied) + "; " + (", ".join(c for c in calling if c not in applied) or "no other")
            + " called the rule without its change applying" + skipped)


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
              f"{n - reach['mutants']} mutate primitives no strategy draws yet, which no law can reach.", ""]
    if data.get("rules_not_mutated"):
        by_why = {}
        for rule, why in sorted(data["rules_not_mutated"].items()):
            by_why.setdefault(why, []).append(f"`{rule}`")
        lines += [f"{len(data['rules_not_mutated'])} rules get no mutants, each of which would be equivalent by "
                  f"the rule's or the primitive's declaration:", ""]
        lines += [f"- {why}: {', '.join(rules)}" for why, rules in by_why.items()] + [""]
    if data.get("without_effect"):
        lines += [f"{len(data['without_effect'])} survivors ran every law without the mutation changing a result: "
                  f"impl never called the rule on the drawn cases, or called it where the change does not apply "
                  f"(counted by wrapping the primitive's rules); the laws cannot see such a mutant on these cases. "
                  f"Each is listed below with the laws that ran.", ""]
    lines += ["Regenerate: `python -m tools.mutation --profile quick -n 2 --report-dir reports` "
              "(all mutants; `--minutes M` for a sample of what fits in M minutes).", "", "## By family", "",
              "| family | table | mutants | killed |", "|---|---|---|---|"]
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
    from properties.__main__ import cache_dir, jax_cache_dir
    parser = argparse.ArgumentParser(prog="python -m tools.mutation", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="quick", choices=("quick", "default", "thorough"))
    parser.add_argument("-n", "--workers", type=int, default=2, help="mutants run at once")
    parser.add_argument("--sample", type=int, default=None, help="run N mutants spread over families")
    parser.add_argument("--seed", type=int, default=0, help="which sample (--sample, --minutes)")
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
    parser.add_argument("--jax-cache", default=jax_cache_dir(),
                        help="JAX's persistent compilation cache, shared by the workers and with "
                        "python -m properties (default: %(default)s)")
    parser.add_argument("--no-jax-cache", dest="jax_cache", action="store_const", const=None,
                        help="compile every program, without the persistent cache")
    parser.add_argument("--no-fast-compile", dest="fast_compile", action="store_false",
                        help="compile with XLA's default optimisations (default: without them, as python -m "
                        "properties; see properties/xla_options.py)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("-n must be at least 1")
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")
    if args.minutes is not None and args.minutes <= 0:
        parser.error("--minutes must be positive")
    import properties  # noqa: F401  (x64 on, as in every law run)
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
    elif args.minutes is not None:  # shuffled, so that the run cut short is a uniform random sample
        chosen = list(mutants)
        random.Random(args.seed).shuffle(chosen)
    else:  # a primitive's mutants one after the other: they draw the same focused cases, whose
        # programs (eager ops of those shapes, the true rules' derivatives) are then compiled already
        chosen = sorted(mutants, key=lambda m: (m.primitive, m.name))
    os.makedirs(args.report_dir, exist_ok=True)
    progress = os.path.join(args.report_dir, PROGRESS)
    done = _earlier_results(progress, args.profile, {m.name for m in chosen}) if args.resume else {}
    if not args.resume and os.path.exists(progress):
        os.remove(progress)
    start = time.perf_counter()
    results = run(chosen, args.profile, args.workers, progress=progress, done=done, minutes=args.minutes, cov=cov,
                  jax_cache=args.jax_cache and os.path.abspath(os.path.expanduser(args.jax_cache)),
                  fast_compile=args.fast_compile)
    paths = report(results, args.report_dir, args.profile, time.perf_counter() - start, len(mutants), args.workers,
                   len(chosen), not_mutated=rules_not_mutated())
    killed = sum(r["killed"] for r in results)
    print(f"{killed} of {len(results)} mutants killed; reports: {paths[0]}, {paths[1]}")
    return 0
