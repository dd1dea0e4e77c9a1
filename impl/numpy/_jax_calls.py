"""The jax.numpy functions JAX 0.10.2 stages as calls of their own.

JAX decorates these with jit (in jax/_src/numpy), so `make_jaxpr` shows each as a
`jit[name=... jaxpr={...}]` equation holding its program, derivatives and vmap see the
call, and eagerly each runs as one compiled program. impl's functions of these names are
staged the same way: by the name JAX's programs show, with JAX's static arguments.
JAX's functions jitted with `inline=True` (its reductions, `_mean`) are traced into the
caller and are not listed.
"""
from __future__ import annotations

import functools

from impl.api import jit

# the function's name (the one JAX's programs show) -> the arguments JAX's jit of it
# takes as static
STAGED_AS_CALLS = {
    "_where": (),
    "cumsum": ("axis", "dtype"), "cumprod": ("axis", "dtype"),
    "nancumsum": ("axis", "dtype"), "nancumprod": ("axis", "dtype"),
    "_var": ("axis", "dtype", "keepdims"), "_std": ("axis", "dtype", "keepdims"),
    "norm": ("ord", "axis", "keepdims"),
    "_linspace": ("num", "endpoint", "retstep", "dtype", "axis"),
    "hypot": (),
}


def staged_as_in_jax(fn):
    """`fn` staged as a call named `fn.__name__`, as JAX stages its function of that name
    (a KeyError for a function JAX does not stage). The result is a plain function of
    `fn`'s signature, so the public wrappers still check the arguments before staging."""
    staged = jit(fn, static_argnames=STAGED_AS_CALLS[fn.__name__])

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return staged(*args, **kwargs)
    return call
