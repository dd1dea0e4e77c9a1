"""One call that checks an impl function against the same JAX function under every
transformation: value, jit, jvp, grad (reverse mode, through a random weighting of the
float outputs) and vmap (every argument mapped, and only the first one mapped).

The JAX references for all of them come from a single jax.jit (one compilation per
case). impl computes the transformations inside one impl.jit (the same rules run
when staging as when evaluating eagerly, and one compilation is much cheaper than
compiling every primitive on its own), and its plain value eagerly; `eager=True`
also runs every transformation eagerly. With fd=True the jvp is also compared with
float64 central finite differences, a reference that does not depend on JAX's own
derivative rules.
"""
from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp
import numpy as np

import impl
import impl.numpy as inp
from helpers import TOLERANCE


def rng_for(*keys):
    return np.random.RandomState(zlib.crc32("/".join(map(str, keys)).encode()))


def _leaves(x):
    return jax.tree_util.tree_leaves(x)


def _is_float(x):
    return np.issubdtype(np.asarray(x).dtype if not hasattr(x, "dtype") else x.dtype,
                         np.floating)


def assert_close(got, want, tol, what=""):
    g_leaves, w_leaves = _leaves(got), _leaves(want)
    assert len(g_leaves) == len(w_leaves), (what, got, want)
    for g, w in zip(g_leaves, w_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (what, g.shape, w.shape)
        assert g.dtype == w.dtype, (what, g.dtype, w.dtype)
        if g.dtype == jax.dtypes.float0:
            continue
        if np.issubdtype(g.dtype, np.inexact):
            np.testing.assert_allclose(g, w, err_msg=what, **tol)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


def _weighted_loss(fn, weights, total):
    def loss(*args):
        outs = [o for o in _leaves(fn(*args)) if _is_float(o)]
        return sum(total(o * w) for o, w in zip(outs, weights))
    return loss


def _float_leaves_shapes(fn, args):
    return [o for o in _leaves(jax.eval_shape(fn, *args)) if np.issubdtype(o.dtype,
                                                                             np.floating)]


def check_transforms(name, impl_fn, jax_fn, args, *, diff=None, batched_args=None,
                     eager=False, fd=False, tol=None, vmap=True):
    """Compare impl_fn with jax_fn at `args` (numpy arrays) under value, jit, jvp, grad
    (argnums `diff`, default every float argument) and vmap over `batched_args`
    (the args with a leading batch axis of size 3; default random ones)."""
    dtype = next((np.asarray(a).dtype for a in args if _is_float(a)), np.dtype(np.float64))
    tol = tol or TOLERANCE["programs"][np.dtype(dtype)]
    rng = rng_for(name, np.dtype(dtype).name)
    if diff is None:
        diff = tuple(i for i, a in enumerate(args) if _is_float(a))
    tangents = [rng.uniform(-1, 1, np.shape(args[i])).astype(np.asarray(args[i]).dtype)
                for i in diff]
    weights = [rng.uniform(-1, 1, o.shape).astype(o.dtype)
               for o in _float_leaves_shapes(jax_fn, args)]
    if batched_args is None:
        batched_args = [np.stack([a] + [_perturb(a, rng) for _ in range(2)]) for a in args]
    first_only = (0,) + (None,) * (len(args) - 1)
    vmap_args = (batched_args, [batched_args[0]] + list(args[1:]))

    def transforms(T, fn, total, args, tangents, vmap_args):
        out = {"value": fn(*args)}
        if diff:
            out["jvp"] = T.jvp(_of_diff_args(fn, args, diff), tuple(args[i] for i in diff),
                               tuple(tangents))
        if diff and weights:
            out["grad"] = T.grad(_weighted_loss(fn, weights, total), diff)(*args)
        if vmap:
            out["vmap_all"] = T.vmap(fn)(*vmap_args[0])
            if len(args) > 1:
                out["vmap_first"] = T.vmap(fn, first_only)(*vmap_args[1])
        return out

    # Inputs are arguments of the jitted functions (not closed-over constants).
    data = (list(args), list(tangents), [list(v) for v in vmap_args])
    want = jax.jit(lambda *d: transforms(jax, jax_fn, jnp.sum, *d))(*data)
    got = impl.jit(lambda *d: transforms(impl, impl_fn, inp.sum, *d))(*data)
    assert_close(impl_fn(*args), want["value"], tol, f"{name}: eager value")
    if eager:
        got_eager = transforms(impl, impl_fn, inp.sum, *data)
        for key in want:
            assert_close(got_eager[key], want[key], tol, f"{name}: eager {key}")
    for key in want:
        assert_close(got[key], want[key], tol, f"{name}: {key}")
    if fd and diff:
        _check_finite_differences(name, impl_fn, args, tangents, diff, got["jvp"][1])


def _of_diff_args(fn, args, diff):
    """fn as a function of the differentiated arguments only (the others fixed)."""
    def of_diff(*values):
        full = list(args)
        for i, v in zip(diff, values):
            full[i] = v
        return fn(*full)
    return of_diff


def _perturb(a, rng):
    a = np.asarray(a)
    if not _is_float(a):
        return a
    return (a + 0.05 * rng.standard_normal(a.shape)).astype(a.dtype)


def _check_finite_differences(name, fn, args, tangents, diff, jvp_out, eps=1e-6):
    """Central differences of fn in float64 along the tangent direction."""
    def shifted(sign):
        full = list(args)
        for i, t in zip(diff, tangents):
            full[i] = np.asarray(args[i], np.float64) + sign * eps * np.asarray(t, np.float64)
        return full
    plus, minus = _leaves(fn(*shifted(1))), _leaves(fn(*shifted(-1)))
    for p, m, t in zip(plus, minus, _leaves(jvp_out)):
        if not _is_float(p):
            continue
        estimate = (np.asarray(p) - np.asarray(m)) / (2 * eps)
        np.testing.assert_allclose(np.asarray(t), estimate, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name}: jvp vs finite differences")
