"""Every law catches a deliberately broken backend or rule.

Each test runs a law against a wrapper around JAX with one transformation
broken (properties/broken.py), or on cases with a broken rule, and requires
an AssertionError on at least one drawn case.  For backend breaks the same
case must pass on plain JAX, so the failure is the break's doing.  These run
against ``jax`` whatever --backend says, so they do not depend on impl.
"""
import pytest

from properties import cases
from properties.backends import LawSkipped, load_backend
from properties.broken import broken, find_counterexample
from properties.laws import CaseFiltered, get

# (law, breaks applied to jax, strategy of broken-rule cases or None)
BACKEND_BREAKS = [
    ("vmap_grad_matches_loop", ("vmap_slice0",)),
    ("grad_of_batch_sum", ("vmap_slice0",)),
    ("vmap_matches_loop", ("vmap_slice0",)),
    ("nested_vmap_matches_loops", ("vmap_slice0",)),
    ("vmap_pytrees_match_loops", ("vmap_slice0",)),
    ("vmap_jit_commute", ("jit_perturb",)),
    ("jvp_matches_finite_differences", ("forward_drops_term",)),
    ("linearize_matches_jvp", ("linearize_stale",)),
    ("vjp_adjoint_of_jvp", ("vjp_jv",)),
    ("jacfwd_matches_jacrev", ("reverse_drops_term",)),
    ("jacfwd_matches_jacrev", ("jacrev_transposed",)),
    ("grad_matches_jvp", ("grad_scaled",)),
    ("grad_matches_vjp", ("grad_scaled",)),
    ("grad_matches_finite_differences", ("grad_scaled",)),
    ("vjp_matches_finite_differences", ("reverse_drops_term",)),
    ("jacobian_matches_finite_differences", ("jacrev_transposed",)),
    ("hessian_matches_jacfwd_jacrev", ("hessian_drops_term",)),
    ("hessian_matches_finite_differences", ("hessian_drops_term",)),
    ("hessian_symmetric", ("reverse_drops_term",)),
    ("linear_transpose_dot_product", ("transpose_drops_term",)),
    ("linear_transpose_twice", ("transpose_drops_term",)),
    ("linear_call_involution", ("transpose_drops_term",)),
    ("linear_call_under_vmap", ("loop_vmap", "transpose_drops_term")),
    ("custom_jvp_uses_rule", ("ignore_custom_rules",)),
    ("custom_vjp_uses_rule", ("ignore_custom_rules",)),
    ("custom_gradient_uses_rule", ("ignore_custom_rules",)),
    ("custom_rules_under_vmap", ("vmap_slice0",)),
    ("jit_matches_eager", ("jit_perturb",)),
    ("jit_grad_matches_grad", ("jit_perturb",)),
    ("jit_vmap_matches_vmap", ("jit_perturb",)),
    ("control_flow_matches_python", ("control_flow_wrong",)),
    ("control_flow_jvp_matches_finite_differences", ("control_flow_derivative_damped",)),
    ("control_flow_vjp_matches_finite_differences", ("control_flow_derivative_damped",)),
    ("control_flow_vmap_matches_loop", ("vmap_slice0",)),
    ("differential_value", ("numpy_perturbed",)),
    ("differential_jvp", ("numpy_perturbed",)),
    ("differential_vjp", ("vjp_jv",)),
    ("differential_grad", ("reverse_drops_term",)),
    ("differential_vmap", ("vmap_slice0",)),
]

# A hessian error is only visible to the symmetry law off the diagonal: use
# programs whose output depends on two inputs (cross terms).
STRATEGIES = {
    "hessian_symmetric": lambda: cases.programs(smooth=True).filter(
        lambda c: len(c.program.input_dependencies) >= 2),
}

RULE_BREAKS = {
    # a transpose that is the function itself: involution still holds, this must not
    "linear_call_dot_product": lambda: cases.linear_functions(wrong_transpose=True),
    # rules that are not the derivative, claimed to be
    "custom_jvp_true_rule": lambda: cases.custom_cases(rules=("wrong",), claims_true=True),
    "custom_vjp_true_rule": lambda: cases.custom_cases(rules=("wrong",), claims_true=True),
    "custom_gradient_true_rule": lambda: cases.custom_cases(rules=("wrong",), claims_true=True),
    # a custom_vjp whose fwd returns a primal output that is not the function's
    "custom_vjp_uses_rule": lambda: cases.custom_cases(bad_fwd=True),
}


def _control_passes(law, backend, case):
    """The law holds for ``case`` on the unbroken backend (AssertionError if not)."""
    try:
        law(backend, case)
    except (CaseFiltered, LawSkipped):
        pass  # outside the law's domain there, or not runnable on plain JAX


@pytest.mark.parametrize("law_name,breaks", BACKEND_BREAKS,
                         ids=[f"{n}-{'+'.join(b)}" for n, b in BACKEND_BREAKS])
def test_law_catches_broken_backend(law_name, breaks):
    law = get(law_name)
    bad = broken("jax", *breaks)
    found = find_counterexample(law, bad, STRATEGIES.get(law_name, lambda: None)())
    assert found is not None, f"law {law_name} did not catch the break {breaks}"
    case, error = found
    assert law_name in str(error)
    # the same case passes without the last break: the failure is the break's doing
    good = broken("jax", *breaks[:-1]) if len(breaks) > 1 else load_backend("jax")
    _control_passes(law, good, case)


@pytest.mark.parametrize("law_name", sorted(RULE_BREAKS))
def test_law_catches_broken_rule(law_name):
    law = get(law_name)
    found = find_counterexample(law, load_backend("jax"), RULE_BREAKS[law_name]())
    assert found is not None, f"law {law_name} did not catch a broken rule"
    assert law_name in str(found[1])


def test_linear_call_under_vmap_holds_with_a_correct_vmap():
    """Control for the negative test above: JAX cannot batch linear_call, so
    the law is checked positively against JAX with a looping vmap."""
    law = get("linear_call_under_vmap")
    assert find_counterexample(law, broken("jax", "loop_vmap"), max_examples=15) is None


def test_every_law_has_a_negative_test():
    covered = {n for n, _ in BACKEND_BREAKS} | set(RULE_BREAKS)
    from properties.laws import LAWS
    assert {law.name for law in LAWS} <= covered
