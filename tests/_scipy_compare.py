"""Checks of impl.scipy modules against jax.scipy under jit, for many functions at
once (XLA's compile time is most of the cost of these tests)."""
from __future__ import annotations

import jax
import numpy as np

import impl
import impl.numpy as inp


def _weighted_sum(np_, out):
    weights = np_.cos(np_.arange(out.size, dtype=out.dtype) + 1.0).reshape(out.shape)
    return np_.sum(weights * out)


ALL = ("value", "jvp", "grad", "vmap")


def _transforms(lib, np_, sp, cases, keys):
    """{name: {key: result}} of every case for the transformations in `keys`: the plain
    value, the jvp along the tangent `args[i] / 3`, the grad of a weighted sum, and a
    vmap over the arguments stacked with their reverses (which stay in the domain)."""
    def run(all_args):
        out = {}
        for name, (fn, diff) in cases.items():
            f, args = fn(sp), all_args[name]
            if diff is None:
                diff = tuple(i for i, a in enumerate(args) if a.dtype == np.float64)

            def of_diff(*values, f=f, args=args, diff=diff):
                full = list(args)
                for i, v in zip(diff, values):
                    full[i] = v
                return f(*full)
            primals = tuple(args[i] for i in diff)
            compute = {
                "value": lambda: f(*args),
                "jvp": lambda: lib.jvp(of_diff, primals, tuple(p / 3 for p in primals))[1],
                "grad": lambda: lib.grad(lambda *v: _weighted_sum(np_, of_diff(*v)),
                                         tuple(range(len(diff))))(*primals),
                "vmap": lambda: lib.vmap(f)(*(np_.stack([a, a[::-1] if a.ndim else a / 2])
                                              for a in args)),
            }
            out[name] = {key: compute[key]() for key in keys}
        return out
    return run


def check_group(jax_module, impl_module, cases, args, keys=("grad", "vmap")):
    """cases: {name: (function of the module, argnums differentiated or None for every
    float64 argument)}; args: {name: [numpy arrays]}. Each case is one jax.jit and one
    impl.jit (XLA compiles many small programs faster than their union); by default
    the grad and the vmap (whose first row is the value), ALL for every transformation."""
    for name, case in cases.items():
        one = {name: case}
        want = jax.jit(_transforms(jax, jax.numpy, jax_module, one, keys))({name: args[name]})
        got = impl.jit(_transforms(impl, inp, impl_module, one, keys))({name: args[name]})
        for key in want[name]:
            for g, w in zip(jax.tree_util.tree_leaves(got[name][key]),
                            jax.tree_util.tree_leaves(want[name][key])):
                assert np.shape(g) == np.shape(w) and g.dtype == w.dtype, (name, key)
                np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-10,
                                           err_msg=f"{name}: {key}")
