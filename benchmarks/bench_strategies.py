"""How long drawing and building a 10-op program takes (target: < 5 ms median).

Two faces, self-contained:

* pytest-benchmark: ``python -m pytest benchmarks/bench_strategies.py``
* asv: the ``TimeProgramDraw`` class (``time_*`` methods).

Each round draws from a fresh hypothesis ConjectureData with a seeded random
source (the way @given draws one example) and builds the program for jax.
Building compiles the program's source; nothing is traced.
"""

from __future__ import annotations

import random
import time

import jax
import pytest
from hypothesis.control import BuildContext as _BuildContext
from hypothesis.internal.conjecture.data import ConjectureData as _ConjectureData

import strategies

_TEN_OPS = strategies.random_programs(min_ops=10, max_ops=10)
_CASES = strategies.program_cases(min_ops=10, max_ops=10)


def _draw(strategy, rnd):
    data = _ConjectureData(random=rnd)
    with _BuildContext(data, wrapped_test=None):
        return data.draw(strategy)


def draw_and_build(rnd):
    program = _draw(_TEN_OPS, rnd)
    return program.build(jax)


def draw_case_and_build(rnd):
    program, args = _draw(_CASES, rnd)
    return program.build(jax), args


# CPU time of this process: on a shared 2-core machine wall-clock time mostly
# measures the neighbours. The wall-clock variant below is for comparison.
@pytest.mark.benchmark(timer=time.process_time)
def test_draw_and_build_10_op_program_cpu(benchmark):
    rnd = random.Random(0)
    benchmark.pedantic(draw_and_build, args=(rnd,), rounds=300, iterations=1, warmup_rounds=20)
    assert benchmark.stats.stats.median < 5e-3


def test_draw_and_build_10_op_program_wall(benchmark):
    rnd = random.Random(0)
    benchmark.pedantic(draw_and_build, args=(rnd,), rounds=300, iterations=1, warmup_rounds=20)


def test_draw_case_with_args_and_build(benchmark):
    rnd = random.Random(1)
    benchmark.pedantic(draw_case_and_build, args=(rnd,), rounds=200, iterations=1, warmup_rounds=20)


class TimeProgramDraw:
    """asv: draw + build of a 10-op program, with and without its arguments."""

    def setup(self):
        self.rnd = random.Random(0)
        draw_and_build(self.rnd)  # warm caches (op tables, strategy objects)

    def time_draw_and_build_program(self):
        draw_and_build(self.rnd)

    def time_draw_and_build_case(self):
        draw_case_and_build(self.rnd)
