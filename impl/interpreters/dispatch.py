"""Calls that run no Python of impl's once cached: jax.jit's C++ dispatch, with impl's
own handler for the calls it cannot answer from its cache.

What `impl.jit` returns is such a dispatcher. Its cache holds one executable per kind
of call (argument types, shapes and devices, static argument values, JAX's
configuration, and whether an impl transformation is active: `core.transforming`), so
a cached call costs what a call of a JAX jitted function costs. Anything else (a first
call, a call under an impl transformation, impl tracers, arguments that are no arrays)
reaches `cache_miss`, in Python, which decides what runs."""
from __future__ import annotations

import functools
from typing import Callable, Sequence

from jax._src import tree_util as jax_tree_util
from jax._src.interpreters import pxla
from jax._src.lib import _jax

from impl import core

# A dispatcher's entry here is weak on its `call_uncompiled`, a function of its own, so
# one key serves them all.
_CACHE = _jax.PjitFunctionCache(capacity=8192)
_KEY = "impl"
core.register_cache(_CACHE.clear)


def dispatcher(fun: Callable, name: str, call_uncompiled: Callable, cache_miss: Callable,
               static_argnums: Sequence[int] = (), static_argnames: Sequence[str] = ()):
    """A callable wrapping `fun` (its name, doc and attributes; its signature is that
    of `call_uncompiled`) that dispatches each call as jax.jit does; JAX's profiler
    shows it as `name`.

    `cache_miss(*args, **kwargs)` gets every call the cache cannot answer and returns
    what a jax.jit object's `_cache_miss` returns (the result, the executable for the
    cache, whether to recompile), or `(result, None, False)` to keep calls of this kind
    coming to it. `call_uncompiled` is called instead under jax.disable_jit(): it must
    be a function of this dispatcher alone (the cache is weak on it). The static
    arguments are as jax.jit resolved them (its `_jit_info`)."""
    out = _jax.pjit(name, call_uncompiled, cache_miss,
                    list(static_argnums), list(static_argnames), _KEY,
                    jax_tree_util.dispatch_registry, pxla.cc_shard_arg, _CACHE)
    return functools.update_wrapper(out, fun)
