"""How long drawing and building a 10-op program takes (target: < 5 ms median).

Two faces, self-contained:

* pytest-benchmark: ``python -m pytest benchmarks/bench_strategies.py``
* asv: the ``ProgramDraw`` class (``track_*`` methods, seconds per draw).

Programs are drawn the way a law test draws them: by a ``@given`` test
(``st.data()``, one draw per example, a fixed seed per batch), and each
draw is timed inside the example body together with building the program
for jax.  Building compiles the program's source; nothing is traced.
"""

from __future__ import annotations

import statistics
import time

import jax
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import strategies

_TEN_OPS = strategies.random_programs(min_ops=10, max_ops=10)
_CASES = strategies.program_cases(min_ops=10, max_ops=10)


def _build_program(program):
    return program.build(jax)


def _build_case(case):
    program, args = case
    return program.build(jax), args


def draw_times(strategy, build, n, batch_seed=0, clock=time.perf_counter):
    """Seconds per draw-and-build for ``n`` examples of one ``@given`` test."""
    times = []

    @seed(batch_seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data):
        start = clock()
        build(data.draw(strategy))
        times.append(clock() - start)

    draw()
    return times


def _benchmark_draws(benchmark, strategy, build, clock, rounds):
    per_draw = []
    batches = iter(range(rounds + 1))
    benchmark.pedantic(lambda: per_draw.extend(draw_times(strategy, build, 20, next(batches),
                                                          clock)),
                       rounds=rounds, iterations=1, warmup_rounds=1)
    median = statistics.median(per_draw)
    benchmark.extra_info["median_seconds_per_draw"] = median
    benchmark.extra_info["draws"] = len(per_draw)
    return median


# CPU time of this process: on a shared 2-core machine wall-clock time mostly
# measures the neighbours. The wall-clock variant below is for comparison.
@pytest.mark.benchmark(timer=time.process_time)
def test_draw_and_build_10_op_program_cpu(benchmark):
    median = _benchmark_draws(benchmark, _TEN_OPS, _build_program, time.process_time, 15)
    assert median < 5e-3, f"median draw+build {median * 1e3:.2f} ms per program"


def test_draw_and_build_10_op_program_wall(benchmark):
    _benchmark_draws(benchmark, _TEN_OPS, _build_program, time.perf_counter, 15)


def test_draw_case_with_args_and_build(benchmark):
    _benchmark_draws(benchmark, _CASES, _build_case, time.perf_counter, 10)


class ProgramDraw:
    """asv: median seconds per draw + build of a 10-op program, with and without
    its arguments, over 50 examples of a ``@given`` test."""

    unit = "seconds"

    def setup(self):
        draw_times(_TEN_OPS, _build_program, 5)  # warm caches (op tables, strategy objects)

    def track_draw_and_build_program(self):
        return statistics.median(draw_times(_TEN_OPS, _build_program, 50))

    def track_draw_and_build_case(self):
        return statistics.median(draw_times(_CASES, _build_case, 50))
