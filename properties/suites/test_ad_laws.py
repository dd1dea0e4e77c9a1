"""Items 3 and 4: jvp vs finite differences, linearize, adjointness, jacobians, hessians."""


def test_jvp_matches_finite_differences(check_law):
    check_law("jvp_matches_finite_differences")


def test_linearize_matches_jvp(check_law):
    check_law("linearize_matches_jvp")


def test_vjp_adjoint_of_jvp(check_law):
    check_law("vjp_adjoint_of_jvp")


def test_jacfwd_matches_jacrev(check_law):
    check_law("jacfwd_matches_jacrev")


def test_hessian_symmetric(check_law):
    check_law("hessian_symmetric")


def test_grad_matches_jvp(check_law):
    check_law("grad_matches_jvp")


def test_grad_matches_vjp(check_law):
    check_law("grad_matches_vjp")


def test_grad_matches_finite_differences(check_law):
    check_law("grad_matches_finite_differences")


def test_vjp_matches_finite_differences(check_law):
    check_law("vjp_matches_finite_differences")


def test_jacobian_matches_finite_differences(check_law):
    check_law("jacobian_matches_finite_differences")


def test_hessian_matches_jacfwd_jacrev(check_law):
    check_law("hessian_matches_jacfwd_jacrev")


def test_hessian_matches_finite_differences(check_law):
    check_law("hessian_matches_finite_differences")
