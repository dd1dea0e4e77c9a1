"""The custom laws (custom_jvp, custom_vjp and custom_gradient rules are used, and true rules
agree): one test per law of properties/laws/custom.py, generated from its declaration in
properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("custom"))
