"""JAX's persistent compilation cache for law runs.

Most of a law run's CPU time is XLA compiling small programs: every eager op of
a drawn program is compiled once per shape and dtype, every jitted one once per
program.  The quick profile is derandomized, so a second run draws the same
cases and asks XLA for the same executables; with JAX's persistent cache they
are read from disk instead of compiled again.  The cache key is JAX's own (the
lowered program, the jax/jaxlib versions, the flags and the device), so an
entry is never reused for anything else, and a stale one is never read.

The folder is kept under :data:`MAX_SIZE_BYTES` by :func:`trim`, once per process when
the cache is enabled, not by JAX's own eviction (``jax_compilation_cache_max_size``):
that one lists and reads the whole folder on every write, and writes an access time on
every read under a file lock, which made a first run with the cache cost half as much CPU
again as a run without it (measured: about 90 s of system time in a quick run of thousands
of small entries).

Nothing here runs at import: the CLI (``python -m properties``, default folder
``~/.cache/impl-properties/jax-cache``) and the pytest plugin (``--jax-cache
DIR``) call :func:`enable`; plain ``pytest`` leaves JAX's settings alone.
"""
from __future__ import annotations

import os

#: the folder, in the environment: the plugin's default, and what the law run's
#: subprocesses (the 8-device laws) inherit
ENVIRONMENT_VARIABLE = "PROPERTIES_JAX_CACHE"
#: JAX caches only programs that took a second or more to compile by default;
#: the laws' programs take milliseconds each, and there are thousands of them
MIN_COMPILE_TIME_SECS = 0.0
MIN_ENTRY_SIZE_BYTES = 0
#: past this size :func:`trim` deletes the least recently used entries (a quick run adds
#: tens of MB)
MAX_SIZE_BYTES = 2 * 2**30
#: the endings of JAX's files in the folder: a compiled program, and the access time JAX's
#: own eviction kept (folders written with it on)
ENTRY_SUFFIX, ACCESS_SUFFIX = "-cache", "-atime"


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
    trim(path)
    # a compilation before this call (an import that ran a JAX op) has made JAX decide
    # the cache is off; reset makes it decide again with the folder set
    compilation_cache.reset_cache()
    return path


def trim(path, max_bytes=MAX_SIZE_BYTES):
    """Delete the least recently used compiled programs of the folder ``path`` until
    they take at most ``max_bytes``; returns how many were deleted.  Recently used is
    the later of a file's access and modification times (the access time as the file
    system keeps it: on Linux's default ``relatime``, on the first read after a write and
    then once a day)."""
    entries, total = [], 0
    with os.scandir(path) as it:
        for entry in it:
            if entry.name.endswith(ENTRY_SUFFIX) and entry.is_file():
                st = entry.stat()
                entries.append((max(st.st_atime, st.st_mtime), entry.path, st.st_size))
                total += st.st_size
    deleted = 0
    for _, file, size in sorted(entries):
        if total <= max_bytes:
            break
        for name in (file, file[:-len(ENTRY_SUFFIX)] + ACCESS_SUFFIX):
            try:
                os.remove(name)
            except FileNotFoundError:  # another process trimmed it first
                pass
        total -= size
        deleted += 1
    return deleted
