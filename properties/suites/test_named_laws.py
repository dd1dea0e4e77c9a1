"""Item 11: collectives over named vmap axes against plain-array references on
the stacked batch, and their derivatives."""
from properties.plugin import law_test


@law_test
def test_named_collectives_match_reference(law_run, case):
    law_run.check(case)


@law_test
def test_named_collectives_jvp_matches_reference(law_run, case):
    law_run.check(case)


@law_test
def test_named_collectives_vjp_matches_reference(law_run, case):
    law_run.check(case)


@law_test
def test_named_extrema_derivatives_match_reference(law_run, case):
    law_run.check(case)


@law_test
def test_named_collectives_member_derivatives_match_reference(law_run, case):
    law_run.check(case)
