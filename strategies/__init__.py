"""Hypothesis strategies for testing JAX-like transformation systems.

Everything here works with ``jax`` itself and with any module that has its
API (such as ``impl``). See docs/strategies.md for a tour with examples.

Layers, bottom up: ``types`` (abstract values), ``array_strategies``,
``pytree_strategies``, ``ops`` (the typed op kinds), ``vocabulary`` (one entry per
primitive: what draws it), ``source`` (the one builder and printer of cases),
``programs``, ``axes`` (vmap cases), ``linear`` (linear functions for linear_call)
and the case kinds around programs (``control``, ``named``, ``remat``,
``custom_rules``, ``prng``, ``ragged``, ``sharding``, ``manual``), ``parameters`` (the table of JAX's
transformation parameters), ``corners`` (dtype and shape corners) and ``stacks``
(transformations over transformations); ``coverage`` checks the
primitive table against a backend.
"""

from .array_strategies import arrays, batched_arrays, dtypes, elements, shapes
from .control import CONTROL_KINDS, REVERSE_KINDS, ControlFlowCase, control_flow_cases
from .named import COLLECTIVES, NamedAxisCase, named_axis_cases
from .remat import POLICIES, RematCase, remat_cases
from .ragged import PileCase, pile_cases
from .prng import PRNGCase, prng_cases
from .custom_rules import CUSTOM_WRAPPER_KINDS, RULES, STAGINGS, CustomWrapperCase, custom_wrapper_cases
from .sharding import MESHES, SHARDING_KINDS, ShardingCase, ShardMapCase, shard_map_cases, sharding_cases
from .manual import MANUAL_OPS, ManualAxisCase, manual_axis_cases
from .axes import VmapCase, nested_vmap_cases, vmap_cases
from .linear import LINEAR_KINDS, LinearFunction, linear_functions
from .corners import Corner, corners
from .parameters import SIGNATURES
from .stacks import Layer, StackCase, transformation_stacks
from .ops import CUSTOM_KINDS
from .vocabulary import LINEAR_OPS, OP_NAMES, PRIMITIVES, SMOOTH_OPS, VOCABULARY
from .programs import Program, program_args, program_cases, random_programs
from .pytree_strategies import CONTAINERS, Pair, Point, pytrees, pytrees_of, structures

__all__ = [
    # arrays
    "arrays", "batched_arrays", "dtypes", "elements", "shapes",
    # pytrees
    "CONTAINERS", "Pair", "Point", "pytrees", "pytrees_of", "structures",
    # programs
    "CUSTOM_KINDS", "LINEAR_OPS", "OP_NAMES", "SMOOTH_OPS", "VOCABULARY", "PRIMITIVES",
    "Program", "program_args", "program_cases", "random_programs",
    # vmap axis specs
    "VmapCase", "nested_vmap_cases", "vmap_cases",
    # linear functions for linear_call
    "LINEAR_KINDS", "LinearFunction", "linear_functions",
    # control flow
    "CONTROL_KINDS", "REVERSE_KINDS", "ControlFlowCase", "control_flow_cases",
    # named axes and collectives
    "COLLECTIVES", "NamedAxisCase", "named_axis_cases",
    # remat
    "POLICIES", "RematCase", "remat_cases",
    # ragged piles, PRNG programs
    "PileCase", "pile_cases", "PRNGCase", "prng_cases",
    # custom rules around drawn programs
    "CUSTOM_WRAPPER_KINDS", "RULES", "STAGINGS", "CustomWrapperCase", "custom_wrapper_cases",
    # transformation stacks with drawn parameters, dtype and shape corners
    "Corner", "Layer", "SIGNATURES", "StackCase", "corners", "transformation_stacks",
    # sharding over 8 devices
    "MESHES", "SHARDING_KINDS", "ShardingCase", "ShardMapCase", "shard_map_cases", "sharding_cases",
    # shard_map over one device: the manual axis's casts and collectives
    "MANUAL_OPS", "ManualAxisCase", "manual_axis_cases",
]
