"""Helpers shared by the test files: seeded inputs, pytree comparisons, the tolerance
table, and the parametrisations that leave some cases to the nightly run.

Imported as ``from helpers import ...`` (pytest puts this folder on the path).
"""
from __future__ import annotations

import zlib

import jax
import numpy as np
import pytest

from impl.core import float0


F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

# How close impl's results must be to the reference (JAX running the same program, or
# float64 finite differences), by what a test compares: the one place test tolerances are
# set.  An entry is ``dict(rtol=, atol=)`` or a table by dtype (assert_tree_close looks a
# leaf's dtype up, falling back to float64's).  The float32 bounds allow XLA's float32
# rounding, which grows with the number of operations between input and result; the
# float64 bounds are tight enough that a wrong rule cannot hide in them.
TOLERANCE = {
    # one primitive at a time against the same jax.lax primitive
    "elementwise": {F32: dict(rtol=2e-5, atol=2e-6), F64: dict(rtol=1e-11, atol=1e-12)},
    # gathers, scatters and dynamic slices
    "indexing": {F32: dict(rtol=3e-5, atol=3e-6), F64: dict(rtol=1e-11, atol=1e-12)},
    # reductions: a sum is accumulated in a different order once batched or transposed
    "reductions": {F32: dict(rtol=5e-5, atol=5e-6), F64: dict(rtol=1e-11, atol=1e-12)},
    # jax.numpy / jax.nn / jax.scipy.special functions composed of several primitives
    "numpy": {F32: dict(rtol=3e-5, atol=3e-6), F64: dict(rtol=1e-10, atol=1e-12)},
    # whole programs under jit, jvp, grad and vmap compiled on each side (_against_jax), and
    # float64 linear algebra and solvers: XLA fuses and reorders each compilation its own way
    "programs": {F32: dict(rtol=2e-4, atol=2e-5), F64: dict(rtol=1e-9, atol=1e-10)},
    # control-flow and remat programs written once for both backends (_compare)
    "control flow": dict(rtol=2e-5, atol=2e-5),
    # custom_jvp / custom_vjp programs on both backends (_custom_helpers)
    "custom rules": dict(rtol=2e-5, atol=2e-6),
    # sharded programs, compared leaf by leaf with their shardings (sharding_cases)
    "sharding": dict(rtol=1e-5, atol=1e-6),
    # float64 collectives: a named-axis sum is accumulated in any order
    "collectives": dict(rtol=1e-9, atol=1e-9),
    # the public transformations over pytrees (test_api)
    "transformations": dict(rtol=1e-6, atol=1e-8),
    # gradients of the samplers through their reparameterisations (test_random)
    "sampler gradients": {F32: dict(rtol=2e-6, atol=1e-6), F64: dict(rtol=1e-13, atol=1e-14)},
}


def seeded_rng(*key):
    """A RandomState seeded by ``key``: the same inputs for the same test case on every run."""
    return np.random.RandomState(zlib.crc32(repr(key).encode()))


def rs(*shape, seed=0, dtype=np.float64):
    """Standard-normal values of ``shape``."""
    return np.random.RandomState(seed).standard_normal(shape).astype(dtype)


def make_args(op, dtype, lead=(), *key):
    """Arguments of ``op`` (its ``makers``) in ``dtype``, with leading batch dims ``lead``."""
    rng = seeded_rng(op.name, np.dtype(dtype).name, lead, *key)
    return [m(rng, dtype, lead) for m in op.makers]


def batched_args(op, dtype, in_axes, *key, size=3):
    """Arguments of ``op`` with a batch of ``size`` at ``in_axes`` (None: unbatched)."""
    rng = seeded_rng(op.name, np.dtype(dtype).name, "vmap", in_axes, *key)
    out = []
    for m, ax in zip(op.makers, in_axes):
        if ax is None:
            out.append(m(rng, dtype))
        else:
            out.append(np.moveaxis(m(rng, dtype, (size,)), 0, ax))
    return out


def partial_args(fn, args, argnums):
    """``fn`` as a function of ``args[argnums]`` only, the others fixed."""
    def g(*dyn):
        full = list(args)
        for i, d in zip(argnums, dyn):
            full[i] = d
        return fn(*full)
    return g


def assert_tree_close(got, want, dtype=None, *, tol, check_dtype=True, check_weak=False,
                      exact_non_float=False):
    """Same tree structure; per leaf the same shape and dtype, and close values.

    ``tol`` is ``dict(rtol=, atol=)`` or a table ``{np.dtype: dict(rtol=, atol=)}``
    looked up by the leaf's dtype (``dtype``'s entry, else float64's, when the
    leaf's is missing).  ``check_weak`` compares JAX's weak types too;
    ``exact_non_float`` compares integer and boolean leaves exactly.  float0
    leaves (integer inputs' tangents) only need the same shape.
    """
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert g_tree == w_tree, f"tree structure {g_tree} != {w_tree}"
    for g, w in zip(g_leaves, w_leaves):
        assert np.shape(g) == np.shape(w), f"shape {np.shape(g)} != {np.shape(w)}"
        gd, wd = np.asarray(g).dtype, np.asarray(w).dtype
        if check_dtype:
            assert gd == wd, f"dtype {gd} != {wd}"
        if check_weak and isinstance(w, jax.Array):
            assert getattr(g, "weak_type", False) == w.weak_type, "weak_type differs"
        if wd == float0:
            continue
        if exact_non_float and not np.issubdtype(wd, np.inexact):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
            continue
        if "rtol" in tol:
            leaf_tol = tol
        else:
            leaf_tol = tol.get(np.dtype(wd)) or tol[np.dtype(dtype or np.float64)]
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), **leaf_tol)


def assert_same(a, b):
    """Bit-for-bit equal values with equal shape, dtype and weak type."""
    import jax.numpy as jnp
    a, b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        x, y = jnp.asarray(x), jnp.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, x.dtype, y.shape, y.dtype)
        assert x.weak_type == y.weak_type
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), strict=True)


def assert_each(check, got, want, what=""):
    """`check(got[n], want[n])` for every name of the dict `want`, naming the entry
    that fails (several cases compared from one compiled program)."""
    for name in want:
        try:
            check(got[name], want[name])
        except AssertionError as e:
            raise AssertionError(f"{what}{name}: {e}") from None


def keyed_draws(cases, R, dtype, names):
    """One function drawing several `cases` (name -> fn(random module, key, dtype)),
    each with its own key from one split, so one compilation covers them all."""
    def draws(key):
        return {n: cases[n](R, k, dtype) for n, k in zip(names, R.split(key, len(names)))}
    return draws


# ------------------------------------------------ cases that run nightly only
# The CI run (`pytest`, which deselects `slow`) must stay under 20 minutes on 2 cores; the
# nightly run (`pytest -m slow`, or `-m ""` for everything) adds the cases marked here.

def nightly(*values, **kwargs):
    """One parametrize case that runs nightly only (marked ``slow``)."""
    return pytest.param(*values, marks=pytest.mark.slow, **kwargs)


def floats_in_ci(keep, floats=(np.float32, np.float64)):
    """float32 and float64 for a ``dtype`` parametrisation, the one that is not ``keep``
    running nightly only: CI checks each case once, in float64 for derivatives (tight
    tolerances) or float32 for values (the dtype programs use, weak types and promotion)."""
    return [d if np.dtype(d) == np.dtype(keep) else nightly(d) for d in floats]


def first_in_ci(n, cases, *, unpack=False):
    """``cases`` with all but the first ``n`` running nightly only: the later ones are more
    option mixes of the same check.  ``unpack``: each case is a tuple of several argument
    values (a parametrisation over several names)."""
    out = []
    for i, case in enumerate(cases):
        if i < n:
            out.append(case)
        elif isinstance(case, type(pytest.param(None))):
            out.append(pytest.param(*case.values, marks=[*case.marks, pytest.mark.slow],
                                    id=case.id))
        else:
            out.append(nightly(*(case if unpack else (case,))))
    return out
