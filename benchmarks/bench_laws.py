"""Throughput of the property harness: examples per second of one law.

``LawThroughput`` times the laws with JAX's in-memory caches warm (steady state);
``HarnessThroughput`` tracks what a law run pays: its caches emptied before each
sample, so every example compiles its programs as in a fresh run (JAX lowering into
shared MLIR contexts, as a law run does), per CPU-second.

Cases are drawn once in setup from the law's own hypothesis strategy
(derandomized, so every commit and backend sees the same cases); the
tracked number is ``cases run / seconds`` for ``law(backend, case)`` over
that fixed list, so strategy generation cost stays out of it.  While impl
is partial, cases impl cannot run to a verdict (missing name, crash) are
dropped for both backends, and the count of kept cases is printed.

``properties`` is imported lazily: it turns on ``jax_enable_x64`` for the
whole process, which must not leak into the other benchmarks when a
front-end (pytest, ratios) imports every module of this package.
"""

import time

from ._backends import BACKENDS, DEVICES, BenchBase, SkipNotImplemented, load_backend

LAWS = ["vmap_grad_matches_loop", "jit_matches_eager"]
N_CASES = 20


def _draw_cases(strategy, n):
    from hypothesis import HealthCheck, Phase, given, settings

    drawn = []

    @settings(
        max_examples=n, derandomize=True, database=None, deadline=None,
        phases=[Phase.generate], suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(case):
        drawn.append(case)

    collect()
    return drawn[:n]


class _LawCases(BenchBase):
    """One law, its derandomized cases drawn in setup, and a loop running them."""

    param_names = ["backend", "device", "law"]
    timeout = 600
    n_cases = N_CASES

    def prepare(self, backend, device, law):
        try:
            from properties import backends as prop_backends
            from properties import laws as prop_laws
        except Exception as exc:  # being written in parallel
            raise SkipNotImplemented(f"properties unavailable: {exc!r}") from exc
        self.law = prop_laws.get(law)   # an unknown (renamed) law is an error, not a skip
        try:
            self.backend = prop_backends.load_backend(
                self.be.module.__name__ if backend == "impl" else backend
            )
            self.cases = _draw_cases(self.law.cases(), self.n_cases)
        except (ValueError, AttributeError, ImportError) as exc:
            raise SkipNotImplemented(f"cannot prepare law {law!r}: {exc!r}") from exc
        self._skip_types = tuple(
            t for t in (getattr(prop_backends, "MissingName", None),
                        getattr(prop_backends, "LawSkipped", None)) if t
        )
        self._filtered = getattr(prop_laws, "CaseFiltered", ())
        # impl is partial while it is written: keep only the cases impl can
        # run at this commit, for both backends, so their numbers compare.
        try:
            impl_backend = prop_backends.load_backend(load_backend("impl").module.__name__)
        except (ValueError, NotImplementedError):
            impl_backend = None
        if impl_backend is not None:
            self.cases = [c for c in self.cases if self._runs(impl_backend, c)]
        print(f"{law}: {len(self.cases)} of {self.n_cases} cases usable on impl")
        if self._run_all() == 0:  # warm-up; also detects a law that cannot run
            raise SkipNotImplemented(f"{law} ran no case on {backend}")

    def _runs(self, backend, case):
        try:
            self.law(backend, case)
        except (AssertionError, self._filtered):
            return True  # ran to a verdict
        except Exception:
            return False  # missing name or an impl crash: not comparable
        return True

    def _run_all(self):
        ran = 0
        for case in self.cases:
            try:
                self.law(self.backend, case)
            except self._filtered:
                continue
            except self._skip_types as exc:
                raise SkipNotImplemented(f"law skipped: {exc}") from exc
            except AssertionError:
                pass  # a violated law still ran the example; speed is tracked
            ran += 1
        return ran



class LawThroughput(_LawCases):
    """Examples per second of one law on impl (and on jax for comparison)."""

    params = [BACKENDS, DEVICES, LAWS]
    unit = "examples/s"

    def track_law_examples_per_second(self, backend, device, law):
        start = time.perf_counter()
        ran = self._run_all()
        return ran / (time.perf_counter() - start)


class HarnessThroughput(_LawCases):
    """Examples per CPU-second of one law with JAX's and impl's caches emptied first:
    compilation included, as in a fresh ``python -m properties`` (without the
    persistent cache), measured in CPU time so a busy machine does not move it."""

    params = [BACKENDS, ["cpu"], LAWS]
    unit = "examples/CPU-s"
    n_cases = 8     # each compiles all its programs: a few CPU-seconds per case
    timeout = 900

    def track_law_examples_per_cpu_second(self, backend, device, law):
        import jax
        jax.clear_caches()
        clear = getattr(self.backend.module, "clear_caches", None)
        if clear is not None:  # impl's traces and derived programs
            clear()
        try:  # lowering as a law run does; commits before the harness shared them have not
            from properties import mlir_contexts
        except ImportError:
            mlir_contexts = None
        if mlir_contexts is not None:
            mlir_contexts.reuse()
        try:
            start = time.process_time()
            ran = self._run_all()
            return ran / (time.process_time() - start)
        finally:  # the other benchmarks lower as JAX does for its users
            if mlir_contexts is not None:
                mlir_contexts.restore()
