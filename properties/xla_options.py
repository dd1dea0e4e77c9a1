"""XLA options for law runs: compile quickly rather than optimise.

A law run compiles thousands of small programs (every eager op of a drawn program once
per shape and dtype, every jitted one once) and runs each a few times on arrays of a few
elements, so compiling is nearly all of a program's cost and optimising it buys nothing.
:data:`FLAGS` ask XLA:CPU for its unoptimised LLVM pipeline and its loop emitters instead
of the fusion emitters: on the 2-core VM a single-op program then compiles in about 11 ms
of CPU instead of 32 (lowering, about 6 ms, is unchanged), and a law run without the
persistent cache takes about half the CPU time.

What the programs compute is unchanged up to rounding, measured: LLVM no longer fuses a
multiply and an add into one FMA (so jit and eager evaluation of ``a * b + c`` now round
alike), and tanh and float64 lgamma differ from the optimised build in their last bits
(3 to 4 ulp), far inside every tolerance of ``tolerances.py``.  The laws check
transformations, not XLA's code generation.

Nothing here runs at import: the CLI (``python -m properties``; ``--no-fast-compile`` for
XLA's defaults) and the pytest plugin (``--fast-compile``) call :func:`fast_compile`.
"""
from __future__ import annotations

import os

#: XLA:CPU's fastest compiling: LLVM at -O0, the classic loop emitters
FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")


def fast_compile(environ=None):
    """Add :data:`FLAGS` to ``XLA_FLAGS`` in ``environ`` (default ``os.environ``; child
    processes inherit it), except those whose option the variable already sets: the user's
    choice wins.  XLA reads ``XLA_FLAGS`` once per process, when JAX starts its first
    backend, so call it before anything runs on a device.  Returns the flags added."""
    environ = os.environ if environ is None else environ
    current = environ.get("XLA_FLAGS", "")
    options = {flag.split("=", 1)[0] for flag in current.split()}
    added = [flag for flag in FLAGS if flag.split("=", 1)[0] not in options]
    if added:
        environ["XLA_FLAGS"] = " ".join([*current.split(), *added])
    return added
