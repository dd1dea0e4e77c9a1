"""The named laws (collectives over named vmap axes against plain-array references on the stacked
batch, and their derivatives): one test per law of properties/laws/named.py, generated from its
declaration in properties/laws/__init__.py."""
from properties.plugin import law_tests

globals().update(law_tests("named"))
