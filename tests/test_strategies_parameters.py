"""The table of JAX's transformation parameters (strategies/parameters.py) against the
installed JAX: every public parameter is in the table, drawn or with its reason, and the
table names no parameter JAX lacks.  And the stacks draw what the table says they draw."""
from __future__ import annotations

import inspect

import jax
import pytest
from hypothesis import HealthCheck, given, settings

from strategies import parameters
from strategies.parameters import SIGNATURES, Drawn, NotDrawn
from strategies.stacks import KINDS, transformation_stacks


def _jax_object(name):
    obj = jax
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _jax_parameters(name):
    params = inspect.signature(_jax_object(name)).parameters
    return [p for p in params if p != "self"]


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_table_lists_every_parameter_of_jax(name):
    table, actual = SIGNATURES[name], _jax_parameters(name)
    missing = [p for p in actual if p not in table]
    stale = [p for p in table if p not in actual]
    assert not missing, f"jax.{name} parameters neither drawn nor given a reason: {missing}"
    assert not stale, f"the table lists parameters jax.{name} lacks: {stale}"


def test_every_entry_is_drawn_or_has_a_reason():
    for name, table in SIGNATURES.items():
        for param, how in table.items():
            assert isinstance(how, (Drawn, NotDrawn)), (name, param)
            text = how.where if isinstance(how, Drawn) else how.reason
            assert text.strip(), (name, param)


def test_unknown_transformation_is_refused():
    with pytest.raises(ValueError, match="unknown transformation"):
        parameters.parameters("jitt")


#: parameters the stacks pass implicitly, never as a keyword (the function, primals, ...)
POSITIONAL = {"fun", "primals", "tangents", "jvp", "fwd", "bwd", "x"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_stacks_reach_every_parameter_the_table_says_they_draw(kind):
    """One-layer stacks of each kind (with integer corners, for allow_int) pass every keyword
    parameter the table marks Drawn("stacks") for that transformation (drawing only)."""
    seen = set()

    @settings(max_examples=80, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(transformation_stacks(kinds=(kind,), max_depth=1, corner_kinds=("integer", "scalar")))
    def collect(case):
        for layer in case.layers:
            seen.update(layer.parameters)
    collect()
    names = {"compile_time_eval": ("ensure_compile_time_eval",), "checkpoint": ("checkpoint",),
             "custom_jvp": ("custom_jvp", "custom_jvp.defjvp"),
             "custom_vjp": ("custom_vjp", "custom_vjp.defvjp")}.get(kind, (kind,))
    wanted = {p for p in parameters.drawn_by_stacks() if p.rsplit(".", 1)[0] in names
              and p.rsplit(".", 1)[1] not in POSITIONAL}
    assert wanted - seen == set()
