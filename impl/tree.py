"""Pytrees with short names (`jax.tree`'s API): `impl.tree.map`, `impl.tree.leaves`, ...

The same registry and functions as `impl.tree_util` (see there why they are JAX's).
"""
from jax.tree import (  # noqa: F401,A004
    all, broadcast, flatten, flatten_with_path, leaves, leaves_with_path, map,
    map_with_path, reduce, reduce_associative, static, structure, transpose, unflatten,
)

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "static", "structure",
           "transpose", "unflatten"]
