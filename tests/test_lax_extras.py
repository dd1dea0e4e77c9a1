"""impl.lax.optimization_barrier, reduce_precision, reduce, custom_linear_solve and
custom_root against jax.lax: values, jit, jvp, grad and vmap (tests/_against_jax, with
float64 finite differences where the derivative is the point), the primitives make_jaxpr
shows, and JAX's exception types for bad input."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from jax import lax as jlax

import impl
from impl import lax as ilax

from _against_jax import assert_close, check_transforms, rng_for

jax.config.update("jax_enable_x64", True)

F64 = np.float64
TOL = dict(rtol=1e-9, atol=1e-10)


def _u(*shape, key="u", lo=-1.0, hi=1.0):
    return rng_for(key, *shape).uniform(lo, hi, shape).astype(F64)


def _prims(jaxpr):
    return [e.primitive.name if hasattr(e.primitive, "name") else str(e.primitive)
            for e in jaxpr.eqns]


def _both(fn):
    """fn(lax) for impl's lax and JAX's: the same program on each."""
    return lambda *args: fn(ilax, *args), lambda *args: fn(jlax, *args)


# ------------------------------------------------------------ optimization_barrier

def _barrier_program(L, x, y):
    a, (b, c) = L.optimization_barrier((L.sin(x), (x * y, 3.0)))
    return a * b + c


def test_optimization_barrier_transforms():
    mine, theirs = _both(_barrier_program)
    check_transforms("optimization_barrier", mine, theirs, (_u(4), _u(4, key="y")), fd=True)


def test_optimization_barrier_primitive_in_jaxprs():
    x = _u(3)
    f = lambda L: (lambda x: L.optimization_barrier([x, 2 * x])[1])  # noqa: E731
    assert _prims(impl.make_jaxpr(f(ilax))(x)) == _prims(jax.make_jaxpr(f(jlax))(x))
    # its jvp puts the tangents through a barrier of their own
    jvp_mine = impl.make_jaxpr(lambda x: impl.jvp(f(ilax), (x,), (x,)))(x)
    jvp_theirs = jax.make_jaxpr(lambda x: jax.jvp(f(jlax), (x,), (x,)))(x)
    assert (_prims(jvp_mine).count("optimization_barrier")
            == _prims(jvp_theirs).count("optimization_barrier") == 2)
    # and its transpose the cotangents (impl drops the unused forward barrier)
    grad_mine = impl.make_jaxpr(impl.grad(lambda x: f(ilax)(x).sum()))(x)
    assert "optimization_barrier" in _prims(grad_mine)


def test_optimization_barrier_keeps_structure_and_integers():
    tree = {"a": np.arange(3), "b": (np.float32(2.0), _u(2))}
    got = ilax.optimization_barrier(tree)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(tree)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(tree)):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)
    # an integer operand under jvp: no tangent to hold back, the float one still flows
    f = lambda L, i, x: L.optimization_barrier((i, x))[1] * 2  # noqa: E731
    mine = impl.jvp(lambda x: f(ilax, np.arange(2), x), (_u(2),), (np.ones(2),))
    theirs = jax.jvp(lambda x: f(jlax, np.arange(2), x), (_u(2),), (np.ones(2),))
    assert_close(mine, theirs, TOL)


# ---------------------------------------------------------------- reduce_precision

@pytest.mark.parametrize("bits", [(5, 10), (8, 7), (11, 52)])
def test_reduce_precision_transforms(bits):
    mine, theirs = _both(lambda L, x: L.reduce_precision(x * 3.3, *bits))
    check_transforms(f"reduce_precision{bits}", mine, theirs, (_u(5),))


def test_reduce_precision_jaxpr_and_weak_type():
    x = _u(3)
    f = lambda L: (lambda x, t: jax.tree_util.tree_leaves(  # noqa: E731
        (impl if L is ilax else jax).jvp(lambda y: L.reduce_precision(y, 5, 2), (x,), (t,))))
    assert (_prims(impl.make_jaxpr(f(ilax))(x, x))
            == _prims(jax.make_jaxpr(f(jlax))(x, x))
            == ["reduce_precision", "reduce_precision"])
    got, want = ilax.reduce_precision(2.5, 5, 2), jlax.reduce_precision(2.5, 5, 2)
    assert_close(got, want, TOL)
    assert impl.numpy.asarray(got).weak_type == want.weak_type


@pytest.mark.parametrize("args", [(np.arange(3), 5, 10), (np.ones(3), 0, 10),
                                  (np.ones(3), 5, -1), (np.ones(3), 5.0, 2),
                                  (np.ones(3, np.complex64), 5, 2)])
def test_reduce_precision_errors_as_jax(args):
    with pytest.raises(Exception) as theirs:
        jlax.reduce_precision(*args)
    with pytest.raises(theirs.type):
        ilax.reduce_precision(*args)


# ------------------------------------------------------------------------ reduce

REDUCE_CASES = {
    # a computation JAX does not know (an associative one with identity 0, as reduce
    # requires): the `reduce` primitive, jvp by tree reduction
    "general_monoid": (lambda L, x: L.reduce(x, 0.0, lambda a, b: a + b + a * b, (1,)),
                       (7, 5), "reduce"),
    "general_product_odd": (lambda L, x: L.reduce(x, 1.0, lambda a, b: a * b, (0, 2)),
                            (3, 2, 3), "reduce"),
    "two_operands": (lambda L, x: L.reduce((x, 2 * x), (0.0, 1.0),
                                           lambda a, b: (a[0] + b[0], a[1] * b[1]), (0,)),
                     (5, 3), "reduce"),
    "dict_operands": (lambda L, x: L.reduce({"s": x, "m": x}, {"s": 0.0, "m": -np.inf},
                                            lambda a, b: {"s": a["s"] + b["s"],
                                                          "m": L.max(a["m"], b["m"])},
                                            (1,)), (4, 3), "reduce"),
    "monoid_add": (lambda L, x: L.reduce(x, 0.0, L.add, (0,)), (4, 3), "reduce_sum"),
    "monoid_mul": (lambda L, x: L.reduce(x, 1.0, L.mul, (1,)), (4, 3), "reduce_prod"),
    "monoid_max": (lambda L, x: L.reduce(x, -np.inf, L.max, (0, 1)), (4, 3), "reduce_max"),
    "monoid_min": (lambda L, x: L.reduce(x, np.inf, L.min, (1,)), (4, 3), "reduce_min"),
    # lax.add with an init that is not its identity: the general primitive, as JAX
    "add_not_identity": (lambda L, x: L.reduce(x, 1.0, L.add, (0,)), (4, 3), "reduce"),
}


@pytest.mark.parametrize("case", sorted(REDUCE_CASES))
def test_reduce_transforms(case):
    fn, shape, _ = REDUCE_CASES[case]
    mine, theirs = _both(fn)
    x = _u(*shape, key=case, lo=0.5, hi=1.5)
    check_transforms(f"reduce {case}", mine, theirs, (x,),
                     diff=() if case == "add_not_identity" else None, fd=True)


@pytest.mark.parametrize("case", sorted(REDUCE_CASES))
def test_reduce_binds_the_primitive_jax_binds(case):
    fn, shape, prim = REDUCE_CASES[case]
    x = _u(*shape)
    want = _prims(jax.make_jaxpr(lambda x: fn(jlax, x))(x))
    got = _prims(impl.make_jaxpr(lambda x: fn(ilax, x))(x))
    assert prim in want and prim in got


def test_reduce_bool_monoids_and_integer_bitwise():
    x = rng_for("bits").randint(0, 64, (4, 5))
    for op, init in (("bitwise_and", -1), ("bitwise_or", 0), ("bitwise_xor", 0)):
        for operand, i in ((x, np.int64(init)), (x % 3 == 0, np.bool_(init))):
            got = ilax.reduce(operand, i, getattr(ilax, op), (1,))
            want = jlax.reduce(operand, i, getattr(jlax, op), (1,))
            np.testing.assert_array_equal(got, want)
            assert np.asarray(got).dtype == want.dtype


def test_reduce_empty_axis_and_weak_types():
    fn = lambda L, x: L.reduce(x, 1.0, lambda a, b: a * b, (1,))  # noqa: E731
    x = np.ones((2, 0))
    assert_close(fn(ilax, x), fn(jlax, x), TOL)
    got, want = ilax.reduce(3.0, 0.0, ilax.add, ()), jlax.reduce(3.0, 0.0, jlax.add, ())
    assert_close(got, want, TOL)
    assert impl.numpy.asarray(got).weak_type == want.weak_type


def test_reduce_jvp_of_initial_value_raises_as_jax():
    fn = lambda L, x, i: L.reduce(x, i, lambda a, b: a * b, (1,))  # noqa: E731
    x = _u(2, 3)
    for T, L in ((jax, jlax), (impl, ilax)):
        with pytest.raises(NotImplementedError, match="initial values"):
            T.jvp(lambda i: fn(L, x, i), (1.0,), (1.0,))


def test_reduce_vmap_of_initial_value_raises_as_jax():
    fn = lambda L, i: L.reduce(np.ones((2, 3)), i, lambda a, b: a * b, (1,))  # noqa: E731
    for T, L in ((jax, jlax), (impl, ilax)):
        with pytest.raises(NotImplementedError):
            T.vmap(lambda i: fn(L, i))(np.ones(2))


@pytest.mark.parametrize("bad", ["init_not_scalar", "dtype_mismatch", "tree_mismatch",
                                 "count_mismatch", "dimension_out_of_range"])
def test_reduce_errors_as_jax(bad):
    x = np.ones((2, 3), np.float32)
    mul = lambda a, b: a * b  # noqa: E731
    args = {"init_not_scalar": (x, np.ones(2, np.float32), mul, (1,)),
            "dtype_mismatch": (x, 1.0, mul, (1,)),
            "tree_mismatch": ((x, x), (np.float32(1),), mul, (1,)),
            "count_mismatch": ([x, x], (np.float32(1), np.float32(1)), mul, (1,)),
            "dimension_out_of_range": (x, np.float32(1), mul, (2,))}[bad]
    with pytest.raises(Exception) as theirs:
        jlax.reduce(*args)
    with pytest.raises(theirs.type):
        ilax.reduce(*args)
