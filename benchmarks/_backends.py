"""Backend and device plumbing shared by every benchmark.

Benchmarks are written once against a module with JAX's public API and run
for both ``impl`` and ``jax``; a missing backend, transform or device turns
into an asv skip (``NotImplementedError`` raised in ``setup``) instead of a
failure, so the suite runs at commits where impl is partial or absent.

Backends are loaded by the harness' loader (``properties.backends``: one
loader, one alias table), without its float64 switch.
"""

import os

import numpy as np

from properties.backends import MissingName
from properties.backends import load_backend as _load_module_backend

try:  # asv's own skip marker; plain NotImplementedError is equivalent for asv
    from asv_runner.benchmarks.mark import SkipNotImplemented
except ImportError:  # pragma: no cover - asv not installed (pytest-only env)

    class SkipNotImplemented(NotImplementedError):
        """Raised in setup to skip a parameter combination."""


BACKENDS = ["impl", "jax"]
DEVICES = ["cpu", "gpu"]


class Backend:
    """A loaded backend as the benchmarks use it: ``np`` is its numpy module
    itself (timed code pays no lookup), ``require`` resolves transforms."""

    def __init__(self, name, backend):
        self.name = name
        self.module = backend.module
        self.np = backend.submodule("numpy")
        self._backend = backend
        try:  # wait for every array in a tree: the end of every timed call
            self.block = backend.block_until_ready
        except MissingName:
            import jax

            self.block = jax.block_until_ready

    def require(self, *names):
        """The named transforms (one, or a tuple); MissingName (an
        AttributeError, which BenchBase turns into a skip for impl) if absent."""
        return self._backend.require(*names)

    def asarray(self, x):
        return self.np.asarray(x)


_CACHE = {}


def load_backend(name):
    """``impl`` or ``jax`` with its numpy; skip if it cannot be imported."""
    if name in _CACHE:
        return _CACHE[name]
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}")
    # BENCH_IMPL_MODULE=jax runs an A/A check: "impl" ratios then show the
    # noise floor of the measurement itself (they should sit near 1.0).
    modname = os.environ.get("BENCH_IMPL_MODULE", "impl") if name == "impl" else name
    try:
        backend = Backend(name, _load_module_backend(modname, float64=False))
    except Exception as exc:  # impl may be absent or broken at a given commit
        raise SkipNotImplemented(f"cannot import {name}: {exc!r}") from exc
    _CACHE[name] = backend
    return backend


def jax_device(kind):
    """The first JAX device of ``kind`` ('cpu' or 'gpu'); skip when absent."""
    import jax

    try:
        devices = jax.devices(kind)
    except RuntimeError as exc:
        raise SkipNotImplemented(f"JAX sees no {kind}: {exc}") from exc
    if not devices:
        raise SkipNotImplemented(f"JAX sees no {kind}")
    return devices[0]


# Built benchmark state per (class, params), reused when asv re-runs setup.
_STATE = {}


class BenchBase:
    """Common setup: resolve backend and device, build state once, skip cleanly.

    Subclasses implement ``prepare(*params)`` instead of ``setup``.  asv
    (asv_runner >= 0.3) re-runs ``setup`` before *every* timed call when a
    class has one; rebuilding and recompiling each time would make the
    timed call a cold one.  So ``setup`` builds the state once per process
    and parameter combination and afterwards only restores it.

    ``jax.default_device`` is entered in setup and left in teardown so that
    impl (which lowers through jax.jit) and jax place data on the same
    device without each benchmark passing devices around.

    impl is built incrementally: a missing impl name (AttributeError or
    ImportError while preparing) skips the impl parameter instead of
    failing.  Any other error is a real failure.
    """

    params = [BACKENDS, DEVICES]
    param_names = ["backend", "device"]
    timeout = 300

    def setup(self, backend, device, *rest):
        import jax

        self.dev = jax_device(device)
        self.be = load_backend(backend)
        self._device_ctx = jax.default_device(self.dev)
        self._device_ctx.__enter__()
        key = (type(self), backend, device, *rest)
        if key in _STATE:
            self.__dict__.update(_STATE[key])
            return
        try:
            self.prepare(backend, device, *rest)
        except (AttributeError, ImportError) as exc:
            self.teardown(backend, device, *rest)
            if backend != "impl":
                raise
            raise SkipNotImplemented(f"impl lacks a name: {exc}") from exc
        except BaseException:
            self.teardown(backend, device, *rest)
            raise
        _STATE[key] = {k: v for k, v in self.__dict__.items() if k != "_device_ctx"}

    def prepare(self, backend, device, *rest):
        """Build inputs and compile; runs once per process and parameters."""

    def teardown(self, *params):
        ctx = getattr(self, "_device_ctx", None)
        if ctx is not None:
            ctx.__exit__(None, None, None)
            self._device_ctx = None

    def put(self, x):
        """Host data -> backend array on the benchmark device."""
        import jax

        return self.be.asarray(jax.device_put(np.asarray(x), self.dev))
