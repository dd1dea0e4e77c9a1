"""The batching laws (chunked vmap, reduce_axes, ragged piles, PRNG keys under vmap (laws JAX
cannot run are skipped there; their positive controls are in test_negative.py)): one test per
law of properties/laws/batching.py, generated from its declaration in
properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("batching"))
