"""Printing and callbacks at run time (as jax.debug): values are shown when the program
runs, eagerly or compiled, once per element under vmap and with primal values under
differentiation."""
from __future__ import annotations

import inspect
import string
import threading

import jax
import numpy as np
from jax import tree_util

from impl import core
from impl import runtime as _runtime
from impl._traceback_util import is_library
from impl.primitives import callbacks as _callbacks

__all__ = ["breakpoint", "callback", "print", "inspect_array_sharding",
           "visualize_array_sharding", "visualize_sharding"]


def _staged_callback(fn, args, kwargs, ordered, partitioned):
    tree, dynamic, static = _callbacks.split_static(args, kwargs)
    _callbacks.debug_callback(_callbacks.flat_call(fn, tree, static), dynamic,
                              ordered=ordered, partitioned=partitioned)


def _call_or_return(name, call, first, args, kwargs):
    """The two forms of callback and print: with its first argument, `call` it now;
    without (options only), return `call` for the user to call."""
    if first is not None:
        return call(first, *args, **kwargs)
    if args or kwargs:
        raise TypeError(f"{name} received unexpected arguments in the two-call form:"
                        f" args={args} kwargs={kwargs}")
    return call


def callback(callback=None, *args, ordered: bool = False, partitioned: bool = False,
             **kwargs):
    """Call `callback(*args, **kwargs)` with the runtime values of the arrays in them.
    Without `callback`, returns a function taking it (the two-call form)."""
    def call(fn, *c_args, **c_kwargs):
        if not callable(fn):
            raise TypeError("first argument to jax.debug.callback must be callable, but got "
                            f"an object of type {type(fn)}")
        _staged_callback(fn, c_args, c_kwargs, ordered, partitioned)

    return _call_or_return("debug_callback", call, callback, args, kwargs)


class _UnusedArgumentCheck(string.Formatter):
    """Formats nothing; raises for arguments the format string never uses."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        positional = [a for i, a in enumerate(args) if i not in used_args]
        if positional:
            raise ValueError(f"Unused positional arguments to `jax.debug.print`: {positional}")
        named = [k for k in kwargs if k not in used_args]
        if named:
            raise ValueError(
                f"Unused keyword arguments to `jax.debug.print`: {named}. An f-string (f\"{{x}}\") "
                "formats too early: pass a plain format string and the values as arguments.")


def print(fmt=None, *args, ordered: bool = False, partitioned: bool = False,  # noqa: A001
          skip_format_check: bool = False, **kwargs):
    """Print `fmt.format(*args, **kwargs)` with the runtime values of the arrays in the
    arguments. Without `fmt`, returns a function taking it (the two-call form)."""
    def emit(fmt_, *p_args, **p_kwargs):
        if not skip_format_check:
            _UnusedArgumentCheck().format(fmt_, *p_args, **p_kwargs)
        _callbacks.debug_print(fmt_, p_args, p_kwargs, ordered=ordered,
                               partitioned=partitioned)

    return _call_or_return("debug_print", emit, fmt, args, kwargs)


class _Frame:
    """A Python frame seen by `breakpoint`: its local variables split into the values
    impl traces (operands of the callback) and the rest (kept as they are)."""

    def __init__(self, info):
        self.info = info
        self.names, self.trees, self.static = [], [], {}
        self.traced = []
        for name, value in info.frame.f_locals.items():
            try:
                leaves, tree = tree_util.tree_flatten(value)
            except Exception:   # a value that cannot be flattened is shown as it is
                leaves, tree = [value], tree_util.tree_structure(0)
            self.names.append(name)
            self.trees.append(tree)
            for leaf in leaves:
                if isinstance(leaf, core.Tracer):
                    self.traced.append(leaf)
                else:
                    self.static[(name, len(self.static) + len(self.traced))] = leaf

    def debugger_frame(self, values):
        """JAX's debugger frame, with `values` in place of the traced leaves."""
        from jax._src.debugger import core as debugger_core
        it, position, local_vars = iter(values), 0, {}
        for name, tree in zip(self.names, self.trees):
            leaves = []
            for _ in range(tree.num_leaves):
                key = (name, position)
                leaves.append(self.static[key] if key in self.static else next(it))
                position += 1
            local_vars[name] = tree_util.tree_unflatten(tree, leaves)
        frame = debugger_core.DebuggerFrame.from_frameinfo(self.info)
        return debugger_core.DebuggerFrame(
            filename=frame.filename, locals=local_vars, globals={},
            code_context=frame.code_context, source=frame.source, lineno=frame.lineno,
            offset=frame.offset)


_debugger_lock = threading.Lock()


def breakpoint(*, backend: str | None = None, filter_frames: bool = True,  # noqa: A001
               num_frames: int | None = None, ordered: bool = False, token=None,
               **kwargs):
    """Stop in JAX's interactive debugger when the program runs, showing the Python
    frames of the call (impl's own left out when `filter_frames`) with the runtime
    values of the traced variables. With `token`, it runs once `token` is computed and
    returns it unchanged."""
    if token is not None and ordered:
        raise ValueError("`ordered` and `token` are mutually exclusive arguments.")
    infos = [f for f in inspect.stack()[1:]
             if not (filter_frames and is_library(f.filename))]
    frames = [_Frame(f) for f in infos[:num_frames]]
    counts = [len(f.traced) for f in frames]

    def enter_debugger(*values):
        from jax._src.debugger import core as debugger_core
        debugger = debugger_core.get_debugger(backend=backend)
        shown, start = [], 0
        for frame, n in zip(frames, counts):
            shown.append(frame.debugger_frame(values[start:start + n]))
            start += n
        thread_id = (None if threading.current_thread() is threading.main_thread()
                     else threading.get_ident())
        with _debugger_lock:
            debugger(shown, thread_id, **kwargs)

    traced = [x for f in frames for x in f.traced]
    if token is None:
        _callbacks.debug_callback(enter_debugger, traced, ordered=ordered)
        return None

    def run_then_return(tok, *values):
        enter_debugger(*values)
        return tok
    shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), token)
    return _runtime.pure_callback(run_then_return, shapes, token, *traced)


# JAX's renderer of a sharding as a grid of devices (it needs the `rich` package).
visualize_sharding = jax.debug.visualize_sharding


def inspect_array_sharding(value, *, callback):
    """Call `callback(sharding)` with the sharding of the array `value`: at once for a
    concrete array, when the program is compiled for a traced one (the placement XLA's
    partitioner chose), as JAX does."""
    _callbacks.inspect_sharding(value, callback)


def visualize_array_sharding(arr, **kwargs):
    """Draw how the array `arr` is laid out over devices (as JAX draws it); inside jit,
    when the program is compiled, as XLA partitioned it."""
    shape = np.shape(arr)
    inspect_array_sharding(
        arr, callback=lambda sharding: visualize_sharding(shape, sharding, **kwargs))
