"""JAX's persistent compilation cache for law runs.

Most of a law run's CPU time is XLA compiling small programs: every eager op of
a drawn program is compiled once per shape and dtype, every jitted one once per
program.  The quick profile is derandomized, so a second run draws the same
cases and asks XLA for the same executables; with JAX's persistent cache they
are read from disk instead of compiled again.  The cache key is JAX's own (the
lowered program, the jax/jaxlib versions, the flags and the device), so an
entry is never reused for anything else, and a stale one is never read.

Nothing here runs at import: the CLI (``python -m properties``, default folder
``~/.cache/impl-properties/jax-cache``) and the pytest plugin (``--jax-cache
DIR``) call :func:`enable`; plain ``pytest`` leaves JAX's settings alone.
"""
from __future__ import annotations

import os

#: JAX caches only programs that took a second or more to compile by default;
#: the laws' programs take milliseconds each, and there are thousands of them
MIN_COMPILE_TIME_SECS = 0.0
MIN_ENTRY_SIZE_BYTES = 0
#: past this size JAX evicts the least recently used entries (a quick run adds tens of MB)
MAX_SIZE_BYTES = 2 * 2**30


def enable(path):
    """Make JAX read and write compiled programs in the folder ``path`` (created if
    missing) for the rest of the process.  Call it before the first compilation;
    JAX decides once per process whether the cache is in use."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    path = os.path.abspath(os.path.expanduser(path))
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_TIME_SECS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", MIN_ENTRY_SIZE_BYTES)
    jax.config.update("jax_compilation_cache_max_size", MAX_SIZE_BYTES)
    # a compilation before this call (an import that ran a JAX op) has made JAX decide
    # the cache is off; reset makes it decide again with the folder set
    compilation_cache.reset_cache()
    return path
