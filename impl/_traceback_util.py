"""Tracebacks without impl's internal frames, as JAX filters its own.

An error raised while impl transforms a user's function unwinds through many frames of
impl's machinery (traces, interpreters, rules) and of JAX (impl's jit runs inside
`jax.jit`). Those frames say nothing about the user's mistake, so the outermost public
entry point (`api_boundary`) cuts them out of the traceback before the error reaches
the user. The environment variable `IMPL_TRACEBACK_FILTERING` chooses what happens,
with the values and meanings of JAX's `JAX_TRACEBACK_FILTERING`:

- `auto` (default): `tracebackhide` under IPython, `quiet_remove_frames` otherwise;
- `quiet_remove_frames`: drop the internal frames and add a note saying so;
- `remove_frames`: drop them, and chain the unfiltered traceback as the `__cause__`;
- `tracebackhide`: keep every frame but mark the internal ones `__tracebackhide__`
  (IPython and pytest then hide them);
- `off`: leave tracebacks untouched.

The variable is read each time an error passes a boundary, so it can be changed at
run time (`os.environ["IMPL_TRACEBACK_FILTERING"] = "off"`).
"""
from __future__ import annotations

import functools
import os
import sys
import traceback
import types

import jax
import jaxlib

ENV_VAR = "IMPL_TRACEBACK_FILTERING"
MODES = ("auto", "off", "tracebackhide", "remove_frames", "quiet_remove_frames")

_IMPL_DIR = os.path.dirname(os.path.abspath(__file__))
# impl's machinery; the user-facing array modules (numpy, lax, nn, scipy) stay visible,
# as JAX keeps the frames of jax.numpy.
_INTERNAL = tuple(os.path.join(_IMPL_DIR, name) for name in (
    "core.py", "api.py", "errors.py", "_traceback_util.py", "interpreters", "primitives",
    "custom_derivatives", "custom_batching.py"))
_INTERNAL += tuple(os.path.dirname(os.path.abspath(m.__file__)) for m in (jax, jaxlib))

NOTE = ("For simplicity, impl has removed its internal frames from the traceback of the "
        f"following exception. Set {ENV_VAR}=off to include these.")


_JAX_NOTE = "JAX has removed its internal frames"


class UnfilteredStackTrace(Exception):
    """Carries the complete traceback (mode `remove_frames`)."""


def is_internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    return any(path == p or path.startswith(p + os.sep) or path.startswith(p + ".")
               for p in _INTERNAL)


def is_library(filename: str) -> bool:
    """Any file of impl's (its array modules included), JAX's or jaxlib's: the frames a
    debugger leaves out, as JAX's leaves out all of its own."""
    path = os.path.abspath(filename)
    return any(path.startswith(p + os.sep) for p in (_IMPL_DIR, *_INTERNAL[-2:]))


def filtering_mode() -> str:
    mode = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise ValueError(f"{ENV_VAR}={mode!r} is not a valid value; use one of "
                         f"{', '.join(MODES)}")
    if mode == "auto":
        return "tracebackhide" if "IPython" in sys.modules and _in_ipython() else \
            "quiet_remove_frames"
    return mode


def _in_ipython() -> bool:
    try:
        get_ipython()  # type: ignore[name-defined]  # noqa: F821
        return True
    except NameError:
        return False


def filter_traceback(tb):
    """The traceback `tb` without impl's and JAX's frames."""
    kept = [(f, lineno) for f, lineno in traceback.walk_tb(tb)
            if not is_internal(f.f_code.co_filename)]
    out = None
    for f, lineno in reversed(kept):
        out = types.TracebackType(out, f, f.f_lasti, lineno)
    return out


def _under_another_boundary(boundary_frame) -> bool:
    frame = boundary_frame.f_back   # the caller of the boundary that is handling the error
    while frame is not None:
        if frame.f_code in _BOUNDARY_CODES:
            return True
        frame = frame.f_back
    return False


def filter_at_boundary(e: Exception, boundary_frame) -> None:
    """What a boundary does with an error leaving it (the caller then re-raises `e`):
    unless an enclosing boundary will, filter its traceback as the mode says."""
    mode = filtering_mode()
    if mode == "off" or _under_another_boundary(boundary_frame):
        return
    if mode == "tracebackhide":
        for f, _ in traceback.walk_tb(e.__traceback__):
            if is_internal(f.f_code.co_filename):
                f.f_locals["__tracebackhide__"] = True
        return
    full = e.__traceback__
    e.with_traceback(filter_traceback(full))
    # jax.jit (inside impl's jit) has added its own note about JAX's frames.
    notes = [n for n in getattr(e, "__notes__", ()) if _JAX_NOTE not in n]
    if hasattr(e, "__notes__"):
        e.__notes__ = notes
    if mode == "quiet_remove_frames":
        e.add_note("--------------------\n" + NOTE)
    else:
        unfiltered = UnfilteredStackTrace(
            "".join(traceback.format_exception_only(type(e), e)).strip()
            + "\n\nThe preceding is the original exception, with every frame; the "
            "traceback below excludes impl's internal frames.")
        unfiltered.with_traceback(full)
        unfiltered.__cause__, unfiltered.__context__ = e.__cause__, e.__context__
        e.__cause__ = unfiltered


def api_boundary(fun):
    """Wrap a public entry point: errors leaving it have impl's frames filtered out.
    Only the outermost boundary on the stack filters, so nested transformations
    filter once."""

    @functools.wraps(fun)
    def impl_api_boundary(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841  (pytest and IPython hide this frame)
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            filter_at_boundary(e, sys._getframe())
            raise
    return impl_api_boundary


def boundary_method(method):
    """Mark `method` as a boundary that filters its errors itself (its `except` calls
    `filter_at_boundary(e, sys._getframe())` and re-raises): a hot entry point, such as
    a jitted function's call, that must not pay for the wrapper `api_boundary` adds."""
    _BOUNDARY_CODES.add(method.__code__)
    return method


_BOUNDARY_CODES = {api_boundary(lambda: None).__code__}
