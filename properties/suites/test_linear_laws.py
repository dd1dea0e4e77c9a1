"""Items 5 and 6: linear_transpose and linear_call.  (``@law_test``: properties/plugin.py)"""
from properties.plugin import law_test


@law_test
def test_linear_transpose_dot_product(law_run, case):
    law_run.check(case)


@law_test
def test_linear_transpose_twice(law_run, case):
    law_run.check(case)


@law_test
def test_linear_call_involution(law_run, case):
    law_run.check(case)


@law_test
def test_linear_call_dot_product(law_run, case):
    law_run.check(case)


@law_test
def test_linear_call_under_vmap(law_run, case):
    law_run.check(case)
