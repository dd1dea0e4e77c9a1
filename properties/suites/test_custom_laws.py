"""Item 7: custom_jvp, custom_vjp and custom_gradient rules are used, and true rules agree.

``@law_test``: properties/plugin.py.
"""
from properties.plugin import law_test


@law_test
def test_custom_jvp_uses_rule(law_run, case):
    law_run.check(case)


@law_test
def test_custom_jvp_true_rule(law_run, case):
    law_run.check(case)


@law_test
def test_custom_vjp_uses_rule(law_run, case):
    law_run.check(case)


@law_test
def test_custom_vjp_true_rule(law_run, case):
    law_run.check(case)


@law_test
def test_custom_gradient_uses_rule(law_run, case):
    law_run.check(case)


@law_test
def test_custom_gradient_true_rule(law_run, case):
    law_run.check(case)


@law_test
def test_custom_rules_under_vmap(law_run, case):
    law_run.check(case)


@law_test
def test_custom_rules_under_vmap(law_run, case):
    law_run.check(case)


@law_test
def test_custom_wrapper_uses_rule(law_run, case):
    law_run.check(case)


@law_test
def test_custom_wrapper_true_rule_matches_finite_differences(law_run, case):
    law_run.check(case)


@law_test
def test_custom_wrapper_symbolic_zeros(law_run, case):
    law_run.check(case)


@law_test
def test_custom_vjp_forward_over_forward(law_run, case):
    law_run.check(case)
