"""Backends: the module whose transformations are checked or timed.

A backend is any importable module exposing JAX's API names.  The adapter
resolves names that live elsewhere in some versions (``jax.linear_call`` is
``jax.custom_derivatives.linear_call`` in jax 0.10) and turns a missing name
into :class:`MissingName`, which the runner reports as a *skip* with the
reason -- never as a pass.  The benchmarks load their backends here too
(``benchmarks/_backends.py``), so there is one loader and one alias table.

Loading a backend for the laws enables float64 in JAX (``jax_enable_x64``):
the laws compare against float64 references (finite differences, float64
re-runs); impl runs on JAX, so the same flag covers it.  The benchmarks load
with ``float64=False``.  Importing this module changes no JAX setting.
"""
from __future__ import annotations

import importlib
import os
import unittest

import jax

#: The transformation names a complete backend exposes.
API_NAMES = (
    "grad", "value_and_grad", "jvp", "vjp", "linearize", "linear_transpose",
    "jacfwd", "jacrev", "hessian", "vmap", "jit", "make_jaxpr", "custom_jvp",
    "custom_vjp", "custom_gradient", "closure_convert", "linear_call",
    "numpy", "lax",
)

#: Where a name lives when it is not at the top of the module, per backend.
ALIASES = {
    "jax": {"linear_call": "jax.custom_derivatives.linear_call"},
}

DEFAULT_BACKEND = os.environ.get("PROPERTIES_BACKEND", "impl")


class MissingName(AttributeError):
    """The backend lacks a name (reported as a skip, never a pass).

    ``op`` is True for a numpy/lax function a drawn program uses, False for
    a transformation the law itself needs."""

    op = False


class MissingOp(MissingName):
    """The backend lacks a numpy/lax function that a drawn program uses."""

    op = True


class LawSkipped(unittest.SkipTest):
    """A law cannot run on this backend; pytest and hypothesis treat it as a skip."""


def _resolve_dotted(path):
    module_name, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


class Namespace:
    """Read-only view of a sub-module (``numpy``, ``lax``) raising MissingName."""

    def __init__(self, backend_name, label, module):
        self._backend_name = backend_name
        self._label = label
        self._module = module

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        try:
            return getattr(self._module, attr)
        except AttributeError:
            raise MissingOp(
                f"backend {self._backend_name!r} has no {self._label}.{attr}") from None

    def __repr__(self):
        return f"<{self._label} of backend {self._backend_name!r}>"


class Backend:
    """A named module with JAX's API; attribute access resolves aliases."""

    #: True only for the plain ``jax`` package: the differential laws skip it.
    is_reference = False
    #: The backend the differential laws compare with (``--reference``); None: JAX.
    reference = None

    def __init__(self, name, module, aliases=None):
        self.name = name
        self.module = module
        self._aliases = dict(aliases or {})

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        value = self._resolve(attr)
        if attr in ("numpy", "lax"):
            return Namespace(self.name, attr, value)
        return value

    def _resolve(self, attr):
        value = getattr(self.module, attr, None)
        if value is None and attr in self._aliases:
            try:
                value = _resolve_dotted(self._aliases[attr])
            except (ImportError, AttributeError):
                value = None
        if value is None and attr in ("numpy", "lax"):
            try:
                value = importlib.import_module(f"{self.module.__name__}.{attr}")
            except ImportError:
                value = None
        if value is None:
            raise MissingName(f"backend {self.name!r} has no {attr!r}")
        return value

    def require(self, *names):
        """The named API objects (one, or a tuple); MissingName if one is absent."""
        found = tuple(getattr(self, name) for name in names)
        return found[0] if len(found) == 1 else found

    def submodule(self, attr):
        """The backend's own ``numpy`` or ``lax`` module itself, without the
        per-name checks of ``backend.numpy`` (for code that is timed)."""
        if attr not in ("numpy", "lax"):
            raise ValueError(f"submodule is 'numpy' or 'lax', got {attr!r}")
        return self._resolve(attr)

    def missing(self):
        """API names this backend lacks."""
        out = []
        for name in API_NAMES:
            try:
                getattr(self, name)
            except MissingName:
                out.append(name)
        return out

    def __repr__(self):
        return f"<Backend {self.name!r}>"


_CACHE: dict[str, Backend] = {}


def enable_float64():
    """Turn on ``jax_enable_x64`` (the laws' float64 references need it)."""
    jax.config.update("jax_enable_x64", True)


def load_backend(name=None, *, float64=True):
    """Return the Backend for ``name`` (``impl``, ``jax`` or a module path).

    Raises ValueError when ``name`` is not importable: a typo must not turn
    into a run of skipped laws.  ``float64`` (the default, for the laws)
    enables ``jax_enable_x64``; the benchmarks pass False.
    """
    if float64:
        enable_float64()
    if isinstance(name, Backend):
        return name
    name = name or DEFAULT_BACKEND
    if not isinstance(name, str) or not name:
        raise TypeError(f"backend must be a module name or Backend, got {name!r}")
    if name in _CACHE:
        return _CACHE[name]
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ValueError(f"cannot import backend {name!r}: {exc}") from exc
    backend = Backend(name, module, ALIASES.get(name))
    if module is jax:
        backend.is_reference = True
    _CACHE[name] = backend
    return backend


def reference():
    """The JAX backend: the differential reference unless a run names another."""
    return load_backend("jax")


def differential_reference(backend):
    """The backend ``backend``'s results are compared with (its ``reference``, or JAX);
    LawSkipped when that is the backend itself: there is nothing to compare."""
    ref = backend.reference or reference()
    if ref.name == backend.name or (backend.is_reference and ref.is_reference):
        raise LawSkipped(f"backend {backend.name!r} is the reference {ref.name!r} itself")
    return ref
