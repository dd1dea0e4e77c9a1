"""The fast paths of a call: a jitted function called outside any transformation goes
straight to jax.jit's dispatch (jax.disable_jit() included), and an elementwise jnp
function called eagerly on jax arrays runs as one compiled program. Each must behave
as the slow path and as JAX: same values, dtypes, weak types, errors, call counts."""
from __future__ import annotations

import functools
import inspect
import os
import sys

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


def _python_frames_in(package, call):
    """Names of the Python functions of `package` that run during `call()`."""
    folder = os.path.dirname(os.path.abspath(package.__file__)) + os.sep
    seen = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(folder):
            seen.append(frame.f_code.co_name)
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_a_cached_jitted_call_runs_no_python_of_impls_as_none_of_jaxs():
    a, b = jjnp.ones(3), jjnp.arange(3.0)
    for J in (jax, impl):
        jf = J.jit(lambda x, y: x + y)
        assert _python_frames_in(J, lambda: jf(a, b)), J   # the first call traces
        assert _python_frames_in(J, lambda: jf(a, b)) == [], J
    # What is not cached runs impl's Python: another kind of argument, a call under a
    # transformation (its arguments concrete or not).
    jf = impl.jit(lambda x, y: x + y)
    jf(a, b)
    assert "_cache_miss" in _python_frames_in(impl, lambda: jf(a, 1.0))
    assert "_cache_miss" in _python_frames_in(impl, lambda: impl.make_jaxpr(lambda: jf(a, b))())
    assert "_cache_miss" in _python_frames_in(impl, lambda: impl.vmap(jf)(a, b))


def _staged_after_eager_calls(J):
    """Equations of a program calling a jitted function and an elementwise one on a
    concrete array, both already called eagerly on it; then the eager calls again."""
    x = jjnp.arange(3.0)
    jf = J.jit(lambda a: a * 2.0)
    np_ = {jax: jjnp, impl: inp}[J]
    jf(x), np_.sin(x)
    closed = J.make_jaxpr(lambda: np_.sin(jf(x)))()
    grads = J.grad(lambda y: (jf(x) * y).sum())(x)
    return ([str(e.primitive) for e in closed.jaxpr.eqns], np.asarray(grads),
            np.asarray(jf(x)), np.asarray(np_.sin(x)))


def test_concrete_arguments_under_a_transformation_are_staged_after_eager_calls():
    want, got = _staged_after_eager_calls(jax), _staged_after_eager_calls(impl)
    assert want[0] == ["jit", "sin"]   # JAX stages both calls, constants or not
    assert got[0] == want[0]
    for w, g in zip(want[1:], got[1:]):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def _misuse_after_cached_calls(J):
    """Error types of a cached jitted function given an escaped tracer, a string and an
    unhashable static argument."""
    leaked = []
    J.grad(lambda x: leaked.append(x) or x)(1.0)
    jf = J.jit(lambda x, n: x * n, static_argnums=1)
    jf(jjnp.ones(3), 2)
    errors = []
    for args in ((leaked[0], 2), ("a", 2), (jjnp.ones(3), [2])):
        with pytest.raises(Exception) as e:
            jf(*args)
        errors.append(type(e.value).__name__)
    return errors


def test_misuse_of_a_cached_jitted_function_raises_jaxs_errors():
    want = _misuse_after_cached_calls(jax)
    assert want == ["UnexpectedTracerError", "TypeError", "ValueError"]
    assert _misuse_after_cached_calls(impl) == want


def _shapes_and_traces(J):
    calls = []

    def f(x, n):
        calls.append(n)
        return {"y": x[:n] * 2}

    jf = J.jit(f, static_argnums=1)
    x = jjnp.ones(4, jjnp.float32)
    shape = jf.eval_shape(x, 2)
    jf(x, 2), jf(x, 2)
    jf.clear_cache()
    jf(x, 2)
    return shape, calls


def test_eval_shape_and_clear_cache_of_a_jitted_function_as_jax():
    want = _shapes_and_traces(jax)
    assert want[0]["y"].shape == (2,) and want[1] == [2, 2]   # traced again once cleared
    assert _shapes_and_traces(impl) == want


def _jitted_method_and_signature(J):
    class Scale:
        def __init__(self, k):
            self.k = k

        @functools.partial(J.jit, static_argnums=0)   # the instance, hashable by id
        def apply(self, x, y=1.0):
            return self.k * x * y

    s = Scale(3.0)
    return (np.asarray(s.apply(jjnp.ones(2), 2.0)), inspect.signature(Scale.apply),
            Scale.apply.__name__)


def test_a_jitted_method_binds_and_keeps_its_signature_as_jax():
    want, got = _jitted_method_and_signature(jax), _jitted_method_and_signature(impl)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1:] == want[1:]


def test_zeros_off_any_mesh_reuse_the_eager_op_compiled_with_no_mesh(caplog):
    """The zeros of a tangent or cotangent are made by the eager broadcast a user's call
    compiles: with no mesh in context they enter none (JAX keys its compiled ops by the
    mesh in context, so entering an empty one would compile the same op again)."""
    aval = core.ShapedArray((7, 3), np.dtype(np.float32))
    impl.lax.broadcast_in_dim(np.zeros((), np.float32), (7, 3), ())
    caplog.set_level("WARNING")
    with jax.log_compiles(True):
        zeros = core.ops.zeros(aval)
    assert not [r for r in caplog.records if "Compiling" in r.getMessage()]
    np.testing.assert_array_equal(zeros, np.zeros((7, 3), np.float32))
