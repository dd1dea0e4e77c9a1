"""Checks of impl.scipy modules against jax.scipy: many functions per compiled program
(XLA's compile time is most of the cost of these tests)."""
from __future__ import annotations

import jax
import numpy as np

import impl
import impl.numpy as inp


def _weighted_sum(np_, out):
    weights = np_.cos(np_.arange(out.size, dtype=out.dtype) + 1.0).reshape(out.shape)
    return np_.sum(weights * out)


def _transforms(lib, np_, sp, cases, full):
    """{name: {grad, vmap[, value, jvp]}} of every case: the grad of a weighted sum, a
    vmap over the arguments stacked with their reverses (which stay in the domain; its
    first row is the value) and, when `full`, the plain value and the jvp along the
    tangent `args[i] / 3` (XLA's compile time is most of this file's time: the fast
    tests compile the two transformations that cover the others)."""
    def run(all_args):
        out = {}
        for name, (fn, diff) in cases.items():
            f, args = fn(sp), all_args[name]
            diff = tuple(i for i, a in enumerate(args) if a.dtype == np.float64) if diff is None else diff

            def of_diff(*values, f=f, args=args, diff=diff):
                full = list(args)
                for i, v in zip(diff, values):
                    full[i] = v
                return f(*full)
            primals = tuple(args[i] for i in diff)
            out[name] = {
                "grad": lib.grad(lambda *v: _weighted_sum(np_, of_diff(*v)),
                                 tuple(range(len(diff))))(*primals),
                "vmap": lib.vmap(f)(*(np_.stack([a, a[::-1] if a.ndim else a / 2])
                                      for a in args)),
            }
            if full:
                out[name]["value"] = f(*args)
                out[name]["jvp"] = lib.jvp(of_diff, primals, tuple(p / 3 for p in primals))[1]
        return out
    return run


def check_group(jax_module, impl_module, cases, args, full=False):
    """cases: {name: (function of the module, argnums differentiated or None for every
    float64 argument)}; args: {name: [numpy arrays]}. One jax.jit and one impl.jit
    hold every case (one compilation on each side)."""
    want = jax.jit(_transforms(jax, jax.numpy, jax_module, cases, full))(args)
    got = impl.jit(_transforms(impl, inp, impl_module, cases, full))(args)
    for name in cases:
        for key in want[name]:
            for g, w in zip(jax.tree_util.tree_leaves(got[name][key]),
                            jax.tree_util.tree_leaves(want[name][key])):
                assert np.shape(g) == np.shape(w) and g.dtype == w.dtype, (name, key)
                np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-10,
                                           err_msg=f"{name}: {key}")
