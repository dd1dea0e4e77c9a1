"""The remat laws (checkpoint does not change values or derivatives): one test per law of
properties/laws/remat.py, generated from its declaration in properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("remat"))
