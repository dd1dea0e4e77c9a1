"""Item 11: collectives over named vmap axes against plain-array references on
the stacked batch, and their derivatives."""


def test_named_collectives_match_reference(check_law):
    check_law("named_collectives_match_reference")


def test_named_collectives_jvp_matches_reference(check_law):
    check_law("named_collectives_jvp_matches_reference")


def test_named_collectives_vjp_matches_reference(check_law):
    check_law("named_collectives_vjp_matches_reference")


def test_named_extrema_derivatives_match_reference(check_law):
    check_law("named_extrema_derivatives_match_reference")
