"""Configuration every test file shares.

float64 is on for the whole test run, switched here once, before any test module is
imported: the tests compare against float64 references (JAX in float64, finite
differences) and parametrise over float32 and float64.  A test that needs JAX's float32
defaults turns x64 off around its body with ``jax.enable_x64(False)``.  The law plugin
(properties.plugin, loaded by the root conftest) switches float64 on too; this switch
states the tests' own need instead of relying on that.

Tolerances live in one table, ``helpers.TOLERANCE``.
"""
import jax

jax.config.update("jax_enable_x64", True)
