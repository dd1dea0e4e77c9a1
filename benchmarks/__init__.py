"""asv suite timing impl next to JAX.

Every benchmark class is parametrized by ``backend`` (``impl``, ``jax``) and
``device`` (``cpu``, ``gpu``) so impl/JAX ratios come from the same process,
machine and commit.  See docs/benchmarks.md for how to run it.
"""
