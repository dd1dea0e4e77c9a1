"""Items 5 and 6: linear_transpose and linear_call."""


def test_linear_transpose_dot_product(check_law):
    check_law("linear_transpose_dot_product")


def test_linear_transpose_twice(check_law):
    check_law("linear_transpose_twice")


def test_linear_call_involution(check_law):
    check_law("linear_call_involution")


def test_linear_call_dot_product(check_law):
    check_law("linear_call_dot_product")


def test_linear_call_under_vmap(check_law):
    check_law("linear_call_under_vmap")
