"""The linear laws (linear_transpose and linear_call): one test per law of
properties/laws/linear.py, generated from its declaration in properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("linear"))
