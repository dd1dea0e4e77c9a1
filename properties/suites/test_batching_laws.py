"""Items 12 and 13: remat, chunked vmap, reduce_axes, ragged piles, PRNG keys under vmap.

JAX has no chunk_size, reduce_axes or piles: those laws are skipped there
(with the probe's reason); their positive controls on JAX are correct
emulations, in test_negative.py."""


def test_remat_matches_no_remat(check_law):
    check_law("remat_matches_no_remat")


def test_chunked_vmap_matches_vmap(check_law):
    check_law("chunked_vmap_matches_vmap")


def test_reduce_axes_matches_summed_grads(check_law):
    check_law("reduce_axes_matches_summed_grads")


def test_pile_map_matches_loop(check_law):
    check_law("pile_map_matches_loop")


def test_pile_grad_matches_loop(check_law):
    check_law("pile_grad_matches_loop")


def test_prng_vmap_matches_loop(check_law):
    check_law("prng_vmap_matches_loop")
