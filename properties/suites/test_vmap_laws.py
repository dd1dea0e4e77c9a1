"""Items 1 and 2: vmap is a loop; vmap and grad commute; nested vmap; vmap and jit commute."""


def test_vmap_grad_matches_loop(check_law):
    check_law("vmap_grad_matches_loop")


def test_grad_of_batch_sum(check_law):
    check_law("grad_of_batch_sum")


def test_vmap_matches_loop(check_law):
    check_law("vmap_matches_loop")


def test_nested_vmap_matches_loops(check_law):
    check_law("nested_vmap_matches_loops")


def test_vmap_pytrees_match_loops(check_law):
    check_law("vmap_pytrees_match_loops")


def test_vmap_jit_commute(check_law):
    check_law("vmap_jit_commute")
