"""Item 9: the backend agrees with JAX (skipped when the backend is JAX).

Each test is one law: ``@law_test`` puts ``@given(case=<the law's cases>)`` and the
profile's ``@settings`` on it (see properties/plugin.py).
"""
from properties.plugin import law_test


@law_test
def test_differential_value(law_run, case):
    law_run.check(case)


@law_test
def test_differential_jvp(law_run, case):
    law_run.check(case)


@law_test
def test_differential_vjp(law_run, case):
    law_run.check(case)


@law_test
def test_differential_grad(law_run, case):
    law_run.check(case)


@law_test
def test_differential_vmap(law_run, case):
    law_run.check(case)
