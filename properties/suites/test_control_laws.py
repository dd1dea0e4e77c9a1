"""The control laws (scan/fori_loop/while_loop/cond/switch/map are their Python meaning,
differentiate like finite differences and batch like a loop): one test per law of
properties/laws/control.py, generated from its declaration in properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("control"))
