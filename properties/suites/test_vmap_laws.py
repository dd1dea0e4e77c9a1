"""Items 1 and 2: vmap is a loop; vmap and grad commute; nested vmap; vmap and jit commute.

``@law_test``: properties/plugin.py.
"""
from properties.plugin import law_test


@law_test
def test_vmap_grad_matches_loop(law_run, case):
    law_run.check(case)


@law_test
def test_grad_of_batch_sum(law_run, case):
    law_run.check(case)


@law_test
def test_vmap_matches_loop(law_run, case):
    law_run.check(case)


@law_test
def test_nested_vmap_matches_loops(law_run, case):
    law_run.check(case)


@law_test
def test_vmap_pytrees_match_loops(law_run, case):
    law_run.check(case)


@law_test
def test_vmap_jit_commute(law_run, case):
    law_run.check(case)
