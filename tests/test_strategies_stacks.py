"""Transformation stacks and dtype/shape corners (strategies/stacks.py, corners.py): what they
draw, how they print, and how the stack laws treat a crash.  Cheap: drawing, and one-layer
stacks on JAX; the laws themselves run nightly (properties/suites/test_reach_laws.py)."""
from __future__ import annotations

import contextlib
import functools
import io
import types

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

from properties.backends import load_backend
from properties.broken import broken
from properties.features import MissingFeature
from properties.laws import get
from strategies.corners import literal
from strategies.parameters import SIGNATURES
from strategies.stacks import KINDS, transformation_stacks

QUICK = settings(max_examples=15, database=None, deadline=None, derandomize=True,
                 suppress_health_check=list(HealthCheck))


@functools.cache
def _one_jit_with_static_argnames():
    return find(transformation_stacks(kinds=("jit",), max_depth=1, corner_kinds=()),
                lambda c: "jit.static_argnames" in c.layers[0].parameters,
                settings=settings(database=None, derandomize=True, max_examples=200,
                                  phases=(Phase.generate,)))


@pytest.mark.parametrize("options, error", [
    (dict(kinds=("jitt",)), "unknown layer kinds"),
    (dict(corner_kinds=("huge",)), "unknown corner kinds"),
    (dict(max_depth=5), "max_depth"),
])
def test_bad_options_are_refused(options, error):
    with pytest.raises(ValueError, match=error):
        transformation_stacks(**options)


@QUICK
@given(transformation_stacks())
def test_events_name_the_table_and_the_stack(case):
    """Every parameter a layer reports is a parameter of the table; the stack shape and
    the depth are reported; the layers are within the depth."""
    assert 1 <= len(case.layers) <= 4
    events = case.events()
    assert f"stack {case.shape}" in events and f"depth {len(case.layers)}" in events
    for layer in case.layers:
        assert layer.kind in KINDS
        for p in layer.parameters:
            transformation, name = p.rsplit(".", 1)
            assert name in SIGNATURES[transformation], p


def test_source_is_runnable_and_shows_the_stack():
    case = _one_jit_with_static_argnames()
    source = case.source()
    assert "static_argnames=" in source and "def meaning(" in source
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(source, "<stack case>", "exec"), {})
    assert out.getvalue().count("\n") >= 2   # the stack's result and its meaning's


def test_a_crash_is_a_failure_unless_declared_unsupported():
    """A backend whose jit raises on static_argnames fails the law with the exception named;
    the same backend declaring the parameter unsupported makes the case unsupported."""
    law, case = get("stack_matches_meaning"), _one_jit_with_static_argnames()
    bad = broken("jax", "jit_refuses_static_argnames")
    with pytest.raises(AssertionError, match="raised NotImplementedError"):
        law(bad, case)
    bad.module = types.SimpleNamespace(UNSUPPORTED_FEATURES={
        "param jit.static_argnames": "static arguments are named by position only"})
    with pytest.raises(MissingFeature, match="by position only"):
        law(bad, case)
    law(load_backend("jax"), case)   # and the law holds on JAX


def test_bfloat16_literal_round_trips():
    a = np.array([[0.125, -1.5]], dtype=ml_dtypes.bfloat16)
    back = eval(literal(a), {"np": np, "ml_dtypes": ml_dtypes})
    assert back.dtype == a.dtype and back.shape == a.shape and np.array_equal(back, a)
