"""Item 8: jit does not change results."""


def test_jit_matches_eager(check_law):
    check_law("jit_matches_eager")


def test_jit_grad_matches_grad(check_law):
    check_law("jit_grad_matches_grad")


def test_jit_vmap_matches_vmap(check_law):
    check_law("jit_vmap_matches_vmap")
