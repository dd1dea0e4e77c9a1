"""Item 7: custom_jvp, custom_vjp and custom_gradient rules are used, and true rules agree."""


def test_custom_jvp_uses_rule(check_law):
    check_law("custom_jvp_uses_rule")


def test_custom_jvp_true_rule(check_law):
    check_law("custom_jvp_true_rule")


def test_custom_vjp_uses_rule(check_law):
    check_law("custom_vjp_uses_rule")


def test_custom_vjp_true_rule(check_law):
    check_law("custom_vjp_true_rule")


def test_custom_gradient_uses_rule(check_law):
    check_law("custom_gradient_uses_rule")


def test_custom_gradient_true_rule(check_law):
    check_law("custom_gradient_true_rule")


def test_custom_rules_under_vmap(check_law):
    check_law("custom_rules_under_vmap")


def test_custom_wrapper_uses_rule(check_law):
    check_law("custom_wrapper_uses_rule")


def test_custom_wrapper_true_rule_matches_finite_differences(check_law):
    check_law("custom_wrapper_true_rule_matches_finite_differences")


def test_custom_wrapper_symbolic_zeros(check_law):
    check_law("custom_wrapper_symbolic_zeros")
