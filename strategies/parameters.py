"""Every public parameter of JAX's transformations, and what draws it.

``SIGNATURES`` maps a transformation (a dotted name under ``jax``) to its parameters, each
either :class:`Drawn` (the strategy that draws it) or :class:`NotDrawn` (why nothing does).
``tests/test_strategies_parameters.py`` compares the table with ``inspect.signature`` of the
installed JAX: a parameter JAX has and the table lacks, or one the table names and JAX lacks,
fails the test, so a new JAX parameter is either drawn or given its reason.

``Drawn("stacks")`` parameters are drawn by :mod:`strategies.stacks`; its layers say
which parameter each drawn layer passes (``Layer.parameters``), and the law reports those
as hypothesis events ("reach: param jit.static_argnums").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Drawn:
    """The parameter is drawn by ``where`` (a strategies or properties name)."""
    where: str


@dataclass(frozen=True)
class NotDrawn:
    """No strategy draws the parameter, for ``reason``."""
    reason: str


STACKS = Drawn("stacks")
_FUN = STACKS      # the transformed function: every layer of a stack passes one
_SINGLE_DEVICE = NotDrawn("names a device or platform: the harness runs on one CPU platform")
_HOLOMORPHIC = NotDrawn(
    "needs complex outputs of complex inputs throughout; checked against JAX by "
    "tests/test_api_parameters.py (HOLOMORPHIC)")
_REDUCE_AXES = Drawn("properties.cases.reduce_axes_cases (law reduce_axes_matches_summed_grads)")

SIGNATURES = {
    "jit": {
        "fun": _FUN, "static_argnums": STACKS, "static_argnames": STACKS,
        "donate_argnums": STACKS, "donate_argnames": STACKS, "keep_unused": STACKS,
        "inline": STACKS,
        "in_shardings": Drawn("strategies.sharding (kind jit, 8 devices)"),
        "out_shardings": Drawn("strategies.sharding (kind jit, 8 devices)"),
        "device": _SINGLE_DEVICE, "backend": _SINGLE_DEVICE,
        "compiler_options": NotDrawn("XLA flags: they change how code is compiled, not what it "
                                     "computes, and their names are XLA's, not JAX's"),
    },
    "grad": {"fun": _FUN, "argnums": STACKS, "has_aux": STACKS, "allow_int": STACKS,
             "holomorphic": _HOLOMORPHIC, "reduce_axes": _REDUCE_AXES},
    "value_and_grad": {"fun": _FUN, "argnums": STACKS, "has_aux": STACKS, "allow_int": STACKS,
                       "holomorphic": _HOLOMORPHIC, "reduce_axes": _REDUCE_AXES},
    "vmap": {
        "fun": _FUN, "in_axes": STACKS, "out_axes": STACKS, "axis_name": STACKS,
        "axis_size": STACKS,
        "spmd_axis_name": Drawn("strategies.sharding (kind spmd, 8 devices)"),
        "sum_match": NotDrawn("undocumented (absent from vmap's docstring): an internal switch "
                              "of JAX's own batching callers"),
    },
    "jvp": {"fun": _FUN, "primals": STACKS, "tangents": STACKS, "has_aux": STACKS},
    "vjp": {"fun": _FUN, "primals": STACKS, "has_aux": STACKS, "reduce_axes": _REDUCE_AXES},
    "linearize": {"fun": _FUN, "primals": STACKS, "has_aux": STACKS},
    "checkpoint": {
        "fun": _FUN, "prevent_cse": STACKS, "policy": STACKS, "static_argnums": STACKS,
        "static_argnames": STACKS,
        "concrete": NotDrawn("deprecated: JAX raises for any value but the default"),
    },
    "remat": {
        "fun": Drawn("stacks (as jax.checkpoint: remat is documented as its alias)"),
        "prevent_cse": Drawn("stacks (as jax.checkpoint)"), "policy": Drawn("stacks (as jax.checkpoint)"),
        "static_argnums": Drawn("stacks (as jax.checkpoint)"),
        "concrete": NotDrawn("deprecated: JAX raises for any value but the default"),
    },
    "custom_jvp": {"fun": _FUN, "nondiff_argnums": STACKS, "nondiff_argnames": STACKS},
    "custom_jvp.defjvp": {"jvp": STACKS, "symbolic_zeros": STACKS},
    "custom_jvp.defjvps": {"jvps": NotDrawn(
        "per-argument tangent rules: the defjvp rule the stacks draw covers the same custom_jvp "
        "call; checked against JAX by tests/test_custom_derivatives.py")},
    "custom_vjp": {"fun": _FUN, "nondiff_argnums": STACKS, "nondiff_argnames": STACKS},
    "custom_vjp.defvjp": {"fwd": STACKS, "bwd": STACKS, "symbolic_zeros": STACKS,
                          "optimize_remat": STACKS},
    "jacfwd": {"fun": _FUN, "argnums": STACKS, "has_aux": STACKS, "holomorphic": _HOLOMORPHIC},
    "jacrev": {"fun": _FUN, "argnums": STACKS, "has_aux": STACKS, "holomorphic": _HOLOMORPHIC,
               "allow_int": STACKS},
    "hessian": {"fun": _FUN, "argnums": STACKS, "has_aux": STACKS, "holomorphic": _HOLOMORPHIC},
    "ensure_compile_time_eval": {},
    "lax.stop_gradient": {"x": STACKS},
    "shard_map": {
        "f": Drawn("strategies.sharding.shard_map_cases (8 devices)"),
        "out_specs": Drawn("strategies.sharding.shard_map_cases (8 devices)"),
        "in_specs": Drawn("strategies.sharding.shard_map_cases (8 devices)"),
        "mesh": Drawn("strategies.sharding.shard_map_cases (8 devices)"),
        "axis_names": NotDrawn("a subset of the mesh's axes left to the compiler: the drawn "
                               "shard_maps are manual over the whole mesh"),
        "check_vma": NotDrawn("a static check of the body's replication, not a change of value: "
                              "the drawn bodies pass it with its default"),
    },
}


def parameters(transformation: str) -> dict:
    """The table's entry for ``transformation`` (a key of :data:`SIGNATURES`)."""
    if transformation not in SIGNATURES:
        raise ValueError(f"unknown transformation {transformation!r}; known: {sorted(SIGNATURES)}")
    return SIGNATURES[transformation]


def drawn_by_stacks() -> list[str]:
    """``transformation.parameter`` of every parameter the stacks draw."""
    return [f"{t}.{p}" for t, params in SIGNATURES.items() for p, how in params.items()
            if how == STACKS]
