"""Helpers shared by the control-flow and remat tests: programs are written once
against a backend namespace `B` (B.api is `impl` or `jax`, B.np its numpy, B.lax its
lax) and compared between impl and JAX."""
from __future__ import annotations

import types

import jax
import jax.numpy as jjnp
import numpy as np
import impl
import impl.numpy as inp
from helpers import TOLERANCE, assert_tree_close

IMPL = types.SimpleNamespace(api=impl, np=inp, lax=impl.lax, random=impl.random)
JAX = types.SimpleNamespace(api=jax, np=jjnp, lax=jax.lax, random=jax.random)
F32 = np.float32


_TOL = TOLERANCE["control flow"]


def assert_trees_close(got, want, rtol=_TOL["rtol"], atol=_TOL["atol"]):
    assert_tree_close(got, want, tol=dict(rtol=rtol, atol=atol))


def _is_float(x):
    return np.issubdtype(np.asarray(x).dtype, np.floating)


def _rand_like(x, seed):
    x = np.asarray(x)
    if not _is_float(x):
        return np.zeros(x.shape, jax.dtypes.float0)
    return np.random.RandomState(seed).normal(size=x.shape).astype(x.dtype)


def stack(x, k=3):
    """k different examples of x stacked on a new leading axis."""
    x = np.asarray(x)
    if x.dtype == np.bool_:
        return np.stack([x, ~x, x][:k])
    if _is_float(x):
        return np.stack([x * (1 + 0.25 * i) - 0.1 * i for i in range(k)]).astype(x.dtype)
    return np.stack([x + i for i in range(k)]).astype(x.dtype)


def _weighted_sum(B, f):
    """A scalar function of f's outputs whose gradient reaches every float output."""
    def loss(*args):
        leaves = jax.tree_util.tree_leaves(f(*args))
        total = 0.
        for i, y in enumerate(leaves):
            if _is_float(np.zeros((), y.dtype)):
                w = _rand_like(np.zeros(y.shape, y.dtype), 100 + i)
                total = total + B.np.sum(y * w)
        return total
    return loss


def check(prog, *args, jvp=True, grad=True, vmap=True, eager="value", rtol=_TOL["rtol"],
          atol=_TOL["atol"], vmap_axes=(), batched=None):
    """prog(B) on impl equals prog(B) on JAX: value, jvp, grad and vmap (every argument
    batched, each argument alone batched, and the `vmap_axes` given), all under jit,
    and the value (eager="value") or also the gradient (eager="grad") evaluated
    eagerly. One jitted program per backend holds every transformation: eager
    evaluation compiles each new operation, which makes it the slow part."""
    fi, fj = prog(IMPL), prog(JAX)
    floats = tuple(i for i, a in enumerate(args) if _is_float(a))
    ts = tuple(_rand_like(a, i) for i, a in enumerate(args))
    batched = batched or tuple(stack(a) for a in args)
    specs = [(0,) * len(args)]
    if len(args) > 1:
        specs += [tuple(0 if j == i else None for j in range(len(args)))
                  for i in range(len(args))]
    specs += list(vmap_axes)

    def suite(B, f):
        def run(*args):
            out = {"value": f(*args)}
            if jvp:
                out["jvp"] = B.api.jvp(f, args, ts)
            if grad and floats:
                out["grad"] = B.api.grad(_weighted_sum(B, f), argnums=floats)(*args)
            if vmap:
                out["vmap"] = []
                for axes in specs:
                    vargs = [b if ax == 0 else (np.moveaxis(b, 0, ax) if ax is not None
                                                else a)
                             for a, b, ax in zip(args, batched, axes)]
                    out["vmap"].append(B.api.vmap(f, in_axes=axes)(*vargs))
            return out
        return run

    want = jax.jit(suite(JAX, fj))(*args)
    assert_trees_close(impl.jit(suite(IMPL, fi))(*args), want, rtol, atol)
    if eager:
        assert_trees_close(fi(*args), want["value"], rtol, atol)
        if eager == "grad" and grad and floats:
            assert_trees_close(impl.grad(_weighted_sum(IMPL, fi), argnums=floats)(*args),
                               want["grad"], rtol, atol)


def x32(*shape, seed=0):
    return np.random.RandomState(seed).normal(size=shape).astype(F32)


