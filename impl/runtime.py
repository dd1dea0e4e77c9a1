"""Top-level names about how programs run (as in jax's top level): host callbacks,
scope names, compile-time evaluation, types of values, and clearing caches.

Configuration and devices are JAX's own (impl computes on JAX's arrays with JAX's
flags): `impl/__init__.py` re-exports those that impl honours, each tested."""
from __future__ import annotations

import contextlib
import functools

import jax
from jax import tree_util

from impl import api, core
from impl.core import Tracer, get_aval
from impl.primitives import callbacks as _callbacks


# ------------------------------------------------------------------ pure_callback

def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """Call the host function `callback(*args, **kwargs)`, declared to return arrays of
    the shapes and dtypes of `result_shape_dtypes` and to have no side effect.

    Under vmap, `vmap_method` says how: "sequential"/"sequential_unrolled" call it once
    per element, "expand_dims" ("broadcast_all") give unbatched arguments a leading axis
    of size 1 (of the batch size), "legacy_vectorized" passes them unchanged; None raises
    NotImplementedError. It cannot be differentiated (ValueError, as JAX)."""
    flat_callback, leaves, avals, out_tree = _flat_host_call(
        "pure_callback", callback, result_shape_dtypes, args, kwargs, sharding)
    outs = _callbacks.pure_callback(flat_callback, leaves, avals, vmap_method)
    return tree_util.tree_unflatten(out_tree, outs)


def io_callback(callback, result_shape_dtypes, *args, sharding=None, ordered=False,
                **kwargs):
    """Call the impure host function `callback(*args, **kwargs)` (as
    jax.experimental.io_callback): it runs even when its results are unused; under vmap
    once per element, in order (an `ordered` one cannot be vmapped); it cannot be
    differentiated in the arguments it receives (ValueError, as JAX)."""
    flat_callback, leaves, avals, out_tree = _flat_host_call(
        "io_callback", callback, result_shape_dtypes, args, kwargs, sharding)
    outs = _callbacks.io_callback(flat_callback, leaves, avals, ordered)
    return tree_util.tree_unflatten(out_tree, outs)


def _flat_host_call(name, callback, result_shape_dtypes, args, kwargs, sharding):
    """(the host function as a function of the flat operands, returning flat results;
    the operands; the results' types; the results' tree)."""
    if sharding is not None:
        raise NotImplementedError(f"impl's {name}: sharding= is not supported; the "
                                  "callback runs on the host for the whole array")
    if not callable(callback):
        raise TypeError(f"{name}: callback must be callable, got {type(callback)}")
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    shapes, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    avals = []
    for s in shapes:
        if not (hasattr(s, "shape") and hasattr(s, "dtype")):
            raise TypeError(f"{name}: each leaf of result_shape_dtypes needs .shape and "
                            f".dtype (e.g. jax.ShapeDtypeStruct), got {s!r}")
        if jax.dtypes.canonicalize_dtype(s.dtype) != s.dtype:
            raise ValueError("result_shape_dtypes cannot specify 64-bit types when "
                             "`jax_enable_x64` is disabled")
        avals.append(core.ShapedArray(tuple(s.shape), s.dtype))

    def flat_callback(*values):
        c_args, c_kwargs = tree_util.tree_unflatten(in_tree, values)
        return tree_util.tree_leaves(callback(*c_args, **c_kwargs))

    return flat_callback, leaves, avals, out_tree


# ------------------------------------------------------------------ scope names

@contextlib.contextmanager
def named_scope(name: str):
    """Prefix the names of the operations staged inside with `name` (they appear in the
    compiled program's op names and profiles, as with jax.named_scope)."""
    if not isinstance(name, str):
        raise TypeError("named_scope name argument must be a string.")
    with core.set_name_stack(core.current_name_stack() + (name,)), jax.named_scope(name):
        yield


def named_call(fun, *, name=None):
    """`fun` whose operations are staged inside `named_scope(name or fun.__name__)`."""
    scope = name if name is not None else getattr(fun, "__name__", "named_call")

    @functools.wraps(fun)
    def call(*args, **kwargs):
        with named_scope(scope):
            return fun(*args, **kwargs)
    return call


# ------------------------------------------------------------------ evaluation

class _CompileTimeEvalTrace(core.Trace):
    """Operations on concrete values run now; those on tracers go to the transformation
    that was current (as JAX, which falls back to tracing them)."""

    __slots__ = ()

    def forwards_to(self, args):
        return None if any(isinstance(x, Tracer) for x in args) else core.eval_trace

    def process_primitive(self, prim, args, params):
        target = self.parent if any(isinstance(x, Tracer) for x in args) else core.eval_trace
        with core.set_current_trace(target):
            return prim.bind(*args, **params)


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Inside jit (or any transformation), compute operations on concrete values now, so
    their results are concrete arrays rather than staged values."""
    with core.set_current_trace(_CompileTimeEvalTrace(core.current_trace())), \
            jax.ensure_compile_time_eval():
        yield


def typeof(x):
    """The abstract value (shape, dtype, weak type, sharding over Explicit mesh axes) of
    `x`, traced or not."""
    return get_aval(x)


def clear_caches():
    """Clear JAX's compilation caches and every cache of impl (traces of functions,
    programs derived from them), so the next call of a jitted function traces it again."""
    jax.clear_caches()
    core.clear_caches()
