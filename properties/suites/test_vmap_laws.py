"""The vmap laws (vmap is a loop; vmap and grad commute; nested vmaps; vmap and jit commute): one
test per law of properties/laws/vmap.py, generated from its declaration in
properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("vmap"))
