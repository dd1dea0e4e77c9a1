"""impl's top-level names beyond the transformations, each against JAX:
debug printing and callbacks, pure_callback, named scopes, compile-time evaluation,
typeof, caches, disable_jit and the JAX configuration flags impl honours."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as inp

APIS = [(jax, jjnp), (impl, inp)]
X = np.arange(3, dtype=np.float32)


def _printed(capsys, J, N):
    def f(x):
        J.debug.print("x={x} s={}", N.sin(x), x=x)
        J.debug.print("static {} {}", 3, "a")
        return N.sum(N.sin(x) * 2)
    f(X)
    J.jit(f)(X)
    J.vmap(f)(X)
    J.grad(f)(X)
    J.jit(J.grad(f))(X)
    J.vmap(J.grad(f))(X)
    J.debug.print(ordered=True)("two-call {}", X)
    J.debug.print("no placeholders", X, skip_format_check=True)
    J.effects_barrier()
    return capsys.readouterr().out


def test_debug_print_prints_as_jax_eagerly_and_under_jit_vmap_grad(capsys):
    want = _printed(capsys, jax, jjnp)
    got = _printed(capsys, impl, inp)
    assert got == want and want.count("\n") == 18


def _print_program(J, N):
    def f(x):
        J.debug.print("x={x} {}", 3, x=x)
        J.debug.print("static {} {}", "a", (x, 2), ordered=True)
        return x * 2
    return f


def test_debug_print_is_staged_as_jax_stages_it():
    # A debug_print equation with the format, the arguments' tree and the print
    # options as parameters, also in what jit and grad stage.
    for make in (lambda J, f: f, lambda J, f: J.jit(f), lambda J, f: J.grad(f)):
        want, got = [str(J.make_jaxpr(make(J, _print_program(J, N)))(np.float32(1.)))
                     for J, N in APIS]
        assert "debug_print[" in want and "fmt=x={x} {}" in want
        assert got == want


def test_debug_print_under_vmap_is_one_debug_print_per_element():
    def prints(J, N):
        jaxpr = J.make_jaxpr(J.vmap(_print_program(J, N)))(X)
        return [(e.primitive.name, sorted((k, str(v)) for k, v in e.params.items()),
                 [v.aval.shape for v in e.invars]) for e in jaxpr.eqns
                if e.primitive.name.startswith("debug")]
    want, got = [prints(J, N) for J, N in APIS]
    assert len(want) == 6 and got == want


def test_debug_print_placeholders_decided_as_jax(capsys):
    # JAX looks at the format's first field only: "{{x}} {}" has none there, so it
    # prints the format and the values after it.
    outs = []
    for J, N in APIS:
        J.debug.print("{{x}} {}", X)
        J.jit(lambda x: J.debug.print("a {} b", x))(X)
        J.effects_barrier()
        outs.append(capsys.readouterr().out)
    assert outs[1] == outs[0] and "{{x}} {} [0. 1. 2.]" in outs[0]


def test_debug_print_kept_when_nothing_reads_it(capsys):
    """A print whose values nothing returns still runs in a compiled program (it is
    effectful: dead-code removal keeps it), also inside an inner jit."""
    inner = impl.jit(lambda x: impl.debug.print("inner {}", x * 2))
    impl.jit(lambda x: (inner(x), x + 1)[1])(X)
    impl.effects_barrier()
    assert capsys.readouterr().out == "inner [0. 2. 4.]\n"


def test_debug_print_unused_arguments_raise_as_jax():
    for J, _ in APIS:
        with pytest.raises(ValueError, match="Unused keyword"):
            J.debug.print("{x}", x=1, y=2)
        with pytest.raises(ValueError, match="Unused positional"):
            J.debug.print("{}", 1, 2)


def test_debug_callback_sees_the_values_jax_passes():
    seen = {}
    for J, N in APIS:
        out = seen[J.__name__] = []

        def f(x, y):
            J.debug.callback(lambda a, b, k: out.append((np.asarray(a), b, k)), x, "s", k=y)
            return N.sum(x * y)
        J.vmap(f, (0, None))(np.stack([X, X + 1]), np.float32(2))
        J.grad(f)(X, np.float32(2))
        J.effects_barrier()
    assert len(seen["impl"]) == len(seen["jax"]) == 3
    for (a, b, k), (a2, b2, k2) in zip(seen["impl"], seen["jax"]):
        np.testing.assert_array_equal(a, a2)
        assert b == b2 and float(k) == float(k2)


def _breakpoint_frames(J, N, seen):
    """What a registered debugger sees at each breakpoint: per frame, its function's
    name and its locals that are arrays (as NumPy values)."""
    def debugger(frames, thread_id, **kwargs):
        seen.append([(f.source[f.offset].strip() if f.offset is not None else None,
                      {k: np.asarray(v) for k, v in f.locals.items()
                       if isinstance(v, (jax.Array, np.ndarray))})
                     for f in frames[:2]] + [kwargs])

    from jax._src.debugger import core as debugger_core
    debugger_core._debugger_registry["recording"] = (100, debugger)
    try:
        def inner(x):
            y = N.sin(x)
            J.debug.breakpoint(extra=1)
            return y

        def outer(x):
            z = x * 2
            return inner(z)
        J.jit(outer)(X)
        J.vmap(outer)(np.stack([X, X]))
        J.lax.cond(True, lambda x: J.debug.breakpoint(num_frames=1), lambda x: None, X)
        tok = J.jit(lambda x: J.debug.breakpoint(token=x))(X)
        J.effects_barrier()
        return np.asarray(tok)
    finally:
        del debugger_core._debugger_registry["recording"]


def test_breakpoint_shows_the_frames_and_values_jax_shows():
    seen = {"jax": [], "impl": []}
    toks = [_breakpoint_frames(J, N, seen[J.__name__]) for J, N in APIS]
    np.testing.assert_array_equal(toks[0], toks[1])
    assert len(seen["impl"]) == len(seen["jax"]) == 5
    for got, want in zip(seen["impl"], seen["jax"]):
        assert len(got) == len(want)
        for (line, values), (line2, values2) in zip(got[:-1], want[:-1]):
            assert line == line2 and values.keys() == values2.keys()
            for k in values:
                np.testing.assert_allclose(values[k], values2[k], rtol=1e-6)
        assert got[-1] == want[-1]
    assert set(seen["jax"][0][0][1]) == {"x", "y"} and seen["jax"][0][-1] == {"extra": 1}


def test_breakpoint_ordered_with_token_raises_as_jax():
    for J, N in APIS:
        with pytest.raises(ValueError, match="mutually exclusive"):
            J.debug.breakpoint(ordered=True, token=X)


# ------------------------------------------------------------------ io_callback

def _io_callback_run(J, N, capsys):
    """Printed lines and results of an impure host generator under jit, vmap and scan,
    as the external-callbacks tutorial uses it."""
    rng = np.random.default_rng(0)

    def host(x):
        print(f"generating {x.dtype}{list(x.shape)}")
        return rng.uniform(size=x.shape).astype(x.dtype)

    def like(x, ordered=False):
        return J.experimental.io_callback(host, x, x, ordered=ordered)

    @J.jit
    def unread(x):
        J.experimental.io_callback(lambda: print("unread"), None)
        return x
    x = N.zeros(3, np.float32)
    outs = [J.jit(like)(x), J.vmap(like)(x),
            J.lax.scan(lambda c, x: (c, like(x, True)), None, x + 1)[1],
            J.grad(unread)(1.0)]
    J.effects_barrier()
    return [np.asarray(o) for o in outs], capsys.readouterr().out


def test_io_callback_runs_as_jax_runs_it(capsys):
    want, printed = _io_callback_run(jax, jjnp, capsys)
    got, printed_impl = _io_callback_run(impl, inp, capsys)
    assert printed_impl == printed and printed.count("generating float32[]") == 6
    assert "unread" in printed
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("J", [jax, impl])
def test_io_callback_refuses_ordered_vmap_and_differentiation_as_jax(J):
    like = lambda x, ordered=False: J.experimental.io_callback(  # noqa: E731
        lambda a: a, jax.ShapeDtypeStruct((), np.float32), x, ordered=ordered)
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        J.vmap(lambda x: like(x, True))(X)
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        J.grad(like)(1.0)
    np.testing.assert_array_equal(J.vmap(like)(X), X)


# ------------------------------------------------------------------ pure_callback

def _callback_run(J, method, x, y):
    shapes = []

    def host(a, b):
        shapes.append((np.shape(a), np.shape(b)))
        return np.asarray(a) + np.asarray(b)

    def fun(x, y):
        shape = np.broadcast_shapes(np.shape(x), np.shape(y))
        return J.pure_callback(host, jax.ShapeDtypeStruct(shape, np.float32), x, y,
                               vmap_method=method)
    out = J.vmap(fun, (0, None))(x, y)
    return np.asarray(out), shapes


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all",
                                    "legacy_vectorized"])
def test_pure_callback_vmap_methods_as_jax(method):
    x, y = np.arange(4, dtype=np.float32), np.float32(1.0)
    got, want = _callback_run(impl, method, x, y), _callback_run(jax, method, x, y)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]


def test_pure_callback_under_jit_and_misuse_as_jax():
    for J, N in APIS:
        g = lambda x: J.pure_callback(np.cos, jax.ShapeDtypeStruct(x.shape, x.dtype), x)  # noqa
        np.testing.assert_allclose(np.asarray(J.jit(g)(X)), np.cos(X), rtol=1e-6)
        with pytest.raises(NotImplementedError, match="vmap_method"):
            J.vmap(g)(np.stack([X, X]))
        with pytest.raises(ValueError, match="do not support JVP"):
            J.grad(lambda x: N.sum(g(x)))(X)
        with pytest.raises(ValueError, match="vmap_method"):
            J.pure_callback(np.cos, jax.ShapeDtypeStruct((3,), np.float32), X,
                            vmap_method="bogus")


# ------------------------------------------------------------------ names and types

def test_named_scope_names_the_compiled_operations_as_jax():
    for J, N in APIS:
        def h(x):
            with J.named_scope("layer1"):
                return N.sin(x)
        text = J.jit(h).lower(X).as_text(debug_info=True)
        assert 'jit(h)/layer1/sin' in text
        named = J.jit(J.named_call(lambda x: N.cos(x), name="blk")).lower(X)
        assert "/blk/cos" in named.as_text(debug_info=True)
        with pytest.raises(TypeError, match="must be a string"):
            with J.named_scope(3):
                pass


def test_ensure_compile_time_eval_gives_concrete_values_under_jit():
    for J, N in APIS:
        kinds = []

        @J.jit
        def f(x):
            with J.ensure_compile_time_eval():
                c = N.sin(np.float32(2.0))
                kinds.append(isinstance(c, jax.Array) and not isinstance(c, jax.core.Tracer)
                             and float(c) == pytest.approx(np.sin(2.0)))
                y = x * c            # traced values still trace
            return y
        np.testing.assert_allclose(np.asarray(f(X)), X * np.sin(np.float32(2)), rtol=1e-6)
        assert kinds == [True], J.__name__


def test_typeof_as_jax():
    for value in (2.0, 3, np.ones((2, 3), np.float32), inp.ones(2)):
        a, b = impl.typeof(value), jax.typeof(value)
        assert (a.shape, a.dtype, a.weak_type) == (b.shape, b.dtype, b.weak_type)
    seen = []
    impl.jit(lambda x: seen.append(impl.typeof(x * 2.0)) or x)(np.ones(2, np.int32))
    jax.jit(lambda x: seen.append(jax.typeof(x * 2.0)) or x)(np.ones(2, np.int32))
    (a, b) = [(t.shape, np.dtype(t.dtype), t.weak_type) for t in seen]
    assert a == b and a[2]


def test_jacobian_is_reverse_mode_jacobian_as_jax():
    f = lambda x: x * x[::-1]  # noqa: E731
    np.testing.assert_allclose(impl.jacobian(f)(X), jax.jacobian(f)(X))


def test_clear_caches_retraces_as_jax():
    for J, _ in APIS:
        traces = []
        f = J.jit(lambda x: traces.append(1) or x + 1)
        f(X)
        f(X)
        J.clear_caches()
        f(X)
        assert len(traces) == 2, J.__name__


def test_disable_jit_runs_the_python_function_as_jax():
    for J, _ in APIS:
        kinds = []
        f = J.jit(lambda x: kinds.append(type(x)) or x * 2)
        with J.disable_jit():
            np.testing.assert_array_equal(np.asarray(f(X)), X * 2)
        assert kinds == [np.ndarray], J.__name__


# ------------------------------------------------------------------ JAX's flags

def test_configuration_flags_impl_honours():
    i32, f32 = np.ones(3, np.int32), np.ones(3, np.float32)
    for J, N in APIS:
        with J.enable_x64(True):
            assert N.ones(3).dtype == np.float64
        with J.numpy_dtype_promotion("strict"):
            with pytest.raises(jax.dtypes.TypePromotionError):
                N.add(i32, f32)
        with J.debug_nans(True):
            with pytest.raises(FloatingPointError):
                J.jit(N.log)(np.float32(-1))
        with J.debug_infs(True):
            with pytest.raises(FloatingPointError):
                N.log(np.float32(0))
        with J.default_matmul_precision("highest"):
            assert "HIGHEST" in J.jit(N.dot).lower(np.ones((2, 2), np.float32),
                                                     np.ones((2, 2), np.float32)).as_text()
        cpu = J.devices("cpu")[0]
        with J.default_device(cpu):
            assert N.ones(2).devices() == {cpu}
        with J.transfer_guard("disallow"):
            with pytest.raises(Exception, match="Disallowed host-to-device"):
                N.sin(f32)
        with J.no_execution(True):
            with pytest.raises(RuntimeError, match="no_execution"):
                N.sin(J.device_put(f32))


def test_device_and_runtime_functions_take_impl_values():
    y = impl.jit(lambda x: x * 2)(X)
    np.testing.assert_array_equal(impl.device_get(y), X * 2)
    assert impl.block_until_ready(y) is y
    assert impl.local_device_count() == len(impl.local_devices()) >= 1
    assert impl.default_backend() == jax.default_backend()
    assert impl.float0 == jax.dtypes.float0
