"""The ad laws (jvp vs finite differences, linearize, adjointness, jacobians, hessians): one test
per law of properties/laws/ad.py, generated from its declaration in
properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("ad"))
