"""The asv benchmark bodies under pytest-benchmark, for a quick table.

    pytest benchmarks --benchmark-only

Parametrized over the asv classes (``time_`` methods only; peakmem/track
have no pytest-benchmark analogue).  Skips mirror asv: a setup that raises
NotImplementedError (backend missing, no GPU) skips the test.  pytest is
imported lazily because asv imports every module of this package inside
environments that do not have pytest.
"""

from benchmarks._harness import iter_cases


def pytest_generate_tests(metafunc):
    if "asv_case" in metafunc.fixturenames:
        cases = list(iter_cases(prefixes=("time_",)))
        metafunc.parametrize("asv_case", cases, ids=[c.id for c in cases])


def test_asv_benchmark(benchmark, asv_case):
    import jax
    import pytest

    # as under asv: float32 defaults.  The law plugin, which the repository's
    # conftest loads for every pytest run, turns jax_enable_x64 on.
    x64 = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", False)
    try:
        try:
            obj = asv_case.instance()
        except NotImplementedError as exc:
            pytest.skip(str(exc) or "not implemented")
        benchmark.group = asv_case.name
        benchmark.extra_info.update(dict(zip(asv_case.param_names, asv_case.params)))
        try:
            benchmark(asv_case.bound(obj))
        finally:
            asv_case.teardown(obj)
    finally:
        jax.config.update("jax_enable_x64", x64)
