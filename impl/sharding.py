"""Sharding objects, as in jax.sharding: impl takes JAX's own (a Mesh of devices, a
NamedSharding over it, a PartitionSpec naming mesh axes per array axis) and hands them
to XLA's SPMD partitioner when it lowers through jax.jit.

On a mesh with Explicit axes a sharding is part of an array's type (`impl.typeof(x)`);
`reshard` changes it; `auto_axes` / `explicit_axes` run a function with mesh axes
of another type.
"""
from jax.sharding import (  # noqa: F401
    AbstractMesh, AxisType, Mesh, NamedSharding, PartitionSpec, Sharding,
    SingleDeviceSharding, get_abstract_mesh, get_mesh, set_mesh, use_abstract_mesh,
)

from impl.primitives.sharding import auto_axes, explicit_axes, reshard  # noqa: F401
