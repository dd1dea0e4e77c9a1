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
from helpers import TOLERANCE

F64 = np.float64
TOL = TOLERANCE["programs"][np.dtype(F64)]  # float64 programs against JAX


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


# ------------------------------------------------------------ custom_linear_solve

_A = rng_for("matrix").randn(3, 3) + 3 * np.eye(3)
_SPD = _A @ _A.T + np.eye(3)


def _linear_solve_program(L, N, a, b, *, transpose=True, symmetric=False, has_aux=False):
    """x with a x = b by a dense solve; matvec closes over `a`, so derivatives with
    respect to a flow through the implicit rule (dA x)."""
    def solve(matvec, r):
        x = N.linalg.solve(a, r)
        return (x, N.sum(x)) if has_aux else x

    def transpose_solve(vecmat, r):
        x = N.linalg.solve(a.T, r)
        return (x, N.sum(x)) if has_aux else x
    return L.custom_linear_solve(lambda x: N.dot(a, x), b, solve,
                                 transpose_solve if transpose and not symmetric else None,
                                 symmetric=symmetric, has_aux=has_aux)


def _solve_fns(**kw):
    import impl.numpy as inp
    import jax.numpy as jnp
    return (lambda a, b: _linear_solve_program(ilax, inp, a, b, **kw),
            lambda a, b: _linear_solve_program(jlax, jnp, a, b, **kw))


@pytest.mark.parametrize("kind", ["general", "symmetric", "has_aux"])
def test_custom_linear_solve_transforms(kind):
    a = _SPD if kind == "symmetric" else _A
    kw = {"general": {}, "symmetric": {"symmetric": True}, "has_aux": {"has_aux": True}}[kind]
    mine, theirs = _solve_fns(**kw)
    batched = [np.stack([a, a.T, a + np.eye(3)]), _u(3, 3, key="bs")]
    if kind == "symmetric":
        batched[0] = np.stack([a, 2 * a, a + np.eye(3)])
    # (auxiliary outputs have zero tangents by definition: no finite differences there;
    # the general case has them, the others JAX's derivatives only, to keep this fast)
    check_transforms(f"custom_linear_solve {kind}", mine, theirs, (a, _u(3, key="b")),
                     batched_args=batched, fd=kind == "general")


def test_custom_linear_solve_pytree_b_and_jaxpr():
    import impl.numpy as inp
    import jax.numpy as jnp

    def prog(L, N, s, v):
        def matvec(x):
            return {"s": 2.0 * x["s"], "v": N.dot(_A, x["v"])}
        solve = lambda mv, r: {"s": r["s"] / 2.0, "v": N.linalg.solve(_A, r["v"])}  # noqa
        tsolve = lambda vm, r: {"s": r["s"] / 2.0, "v": N.linalg.solve(_A.T, r["v"])}  # noqa
        out = L.custom_linear_solve(matvec, {"s": s, "v": v}, solve, tsolve)
        return out["s"] + N.sum(out["v"])
    args = (np.float64(3.0), _u(3, key="v"))
    check_transforms("custom_linear_solve pytree", lambda *a: prog(ilax, inp, *a),
                     lambda *a: prog(jlax, jnp, *a), args)
    assert "custom_linear_solve" in _prims(impl.make_jaxpr(lambda *a: prog(ilax, inp, *a))(*args))


def test_custom_linear_solve_without_transpose_solve():
    mine, theirs = _solve_fns(transpose=False)
    b = _u(3, key="b")
    # forward mode needs no transpose_solve
    assert_close(impl.jvp(lambda b: mine(_A, b), (b,), (b,)),
                 jax.jvp(lambda b: theirs(_A, b), (b,), (b,)), TOL)
    # reverse mode does, with JAX's exception type
    for T, fn in ((jax, theirs), (impl, mine)):
        with pytest.raises(TypeError, match="transpose_solve"):
            T.grad(lambda b: fn(_A, b).sum())(b)


@pytest.mark.parametrize("bad", ["matvec_tree", "solve_shape", "missing_aux"])
def test_custom_linear_solve_errors_as_jax(bad):
    b = np.ones(3)
    matvec = {"matvec_tree": lambda x: (x, x)}.get(bad, lambda x: 2 * x)
    solve = {"solve_shape": lambda mv, r: r[:2]}.get(bad, lambda mv, r: r / 2)
    has_aux = bad == "missing_aux"
    with pytest.raises(Exception) as theirs:
        jlax.custom_linear_solve(matvec, b, solve, has_aux=has_aux)
    with pytest.raises(theirs.type):
        ilax.custom_linear_solve(matvec, b, solve, has_aux=has_aux)


# -------------------------------------------------------------------- custom_root

def _root_program(L, a, c, *, has_aux=False):
    """The positive root of x^2 + c x - a by Newton's method (unrolled, not
    differentiated: custom_root's implicit rule gives the derivative)."""
    f = lambda x: x * x + c * x - a  # noqa: E731

    def solve(f, x):
        for _ in range(25):
            x = x - f(x) / (2 * x + c)
        return (x, f(x)) if has_aux else x
    return L.custom_root(f, 1.0 + 0 * a, solve, lambda g, y: y / g(1.0), has_aux=has_aux)


@pytest.mark.parametrize("has_aux", [False, True])
def test_custom_root_transforms(has_aux):
    mine = lambda a, c: _root_program(ilax, a, c, has_aux=has_aux)  # noqa: E731
    theirs = lambda a, c: _root_program(jlax, a, c, has_aux=has_aux)  # noqa: E731
    args = (np.float64(2.5), np.float64(0.5))
    check_transforms(f"custom_root aux={has_aux}", mine, theirs, args, fd=not has_aux)


def test_custom_root_vector_tangent_solve_and_jaxpr():
    import impl.numpy as inp
    import jax.numpy as jnp

    def prog(L, N, T, m):
        f = lambda x: N.dot(m, x) + x ** 3 - 1.0  # noqa: E731

        def solve(f, x):   # Newton with the Jacobian written out
            for _ in range(6):
                x = x - N.linalg.solve(m + 3.0 * N.diag(x * x), f(x))
            return x
        tangent_solve = lambda g, y: N.linalg.solve(T.jacfwd(g)(y), y)  # noqa: E731
        return L.custom_root(f, N.zeros(2), solve, tangent_solve)
    m = np.array([[2.0, 0.3], [0.1, 1.5]])
    check_transforms("custom_root vector", lambda m: prog(ilax, inp, impl, m),
                     lambda m: prog(jlax, jnp, jax, m), (m,), vmap=False)
    want = _prims(jax.make_jaxpr(lambda m: prog(jlax, jnp, jax, m))(m))
    got = _prims(impl.make_jaxpr(lambda m: prog(ilax, inp, impl, m))(m))
    assert "custom_jvp_call" in want and "custom_jvp_call" in got


@pytest.mark.parametrize("bad", ["f_tree", "solve_tree", "missing_aux", "tangent_tree"])
def test_custom_root_errors_as_jax(bad):
    f = {"f_tree": lambda x: (x, x)}.get(bad, lambda x: x - 2.0)
    solve = {"solve_tree": lambda f, x: (x, x)}.get(bad, lambda f, x: x + 1.0)
    tangent_solve = {"tangent_tree": lambda g, y: [y]}.get(bad, lambda g, y: y)
    has_aux = bad == "missing_aux"

    def run(L, T):
        return T.grad(lambda a: L.custom_root(lambda x: f(x) * a, 1.0, solve,
                                              tangent_solve, has_aux=has_aux))(1.0)
    with pytest.raises(Exception) as theirs:
        run(jlax, jax)
    with pytest.raises(theirs.type):
        run(ilax, impl)


# ------------------------------------------------------ broadcast_like, index_take

@pytest.mark.parametrize("shapes", [((3,), (2, 3)), ((2, 1), (2, 3)), ((), (2,)), ((2,), (2,))])
def test_broadcast_like(shapes):
    a, like = _u(*shapes[0], key="bl"), np.zeros(shapes[1])
    check_transforms(f"broadcast_like{shapes}", lambda a: ilax.broadcast_like(a, like),
                     lambda a: jlax.broadcast_like(a, like), (a,))
    got, want = ilax.broadcast_like(1.0, like), jlax.broadcast_like(1.0, like)
    assert_close(got, want, TOL)
    assert impl.numpy.asarray(got).weak_type == want.weak_type


@pytest.mark.parametrize("shapes", [((4,), (2, 3)), ((2, 3), (3,))])
def test_broadcast_like_errors_as_jax(shapes):
    a, like = np.ones(shapes[0]), np.zeros(shapes[1])
    with pytest.raises(Exception) as theirs:
        jlax.broadcast_like(a, like)
    with pytest.raises(theirs.type):
        ilax.broadcast_like(a, like)


def test_index_take():
    idxs = (np.array([0, 1, -1, 3]), np.array([2, 5, 1, -6]))   # wrapped like Python's %
    mine = lambda x: ilax.index_take(x, idxs, (0, 2))  # noqa: E731
    theirs = lambda x: jlax.index_take(x, idxs, (0, 2))  # noqa: E731
    check_transforms("index_take", mine, theirs, (_u(2, 3, 4, key="it"),))
    assert "gather" in _prims(impl.make_jaxpr(mine)(np.ones((2, 3, 4))))
    with pytest.raises(ValueError):
        jlax.index_take(np.ones(3), (np.array([0.0]),), (0,))
    with pytest.raises(ValueError):
        ilax.index_take(np.ones(3), (np.array([0.0]),), (0,))
