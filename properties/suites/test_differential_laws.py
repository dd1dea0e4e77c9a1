"""Item 9: the backend agrees with JAX (skipped when the backend is JAX).

``@law_test``: properties/plugin.py.
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
