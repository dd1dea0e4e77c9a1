"""impl's primitives, by name, from the registry every primitive joins when it is
defined (``impl.primitives._define.registry``), and impl's rule tables.
``tools/mutation`` and the strategies' coverage test use them.
"""
from __future__ import annotations


def rule_tables():
    """{table name: dict keyed by Primitive} for the transformation tables."""
    from impl import core
    from impl.interpreters import ad, batching, lowering
    return {"impl": core.impl_rules, "abstract_eval": core.abstract_eval_rules,
            "lowering": lowering.lowering_rules, "jvp": ad.jvp_rules,
            "transpose": ad.transpose_rules, "batching": batching.batching_rules}


def impl_primitives():
    """{name: Primitive} of every primitive impl itself defines (not those a test or
    user program made with ``define``)."""
    from impl.primitives._define import defined_in, registry
    return {name: prim for name, prim in registry.items()
            if defined_in[name].split(".")[0] == "impl"}
