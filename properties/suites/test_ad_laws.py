"""Items 3 and 4: jvp vs finite differences, linearize, adjointness, jacobians, hessians.

``@law_test``: properties/plugin.py.
"""
from properties.plugin import law_test


@law_test
def test_jvp_matches_finite_differences(law_run, case):
    law_run.check(case)


@law_test
def test_piecewise_jvp_matches_finite_differences(law_run, case):
    law_run.check(case)


@law_test
def test_linearize_matches_jvp(law_run, case):
    law_run.check(case)


@law_test
def test_vjp_adjoint_of_jvp(law_run, case):
    law_run.check(case)


@law_test
def test_jacfwd_matches_jacrev(law_run, case):
    law_run.check(case)


@law_test
def test_hessian_symmetric(law_run, case):
    law_run.check(case)


@law_test
def test_hessian_symmetric(law_run, case):
    law_run.check(case)


@law_test
def test_grad_matches_jvp(law_run, case):
    law_run.check(case)


@law_test
def test_grad_matches_vjp(law_run, case):
    law_run.check(case)


@law_test
def test_grad_matches_finite_differences(law_run, case):
    law_run.check(case)


@law_test
def test_vjp_matches_finite_differences(law_run, case):
    law_run.check(case)


@law_test
def test_jacobian_matches_finite_differences(law_run, case):
    law_run.check(case)


@law_test
def test_hessian_matches_jacfwd_jacrev(law_run, case):
    law_run.check(case)


@law_test
def test_hessian_matches_finite_differences(law_run, case):
    law_run.check(case)


@law_test
def test_vjp_of_vjp_matches_jvp(law_run, case):
    law_run.check(case)
