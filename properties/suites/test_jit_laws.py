"""The jit laws (jit does not change results): one test per law of properties/laws/jit.py,
generated from its declaration in properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("jit"))
