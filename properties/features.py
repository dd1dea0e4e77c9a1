"""Capabilities a law needs beyond API names, probed once per backend.

A feature is *supported* when its canonical minimal call runs without
raising; whether the numbers are right is the laws' business, not the
probe's. A case that needs an unsupported feature raises
:class:`MissingFeature`: the runner counts it as unsupported (and skips the
law when no case can run), never as passed. So a law over a feature impl
lacks today is reported as skipped, with the probe's error as the reason,
and starts running the day the feature lands.
"""
from __future__ import annotations

import inspect

import numpy as np

from .backends import MissingOp


class MissingFeature(MissingOp):
    """The backend lacks a capability a drawn case needs (a per-case skip)."""


def _tuple_axis_names(b):
    inner = b.vmap(lambda x: b.lax.psum(x, ("i", "j")), axis_name="j")
    b.vmap(inner, axis_name="i")(np.ones((2, 2)))


def _prng_under_vmap(b):
    keys = b.random.split(b.random.PRNGKey(0), 2)
    b.vmap(lambda k: b.random.normal(k, (2,)))(keys)


def _parameter(fn, name):
    params = inspect.signature(fn).parameters
    if name not in params:
        raise TypeError(f"{getattr(fn, '__qualname__', fn)} has no parameter {name!r}")


def _chunked_vmap(b):
    _parameter(b.vmap, "chunk_size")
    b.vmap(lambda x: x * 2.0, chunk_size=2)(np.ones(3))


def _reduce_axes(b):
    g = b.grad(lambda w, x: w * x, reduce_axes=("batch",))
    b.vmap(g, in_axes=(None, 0), out_axes=None, axis_name="batch")(1.0, np.arange(3.0))


def _symbolic_zeros(b):
    f = b.custom_jvp(lambda x, y: x * y)
    f.defjvp(lambda p, t: (f(*p), p[1] * t[0] if type(t[1]).__name__ == "SymbolicZero" else
                           p[1] * t[0] + p[0] * t[1]), symbolic_zeros=True)
    b.jvp(lambda x: f(x, 2.0), (1.0,), (1.0,))


def _custom_vjp_symbolic_zeros(b):
    f = b.custom_vjp(lambda x: x * 2.0)
    f.defvjp(lambda x: (f(x.value), None), lambda _, g: (2.0 * g,), symbolic_zeros=True)
    b.grad(f)(1.0)


def _custom_vjp_forward_mode(b):
    f = b.custom_vjp(lambda x: x * x)
    f.defvjp(lambda x: (f(x), x), lambda x, g: (2.0 * x * g,))
    b.jvp(lambda x: b.jvp(f, (x,), (1.0,))[1], (1.0,), (1.0,))


def _piles(b):
    p = b.pile([np.ones(2), np.ones(1)], axis=0)
    axis = _pile_axis(b)
    b.vmap(lambda x: x * 2.0, in_axes=axis, out_axes=axis, axis_size=2)(p).unpile()


def _pile_axis(b):
    axis = getattr(b, "pile_axis", None)
    if axis is None:
        axis = b.interpreters.batching.pile_axis
    return axis


def _jit_shardings(b):
    _parameter(b.jit, "in_shardings")
    _parameter(b.jit, "out_shardings")


PROBES = {
    "tuple_axis_names": _tuple_axis_names,
    "prng_under_vmap": _prng_under_vmap,
    "chunked_vmap": _chunked_vmap,
    "reduce_axes": _reduce_axes,
    "symbolic_zeros": _symbolic_zeros,
    "custom_vjp_symbolic_zeros": _custom_vjp_symbolic_zeros,
    "piles": _piles,
    "custom_vjp_forward_mode": _custom_vjp_forward_mode,
    "jit_shardings": _jit_shardings,
}

_CACHE: dict = {}

#: the attribute of a backend module declaring what it does not support, with why:
#: ``{"param jit.donate_argnums": "reason", "dtype bfloat16": "reason", ...}`` -- keys
#: are what a case reaches (``StackCase.events()``: "param T.P", "kind K", "dtype D",
#: "shape ...", "index ...").  A crash on a case reaching a declared feature is
#: unsupported (a skip, with the reason), any other crash is a finding.
DECLARED = "UNSUPPORTED_FEATURES"


def declared_unsupported(backend) -> dict:
    """What ``backend`` declares unsupported: ``{feature: reason}`` (see :data:`DECLARED`)."""
    declared = getattr(backend.module, DECLARED, None) or {}
    if not isinstance(declared, dict):
        raise TypeError(f"{backend.name}.{DECLARED} must be a dict of feature -> reason, "
                        f"got {type(declared).__name__}")
    return dict(declared)


def probe(backend, feature):
    """(supported, reason): the probe's verdict for ``backend`` (cached by name)."""
    if feature not in PROBES:
        raise ValueError(f"unknown feature {feature!r}; known: {sorted(PROBES)}")
    key = (backend.name, feature)
    if key not in _CACHE:
        try:
            PROBES[feature](backend)
            _CACHE[key] = (True, "")
        except Exception as exc:  # any failure of the canonical call: not supported
            _CACHE[key] = (False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                           if str(exc) else type(exc).__name__)
    return _CACHE[key]


def require(backend, *features):
    """Raise MissingFeature unless ``backend`` supports every feature."""
    for feature in features:
        ok, reason = probe(backend, feature)
        if not ok:
            raise MissingFeature(f"backend {backend.name!r} lacks {feature} ({reason})")


def pile_axis(backend):
    """The backend's pile_axis marker (top level or interpreters.batching)."""
    require(backend, "piles")
    return _pile_axis(backend)
