"""Item 9: the backend agrees with JAX (skipped when the backend is JAX)."""


def test_differential_value(check_law):
    check_law("differential_value")


def test_differential_jvp(check_law):
    check_law("differential_jvp")


def test_differential_vjp(check_law):
    check_law("differential_vjp")


def test_differential_grad(check_law):
    check_law("differential_grad")


def test_differential_vmap(check_law):
    check_law("differential_vmap")
