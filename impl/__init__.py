"""impl: a JAX-style function-transformation system.

A JAX program runs on impl after `import impl as jax; import impl.numpy as jnp;
from impl import lax`.
"""
from jax import ShapeDtypeStruct, block_until_ready, device_put, devices  # noqa: F401
from jax import config  # noqa: F401

from impl import primitives as _primitives  # noqa: F401  (registers all rules)
from impl.core import UnexpectedTracerError, ConcretizationTypeError  # noqa: F401
from impl.api import (jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev,  # noqa: F401
                      hessian, linear_transpose, vmap, jit, make_jaxpr, eval_shape)
from impl import numpy, lax  # noqa: F401,E402
from impl import tree_util, tree  # noqa: F401,E402
from impl import random  # noqa: F401,E402
from impl.custom_derivatives import (custom_jvp, custom_vjp, custom_gradient,  # noqa: F401,E402
                                      closure_convert, linear_call)
from impl.custom_batching import custom_vmap  # noqa: F401,E402
from impl import custom_derivatives, custom_batching  # noqa: F401,E402
from impl import nn, scipy  # noqa: F401,E402
from impl import ad_checkpoint  # noqa: F401,E402
from impl.ad_checkpoint import checkpoint, remat, checkpoint_policies  # noqa: F401,E402
from impl import sharding  # noqa: F401,E402
from impl.shard_map import shard_map  # noqa: F401,E402
from jax import make_mesh, set_mesh, NamedSharding, P, device_count  # noqa: F401,E402

Array = __import__("jax").Array

__all__ = ["jvp", "linearize", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian",
           "linear_transpose", "vmap", "jit", "make_jaxpr", "eval_shape", "numpy", "lax",
           "tree_util", "Array", "sharding", "shard_map", "make_mesh", "set_mesh"]

# Ragged batches (beyond JAX, from the batching seed): impl.pile([...]) and
# vmap(f, in_axes=pile_axis, out_axes=pile_axis).
from impl.interpreters.batching import pile, Pile, pile_axis  # noqa: F401,E402
