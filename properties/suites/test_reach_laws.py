"""The laws over transformation stacks (drawn parameters, dtype and shape corners): one test
per law of properties/laws/reach.py, generated from its declaration in properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("reach"))
