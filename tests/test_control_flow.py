"""lax.cond, switch, while_loop, fori_loop, scan, map and associative_scan against JAX:
value, jvp, grad, vmap (batched and unbatched operands, batched predicates and
indices) and jit, nested in each other, plus the IR they stage and the errors JAX
raises for bad input.

Each program is written once against a backend namespace `B` (B.api is `impl` or
`jax`, B.np its numpy, B.lax its lax) and run on both; JAX is the reference.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import impl
import impl.numpy as inp
from impl.primitives import control_flow as cf
from _compare import F32, IMPL, JAX, assert_trees_close, check, stack, x32

# ------------------------------------------------------------------------- cond

def cond_scalar(B):
    def f(x, y):
        return B.lax.cond(B.np.sum(x) > 0, lambda a, b: B.np.sin(a) * b,
                          lambda a, b: a - B.np.cos(b), x, y)
    return f


def cond_pytree(B):
    c = np.arange(3, dtype=F32)           # closed over by both branches

    def f(x, y):
        ops = {"a": x, "b": (y, 2 * y)}
        return B.lax.cond(y > 0.5, lambda o: {"s": o["a"] * o["b"][0] + c, "t": o["b"][1]},
                          lambda o: {"s": B.np.tanh(o["a"]) - c, "t": 3. * o["b"][0]}, ops)
    return f


def cond_const_branch(B):
    # One branch ignores the operand: its tangent is a symbolic zero there.
    def f(x):
        return B.lax.cond(x[0] < 0, lambda a: B.np.zeros_like(a), lambda a: a ** 2, x)
    return f


def cond_int_operand(B):
    def f(x, n):
        return B.lax.cond(n % 2 == 0, lambda a, k: (a * k, k + 1), lambda a, k: (a / k, k),
                          x, n)
    return f


@pytest.mark.parametrize("prog,args", [
    (cond_scalar, (x32(3), F32(1.5))),
    (cond_scalar, (-x32(3) - 2, F32(1.5))),
    (cond_pytree, (x32(3), F32(0.7))),
    (cond_const_branch, (x32(4, seed=3),)),
    (cond_int_operand, (x32(2), np.int32(3))),
], ids=["true", "false", "pytree", "zero_branch", "int_operand"])
def test_cond(prog, args):
    check(prog, *args, eager="grad")


def test_cond_float64():
    check(cond_scalar, np.array([0.3, -0.1], np.float64), np.float64(1.1), rtol=1e-12,
          atol=1e-12, vmap=False)


def switch3(B):
    def f(i, x):
        return B.lax.switch(i, [lambda a: B.np.sin(a), lambda a: a * a,
                                lambda a: B.np.exp(-a)], x)
    return f


@pytest.mark.parametrize("index", [-2, 1, 7])
def test_switch_clamps(index):
    check(switch3, np.int32(index), x32(3), vmap=False)


def test_switch_batched_index():
    # The batched index [-1, 0, 1] and [4, 5, 6] (out of range) under vmap.
    for base in (-1, 4):
        check(switch3, np.int32(base), x32(3), jvp=False, grad=False, eager=False)


def test_switch_operand_keyword_and_single_branch():
    for B in (IMPL, JAX):
        assert float(B.lax.switch(1, [lambda x: x + 1., lambda x: x * 3.], operand=2.)) == 6.
        assert float(B.lax.switch(5, [lambda x: x - 1.], 2.)) == 1.
        assert float(B.lax.cond(True, lambda x: x + 1., lambda x: x, operand=1.)) == 2.


def test_cond_old_five_argument_form():
    out = impl.lax.cond(False, 2., lambda x: x + 1., 5., lambda x: x * 10.)
    assert float(out) == float(jax.lax.cond(False, 2., lambda x: x + 1., 5.,
                                            lambda x: x * 10.))


def test_cond_weak_types_join():
    # A weak (Python float) output joined with a strong float32 one is strong, as in JAX.
    dtype = jax.numpy.asarray(1.0).dtype      # float64 with x64, else float32
    for B in (IMPL, JAX):
        out = B.lax.cond(True, lambda: 1.0, lambda: np.array(2., dtype))
        assert out.dtype == dtype and not out.weak_type
        weak = B.lax.cond(True, lambda: 1.0, lambda: 2.0)
        assert weak.weak_type


def test_cond_stages_both_branches_into_the_ir():
    jaxpr = impl.make_jaxpr(cond_scalar(IMPL))(x32(3), F32(1.))
    (eqn,) = [e for e in jaxpr.eqns if e.primitive is cf.cond_p]
    assert len(eqn.params["branches"]) == 2
    text = str(jaxpr)
    assert "cond[" in text and "sin" in text and "cos" in text


def test_cond_batched_predicate_selects():
    # Both branches run; the IR has no cond, only a select (as JAX does).
    f = impl.vmap(cond_scalar(IMPL))
    jaxpr = impl.make_jaxpr(f)(x32(4, 3), x32(4))
    assert not any(e.primitive is cf.cond_p for e in jaxpr.eqns)
    assert any(e.primitive.name == "select_n" for e in jaxpr.eqns)


def test_cond_batched_predicate_gradient_ignores_the_branch_not_taken():
    # Where x < eps the sqrt branch is not taken, and its derivative at 0 is infinite:
    # the gradient is still finite, as in JAX.
    eps = 1e-3

    def loss(B):
        def safe(x):
            return B.lax.cond(x < eps, lambda _: eps, lambda _: B.np.sqrt(x), ())
        return lambda xs: B.np.sum(B.api.vmap(safe)(xs))
    xs = np.array([0., 0., 0.25, 4.])
    with jax.numpy_dtype_promotion("strict"):
        got, want = impl.grad(loss(IMPL))(xs), jax.grad(loss(JAX))(xs)
        got_jit = impl.jit(impl.grad(loss(IMPL)))(xs)
    assert np.isfinite(want).all()
    assert_trees_close(got, want)
    assert_trees_close(got_jit, want)


def test_batched_switch_gradient_ignores_the_branches_not_taken():
    def loss(B):
        def f(i, x):
            return B.lax.switch(i, [lambda x: B.np.sqrt(x), lambda x: B.np.log(x),
                                    lambda x: x * 2.], x)
        return lambda i, x: B.np.sum(B.api.vmap(f)(i, x))
    i, x = np.array([2, 2, 0, 1], np.int32), np.array([0., -1., 4., 2.])
    with jax.numpy_dtype_promotion("strict"):
        got, want = impl.grad(loss(IMPL), 1)(i, x), jax.grad(loss(JAX), 1)(i, x)
    assert np.isfinite(want).all()
    assert_trees_close(got, want)


# ------------------------------------------------------------------ while_loop

def while_grow(B):
    def f(x, c):
        return B.lax.while_loop(lambda v: B.np.sum(v) < 10., lambda v: v * 1.5 + c, x)
    return f


def while_counter(B):
    def f(n, x):
        def body(carry):
            i, v = carry
            return i + 1, B.np.sin(v) * 1.1 + 0.1 * i
        return B.lax.while_loop(lambda c: c[0] < n, body, (0, x))
    return f


@pytest.mark.parametrize("prog,args", [
    (while_grow, (np.abs(x32(3)) + 0.5, F32(0.25))),
    (while_counter, (np.int32(4), x32(2))),
])
def test_while_loop(prog, args):
    # Batched operands make the condition batched: the loop runs until every element
    # is done (different trip counts per element).
    check(prog, *args, grad=False)


def test_while_linearize():
    f_i, f_j = while_grow(IMPL), while_grow(JAX)
    args = (np.abs(x32(3)) + 0.5, F32(0.25))
    yi, lin_i = impl.linearize(f_i, *args)
    yj, lin_j = jax.linearize(f_j, *args)
    assert_trees_close(yi, yj)
    t = (x32(3, seed=5), F32(0.5))
    assert_trees_close(lin_i(*t), lin_j(*t))


def test_while_reverse_mode_raises_as_jax():
    args = (np.abs(x32(3)) + 0.5, F32(0.25))
    loss = lambda B: lambda x, c: B.np.sum(while_grow(B)(x, c))  # noqa: E731
    with pytest.raises(ValueError) as ei:
        impl.grad(loss(IMPL))(*args)
    with pytest.raises(ValueError) as ej:
        jax.grad(loss(JAX))(*args)
    assert str(ei.value) == str(ej.value)


def test_while_batched_predicate_masks_finished_elements():
    # Elements that finish early keep their value while the others go on.
    n = np.array([0, 2, 5], np.int32)
    out = impl.vmap(while_counter(IMPL), in_axes=(0, None))(n, x32(2))
    want = jax.vmap(while_counter(JAX), in_axes=(0, None))(n, x32(2))
    assert_trees_close(out, want)
    assert list(np.asarray(out[0])) == [0, 2, 5]


# -------------------------------------------------------------------- fori_loop

def fori_static(B):
    def f(x, w):
        return B.lax.fori_loop(0, 5, lambda i, v: B.np.tanh(v * w + i), x)
    return f


def test_fori_loop_static_is_a_reverse_differentiable_scan():
    check(fori_static, x32(3), F32(0.8))
    jaxpr = impl.make_jaxpr(fori_static(IMPL))(x32(3), F32(0.8))
    assert [e.primitive for e in jaxpr.eqns] == [cf.scan_p]


def fori_dynamic(B):
    def f(n, x):
        return B.lax.fori_loop(1, n, lambda i, v: v * 0.9 + B.np.cos(v) / i, x)
    return f


def test_fori_loop_dynamic_bounds_is_a_while_loop():
    args = (np.int32(4), x32(3))
    fi, fj = fori_dynamic(IMPL), fori_dynamic(JAX)
    jitted = impl.jit(fi)
    assert_trees_close(jitted(*args), fj(*args))
    jaxpr = impl.make_jaxpr(fi)(*args)
    assert any(e.primitive is cf.while_p for e in jaxpr.eqns)
    t = (np.zeros((), jax.dtypes.float0), x32(3, seed=1))
    assert_trees_close(impl.jvp(impl.jit(fi), args, t), jax.jvp(jax.jit(fj), args, t))
    assert_trees_close(impl.vmap(impl.jit(fi), (0, None))(np.array([1, 3, 6], np.int32),
                                                          args[1]),
                       jax.vmap(fj, (0, None))(np.array([1, 3, 6], np.int32), args[1]))
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        impl.grad(lambda x: inp.sum(impl.jit(fi)(np.int32(4), x)))(args[1])


def test_fori_loop_unroll_needs_static_bounds():
    def f(B, n):
        return B.lax.fori_loop(0, n, lambda i, v: v + 1., 0., unroll=2)
    with pytest.raises(ValueError) as ej:
        jax.jit(lambda n: f(JAX, n))(3)
    with pytest.raises(ValueError) as ei:
        impl.jit(lambda n: f(IMPL, n))(3)
    assert str(ei.value) == str(ej.value)


# ------------------------------------------------------------------------- scan

def scan_rnn(B, reverse=False, unroll=1):
    w = x32(3, 3, seed=7) * 0.5          # a closed-over constant

    def f(h0, xs, u):
        def cell(h, x):
            h = B.np.tanh(h @ w + x * u)
            return h, B.np.sum(h * h)
        return B.lax.scan(cell, h0, xs, reverse=reverse, unroll=unroll)
    return f


def scan_pytree(B):
    def f(init, xs):
        def body(c, x):
            a, (b, n) = c["a"], c["bn"]
            a = a * x["p"] + B.np.sin(b)
            b = b + x["q"][0] * a
            return {"a": a, "bn": (b, n + 1)}, (a * b, {"n": n, "q": x["q"][1]})
        return B.lax.scan(body, init, xs)
    return lambda a, b, p, q: f({"a": a, "bn": (b, np.int32(0))}, {"p": p, "q": (q, 2. * q)})


def scan_length_only(B):
    def f(x):
        return B.lax.scan(lambda c, _: (c * 0.9 + 1., c), x, None, length=4)
    return f


def scan_weak_init(B):
    # A Python-scalar initial carry takes the float32 type the loop gives it.
    def f(xs):
        return B.lax.scan(lambda c, x: (c + x, c * 2), 0, xs)
    return f


@pytest.mark.parametrize("prog,args", [
    (scan_rnn, (x32(3), x32(5, 3, seed=1), F32(0.7))),
    (lambda B: scan_rnn(B, reverse=True), (x32(3), x32(5, 3, seed=1), F32(0.7))),
    (lambda B: scan_rnn(B, unroll=2), (x32(3), x32(5, 3, seed=1), F32(0.7))),
    (scan_pytree, (x32(2), x32(2, seed=2), x32(4, 2, seed=3), x32(4, seed=4))),
    (scan_length_only, (x32(2),)),
    (scan_weak_init, (x32(4),)),
], ids=["rnn", "reverse", "unroll2", "pytree", "length_only", "weak_init"])
def test_scan(prog, args, request):
    unrolled = "unroll2" in request.node.name      # batching passes unroll through as is
    check(prog, *args, vmap=not unrolled, eager="grad",
          vmap_axes=[(None, 1, None)] if len(args) == 3 else ())


def scan_split_transpose(B, split=True):
    """A scan whose body closes over w and u (an rnn cell), with the transpose split in
    two loops on impl; JAX 0.10 accepts the flag and transposes unsplit."""
    w = x32(3, 3, seed=7) * 0.5

    def loss(h0, xs, u):
        def cell(h, x):
            h = B.np.tanh(h @ (w * u) + x)
            return h, B.np.sum(h * w[0])
        h, ys = B.lax.scan(cell, h0, xs, reverse=True, _split_transpose=split)
        return B.np.sum(h) + B.np.sum(ys * ys)
    return loss


def test_scan_split_transpose_gives_the_unsplit_values():
    args = (x32(3), x32(5, 3, seed=1), F32(0.7))
    with jax.numpy_dtype_promotion("strict"):
        got, want = [B.api.jit(B.api.value_and_grad(scan_split_transpose(B),
                                                    argnums=(0, 1, 2)))(*args)
                     for B in (IMPL, JAX)]
    assert_trees_close(got, want)


def test_scan_split_transpose_is_two_loops():
    args = (x32(3), x32(6, 3, seed=1), F32(0.7))

    def scans(split):
        ir = impl.make_jaxpr(impl.grad(scan_split_transpose(IMPL, split),
                                       argnums=(0, 1, 2)))(*args)
        return [(e.params["reverse"], e.params["num_carry"])
                for e in ir.eqns if e.primitive is cf.scan_p]
    # forward; the carry recurrence; the steps' cotangents of the closed-over values,
    # a loop without carries
    assert scans(True) == [(True, 1), (False, 1), (False, 0)]
    assert scans(False) == [(True, 1), (False, 2)]    # u's cotangent accumulated


def test_weak_initial_carry_takes_a_narrow_integer_dtype_under_strict_promotion():
    def prog(B):
        xs = np.ones(5, np.int8)
        c, ys = B.lax.scan(lambda c, x: (c + x, x), 0, xs)
        w = B.lax.while_loop(lambda v: v < 2, lambda v: v + np.int16(1), 0)
        return c, ys, w
    with jax.numpy_dtype_promotion("strict"):
        got, want = prog(IMPL), prog(JAX)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.weak_type == w.weak_type
        np.testing.assert_array_equal(g, w)


def test_scan_float64():
    xs = np.random.RandomState(0).normal(size=(6, 3))
    check(scan_rnn, np.ones(3), xs, np.float64(0.3), rtol=1e-12, atol=1e-12, vmap=False)


def test_scan_unroll_true_and_zero_length():
    for B in (IMPL, JAX):
        c, ys = B.lax.scan(lambda c, x: (c + x, c), 0., np.ones((3,), F32), unroll=True)
        assert float(c) == 3.
        c, ys = B.lax.scan(lambda c, x: (c + x, c), F32(1.), np.ones((0,), F32))
        assert float(c) == 1. and ys.shape == (0,)


def test_zero_length_loops_under_disable_jit():
    # Without jit a fori_loop of no steps returns its initial value, while a scan of
    # length 0 raises (its output type would be unknown), as in JAX.
    def zero_scan(B):
        return B.lax.scan(lambda c, x: (c + x, x), 0., np.array([]))[0]
    with jax.disable_jit(), jax.numpy_dtype_promotion("strict"):
        got, want = [B.lax.fori_loop(0, 0, lambda i, x: x + i, 1.) for B in (IMPL, JAX)]
        assert type(got) is type(want) and got == want == 1.
        with pytest.raises(ValueError) as ei:
            zero_scan(IMPL)
        with pytest.raises(ValueError) as ej:
            zero_scan(JAX)
        assert str(ei.value) == str(ej.value)
        got, want = [B.lax.fori_loop(0, 3, lambda i, x: x + i, 1.) for B in (IMPL, JAX)]
        assert float(got) == float(want) == 4.
    assert float(zero_scan(IMPL)) == float(zero_scan(JAX)) == 0.


def _count(jaxpr, prim):
    return sum(e.primitive is prim for e in jaxpr.eqns)


def test_scan_is_not_unrolled_and_linearize_of_a_scan_is_a_scan():
    f = lambda h, xs, u: inp.sum(scan_rnn(IMPL)(h, xs, u)[1])  # noqa: E731
    args = (x32(3), x32(50, 3, seed=1), F32(0.7))
    staged = impl.make_jaxpr(f)(*args)
    assert _count(staged, cf.scan_p) == 1
    grad_ir = impl.make_jaxpr(impl.grad(f, argnums=(0, 1, 2)))(*args)
    # One forward scan saving residuals per iteration, one backward (reverse) scan.
    scans = [e for e in grad_ir.eqns if e.primitive is cf.scan_p]
    assert [e.params["reverse"] for e in scans] == [False, True]
    assert len(grad_ir.eqns) < 20          # independent of the 50 steps
    # The forward scan stacks its residuals: outputs with a leading axis of 50 beyond
    # the scan's own ys.
    fwd = scans[0]
    assert sum(v.aval.shape[:1] == (50,) for v in fwd.outvars) > 1
    # linearize: the linear program is itself one scan.
    _, lin = impl.linearize(f, *args)
    lin_ir = impl.make_jaxpr(lin)(*args)
    assert _count(lin_ir, cf.scan_p) == 1


def test_scan_lowers_to_one_xla_while_loop():
    f = impl.jit(lambda h, xs, u: scan_rnn(IMPL)(h, xs, u))
    text = f.lower(x32(3), x32(40, 3, seed=1), F32(0.7)).as_text()
    assert text.count("stablehlo.while") == 1
    assert text.count("stablehlo.tanh") == 1


def test_scan_residual_of_a_const_is_not_stacked():
    # d(x * w)/dx needs w in every step: it is passed once, not stacked per step.
    def f(x, w):
        return impl.lax.scan(lambda c, _: (c * w, None), x, None, length=100)[0]
    ir = impl.make_jaxpr(impl.grad(f))(F32(1.), F32(0.99))
    fwd = [e for e in ir.eqns if e.primitive is cf.scan_p]
    assert all(v.aval.shape != (100,) for v in fwd[0].outvars)
    assert_trees_close(impl.grad(f, argnums=(0, 1))(F32(1.), F32(0.99)),
                       jax.grad(lambda x, w: jax.lax.scan(lambda c, _: (c * w, None), x, None,
                                                          length=100)[0],
                                argnums=(0, 1))(F32(1.), F32(0.99)))


def test_scan_loop_invariant_residuals_are_hoisted():
    # W.T and cos(W[0]) are computed in the body from the const W alone: the gradient
    # computes them once before the loops instead of saving a copy per step.
    def prog(B):
        def f(w, h0, xs):
            cell = lambda h, x: (B.np.tanh(h @ w.T + x * B.np.cos(w[0])), None)  # noqa
            return B.lax.scan(cell, h0, xs)[0]
        return f
    args = (x32(3, 3) * 0.4, x32(2, 3), x32(50, 2, 3, seed=1))
    loss = lambda B: lambda *a: B.np.sum(prog(B)(*a))  # noqa: E731
    ir = impl.make_jaxpr(impl.grad(loss(IMPL)))(*args)
    fwd = [e for e in ir.eqns if e.primitive is cf.scan_p][0]
    per_step = [v.aval.shape[1:] for v in fwd.outvars if v.aval.shape[:1] == (50,)]
    assert per_step == [(2, 3)] * len(per_step)       # nothing of W's shapes per step
    check(prog, *args, vmap=False, eager="grad")


def test_scan_print_runs_only_on_the_loops_values_under_differentiation(capsys):
    # Splitting the body for linearize and grad runs no print on placeholder values.
    def prog(B):
        def f(x, w):
            def body(c, y):
                B.api.debug.print("c={} y={y}", c, y=y)
                return c * w + y, c
            c, ys = B.lax.scan(body, x, np.arange(2., dtype=F32))
            return B.np.sum(ys) + c
        return f
    outs = []
    for B in (JAX, IMPL):
        B.api.linearize(prog(B), F32(1.), F32(2.))
        B.api.grad(prog(B))(F32(1.), F32(2.))
        B.api.effects_barrier()
        outs.append(capsys.readouterr().out)
    assert outs[1] == outs[0] == "c=1.0 y=0.0\nc=2.0 y=1.0\n" * 2


# -------------------------------------------------------------- lax.map & friends

def map_plain(B):
    return lambda xs: B.lax.map(lambda x: B.np.sin(x) * B.np.sum(x), xs)


def map_batched(batch_size):
    def prog(B):
        return lambda xs, s: B.lax.map(lambda x: {"y": B.np.cos(x["a"]) * s, "z": x["b"]},
                                       {"a": xs, "b": xs * 2}, batch_size=batch_size)
    return prog


def test_map():
    check(map_plain, x32(5, 3))


@pytest.mark.parametrize("batch_size", [0, 2, 5, 7])
def test_map_batch_size(batch_size):
    check(map_batched(batch_size), x32(5, 3), F32(1.3), vmap=batch_size == 2, eager=False)


def assoc_cumsum(B, reverse=False, axis=0):
    return lambda x: B.lax.associative_scan(B.np.add, x, reverse=reverse, axis=axis)


def assoc_linear_recurrence(B):
    # h_t = a_t h_{t-1} + b_t as an associative combination of (a, b) pairs.
    def combine(p, q):
        return p[0] * q[0], q[0] * p[1] + q[1]
    return lambda a, b: B.lax.associative_scan(combine, (a, b))


@pytest.mark.parametrize("prog,args", [
    (assoc_cumsum, (x32(7, 2),)),
    (lambda B: assoc_cumsum(B, reverse=True), (x32(8, 2),)),
    (lambda B: assoc_cumsum(B, axis=1), (x32(2, 5),)),
    (assoc_linear_recurrence, (x32(6, seed=1), x32(6, seed=2))),
], ids=["cumsum_odd", "reverse_even", "axis1", "pairs"])
def test_associative_scan(prog, args):
    check(prog, *args, eager=False)   # eagerly it is plain lax operations


# ---------------------------------------------------------------- compositions

def scan_with_cond(B):
    def f(xs, t):
        def body(c, x):
            c = B.lax.cond(x > t, lambda v: v * x, lambda v: B.np.sin(v) + x, c)
            return c, c * 2.
        return B.lax.scan(body, F32(1.), xs)
    return f


def cond_with_scan(B):
    def f(p, xs):
        def run(v):
            return B.lax.scan(lambda c, x: (c * B.np.cos(x) + x, c), v[0], v)
        return B.lax.cond(p > 0, run, lambda v: (B.np.sum(v), v * v), xs)
    return f


def scan_in_scan(B):
    def f(xs, w):
        def outer(c, row):
            inner_c, ys = B.lax.scan(lambda a, x: (B.np.tanh(a * w + x), a), c, row)
            return inner_c, ys
        return B.lax.scan(outer, F32(0.1), xs)
    return f


def scan_with_while(B):
    def f(xs):
        def body(c, x):
            c = B.lax.while_loop(lambda v: v < 4., lambda v: v * 2. + x * x, c)
            return c * 0.1, c
        return B.lax.scan(body, F32(0.5), xs)
    return f


def switch_in_fori(B):
    def f(x):
        return B.lax.fori_loop(0, 6, lambda i, v: B.lax.switch(
            i % 3, [lambda a: a * 1.1, B.np.sin, lambda a: a - 0.2], v), x)
    return f


@pytest.mark.parametrize("prog,args,grad", [
    (scan_with_cond, (x32(6), F32(0.1)), True),
    (cond_with_scan, (F32(1.), x32(4)), True),
    (cond_with_scan, (F32(-1.), x32(4)), True),
    (scan_in_scan, (x32(3, 4), F32(0.9)), True),
    (scan_with_while, (x32(5),), False),
    (switch_in_fori, (x32(3),), True),
], ids=["scan_cond", "cond_scan_t", "cond_scan_f", "scan_scan", "scan_while",
        "fori_switch"])
def test_nested(prog, args, grad):
    check(prog, *args, grad=grad)


def test_composed_transformations():
    f = lambda B: lambda xs, t: B.np.sum(scan_with_cond(B)(xs, t)[1])  # noqa: E731
    xs, t = x32(5), F32(0.0)
    batch = stack(xs)
    cases = [
        (lambda m, g: m.jit(m.grad(g)), (xs, t)),
        (lambda m, g: m.vmap(m.grad(g), (0, None)), (batch, t)),
        (lambda m, g: m.grad(lambda a, b: m.numpy.sum(m.vmap(g, (0, None))(a, b))), (batch, t)),
        (lambda m, g: m.jacfwd(m.grad(g)), (xs, t)),
        (lambda m, g: m.jit(m.vmap(m.jit(g), (0, None))), (batch, t)),
    ]
    for make, args in cases:
        assert_trees_close(impl.jit(make(impl, f(IMPL)))(*args),
                           jax.jit(make(jax, f(JAX)))(*args), 1e-4, 1e-4)


def test_vmap_collective_inside_scan_body():
    # psum over the vmap axis from inside a scan body whose operands are unbatched.
    def f(B, x):
        def body(c, _):
            return c + B.lax.psum(1., "i"), None
        return B.lax.scan(body, x, None, length=3)[0]
    xs = np.arange(4, dtype=F32)
    out = impl.vmap(lambda x: f(IMPL, F32(0.)) + x, axis_name="i")(xs)
    want = jax.vmap(lambda x: f(JAX, F32(0.)) + x, axis_name="i")(xs)
    assert_trees_close(out, want)


# ------------------------------------------------ values that only pass through

def _forwarding_cond(B):
    def f(x, y):
        return B.lax.cond(x < 3, lambda x, y: (x * 2, y), lambda x, y: (x * 3, y), x, y)
    return f


def test_cond_forwards_an_operand_every_branch_returns_unchanged():
    # Under a batched predicate, y (unbatched) only passes through: it comes out
    # unbatched, so out_axes=None works, and is y itself.
    x, y = np.arange(3, dtype=np.int32), jax.numpy.asarray(3.)
    with jax.numpy_dtype_promotion("strict"):
        for B in (IMPL, JAX):
            x2, y2 = B.api.vmap(_forwarding_cond(B), (0, None), (0, None))(x, y)
            assert y2 is y
            np.testing.assert_array_equal(x2, [0, 2, 4])


def test_cond_output_a_branch_changes_comes_out_batched():
    # One branch returns y + 0: not a pass-through, so batched in JAX and impl.
    def prog(B):
        def f(x, y):
            return B.lax.cond(x < 3, lambda x, y: (x, y), lambda x, y: (x, y + 0.), x, y)
        return f
    x, y = np.arange(3, dtype=np.int32), F32(3.)
    with jax.numpy_dtype_promotion("strict"):
        for B in (IMPL, JAX):
            with pytest.raises(ValueError, match="out_axes"):
                B.api.vmap(prog(B), (0, None), (0, None))(x, y)


def test_scan_readonly_carry_stays_unbatched_under_a_batched_predicate():
    def prog(B):
        def f(x, y):
            def g(_, y):
                return B.lax.scan(lambda y, _: (y, None), y, None, length=1)[0]
            return B.lax.cond(x < 0, g, g, x, y)
        return f
    xs = np.arange(3, dtype=F32)
    with jax.numpy_dtype_promotion("strict"):
        got = impl.vmap(prog(IMPL), (0, None), None)(xs, F32(3.))
        want = jax.vmap(prog(JAX), (0, None), None)(xs, F32(3.))
    assert_trees_close(got, want)


def test_while_readonly_carry_stays_unbatched_under_a_batched_condition():
    def prog(B):
        def f(w, x, c_max):
            def body(val):
                c, x, w = val
                return c + 1, x @ w, w
            _, x, w = B.lax.while_loop(lambda val: val[0] < c_max, body, (0, x, w))
            return w, x
        return f
    w, xs, c_maxs = np.ones((2, 2), F32), x32(4, 2), np.arange(4, dtype=np.int32)
    with jax.numpy_dtype_promotion("strict"):
        got = impl.vmap(prog(IMPL), (None, 0, 0), (None, 0))(w, xs, c_maxs)
        want = jax.vmap(prog(JAX), (None, 0, 0), (None, 0))(w, xs, c_maxs)
    assert_trees_close(got, want)
    np.testing.assert_array_equal(got[0], w)


def scan_passthrough(B):
    # w is a carry the body never changes, xs come back out as ys.
    def f(c, w, xs):
        return B.lax.scan(lambda cw, x: ((cw[0] * x + cw[1], cw[1]), (x, cw[0])), (c, w), xs)
    return f


def while_passthrough(B):
    # w is a carry the body never changes and the condition does not read.
    def f(c, w):
        return B.lax.while_loop(lambda v: B.np.sum(v[0]) < 10., lambda v: (v[0] * 1.5 + v[1], v[1]),
                                (c, w))
    return f


def cond_passthrough(B):
    def f(p, x, y):
        return B.lax.cond(p > 0, lambda x, y: (B.np.sin(x), y), lambda x, y: (x * y, y),
                          x, y)
    return f


@pytest.mark.parametrize("prog,args,grad", [
    (scan_passthrough, (x32(3), F32(0.5), x32(4, 3, seed=1)), True),
    (while_passthrough, (np.abs(x32(3)) + 0.5, F32(0.25)), False),
    (cond_passthrough, (F32(1.), x32(3), F32(0.7)), True),
    (cond_passthrough, (F32(-1.), x32(3), F32(0.7)), True),
], ids=["scan", "while", "cond_t", "cond_f"])
def test_pass_through_values_under_transformations(prog, args, grad):
    check(prog, *args, grad=grad)


# ------------------------------------------------------------------------ errors

def _errors(fn):
    """The exception impl raises and the one JAX raises for fn(B)."""
    got = []
    for B in (IMPL, JAX):
        with pytest.raises(Exception) as e:
            fn(B)
        got.append(e.value)
    return got


def _same_error(fn, exact=True):
    ei, ej = _errors(fn)
    assert type(ei).__name__ == type(ej).__name__ or isinstance(ei, type(ej)), (ei, ej)
    if exact:
        assert str(ei) == str(ej)
    return ei, ej


def _branch_f32(x):
    return x * 2.


def _branch_i32(x):
    return np.int32(1)


def _branch_tuple(x):
    return (x, x)


@pytest.mark.parametrize("fn", [
    lambda B: B.lax.cond(True, _branch_f32, _branch_i32, F32(1.)),
    lambda B: B.lax.cond(True, _branch_f32, _branch_tuple, F32(1.)),
    lambda B: B.lax.switch(0, [_branch_f32, _branch_f32, _branch_i32], F32(1.)),
    lambda B: B.lax.cond(np.ones(2, bool), _branch_f32, _branch_f32, F32(1.)),
    lambda B: B.lax.cond(None, _branch_f32, _branch_f32, F32(1.)),
    lambda B: B.lax.cond(np.complex64(1), _branch_f32, _branch_f32, F32(1.)),
    lambda B: B.lax.cond(True, 1., _branch_f32, F32(1.)),
    lambda B: B.lax.cond(True, _branch_f32, _branch_f32, 1., operand=2.),
    lambda B: B.lax.switch(F32(1.), [_branch_f32, _branch_f32], F32(1.)),
    lambda B: B.lax.switch(np.zeros(2, np.int32), [_branch_f32, _branch_f32], F32(1.)),
    lambda B: B.lax.switch(0, [], F32(1.)),
    lambda B: B.lax.switch(0, [_branch_f32, 3], F32(1.)),
], ids=["cond_types", "cond_trees", "switch_types", "pred_shape", "pred_none",
        "pred_complex", "not_callable", "operand_and_operands", "index_float",
        "index_shape", "no_branches", "branch_not_callable"])
def test_cond_errors_match_jax(fn):
    _same_error(fn)


def _carry_to_int(c, x):
    return c.astype(np.int32), x


def _carry_to_pair(c, x):
    return (c, c), x


def _not_a_pair(c, x):
    return c


def _cond_vector(v):
    return v > 0


def _cond_float(v):
    return v[0] * 1.


@pytest.mark.parametrize("fn", [
    lambda B: B.lax.scan(_carry_to_int, F32(0.), x32(3)),
    lambda B: B.lax.scan(_not_a_pair, F32(0.), x32(3)),
    lambda B: B.lax.scan(lambda c, x: (c, x), F32(0.), (x32(3), x32(4))),
    lambda B: B.lax.scan(lambda c, x: (c, x), F32(0.), x32(3), length=5),
    lambda B: B.lax.scan(lambda c, x: (c, x), F32(0.), None),
    lambda B: B.lax.scan(lambda c, x: (c, x), F32(0.), x32(3), unroll=-1),
    lambda B: B.lax.scan(3, F32(0.), x32(3)),
    lambda B: B.lax.while_loop(lambda c: c < 3, lambda c: c + 1., np.int32(0)),
    lambda B: B.lax.while_loop(_cond_vector, lambda v: v, x32(2)),
    lambda B: B.lax.while_loop(_cond_float, lambda v: v, x32(2)),
    lambda B: B.lax.while_loop(lambda v: (v[0] > 0, v[0] > 1), lambda v: v, x32(2)),
    lambda B: B.lax.fori_loop(np.int32(0), np.int16(3), lambda i, v: v, F32(0.)),
    lambda B: B.lax.fori_loop(0, 3, None, F32(0.)),
], ids=["carry_dtype", "body_not_pair", "xs_lengths", "length_mismatch",
        "no_length", "unroll_negative", "f_not_callable", "while_carry_dtype",
        "cond_vector", "cond_float", "cond_tree", "fori_bound_types", "fori_body"])
def test_loop_errors_match_jax(fn):
    _same_error(fn)


def test_scan_over_a_scalar_error():
    # JAX: ValueError for a Python scalar; IndexError (with no message) for a 0-d array.
    ei, _ = _same_error(lambda B: B.lax.scan(lambda c, x: (c, x), F32(0.), 1.))
    ei, _ = _same_error(lambda B: B.lax.scan(lambda c, x: (c, x), F32(0.), F32(1.)),
                        exact=False)
    assert "no leading axis to scan over" in str(ei)


def test_scan_carry_structure_error():
    # JAX describes the carry leaf by its abstract-value class; impl says "pytree leaf".
    ei, ej = _same_error(lambda B: B.lax.scan(_carry_to_pair, F32(0.), x32(3)), exact=False)
    for e in (ei, ej):
        assert str(e).startswith("scan body function carry input and carry output must have "
                                 "the same pytree structure, but they differ:\n\nThe input "
                                 "carry c is a ")
        assert "but the corresponding component of the carry output is a <class 'tuple'>, so " \
               "their Python types differ." in str(e)


def test_scan_error_names_the_carry_component():
    def body(carry, x):
        return {"h": carry["h"].astype(np.float16), "n": carry["n"]}, x
    ei, _ = _same_error(lambda B: B.lax.scan(body, {"h": x32(2), "n": np.int32(0)}, x32(3)))
    assert "carry['h']" in str(ei) and "float32[2]" in str(ei) and "float16[2]" in str(ei)


def test_primitive_rejects_mismatched_bodies():
    # A hand-built scan whose body does not match its operands fails with a TypeError
    # naming the types, not deep inside jax.lax.
    jaxpr = impl.make_jaxpr(lambda c, x: (c + x, c))(F32(0.), F32(0.))
    with pytest.raises(TypeError, match="scan: operands"):
        cf.scan_p.bind(np.int32(0), x32(3), jaxpr=jaxpr, length=3, reverse=False, unroll=1,
                       num_consts=0, num_carry=1, _split_transpose=False)
    with pytest.raises(TypeError, match="leading axis of length 4"):
        cf.scan_p.bind(F32(0.), x32(3), jaxpr=jaxpr, length=4, reverse=False, unroll=1,
                       num_consts=0, num_carry=1, _split_transpose=False)


# ------------------------------------------------------- broken rules are caught

def test_check_catches_a_scan_lowering_that_ignores_reverse(monkeypatch):
    from impl.interpreters import lowering
    rule = lowering.lowering_rules[cf.scan_p]
    monkeypatch.setitem(lowering.lowering_rules, cf.scan_p,
                        lambda *a, **p: rule(*a, **{**p, "reverse": False}))
    with pytest.raises(AssertionError):
        check(lambda B: scan_rnn(B, reverse=True), x32(3), x32(5, 3, seed=1), F32(0.7),
              jvp=False, grad=False, vmap=False, eager=False)


def test_check_catches_a_scan_transpose_that_runs_forwards(monkeypatch):
    from impl.interpreters import ad
    rule = ad.transpose_rules[cf.scan_p]
    monkeypatch.setitem(ad.transpose_rules, cf.scan_p,
                        lambda cts, *a, **p: rule(cts, *a, **{**p, "reverse": True}))
    with pytest.raises(AssertionError):
        check(scan_rnn, x32(3), x32(5, 3, seed=1), F32(0.7), jvp=False, vmap=False,
              eager=False)


def test_check_catches_a_cond_batching_rule_that_ignores_the_batched_index(monkeypatch):
    from impl.interpreters import batching
    rule = batching.batching_rules[cf.cond_p]

    def broken(axis_data, vals, dims, **params):
        # Pretends the index is unbatched by using its first element only.
        if dims[0] is not None:
            vals = [batching.moveaxis(vals[0], dims[0], 0)[0]] + list(vals[1:])
            dims = [None] + list(dims[1:])
        return rule(axis_data, vals, dims, **params)
    monkeypatch.setitem(batching.batching_rules, cf.cond_p, broken)
    with pytest.raises(AssertionError):
        # Batch elements that take different branches.
        x = x32(3)
        check(cond_scalar, x, F32(1.5), jvp=False, grad=False, eager=False,
              batched=(np.stack([x, -x - 3, x + 3]), np.array([1.5, 0.5, 2.], F32)))


COND_WEAK = {
    "eager": lambda J, N, p: J.lax.cond(p, lambda: 1.0, lambda: N.float32(2)),
    "eager, the weak branch first": lambda J, N, p: J.lax.cond(p, lambda: N.float32(2),
                                                              lambda: 1.0),
    "jit": lambda J, N, p: J.jit(lambda p: J.lax.cond(p, lambda: 1.0, lambda: N.float32(2)))(p),
    "switch": lambda J, N, p: J.lax.switch(int(p), [lambda: 1.0, lambda: N.float32(2)]),
    "vmap": lambda J, N, p: J.vmap(lambda q: J.lax.cond(q, lambda: 1.0, lambda: N.float32(2)))(
        np.array([p, not p])),
    "grad": lambda J, N, p: J.grad(lambda x: J.lax.cond(p, lambda x: x * 2.0,
                                                        lambda x: N.float32(3.0) * x, x))(1.0),
}


@pytest.mark.parametrize("p", [True, False])
@pytest.mark.parametrize("name", COND_WEAK)
def test_cond_result_is_typed_as_its_first_branch_as_in_jax(name, p):
    """Branches may differ in weak type; the cond's result is typed as the first
    branch's (false_fun, branch 0), whichever branch runs, as in JAX."""
    import jax.numpy as jjnp
    with jax.enable_x64(False):   # Python floats are float32, as the branches' other
        want = COND_WEAK[name](jax, jjnp, p)
        got = COND_WEAK[name](impl, inp, p)
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
