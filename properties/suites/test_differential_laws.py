"""The differential laws (the backend agrees with JAX (skipped when the backend is JAX)): one test
per law of properties/laws/differential.py, generated from its declaration in
properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("differential"))

