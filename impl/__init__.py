"""impl: a JAX-style function-transformation system.

A JAX program runs on impl after `import impl as jax; import impl.numpy as jnp;
from impl import lax`.
"""
from jax import ShapeDtypeStruct, block_until_ready, device_put, devices  # noqa: F401
from jax import config  # noqa: F401

from impl import primitives as _primitives  # noqa: F401  (registers all rules)
from impl.core import UnexpectedTracerError, ConcretizationTypeError  # noqa: F401
from impl.api import (jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev,  # noqa: F401
                      jacobian, hessian, linear_transpose, vmap, jit, make_jaxpr, eval_shape)
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
from impl.sharding import reshard  # noqa: F401,E402
from impl.shard_map import shard_map  # noqa: F401,E402
from jax import make_mesh, set_mesh, NamedSharding, P, device_count  # noqa: F401,E402

Array = __import__("jax").Array

# Ragged batches (beyond JAX, from the batching seed): impl.pile([...]) and
# vmap(f, in_axes=pile_axis, out_axes=pile_axis).
from impl.interpreters.batching import pile, Pile, pile_axis  # noqa: F401,E402

# Running programs (impl/runtime.py, impl/debug.py): host callbacks, scope names,
# compile-time evaluation, types, caches.
from impl import debug, experimental  # noqa: F401,E402
from impl.runtime import (pure_callback, named_scope, named_call,  # noqa: F401,E402
                          ensure_compile_time_eval, typeof, clear_caches)
from impl.core import float0  # noqa: F401,E402

# JAX's own devices, arrays and runtime: impl's values are jax.Arrays on JAX's devices.
from jax import (Device, Shard, default_backend, device_get, local_devices,  # noqa: F401,E402
                 local_device_count, host_count, host_id, host_ids, process_count,
                 process_index, process_indices, live_arrays, make_array_from_callback,
                 make_array_from_process_local_data, make_array_from_single_device_arrays,
                 copy_to_host_async, effects_barrier, print_environment_info)
from jax import dtypes, typing, profiler, dlpack, distributed  # noqa: F401,E402

# JAX's configuration flags that impl honours (it computes with JAX's dtype rules, on
# JAX's devices, and compiles with jax.jit): each is tested in tests/test_toplevel.py.
from jax import (enable_x64, numpy_dtype_promotion, debug_nans, debug_infs,  # noqa: F401,E402
                 default_matmul_precision, default_device, log_compiles,
                 explain_cache_misses, transfer_guard, transfer_guard_host_to_device,
                 transfer_guard_device_to_host, transfer_guard_device_to_device,
                 disable_jit, no_tracing, no_execution, default_prng_impl,
                 threefry_partitionable, legacy_prng_key, enable_custom_prng, enable_checks)

# `from impl import *` brings what `from jax import *` brings of the names impl has: every
# public top-level name the two share (JAX's module defines no __all__; nothing impl-only).
__all__ = sorted(_n for _n in dir() if not _n.startswith("_") and _n in vars(__import__("jax")))
