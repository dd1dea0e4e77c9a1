"""The registry of impl's primitives, by name.

impl is gaining one way to define a primitive, with a registry every new
primitive joins (issue 14). Until that registry is on main, this adapter
collects the primitives from impl's rule tables (evaluation, abstract
evaluation, lowering, jvp, transpose, batching), which every defined
primitive enters. ``mutation.py`` and the coverage test use it.
"""
from __future__ import annotations


def _from_registry():
    """impl's own registry, if it has one: {name: Primitive}."""
    import impl.primitives as prims
    for attr in ("REGISTRY", "registry", "PRIMITIVES"):
        reg = getattr(prims, attr, None)
        if isinstance(reg, dict) and reg:
            return dict(reg)
        if reg is not None and hasattr(reg, "items"):
            return dict(reg.items())
    return None


def rule_tables():
    """{table name: dict keyed by Primitive} for the transformation tables."""
    from impl import core
    from impl.interpreters import ad, batching, lowering
    return {"impl": core.impl_rules, "abstract_eval": core.abstract_eval_rules,
            "lowering": lowering.lowering_rules, "jvp": ad.jvp_rules,
            "transpose": ad.transpose_rules, "batching": batching.batching_rules}


def impl_primitives():
    """{name: Primitive} of every primitive impl defines."""
    import impl  # noqa: F401  (registers every rule)
    found = _from_registry()
    if found is not None:
        return found
    out = {}
    for table in rule_tables().values():
        for prim in table:
            out.setdefault(prim.name, prim)
    return out
