"""One MLIR context for many lowerings in a law run.

JAX lowers every program it compiles -- each eager op once per primitive, parameters,
shapes and dtypes, each jitted program once -- into a fresh MLIR context, and a fresh
context loads and registers every dialect JAX uses.  Measured on the 2-core VM with JAX
0.10.2, that is about 6 ms of CPU per program, more than the rest of lowering a
single-op program, and the contexts are not freed before the process ends: a quick law
run lowers about 3,500 programs, and creating their contexts was a third of its CPU time
and most of its 3.6 GB of memory (1 GB when they are shared).

:func:`reuse` makes JAX's ``make_ir_context`` hand out the same context, per thread,
for :data:`LOWERINGS_PER_CONTEXT` lowerings before it starts a new one (a context keeps
every type and constant attribute it has seen, so one that lived for a whole hunt would
grow).  The lowered programs are the same text, compiled to the same executables under
the same persistent-cache keys; only where MLIR keeps them changes.  JAX's own public API
has no such setting, so this replaces a function of JAX's internal module
``jax._src.interpreters.mlir``; where a JAX release lacks it, :func:`reuse` changes
nothing and returns False.

Nothing here runs at import: the CLI (``python -m properties``; ``--fresh-mlir-contexts``
keeps JAX's behaviour) and the pytest plugin (``--reuse-mlir-contexts``, or
``$PROPERTIES_REUSE_MLIR_CONTEXTS=1``, which child processes inherit) call :func:`reuse`.
"""
from __future__ import annotations

import threading

#: how many programs share one context before a fresh one is made
LOWERINGS_PER_CONTEXT = 1000
#: set to "1" in the environment: the plugin (and the 8-device subprocess) reuse contexts
ENVIRONMENT_VARIABLE = "PROPERTIES_REUSE_MLIR_CONTEXTS"


class _SharedContexts:
    """A replacement for JAX's ``make_ir_context``: JAX's own, called once per
    ``per_context`` calls in each thread."""

    def __init__(self, make, per_context):
        self.make = make
        self.per_context = per_context
        self.local = threading.local()

    def __call__(self):
        local = self.local
        uses = getattr(local, "uses", self.per_context)
        if uses >= self.per_context:
            local.context, uses = self.make(), 0
        local.uses = uses + 1
        return local.context


def _mlir_module():
    try:
        from jax._src.interpreters import mlir
    except ImportError:
        return None
    return mlir if callable(getattr(mlir, "make_ir_context", None)) else None


def reuse(per_context=LOWERINGS_PER_CONTEXT):
    """Make JAX lower into shared MLIR contexts for the rest of the process (or until
    :func:`restore`).  Returns True when JAX's lowering now shares contexts, False when
    this JAX release has no ``make_ir_context`` to replace."""
    if per_context < 1:
        raise ValueError(f"per_context must be at least 1, got {per_context}")
    mlir = _mlir_module()
    if mlir is None:
        return False
    current = mlir.make_ir_context
    original = current.make if isinstance(current, _SharedContexts) else current
    mlir.make_ir_context = _SharedContexts(original, per_context)
    return True


def restore():
    """Give JAX back its own ``make_ir_context`` (a fresh context per lowering)."""
    mlir = _mlir_module()
    if mlir is not None and isinstance(mlir.make_ir_context, _SharedContexts):
        mlir.make_ir_context = mlir.make_ir_context.make


def reusing():
    """Whether JAX's lowering currently shares contexts (through :func:`reuse`)."""
    mlir = _mlir_module()
    return mlir is not None and isinstance(mlir.make_ir_context, _SharedContexts)
