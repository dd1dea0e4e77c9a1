"""Item 8: jit does not change results.  (``@law_test``: properties/plugin.py)"""
from properties.plugin import law_test


@law_test
def test_jit_matches_eager(law_run, case):
    law_run.check(case)


@law_test
def test_jit_grad_matches_grad(law_run, case):
    law_run.check(case)


@law_test
def test_jit_vmap_matches_vmap(law_run, case):
    law_run.check(case)
