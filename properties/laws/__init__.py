"""The laws: plain functions ``law(backend, case) -> None``.

Each raises an AssertionError naming the law and the case when it does not
hold, ``CaseFiltered`` for a case outside its domain, and ``MissingName`` /
``LawSkipped`` when the backend cannot run it.  ``LAWS`` lists them with the
strategy their cases come from; suites, checkers and reports share it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import strategies as _real_strategies

from .. import cases
from . import (ad, batching, control, custom, differential, jit, linear, named, remat, sharding,
               vmap)
from ._common import CaseFiltered, discard


@dataclass(frozen=True)
class Law:
    name: str
    item: int          # the numbering of the laws
    fn: Callable
    cases: Callable    # () -> hypothesis strategy of cases
    devices: int = 1   # devices the law needs (8: run by properties.multidevice)

    @property
    def differential(self):
        """Whether the law compares with JAX (an oracle) rather than checking a law alone."""
        return self.fn.__module__.endswith(".differential")

    @property
    def doc(self):
        return (self.fn.__doc__ or "").strip().splitlines()[0]

    def __call__(self, backend, case):
        return self.fn(backend, case)


def _law(item, fn, strategy, devices=1):
    return Law(fn.__name__, item, fn, strategy, devices)


LAWS = [
    _law(1, vmap.vmap_grad_matches_loop, lambda: cases.vmaps(smooth=True)),
    _law(1, vmap.grad_of_batch_sum, lambda: cases.vmaps(smooth=True)),
    _law(2, vmap.vmap_matches_loop, lambda: cases.vmaps()),
    _law(2, vmap.nested_vmap_matches_loops, lambda: cases.nested_vmaps()),
    _law(2, vmap.vmap_pytrees_match_loops, lambda: cases.pytree_vmaps()),
    _law(2, vmap.vmap_jit_commute, lambda: cases.vmaps()),
    _law(3, ad.jvp_matches_finite_differences, lambda: cases.programs(smooth=True)),
    _law(3, ad.piecewise_jvp_matches_finite_differences, lambda: cases.programs(ops=cases.PIECEWISE_OPS)),
    _law(3, ad.linearize_matches_jvp, lambda: cases.programs()),
    _law(4, ad.vjp_adjoint_of_jvp, lambda: cases.programs()),
    _law(4, ad.vjp_of_vjp_matches_jvp, lambda: cases.programs()),
    _law(4, ad.jacfwd_matches_jacrev, lambda: cases.programs(dense=True)),
    _law(4, ad.hessian_symmetric, lambda: cases.programs(smooth=True)),
    _law(3, ad.grad_matches_jvp, lambda: cases.programs(dense=True)),
    _law(3, ad.grad_matches_vjp, lambda: cases.programs(dense=True)),
    _law(3, ad.grad_matches_finite_differences, lambda: cases.programs(smooth=True, dense=True)),
    _law(4, ad.vjp_matches_finite_differences, lambda: cases.programs(smooth=True, dense=True)),
    _law(4, ad.jacobian_matches_finite_differences,
         lambda: cases.programs(smooth=True, dense=True)),
    _law(4, ad.hessian_matches_jacfwd_jacrev, lambda: cases.programs(smooth=True, dense=True)),
    _law(4, ad.hessian_matches_finite_differences,
         lambda: cases.programs(smooth=True, dense=True, dtype="float64")),
    _law(5, linear.linear_transpose_dot_product, lambda: cases.programs(linear=True)),
    _law(5, linear.linear_transpose_twice, lambda: cases.programs(linear=True)),
    _law(6, linear.linear_call_involution,
         lambda: cases.linear_functions() | cases.linear_functions(wrong_transpose=True)),
    _law(6, linear.linear_call_dot_product, lambda: cases.linear_functions()),
    _law(6, linear.linear_call_under_vmap, lambda: cases.linear_functions()),
    _law(7, custom.custom_jvp_uses_rule, lambda: cases.custom_cases()),
    _law(7, custom.custom_jvp_true_rule, lambda: cases.custom_cases(rules=("true",))),
    _law(7, custom.custom_vjp_uses_rule, lambda: cases.custom_cases()),
    _law(7, custom.custom_vjp_true_rule, lambda: cases.custom_cases(rules=("true",))),
    _law(7, custom.custom_gradient_uses_rule, lambda: cases.custom_cases()),
    _law(7, custom.custom_gradient_true_rule, lambda: cases.custom_cases(rules=("true",))),
    _law(7, custom.custom_rules_under_vmap, lambda: cases.custom_cases()),
    _law(8, jit.jit_matches_eager, lambda: cases.programs()),
    _law(8, jit.jit_grad_matches_grad, lambda: cases.programs(smooth=True)),
    _law(8, jit.jit_vmap_matches_vmap, lambda: cases.vmaps()),
    _law(10, control.control_flow_matches_python, lambda: cases.control_flows()),
    _law(10, control.control_flow_jvp_matches_finite_differences,
         lambda: cases.control_flows(smooth=True)),
    _law(10, control.control_flow_vjp_matches_finite_differences,
         lambda: cases.control_flows(kinds=_real_strategies.REVERSE_KINDS, smooth=True)),
    _law(10, control.control_flow_vmap_matches_loop, lambda: cases.control_flows()),
    _law(11, named.named_collectives_match_reference, lambda: cases.named_axes()),
    _law(11, named.named_collectives_jvp_matches_reference,
         lambda: cases.named_axes(ops=cases.NAMED_SMOOTH_OPS)),
    _law(11, named.named_collectives_vjp_matches_reference,
         lambda: cases.named_axes(ops=cases.NAMED_SMOOTH_OPS)),
    _law(11, named.named_extrema_derivatives_match_reference,
         lambda: cases.named_axes(require=("pmax", "pmin"))),
    _law(11, named.named_collectives_member_derivatives_match_reference,
         lambda: cases.named_axes(ops=cases.NAMED_SMOOTH_OPS)),
    _law(12, remat.remat_matches_no_remat, lambda: cases.remats()),
    _law(13, batching.chunked_vmap_matches_vmap, lambda: cases.chunked_vmaps()),
    _law(13, batching.reduce_axes_matches_summed_grads, lambda: cases.reduce_axes_cases()),
    _law(13, batching.pile_map_matches_loop, lambda: cases.piles()),
    _law(13, batching.pile_grad_matches_loop, lambda: cases.piles()),
    _law(13, batching.prng_vmap_matches_loop, lambda: cases.prngs()),
    _law(7, custom.custom_wrapper_uses_rule, lambda: cases.custom_wrappers()),
    _law(7, custom.custom_wrapper_true_rule_matches_finite_differences,
         lambda: cases.custom_wrappers(rules=("true", "symbolic_zeros"))),
    _law(7, custom.custom_wrapper_symbolic_zeros,
         lambda: cases.custom_wrappers(rules=("symbolic_zeros",))),
    _law(7, custom.custom_vjp_forward_over_forward, lambda: cases.custom_cases(rules=("true",))),
    _law(14, sharding.sharded_jit_matches_unsharded,
         lambda: cases.shardings(kinds=("jit", "constraint")), devices=8),
    _law(14, sharding.spmd_axis_name_places_batch_axis, lambda: cases.shardings(kinds=("spmd",)),
         devices=8),
    _law(14, sharding.shard_map_matches_reference, lambda: cases.shard_maps(), devices=8),
    _law(9, differential.differential_value, lambda: cases.programs()),
    _law(9, differential.differential_jvp, lambda: cases.programs()),
    _law(9, differential.differential_vjp, lambda: cases.programs()),
    _law(9, differential.differential_grad, lambda: cases.programs(smooth=True)),
    _law(9, differential.differential_vmap, lambda: cases.vmaps()),
]

BY_NAME = {law.name: law for law in LAWS}


def get(name):
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown law {name!r}; known: {sorted(BY_NAME)}") from None


__all__ = ["Law", "LAWS", "BY_NAME", "get", "CaseFiltered", "discard"]
