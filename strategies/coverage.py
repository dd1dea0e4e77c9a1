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

from .ops import CUSTOM_KINDS, VOCABULARY


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


def ops_by_name():
    """The vocabulary's ordinary and custom op names."""
    return tuple(n for n in VOCABULARY if n not in CUSTOM_KINDS), CUSTOM_KINDS


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


def drawn_primitives(backend, per_strategy=3, seed=0) -> set[str]:
    """Primitives of ``backend`` that the strategies draw: a few programs per
    vocabulary op (each op on its own), plus named-axis, control-flow, remat
    and custom-rule cases and jit of a program. Cases a backend cannot trace
    (a missing feature) contribute nothing."""
    import random

    rnd = random.Random(seed)

    def draws(strategy, n):
        return draw_examples(strategy, n, rnd)

    names: set[str] = set()
    with recording_binds(backend, names):
        _trace_all(backend, draws, per_strategy, names)
    return names


def _trace_all(backend, draws, per_strategy, names):
    from . import control, custom_rules, named, programs, remat
    ordinary, custom = ops_by_name()
    for op in ordinary + custom:
        kw = dict(custom_rules=(op,)) if op in custom else dict(ops=(op,), min_ops=1)
        # only programs the op made it into (some ops need operands a draw may lack, e.g. log1p)
        strategy = programs.program_cases(max_ops=3, **kw).filter(lambda case, op=op: op in case[0].ops)
        for p, args in draws(strategy, per_strategy):
            names |= primitives_of_program(backend, p, args)
            try:
                names |= primitives_of_jaxpr(backend.make_jaxpr(backend.jit(p.build(backend)))(*args))
            except Exception:  # noqa: BLE001
                pass
    builders = [*[(lambda c: c.program(backend), named.named_axis_cases(ops=(op,) + named.ELEMENTWISE, require=(op,)), per_strategy)
                  for op in named.COLLECTIVES],
                *[(lambda c: c.build(backend), control.control_flow_cases(kinds=(kind,)), per_strategy)
                  for kind in control.CONTROL_KINDS],
                (lambda c: c.build(backend), remat.remat_cases(), 4 * per_strategy),
                (lambda c: c.make(backend)[0], custom_rules.custom_wrapper_cases(), per_strategy),
                (lambda c: c.make(backend)[0], custom_rules.custom_wrapper_cases(
                    kinds=("custom_vjp",), rules=("true",)).filter(lambda c: c.optimize_remat), 1)]
    for build, strategy, n in builders:
        for case in draws(strategy, n):
            try:
                f = build(case)
                names |= primitives_of_jaxpr(backend.make_jaxpr(f)(*case.args))
                names |= primitives_of_jaxpr(backend.make_jaxpr(
                    lambda *xs: backend.vjp(f, *xs)[1](f(*xs)))(*case.args))
            except Exception:  # noqa: BLE001 - a feature the backend lacks
                continue
