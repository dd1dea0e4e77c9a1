"""The fast paths of a call: a jitted function called outside any transformation goes
straight to jax.jit's dispatch (jax.disable_jit() included), and an elementwise jnp
function called eagerly on jax arrays runs as one compiled program. Each must behave
as the slow path and as JAX: same values, dtypes, weak types, errors, call counts."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from impl import core
from impl.primitives import elementwise as ew

def _operands():
    """Arrays of several dtypes, a weakly typed one among them (as JAX makes it)."""
    return {
        "f32": jjnp.asarray(np.array([1.5, -2.0, 3.0], np.float32)),
        "i32": jjnp.asarray(np.array([1, -2, 3], np.int32)),
        "bool": jjnp.asarray(np.array([True, False, True])),
        "weak_f": jjnp.asarray(2.0),
    }


def _check_like_jax(name, pairs):
    ops = _operands()
    assert ops["weak_f"].weak_type   # the weak operand is weak in JAX itself
    for keys in pairs:
        args = [ops[k] for k in keys]
        try:
            want = getattr(jjnp, name)(*args)
        except Exception as e:   # the error JAX raises, impl raises too
            with pytest.raises(type(e)):
                getattr(inp, name)(*args)
            continue
        for _ in range(2):   # the call that compiles and the cached one
            got = getattr(inp, name)(*args)
            assert (got.dtype, got.weak_type, got.shape) == (
                want.dtype, want.weak_type, want.shape), (name, keys)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_eager_add_and_sin_match_jax():
    _check_like_jax("add", [("f32", "f32"), ("i32", "weak_f"), ("weak_f", "weak_f")])
    _check_like_jax("sin", [("f32",), ("weak_f",)])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["add", "true_divide", "less", "sin"])
def test_eager_elementwise_matches_jax(name):
    keys = list(_operands())
    pairs = ([(k,) for k in keys] if name == "sin"
             else [(a, b) for a in keys for b in keys if "bool" not in (a, b) or a == b])
    _check_like_jax(name, pairs)


def test_a_cached_eager_call_evaluates_no_primitive_one_by_one(monkeypatch):
    a = jjnp.asarray(np.arange(3, dtype=np.float32))
    b = jjnp.asarray(np.ones(3, np.float32))
    inp.add(a, b)   # compiles
    calls = []
    rule = core.impl_rules[ew.add_p]
    monkeypatch.setitem(core.impl_rules, ew.add_p,
                        lambda *xs, **ps: calls.append(1) or rule(*xs, **ps))
    np.testing.assert_array_equal(inp.add(a, b), np.arange(3) + 1.0)
    assert calls == []
    inp.add(a, 1.0)   # a Python scalar: evaluated op by op, as before
    assert calls == [1]


def test_eager_errors_are_impls_own():
    a, b = jjnp.ones(3), jjnp.ones(4)
    with pytest.raises(TypeError, match="add got incompatible shapes for broadcasting"):
        inp.add(a, b)
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        inp.sin([1.0, 2.0])


def _calls_under_disable_jit(J):
    """Whether each run of the Python function was given the float itself (not a
    tracer): first call, two calls under disable_jit, a lowering under it, a cached
    call."""
    seen = []

    def f(x):
        seen.append(type(x) is float)
        return x * 2

    jf = J.jit(f)
    jf(1.0)
    with jax.disable_jit():
        assert jf(3.0) == 6.0
        assert jf(3.0) == 6.0
        lowered = jf.lower(1.0)
    assert type(lowered).__name__ == "Lowered"
    jf(1.0)
    return seen


def test_disable_jit_runs_the_function_each_call_and_lower_still_traces():
    want = _calls_under_disable_jit(jax)
    assert want[:3] == [False, True, True]
    assert _calls_under_disable_jit(impl) == want
