"""Printed text as JAX 0.10 prints it: make_jaxpr programs (layout, variable names,
literals with their types, `_` for unused results, jit calls) and the tracers a
function sees under each transformation. Each program runs on JAX and on impl and the
two texts must be equal."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import lax as jlax

import impl
import impl.numpy as inp
from impl import lax as ilax

APIS = {"jax": (jax, jjnp, jlax), "impl": (impl, inp, ilax)}
F = np.float32(1.0)


def _unused_log(J, N, L):
    def f(x):
        c = N.cos(x)
        _ = N.log(c)
        return x * 2.0
    return f


PROGRAMS = {
    "literals keep their types": (lambda J, N, L: lambda x: N.log(2.0) * x + 1.0, (F,)),
    "unused results print as _": (_unused_log, (F,)),
    "unused tuple element": (lambda J, N, L: lambda x: (N.log(x), N.sin(x))[1], (F,)),
    "short program on one line": (lambda J, N, L: lambda x: J.vjp(N.sin, x), (1.0,)),
    "jit call names its program's variables as its own":
        (lambda J, N, L: J.jit(lambda x: N.cos(x) * 2.0), (F,)),
    "jit inside a program": (lambda J, N, L: lambda x: J.jit(
        lambda y: N.cos(y) * 2.0)(x) + 1.0, (F,)),
    "cond branches": (lambda J, N, L: lambda x: L.cond(x > 0, N.sin, N.cos, x), (F,)),
    "several inputs and outputs": (lambda J, N, L: lambda x, y, z: (
        x * y + z, N.sin(x), N.exp(y) - z * 3.0), (F, F, F)),
    "a program longer than a line": (lambda J, N, L: lambda a: sum(
        N.sin(a) * float(i) for i in range(30)), (F,)),
    "scan (impl's _split_transpose parameter unprinted when unset)": (
        lambda J, N, L: lambda c, xs: L.scan(lambda c, x: (c * x, c + x), c, xs),
        (F, np.ones(3, np.float32))),
    "cond: an operand every branch returns unchanged is no output of the cond": (
        lambda J, N, L: lambda y, p: L.cond(p, lambda y: (y, y * 2), lambda y: (y, y * 3), y),
        (F, True)),
    "scan: a carry kept unchanged is a const, xs returned as ys are no outputs": (
        lambda J, N, L: lambda y, c, xs: L.scan(lambda k, x: ((k[0], k[1] + x), (x, k[1])),
                                                 (y, c), xs),
        (F, F, np.ones(3, np.float32))),
    "while: a carry kept unchanged that the condition ignores is a const": (
        lambda J, N, L: lambda y: L.while_loop(lambda c: c[0] < 3,
                                               lambda c: (c[0] + 1, c[1]), (0, y)), (F,)),
    "broadcast_in_dim: its shape is the result's type": (
        lambda J, N, L: lambda x, s: (L.broadcast_in_dim(x, (2, 3), (1,)),
                                      L.broadcast_in_dim(s, (3,), ())),
        (np.ones(3, np.float32), F)),
    "a Python int with a weak float enters as a float": (
        lambda J, N, L: lambda x: (2 * x, N.multiply(3, N.cos(x))), (1.0,)),
    "integer and boolean literals": (lambda J, N, L: lambda i: (i + np.int32(3), i > 2),
                                     (np.int32(1),)),
    "slice strides as given (None from indexing, ones from slice_in_dim); rev after": (
        lambda J, N, L: lambda x: (x[0:2], x[::2], x[::-2], x[3:0:-1], L.slice(x, (0,), (2,)),
                                   L.slice(x, (0,), (2,), (1,)), L.slice_in_dim(x, 1, 3),
                                   L.slice(x, (0,), (4,), (1,))),
        (np.ones(4, np.float32),)),
    "products: dimension numbers as lists, the accumulation dtype, no None precision": (
        lambda J, N, L: lambda a, b: (N.dot(a + 1, b), a @ b, N.einsum("ij,j->i", a, b),
                                      N.tensordot(a, a, 2), J.grad(lambda a: N.dot(a, b).sum())(a)),
        (np.ones((3, 4), np.float32), np.ones(4, np.float32))),
    "reduce_sum with its out_sharding, reshape with all its parameters": (
        lambda J, N, L: lambda a: (N.sum(a), L.reduce_sum(a, (0,)), N.max(a), a.reshape(12)),
        (np.ones((3, 4), np.float32),)),
    "where is a call named _where": (
        lambda J, N, L: lambda x: 1.05 * N.where(x > 0, x, 1.67 * N.exp(x) - 1.67),
        (np.arange(5.0, dtype=np.float32),)),
    "square is a primitive": (lambda J, N, L: lambda x: (N.square(x), L.square(x), x ** 2),
                              (F,)),
    "grad of an add with a constant makes no zero": (
        lambda J, N, L: J.grad(lambda x: N.log(1.0 + N.exp(x)) + (1.0 - x)), (F,)),
    "cond branches keep their own weak types": (
        lambda J, N, L: lambda p, x: (L.cond(p, lambda x: x * 2, lambda x: N.float64(3.) + x, x),
                                      L.switch(1, [lambda x: x, lambda x: x.astype(N.float64)],
                                               x)), (True, 1.0)),
    "creation functions inside a transformation: broadcast constants and iotas": (
        lambda J, N, L: lambda x: (N.zeros(3) + x, N.ones((2, 3), int) + x, N.full(3, 2.) + x,
                                   N.full((2,), 2, N.float32) + x, N.arange(3) + x,
                                   N.arange(1, 7, 2) + x, N.arange(0., 1., .25) + x,
                                   N.eye(2, 3, 1) + x, N.identity(2, int) + x,
                                   N.zeros_like(x * np.ones(2)), N.full_like(x * np.ones(2), 3.),
                                   N.ones_like(np.ones(3)) + x), (F,)),
    "an array of traced values: each converted, then stacked": (
        lambda J, N, L: lambda x: (N.array([x, 1.]), N.array([[x, x], [2, 3]]),
                                   N.sum(N.array([x, x, x]))), (np.int32(1),)),
    "a constant array closed over by a loop body stays a broadcast": (
        lambda J, N, L: lambda a, n: L.fori_loop(0, n, lambda i, c: c + N.ones(a.shape) * 3. + a,
                                                 a + N.ones(a.shape)),
        (np.ones(4, np.float32), 5)),
    "arrays made inside a transformation are its constants, their methods staged": (
        lambda J, N, L: lambda x: (N.array(x.shape).prod() * x, N.asarray(3).astype(N.float32),
                                   N.asarray(3) + x, N.array([1., 2.]) * x[0, 0],
                                   N.asarray(np.arange(3.)) + 1, N.float32(3) * x, N.zeros(()) + x,
                                   N.full((), 2) + x, N.array([1, 2]), N.asarray(2.),
                                   N.array(True), N.ones(()) * x, N.arange(3.).mean()),
        (np.ones((2, 3), np.float32),)),
    "jnp.array and jnp.copy copy a traced or concrete array with an equation": (
        lambda J, N, L: (lambda c: lambda x: (
            N.array(x), N.copy(x), N.array(x, copy=False), N.asarray(x), x.copy(),
            N.array(c) * x, N.asarray(c) * x, N.asarray(c, dtype=N.int32),
            N.array(x, N.int32), J.grad(lambda x: N.array(x).sum())(x),
            J.vmap(N.array)(x)))(N.ones(2)),
        (np.ones(2, np.float32),)),
    "jnp functions JAX stages as calls print as jit calls, a long one printed once first": (
        lambda J, N, L: lambda x: (N.cumsum(x), N.cumsum(x, axis=1), N.cumprod(x, 0),
                                   N.nancumsum(x), N.linalg.norm(x), N.linalg.norm(x[0]),
                                   N.where(x > 1, x, 0.)),
        (np.arange(6, dtype=np.float32).reshape(2, 3),)),
    "hypot (its _where program shared) and logaddexp (a custom_jvp function) as JAX's": (
        lambda J, N, L: lambda x, y: (N.hypot(x, y), N.logaddexp(x, y),
                                      J.grad(N.logaddexp, argnums=(0, 1))(x, y)),
        (F, np.float32(2.5))),
    "var and std: calls named _var and _std, their program printed once first": (
        lambda J, N, L: lambda x: (N.var(x), N.var(x, axis=0, ddof=1), N.std(x, axis=1)),
        (np.arange(6, dtype=np.float32).reshape(2, 3),)),
    "any and all of booleans: reduce_or and reduce_and": (
        lambda J, N, L: lambda x: (N.any(x > 1), N.all(x > 1, axis=0), (x > 1).any(),
                                   N.any(x > 1, keepdims=True)),
        (np.arange(6, dtype=np.float32).reshape(2, 3),)),
    "broadcasting: lower ranks get leading axes, the operation broadcasts axes of size 1": (
        lambda J, N, L: lambda a, b, c: (a * b, a + b[0], N.where(a > 0, a, b), c * b,
                                         N.broadcast_to(a, (2, 3)),
                                         J.grad(lambda a: (a * b).sum())(a)),
        (np.ones((1, 3), np.float32), np.ones((2, 3), np.float32), np.ones(3, np.float32))),
    "vmap of debug.print slices each element": (
        lambda J, N, L: J.vmap(lambda x: J.debug.print("x={x}", x=x)),
        (np.ones(2, np.float32),)),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_make_jaxpr_prints_as_jax(name):
    make, args = PROGRAMS[name]
    want, got = [str(J.make_jaxpr(make(J, N, L))(*args))
                 for J, N, L in APIS.values()]
    assert got == want


@pytest.mark.parametrize("name", ["literals keep their types", "several inputs and outputs",
                                  "unused results print as _"])
def test_jit_trace_gives_jax_program_and_output_types(name):
    """`jit(f).trace(*args)` (JAX's tracing stage): `.jaxpr` prints as make_jaxpr's,
    `.out_info` gives the output types, `.fun_name` the name, `.lower()` the call's
    lowering, which compiles and runs."""
    make, args = PROGRAMS[name]

    def staged(J, N, L):
        traced = J.jit(make(J, N, L)).trace(*args)
        out_info = [(o.shape, o.dtype) for o in jax.tree_util.tree_leaves(traced.out_info)]
        ran = traced.lower().compile()(*args)
        return str(traced.jaxpr), out_info, traced.fun_name, ran

    want, got = [staged(J, N, L) for J, N, L in APIS.values()]
    assert got[:3] == want[:3]
    for g, w in zip(jax.tree_util.tree_leaves(got[3]), jax.tree_util.tree_leaves(want[3])):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_a_rules_integer_constant_prints_as_a_float():
    # tanh's derivative 1 - tanh(x)**2: JAX's rule's constant is 1.0:f32[]
    for J, N, L in APIS.values():
        assert "sub 1.0:f32[]" in str(J.make_jaxpr(J.grad(N.tanh))(F))


def test_a_program_fits_on_its_line_only_with_its_closing_brace():
    # 68 characters flat, " }" included: flat from width 68 on, broken below.
    widths = range(62, 72)
    want, got = [[J.make_jaxpr(lambda x: N.sin(x) * x)(F).pretty_print(width=w,
                                                                   use_color=False)
                  for w in widths] for J, N, L in APIS.values()]
    assert ["\n" in t for t in want] == [w < 68 for w in widths]
    assert got == want


def test_the_layout_breaks_only_what_does_not_fit():
    text = str(impl.make_jaxpr(lambda x: impl.vjp(inp.sin, x))(1.0))
    assert "\n" not in text and len(text) <= 80
    longer = str(impl.make_jaxpr(PROGRAMS["a program longer than a line"][0](
        impl, inp, ilax))(F))
    assert longer.startswith("{ lambda ; a:f32[]. let\n    b:f32[] = sin a\n")


def _printed_tracers(J, N, capsys):
    def p(x):
        print(x, repr(x), f"{x}")
        return x
    ones = N.ones(2)
    J.jvp(p, (1.0,), (2.0,))
    J.jvp(p, (ones,), (ones,))
    J.grad(p)(1.0)
    J.jit(p)(ones)
    J.vmap(p)(ones)
    J.grad(J.jit(p))(1.0)
    J.jit(J.grad(p))(1.0)
    J.vmap(J.grad(p))(ones)
    J.make_jaxpr(p)(1)
    J.jvp(J.vmap(p), (ones,), (ones,))
    J.vmap(lambda x: J.jvp(p, (x,), (x,)))(ones)
    return capsys.readouterr().out


def test_tracers_print_as_jax(capsys):
    want = _printed_tracers(jax, jjnp, capsys)
    got = _printed_tracers(impl, inp, capsys)
    assert "JitTracer(~int" in want and "GradTracer(" in want
    assert got == want


def _made_inside_jit(J, N, capsys):
    @J.jit
    def f(x):
        shape = N.array(x.shape)
        print(shape, N.asarray(3).astype(N.float32), N.float32(2), shape.prod(),
              N.zeros(()), N.full((), 2), N.array(np.arange(2.)) + 1, N.copy(x))
        return x * shape.prod()
    out = f(N.ones((2, 3)))
    print(out)
    # outside any transformation the same calls make concrete arrays
    c = N.ones(2)
    print(type(N.array([1, 2])).__name__, N.array(c) is c, N.asarray(c) is c,
          N.copy(c) is c, N.array(c, copy=False) is c, N.float32(2))
    return capsys.readouterr().out


def test_arrays_made_inside_jit_print_as_jax_tracers(capsys):
    want = _made_inside_jit(jax, jjnp, capsys)
    got = _made_inside_jit(impl, inp, capsys)
    assert "JitTracer(int64[2])" in want and "ArrayImpl" in want   # (tests run with x64)
    assert got == want


def _concrete_value_errors(J, N):
    attempts = {"int": lambda x: int(N.array(3)), "bool": lambda x: bool(N.array(True)),
                "item": lambda x: N.array(x.shape).prod().item(),
                "tolist": lambda x: N.array([1, 2]).tolist(),
                "numpy": lambda x: np.asarray(N.array([1, 2])),
                "reshape": lambda x: N.reshape(x, N.array([3, 1])),
                "zeros": lambda x: N.zeros(N.array(3))}
    raised = {}
    for name, fn in attempts.items():
        try:
            J.jit(fn)(N.ones(3))
            raised[name] = None
        except Exception as e:   # noqa: BLE001  (the exception type is compared)
            raised[name] = type(e).__name__
    return raised


def test_arrays_made_inside_jit_have_no_concrete_value():
    want, got = _concrete_value_errors(jax, jjnp), _concrete_value_errors(impl, inp)
    assert all(want.values())
    assert got == want


def _reshape_error(J, N):
    try:
        J.jit(lambda x: x.reshape(N.array(x.shape).prod()))(N.ones((2, 3)))
    except TypeError as e:
        return str(e).splitlines()[0]
    return None


def test_reshape_to_a_traced_size_is_jax_type_error():
    # the thinking-in-JAX notebook's cell: JAX's TypeError, word for word
    want, got = _reshape_error(jax, jjnp), _reshape_error(impl, inp)
    assert want is not None and "[JitTracer(int64[])]" in want   # (tests run with x64)
    assert got == want
