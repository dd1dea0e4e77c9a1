"""Items 12 and 13: remat, chunked vmap, reduce_axes, ragged piles, PRNG keys under vmap.

JAX has no chunk_size, reduce_axes or piles: those laws are skipped there
(with the probe's reason); their positive controls on JAX are correct
emulations, in test_negative.py."""
from properties.plugin import law_test


@law_test
def test_remat_matches_no_remat(law_run, case):
    law_run.check(case)


@law_test
def test_chunked_vmap_matches_vmap(law_run, case):
    law_run.check(case)


@law_test
def test_reduce_axes_matches_summed_grads(law_run, case):
    law_run.check(case)


@law_test
def test_pile_map_matches_loop(law_run, case):
    law_run.check(case)


@law_test
def test_pile_grad_matches_loop(law_run, case):
    law_run.check(case)


@law_test
def test_prng_vmap_matches_loop(law_run, case):
    law_run.check(case)
