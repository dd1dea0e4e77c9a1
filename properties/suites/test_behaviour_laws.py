"""The behaviour laws (types, weak types, calls of user code, exceptions, pytrees): one test per
law of properties/laws/behaviour.py, generated from its declaration in properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("behaviour"))
