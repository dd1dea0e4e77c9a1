"""Hypothesis strategies for testing JAX-like transformation systems.

Everything here works with ``jax`` itself and with any module that has its
API (such as ``impl``). See docs/strategies.md for a tour with examples.
"""

from .array_strategies import arrays, batched_arrays, dtypes, elements, shapes
from .ops import CUSTOM_KINDS, OP_NAMES, LINEAR_OPS, SMOOTH_OPS
from .programs import Program, program_args, program_cases, random_programs

__all__ = [
    "arrays", "batched_arrays", "dtypes", "elements", "shapes",
    "CUSTOM_KINDS", "OP_NAMES", "LINEAR_OPS", "SMOOTH_OPS",
    "Program", "program_args", "program_cases", "random_programs",
]

from .pytree_strategies import CONTAINERS, Pair, Point, pytrees, pytrees_of, structures

__all__ += ["CONTAINERS", "Pair", "Point", "pytrees", "pytrees_of", "structures"]

from .axes import NestedVmapCase, VmapCase, nested_vmap_cases, vmap_cases

__all__ += ["NestedVmapCase", "VmapCase", "nested_vmap_cases", "vmap_cases"]

from .linear import LINEAR_KINDS, LinearFunction, linear_functions

__all__ += ["LINEAR_KINDS", "LinearFunction", "linear_functions"]
