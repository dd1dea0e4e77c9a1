"""The differential laws (the backend agrees with JAX (skipped when the backend is JAX)): one test
per law of properties/laws/differential.py, generated from its declaration in
properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("differential"))


def test_the_differential_laws_compare_with_the_runs_reference():
    """``--reference`` names what the differential laws compare with: JAX holds against
    JAX, fails against a JAX whose numpy is off by 1%, and is skipped against itself."""
    import pytest

    from properties.backends import LawSkipped, load_backend
    from properties.broken import Wrapped, broken, find_counterexample
    from properties.laws import get

    law = get("differential_value")
    against_jax = Wrapped(load_backend("jax"), "unchanged", {})
    assert find_counterexample(law, against_jax, max_examples=10) is None
    against_wrong = Wrapped(load_backend("jax"), "unchanged", {})
    against_wrong.reference = broken("jax", "numpy_perturbed")
    found = find_counterexample(law, against_wrong, max_examples=10)
    assert found is not None and "vs jax+numpy_perturbed value" in str(found[1])
    itself = Wrapped(load_backend("jax"), "unchanged", {})
    itself.reference = itself
    with pytest.raises(LawSkipped):
        law(itself, find_counterexample(law, against_wrong, max_examples=10)[0])
