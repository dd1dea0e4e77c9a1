"""Which primitives of a backend the drawn programs exercise.

Programs are traced with the backend's ``make_jaxpr`` -- as they are, and
under jvp, vjp and vmap, so the primitives their rules emit count too -- and
the primitive names of every equation (sub-programs of control flow and
custom rules included) are collected, together with every primitive bound
while tracing (a collective under vmap is bound, then batched away). Nothing
is evaluated.
"""

from __future__ import annotations

import contextlib

import numpy as np

from . import control, custom_rules, manual, named, prng, programs, remat
from .ops import CUSTOM_KINDS
from .vocabulary import PRIMITIVES, VOCABULARY, Drawn


def _walk(obj, names, seen_ids):
    if id(obj) in seen_ids:
        return
    seen_ids.add(id(obj))
    eqns = getattr(obj, "eqns", None)
    if eqns is None and hasattr(obj, "jaxpr"):
        return _walk(obj.jaxpr, names, seen_ids)
    for eqn in eqns or ():
        names.add(eqn.primitive.name)
        for value in eqn.params.values():
            for v in (value if isinstance(value, (tuple, list)) else (value,)):
                if hasattr(v, "eqns") or hasattr(v, "jaxpr"):
                    _walk(v, names, seen_ids)


def primitives_of_jaxpr(jaxpr) -> set[str]:
    """Names of the primitives of ``jaxpr`` and of the sub-programs in its params."""
    names: set[str] = set()
    _walk(jaxpr, names, set())
    return names


def primitives_of_program(backend, program, args) -> set[str]:
    """Primitives in ``program`` traced by ``backend`` as is and under jvp, vjp and vmap."""
    f = program.build(backend)
    names = set()
    traces = [
        lambda *xs: f(*xs),
        lambda *xs: backend.jvp(f, xs, xs),
        lambda *xs: backend.vjp(f, *xs)[1](f(*xs)),
        lambda *xs: backend.vmap(f)(*[np.stack([x, x]) for x in xs]),
    ]
    for trace in traces:
        try:
            names |= primitives_of_jaxpr(backend.make_jaxpr(trace)(*args))
        except Exception:  # noqa: BLE001 - e.g. JAX cannot take jvp of custom_vjp; others still count
            continue
    return names


@contextlib.contextmanager
def recording_binds(backend, names):
    """Add the name of every primitive ``backend`` binds meanwhile to ``names``
    (for backends with a ``core.Primitive`` class, such as impl)."""
    cls = getattr(getattr(backend, "core", None), "Primitive", None)
    original = getattr(cls, "bind", None)
    if original is None:
        yield
        return

    def bind(self, *args, **params):
        names.add(self.name)
        return original(self, *args, **params)
    cls.bind = bind
    try:
        yield
    finally:
        cls.bind = original


def draw_examples(strategy, n, rnd):
    """Up to ``n`` examples of ``strategy`` drawn outside a test, from the
    ``random.Random`` ``rnd`` (a filtered strategy rejects some draws)."""
    from hypothesis.control import BuildContext
    from hypothesis.errors import StopTest
    from hypothesis.internal.conjecture.data import ConjectureData
    out = []
    for _ in range(20 * n):
        data = ConjectureData(random=rnd)
        with contextlib.suppress(StopTest), BuildContext(data, wrapped_test=None):
            out.append(data.draw(strategy))
        if len(out) == n:
            break
    return out


def sources():
    """Every source of drawn cases the strategies have, as a key of :func:`reach`:
    ``("op", name)`` per vocabulary op, ``("named", op)`` per collective,
    ``("control", kind)`` per control-flow kind, ``("family", name)`` per
    family of case strategies traced whole (:data:`FAMILIES`), ``("manual", step)`` per
    step of the one-device shard_map cases."""
    return (tuple(("op", n) for n in VOCABULARY) + tuple(("named", c) for c in named.COLLECTIVES)
            + tuple(("control", k) for k in control.CONTROL_KINDS) + tuple(("family", f) for f in FAMILIES)
            + tuple(("manual", s) for s in manual.MANUAL_OPS))


#: case families traced whole: how to draw them, how to build a case for a backend, and
#: how many cases per ``per_strategy`` (at least one). prng, pile and sharding cases are
#: left to properties (impl-only piles, 8-device meshes).
FAMILY_CASES = {
    "remat": (lambda: remat.remat_cases(), lambda c, b: c.build(b), 4),
    "custom": (lambda: custom_rules.custom_wrapper_cases(), lambda c, b: c.make(b)[0], 1),
    # custom_vjp's optimize_remat=True, which one draw in four or so makes
    "custom_optimize_remat": (lambda: custom_rules.custom_wrapper_cases(kinds=("custom_vjp",), rules=("true",))
                              .filter(lambda c: c.optimize_remat), lambda c, b: c.make(b)[0], 0),
    # the rejection samplers, mapped over split keys as prng_vmap_matches_loop maps them
    **{fam: (lambda samplers=samplers: prng.prng_cases(samplers=samplers),
             lambda c, b: lambda x: b.vmap(c.program(b), in_axes=(0, None))(c.keys(b), x), 1)
       for fam, samplers in prng.SAMPLER_FAMILIES.items()},
}
FAMILIES = tuple(FAMILY_CASES)


def reach(backend, per_strategy=3, seed=0, only=None) -> dict[tuple, set[str]]:
    """``{source: primitives of backend}`` that the drawn cases of each source bind
    (see :func:`sources`; ``only`` restricts to some). Each source draws from its own
    seeded random source, so adding a source changes no other's draws. Cases a
    backend cannot trace (a missing feature) contribute nothing."""
    import random

    out = {}
    for source in (sources() if only is None else tuple(only)):
        rnd = random.Random(f"{seed}:{source}")
        names: set[str] = set()
        with recording_binds(backend, names):
            _trace_source(backend, source, lambda strategy, n: draw_examples(strategy, n, rnd),
                          per_strategy, names)
        out[source] = names
    return out


def drawn_primitives(backend, per_strategy=3, seed=0) -> set[str]:
    """Primitives of ``backend`` that any of the strategies draws (see :func:`reach`)."""
    return set().union(*reach(backend, per_strategy, seed).values())


def _trace_source(backend, source, draws, per_strategy, names):
    kind, name = source
    if kind == "op":
        kw = dict(custom_rules=(name,)) if name in CUSTOM_KINDS else dict(ops=(name,), min_ops=1, forward_only_ops=True)
        # only programs the op made it into (some ops need operands a draw may lack, e.g. log1p)
        strategy = programs.program_cases(max_ops=3, **kw).filter(lambda case: name in case[0].ops)
        for p, args in draws(strategy, per_strategy):
            names |= primitives_of_program(backend, p, args)
            try:
                names |= primitives_of_jaxpr(backend.make_jaxpr(backend.jit(p.build(backend)))(*args))
            except Exception:  # noqa: BLE001
                pass
        return
    if kind == "named":
        strategy, build, n = (named.named_axis_cases(ops=(name,) + named.ELEMENTWISE, require=(name,)),
                              lambda c, b: c.program(b), per_strategy)
    elif kind == "control":
        strategy, build, n = control.control_flow_cases(kinds=(name,)), (lambda c, b: c.build(b)), per_strategy
    elif kind == "manual":
        strategy, build, n = manual.manual_axis_cases(require=(name,)), (lambda c, b: c.program(b)), per_strategy
    else:
        make, build, times = FAMILY_CASES[name]
        strategy, n = make(), times * per_strategy or 1
    for case in draws(strategy, n):
        try:
            f = build(case, backend)
            names |= primitives_of_jaxpr(backend.make_jaxpr(f)(*case.args))
            names |= primitives_of_jaxpr(backend.make_jaxpr(
                lambda *xs: backend.vjp(f, *xs)[1](f(*xs)))(*case.args))
        except Exception:  # noqa: BLE001 - a feature the backend lacks
            continue


def check_table(backend, registry_names, table=None, per_strategy=3, seed=0) -> list[str]:
    """What is wrong with the primitive table (``strategies.vocabulary.PRIMITIVES`` by
    default) for ``backend``, whose registry has ``registry_names``: primitives with no
    entry, entries for primitives it lacks, drawn entries whose source does not bind
    them, exempt entries that something draws. Traces every source when the table has
    exemptions (they must be drawn by none), else only the sources it names."""
    table = PRIMITIVES if table is None else table
    registry_names = set(registry_names)
    problems = [f"{p}: no entry in the primitive table (strategies/vocabulary.py): declare what "
                "draws it, or an exemption with a reason" for p in sorted(registry_names - set(table))]
    problems += [f"{p}: an entry for a primitive the backend does not define" for p in
                 sorted(set(table) - registry_names)]
    known = set(sources())
    named_sources = {e.source for e in table.values() if isinstance(e, Drawn)}
    problems += [f"{p}: unknown source {e.source}" for p, e in sorted(table.items())
                 if isinstance(e, Drawn) and e.source not in known]
    exempt = {p for p, e in table.items() if not isinstance(e, Drawn)}
    reached = reach(backend, per_strategy, seed, only=None if exempt else sorted(named_sources & known))
    for p, e in sorted(table.items()):
        if isinstance(e, Drawn) and e.source in reached and p not in reached[e.source]:
            problems.append(f"{p}: declared drawn by {e.source}, whose drawn cases do not bind it")
    everything = set().union(*reached.values()) if reached else set()
    problems += [f"{p}: exempt but drawn (drop the exemption, declare what draws it)"
                 for p in sorted(exempt & everything)]
    return problems
