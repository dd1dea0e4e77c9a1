"""The laws: plain functions ``law(backend, case) -> None``, each declared once in ``LAWS``.

Each raises an AssertionError saying what failed on which case when it does not
hold (``Law.__call__`` puts the law's name in front), ``CaseFiltered`` for a case
outside its domain, and ``MissingName`` / ``LawSkipped`` when the backend cannot run it.

``LAWS`` is the one place that says everything else about a law: where its
cases come from, what it needs from a backend, which of impl's rule tables it can show wrong
(mutation testing), the broken backends or rules its negative tests use, the
JAX bugs it runs into, and whether its test runs in CI or nightly.  The pytest
law tests (``properties/suites/test_<topic>_laws.py``), the negative tests, the
CI/nightly split, mutation's choice and order of laws, the CLI's ``--list`` and
the law table of docs/properties.md are all derived from it.  Whether a law compares
with JAX (the differential oracle) its function says: ``_common.differential`` makes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import strategies as _real_strategies

from .. import cases
from . import (ad, batching, behaviour, control, custom, differential, jit, linear, named, reach,
               remat, sharding, vmap)
from ._common import CaseFiltered, discard
from .jax_bugs import (AT_UPDATE_OF_RESHARDED_VALUE, CHECKPOINT_SAVEABLE_POLICY_COMPLEX,
                       CLAMP_SCALAR_BOUND_JVP, CLZ_OF_NEGATIVE_CONSTANT,
                       DYNAMIC_UPDATE_SLICE_OF_OWN_SLICE,
                       DYNAMIC_UPDATE_SLICE_WEAK_UNDER_VMAP, EAGER_UNREDUCED_PSUM,
                       FFT_LAYOUT_AFTER_SCATTER_AND_LINALG, RECOGNISED,
                       REDUCE_JVP_WITH_A_ZERO_TANGENT,
                       JACREV_ALLOW_INT_OF_BOOL, NAMED_AXIS_BUGS, PBROADCAST_ON_CPU,
                       SHARD_MAP_ALL_TO_ALL_TRANSPOSE, JaxBug, built_on_jax)

#: tiers: a CI test runs in the README's test command; a nightly one is marked ``slow``
CI, NIGHTLY = "ci", "nightly"
TIERS = (CI, NIGHTLY)
#: impl's rule tables a law can show wrong (mutation testing replaces one rule of one)
TABLES = ("jvp", "transpose", "batching")


class Breaks:
    """A negative test: the law fails on JAX with these breaks of ``properties/broken.py``
    applied in order, on a case that passes without the last one.  The breaks before the
    last are a correct emulation of a feature JAX lacks (a looping vmap for linear_call,
    ...): the law must hold on it (the positive control, nightly), so the last break is
    what the law catches.  ``cases``: a strategy of cases in place of the law's own."""

    def __init__(self, *labels: str, cases: Callable | None = None, tier: str = NIGHTLY):
        self.labels, self.cases, self.tier = labels, cases, tier

    @property
    def id(self):
        return "+".join(self.labels)

    @property
    def emulation(self):
        """The breaks that emulate a missing feature (the positive control), or ()."""
        return self.labels[:-1]

    def __repr__(self):
        return f"Breaks({', '.join(map(repr, self.labels))}, tier={self.tier!r})"


@dataclass(frozen=True)
class BrokenRule:
    """A negative test on plain JAX: ``cases`` draws cases whose own rule is wrong
    (a wrong transpose, a wrong derivative claimed true); the law must fail on one."""
    cases: Callable
    tier: str = CI


@dataclass(frozen=True)
class Law:
    fn: Callable
    cases: Callable                 # () -> hypothesis strategy of cases
    negatives: tuple = ()           # Breaks / BrokenRule: what each negative test breaks
    reaches: tuple = ()             # rule tables (TABLES) whose wrong rules the law can show
    references: tuple = ()          # ... of those, the ones it checks against a reference
    #                                 independent of the other rules (finite differences, a
    #                                 loop, NumPy): mutation runs these laws first, on more cases
    needs: tuple = ()               # feature probes (properties.features) or API names the
    #                                 backend must have beyond JAX's core transformations
    devices: int = 1                # devices the law needs (8: run by properties.multidevice)
    jax_bugs: tuple = ()            # JaxBug: bugs of JAX 0.10.2 its cases can draw
    tier: str = CI                  # CI or NIGHTLY: where the law's pytest test runs

    @property
    def name(self):
        return self.fn.__name__

    @property
    def differential(self):
        """Compares with JAX (the oracle) rather than checking a law: its function is made
        of a side computed on both backends (``_common.differential``)."""
        return hasattr(self.fn, "differential_parts")

    @property
    def topic(self):
        """The module of properties/laws defining it; its test is in suites/test_<topic>_laws.py."""
        return self.fn.__module__.rsplit(".", 1)[-1]

    @property
    def doc(self):
        return (self.fn.__doc__ or "").strip().splitlines()[0]

    def __call__(self, backend, case):
        """Check the law on ``case``.

        The law's code says what failed and on which case (``_common.fail``, ``assert_close``,
        ...); its name is added here, the one place that knows it, so a failure reads
        ``law NAME failed: ...`` and renaming a law is renaming its function.  The
        AssertionError is the law's own, re-raised with its traceback: hypothesis tells
        failures apart, shrinks and replays them by where they were raised."""
        if self.needs:
            from .. import features
            api_names = [n for n in self.needs if n not in features.PROBES]
            if api_names:
                backend.require(*api_names)
            features.require(backend, *[n for n in self.needs if n in features.PROBES])
        try:
            return self.fn(backend, case)
        except AssertionError as exc:
            exc.args = (f"law {self.name} failed: {exc}",)
            raise
        except CaseFiltered:
            raise
        except Exception as exc:
            for bug in RECOGNISED:
                if bug.recognises(exc) and built_on_jax(backend):
                    discard(f"known JAX bug: {bug.description}")
            raise


FWD, REV, BATCH = ("jvp",), ("jvp", "transpose"), ("jvp", "transpose", "batching")


def _wrong_rule_claimed_true():
    return cases.custom_cases(rules=("wrong",), claims_true=True)


def _under_grad():
    return cases.behaviour_cases(transformations=("grad", "value_and_grad"))


def _stacks_of(*kinds):
    """One-layer stacks of ``kinds``: where a broken transformation shows first."""
    return lambda: cases.stacks(kinds=kinds, max_depth=1)


#: JAX bugs the stacks would draw, were they not avoided
STACK_BUGS = (CHECKPOINT_SAVEABLE_POLICY_COMPLEX, JACREV_ALLOW_INT_OF_BOOL)


def _psum_over_groups():
    return cases.named_axes(ops=cases.NAMED_SMOOTH_OPS, require=("psum",)).filter(
        lambda c: min(c.sizes) >= 2)


LAWS = [
    # vmap is a loop; vmap and grad commute; nested vmap; vmap and jit commute
    Law(vmap.vmap_grad_matches_loop, lambda: cases.vmaps(), reaches=BATCH,
        negatives=(Breaks("vmap_slice0", tier=CI),)),
    Law(vmap.grad_of_batch_sum, lambda: cases.vmaps(smooth=True), reaches=BATCH,
        negatives=(Breaks("vmap_slice0"),)),
    Law(vmap.vmap_matches_loop, lambda: cases.vmaps(forward_only_ops=True), reaches=("batching",),
        references=("batching",), negatives=(Breaks("vmap_slice0"),)),
    Law(vmap.nested_vmap_matches_loops, lambda: cases.nested_vmaps(forward_only_ops=True),
        reaches=("batching",), references=("batching",), negatives=(Breaks("vmap_slice0"),)),
    Law(vmap.vmap_pytrees_match_loops, lambda: cases.pytree_vmaps(), reaches=("batching",),
        references=("batching",), negatives=(Breaks("vmap_slice0"),)),
    Law(vmap.vmap_jit_commute, lambda: cases.vmaps(forward_only_ops=True), reaches=("batching",),
        negatives=(Breaks("jit_perturb", tier=CI),), jax_bugs=(DYNAMIC_UPDATE_SLICE_OF_OWN_SLICE,)),
    # jvp, linearize, vjp, grad, jacobians and hessians
    Law(ad.jvp_matches_finite_differences, lambda: cases.programs(smooth=True, forward_only_ops=True),
        reaches=FWD, references=FWD, negatives=(Breaks("forward_drops_term", tier=CI),)),
    Law(ad.piecewise_jvp_matches_finite_differences,
        lambda: cases.programs(ops=cases.PIECEWISE_OPS, forward_only_ops=True), reaches=FWD,
        references=FWD, negatives=(Breaks("forward_drops_term"),), jax_bugs=(CLAMP_SCALAR_BOUND_JVP,)),
    Law(ad.linearize_matches_jvp, lambda: cases.programs(), reaches=REV,
        negatives=(Breaks("linearize_stale", tier=CI),)),
    Law(ad.vjp_adjoint_of_jvp, lambda: cases.programs(), reaches=REV, references=("transpose",),
        negatives=(Breaks("vjp_jv", tier=CI),)),
    Law(ad.vjp_of_vjp_matches_jvp, lambda: cases.programs(), reaches=REV,
        references=("transpose",), negatives=(Breaks("reverse_drops_term", tier=CI),)),
    Law(ad.jacfwd_matches_jacrev, lambda: cases.programs(dense=True), reaches=BATCH,
        negatives=(Breaks("reverse_drops_term"), Breaks("jacrev_transposed", tier=CI))),
    # the symmetry shows a hessian error off the diagonal only: outputs of two inputs or more
    Law(ad.hessian_symmetric, lambda: cases.programs(smooth=True), reaches=BATCH,
        negatives=(Breaks("reverse_drops_term", cases=lambda: cases.programs(smooth=True).filter(
            lambda c: len(c.program.input_dependencies) >= 2)),)),
    Law(ad.grad_matches_jvp, lambda: cases.programs(dense=True), reaches=REV,
        negatives=(Breaks("grad_scaled", tier=CI),)),
    Law(ad.grad_matches_vjp, lambda: cases.programs(dense=True), reaches=REV,
        negatives=(Breaks("grad_scaled"),)),
    Law(ad.grad_matches_finite_differences, lambda: cases.programs(smooth=True, dense=True),
        reaches=REV, references=FWD, negatives=(Breaks("grad_scaled"),)),
    Law(ad.vjp_matches_finite_differences, lambda: cases.programs(smooth=True, dense=True),
        reaches=REV, references=REV, negatives=(Breaks("reverse_drops_term"),)),
    Law(ad.jacobian_matches_finite_differences, lambda: cases.programs(smooth=True, dense=True),
        reaches=FWD, references=FWD, negatives=(Breaks("jacrev_transposed"),)),
    Law(ad.hessian_matches_jacfwd_jacrev, lambda: cases.programs(smooth=True, dense=True),
        reaches=BATCH, negatives=(Breaks("hessian_drops_term"),)),
    Law(ad.hessian_matches_finite_differences,
        lambda: cases.programs(smooth=True, dense=True, dtype="float64"), reaches=BATCH,
        references=FWD, negatives=(Breaks("hessian_drops_term"),)),
    Law(ad.piecewise_second_jvp_matches_finite_differences,
        lambda: cases.programs(ops=cases.SECOND_ORDER_PIECEWISE_OPS, dtype="float64",
                               forward_only_ops=True), reaches=FWD,
        references=FWD, negatives=(Breaks("jvp_scaled"),),
        jax_bugs=(REDUCE_JVP_WITH_A_ZERO_TANGENT,)),
    # linear_transpose and linear_call
    Law(linear.linear_transpose_dot_product, lambda: cases.programs(linear=True),
        reaches=("transpose",), references=("transpose",),
        negatives=(Breaks("transpose_drops_term", tier=CI),)),
    Law(linear.linear_transpose_twice, lambda: cases.programs(linear=True), reaches=("transpose",),
        negatives=(Breaks("transpose_drops_term"),)),
    Law(linear.linear_call_involution,
        lambda: cases.linear_functions() | cases.linear_functions(wrong_transpose=True),
        reaches=("transpose",), negatives=(Breaks("transpose_drops_term"),)),
    # a transpose that is the function itself: involution still holds, this must not
    Law(linear.linear_call_dot_product, lambda: cases.linear_functions(), reaches=("transpose",),
        references=("transpose",),
        negatives=(BrokenRule(lambda: cases.linear_functions(wrong_transpose=True)),)),
    # JAX cannot batch linear_call: checked on a looping vmap (loop_vmap)
    Law(linear.linear_call_under_vmap, lambda: cases.linear_functions(),
        reaches=("transpose", "batching"),
        negatives=(Breaks("loop_vmap", "transpose_drops_term", tier=CI),)),
    # custom_jvp, custom_vjp and custom_gradient rules are used, and true rules agree
    Law(custom.custom_jvp_uses_rule, lambda: cases.custom_cases(), reaches=FWD,
        negatives=(Breaks("ignore_custom_rules"),)),
    Law(custom.custom_jvp_true_rule, lambda: cases.custom_cases(rules=("true",)), reaches=FWD,
        negatives=(BrokenRule(_wrong_rule_claimed_true),)),
    # and a custom_vjp whose fwd returns a primal output that is not the function's
    Law(custom.custom_vjp_uses_rule, lambda: cases.custom_cases(), reaches=REV,
        negatives=(Breaks("ignore_custom_rules"),
                   BrokenRule(lambda: cases.custom_cases(bad_fwd=True)))),
    Law(custom.custom_vjp_true_rule, lambda: cases.custom_cases(rules=("true",)), reaches=REV,
        negatives=(BrokenRule(_wrong_rule_claimed_true),)),
    Law(custom.custom_gradient_uses_rule, lambda: cases.custom_cases(), reaches=REV,
        negatives=(Breaks("ignore_custom_rules"),)),
    Law(custom.custom_gradient_true_rule, lambda: cases.custom_cases(rules=("true",)),
        reaches=REV, negatives=(BrokenRule(_wrong_rule_claimed_true),)),
    Law(custom.custom_rules_under_vmap, lambda: cases.custom_cases(),
        reaches=("jvp", "batching"), negatives=(Breaks("vmap_slice0"),)),
    # jit does not change results
    Law(jit.jit_matches_eager, lambda: cases.programs(forward_only_ops=True), negatives=(Breaks("jit_perturb"),)),
    Law(jit.jit_grad_matches_grad, lambda: cases.programs(smooth=True), reaches=REV,
        negatives=(Breaks("jit_perturb"),), jax_bugs=(FFT_LAYOUT_AFTER_SCATTER_AND_LINALG,)),
    Law(jit.jit_vmap_matches_vmap, lambda: cases.vmaps(forward_only_ops=True), reaches=("batching",),
        negatives=(Breaks("jit_perturb"),)),
    # scan/fori_loop/while_loop/cond/switch/map are their Python meaning
    Law(control.control_flow_matches_python, lambda: cases.control_flows(), reaches=REV,
        negatives=(Breaks("control_flow_wrong"),)),
    Law(control.control_flow_jvp_matches_finite_differences,
        lambda: cases.control_flows(smooth=True), reaches=REV, references=FWD,
        negatives=(Breaks("control_flow_derivative_damped"),)),
    Law(control.control_flow_vjp_matches_finite_differences,
        lambda: cases.control_flows(kinds=_real_strategies.REVERSE_KINDS, smooth=True),
        reaches=REV, references=REV, negatives=(Breaks("control_flow_derivative_damped"),)),
    Law(control.control_flow_vmap_matches_loop, lambda: cases.control_flows(), reaches=BATCH,
        references=("batching",), negatives=(Breaks("vmap_slice0"),),
        jax_bugs=(CLZ_OF_NEGATIVE_CONSTANT,)),
    # collectives over named vmap axes against references on the stacked batch
    Law(named.named_collectives_match_reference, lambda: cases.named_axes(), reaches=BATCH,
        references=BATCH, negatives=(Breaks("collectives_wrong"),), jax_bugs=NAMED_AXIS_BUGS),
    Law(named.named_collectives_jvp_matches_reference,
        lambda: cases.named_axes(ops=cases.NAMED_SMOOTH_OPS), reaches=BATCH, references=BATCH,
        negatives=(Breaks("collectives_derivative_damped"),), jax_bugs=NAMED_AXIS_BUGS),
    Law(named.named_collectives_vjp_matches_reference,
        lambda: cases.named_axes(ops=cases.NAMED_SMOOTH_OPS), reaches=BATCH, references=BATCH,
        negatives=(Breaks("collectives_derivative_damped"), Breaks("collectives_transpose_wrong")),
        jax_bugs=NAMED_AXIS_BUGS),
    # JAX cannot differentiate pmax/pmin: checked on pmax/pmin by all_gather (extrema_by_gather),
    # which covers single names only
    Law(named.named_extrema_derivatives_match_reference,
        lambda: cases.named_axes(require=("pmax", "pmin")), reaches=BATCH, references=BATCH,
        negatives=(Breaks("extrema_by_gather", "collectives_derivative_damped",
                          cases=lambda: cases.named_axes(require=("pmax", "pmin"), tuples=False)),),
        jax_bugs=NAMED_AXIS_BUGS),
    # collectives_transpose_wrong breaks psum/ppermute with a custom_vjp, which refuses the
    # law's forward-mode part: draw psum over groups of 2 or more, where the reverse part fails first
    Law(named.named_collectives_member_derivatives_match_reference,
        lambda: cases.named_axes(ops=cases.NAMED_SMOOTH_OPS), reaches=BATCH, references=BATCH,
        negatives=(Breaks("collectives_derivative_damped", cases=_psum_over_groups),
                   Breaks("collectives_transpose_wrong", cases=_psum_over_groups)),
        jax_bugs=NAMED_AXIS_BUGS),
    # remat, chunked vmap, reduce_axes, ragged piles, PRNG keys under vmap
    Law(remat.remat_matches_no_remat, lambda: cases.remats(), reaches=BATCH, needs=("checkpoint",),
        negatives=(Breaks("checkpoint_damped"),)),
    Law(batching.chunked_vmap_matches_vmap, lambda: cases.chunked_vmaps(), reaches=("batching",),
        needs=("chunked_vmap",), negatives=(Breaks("chunked_vmap", "chunks_reordered"),)),
    Law(batching.reduce_axes_matches_summed_grads, lambda: cases.reduce_axes_cases(), reaches=REV,
        needs=("reduce_axes",), negatives=(Breaks("reduce_axes_by_psum", "reduce_axes_mean"),)),
    Law(batching.pile_map_matches_loop, lambda: cases.piles(), reaches=("batching",),
        needs=("piles",), negatives=(Breaks("piles_by_loop", "piles_shifted"),)),
    Law(batching.pile_grad_matches_loop, lambda: cases.piles(), reaches=BATCH, needs=("piles",),
        negatives=(Breaks("piles_by_loop", "piles_shifted"),)),
    Law(batching.prng_vmap_matches_loop, lambda: cases.prngs(), reaches=("batching",),
        references=("batching",), needs=("prng_under_vmap",), negatives=(Breaks("vmap_slice0"),)),
    # custom rules drawn by strategies.custom_rules
    Law(custom.custom_wrapper_uses_rule, lambda: cases.custom_wrappers(), reaches=FWD,
        negatives=(Breaks("ignore_custom_rules"),)),
    # a scaled rule (twice the derivative) claimed to be the derivative
    Law(custom.custom_wrapper_true_rule_matches_finite_differences,
        lambda: cases.custom_wrappers(rules=("true", "symbolic_zeros")), reaches=FWD,
        references=FWD, negatives=(BrokenRule(
            lambda: cases.custom_wrappers(rules=("scaled",), claims_true=True)),)),
    Law(custom.custom_wrapper_symbolic_zeros, lambda: cases.custom_wrappers(rules=("symbolic_zeros",)),
        reaches=FWD, negatives=(Breaks("materialized_symbolic_zeros"),)),
    # JAX has no forward mode of custom_vjp: checked on custom_vjp_by_transposed_bwd
    Law(custom.custom_vjp_forward_over_forward, lambda: cases.custom_cases(rules=("true",)),
        reaches=REV, needs=("custom_vjp_forward_mode",),
        negatives=(Breaks("custom_vjp_by_transposed_bwd", "custom_vjp_residuals_constant"),)),
    # sharded programs equal unsharded ones and carry their shardings (8 devices; their
    # negative tests run together in one subprocess, in CI)
    Law(sharding.sharded_jit_matches_unsharded, lambda: cases.shardings(kinds=("jit", "constraint")),
        reaches=REV, devices=sharding.DEVICES, negatives=(Breaks("jit_drops_shardings", tier=CI),)),
    Law(sharding.explicit_sharding_matches_jax, lambda: cases.shardings(kinds=("explicit",)),
        devices=sharding.DEVICES, negatives=(Breaks("reshard_ignored", tier=CI),
                                             Breaks("out_sharding_ignored", tier=CI)),
        jax_bugs=(AT_UPDATE_OF_RESHARDED_VALUE,)),
    Law(sharding.spmd_axis_name_places_batch_axis, lambda: cases.shardings(kinds=("spmd",)),
        reaches=("batching",), devices=sharding.DEVICES,
        negatives=(Breaks("spmd_axis_name_ignored", tier=CI),)),
    Law(sharding.shard_map_matches_reference, lambda: cases.shard_maps(), reaches=BATCH,
        references=BATCH, needs=("shard_map",), devices=sharding.DEVICES,
        negatives=(Breaks("collectives_wrong", tier=CI),), jax_bugs=(SHARD_MAP_ALL_TO_ALL_TRANSPOSE,)),
    # the manual axis's casts and collectives inside shard_map, on a mesh of one device
    Law(sharding.one_device_shard_map_matches_reference, lambda: cases.manual_axes(), reaches=BATCH,
        references=BATCH, needs=("shard_map",), negatives=(Breaks("forward_drops_term"),),
        jax_bugs=(PBROADCAST_ON_CPU, EAGER_UNREDUCED_PSUM)),
    # transformation stacks of depth up to 4, drawn parameters, dtype and shape corners: a
    # crash is a failure (jit_refuses_static_argnames), as is a wrong value.  Deep stacks
    # take seconds each (nightly); one-layer stacks keep their negative tests in CI
    Law(reach.stack_matches_meaning, lambda: cases.stacks(), reaches=("batching",),
        references=("batching",),
        negatives=(Breaks("jit_refuses_static_argnames", cases=_stacks_of("jit"), tier=CI),
                   Breaks("jit_perturb", cases=_stacks_of("jit")),
                   Breaks("vmap_slice0", cases=_stacks_of("vmap")),
                   Breaks("checkpoint_damped", cases=lambda: cases.stacks(
                       kinds=("checkpoint", "grad"), max_depth=2))),
        jax_bugs=STACK_BUGS, tier=NIGHTLY),
    # the backend agrees with JAX (skipped when the backend is JAX)
    Law(reach.stack_matches_reference, lambda: cases.stacks(), reaches=BATCH,
        negatives=(Breaks("jit_refuses_static_argnames", cases=_stacks_of("jit")),
                   Breaks("jit_perturb", cases=_stacks_of("jit"), tier=CI)),
        jax_bugs=STACK_BUGS, tier=NIGHTLY),
    Law(differential.differential_value, lambda: cases.programs(),
        negatives=(Breaks("numpy_perturbed"),)),
    Law(differential.differential_jvp, lambda: cases.programs(), reaches=FWD,
        negatives=(Breaks("numpy_perturbed"),)),
    Law(differential.differential_vjp, lambda: cases.programs(), reaches=("transpose",),
        negatives=(Breaks("vjp_jv"),)),
    Law(differential.differential_grad, lambda: cases.programs(smooth=True), reaches=REV,
        negatives=(Breaks("reverse_drops_term"),)),
    Law(differential.differential_vmap, lambda: cases.vmaps(), reaches=("batching",),
        negatives=(Breaks("vmap_slice0"),)),
    # behaviour besides the numbers: types, weak types, calls of user code, exceptions, pytrees
    # (nightly: several transformations of each drawn program, on two backends for the
    # differential ones, or departures of impl the law shows; their negative tests, on JAX, are
    # cheap and run in CI)
    Law(behaviour.differential_result_types, lambda: cases.behaviour_cases(),
        negatives=(Breaks("grad_strong_types", cases=_under_grad, tier=CI),
                   Breaks("jit_strong_types")),
        tier=NIGHTLY),
    Law(behaviour.differential_call_counts, lambda: cases.behaviour_cases(),
        negatives=(Breaks("extra_calls", cases=_under_grad, tier=CI), Breaks("jit_retraces")),
        tier=NIGHTLY),
    Law(behaviour.differential_misuse_raises_alike, lambda: cases.misuses(),
        negatives=(Breaks("exceptions_changed", tier=CI),), tier=NIGHTLY),
    Law(behaviour.differential_transformation_pytrees,
        lambda: cases.behaviour_cases(transformations=("eager",)),
        negatives=(Breaks("vjp_not_pytree", tier=CI),), tier=NIGHTLY),
    Law(behaviour.jit_traces_once_per_signature,
        lambda: cases.behaviour_cases(transformations=("jit",), cheap=True),
        negatives=(Breaks("jit_retraces", tier=CI),)),
    Law(behaviour.custom_rules_never_run_primal_when_differentiated,
        lambda: cases.custom_differentiations(),
        negatives=(Breaks("custom_jvp_calls_primal", tier=CI), Breaks("custom_vjp_calls_primal")),
        tier=NIGHTLY),
    Law(behaviour.result_types_agree_across_transformations,
        lambda: cases.behaviour_cases(transformations=("eager",)),
        negatives=(Breaks("jit_strong_types", tier=CI),), tier=NIGHTLY,
        jax_bugs=(DYNAMIC_UPDATE_SLICE_WEAK_UNDER_VMAP,)),
    Law(behaviour.valid_programs_run_under_equivalent_stacks,
        lambda: cases.behaviour_cases(transformations=("eager",), cheap=True),
        negatives=(Breaks("jit_rejects_python_scalars", tier=CI),), tier=NIGHTLY),
]


def get(name):
    for law in LAWS:
        if law.name == name:
            return law
    raise ValueError(f"unknown law {name!r}; known: {sorted(law.name for law in LAWS)}")


def topics():
    """The topics of the laws, in declaration order: one law-test file each."""
    return list(dict.fromkeys(law.topic for law in LAWS))


__all__ = ["BrokenRule", "Breaks", "CI", "CaseFiltered", "JaxBug", "LAWS", "Law", "NIGHTLY", "TABLES",
           "TIERS", "discard", "get", "topics"]
