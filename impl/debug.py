"""Printing and callbacks at run time (as jax.debug): values are shown when the program
runs, eagerly or compiled, once per element under vmap and with primal values under
differentiation."""
from __future__ import annotations

import string

import jax
import numpy as np

from impl import core
from impl.primitives import callbacks as _callbacks

__all__ = ["callback", "print", "inspect_array_sharding", "visualize_array_sharding",
           "visualize_sharding"]


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
