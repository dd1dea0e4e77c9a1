"""Sharding on 8 host devices, impl against JAX: `jit` shardings, with_sharding_constraint,
vmap's spmd_axis_name and shard_map, under grad/vjp/jvp/vmap/jit.

XLA must see 8 CPU devices, which is fixed when JAX is first imported, so these cases run
in a process of their own: `tests/test_sharding.py` starts `python tests/sharding_cases.py
--json FILE` once and reports each `case_*` function as one test. Run this file directly
to see the cases' output (`python tests/sharding_cases.py [-k NAME]`).

Every case computes the same program with impl and with JAX and compares values, dtypes
and the `.sharding` of every result.
"""
from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=8").strip()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import jax  # noqa: E402
import jax.ad_checkpoint  # noqa: E402,F401  (jax.ad_checkpoint, as impl.ad_checkpoint)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

import impl  # noqa: E402
import impl.numpy as inp  # noqa: E402
from impl.primitives import sharding as impl_sharding  # noqa: E402

from helpers import TOLERANCE  # noqa: E402

F32 = np.float32
_TOL = TOLERANCE["sharding"]
MESH = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
EXPLICIT_MESH = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
BOTH = ((impl, inp), (jax, jnp))


def NS(*spec, mesh=MESH):
    return NamedSharding(mesh, P(*spec))


def rs(*shape, seed=0, dtype=F32):
    return np.random.RandomState(seed).standard_normal(shape).astype(dtype)


def check(got, want, rtol=_TOL["rtol"], atol=_TOL["atol"], shardings=True):
    """Same tree, shapes, dtypes, values and (for arrays) shardings."""
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert g_tree == w_tree, f"tree {g_tree} != {w_tree}"
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        assert np.shape(g) == np.shape(w), f"leaf {i}: shape {np.shape(g)} != {np.shape(w)}"
        assert np.asarray(g).dtype == np.asarray(w).dtype, (
            f"leaf {i}: dtype {np.asarray(g).dtype} != {np.asarray(w).dtype}")
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol,
                                   err_msg=f"leaf {i}")
        if shardings:
            assert isinstance(g, jax.Array), f"leaf {i}: {type(g).__name__} is not an array"
            assert g.sharding == w.sharding, f"leaf {i}: sharding {g.sharding} != {w.sharding}"


def both(make):
    """`make(lib, numpy)` run with impl and with jax."""
    return [make(lib, np_) for lib, np_ in BOTH]


def same_error(make):
    """impl and JAX raise the same exception type for the same bad call."""
    errors = []
    for lib, np_ in BOTH:
        try:
            make(lib, np_)
        except Exception as e:  # noqa: BLE001 - the type is what we compare
            errors.append(e)
        else:
            errors.append(None)
    got, want = errors
    assert want is not None, "JAX accepted the call"
    assert got is not None, f"impl accepted a call JAX rejects with {want!r}"
    assert type(got) is type(want) or isinstance(got, type(want)), (
        f"impl raised {type(got).__name__}: {got}; JAX raised {type(want).__name__}: {want}")
    return got


def eager(lib, fn):
    """`fn` run eagerly by impl. JAX's reference runs it under jit: JAX's eager
    differentiation of shard_map takes seconds per call (it is not cached)."""
    return jax.jit(fn) if lib is jax else fn


def raises(exc, fn, match=None):
    try:
        fn()
    except exc as e:
        if match is not None:
            assert match in str(e), f"{match!r} not in {e}"
        return e
    raise AssertionError(f"{fn} did not raise {exc.__name__}")


def eqns(closed, name):
    """Equations of primitive `name` in an impl program, sub-programs included."""
    found = []
    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name == name:
            found.append(eqn)
        for v in eqn.params.values():
            if isinstance(v, impl.core.ClosedJaxpr):
                found += eqns(v, name)
    return found


# --------------------------------------------------------------------- jit shardings

X = rs(8, 4, seed=1)
Y = rs(8, 4, seed=2)


def _jit_pair(lib, np_):
    return lib.jit(lambda a, b: (a * 2.0, np_.sin(b) @ a.T),
                   in_shardings=(NS("x", "y"), None),
                   out_shardings=(NS("y"), NS(None, "x")))


def case_jit_in_out_shardings():
    check(*both(lambda lib, np_: _jit_pair(lib, np_)(X, Y)))


def case_jit_shardings_pytree_prefixes():
    def make(lib, np_):
        f = lib.jit(lambda d, c: {"s": d["a"] * d["b"], "t": (c + 1.0, c * 2.0)},
                    in_shardings=({"a": NS("x"), "b": NS(None, "y")}, NS("y", "x")),
                    out_shardings={"s": NS("x", "y"), "t": NS()})
        return f({"a": X, "b": Y}, X)
    check(*both(make))


def case_jit_partitionspec_under_set_mesh():
    # (Eagerly, JAX's grad of this call fails: the cotangent it makes is committed to a
    # replicated sharding that the transposed call's in_shardings reject; impl does the
    # same. Under jit both work.)
    def make(lib, np_):
        with jax.set_mesh(MESH):
            f = lib.jit(lambda a: np_.cos(a) + 1.0, in_shardings=P("x"),
                        out_shardings=P(None, "y"))
            return f(X), lib.jit(lib.grad(lambda a: f(a).sum()))(X)
    check(*both(make))


def case_jit_shardings_grad_and_vjp():
    def make(lib, np_):
        f = _jit_pair(lib, np_)
        loss = lambda a, b: (f(a, b)[0] ** 2).sum() + f(a, b)[1].sum()
        pull_back_output = lambda a, b: (lambda out, f_vjp: f_vjp(out))(*lib.vjp(f, a, b))
        return (eager(lib, lib.grad(loss, argnums=(0, 1)))(X, Y),
                lib.jit(lib.grad(loss, argnums=(0, 1)))(X, Y),
                eager(lib, pull_back_output)(X, Y))
    check(*both(make))


def case_jit_shardings_jvp_and_linearize():
    def make(lib, np_):
        f = _jit_pair(lib, np_)
        linearized = lambda a, b, ta, tb: (lambda p, f_lin: (p, f_lin(ta, tb)))(
            *lib.linearize(f, a, b))
        return (eager(lib, lambda a, b, ta, tb: lib.jvp(f, (a, b), (ta, tb)))(X, Y, Y, X),
                eager(lib, linearized)(X, Y, Y, X))
    check(*both(make))


def case_jit_shardings_vmap():
    xs = rs(2, 8, 4, seed=3)

    def make(lib, np_):
        f = lib.jit(lambda a: np_.sin(a) * 2.0, in_shardings=NS("x"),
                    out_shardings=NS(None, "y"))
        return lib.vmap(f)(xs), lib.vmap(f, in_axes=1, out_axes=2)(xs.transpose(1, 0, 2))
    check(*both(make))


def case_jit_shardings_vmap_spmd_axis_name():
    xs = rs(4, 8, 4, seed=4)

    def make(lib, np_):
        f = lib.jit(lambda a: np_.sin(a) * 2.0, in_shardings=NS(None, "y"),
                    out_shardings=NS(None, "y"))
        return (lib.vmap(f, spmd_axis_name="x")(xs),
                lib.jit(lib.vmap(f, spmd_axis_name="x"))(xs))
    check(*both(make))


def case_jit_transpose_swaps_shardings():
    """grad of a jit call with shardings is a jit call whose shardings are swapped."""
    f = impl.jit(lambda a: inp.sin(a), in_shardings=NS("x", "y"), out_shardings=NS("y"))
    program = impl.make_jaxpr(impl.grad(lambda a: f(a).sum()))(X)
    calls = eqns(program, "jit")
    assert len(calls) == 2, program
    forward, backward = calls
    assert forward.params["in_shardings"] == (NS("x", "y"),), forward.params
    assert forward.params["out_shardings"][0] == NS("y"), forward.params
    assert backward.params["out_shardings"] == (NS("x", "y"),), backward.params
    assert backward.params["in_shardings"][-1] == NS("y"), backward.params


def case_jit_shardings_errors():
    # the same bad calls as JAX, eagerly and inside a transformation (impl's own checks)
    for wrap in (lambda f: f, lambda f: (lambda a: impl.grad(lambda b: f(b).sum())(a))):
        f = impl.jit(lambda a, b=1.0: a * b, in_shardings=NS("x"))
        raises(ValueError, lambda: wrap(lambda a: f(a, b=2.0))(X[:, 0]))
        g = impl.jit(lambda a: a, in_shardings=(NS("x"), NS("x")))
        raises(ValueError, lambda: wrap(g)(X))
    # a leaf that is not a sharding: rejected when jit is called, as in JAX
    same_error(lambda lib, np_: lib.jit(lambda a: a * 1.0, in_shardings=3))
    same_error(lambda lib, np_: lib.jit(lambda a: a, in_shardings=NS("x", "y"))(X[:, 0]))
    same_error(lambda lib, np_: lib.jit(lambda a, b=1: a * b,
                                        in_shardings=NS("x"))(X, b=2.0))


# ------------------------------------------------------------ with_sharding_constraint

def case_with_sharding_constraint_values_and_shardings():
    def make(lib, np_):
        f = lib.jit(lambda a: lib.lax.with_sharding_constraint(np_.sin(a) * 2.0,
                                                               NS("y", "x")))
        eager = lib.lax.with_sharding_constraint(X, NS("x"))
        return f(X), eager
    check(*both(make))


def case_with_sharding_constraint_pytree_and_partitionspec():
    def make(lib, np_):
        with jax.set_mesh(MESH):
            f = lib.jit(lambda t: lib.lax.with_sharding_constraint(
                {"a": t[0] + 1.0, "b": (t[1] * 2.0, t[1] - 1.0)},
                {"a": P("x", "y"), "b": P(None, "x")}))
            g = lib.jit(lambda a: lib.lax.with_sharding_constraint((a, a * 3.0), NS("y")))
            return f((X, Y)), g(X)
    check(*both(make))


def case_with_sharding_constraint_jvp_grad():
    def make(lib, np_):
        f = lambda a: lib.lax.with_sharding_constraint(np_.sin(a) * a, NS("x", "y"))
        loss = lambda a: (lib.lax.with_sharding_constraint(np_.cos(f(a)), NS("y")) ** 2).sum()
        return (lib.jit(lambda a, t: lib.jvp(f, (a,), (t,)))(X, Y),
                lib.jit(lib.grad(loss))(X), eager(lib, lib.grad(loss))(X))
    got, want = both(make)
    check(got[:2], want[:2])
    check(got[2], want[2], shardings=False)   # op-by-op eager: placement is XLA's choice
    # the cotangent is constrained too: the transpose of a constraint is a constraint
    program = impl.make_jaxpr(impl.grad(lambda a: (impl.lax.with_sharding_constraint(
        inp.sin(a), NS("y")) ** 2).sum()))(X)
    assert len(eqns(program, "sharding_constraint")) == 2, program


def case_with_sharding_constraint_vmap_spmd_axis_name():
    xs = rs(4, 8, 4, seed=5)

    def make(lib, np_):
        inner = lambda a: lib.lax.with_sharding_constraint(a * 2.0, NS("y"))
        return (lib.jit(lib.vmap(inner))(xs),
                lib.jit(lib.vmap(inner, spmd_axis_name="x"))(xs),
                lib.vmap(inner, spmd_axis_name="x")(xs),
                lib.jit(lib.vmap(inner, in_axes=1, spmd_axis_name="x"))(xs.transpose(1, 0, 2)),
                lib.jit(lib.vmap(lambda a: lib.lax.with_sharding_constraint(a, NS()),
                                 spmd_axis_name=("x", "y")))(rs(8, 3, seed=6)))
    got, want = both(make)
    check(got, want)
    assert got[1].sharding.spec == P("x", "y"), got[1].sharding   # spmd_axis_name shards the batch axis


def case_with_sharding_constraint_vmap_of_grad():
    xs = rs(4, 8, 4, seed=7)

    def make(lib, np_):
        loss = lambda a: (lib.lax.with_sharding_constraint(np_.sin(a), NS(None, "y")) ** 2).sum()
        return lib.jit(lib.vmap(lib.grad(loss), spmd_axis_name="x"))(xs)
    check(*both(make))


def case_with_sharding_constraint_errors():
    e = same_error(lambda lib, np_: lib.jit(lambda a: lib.lax.with_sharding_constraint(
        a, NS("x", "y")))(X[:, 0]))
    assert "rank" in str(e)
    same_error(lambda lib, np_: lib.jit(lambda a: lib.lax.with_sharding_constraint(a, None))(X))
    same_error(lambda lib, np_: lib.jit(lambda a: lib.lax.with_sharding_constraint(a, 3))(X))
    same_error(lambda lib, np_: lib.jit(lib.vmap(
        lambda a: lib.lax.with_sharding_constraint(a, NS("x")), spmd_axis_name="x"))(X))
    # under vmap the rank is checked for one example, as JAX does
    same_error(lambda lib, np_: lib.vmap(
        lambda a: lib.lax.with_sharding_constraint(a, NS("x", "y")))(X))


# ------------------------------------------------------------------------ shard_map

def _body(lib, np_):
    def body(a, b):
        c = np_.sin(a) * b[0]
        return (lib.lax.psum(c, "x"),
                lib.lax.pmean(c * lib.lax.axis_index("y"), "y"))
    return body


def _smap(lib, np_, **kw):
    return lib.shard_map(_body(lib, np_), mesh=MESH, in_specs=(P("x", "y"), P()),
                         out_specs=(P(None, "y"), P("x")), **kw)


B = rs(2, 2, seed=8)


def case_shard_map_values_and_shardings():
    def make(lib, np_):
        f = _smap(lib, np_)
        return f(X, B), lib.jit(f)(X, B)
    check(*both(make))


def case_shard_map_pmax_pmin_axis_index():
    def make(lib, np_):
        f = lib.shard_map(lambda a: (lib.lax.pmax(a, "x"), lib.lax.pmin(a, ("y")),
                                     a * lib.lax.axis_index("x") + lib.lax.axis_size("y")),
                          mesh=MESH, in_specs=P("x", "y"), out_specs=(P(None, "y"),
                                                                       P("x"), P("x", "y")))
        return f(X)
    check(*both(make))


def case_shard_map_grad_vjp_jit():
    def make(lib, np_):
        f = _smap(lib, np_)
        loss = lambda a, b: (f(a, b)[0] ** 2).sum() + np_.tanh(f(a, b)[1]).sum()
        pull_back_output = lambda a, b: (lambda out, f_vjp: f_vjp(out))(*lib.vjp(f, a, b))
        return (eager(lib, lib.grad(loss, argnums=(0, 1)))(X, B),
                lib.jit(lib.grad(loss, argnums=(0, 1)))(X, B),
                eager(lib, pull_back_output)(X, B))
    check(*both(make), rtol=1e-4)


def case_shard_map_grad_of_replicated_inputs():
    """Cotangents of inputs and outputs replicated over mesh axes (P()). Without
    check_vma: divided over the replicas going in, summed over them coming out; with it,
    the transposes of pvary and psum do the same."""
    def make(lib, np_):
        grads = []
        for check_vma in (False, True):
            f = lib.shard_map(lambda w, a: (lib.lax.psum(w * a, ("x")), w * 3.0), mesh=MESH,
                              in_specs=(P(), P("x")), out_specs=(P(), P()),
                              check_vma=check_vma)
            loss = lambda w, a: (f(w, a)[0] ** 2).sum() + f(w, a)[1].sum()  # noqa: E731
            grads.append(eager(lib, lib.grad(loss, argnums=(0, 1)))(X[:2], X))
        return grads
    check(*both(make), rtol=1e-4)


def case_shard_map_grad_against_finite_differences():
    """The gradient of a shard_map program against float64 central differences of the
    same program computed without devices (numpy)."""
    x0 = rs(8, 2, seed=9, dtype=np.float64)

    def ref(a):      # psum over x of sin(block) * block, out P(): the sum over the 4 blocks
        blocks = np.sin(a).reshape(4, 2, 2) * a.reshape(4, 2, 2)
        return (blocks.sum(0) ** 2).sum()

    f = impl.shard_map(lambda a: impl.lax.psum(inp.sin(a) * a, "x"), mesh=MESH,
                       in_specs=P("x"), out_specs=P())
    with jax.enable_x64(True):
        g = np.asarray(impl.grad(lambda a: (f(a) ** 2).sum())(x0))
    eps, fd = 1e-6, np.zeros_like(x0)
    for i in np.ndindex(*x0.shape):
        d = np.zeros_like(x0)
        d[i] = eps
        fd[i] = (ref(x0 + d) - ref(x0 - d)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def case_shard_map_jvp_linearize():
    def make(lib, np_):
        f = _smap(lib, np_)
        linearized = lambda a, b, ta, tb: (lambda p, f_lin: (p, f_lin(ta, tb)))(
            *lib.linearize(f, a, b))
        return (eager(lib, lambda a, b, ta, tb: lib.jvp(f, (a, b), (ta, tb)))(X, B, Y, B),
                eager(lib, linearized)(X, B, Y, B * 0.5))
    check(*both(make), rtol=1e-4)


def case_shard_map_linear_transpose():
    def make(lib, np_):
        f = lib.shard_map(lambda a, w: (lib.lax.psum(a * 2.0, "x"), a * w), mesh=MESH,
                          in_specs=(P("x", "y"), P()), out_specs=(P(None, "y"), P("x", "y")))
        f_t = lib.linear_transpose(lambda a: f(a, F32(3.0)), X)
        return f_t((B.repeat(2, 1), Y))
    check(*both(make))


def case_shard_map_tuple_axis_names():
    def make(lib, np_):
        f = lib.shard_map(lambda a: (lib.lax.psum(a, ("x", "y")),
                                     a * 0.0 + lib.lax.axis_index(("x", "y"))),
                          mesh=MESH, in_specs=P(("x", "y")), out_specs=(P(), P(("x", "y"))))
        return f(X[:, 0]), lib.jit(lib.grad(lambda a: (f(a)[0] ** 2).sum()))(X[:, 0])
    check(*both(make))


def case_shard_map_all_collectives():
    """all_gather, psum_scatter, ppermute and all_to_all between devices: values, gradients
    and vmap against JAX. (pbroadcast is left out: JAX 0.10 cannot lower it on CPU.)"""
    perm = [(i, (i + 1) % 4) for i in range(4)]

    def make(lib, np_):
        def body(a):                                                     # a: (2, 2)
            g = lib.lax.all_gather(a, "x", axis=0, tiled=True)           # (8, 2)
            h = lib.lax.all_gather(a, "x", axis=1)                       # (2, 4, 2)
            s = lib.lax.psum_scatter(np_.sin(g), "x", scatter_dimension=0, tiled=True)
            u = lib.lax.psum_scatter(np_.cos(h), "x", scatter_dimension=1)   # (2, 2)
            p = lib.lax.ppermute(a * 2.0, "x", perm)
            t = lib.lax.all_to_all(np_.cos(g), "x", 0, 0, tiled=True)    # (2, 2)
            v = lib.lax.all_to_all(h, "x", 1, 0, tiled=True)[:2, 0]      # (2, 2)
            return s, u, p, t, v
        f = lib.shard_map(body, mesh=MESH, in_specs=P("x", "y"), out_specs=P("x", "y"))
        loss = lambda a: sum((o ** 2).sum() for o in f(a))
        return (eager(lib, f)(X), eager(lib, lib.grad(loss))(X),
                lib.jit(lib.vmap(f))(rs(2, 8, 4, seed=13)))
    check(*both(make), rtol=1e-4)


def case_shard_map_hessian_vector_product():
    def make(lib, np_):
        f = lib.shard_map(lambda a: lib.lax.psum(np_.sin(a) * a, "x"), mesh=MESH,
                          in_specs=P("x", "y"), out_specs=P(None, "y"))
        loss = lambda a: (f(a) ** 2).sum()
        return eager(lib, lambda a, t: lib.jvp(lib.grad(loss), (a,), (t,)))(X, Y)
    check(*both(make), rtol=1e-4)


def case_shard_map_vmap():
    xs = rs(2, 8, 4, seed=10)

    def make(lib, np_):
        f = _smap(lib, np_)
        return (lib.vmap(f, in_axes=(0, None))(xs, B),
                lib.jit(lib.vmap(f, in_axes=(2, None), out_axes=1))(xs.transpose(1, 2, 0), B),
                eager(lib, lib.vmap(lib.grad(lambda a: f(a, B)[0].sum())))(xs))
    check(*both(make), rtol=1e-4)


def case_shard_map_vmap_replicated_out_specs():
    """vmap of shard_maps whose out_specs replicate: the batch axis enters the specs
    unsharded, and the results are placed by them as written (P(None,) eagerly, as
    JAX's eager shard_map places them; P() from a jitted program), as in JAX."""
    xs = rs(3, 8, 4, seed=14)

    def make(lib, np_):
        summed = lib.shard_map(lambda a: lib.lax.psum(a.sum(0), "x"), mesh=MESH,
                               in_specs=P("x"), out_specs=P())
        doubled = lib.shard_map(lambda a: a * 2.0, mesh=MESH, in_specs=P(), out_specs=P())
        return (lib.vmap(summed)(xs), lib.jit(lib.vmap(summed))(xs),
                lib.vmap(summed, out_axes=1)(xs), lib.vmap(doubled)(xs),
                lib.vmap(summed, spmd_axis_name="y")(rs(2, 8, 4, seed=15)))
    got, want = both(make)
    check(got, want)
    assert [g.sharding.spec for g in got] == [w.sharding.spec for w in want], (
        [g.sharding.spec for g in got], [w.sharding.spec for w in want])


def case_shard_map_vmap_spmd_axis_name():
    xs = rs(4, 8, 4, seed=11)

    def make(lib, np_):
        f = lib.shard_map(lambda a: lib.lax.psum(np_.cos(a), "y"), mesh=MESH,
                          in_specs=P(None, "y"), out_specs=P())
        return lib.vmap(f, spmd_axis_name="x")(xs), lib.jit(lib.vmap(f, spmd_axis_name="x"))(xs)
    check(*both(make))
    same_error(lambda lib, np_: lib.vmap(lib.shard_map(
        lambda a: a, mesh=MESH, in_specs=P("x"), out_specs=P("x")), spmd_axis_name="x")(xs))


def case_shard_map_vmap_inside_body():
    """A vmap inside the per-device program: collectives over the mesh axis pass the vmap
    by, and the vmap's own axis name works next to the mesh's.

    JAX 0.10 itself fails on this program with check_vma=True (an AssertionError from
    its replication check of psum over the vmap axis), so JAX runs it with
    check_vma=False; impl's vmap removes the vmap-axis psum before JAX sees the program
    and runs it with the check on too."""
    def make(lib, np_, check_vma=False):
        def body(a):
            per_row = lib.vmap(lambda r: lib.lax.psum(r, "x") * lib.lax.psum(r, "i"),
                               axis_name="i")
            return per_row(a)
        f = lib.shard_map(body, mesh=MESH, in_specs=P("x", "y"), out_specs=P("x", "y"),
                          check_vma=check_vma)
        return f(X), eager(lib, lib.grad(lambda a: (f(a) ** 2).sum()))(X)
    got, want = both(make)
    check(got, want, rtol=1e-4)
    check(make(impl, inp, check_vma=True), want, rtol=1e-4)


def case_shard_map_with_jit_inside_and_outside():
    def make(lib, np_):
        inner = lib.jit(lambda a: np_.exp(a) / 3.0)
        f = lib.jit(lib.shard_map(lambda a: lib.lax.psum(inner(a), "y"), mesh=MESH,
                                  in_specs=P("x", "y"), out_specs=P("x")))
        return f(X), lib.jit(lib.grad(lambda a: f(a).sum()))(X)
    check(*both(make))


def case_shard_map_partial_manual_axis_names():
    def make(lib, np_):
        f = lib.shard_map(lambda a: lib.lax.psum(a * 2.0, "x"), mesh=MESH,
                          in_specs=P("x"), out_specs=P(), axis_names={"x"})
        return lib.jit(f)(X), lib.jit(lib.grad(lambda a: (f(a) ** 2).sum()))(X)
    check(*both(make))


def case_shard_map_pytrees_and_closures():
    w = rs(4, seed=12)

    def make(lib, np_):
        def body(t):
            return {"sum": lib.lax.psum(t["a"] * w, "x"), "pair": (t["b"] + 1.0, t["a"])}
        f = lib.shard_map(body, mesh=MESH, in_specs=({"a": P("x"), "b": P(None, "y")},),
                          out_specs={"sum": P(), "pair": P("x", "y")})
        args = {"a": X, "b": Y}
        grad_w = eager(lib, lib.grad(lambda v: lib.shard_map(
            lambda a: lib.lax.psum(a * v, "x"), mesh=MESH, in_specs=P("x"),
            out_specs=P())(X).sum()))(w)
        return f(args), grad_w
    check(*both(make), rtol=1e-4)


def case_shard_map_mesh_from_context_and_decorator():
    def make(lib, np_):
        with jax.set_mesh(MESH):
            @lib.jit
            def g(a):
                return lib.shard_map(lambda b: lib.lax.psum(b, "x"), in_specs=P("x"),
                                     out_specs=P())(a)
            return g(X)
    check(*both(make))

    @impl.shard_map(mesh=MESH, in_specs=P("x"), out_specs=P("x"))
    def doubled(a):
        return a * 2.0
    check(doubled(X), jax.shard_map(lambda a: a * 2.0, mesh=MESH, in_specs=P("x"),
                                    out_specs=P("x"))(X))


def case_shard_map_explicit_mesh():
    def make(lib, np_):
        a = jax.device_put(X, NamedSharding(EXPLICIT_MESH, P("x", "y")))
        f = lib.shard_map(lambda b: lib.lax.psum(b * b, "x"), mesh=EXPLICIT_MESH,
                          in_specs=P("x", "y"), out_specs=P(None, "y"))
        return f(a)
    check(*both(make))


def case_shard_map_check_vma():
    """check_vma=True lets JAX reject an output that is not replicated as out_specs claims;
    check_vma=False runs it."""
    def run(lib, np_, check_vma):
        return lib.shard_map(lambda a: a * 2.0, mesh=MESH, in_specs=P("x"), out_specs=P(),
                             check_vma=check_vma)(X)
    same_error(lambda lib, np_: run(lib, np_, True))
    check(*both(lambda lib, np_: run(lib, np_, False)))


def case_shard_map_errors():
    def smap(lib, **kw):
        kw = {"mesh": MESH, "in_specs": P("x"), "out_specs": P("x"), **kw}
        return lib.shard_map(lambda a, *rest: a, **kw)
    same_error(lambda lib, np_: smap(lib)(rs(6)))                           # not divisible
    same_error(lambda lib, np_: smap(lib, in_specs=P("z"))(X))               # unknown axis
    same_error(lambda lib, np_: smap(lib, in_specs=P("x", None, None))(X))   # spec too long
    same_error(lambda lib, np_: smap(lib, out_specs=P("x", None, None))(X))
    same_error(lambda lib, np_: smap(lib, in_specs=(3,))(X))                 # not a spec
    same_error(lambda lib, np_: smap(lib, in_specs=(P("x"), P()))(X))        # wrong tree
    same_error(lambda lib, np_: smap(lib, axis_names={"x"}, out_specs=P("y"))(X))
    same_error(lambda lib, np_: smap(lib)(X, rest=X))                        # keywords
    same_error(lambda lib, np_: smap(lib, mesh=None)(X))                     # no mesh
    raises(NotImplementedError, lambda: impl.shard_map(lambda a: a, mesh=MESH,
                                                       in_specs=None, out_specs=P()))


# ------------------------------------------- operations on unreduced and reduced values

def operations_of_one_operand(lib, np_):
    """name -> fn(u) for an f32[8,6] `u`: one or a few primitives each, to see what their
    unreduced and reduced rules do (tests/explicit_sharding_cases.py over Explicit mesh
    axes, tests/shard_map_vma_cases.py over manual ones)."""
    lax = lib.lax
    idx = np.array([0, 2])
    c64 = lambda u: lax.convert_element_type(u, np.complex64)  # noqa: E731
    window = lambda op, init: lambda u: lax.reduce_window(  # noqa: E731
        u, np.float32(init), op, (2, 2), (2, 2), "VALID")
    return {
        "argmax": lambda u: np_.argmax(u, axis=0), "argmin": lambda u: np_.argmin(u, axis=0),
        "reduce_max": lambda u: np_.max(u, axis=0), "reduce_min": lambda u: np_.min(u, axis=0),
        "reduce_prod": lambda u: np_.prod(u, axis=0),
        "clamp": lambda u: lax.clamp(np.float32(0), u, np.float32(1)),
        "complex": lambda u: lax.complex(u, u), "conj": lambda u: lax.conj(u),
        "real": lambda u: lax.real(c64(u)), "imag": lambda u: lax.imag(c64(u)),
        "cumsum": lambda u: lax.cumsum(u, axis=1), "cumprod": lambda u: lax.cumprod(u, axis=1),
        "cummax": lambda u: lax.cummax(u, axis=1), "cummin": lambda u: lax.cummin(u, axis=1),
        "cumlogsumexp": lambda u: lax.cumlogsumexp(u, axis=1),
        "dynamic_slice": lambda u: lax.dynamic_slice(u, (1, 2), (4, 2)),
        "dynamic_update_slice": lambda u: lax.dynamic_update_slice(u, u[:2, :2], (1, 2)),
        "gather": lambda u: u[idx],
        "take_along_axis": lambda u: np_.take_along_axis(u, np.zeros((8, 6), np.int32), axis=1),
        "scatter": lambda u: u.at[idx].set(1.0), "scatter_add": lambda u: u.at[idx].add(1.0),
        "scatter_mul": lambda u: u.at[idx].multiply(2.0),
        "scatter_min": lambda u: u.at[idx].min(0.0), "scatter_max": lambda u: u.at[idx].max(0.0),
        "integer_pow": lambda u: u ** 2, "rev": lambda u: np_.flip(u, 0),
        "sort": lambda u: np_.sort(u, axis=1), "top_k": lambda u: lax.top_k(u, 2)[0],
        "stop_gradient": lambda u: lax.stop_gradient(u),
        "fft": lambda u: np_.fft.fft(c64(u), axis=1),
        "reduce_window_sum": window(lax.add, 0), "reduce_window_max": window(lax.max, -np.inf),
        "reduce_window_min": window(lax.min, np.inf),
        "conv_general_dilated": lambda u: lax.conv(u.reshape(1, 1, 8, 6),
                                                   np.ones((1, 1, 2, 2), np.float32), (1, 1),
                                                   "VALID"),
        "cholesky": lambda u: np_.linalg.cholesky(u[:6, :6]),
        "eigh": lambda u: np_.linalg.eigh(u[:6, :6])[0],
        "lu": lambda u: lax.linalg.lu(u[:6, :6])[0], "qr": lambda u: np_.linalg.qr(u[:6, :6])[1],
        "svd": lambda u: np_.linalg.svd(u[:6, :6], compute_uv=False),
        "triangular_solve": lambda u: lax.linalg.triangular_solve(
            np.eye(8, dtype=np.float32) * 2, u, left_side=True),
        "tridiagonal_solve": lambda u: lax.linalg.tridiagonal_solve(
            np.zeros(8, np.float32), np.full(8, 2.0, np.float32), np.zeros(8, np.float32), u),
        "checkpoint_name": lambda u: lib.ad_checkpoint.checkpoint_name(u, "n"),
        "jit": lambda u: lib.jit(lambda v: v)(u),
        "while": lambda u: lax.fori_loop(0, 2, lambda i, v: v, u),
        "scan": lambda u: lax.scan(lambda c, r: (c, r), np.float32(0), u)[1],
        "sharding_constraint": lambda u: lax.with_sharding_constraint(u, lib.typeof(u).sharding),
        "reshape": lambda u: u.reshape(48),
        "reduce_precision": lambda u: lax.reduce_precision(u, 5, 10),
        "optimization_barrier": lambda u: lax.optimization_barrier(u),
        "inspect_sharding": lambda u: (lib.debug.inspect_array_sharding(
            u, callback=lambda s: None), u)[1],
        "debug_callback": lambda u: (lib.debug.callback(lambda v: None, u), u)[1],
    }


# ---------------------------------------------------------------- documentation

def case_docs_sharding_examples_print_what_they_say():
    """The examples of docs/sharding.md run, and each `print(...)  # text` prints text
    (up to a colon and space that start an explanation)."""
    import io
    import re
    doc = (pathlib.Path(__file__).parent.parent / "docs" / "sharding.md").read_text()
    source = "\n".join(re.findall(r"```python\n(.*?)```", doc, re.S))
    expected = [re.split(r"\s*#\s*", line, maxsplit=1)[1].split(": ")[0].strip()
                for line in source.splitlines()
                if line.lstrip().startswith("print(") and "#" in line]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "docs/sharding.md", "exec"), {})
    assert out.getvalue().splitlines() == expected, (out.getvalue(), expected)


# ------------------------------------------------ the checks catch broken rules

@contextlib.contextmanager
def _patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def case_negative_spmd_axis_name_dropped_is_caught():
    """A batching rule that forgets spmd_axis_name yields P(UNCONSTRAINED, 'y'), and the
    sharding comparison of case_with_sharding_constraint_vmap_spmd_axis_name sees it."""
    real = impl_sharding.batch_sharding
    forgetful = lambda s, d, spmd, **kw: real(s, d, None, **kw)
    with _patched(impl_sharding, "batch_sharding", forgetful):
        raises(AssertionError, case_with_sharding_constraint_vmap_spmd_axis_name)


def case_negative_shard_map_transpose_without_division_is_caught():
    """Transposing without dividing replicated output cotangents over their replicas
    gives gradients 8 times too large; the gradient comparison sees it."""
    shard_map_module = importlib.import_module("impl.shard_map")
    with _patched(shard_map_module, "_divide", lambda x, n: x):
        raises(AssertionError, case_shard_map_grad_of_replicated_inputs)


# ------------------------------------------------------- custom rules under spmd vmap

def case_custom_rules_vmap_spmd_axis_name():
    """Custom rules run under a vmap of their own when a transformation reaches them
    later (jvp or grad of a vmapped custom function): that vmap keeps spmd_axis_name,
    so a sharding constraint inside a rule shards the batch axis as in JAX."""
    xs = rs(4, 8, seed=11)

    def make(lib, np_):
        wsc = lambda a: lib.lax.with_sharding_constraint(a, NS("y"))  # noqa: E731
        f = lib.custom_jvp(lambda a: np_.sin(a))
        f.defjvp(lambda p, t: (f(p[0]), wsc(np_.cos(p[0]) * t[0])))
        g = lib.custom_vjp(lambda a: np_.sin(a))
        g.defvjp(lambda a: (g(a), np_.cos(a)), lambda c, ct: (wsc(2.0 * c * ct),))
        v = lambda h: lib.vmap(h, spmd_axis_name="x")  # noqa: E731
        return (lib.jit(lambda x: lib.jvp(v(f), (x,), (x,)))(xs),
                lib.jit(lib.grad(lambda x: v(g)(x).sum()))(xs),
                lib.jit(lambda x: lib.vjp(v(g), x)[1](x))(xs))
    got, want = both(make)
    check(got, want)
    assert got[1].sharding.spec == P("x", "y"), got[1].sharding


def case_negative_custom_rules_dropping_spmd_axis_name_is_caught():
    """Re-creating the rules' vmap without spmd_axis_name changes the shardings."""
    batching = importlib.import_module("impl.interpreters.batching")
    real = batching.batch_with_dims
    forgetful = lambda *a, **kw: real(*a[:5])  # noqa: E731
    with _patched(batching, "batch_with_dims", forgetful):
        raises(AssertionError, case_custom_rules_vmap_spmd_axis_name)


# ------------------------------------------------------------------------- runner

def all_cases(namespace=None):
    namespace = globals() if namespace is None else namespace
    return {name: fn for name, fn in namespace.items()
            if name.startswith("case_") and callable(fn)}


def main(argv=None, namespace=None, description=None):
    """Run the `case_*` functions of `namespace` (this module's by default)."""
    parser = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    parser.add_argument("--json", help="write {case: {ok, error, seconds}} to this file")
    parser.add_argument("-k", default="", help="run the cases whose name contains this")
    parser.add_argument("--only", default=None,
                        help="run only these cases (names separated by commas)")
    args = parser.parse_args(argv)
    only = None if args.only is None else set(args.only.split(","))
    assert jax.device_count() == 8, f"expected 8 host devices, got {jax.device_count()}"
    results = {}
    for name, fn in all_cases(namespace).items():
        if args.k not in name or (only is not None and name not in only):
            continue
        start = time.perf_counter()
        try:
            fn()
            results[name] = {"ok": True, "error": None}
        except Exception:  # noqa: BLE001 - reported per case
            results[name] = {"ok": False, "error": traceback.format_exc()}
        results[name]["seconds"] = round(time.perf_counter() - start, 3)
        print(f"{'ok  ' if results[name]['ok'] else 'FAIL'} {name} "
              f"({results[name]['seconds']}s)", flush=True)
        if not results[name]["ok"] and not args.json:
            print(results[name]["error"])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh)
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
