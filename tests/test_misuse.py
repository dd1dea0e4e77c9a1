"""Misuse raises the exception JAX raises: one table of wrong programs, each run on JAX and
on impl, asserting the same exception class (by name, with the same chain of base classes,
so `except jax.errors.ConcretizationTypeError` or `except TypeError` catch both alike).
Then the information impl's messages must carry, and traceback filtering."""
from __future__ import annotations

import os
import traceback

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as ijnp
from impl import _traceback_util

X3 = np.ones(3, np.float32)
X4 = np.ones(4, np.float32)
M23 = np.ones((2, 3), np.float32)


def _custom_vjp_bwd_wrong_shape(api, jnp, lax):
    @api.custom_vjp
    def f(x):
        return x
    f.defvjp(lambda x: (x, None), lambda res, g: (np.ones(5, np.float32),))
    return api.grad(lambda x: f(x).sum())(X3)


def _custom_vjp_bwd_not_tuple(api, jnp, lax):
    @api.custom_vjp
    def f(x):
        return x
    f.defvjp(lambda x: (x, None), lambda res, g: g)
    return api.grad(lambda x: f(x).sum())(X3)


def _custom_jvp_tangent_shape(api, jnp, lax):
    @api.custom_jvp
    def f(x):
        return x
    f.defjvp(lambda p, t: (p[0], np.ones(5, np.float32)))
    return api.jvp(f, (X3,), (X3,))


def _escaped_tracer(api, jnp, lax):
    leaked = []
    api.jit(lambda x: leaked.append(x) or x)(X3)
    return api.jit(lambda y: y + leaked[0])(X3)


def _if_on_tracer(x):
    return x if x.sum() > 0 else -x


# name -> program(api, jnp, lax); every one raises on JAX.
CASES = {
    "custom_vjp bwd output of the wrong shape": _custom_vjp_bwd_wrong_shape,
    "custom_vjp bwd output not a tuple": _custom_vjp_bwd_not_tuple,
    "custom_jvp tangent of the wrong shape": _custom_jvp_tangent_shape,
    "grad argnums out of range": lambda api, jnp, lax: api.grad(
        lambda x: x.sum(), argnums=3)(X3),
    "jit(grad) argnums out of range": lambda api, jnp, lax: api.jit(
        api.grad(lambda x: x.sum(), argnums=2))(X3),
    "grad argnums not an int": lambda api, jnp, lax: api.grad(
        lambda x: x.sum(), argnums="a")(X3),
    "@ on mismatched shapes": lambda api, jnp, lax: jnp.asarray(M23) @ jnp.asarray(M23),
    "+ on mismatched shapes": lambda api, jnp, lax: jnp.asarray(X3) + jnp.asarray(X4),
    "+ on mismatched shapes under jit": lambda api, jnp, lax: api.jit(
        lambda a, b: a + b)(X3, X4),
    "jnp.add on mismatched shapes": lambda api, jnp, lax: jnp.add(X3, X4),
    "jnp.multiply on mismatched shapes under vmap": lambda api, jnp, lax: api.vmap(
        jnp.multiply)(M23, np.ones((2, 4), np.float32)),
    "if on a tracer under jit": lambda api, jnp, lax: api.jit(_if_on_tracer)(X3),
    "if on a tracer under vmap": lambda api, jnp, lax: api.vmap(
        lambda x: x if x > 0 else -x)(X3),
    "int() of a tracer under jit": lambda api, jnp, lax: api.jit(lambda x: int(x[0]))(X3),
    "float() of a tracer under jit": lambda api, jnp, lax: api.jit(
        lambda x: float(x[0]))(X3),
    "a tracer as a list index under jit": lambda api, jnp, lax: api.jit(
        lambda x, i: [1, 2, 3][i])(X3, 1),
    "numpy.asarray of a tracer under jit": lambda api, jnp, lax: api.jit(
        lambda x: np.asarray(x))(X3),
    "psum over an unbound axis name": lambda api, jnp, lax: api.vmap(
        lambda x: lax.psum(x, "j"), axis_name="i")(X3),
    "pmean over an unbound axis name": lambda api, jnp, lax: api.vmap(
        lambda x: lax.pmean(x, "j"), axis_name="i")(X3),
    "psum outside any vmap": lambda api, jnp, lax: lax.psum(X3, "i"),
    "a string argument to a jitted function": lambda api, jnp, lax: api.jit(
        lambda x: x)("abc"),
    "an object argument to a jitted function": lambda api, jnp, lax: api.jit(
        lambda x: x)(object()),
    "a string argument to grad": lambda api, jnp, lax: api.grad(lambda x: x)("abc"),
    "a string argument to vmap": lambda api, jnp, lax: api.vmap(lambda x: x)("abc"),
    "grad of a non-scalar output": lambda api, jnp, lax: api.grad(lambda x: x)(X3),
    "grad with an integer input": lambda api, jnp, lax: api.grad(lambda x: x * 1.0)(1),
    "grad with an integer output": lambda api, jnp, lax: api.grad(
        lambda x: (x > 0).astype(np.int32))(1.0),
    "jacrev with an integer input": lambda api, jnp, lax: api.jacrev(
        lambda x: x)(np.ones(3, np.int32)),
    "jacfwd with an integer input": lambda api, jnp, lax: api.jacfwd(
        lambda x: x)(np.ones(3, np.int32)),
    "grad with has_aux not returning a pair": lambda api, jnp, lax: api.grad(
        lambda x: x.sum(), has_aux=True)(X3),
    "vmap with inconsistent sizes": lambda api, jnp, lax: api.vmap(
        lambda a, b: a + b)(X3, X4),
    "vmap in_axes beyond the rank": lambda api, jnp, lax: api.vmap(
        lambda a: a, in_axes=1)(X3),
    "vmap out_axes=None for a mapped output": lambda api, jnp, lax: api.vmap(
        lambda a: a, out_axes=None)(X3),
    "vmap in_axes tuple of the wrong length": lambda api, jnp, lax: api.vmap(
        lambda a, b: a, in_axes=(0,))(X3, X3),
    "vmap with no mapped axis": lambda api, jnp, lax: api.vmap(
        lambda a: a, in_axes=None)(X3),
    "vmap axis_size disagreeing": lambda api, jnp, lax: api.vmap(
        lambda x: x, axis_size=4)(X3),
    "jvp with a tangent of another shape": lambda api, jnp, lax: api.jvp(
        lambda a: a, (X3,), (X4,)),
    "jvp with arrays instead of tuples": lambda api, jnp, lax: api.jvp(lambda a: a, X3, X3),
    "vjp cotangent of another shape": lambda api, jnp, lax: api.vjp(
        lambda a: a, X3)[1](X4),
    "vjp cotangent of another structure": lambda api, jnp, lax: api.vjp(
        lambda a: a, X3)[1]((X3, X3)),
    "reshape to another size": lambda api, jnp, lax: jnp.reshape(X3, (4,)),
    "reshape to another size under jit": lambda api, jnp, lax: api.jit(
        lambda x: x.reshape(4, 2))(np.ones((3, 2))),
    "concatenate of mismatched shapes": lambda api, jnp, lax: jnp.concatenate(
        [np.ones((2, 3)), np.ones((2, 4))]),
    "lax.add of mixed dtypes": lambda api, jnp, lax: lax.add(X3, np.ones(3, np.int32)),
    "lax.add of mismatched shapes": lambda api, jnp, lax: lax.add(X3, X4),
    "dot_general of mismatched contraction": lambda api, jnp, lax: lax.dot_general(
        X3, X4, (((0,), (0,)), ((), ()))),
    "sum over an axis beyond the rank": lambda api, jnp, lax: jnp.sum(X3, axis=2),
    "too many indices": lambda api, jnp, lax: jnp.asarray(X3)[0, 0],
    "a traced boolean mask under jit": lambda api, jnp, lax: api.jit(
        lambda x: x[x > 0])(X3),
    "nonzero under jit without size": lambda api, jnp, lax: api.jit(
        lambda x: jnp.nonzero(x))(X3),
    "where with one argument under jit": lambda api, jnp, lax: api.jit(
        lambda x: jnp.where(x))(X3),
    "arange of a tracer under jit": lambda api, jnp, lax: api.jit(lambda n: jnp.arange(n))(3),
    "reshape to a traced shape under jit": lambda api, jnp, lax: api.jit(
        lambda x, n: x.reshape(n))(X3, 3),
    "an escaped tracer": _escaped_tracer,
    "an unhashable static argument": lambda api, jnp, lax: api.jit(
        lambda x, s: x, static_argnums=1)(X3, [1]),
    "an unhashable static argument under jit": lambda api, jnp, lax: api.jit(
        lambda s: api.jit(lambda x, s: x, static_argnums=1)(X3, s))(1),
    "round to traced decimals under jit": lambda api, jnp, lax: api.jit(
        lambda d: jnp.round(X3, d))(2),
    "around to traced decimals under vmap": lambda api, jnp, lax: api.vmap(
        lambda d: jnp.around(X3, decimals=d))(np.array([1, 2])),
    "round to an array of decimals": lambda api, jnp, lax: jnp.round(X3, jnp.asarray(1)),
    "cumsum over a traced axis": lambda api, jnp, lax: api.jit(
        lambda a: jnp.cumsum(M23, axis=a))(1),
    "the cumsum method over a traced axis": lambda api, jnp, lax: api.jit(
        lambda x, a: x.cumsum(axis=a))(M23, 1),
    "tril below a traced diagonal": lambda api, jnp, lax: api.jit(
        lambda k: jnp.tril(M23, k))(1),
    "diff of a traced order": lambda api, jnp, lax: api.jit(lambda n: jnp.diff(X3, n=n))(1),
    "sort over a list of axes": lambda api, jnp, lax: jnp.sort(M23, axis=[0]),
    "jit of a non-callable": lambda api, jnp, lax: api.jit(3),
    "grad of a non-callable": lambda api, jnp, lax: api.grad(3)(1.0),
    "vmap of a non-callable": lambda api, jnp, lax: api.vmap(3)(X3),
    "astype to an unknown dtype": lambda api, jnp, lax: jnp.asarray(X3).astype("foo"),
    "broadcast_to an incompatible shape": lambda api, jnp, lax: jnp.broadcast_to(X3, (4,)),
    "transpose by a non-permutation": lambda api, jnp, lax: jnp.transpose(M23, (0, 0)),
    "take_along_axis of another rank": lambda api, jnp, lax: jnp.take_along_axis(
        X3, np.ones((2, 2), np.int32), axis=0),
    "squeeze of an axis that is not 1": lambda api, jnp, lax: jnp.squeeze(X3, 0),
    "split into unequal parts": lambda api, jnp, lax: jnp.split(X3, 2),
    "stack of different shapes": lambda api, jnp, lax: jnp.stack([X3, X4]),
    "matmul of a scalar": lambda api, jnp, lax: jnp.matmul(1.0, X3),
    "matmul of incompatible stacks": lambda api, jnp, lax: jnp.matmul(
        np.ones((2, 2, 3)), np.ones((3, 3, 4))),
    # the tutorial's loop_mjp: vjp functions return tuples
    "vstack of tuples": lambda api, jnp, lax: jnp.vstack([(X3,), (X3,)]),
    "hstack of a list": lambda api, jnp, lax: jnp.hstack([[1.0, 2.0], X3]),
    "stack of a tuple": lambda api, jnp, lax: jnp.stack([X3, (1.0, 2.0, 3.0)]),
    "concatenate of a tuple": lambda api, jnp, lax: jnp.concatenate([(X3,)]),
    "dstack of tuples": lambda api, jnp, lax: jnp.dstack([(X3,)]),
    "column_stack of a list": lambda api, jnp, lax: jnp.column_stack([[1.0, 2.0, 3.0], X3]),
    "block with a tuple": lambda api, jnp, lax: jnp.block([X3, (1.0, 2.0, 3.0)]),
    "block of mismatched depths": lambda api, jnp, lax: jnp.block([[1.0, 2.0], X3]),
    "holomorphic grad of a real input": lambda api, jnp, lax: api.grad(
        lambda x: x.sum(), holomorphic=True)(X3),
    "holomorphic jacrev of a real input": lambda api, jnp, lax: api.jacrev(
        lambda x: x, holomorphic=True)(X3),
    "holomorphic jacfwd of a real input": lambda api, jnp, lax: api.jacfwd(
        lambda x: x, holomorphic=True)(X3),
    "grad of a complex output without holomorphic": lambda api, jnp, lax: api.grad(
        lambda z: z * z)(np.complex64(1 + 1j)),
}


def _modules(name):
    if name == "jax":
        return jax, jjnp, jax.lax
    return impl, ijnp, impl.lax


def _raised(backend, case):
    try:
        CASES[case](*_modules(backend))
    except Exception as e:   # noqa: BLE001  (the point is to see what is raised)
        return e
    return None


def _class_chain(cls):
    """Names of the class and its bases up to the builtins, without private mixins."""
    return [c.__name__ for c in cls.__mro__ if not c.__name__.startswith("_")
            and c is not object]


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_exception_as_jax(case):
    expected = _raised("jax", case)
    got = _raised("impl", case)
    assert expected is not None, f"JAX raises nothing for {case!r}: not a misuse case"
    assert got is not None, f"impl raised nothing where JAX raised {expected!r}"
    assert _class_chain(type(got)) == _class_chain(type(expected)), (
        f"{case}: impl raised {type(got).__name__}: {got}\n"
        f"JAX raised {type(expected).__name__}: {expected}")


def test_error_classes_mirror_jax_errors():
    import jax.errors as jerr
    import impl.errors as ierr
    public = [n for n in dir(jerr) if not n.startswith("_") and isinstance(getattr(jerr, n), type)
              and issubclass(getattr(jerr, n), BaseException)]
    for name in public:
        assert hasattr(ierr, name), f"impl.errors lacks {name}"
        assert _class_chain(getattr(ierr, name)) == _class_chain(getattr(jerr, name)), name
    assert impl.errors is ierr
    assert impl.ConcretizationTypeError is ierr.ConcretizationTypeError


# ---------------------------------------------------------------- what messages name

def _message(case):
    e = _raised("impl", case)
    assert e is not None
    return str(e)


def test_jit_bad_argument_names_function_and_parameter():
    def scale_rows(matrix, factors):
        return matrix * factors

    with pytest.raises(TypeError) as e:
        impl.jit(scale_rows)(M23, {"row": [1.0, "two"]})
    msg = str(e.value)
    assert "scale_rows" in msg and "factors['row'][1]" in msg and "str" in msg
    assert "_lower_and_run" not in msg and "args[" not in msg


def test_jit_bad_argument_under_a_transformation_names_parameter():
    def f(x, label):
        return x

    with pytest.raises(TypeError) as e:
        impl.vmap(lambda x: impl.jit(f)(x, "a"))(X3)
    assert f"function {f.__qualname__} at" in str(e.value) and "path label." in str(e.value)


def test_pmean_unbound_axis_names_pmean():
    msg = _message("pmean over an unbound axis name")
    assert "pmean" in msg and "psum" not in msg and "'j'" in msg


def test_argnums_message_counts_arguments():
    msg = _message("grad argnums out of range")
    assert "argnums=3" in msg and "4 positional arguments" in msg and "only 1" in msg


@pytest.mark.parametrize("case", ["round to traced decimals under jit",
                                  "around to traced decimals under vmap",
                                  "round to an array of decimals",
                                  "an unhashable static argument under jit"])
def test_unhashable_static_arguments_are_refused_in_jax_words(case):
    """A static argument (of jit, or of a jax.numpy function JAX jits with it static)
    that cannot be hashed: JAX's message, the tracer's own class aside."""
    def words(e):
        return str(e).replace("jax._src.interpreters", "impl.interpreters").replace(
            "DynamicJaxprTracer", "JaxprTracer")
    with jax.numpy_dtype_promotion("strict"):
        want, got = _raised("jax", case), _raised("impl", case)
    assert type(got) is type(want) is ValueError
    assert words(got) == words(want)


CONVERSIONS = ["if on a tracer under jit", "if on a tracer under vmap",
               "int() of a tracer under jit", "float() of a tracer under jit",
               "a tracer as a list index under jit", "numpy.asarray of a tracer under jit"]


@pytest.mark.parametrize("case", CONVERSIONS)
def test_tracer_conversions_say_what_jax_says(case):
    """A traced value converted to a Python value: JAX's first line (and, for int() and
    float(), JAX's advice), and the link to JAX's page about the error."""
    def lines(backend):
        with jax.numpy_dtype_promotion("strict"):
            return str(_raised(backend, case)).splitlines()
    got, want = lines("impl"), lines("jax")
    assert got[0] == want[0]
    if "()" in case:
        assert got[1] == want[1]
    assert got[-1] == want[-1]


# ------------------------------------------------------------ traceback filtering

def _failing_program():
    def loss(x):
        return (impl.numpy.sin(x) @ impl.numpy.ones((4,))).sum()
    return impl.jit(impl.grad(loss))(np.ones(3, np.float32))


def _frames(e):
    return [f.filename for f in traceback.extract_tb(e.__traceback__)]


def _catch(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    raise AssertionError("no error raised")


def test_traceback_filtered_by_default(monkeypatch):
    monkeypatch.delenv(_traceback_util.ENV_VAR, raising=False)
    e = _catch(_failing_program)
    frames = _frames(e)
    assert frames[0] == __file__ and any(f == __file__ for f in frames[1:])
    internal = [f for f in frames if _traceback_util.is_internal(f)]
    assert not internal, internal
    assert len(frames) <= 6, frames
    notes = getattr(e, "__notes__", [])
    assert any(_traceback_util.ENV_VAR in n for n in notes)
    assert not any("JAX has removed" in n for n in notes)
    text = "".join(traceback.format_exception(e))
    assert text.count("\n") <= 25, text


def test_traceback_filtering_off(monkeypatch):
    monkeypatch.setenv(_traceback_util.ENV_VAR, "off")
    e = _catch(_failing_program)
    internal = [f for f in _frames(e) if _traceback_util.is_internal(f)]
    assert len(internal) > 10
    assert not any(_traceback_util.ENV_VAR in n for n in getattr(e, "__notes__", []))


def test_traceback_remove_frames_keeps_the_full_trace_as_cause(monkeypatch):
    monkeypatch.setenv(_traceback_util.ENV_VAR, "remove_frames")
    e = _catch(_failing_program)
    assert not [f for f in _frames(e) if _traceback_util.is_internal(f)]
    assert isinstance(e.__cause__, _traceback_util.UnfilteredStackTrace)
    assert [f for f in _frames(e.__cause__) if _traceback_util.is_internal(f)]


def test_traceback_tracebackhide_marks_internal_frames(monkeypatch):
    monkeypatch.setenv(_traceback_util.ENV_VAR, "tracebackhide")
    e = _catch(_failing_program)
    frames = list(traceback.walk_tb(e.__traceback__))
    assert any(_traceback_util.is_internal(f.f_code.co_filename) for f, _ in frames)


def test_traceback_filtering_bad_value(monkeypatch):
    monkeypatch.setenv(_traceback_util.ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match="IMPL_TRACEBACK_FILTERING"):
        _failing_program()


def test_nested_boundaries_filter_once(monkeypatch):
    monkeypatch.delenv(_traceback_util.ENV_VAR, raising=False)
    e = _catch(lambda: impl.vmap(impl.grad(lambda x: impl.jit(_if_on_tracer)(x).sum()))(
        np.ones((2, 3), np.float32)))
    assert isinstance(e, impl.errors.TracerBoolConversionError)
    notes = [n for n in getattr(e, "__notes__", []) if _traceback_util.ENV_VAR in n]
    assert len(notes) == 1
    assert os.path.basename(_frames(e)[-1]) == os.path.basename(__file__)
