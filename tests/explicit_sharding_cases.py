"""Explicit sharding on 8 host devices, impl against JAX: shardings in types, the
propagation rule of each primitive under value, jit, jvp, grad and vmap, out_sharding=,
reshard, ShardingTypeError where JAX refuses, and XLA partitioning what the types say.

XLA must see 8 CPU devices before JAX is imported, so these cases run in a process of
their own: `tests/test_explicit_sharding.py` starts `python
tests/explicit_sharding_cases.py --json FILE` once and reports each `case_*` function
as one test. Run this file directly to see the cases' output (`-k NAME` picks some).

Every program runs with impl and with JAX; values must agree, and so must the sharding
in the type of every result (`impl.typeof(out)` against `jax.typeof(out)`) and the
`.sharding` of every result array.
"""
from __future__ import annotations

import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import sharding_cases as base  # noqa: E402  (sets XLA_FLAGS before JAX is imported)

import ast  # noqa: E402
import functools  # noqa: E402
import importlib  # noqa: E402
import inspect  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import impl  # noqa: E402
import impl.numpy as inp  # noqa: E402

ShardingTypeError = impl.errors.ShardingTypeError
MESH = jax.make_mesh((4, 2), ("X", "Y"))       # Explicit axes: JAX 0.10's default
BOTH = base.BOTH


def put(value, *spec):
    return jax.device_put(np.asarray(value, np.float32), NamedSharding(MESH, P(*spec)))


W = put(base.rs(8, 4, seed=1), "X", "Y")      # f32[8@X,4@Y]
A = put(base.rs(8, 4, seed=2), "X", None)     # f32[8@X,4]
B = put(base.rs(8, 4, seed=3), None, "Y")     # f32[8,4@Y]
R = put(base.rs(4, seed=4), "Y")              # f32[4@Y]
Z = put(base.rs(4, 6, seed=5), "Y", None)     # f32[4@Y,6]
V = put(base.rs(4, 6, seed=6), None, "Y")     # f32[4,6@Y]


def type_spec(x):
    return jax.typeof(x).sharding.spec


def check_typed(got, want, rtol=1e-5, atol=1e-5):
    """Values, dtypes and array shardings (base.check), and the shardings in the types
    impl gives the results."""
    base.check(got, want, rtol=rtol, atol=atol)
    for i, (g, w) in enumerate(zip(jax.tree_util.tree_leaves(got),
                                   jax.tree_util.tree_leaves(want))):
        assert impl.typeof(g).sharding.spec == type_spec(w), (
            f"leaf {i}: type {impl.typeof(g)} but JAX's is {jax.typeof(w)}")


def _stacked(x):
    """Two examples of `x` along a new leading axis (unsharded), the rest as `x`."""
    spec = tuple(jax.typeof(x).sharding.spec)
    data = np.stack([np.asarray(x), (np.asarray(x) * 0.5 + 1.0).astype(np.asarray(x).dtype)])
    return jax.device_put(data, NamedSharding(MESH, P(None, *spec)))


def _is_float(x):
    return np.issubdtype(np.asarray(x).dtype, np.floating)


def transformed(lib, fn, args, skip=()):
    """`fn(*args)` under value, jit, jvp, grad and vmap (grad and jvp only for
    floating results), except the transformations in `skip` ("derivatives": jvp and
    grad; "jvp"; "grad"; "vmap")."""
    out = {"value": fn(*args), "jit": lib.jit(fn)(*args)}
    if ("derivatives" not in skip
            and all(_is_float(o) for o in jax.tree_util.tree_leaves(out["value"]))):
        if "jvp" not in skip:
            tangents = tuple(a * 0.5 + 0.25 for a in args)
            out["jvp"] = lib.jvp(fn, args, tangents)
        if "grad" not in skip:
            loss = lambda *a: sum((o ** 2).sum() for o in jax.tree_util.tree_leaves(fn(*a)))
            out["grad"] = lib.grad(loss, argnums=tuple(range(len(args))))(*args)
            out["jit_grad"] = lib.jit(lib.grad(loss, argnums=tuple(range(len(args)))))(*args)
    if "vmap" not in skip:
        out["vmap"] = lib.vmap(fn)(*[_stacked(a) for a in args])
    return out


# While a list, check_rules and same_errors record their programs there instead of
# running them (case_every_sharding_rule_is_tested reads what the groups cover).
_recording = None


def check_rules(ops):
    """Each `(name, make, args[, skip])` (make(lib, numpy) -> fn) under every
    transformation but those in `skip`, impl against JAX; all failures reported
    together."""
    if _recording is not None:
        _recording.extend(("rule", op) for op in ops)
        return
    failures = []
    with jax.set_mesh(MESH):
        for name, make, args, *skip in ops:
            results = []
            for lib, np_ in BOTH:
                try:
                    results.append(transformed(lib, make(lib, np_), args, *skip))
                except Exception as e:  # noqa: BLE001 - reported below
                    results.append(e)
            got, want = results
            if isinstance(want, Exception):
                failures.append(f"{name}: JAX raised {want!r}")
                continue
            if isinstance(got, Exception):
                failures.append(f"{name}: impl raised {type(got).__name__}: {got}")
                continue
            for kind in want:
                try:
                    check_typed(got[kind], want[kind], rtol=1e-4, atol=1e-4)
                except AssertionError as e:
                    failures.append(f"{name} [{kind}]: {e}")
    assert not failures, "\n".join(failures)


def same_errors(bad_calls):
    """Each `(name, make)` raises the same exception type with impl and JAX."""
    if _recording is not None:
        _recording.extend(("error", call) for call in bad_calls)
        return
    failures = []
    with jax.set_mesh(MESH):
        for name, make in bad_calls:
            try:
                base.same_error(make)
            except AssertionError as e:
                failures.append(f"{name}: {e}")
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------ types and printing

def case_types_print_as_jax_does():
    assert str(impl.typeof(W)) == str(jax.typeof(W)) == "float32[8@X,4@Y]", impl.typeof(W)
    assert repr(impl.typeof(W)) == repr(jax.typeof(W)), impl.typeof(W)
    assert impl.typeof(W).sharding == jax.typeof(W).sharding
    assert impl.typeof(W) != impl.typeof(np.asarray(W)) and impl.typeof(A) != impl.typeof(B)
    assert hash(impl.typeof(W)) == hash(impl.typeof(put(np.asarray(W), "X", "Y")))
    flat = put(np.arange(32), ("X", "Y"))
    with jax.set_mesh(MESH):
        text = str(impl.make_jaxpr(lambda a, b: inp.sin(a) * b.sum())(W, flat))
        assert "a:f32[8@X,4@Y] b:f32[32@(X,Y)]" in text, text
        assert "c:f32[8@X,4@Y] = sin a" in text, text
        text = str(impl.make_jaxpr(lambda a, b: inp.dot(a, b, out_sharding=P("X", None)))(W, Z))
        want = str(jax.make_jaxpr(lambda a, b: jnp.dot(a, b, out_sharding=P("X", None)))(W, Z))
        # the result's sharding shows in its type, not as a parameter (as JAX prints it)
        assert text == want and "c:f32[8@X,6] = dot_general[" in text, (text, want)
        # types without explicit sharding print as before
        text = str(impl.make_jaxpr(lambda a: inp.sin(a))(np.ones((8, 4), np.float32)))
        assert "a:f32[8,4]" in text and "@" not in text, text
        # an Auto mesh is not part of the type
        auto = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
        a = jax.device_put(np.ones((8, 4), np.float32), NamedSharding(auto, P("x", "y")))
        assert impl.typeof(a).explicit_sharding is None and "@" not in str(impl.typeof(a))


def case_context_mesh_and_device_put():
    with impl.set_mesh(MESH):
        assert impl.sharding.get_abstract_mesh() == MESH.abstract_mesh
        x = impl.device_put(np.ones((8, 4), np.float32), P("X"))
        assert str(impl.typeof(x)) == str(jax.typeof(x)) == "float32[8@X,4]", impl.typeof(x)
    mesh = impl.make_mesh((2, 4), ("a", "b"),
                          axis_types=(impl.sharding.AxisType.Explicit,
                                      impl.sharding.AxisType.Auto))
    y = impl.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P("a", "b")))
    assert str(impl.typeof(y)) == str(jax.typeof(y)) == "float32[8@a,4]", impl.typeof(y)


def case_values_off_the_mesh_and_replicated_on_it():
    """A value made outside any mesh (NumPy, Python scalars, arrays on one device) has
    JAX's empty mesh in its type, one made under a mesh (or placed on it) is replicated
    on it: the types' shardings, outside and inside jit, are JAX's, and the rules that
    compare their operands' shardings (select, concatenate) take part only the values on
    the mesh, as JAX's do: JAX's errors at trace time, and no error where it has none."""
    outside = jnp.ones((8, 4))
    mask = np.arange(32).reshape(8, 4) % 3 == 0
    with jax.set_mesh(MESH):
        inside, on_mesh = jnp.ones((8, 4)), put(np.ones((8, 4)))
    for x in (outside, inside, on_mesh):
        assert impl.typeof(x).sharding == jax.typeof(x).sharding, (impl.typeof(x).sharding,
                                                                   jax.typeof(x).sharding)
        with jax.set_mesh(MESH):
            assert impl.typeof(x).sharding == jax.typeof(x).sharding, x.sharding

    def seen(lib, np_):
        shardings = []

        def f(a, n, r, w):
            for v in (a, n, r, np_.sin(a), a + 1.0, a * r, a.sum(0), a.T,
                      lib.lax.broadcast_in_dim(a[0], (3, 4), (1,)),
                      lib.lax.broadcasted_iota(np.int32, (8,), 0), w + a):
                shardings.append(str(lib.typeof(v).sharding))
            return a
        with jax.set_mesh(MESH):
            lib.jit(f)(outside, np.ones((8, 4), np.float32), on_mesh, W)
        return shardings
    got, want = seen(impl, inp), seen(jax, jnp)
    assert got == want, "\n".join(f"{i}: {g}\n  JAX: {w}"
                                   for i, (g, w) in enumerate(zip(got, want)) if g != w)

    def accepted(lib, np_):
        with jax.set_mesh(MESH):
            return (lib.jit(lambda w, o: lib.lax.select(w > 0, w, o))(W, outside),
                    np_.where(mask, W, 0.0), lib.jit(lambda w: np_.where(mask, w, 0.0))(W),
                    # a constant made by jnp inside jit is on no mesh, as JAX's
                    lib.jit(lambda w: np_.where(np_.asarray(mask.tolist()), w, w * 2.0))(W),
                    np_.tril(W), lib.jit(np_.triu)(W),
                    lib.jit(lambda w, o: np_.concatenate([w, o]))(W, outside))
    check_typed(*base.both(accepted))
    same_errors([
        ("a select's cases, one replicated on the mesh", lambda lib, np_: lib.make_jaxpr(
            lambda w, r: lib.lax.select(w > 0, w, r))(W, on_mesh)),
        ("a select's predicate replicated on the mesh", lambda lib, np_: lib.make_jaxpr(
            lambda w, r: lib.lax.select(r > 0, w, w))(W, on_mesh)),
        ("concatenating a sharded and a replicated operand", lambda lib, np_: lib.make_jaxpr(
            lambda w, r: np_.concatenate([w, r]))(W, on_mesh)),
        # (a program impl would drop unused, before JAX's lowering saw the update's mesh)
        ("updating a replicated value by one off the mesh", lambda lib, np_: lib.make_jaxpr(
            lambda r: lib.lax.dynamic_update_slice(r, np_.asarray([[2.0] * 4], np.float32),
                                                   (0, 0)))(on_mesh)),
    ])


def case_cotangent_of_reshard_of_a_value_off_the_mesh():
    """The cotangent of reshard goes back off any mesh when its operand is off it (a
    NumPy argument), as JAX's: jit of grad or vjp without a mesh in context returns it
    (on one device), and with one its values, types and placement are JAX's, eagerly
    and under jit; an out_sharding naming an Auto axis is JAX's ValueError."""
    mixed = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(jax.sharding.AxisType.Explicit,
                                                          jax.sharding.AxisType.Auto))
    x = base.rs(8, 4, seed=7)

    def make(lib):
        def loss(a):
            return (lib.sharding.reshard(a, NamedSharding(MESH, P("X", "Y"))) ** 2).sum()
        outs = [lib.jit(lib.grad(loss))(x), lib.jit(lambda a: lib.vjp(loss, a)[1](
            np.float32(1.0))[0])(x), lib.jit(lib.grad(loss))(lib.numpy.asarray(x))]
        with jax.set_mesh(MESH):
            outs += [lib.grad(loss)(x), lib.jit(lib.grad(loss))(x),
                     lib.jit(lib.grad(lambda a: (lib.sharding.reshard(a, P("X")) ** 2).sum()))(x)]
        return outs
    got, want = both_programs(make)
    check_typed(got, want)
    for g, w in zip(got, want):
        assert str(impl.typeof(g)) == str(jax.typeof(w)), (impl.typeof(g), jax.typeof(w))
    with jax.set_mesh(mixed):
        a = jax.device_put(x, P("X", "Y"))
        for bad in [lambda lib, np_: lib.sharding.reshard(a, P("Y")),
                    lambda lib, np_: np_.dot(a, a.T, out_sharding=P("Y")),
                    lambda lib, np_: np_.zeros((8,), out_sharding=P("Y")),
                    lambda lib, np_: a.at[0].set(1.0, out_sharding=P("Y"))]:
            base.raises(ValueError, lambda: bad(jax, jnp), match="Auto or Manual")
            base.raises(ValueError, lambda: bad(impl, inp), match="Auto or Manual")


# ------------------------------------------------------------ rules x transformations

def case_elementwise_and_broadcasting_rules():
    check_rules([
        ("sin", lambda lib, np_: np_.sin, (W,)),
        ("add: unsharded axes take the other's sharding", lambda lib, np_: lambda a, b: a + b,
         (A, B)),
        ("mul by a row (broadcast_in_dim)", lambda lib, np_: lambda a, r: a * r, (W, R)),
        ("integer_pow and a scalar", lambda lib, np_: lambda a: a ** 3 + 2.0, (A,)),
        ("where (select_n) with a scalar", lambda lib, np_: lambda a: np_.where(a > 0, a, 0.0),
         (W,)),
        ("clip (clamp-like) and astype", lambda lib, np_: lambda a: np_.clip(
            a, -0.5, 0.5).astype(np.float32), (B,)),
        ("maximum", lambda lib, np_: np_.maximum, (W, W)),
    ])


def case_dot_general_rules():
    check_rules([
        ("dot: free axes keep their sharding", lambda lib, np_: np_.dot, (A, V)),
        ("dot with out_sharding over a sharded contraction",
         lambda lib, np_: lambda a, b: np_.dot(a, b, out_sharding=P("X", None)), (W, Z)),
        ("matmul with a replicated out_sharding",
         lambda lib, np_: lambda a, b: np_.matmul(a, b, out_sharding=P()), (W, Z)),
        ("matmul of a matrix and a vector",
         lambda lib, np_: lambda a, r: np_.matmul(a, r, out_sharding=P("X")), (W, R)),
        ("einsum with out_sharding", lambda lib, np_: lambda a, b: np_.einsum(
            "ij,jk->ki", a, b, out_sharding=P(None, "X")), (W, Z)),
        ("einsum of three operands", lambda lib, np_: lambda a, b, c: np_.einsum(
            "ij,jk,kl->il", a, b, c), (A, np.ones((4, 4), np.float32), V)),
        ("lax.dot_general with batch axes",
         lambda lib, np_: lambda a, b: lib.lax.dot_general(a, b, (((1,), (1,)), ((0,), (0,)))),
         (A, A)),
    ])


def case_reduction_rules():
    check_rules([
        ("sum over a sharded axis", lambda lib, np_: lambda a: a.sum(0), (W,)),
        ("sum of everything", lambda lib, np_: lambda a: a.sum(), (W,)),
        ("max and min", lambda lib, np_: lambda a: (a.max(1), a.min(0)), (W,)),
        # (not differentiated: JAX's own jvp of prod reshapes and slices sharded axes
        # in ways its rules refuse)
        ("prod", lambda lib, np_: lambda a: (a.prod(1), a.prod(0)), (W,), ("derivatives",)),
        ("mean and var", lambda lib, np_: lambda a: (a.mean(0), np_.var(a, axis=1)), (A,)),
        ("argmax", lambda lib, np_: lambda a: a.argmax(0), (W,)),
        ("any and all choosing values", lambda lib, np_: lambda a: np_.where(
            np_.any(a > 0, axis=0) & np_.all(a < 5, axis=0), a.sum(0), a.max(0)), (W,)),
        ("copy", lambda lib, np_: lambda a: np_.copy(a) * 2.0, (W,)),
        # (not differentiated: JAX's jvp of reduce halves the sharded axis, which its
        # slicing rule refuses)
        ("reduce with a computation of two operands, over a sharded axis",
         lambda lib, np_: lambda a, b: lib.lax.reduce(
             (a, b), (np.float32(1.0), np.float32(0.0)),
             lambda p, q: (p[0] * q[0] - p[1] * q[1], p[0] * q[1] + p[1] * q[0]), (0,)),
         (W, W * 0.5), ("derivatives",)),
    ])


def case_layout_rules():
    check_rules([
        ("transpose", lambda lib, np_: lambda a: a.T, (W,)),
        ("reshape merging sharded axes", lambda lib, np_: lambda a: a.reshape(32), (W,)),
        ("reshape splitting a sharded axis", lambda lib, np_: lambda a: a.reshape(4, 2, 4), (W,)),
        ("reshape with size-1 axes", lambda lib, np_: lambda a: a.reshape(8, 1, 4), (A,)),
        ("reshape with out_sharding",
         lambda lib, np_: lambda a: np_.reshape(a, (4, 8), out_sharding=P("X")), (W,)),
        ("expand_dims and squeeze",
         lambda lib, np_: lambda a: np_.squeeze(np_.expand_dims(a, 1) * 2.0, 1), (W,)),
        ("concatenate along a sharded axis", lambda lib, np_: lambda a: np_.concatenate(
            [a, a * 2.0], axis=0), (W,)),
        ("slices keeping divisibility", lambda lib, np_: lambda a: lib.lax.slice(
            a, (0, 0), (4, 4)) * lib.lax.slice(a, (4, 0), (8, 4)), (W,)),
        ("cumsum along an unsharded axis", lambda lib, np_: lambda a: np_.cumsum(a, axis=1),
         (A,)),
        ("reshard", lambda lib, np_: lambda a: lib.sharding.reshard(a, P(None, "X")), (W,)),
        ("tile (several axes merged at once)", lambda lib, np_: lambda a: np_.tile(a, (1, 2)),
         (A,)),
    ])


def case_sorting_and_dynamic_slicing_rules():
    check_rules([
        # (sort not differentiated: JAX's own jvp of sort builds an unsharded iota and
        # raises)
        ("sort along an unsharded axis", lambda lib, np_: lambda a: np_.sort(a, axis=1), (A,),
         ("derivatives",)),
        ("argsort (sort with a sharded iota)", lambda lib, np_: lambda a: np_.argsort(a, axis=1),
         (A,)),
        ("top_k", lambda lib, np_: lambda a: lib.lax.top_k(a, 2), (A,)),
        ("dynamic_slice", lambda lib, np_: lambda a: lib.lax.dynamic_slice(a, (0, 1), (8, 2)),
         (A,)),
        ("dynamic_update_slice", lambda lib, np_: lambda a: lib.lax.dynamic_update_slice(
            a, a * 2.0, (0, 0)), (W,)),
    ])


def case_control_flow_rules():
    check_rules([
        # (not under vmap: JAX's batched cond selects with an unsharded predicate and
        # raises ShardingTypeError itself)
        ("cond with branches typed alike", lambda lib, np_: lambda a: lib.lax.cond(
            a.sum() > 0, lambda b: b * 2.0, lambda b: np_.sin(b), a), (W,), ("vmap",)),
        ("fori_loop carry", lambda lib, np_: lambda a: lib.lax.fori_loop(
            0, 3, lambda i, c: np_.cos(c) * a, a), (W,)),
        ("scan over an unsharded axis", lambda lib, np_: lambda b: lib.lax.scan(
            lambda c, x: (c + x, c * x), np_.zeros((4,), out_sharding=P("Y")), b), (B,)),
        ("custom_linear_solve: x typed as b", lambda lib, np_: lambda a, b: (
            lib.lax.custom_linear_solve(lambda v: (a * a + 1.0) * v, b,
                                        lambda _, r: r / (a * a + 1.0), symmetric=True)),
         (W, W * 0.5)),
    ])


def case_gather_scatter_and_indexing_rules():
    check_rules([
        ("take along an unsharded axis", lambda lib, np_: lambda a: np_.take(
            a, np.array([0, 3, 1]), axis=1), (A,)),
        ("integer array index on an unsharded axis",
         lambda lib, np_: lambda a: a[:, np.array([2, 0])], (A,)),
        ("take_along_axis", lambda lib, np_: lambda a: np_.take_along_axis(
            a, np.tile(np.array([[1, 0, 3, 2]]), (8, 1)), axis=1), (A,)),
        ("at[].set on an unsharded axis",
         lambda lib, np_: lambda a: a.at[:, 1].set(0.5), (A,)),
        ("at[].add with an index array", lambda lib, np_: lambda a, b: a.at[
            :, np.array([0, 2])].add(b[:, :2]), (A, A)),
        ("at[].get(out_sharding=) from a sharded axis", lambda lib, np_: lambda a: a.at[
            np.array([1, 5])].get(out_sharding=P(None, "Y")), (W,)),
        ("at[].set(out_sharding=) into a sharded axis", lambda lib, np_: lambda a: a.at[
            0].set(1.0, out_sharding=P("X", "Y")), (W,)),
    ])


def case_convolution_and_window_rules():
    images = put(base.rs(8, 3, 6, 6, seed=7), "X")                 # f32[8@X,3,6,6]
    kernel = put(base.rs(4, 3, 3, 3, seed=8))                      # replicated
    split_kernel = put(base.rs(4, 3, 3, 3, seed=9), "Y")           # f32[4@Y,3,3,3]
    check_rules([
        # (not under vmap of both operands: JAX's own batching reshapes the sharded
        # batch into the features and raises ShardingTypeError)
        ("conv with a replicated kernel", lambda lib, np_: lambda x, k: lib.lax.conv(
            x, k, (1, 1), "SAME"), (images, kernel), ("vmap",)),
        ("conv vmapped over kernels", lambda lib, np_: lambda ks: lib.vmap(
            lambda k: lib.lax.conv(images, k, (1, 1), "SAME"))(ks), (put(np.stack(
                [base.rs(4, 3, 3, 3, seed=10)] * 2)),), ("vmap", "derivatives")),
        ("conv with out_sharding", lambda lib, np_: lambda x, k: lib.lax.conv_general_dilated(
            x, k, (1, 1), "VALID", out_sharding=P("X", "Y")), (images, split_kernel),
         ("vmap",)),
        ("max pooling", lambda lib, np_: lambda a: lib.lax.reduce_window(
            a, -np.inf, lib.lax.max, (1, 2), (1, 2), "VALID"), (W,)),
        ("sum pooling along an unsharded axis", lambda lib, np_: lambda a: lib.lax.reduce_window(
            a, 0.0, lib.lax.add, (1, 3), (1, 1), "SAME"), (A,)),
        ("min pooling", lambda lib, np_: lambda a: lib.lax.reduce_window(
            a, np.inf, lib.lax.min, (2, 1), (2, 1), "VALID"), (B,)),
    ])


def _spd(*batch, n=4, seed=0):
    """Symmetric positive definite matrices (distinct eigenvalues and singular values)."""
    a = base.rs(*batch, n, n, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)


SPD = put(_spd(8, seed=15), "X")                                   # f32[8@X,4,4]
LOWER = put(np.linalg.cholesky(_spd(8, seed=16)), "X")             # f32[8@X,4,4]
RHS = put(base.rs(8, 4, 3, seed=17), "X")                          # f32[8@X,4,3]


def _tuple(f):
    """f's results as a plain tuple: impl's named tuples (EighResult, ...) are not JAX's
    pytree nodes."""
    return lambda *args: tuple(f(*args))


def case_linear_algebra_rules():
    """Decompositions and solves map over their batch axes, which keep their sharding
    (the matrix axes unsharded), as JAX types them."""
    def diagonals(value, *spec):
        return put(np.full((8, 4), value), *spec)
    check_rules([
        ("eigh", lambda lib, np_: _tuple(lib.lax.linalg.eigh), (SPD,)),
        ("eigvalsh", lambda lib, np_: np_.linalg.eigvalsh, (SPD,)),
        ("svd (its derivatives: see case_decompositions_jax_fails_on)",
         lambda lib, np_: _tuple(np_.linalg.svd), (SPD,), ("derivatives",)),
        ("singular values", lambda lib, np_: lambda a: np_.linalg.svd(a, compute_uv=False),
         (SPD,)),
        ("lu (integer pivots: not differentiated)", lambda lib, np_: lib.lax.linalg.lu, (SPD,)),
        ("lu's factors", lambda lib, np_: lambda a: lib.lax.linalg.lu(a)[0], (SPD,)),
        ("triangular_solve, differentiated in its right-hand side",
         lambda lib, np_: lambda b: lib.lax.linalg.triangular_solve(
             LOWER, b, left_side=True, lower=True), (RHS,)),
        ("triangular_solve from the right, transposed", lambda lib, np_: lambda b:
            lib.lax.linalg.triangular_solve(LOWER, b, left_side=False, lower=True,
                                            transpose_a=True), (put(base.rs(8, 2, 4), "X", "Y"),)),
        ("tridiagonal_solve", lambda lib, np_: lib.lax.linalg.tridiagonal_solve,
         (diagonals(0.1, "X"), diagonals(2.0, "X"), diagonals(0.2, "X"),
          put(base.rs(8, 4, 2, seed=18), "X"))),
        ("solve", lambda lib, np_: np_.linalg.solve, (SPD, RHS)),
        ("slogdet", lambda lib, np_: _tuple(np_.linalg.slogdet), (SPD,)),
        ("det (its derivative: see case_decompositions_jax_fails_on)",
         lambda lib, np_: np_.linalg.det, (SPD,), ("derivatives",)),
    ])


def case_fft_rules():
    """FFTs keep their operand's sharding, transformed axes included (XLA moves the data
    a sharded transform needs), as JAX types them."""
    def put_complex(*spec):
        c = base.rs(8, 4, 8, seed=19) + 1j * base.rs(8, 4, 8, seed=20)
        return jax.device_put(c.astype(np.complex64), NamedSharding(MESH, P(*spec)))
    real = base.rs(8, 4, 8, seed=21)
    check_rules([
        ("fft over an unsharded axis", lambda lib, np_: np_.fft.fft, (put_complex("X"),)),
        ("ifft over a sharded axis", lambda lib, np_: np_.fft.ifft,
         (put_complex(None, None, "Y"),)),
        ("fftn over two axes", lambda lib, np_: lambda x: np_.fft.fftn(x, axes=(1, 2)),
         (put_complex("X", "Y"),)),
        ("rfft2's magnitude", lambda lib, np_: lambda x: np_.abs(np_.fft.rfft2(x)),
         (put(real, "X"),)),
        ("rfft2's magnitude, a transformed axis sharded", lambda lib, np_: lambda x: np_.abs(
            np_.fft.rfft2(x)), (put(real, "X", "Y"),)),
        ("irfft of an rfft, padded", lambda lib, np_: lambda x: np_.fft.irfft(
            np_.fft.rfft(x), n=16), (put(real, "X"),)),
        ("fft along the sharded axis", lambda lib, np_: lambda x: np_.abs(np_.fft.fft(
            x, axis=0)), (put(real, "X", "Y"),)),
        ("lax.fft", lambda lib, np_: lambda x: lib.lax.fft(x, "FFT", (4, 8)),
         (put_complex("X"),)),
    ])


def _unit(seed, *spec, low=0.1, high=0.9):
    """f32[8,4] values in (low, high), sharded by `spec`."""
    values = np.random.RandomState(seed).uniform(low, high, (8, 4))
    return put(values, *spec)


def iput(value, *spec):
    return jax.device_put(np.asarray(value, np.int32), NamedSharding(MESH, P(*spec)))


U = _unit(40, "X", "Y")                                  # f32[8@X,4@Y] in (0.1, 0.9)
U2 = _unit(41, "X", None)                                # f32[8@X,4] in (0.1, 0.9)
U3 = _unit(42, "X", "Y")
I = iput(np.arange(32).reshape(8, 4) * 37 % 101, "X", "Y")    # i32[8@X,4@Y]
SHIFTS = iput(np.arange(32).reshape(8, 4) % 5, "X", None)     # i32[8@X,4]


def _lax(name, *transform):
    """The lax function `name`, its operands first transformed by `transform`."""
    def make(lib, np_):
        fn = getattr(lib.lax, name)
        if not transform:
            return fn
        return lambda *args: fn(*[t(a) for t, a in zip(transform, args)])
    return make


def case_every_elementwise_rule():
    """Each elementwise primitive (one, two or three operands, sharded alike or one
    unsharded along an axis the other shards) on operands in its domain."""
    shifted = lambda a: a + 1.0           # noqa: E731  (acosh's domain)
    no_derivatives = ("derivatives",)
    check_rules([
        *[(name, _lax(name), (U,)) for name in (
            "acos", "asin", "asinh", "atan", "atanh", "bessel_i0e", "cbrt",
            "ceil", "cosh", "digamma", "erf", "erf_inv", "erfc", "exp2", "expm1", "floor",
            "is_finite", "lgamma", "log1p", "logistic", "neg", "round", "rsqrt", "sign",
            "sinh", "square", "tan", "tanh")],
        ("acosh", _lax("acosh", shifted), (U,)),
        # (not its grad: JAX 0.10.2's selects with an unsharded constant and raises)
        ("bessel_i1e", _lax("bessel_i1e"), (U,), ("grad",)),
        *[(name, _lax(name), (U, U2)) for name in ("atan2", "pow", "ge", "le")],
        # (operands sharded alike: JAX 0.10.2's derivatives select between them)
        *[(name, _lax(name), (U, U3)) for name in ("igamma", "igammac")],
        ("nextafter", _lax("nextafter"), (U, U2), no_derivatives),
        ("polygamma", lambda lib, np_: lambda x: lib.lax.polygamma(np_.ones_like(x), x), (U,)),
        ("zeta", lambda lib, np_: lambda x, q: lib.lax.zeta(x + 1.5, q), (U, U2),
         no_derivatives),
        # (no derivatives: JAX has none for igamma_grad_a, impl none for
        # random_gamma_grad, whose jvp JAX has)
        ("igamma_grad_a", _lax("igamma_grad_a"), (U, U3), no_derivatives),
        ("random_gamma_grad", _lax("random_gamma_grad"), (U, U3), no_derivatives),
        ("clamp", lambda lib, np_: lambda x: lib.lax.clamp(np.float32(0.3), x, np.float32(0.6)),
         (U,)),
        ("complex and conj", lambda lib, np_: lambda x, y: lib.lax.conj(lib.lax.complex(x, y)),
         (U, U2)),
        *[(name, _lax(name), (I,)) for name in ("clz", "population_count", "bitwise_not")],
        *[(name, _lax(name), (I, SHIFTS)) for name in (
            "bitwise_or", "bitwise_xor", "shift_left", "shift_right_arithmetic",
            "shift_right_logical")],
    ])
    # JAX 0.10.2's betainc selects with a mask of its own sharding and refuses sharded
    # operands (ShardingTypeError), as impl's
    same_errors([("betainc", lambda lib, np_: lib.lax.betainc(U, U3, U))])


def _custom_programs(lib):
    """A custom_jvp, a custom_vmap and a custom_vjp function of one operand."""
    @lib.custom_jvp
    def double(x):
        return x * 2.0
    double.defjvp(lambda primals, tangents: (double(*primals), tangents[0] * 2.0))

    @lib.custom_vjp
    def triple(x):
        return x * 3.0
    triple.defvjp(lambda x: (x * 3.0, None), lambda _, g: (g * 3.0,))

    @lib.custom_batching.custom_vmap
    def quadruple(x):
        return x * 4.0
    quadruple.def_vmap(lambda axis_size, in_batched, x: (x * 4.0, in_batched[0]))
    return double, quadruple, triple


def case_more_rules():
    """The rules the other groups do not reach: the other reductions and cumulative
    operations, rev, the other scatters, compiler controls, checkpoints, custom
    derivatives and batching, while loops, sharding constraints, shard_map, host
    callbacks and lu's pivots."""
    idx = np.array([0, 2])
    pivots = iput(np.tile(np.array([[1, 3, 2, 3]]), (8, 1)), "X")       # i32[8@X,4]
    check_rules([
        ("argmin", lambda lib, np_: lambda a: a.argmin(1), (W,)),
        *[(f"{name} along an unsharded axis", lambda lib, np_, name=name: lambda a: getattr(
            lib.lax, name)(a, axis=1), (A,)) for name in ("cummax", "cummin", "cumprod",
                                                          "cumlogsumexp")],
        ("rev along a sharded axis", lambda lib, np_: lambda a: np_.flip(a, 0), (W,)),
        ("at[].multiply, min, max", lambda lib, np_: lambda a: (
            a.at[:, idx].multiply(2.0), a.at[:, idx].min(0.0), a.at[:, idx].max(0.0)), (A,)),
        ("stop_gradient, optimization_barrier, reduce_precision",
         lambda lib, np_: lambda a: lib.lax.reduce_precision(lib.lax.optimization_barrier(
             a * lib.lax.stop_gradient(a)), 5, 10), (W,)),
        ("checkpoint and checkpoint_name", lambda lib, np_: lib.checkpoint(
            lambda a: np_.sin(lib.ad_checkpoint.checkpoint_name(a * 2.0, "doubled"))), (W,)),
        ("custom_jvp call", lambda lib, np_: _custom_programs(lib)[0], (W,)),
        # (no grad: JAX's custom_vmap has no reverse mode)
        ("custom_vmap call", lambda lib, np_: _custom_programs(lib)[1], (W,), ("grad",)),
        # (no jvp: neither applies forward mode to a custom_vjp function)
        ("custom_vjp call", lambda lib, np_: _custom_programs(lib)[2], (W,), ("jvp",)),
        # (no grad: neither reverse-differentiates a while loop)
        ("while_loop", lambda lib, np_: lambda a: lib.lax.while_loop(
            lambda c: c.sum() < 100.0, lambda c: c * 2.0 + 1.0, a), (U,), ("grad",)),
        ("with_sharding_constraint (the type's own)", lambda lib, np_: lambda a:
            lib.lax.with_sharding_constraint(np_.sin(a), P("X", "Y")), (W,)),
        ("shard_map with in_specs from the types", lambda lib, np_: lambda a: lib.shard_map(
            lambda b: np_.sin(b) * 2.0, out_specs=P("X", "Y"))(a), (W,)),
        ("debug.print and debug.callback", lambda lib, np_: lambda a: (
            lib.debug.print("{}", a.sum()), lib.debug.callback(lambda v: None, a),
            a * 2.0)[-1], (W,)),
        # (not under vmap: impl refuses, JAX 0.10.2 fails with an IndexError)
        ("inspect_array_sharding", lambda lib, np_: lambda a: (
            lib.debug.inspect_array_sharding(a, callback=lambda s: None), a * 2.0)[-1], (W,),
         ("vmap",)),
        ("lu_pivots_to_permutation", lambda lib, np_: lambda p: (
            lib.lax.linalg.lu_pivots_to_permutation(p, 4)), (pivots,)),
    ])
    same_errors([
        # a scatter across devices without out_sharding (scatter_apply's rule)
        ("at[].apply", lambda lib, np_: lib.jit(lambda a: a.at[:, idx].apply(np_.sin))(A)),
    ])


def _fft_programs(lib, np_):
    """Programs whose FFTs transform axes sharded over the mesh. JAX 0.10.2 compiles the
    first two into programs XLA's CPU FFT refuses (its layout assignment hands the FFT
    the layout of the partitioner's all-gathers: a RET_CHECK when run); the gradient it
    runs, as impl did not before its FFT pinned the layout."""
    return {
        "irfft2 of a scaled rfft2": lambda x: np_.fft.irfft2(np_.fft.rfft2(x) * 2.0),
        "ifftn of a scaled fftn": lambda x: np_.real(np_.fft.ifftn(
            np_.fft.fftn(x.astype(np.complex64), axes=(1, 2)) * 2.0, axes=(1, 2))),
        "the gradient of an rfft2's power": lib.grad(
            lambda x: (np_.abs(np_.fft.rfft2(x)) ** 2).sum()),
    }


JAX_FAILS_TO_RUN = {"irfft2 of a scaled rfft2", "ifftn of a scaled fftn"}
FFT_OPERANDS = (put(base.rs(8, 4, 8, seed=24), "X", "Y"),
                put(base.rs(8, 4, 8, seed=24), "Y", "X"))


def case_fft_of_sharded_transformed_axes_compiles():
    """impl's jitted programs run, where JAX 0.10.2's fail for some (checked here):
    values against JAX's on a replicated operand, result types against JAX's (its
    tracing types them; only XLA refuses its program)."""
    failures = []
    with jax.set_mesh(MESH):
        for x in FFT_OPERANDS:
            programs, jax_programs = _fft_programs(impl, inp), _fft_programs(jax, jnp)
            for name, program in programs.items():
                where = f"{name} of {impl.typeof(x)}"
                try:
                    got = impl.jit(program)(x)
                    want = jax.jit(jax_programs[name])(impl.reshard(x, P()))
                    np.testing.assert_allclose(np.asarray(got), np.asarray(want),
                                               rtol=1e-4, atol=1e-4)
                    want_type = jax.make_jaxpr(jax_programs[name])(x).out_avals[0]
                    assert str(impl.typeof(got)) == str(want_type), (impl.typeof(got), want_type)
                    assert got.sharding == NamedSharding(MESH, want_type.sharding.spec), (
                        got.sharding)
                except Exception as e:  # noqa: BLE001 - reported below
                    failures.append(f"{where}: {type(e).__name__}: {str(e)[:300]}")
                if name in JAX_FAILS_TO_RUN:
                    e = base.raises(jax.errors.JaxRuntimeError,
                                    lambda: np.asarray(jax.jit(jax_programs[name])(x)))
                    assert "fft_thunk" in str(e), e
    assert not failures, "\n".join(failures)


def case_decomposition_and_fft_types():
    """The types of a few decompositions, solves and FFTs, as impl's rules give them
    (the staged program's result types, and the results of the jitted program) and
    JAX's; the rule groups above check every transformation, nightly."""
    args = (SPD, LOWER, RHS, put(base.rs(8, 4, 8, seed=22), "X", "Y"))

    def program(lib, np_):
        return lambda a, l, b, x: (
            tuple(lib.lax.linalg.eigh(a)), np_.linalg.svd(a, compute_uv=False),
            lib.lax.linalg.triangular_solve(l, b, left_side=True, lower=True),
            np_.fft.rfft(x))
    with jax.set_mesh(MESH):
        staged = [[str(t) for t in lib.make_jaxpr(program(lib, np_))(*args).out_avals]
                  for lib, np_ in BOTH]
        assert staged[0] == staged[1], staged
        check_typed(*[lib.jit(program(lib, np_))(*args) for lib, np_ in BOTH],
                    rtol=1e-4, atol=1e-4)


def case_decompositions_jax_fails_on():
    """JAX 0.10.2 types decompositions of batch-sharded matrices (its rules keep the batch
    sharding) but its own cholesky and qr, inv, and the derivatives of det, of svd's
    vectors and of a triangular solve's matrix fail on them (masks and vmaps inside it,
    not sharded as the batch). impl computes them, eagerly and under jit: the values
    against JAX's on the replicated matrices, the types against JAX's vmap over the
    batch (where that fails too: JAX's typing of its qr primitive; JAX's solve against
    the identity for inv)."""
    def qr_types(a):
        return jax.eval_shape(lambda m: tuple(jax.lax.linalg.qr_p.bind(
            m, pivoting=False, full_matrices=True, use_magma=None)), a)

    def inverse_types(a):
        return jnp.linalg.solve(a, jnp.broadcast_to(jnp.eye(4, dtype=np.float32), a.shape,
                                                    out_sharding=P("X")))
    programs = [
        ("cholesky", lambda lib, np_: np_.linalg.cholesky, (SPD,), None),
        ("qr", lambda lib, np_: _tuple(np_.linalg.qr), (SPD,), qr_types),
        ("inv", lambda lib, np_: np_.linalg.inv, (SPD,), inverse_types),
        ("grad of det", lambda lib, np_: lib.grad(lambda a: np_.linalg.det(a).sum()), (SPD,),
         None),
        ("jvp of svd", lambda lib, np_: lambda a: lib.jvp(
            lambda m: tuple(np_.linalg.svd(m)), (a,), (a * 0.5,)), (SPD,), None),
        ("grad of a triangular solve in its matrix", lambda lib, np_: lib.grad(
            lambda l, b: lib.lax.linalg.triangular_solve(l, b, left_side=True,
                                                         lower=True).sum()), (LOWER, RHS),
         None),
    ]
    failures = []
    with jax.set_mesh(MESH):
        for name, make, args, types in programs:
            base.raises(Exception, lambda: make(jax, jnp)(*args))   # why the references
            values = make(jax, jnp)(*jax.sharding.reshard(args, P()))
            want = jax.tree_util.tree_leaves(
                (types or jax.vmap(make(jax, jnp)))(*args))
            for run in (make(impl, inp), impl.jit(make(impl, inp))):
                got = run(*args)
                try:
                    base.check(got, values, rtol=1e-4, atol=1e-4, shardings=False)
                    assert [str(impl.typeof(g)) for g in jax.tree_util.tree_leaves(got)] == [
                        str(jax.typeof(w)) for w in want], (got, want)
                except AssertionError as e:
                    failures.append(f"{name}: {e}")
    assert not failures, "\n".join(failures)


def case_auto_and_explicit_axes():
    """auto_axes takes mesh axes out of the types inside (results resharded to
    out_sharding); explicit_axes puts them in (arguments resharded to in_sharding):
    values, the types seen inside and the results' types, eagerly and under jit."""
    auto_mesh = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)

    def make(lib, np_):
        seen = []

        def inner(x):
            seen.append(str(lib.typeof(x)))
            return x @ x.T
        to_auto = lib.sharding.auto_axes(inner, out_sharding=P("X"))
        only_x = lib.sharding.auto_axes(lambda x: x * 3.0, axes="X", out_sharding=P("X", "Y"))
        with jax.set_mesh(MESH):
            outs = [to_auto(W), lib.jit(to_auto)(W), lib.jit(only_x)(W),
                    lib.jit(lib.grad(lambda w: to_auto(w).sum()))(W)]

        def typed(x):
            seen.append(str(lib.typeof(x)))
            return x * 2.0
        to_explicit = lib.sharding.explicit_axes(typed, in_sharding=P("X", None))
        with jax.set_mesh(auto_mesh):
            a = jax.device_put(np.asarray(W), NamedSharding(auto_mesh, P("X")))
            outs += [to_explicit(a), lib.jit(to_explicit)(a)]
        return outs, seen
    got, want = both_programs(lambda lib: make(lib, lib.numpy))
    assert got[1] == want[1], (got[1], want[1])
    check_typed(got[0], want[0], rtol=1e-5, atol=1e-4)


def case_shard_map_on_explicit_meshes():
    """shard_map on a mesh with Explicit axes: the mesh from context, in_specs given or
    read from the arguments' types (JAX's default), results typed by out_specs; eagerly,
    under jit and differentiated."""
    def make(lib, np_):
        with jax.set_mesh(MESH):
            scaled = lib.shard_map(lambda x, y: x * 2.0 + y.sum(), out_specs=P("X", "Y"))
            summed = lib.shard_map(lambda x: lib.lax.psum(x, "Y"), in_specs=P("X", "Y"),
                                   out_specs=P("X"))
            replicated = lib.shard_map(lambda x: lib.lax.psum(x.sum(0), "X"), in_specs=P("X"),
                                       out_specs=P())
            return (scaled(W, B), lib.jit(scaled)(W, A), lib.jit(summed)(W),
                    lib.jit(lib.grad(lambda w: (summed(w) ** 2).sum()))(W),
                    lib.vmap(replicated)(_stacked(A)), lib.jit(lib.vmap(replicated))(_stacked(A)))
    got, want = base.both(make)
    check_typed(got, want)
    # (the specs as JAX writes them: P(None,) from the eager vmap, P(None, None) jitted)
    assert [g.sharding.spec for g in got] == [w.sharding.spec for w in want]


def case_shard_map_cotangent_typed_otherwise_than_its_out_spec():
    """The pullback of a shard_map whose result is split over Explicit axes takes a
    replicated cotangent under jit (JAX's primitive places it as the out_spec says);
    eagerly both refuse it with JAX's ValueError."""
    def pullback(lib):
        g = lib.shard_map(lambda v: v * 2.0, mesh=MESH, in_specs=P("X", "Y"),
                          out_specs=P("X", "Y"))
        return lambda a, c: lib.vjp(g, a)[1](c)

    a, c = W, base.rs(8, 4, seed=22)   # c: a NumPy array, replicated
    def jitted(lib, np_):
        with jax.set_mesh(MESH):
            return lib.jit(pullback(lib))(a, c)
    got, want = base.both(jitted)
    check_typed(got, want)
    for lib in (impl, jax):
        try:
            with jax.set_mesh(MESH):
                pullback(lib)(a, c)
        except ValueError as e:
            assert "does not match the specs of the input" in str(e), e
        else:
            raise AssertionError(f"{lib.__name__}: no ValueError eagerly")


def case_vmap_batch_axis_in_types():
    """vmap over an axis sharded on Explicit mesh axes: results whose sharding an
    operation states (reshard, out_sharding) keep the batch axis on those mesh axes, and
    spmd_axis_name may only repeat them, as in JAX 0.10."""
    C = put(base.rs(8, 4, seed=12))                                # replicated

    def make(lib, np_):
        with jax.set_mesh(MESH):
            return (lib.vmap(lambda r: lib.sharding.reshard(r, P("Y")))(A),
                    lib.jit(lib.vmap(lambda r: np_.dot(r, C.T, out_sharding=P("Y"))))(A),
                    lib.vmap(lambda r: lib.sharding.reshard(r, P("Y")), spmd_axis_name="X")(C),
                    lib.vmap(lambda r: lib.sharding.reshard(r, P(None)), spmd_axis_name="X")(A))
    got, want = base.both(make)
    check_typed(got, want)


def case_jit_shardings_agree_with_types():
    """jit's in_shardings must agree with the arguments' types (JAX's ValueError
    otherwise); out_shardings place the results of a top-level call (and their
    tangents), while inside another program the call's results keep its program's
    types, as in JAX."""
    stacked = jax.device_put(np.stack([np.asarray(W)] * 2), NamedSharding(MESH, P(None, "X", "Y")))

    def make(lib, np_):
        with jax.set_mesh(MESH):
            f = lib.jit(lambda x: x * 2.0, in_shardings=P("X", "Y"), out_shardings=P(None, "X"))
            return (f(W), lib.jit(lambda w: f(w) + 1.0)(W), lib.jvp(f, (W,), (W,)),
                    lib.jit(lambda w: lib.jvp(f, (w,), (w,)))(W), lib.vmap(f)(stacked))
    got, want = base.both(make)
    check_typed(got, want)


def case_visualize_array_sharding():
    """impl.debug.visualize_array_sharding draws what JAX draws for the same values
    (results of impl's programs placed by their types), and for traced values inside
    jit and grad; under vmap JAX 0.10.2 fails (IndexError), impl refuses."""
    import contextlib
    import io
    try:
        import rich  # noqa: F401
    except ImportError as e:
        raise AssertionError("the test extras (pip install -e '.[test]') bring rich, which "
                             "JAX's drawing needs") from e

    def drawn(lib, x, **kwargs):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            lib.debug.visualize_array_sharding(x, **kwargs)
        return buf.getvalue()
    with jax.set_mesh(MESH):
        dot = impl.jit(lambda a, b: inp.dot(a, b, out_sharding=P(None, "X")))(A, B.T)
        for x, kwargs in ((W, {}), (A, {"use_color": False}), (dot, {}),
                          (impl.jit(lambda a: a.reshape(32))(W), {})):
            got, want = drawn(impl, x), drawn(jax, x)
            assert got == want, f"impl drew\n{got}\nJAX draws\n{want}"
            assert drawn(impl, x, **kwargs) == drawn(jax, x, **kwargs)
    assert "CPU 0 │ CPU 1" in drawn(impl, W)     # a grid of devices was drawn

    # Traced values are drawn as XLA partitioned them, when the program is compiled
    # (once), and under grad with the primal values; staging alone draws nothing.
    def traced(lib, np_):
        def show(x):
            lib.debug.visualize_array_sharding(x)
            return x
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), jax.set_mesh(MESH):
            f = lib.jit(lambda a, b: show(np_.dot(show(a), b, out_sharding=P(None, "X")))
                        .sum(1))
            f(W, B.T), f(W, B.T)
            lib.jit(lambda a: show(a.T * 2.0).sum())(A)
            lib.grad(lambda a: show(np_.sin(a)).sum())(W)
            lib.make_jaxpr(show)(W)
            lib.jit(lambda a: lib.debug.print("a = {}", a) or a * 2.0)(W)   # printed whole
            jax.effects_barrier()       # the print runs asynchronously
        return buf.getvalue()
    got, want = traced(impl, inp), traced(jax, jnp)
    assert got == want, f"impl drew\n{got}\nJAX draws\n{want}"
    assert got.count("CPU 0") == 4 and "a = [[" in got, got
    base.raises(IndexError, lambda: jax.vmap(jax.debug.visualize_array_sharding)(W))
    base.raises(NotImplementedError, lambda: impl.vmap(impl.debug.visualize_array_sharding)(W),
                match="under vmap")


def case_creation_with_out_sharding():
    def make(lib, np_):
        with jax.set_mesh(MESH):
            f = lib.jit(lambda a: np_.ones((8, 4), out_sharding=P("X")) * a
                        + np_.full((8, 4), 2.0, out_sharding=P("X")))
            return (np_.zeros((8, 4), out_sharding=P(None, "Y")), f(A),
                    lib.jit(lambda s: np_.full((8, 4), s, out_sharding=P("X", "Y")))(
                        np.float32(3.0)),
                    lib.lax.full((8, 4), 1.5, np.float32, sharding=NamedSharding(MESH, P("Y"))))
    got, want = base.both(make)
    check_typed(got[:3], want[:3])
    # lax.full: JAX's result keeps the spec as written (P('Y',)), impl's one entry per
    # axis (P('Y', None)): the same placement, compared as types
    base.check(got[3], want[3], shardings=False)
    assert impl.typeof(got[3]).sharding.spec == type_spec(want[3])
    assert got[3].sharding.is_equivalent_to(want[3].sharding, 2)

    def ranges(lib, np_):
        with jax.set_mesh(MESH):
            return (np_.arange(8, out_sharding=P("X")),
                    np_.arange(0., 4., 0.5, out_sharding=P("Y")),
                    lib.jit(lambda a: np_.arange(1, 9, out_sharding=P("X"))[:, None] * a)(A))
    check_typed(*base.both(ranges))


def _draws(lib, k, a):
    """Every draw of JAX 0.10.2 that takes out_sharding, placed by it (`a`: a positive
    f32[8@X,4] parameter), and the draws JAX places without it."""
    r = lib.random
    return [
        r.normal(k, (8, 4), out_sharding=P("X", "Y")),
        r.uniform(k, (8, 4), minval=-a, maxval=a, out_sharding=P(None, "Y")),
        r.bits(k, (8,), out_sharding=P("X")),
        r.randint(k, (8, 4), 0, 10, np.uint8, out_sharding=P("X", "Y")),
        r.truncated_normal(k, -a, a, out_sharding=P(None, "Y")),
        r.bernoulli(k, 0.3, (8, 4), out_sharding=P("X")),
        r.permutation(k, 8, out_sharding=P("X")),
        r.permutation(k, a, out_sharding=P(None, "Y")),
        r.permutation(k, a, independent=True, out_sharding=P("X")),
        r.categorical(k, a, shape=(2, 8), out_sharding=P(None, "X")),
        r.categorical(k, a, shape=(2, 8), replace=False, out_sharding=P(None, "X")),
        r.gumbel(k, (8, 4), out_sharding=P("X", "Y")),
        r.exponential(k, (8, 4), out_sharding=P("X")),
        r.laplace(k, (8, 4), out_sharding=P("Y")),
        r.logistic(k, (8, 4), out_sharding=P("X")),
        r.cauchy(k, (8, 4), out_sharding=P(None, "Y")),
        r.pareto(k, 3.0, (8, 4), out_sharding=P("X")),
        r.rayleigh(k, a, out_sharding=P("X", "Y")),
        r.wald(k, 2.0, (8, 4), out_sharding=P("X")),
        r.lognormal(k, shape=(8, 4), out_sharding=P("X")),
        r.triangular(k, 0., 1., 3., (8, 4), out_sharding=P("X")),
        r.geometric(k, 0.3, (8, 4), out_sharding=P("X", "Y")),
        r.rademacher(k, (8, 4), out_sharding=P("X", "Y")),
        r.maxwell(k, (8, 4), out_sharding=P("X", "Y")),
        r.gamma(k, a, out_sharding=P(None, "Y")),
        r.loggamma(k, a, out_sharding=P("X", "Y")),
        r.beta(k, a, a, out_sharding=P(None, "Y")),
        r.dirichlet(k, np.ones(4, np.float32), (8,), out_sharding=P("X")),
        r.chisquare(k, 3.0, (8, 4), out_sharding=P("X")),
        r.f(k, 3.0, 4.0, (8, 4), out_sharding=P("X")),
        r.t(k, 3.0, (8, 4), out_sharding=P("X")),
        r.generalized_normal(k, 2.0, (8, 4), out_sharding=P("X")),
        r.ball(k, 4, shape=(8,), out_sharding=P("X")),
        r.orthogonal(k, 4, (8,), out_sharding=P("X")),
        r.multivariate_normal(k, np.zeros(4, np.float32), np.eye(4, dtype=np.float32), (8,),
                              out_sharding=P("X")),
        r.poisson(k, 3.0, (8, 4), out_sharding=P("X", "Y")),
        # without out_sharding: scalars and draws shaped by their parameters replicated
        # (JAX's default for most samplers), the others typed by their parameters
        r.normal(k), r.gamma(k, a), r.bernoulli(k, a * 0.1),
        r.truncated_normal(k, -a, a), r.wald(k, a), r.categorical(k, a),
    ]


def case_random_draws_with_out_sharding():
    """Draws placed by out_sharding: JAX's values (the bits do not depend on the
    sharding) and JAX's types, staged (all of them, in one program) and eagerly (some:
    each eager draw compiles its own programs)."""
    a = put(np.abs(base.rs(8, 4, seed=13)) + 0.5, "X")

    def make(lib, np_):
        with jax.set_mesh(MESH):
            k = lib.random.key(0)
            return (lib.jit(lambda k, a: _draws(lib, k, a))(k, a),
                    lib.random.normal(k, (8, 4), out_sharding=P("X", "Y")),
                    lib.random.gamma(k, a, out_sharding=P(None, "Y")),
                    lib.random.permutation(k, 8, out_sharding=P("X")),
                    lib.random.uniform(k, (8,), out_sharding=P("X", None, None)),
                    lib.random.normal(k), lib.random.bernoulli(k, a * 0.1))
    got, want = base.both(make)
    check_typed(got, want, rtol=1e-6, atol=1e-6)


def case_data_parallel_mlp_training_steps():
    """A data-parallel MLP (the shape of JAX's SPMD MNIST example): the batch sharded
    over all 8 devices, parameters replicated, jitted gradient steps and accuracy; the
    parameters' gradients contract the sharded batch axis (an all-reduce) back to the
    parameters' type. Values and shardings against JAX's."""
    batch_mesh = jax.make_mesh((8,), ("batch",))

    def program(lib):
        np_ = lib.numpy

        def predict(params, inputs):
            activations = inputs
            for w, b in params[:-1]:
                activations = np_.tanh(np_.dot(activations, w) + b)
            final_w, final_b = params[-1]
            logits = np_.dot(activations, final_w) + final_b
            return logits - lib.scipy.special.logsumexp(logits, axis=1, keepdims=True)

        def loss(params, batch):
            inputs, targets = batch
            return -np_.mean(predict(params, inputs) * targets)

        @lib.jit
        def update(params, batch):
            grads = lib.grad(loss)(params, batch)
            return [(w - 0.1 * dw, b - 0.1 * db) for (w, b), (dw, db) in zip(params, grads)]

        @lib.jit
        def accuracy(params, batch):
            inputs, targets = batch
            return np_.mean(np_.argmax(targets, axis=1)
                            == np_.argmax(predict(params, inputs), axis=1))
        return update, accuracy, loss

    rng = np.random.RandomState(0)
    sizes = [16, 32, 32, 10]
    params0 = [(0.1 * rng.randn(m, n).astype(np.float32), 0.1 * rng.randn(n).astype(np.float32))
               for m, n in zip(sizes[:-1], sizes[1:])]
    x = rng.randn(64, 16).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.randint(0, 10, 64)]

    def make(lib, np_):
        update, accuracy, loss = program(lib)
        with jax.set_mesh(batch_mesh):
            params = jax.device_put(params0, P())
            batch = jax.device_put((x, y), P("batch"))
            for _ in range(3):
                params = update(params, batch)
            return params, accuracy(params, batch), lib.jit(lib.grad(loss))(params, batch)
    got, want = base.both(make)
    check_typed(got, want, rtol=1e-4, atol=1e-5)


def case_data_parallel_program_as_a_user_writes_it():
    """A small data-parallel classifier written against the API surface of JAX's SPMD
    example program: a 1-d Explicit mesh over all devices, parameters placed replicated
    and batches along the mesh axis by `device_put` with NamedShardings (a list of
    tuples), a donated jitted step called inside `set_mesh` and outside any mesh
    context, `reshard` of host data with a NamedSharding outside the context, and a
    jitted accuracy. The printed lines, values, types and shardings against JAX's."""
    def program(lib):
        np_ = lib.numpy
        mesh = lib.make_mesh((lib.device_count(),), ("data",),
                             axis_types=(lib.sharding.AxisType.Explicit,))
        on_all = lib.NamedSharding(mesh, lib.sharding.PartitionSpec())
        split = lib.NamedSharding(mesh, lib.sharding.PartitionSpec("data"))

        def forward(weights, x):
            for w, b in weights[:-1]:
                x = np_.tanh(np_.dot(x, w) + b)
            w, b = weights[-1]
            scores = np_.dot(x, w) + b
            return scores - lib.scipy.special.logsumexp(scores, axis=1, keepdims=True)

        @functools.partial(lib.jit, donate_argnums=0)
        def step(weights, data):
            x, y = data
            g = lib.grad(lambda ws: -np_.mean(np_.sum(forward(ws, x) * y, axis=1)))(weights)
            return [(w - 0.5 * gw, b - 0.5 * gb) for (w, b), (gw, gb) in zip(weights, g)]

        @lib.jit
        def hits(weights, data):
            x, y = data
            return np_.mean(np_.argmax(forward(weights, x), axis=1) == np_.argmax(y, axis=1))

        rng = np.random.RandomState(7)
        sizes = (12, 16, 5)
        weights = lib.device_put([(0.3 * rng.randn(m, n), 0.3 * rng.randn(n))
                                  for m, n in zip(sizes[:-1], sizes[1:])], on_all)
        xs = rng.rand(20, 12).astype(np.float32)
        ys = np.eye(5, dtype=np.float32)[rng.randint(0, 5, 20)]
        lines = []
        for start in (0, 8, 16):                # the last batch is padded to 8 rows
            bx, by = xs[start:start + 8], ys[start:start + 8]
            bx = np.concatenate([bx, xs[:8 - len(bx)]])
            by = np.concatenate([by, ys[:8 - len(by)]])
            batch = (lib.device_put(bx, split), lib.device_put(by, split))
            if start:
                weights = step(weights, batch)
            else:
                with lib.set_mesh(mesh):
                    weights = step(weights, batch)
            lines.append(f"{lib.typeof(batch[0])} -> {lib.typeof(weights[0][0])}")
        data = (lib.sharding.reshard(xs[:16], split), lib.sharding.reshard(ys[:16], split))
        accuracy = hits(weights, data)
        lines.append(f"accuracy {accuracy} of type {lib.typeof(accuracy)}")
        return lines, weights, data, accuracy
    got, want = both_programs(program)
    assert got[0] == want[0], (got[0], want[0])
    check_typed(got[1:], want[1:], rtol=1e-5, atol=1e-6)


def both_programs(program):
    """`program(lib)` with impl and with JAX."""
    return [program(lib) for lib, _ in BOTH]


def case_cotangents_of_unused_inputs():
    """The cotangent of an input the program does not use is a zero of the input's
    type, placed as JAX places it: off any mesh, sharded over Explicit axes, on an Auto
    mesh, through jit's shardings and shard_map; a cotangent given to a vjp function
    must have the output's type, sharding included (JAX's ValueError)."""
    x = base.rs(8, 4, seed=23)
    auto = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    on_auto = jax.device_put(x, NamedSharding(auto, P("x", "y")))

    def make(lib, np_):
        grad = lib.grad(lambda a, b: (a ** 2).sum(), argnums=(0, 1))
        outs = [grad(x, x), grad(on_auto, on_auto),
                lib.jit(lib.grad(lib.jit(lambda a, b: (a ** 2).sum(),
                                         in_shardings=(NamedSharding(auto, P("x")),
                                                       NamedSharding(auto, P("y")))),
                                 argnums=(0, 1)))(x, x)]
        with jax.set_mesh(MESH):
            mapped = lib.shard_map(lambda a, b: lib.lax.psum((a ** 2).sum(), ("X", "Y")),
                                   in_specs=(P("X", "Y"), P("X")), out_specs=P())
            outs += [lib.jit(grad)(W, x), lib.jit(lib.grad(mapped, argnums=(0, 1)))(W, A)]
        return outs
    check_typed(*base.both(make))
    with jax.set_mesh(MESH):
        base.same_error(lambda lib, np_: lib.vjp(lambda a, b: a * 2.0, W, A)[1](
            np_.ones((8, 4))))


# ------------------------------------------------------------------ errors

def case_sharding_type_errors_as_jax():
    same_errors([
        ("add over different mesh axes", lambda lib, np_: A + lib.sharding.reshard(A, P("Y"))),
        ("contracting sharded axes without out_sharding", lambda lib, np_: np_.dot(W, Z)),
        ("the same, staged", lambda lib, np_: lib.jit(np_.dot)(W, Z)),
        ("the same, only traced", lambda lib, np_: lib.make_jaxpr(np_.dot)(W, Z)),
        ("add over different mesh axes, only traced",
         lambda lib, np_: lib.make_jaxpr(lambda a, b: a + b)(A, lib.sharding.reshard(A, P("Y")))),
        ("the same, under grad", lambda lib, np_: lib.grad(lambda a: np_.dot(a, Z).sum())(W)),
        ("a result sharded twice over one mesh axis", lambda lib, np_: np_.dot(A, A.T)),
        ("reshape the sharding cannot follow", lambda lib, np_: W.reshape(4, 8)),
        ("cumsum along a sharded axis", lambda lib, np_: np_.cumsum(W, axis=0)),
        ("select cases sharded differently", lambda lib, np_: np_.where(
            W > 0, W, lib.sharding.reshard(W, P(None, "Y")))),
        ("concatenate of differently sharded operands",
         lambda lib, np_: np_.concatenate([W, lib.sharding.reshard(W, P("X"))])),
        ("slice breaking divisibility", lambda lib, np_: W[:3]),
        ("gather from a sharded operand", lambda lib, np_: np_.take(W, np.array([0, 1]), axis=1)),
        ("outer product sharded twice over Y", lambda lib, np_: np_.outer(R, R)),
        ("cond branches typed differently", lambda lib, np_: lib.lax.cond(
            True, lambda a: a * 2.0, lambda a: lib.sharding.reshard(a, P("X")), W)),
        ("loop carry changing type", lambda lib, np_: lib.lax.fori_loop(
            0, 2, lambda i, c: lib.sharding.reshard(c, P("X")), W)),
        ("indexing into a sharded axis with an array",
         lambda lib, np_: lib.jit(lambda a: a[np.array([0, 2])])(A)),
        ("at[].set into a sharded axis",
         lambda lib, np_: lib.jit(lambda a: a.at[0].set(1.0))(W)),
        ("conv with a sharded kernel", lambda lib, np_: lib.lax.conv(
            put(np.ones((8, 3, 4, 4)), "X"), put(np.ones((4, 3, 3, 3)), "Y"), (1, 1), "SAME")),
        ("pooling that breaks divisibility", lambda lib, np_: lib.jit(
            lambda a: lib.lax.reduce_window(a, 0.0, lib.lax.add, (1, 2), (1, 1), "VALID"))(W)),
        ("auto_axes without out_sharding",
         lambda lib, np_: lib.sharding.auto_axes(lambda x: x)(W)),
        ("vmap over axes sharded differently", lambda lib, np_: lib.vmap(
            lambda r, s: r + s)(A, put(np.ones((8, 4))))),
        ("jit in_shardings disagreeing with the argument's type",
         lambda lib, np_: lib.jit(lambda x: x * 2.0, in_shardings=P("X"))(W)),
        ("grad through jit out_shardings other than the program's types",
         lambda lib, np_: lib.grad(lambda w: (lib.jit(
             lambda x: x * 2.0, out_shardings=P(None, "X"))(w) ** 2).sum())(W)),
        ("vmap with an spmd_axis_name other than the mapped axis's",
         lambda lib, np_: lib.vmap(lambda r: r * 2.0, spmd_axis_name="Y")(A)),
        ("a decomposition of matrices sharded along their rows", lambda lib, np_:
            lib.lax.linalg.eigh(put(_spd(8), "X", "Y"), symmetrize_input=False)),
        ("svd of matrices sharded along their columns", lambda lib, np_: np_.linalg.svd(
            put(_spd(8), None, None, "Y"))),
        ("a solve whose operands' batches are sharded differently",
         lambda lib, np_: lib.lax.linalg.triangular_solve(LOWER, put(np.asarray(RHS)),
                                                          left_side=True, lower=True)),
        ("a triangular solve contracting a sharded axis",
         lambda lib, np_: lib.lax.linalg.triangular_solve(
             put(np.asarray(LOWER), "X", "Y"), RHS, left_side=True, lower=True,
             transpose_a=True)),
        ("an rfft whose sharded last axis stops dividing", lambda lib, np_: np_.fft.rfft(
            put(base.rs(8, 4, 8), "X", None, "Y"))),
        ("a draw's out_sharding not dividing its shape", lambda lib, np_: lib.random.randint(
            lib.random.key(0), (6,), 0, 10, out_sharding=P("X"))),
        ("arange given both device and out_sharding", lambda lib, np_: np_.arange(
            8, device=jax.devices()[0], out_sharding=P("X"))),
    ])
    # a PartitionSpec needs a mesh in context
    base.same_error(lambda lib, np_: lib.random.normal(lib.random.key(0), (8,),
                                                         out_sharding=P("X")))
    base.same_error(lambda lib, np_: np_.arange(8, out_sharding=P("X")))
    with jax.set_mesh(MESH):
        e = base.raises(ShardingTypeError, lambda: np_dot_error())
        assert "lhs_contracting_spec=('Y',)" in str(e), e


def np_dot_error():
    return inp.dot(W, Z)


# ---------------------------------------------------- unreduced and reduced axes

UNREDUCED = P(None, None, unreduced={"X"})
REDUCED = P(None, None, reduced={"X"})
LHS = put(base.rs(8, 4, seed=20), None, "X")      # f32[8,4@X]: contracted axis on X
RHS_X = put(base.rs(4, 6, seed=21), "X", None)    # f32[4@X,6]
ROWS = put(base.rs(8, 4, seed=22), "X", None)     # f32[8@X,4]: a batch sharded over X
WEIGHTS = put(base.rs(4, 6, seed=23))             # f32[4,6], replicated


def _partial_sums(lib, np_, a, b):
    return np_.dot(a, b, out_sharding=UNREDUCED)


def _unreduced_programs():
    """(name, make(lib, numpy) -> fn, args): programs whose results have unreduced or
    reduced axes in their types (compared as types, and as values once resharded to
    replicated: an unreduced array cannot be read)."""
    def on_sums(op):
        return lambda lib, np_: lambda a, b: op(lib, np_, _partial_sums(lib, np_, a, b))
    lax_dot = lambda lib, np_: lambda a, b: lib.lax.dot_general(
        a, b, (((1,), (0,)), ((), ())), out_sharding=UNREDUCED)
    return [
        ("dot", lambda lib, np_: functools.partial(_partial_sums, lib, np_), (LHS, RHS_X)),
        ("einsum", lambda lib, np_: lambda a, b: np_.einsum("ij,jk->ik", a, b,
                                                             out_sharding=UNREDUCED),
         (LHS, RHS_X)),
        ("lax.dot_general", lax_dot, (LHS, RHS_X)),
        ("the same with a sharded free axis", lambda lib, np_: lambda a, b: np_.dot(
            a, b, out_sharding=P("Y", None, unreduced={"X"})), (LHS, RHS_X)),
        ("sum of two", on_sums(lambda lib, np_, u: np_.add(u, u)),
         (LHS, RHS_X)),
        ("transposed, summed, cast", on_sums(lambda lib, np_, u: lib.lax.convert_element_type(
            np_.sum(u.T, 1), np.float16)), (LHS, RHS_X)),
        ("broadcast, concatenated", on_sums(lambda lib, np_, u: np_.concatenate(
            [np_.broadcast_to(u, (2, 8, 6)), np_.expand_dims(u, 0)])),
         (LHS, RHS_X)),
        ("times a reduced value", on_sums(lambda lib, np_, u: np_.multiply(
            u, lib.sharding.reshard(np_.ones((8, 6)) * 3.0, REDUCED))), (LHS, RHS_X)),
        ("vmapped", lambda lib, np_: lib.vmap(lambda a: _partial_sums(lib, np_, a, RHS_X)),
         (put(base.rs(2, 8, 4, seed=24), None, None, "X"),)),
        ("reduced", lambda lib, np_: lambda a, b: lib.sharding.reshard(
            _partial_sums(lib, np_, a, b), P(None, None, reduced={"X"})), (LHS, RHS_X)),
        ("reduced, by elementwise operations", lambda lib, np_: lambda w: np_.add(
            np_.sin(w) * w, 1.0).T.sum(0), (lib_reduced(WEIGHTS),)),
    ]


def lib_reduced(x):
    return jax.device_put(x, NamedSharding(MESH, REDUCED))


def _readable(x):
    return jax.sharding.reshard(x, P()) if jax.typeof(x).sharding.spec.unreduced else x


def case_unreduced_and_reduced_axes_in_types():
    """`P(..., unreduced=)` in out_sharding: a contraction over an axis sharded on X
    leaves its partial sums on their devices, typed {U:X}; add, mul by a reduced value,
    layout changes, sums and casts keep it; reshard reduces. Types (printed) and values
    against JAX's, eager and jitted."""
    failures = []
    with jax.set_mesh(MESH):
        for name, make, args in _unreduced_programs():
            for kind in ("value", "jit"):
                want = (jax.jit(make(jax, jnp)) if kind == "jit" else make(jax, jnp))(*args)
                try:
                    got = (impl.jit(make(impl, inp)) if kind == "jit"
                           else make(impl, inp))(*args)
                except Exception as e:  # noqa: BLE001 - reported below
                    failures.append(f"{name} [{kind}]: impl raised {e!r}")
                    continue
                if str(impl.typeof(got)) != str(jax.typeof(want)):
                    failures.append(f"{name} [{kind}]: {impl.typeof(got)} but JAX's is "
                                    f"{jax.typeof(want)}")
                    continue
                try:
                    with jax.set_mesh(MESH):
                        base.check(_readable(got), _readable(want), rtol=1e-4, atol=1e-4)
                except AssertionError as e:
                    failures.append(f"{name} [{kind}]: {e}")
        # printed programs, and the reduction reshard performs in the compiled program
        text = str(impl.make_jaxpr(lambda a, b: impl.sharding.reshard(
            _partial_sums(impl, inp, a, b), P()))(LHS, RHS_X))
        assert "c:f32[8,6]{U:X} = dot_general[" in text and "d:f32[8,6] = reshard" in text, text
        hlo = impl.jit(lambda a, b: _partial_sums(impl, inp, a, b)).lower(
            LHS, RHS_X).compile().as_text()
        assert "all-reduce" not in hlo, hlo[-2000:]
        hlo = impl.jit(lambda a, b: impl.sharding.reshard(
            _partial_sums(impl, inp, a, b), P())).lower(LHS, RHS_X).compile().as_text()
        assert "all-reduce" in hlo, hlo[-2000:]
        # device_put and jit's shardings take them
        for lib, np_ in BOTH:
            assert str(lib.typeof(lib.device_put(np.asarray(WEIGHTS), REDUCED))) == \
                "float32[4,6]{R:X}"
        got, want = (lib.jit(lambda w: w * 2.0, out_shardings=NamedSharding(MESH, REDUCED))(
            np.asarray(WEIGHTS)) for lib, _ in BOTH)
        assert str(impl.typeof(got)) == str(jax.typeof(want)) == "float32[4,6]{R:X}"
        base.check(got, want)
    assert not failures, "\n".join(failures)


def case_unreduced_and_reduced_axes_under_differentiation():
    """Cotangents swap the two: that of a `reduced` input is unreduced (its sum over
    the devices is still to be taken), that of an unreduced result reduced; tangents
    keep their primal's. Types and (resharded) values against JAX's."""
    def sums_then_loss(lib, np_):
        return lambda a, b: (lib.sharding.reshard(_partial_sums(lib, np_, a, b), P()) ** 2).sum()

    def data_parallel_loss(lib, np_):
        return lambda w, x: (np_.tanh(np_.dot(x, np_.sin(w))) ** 2).sum()
    failures = []
    with jax.set_mesh(MESH):
        programs = [
            ("grad through partial sums", lambda lib, np_: lib.grad(
                sums_then_loss(lib, np_), argnums=(0, 1)), (LHS, RHS_X)),
            ("grad of reduced weights", lambda lib, np_: lib.grad(
                data_parallel_loss(lib, np_)), (lib_reduced(WEIGHTS), ROWS)),
            ("tangents of partial sums", lambda lib, np_: lambda a, b: lib.jvp(
                functools.partial(_partial_sums, lib, np_), (a, b), (a, b)), (LHS, RHS_X)),
        ]
        for name, make, args in programs:
            for kind in ("value", "jit"):
                got, want = ((lib.jit(make(lib, np_)) if kind == "jit" else make(lib, np_))(*args)
                             for lib, np_ in BOTH)
                g_types = [str(impl.typeof(g)) for g in jax.tree_util.tree_leaves(got)]
                w_types = [str(jax.typeof(w)) for w in jax.tree_util.tree_leaves(want)]
                if g_types != w_types:
                    failures.append(f"{name} [{kind}]: {g_types} but JAX's are {w_types}")
                    continue
                try:
                    base.check(jax.tree_util.tree_map(_readable, got),
                               jax.tree_util.tree_map(_readable, want), rtol=1e-4, atol=1e-4)
                except AssertionError as e:
                    failures.append(f"{name} [{kind}]: {e}")
    assert "{U:X}" in "".join(str(jax.typeof(w)) for w in jax.tree_util.tree_leaves(want))
    assert not failures, "\n".join(failures)


def case_out_sharding_of_another_sharding_type_as_jax():
    """A sharding other than a NamedSharding or PartitionSpec as `out_sharding=`: JAX's
    TypeError, word for word, from each API that takes it."""
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    x = np.ones((2, 2), np.float32)
    calls = {
        "dot": lambda lib, np_: np_.dot(x, x, out_sharding=one),
        "reshape": lambda lib, np_: np_.reshape(x, (4,), out_sharding=one),
        "einsum": lambda lib, np_: np_.einsum("ij,jk->ik", x, x, out_sharding=one),
        "reshard": lambda lib, np_: lib.sharding.reshard(x, one),
        "zeros": lambda lib, np_: np_.zeros((2,), out_sharding=one),
        "arange": lambda lib, np_: np_.arange(2, out_sharding=one),
        "uniform": lambda lib, np_: lib.random.uniform(lib.random.key(0), (2,),
                                                       out_sharding=one),
        "gamma": lambda lib, np_: lib.random.gamma(lib.random.key(0), 1.0, (2,),
                                                   out_sharding=one),
        "permutation": lambda lib, np_: lib.random.permutation(lib.random.key(0), 3,
                                                               out_sharding=one),
    }
    for name, make in calls.items():
        raised = []
        for lib, np_ in ((jax, jnp), (impl, inp)):
            try:
                make(lib, np_)
                raised.append(None)
            except Exception as e:  # noqa: BLE001 - compared below
                raised.append((type(e), str(e)))
        assert raised[0] is not None and raised[0] == raised[1], (name, raised)


def case_unreduced_and_reduced_refusals_as_jax():
    """Where JAX refuses unreduced or reduced operands, impl raises the same type."""
    sums = lambda lib, np_: _partial_sums(lib, np_, LHS, RHS_X)
    same_errors([
        ("unreduced plus replicated, traced", lambda lib, np_: lib.make_jaxpr(
            lambda a, b: np_.add(_partial_sums(lib, np_, a, b), np_.ones((8, 6))))(LHS, RHS_X)),
        ("sin of an unreduced value", lambda lib, np_: lib.jit(
            lambda a, b: np_.sin(_partial_sums(lib, np_, a, b)))(LHS, RHS_X)),
        ("subtraction of unreduced values", lambda lib, np_: lib.jit(
            lambda a, b: np_.subtract(*[_partial_sums(lib, np_, a, b)] * 2))(LHS, RHS_X)),
        ("product of two unreduced values", lambda lib, np_: lib.jit(
            lambda a, b: np_.multiply(*[_partial_sums(lib, np_, a, b)] * 2))(LHS, RHS_X)),
        ("unreduced times a replicated scalar", lambda lib, np_: lib.jit(
            lambda a, b: np_.multiply(_partial_sums(lib, np_, a, b), 2.0))(LHS, RHS_X)),
        ("contracting an unreduced value", lambda lib, np_: np_.dot(
            sums(lib, np_), np.ones((6, 2), np.float32))),
        ("unreduced over axes not contracted", lambda lib, np_: np_.dot(
            LHS, RHS_X, out_sharding=P(None, None, unreduced={"Y"}))),
        ("unreduced without a sharded contraction", lambda lib, np_: np_.dot(
            np.asarray(LHS), np.asarray(RHS_X), out_sharding=UNREDUCED)),
        ("reduced plus replicated", lambda lib, np_: lib.jit(
            lambda w: np_.add(w, np_.ones((4, 6))))(lib_reduced(WEIGHTS))),
        ("reduced plus sharded over the same axis", lambda lib, np_: lib.jit(
            lambda w: np_.add(w, lib.sharding.reshard(w, P("X", None))))(
                lib_reduced(WEIGHTS))),
        ("integer power of a reduced value", lambda lib, np_: lib.jit(
            lambda w: w ** 2)(lib_reduced(WEIGHTS))),
        ("an unreduced array read", lambda lib, np_: np.asarray(sums(lib, np_))),
    ])


# JAX 0.10.2 fails inside on these operations of unreduced (U) or reduced (R) operands
# over Explicit axes: a ValueError about `pspec[...]` (its rules index the spec), or
# an assertion while lowering; its compiler aborts the process on a host callback of
# an unreduced value. impl refuses them with NotImplementedError (but reshapes, keeping
# the axes); docs/sharding.md lists them.
_INDEXING_THE_SPEC = {"argmax", "argmin", "reduce_max", "reduce_min", "reduce_prod", "cumsum",
                      "cumprod", "cummax", "cummin", "cumlogsumexp", "gather",
                      "take_along_axis", "scatter", "scatter_add", "scatter_mul", "scatter_min",
                      "scatter_max", "sort", "top_k", "conv_general_dilated", "lu", "qr", "svd",
                      "triangular_solve", "tridiagonal_solve", "sharding_constraint", "reshape"}
JAX_FAILS_INSIDE = ({(n, "U") for n in _INDEXING_THE_SPEC} | {(n, "R") for n in _INDEXING_THE_SPEC}
                    | {("cholesky", "R"), ("eigh", "R"), ("fft", "U"), ("debug_callback", "U")})
JAX_ABORTS = {("debug_callback", "U")}       # not run with JAX
SUMMED_ROWS = lib_reduced(put(base.rs(8, 6, seed=25)))   # f32[8,6]{R:X}


def _one_operand_results():
    """(name, kind) -> (impl's outcome, JAX's outcome) of each operation of
    base.operations_of_one_operand on an unreduced (U: partial sums) or a reduced (R)
    f32[8,6] operand, jitted: (types, readable values), or the exception."""
    outcomes = {}
    with jax.set_mesh(MESH):
        for lib, np_ in BOTH:
            for name, op in base.operations_of_one_operand(lib, np_).items():
                for kind in ("U", "R"):
                    if lib is jax and (name, kind) in JAX_ABORTS:
                        continue
                    fn, args = ((lambda a, b, op=op: op(_partial_sums(lib, np_, a, b)),
                                 (LHS, RHS_X)) if kind == "U" else (op, (SUMMED_ROWS,)))
                    try:
                        out = lib.jit(fn)(*args)
                        outcomes.setdefault((name, kind), []).append(
                            ([str(lib.typeof(o)) for o in jax.tree_util.tree_leaves(out)],
                             jax.tree_util.tree_map(_readable, out)))
                    except Exception as e:  # noqa: BLE001 - compared below
                        outcomes.setdefault((name, kind), []).append(e)
    return outcomes


def _jax_failed_inside(e):
    return isinstance(e, AssertionError) or (isinstance(e, ValueError) and "pspec" in str(e))


def case_unreduced_and_reduced_operands_of_each_operation():
    """For each operation on an unreduced or a reduced operand: where JAX works, impl
    gives its types and values; where JAX refuses, impl raises the same exception type;
    where JAX fails inside (JAX_FAILS_INSIDE, which this checks), impl raises
    NotImplementedError, but reshapes."""
    failures, failed_inside = [], set()
    for key, results in _one_operand_results().items():
        got, want = results if len(results) == 2 else (results[0], None)
        if want is None or _jax_failed_inside(want):
            failed_inside.add(key)
            if key == ("reshape", "U") or key == ("reshape", "R"):
                ok = not isinstance(got, Exception) and got[0] == [f"float32[48]{{{key[1]}:X}}"]
            else:
                ok = isinstance(got, NotImplementedError)
            if not ok:
                failures.append(f"{key}: JAX fails inside ({want!r}), impl gave {got!r}")
        elif isinstance(want, Exception):
            if type(got) is not type(want):
                failures.append(f"{key}: JAX raised {want!r}, impl {got!r}")
        elif isinstance(got, Exception):
            failures.append(f"{key}: JAX gave {want[0]}, impl raised {got!r}")
        elif got[0] != want[0]:
            failures.append(f"{key}: types {got[0]}, JAX's {want[0]}")
        else:
            try:
                with jax.set_mesh(MESH):
                    base.check(got[1], want[1], rtol=1e-4, atol=1e-4)
            except AssertionError as e:
                failures.append(f"{key}: {e}")
    if failed_inside != JAX_FAILS_INSIDE:
        failures.append(f"JAX fails inside on {sorted(failed_inside - JAX_FAILS_INSIDE)} too, "
                        f"no more on {sorted(JAX_FAILS_INSIDE - failed_inside)}")
    assert not failures, "\n".join(failures)


def case_negative_an_add_taking_one_unreduced_operand_is_caught():
    """An add rule that lets one unreduced operand through (the sum would silently be
    wrong) accepts what JAX refuses; the comparison of errors sees it."""
    core = importlib.import_module("impl.core")
    add_p = importlib.import_module("impl.primitives.elementwise").add_p
    with _patched(core, "unreduced_rules", dict(core.unreduced_rules)):
        core.unreduced_rules[add_p] = lambda x, y: (x.unreduced | y.unreduced, frozenset())
        base.raises(AssertionError, case_unreduced_and_reduced_refusals_as_jax)


def case_negative_unreduced_axes_dropped_are_caught():
    """A dot_general that forgets its out_sharding's unreduced axes (XLA would then
    all-reduce) types its result replicated; the comparison with JAX sees it."""
    core = importlib.import_module("impl.core")
    dot_general_p = importlib.import_module("impl.primitives.linalg").dot_general_p
    with _patched(core, "unreduced_rules", dict(core.unreduced_rules)):
        core.unreduced_rules[dot_general_p] = lambda *a, **k: (frozenset(), frozenset())
        base.raises(AssertionError, case_unreduced_and_reduced_axes_in_types)


# ------------------------------------------------------------------ lowering

def case_compiled_program_is_partitioned():
    """The types' shardings reach XLA's SPMD partitioner: a contraction over an axis
    sharded on Y, asked to be replicated over Y, compiles to an all-reduce (and the same
    program on replicated operands has no collective: the check can fail)."""
    with jax.set_mesh(MESH):
        f = impl.jit(lambda a, b: inp.dot(a, b, out_sharding=P("X", None)))
        hlo = f.lower(W, Z).compile().as_text()
        assert "all-reduce" in hlo, hlo[-3000:]
        out = f(W, Z)
        assert out.sharding.spec == P("X", None), out.sharding
        replicated = impl.reshard((W, Z), P())
        hlo = f.lower(*replicated).compile().as_text()
        assert "all-reduce" not in hlo and "all-gather" not in hlo, hlo[-3000:]


# ------------------------------------------------------- every rule has its test

# The cases whose check_rules run their programs under value, jit, jvp, grad and vmap
# against JAX (results, types and shardings) and whose same_errors compare refusals.
RULE_GROUPS = ("case_elementwise_and_broadcasting_rules", "case_dot_general_rules",
               "case_reduction_rules", "case_layout_rules",
               "case_sorting_and_dynamic_slicing_rules", "case_control_flow_rules",
               "case_gather_scatter_and_indexing_rules", "case_convolution_and_window_rules",
               "case_linear_algebra_rules", "case_fft_rules", "case_every_elementwise_rule",
               "case_more_rules")

# Primitives the transformations bind (derivatives, transposes, batching rules): the
# groups' jvp, grad and vmap programs reach them.
ONLY_UNDER_TRANSFORMATIONS = {
    "add_any", "select_and_gather_add", "select_and_scatter_add",
    "scatter_add_along_axis", "cumchooser_tangent", "cumchooser_cotangent", "shift",
    "linear_recurrence"}

# Primitives with a rule the groups do not run, and where they are checked instead.
CHECKED_ELSEWHERE = {
    "cholesky": "JAX 0.10.2 fails on batch-sharded matrices: case_decompositions_jax_fails_on",
    "qr": "JAX 0.10.2 fails on batch-sharded matrices: case_decompositions_jax_fails_on",
    "regularized_incomplete_beta": "JAX 0.10.2's betainc refuses sharded operands, as "
                                   "impl's: the error, in case_every_elementwise_rule",
    "scatter_apply": "refused across devices, as JAX: the error, in case_more_rules",
    "custom_lin": "bound while grad linearizes a custom_vjp call (case_more_rules), and "
                  "transposed before the program is staged",
}


def _bound_primitives(jaxpr, found):
    for eqn in jaxpr.eqns:
        found.add(eqn.primitive.name)
        for value in eqn.params.values():
            for inner in value if isinstance(value, tuple) else (value,):
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    _bound_primitives(inner, found)
    return found


def _traced_programs(fn, args, skip=()):
    """The programs `transformed` runs, traced by impl: (kind, closed program)."""
    yield "value", impl.make_jaxpr(fn)(*args)
    outs = jax.tree_util.tree_leaves(impl.eval_shape(fn, *args))
    if "derivatives" not in skip and all(np.issubdtype(o.dtype, np.floating) for o in outs):
        if "jvp" not in skip:
            yield "jvp", impl.make_jaxpr(lambda *a: impl.jvp(fn, a, a))(*args)
        if "grad" not in skip:
            loss = lambda *a: sum((o ** 2).sum() for o in jax.tree_util.tree_leaves(fn(*a)))
            yield "grad", impl.make_jaxpr(impl.grad(loss, argnums=tuple(range(len(args)))))(
                *args)
    if "vmap" not in skip:
        yield "vmap", impl.make_jaxpr(impl.vmap(fn))(*[_stacked(a) for a in args])


def rule_group_coverage():
    """The names of the primitives the rule groups' programs bind before any
    transformation, and those their transformed programs bind."""
    global _recording
    _recording = recorded = []
    try:
        for name in RULE_GROUPS:
            globals()[name]()
    finally:
        _recording = None
    values, transformed = set(), set()
    with jax.set_mesh(MESH):
        for kind, op in recorded:
            if kind != "rule":
                continue
            name, make, args, *skip = op
            for which, closed in _traced_programs(make(impl, inp), args, *skip):
                _bound_primitives(closed.jaxpr, values if which == "value" else transformed)
    return values, transformed


def case_every_sharding_rule_is_tested():
    """Every primitive with a sharding rule is bound by a rule group's program (so its
    rule runs under value, jit, jvp, grad and vmap against JAX), or only under
    transformations of them (ONLY_UNDER_TRANSFORMATIONS), or is CHECKED_ELSEWHERE; a
    new rule without a test fails here, and so does an exemption no longer needed."""
    core = importlib.import_module("impl.core")
    ruled = {p.name for p in core.sharding_rules}
    values, transformed = rule_group_coverage()
    untested = sorted(ruled - values - (transformed & ONLY_UNDER_TRANSFORMATIONS)
                      - set(CHECKED_ELSEWHERE))
    assert not untested, f"primitives whose sharding rule no rule group runs: {untested}"
    stale = sorted((ONLY_UNDER_TRANSFORMATIONS | set(CHECKED_ELSEWHERE)) & values
                   | (ONLY_UNDER_TRANSFORMATIONS - transformed)
                   | (ONLY_UNDER_TRANSFORMATIONS | set(CHECKED_ELSEWHERE)) - ruled)
    assert not stale, f"exemptions no longer needed: {stale}"
    calling = {n for n, f in globals().items() if n.startswith("case_")
               and any(isinstance(c, ast.Call) and getattr(c.func, "id", None) == "check_rules"
                       for c in ast.walk(ast.parse(inspect.getsource(f))))}
    assert calling <= set(RULE_GROUPS), calling - set(RULE_GROUPS)


# ------------------------------------------------ the checks catch broken rules

_patched = base._patched


def case_negative_a_wrong_rule_is_caught():
    """A transpose rule that keeps the operand's spec (not permuting it) types `a.T`
    wrongly: the layout case sees it (values still agree: XLA reshards)."""
    core = importlib.import_module("impl.core")
    transpose_p = importlib.import_module("impl.primitives.shape").transpose_p
    rules = importlib.import_module("impl.primitives.sharding_rules")
    with _patched(core, "sharding_rules", dict(core.sharding_rules)):
        core.sharding_rules[transpose_p] = rules.same_as_operand
        base.raises(AssertionError, case_layout_rules)


def case_negative_a_refusing_gather_rule_is_caught():
    """A gather rule that refuses every sharded operand (as impl's once did) rejects
    indexing JAX accepts; the indexing case sees it."""
    core = importlib.import_module("impl.core")
    gather_p = importlib.import_module("impl.primitives.indexing").gather_p
    rules = importlib.import_module("impl.primitives.sharding_rules")

    def refuse(operand, indices, **params):
        raise rules.ShardingTypeError("refused")
    with _patched(core, "sharding_rules", dict(core.sharding_rules)):
        core.sharding_rules[gather_p] = refuse
        base.raises(AssertionError, case_gather_scatter_and_indexing_rules)


def case_negative_a_decomposition_losing_its_batch_sharding_is_caught():
    """A rule for eigh that replicates its results (or an FFT's that drops the operand's
    sharding) types them wrongly; the types' comparison sees it."""
    core = importlib.import_module("impl.core")
    eigh_p = importlib.import_module("impl.primitives.linalg_decompositions").eigh_p
    fft_p = importlib.import_module("impl.primitives.fft").fft_p
    for prim, replicated in ((eigh_p, lambda x, **params: [None, None]),
                             (fft_p, lambda x, **params: None)):
        with _patched(core, "sharding_rules", dict(core.sharding_rules)):
            core.sharding_rules[prim] = replicated
            base.raises(AssertionError, case_decomposition_and_fft_types)


def case_negative_an_fft_lowered_as_jax_lowers_it_is_caught():
    """lax.fft applied directly (JAX's lowering) gives XLA the programs its CPU FFT
    refuses; the case of FFTs over sharded axes sees it."""
    fft_p = importlib.import_module("impl.primitives.fft").fft_p
    lowering = importlib.import_module("impl.interpreters.lowering")

    def as_jax(x, *, fft_type, fft_lengths):
        return jax.lax.fft(x, fft_type.upper(), fft_lengths)
    with _patched(lowering, "lowering_rules", dict(lowering.lowering_rules)):
        lowering.lowering_rules[fft_p] = as_jax
        base.raises(AssertionError, case_fft_of_sharded_transformed_axes_compiles)


def case_negative_a_rule_without_a_test_is_caught():
    """A primitive given a sharding rule that no rule group runs: the coverage case
    names it."""
    core = importlib.import_module("impl.core")
    untested = core.Primitive("untested_elementwise")
    rules = importlib.import_module("impl.primitives.sharding_rules")
    with _patched(core, "sharding_rules", dict(core.sharding_rules)):
        core.sharding_rules[untested] = rules.same_as_operand
        base.raises(AssertionError, case_every_sharding_rule_is_tested,
                    match="untested_elementwise")


def case_negative_values_on_the_mesh_taken_for_values_off_it_are_caught():
    """A select rule that, as impl's once did, leaves out the operands replicated on the
    mesh accepts JAX's refusals; the comparison of errors sees it."""
    core = importlib.import_module("impl.core")
    select_n_p = importlib.import_module("impl.primitives.elementwise").select_n_p

    def explicit_only(which, *cases):
        sharded = [c for c in cases if c.explicit_sharding is not None]
        return rules.spec(sharded[0] if sharded else cases[0])
    rules = importlib.import_module("impl.primitives.sharding_rules")
    with _patched(core, "sharding_rules", dict(core.sharding_rules)):
        core.sharding_rules[select_n_p] = explicit_only
        base.raises(AssertionError, case_values_off_the_mesh_and_replicated_on_it)


def case_negative_a_missing_error_is_caught():
    """A dot_general rule that never refuses a sharded contraction lets impl accept what
    JAX rejects; the error comparison sees it."""
    core = importlib.import_module("impl.core")
    dot_general_p = importlib.import_module("impl.primitives.linalg").dot_general_p
    with _patched(core, "sharding_rules", dict(core.sharding_rules)):
        core.sharding_rules[dot_general_p] = lambda lhs, rhs, **kw: (None, None)
        base.raises(AssertionError, case_sharding_type_errors_as_jax)


def case_negative_a_rule_refusing_what_jax_takes_is_caught():
    """A stop_gradient that refuses reduced operands, where JAX's takes them: the
    comparison of each operation sees it."""
    core = importlib.import_module("impl.core")
    stop_gradient_p = importlib.import_module("impl.primitives.elementwise").stop_gradient_p

    def refusing(x):
        raise NotImplementedError("refused")
    with _patched(core, "unreduced_rules", dict(core.unreduced_rules)):
        core.unreduced_rules[stop_gradient_p] = refusing
        base.raises(AssertionError, case_unreduced_and_reduced_operands_of_each_operation)


if __name__ == "__main__":
    sys.exit(base.main(namespace=globals(), description=__doc__.splitlines()[0]))
