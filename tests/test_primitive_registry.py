"""Every primitive impl defines is made by `_define.define` and sits in its registry (from
which the harness' strategies can draw it), with the rules every transformation needs."""
from __future__ import annotations

import pkgutil
import types

import pytest

import impl.primitives
from impl import core
from impl.interpreters import ad, batching, lowering
from impl.primitives._define import registry

# Primitives of these families (decompositions, convolutions, windows, reductions) are each
# differentiable and batchable, so a missing rule here is a gap rather than a design decision.
FAMILIES = ("linalg_decompositions", "convolution", "windows", "reductions")


def _modules():
    return [__import__(f"impl.primitives.{m.name}", fromlist=["_"])
            for m in pkgutil.iter_modules(impl.primitives.__path__)]


def _primitives_of(module):
    return {name: p for name, p in vars(module).items() if isinstance(p, core.Primitive)}


def unregistered(modules):
    """(module, attribute) of every primitive not made by `define` (missing from, or not
    the same object as, the registry entry of its name)."""
    return [(m.__name__, attr) for m in modules for attr, p in _primitives_of(m).items()
            if registry.get(p.name) is not p]


def test_every_module_level_primitive_is_in_the_registry():
    modules = _modules()
    assert sum(len(_primitives_of(m)) for m in modules) > 50
    assert unregistered(modules) == []


def test_a_primitive_made_without_define_is_caught():
    fake = types.ModuleType("impl.primitives.fake")
    fake.bare_p = core.Primitive("bare_not_defined")
    fake.shadow_p = core.Primitive("cumsum")         # same name, different object
    assert unregistered([fake]) == [("impl.primitives.fake", "bare_p"),
                                    ("impl.primitives.fake", "shadow_p")]


@pytest.mark.parametrize("family", FAMILIES)
def test_differentiable_families_have_every_rule(family):
    module = __import__(f"impl.primitives.{family}", fromlist=["_"])
    prims = _primitives_of(module)
    assert prims
    for attr, p in prims.items():
        assert p in core.abstract_eval_rules, attr
        assert p in lowering.lowering_rules, attr
        if attr == "iota_p":     # no operands: nothing to map or differentiate
            continue
        assert p in batching.batching_rules, attr
        assert p in ad.jvp_rules, attr
