"""Every law catches a deliberately broken backend or rule.

Each test runs a law against a wrapper around JAX with one transformation
broken (properties/broken.py), or on cases with a broken rule, and requires
an AssertionError on at least one drawn case.  For backend breaks the same
case must pass on plain JAX, so the failure is the break's doing.  These run
against ``jax`` whatever --backend says, so they do not depend on impl.
"""
import pytest

from properties import cases
from properties.backends import LawSkipped, load_backend
from properties.broken import broken, find_counterexample
from properties.laws import CaseFiltered, get

# (law, breaks applied to jax, strategy of broken-rule cases or None)
BACKEND_BREAKS = [
    ("vmap_grad_matches_loop", ("vmap_slice0",)),
    ("grad_of_batch_sum", ("vmap_slice0",)),
    ("vmap_matches_loop", ("vmap_slice0",)),
    ("nested_vmap_matches_loops", ("vmap_slice0",)),
    ("vmap_pytrees_match_loops", ("vmap_slice0",)),
    ("vmap_jit_commute", ("jit_perturb",)),
    ("jvp_matches_finite_differences", ("forward_drops_term",)),
    ("piecewise_jvp_matches_finite_differences", ("forward_drops_term",)),
    ("linearize_matches_jvp", ("linearize_stale",)),
    ("vjp_adjoint_of_jvp", ("vjp_jv",)),
    ("vjp_of_vjp_matches_jvp", ("reverse_drops_term",)),
    ("jacfwd_matches_jacrev", ("reverse_drops_term",)),
    ("jacfwd_matches_jacrev", ("jacrev_transposed",)),
    ("grad_matches_jvp", ("grad_scaled",)),
    ("grad_matches_vjp", ("grad_scaled",)),
    ("grad_matches_finite_differences", ("grad_scaled",)),
    ("vjp_matches_finite_differences", ("reverse_drops_term",)),
    ("jacobian_matches_finite_differences", ("jacrev_transposed",)),
    ("hessian_matches_jacfwd_jacrev", ("hessian_drops_term",)),
    ("hessian_matches_finite_differences", ("hessian_drops_term",)),
    ("hessian_symmetric", ("reverse_drops_term",)),
    ("linear_transpose_dot_product", ("transpose_drops_term",)),
    ("linear_transpose_twice", ("transpose_drops_term",)),
    ("linear_call_involution", ("transpose_drops_term",)),
    ("linear_call_under_vmap", ("loop_vmap", "transpose_drops_term")),
    ("custom_jvp_uses_rule", ("ignore_custom_rules",)),
    ("custom_vjp_uses_rule", ("ignore_custom_rules",)),
    ("custom_gradient_uses_rule", ("ignore_custom_rules",)),
    ("custom_rules_under_vmap", ("vmap_slice0",)),
    ("jit_matches_eager", ("jit_perturb",)),
    ("jit_grad_matches_grad", ("jit_perturb",)),
    ("jit_vmap_matches_vmap", ("jit_perturb",)),
    ("control_flow_matches_python", ("control_flow_wrong",)),
    ("control_flow_jvp_matches_finite_differences", ("control_flow_derivative_damped",)),
    ("control_flow_vjp_matches_finite_differences", ("control_flow_derivative_damped",)),
    ("control_flow_vmap_matches_loop", ("vmap_slice0",)),
    ("named_collectives_match_reference", ("collectives_wrong",)),
    ("named_collectives_jvp_matches_reference", ("collectives_derivative_damped",)),
    ("named_collectives_vjp_matches_reference", ("collectives_derivative_damped",)),
    ("named_collectives_vjp_matches_reference", ("collectives_transpose_wrong",)),
    ("named_extrema_derivatives_match_reference",
     ("extrema_by_gather", "collectives_derivative_damped")),
    ("named_collectives_member_derivatives_match_reference", ("collectives_derivative_damped",)),
    ("named_collectives_member_derivatives_match_reference", ("collectives_transpose_wrong",)),
    ("remat_matches_no_remat", ("checkpoint_damped",)),
    ("chunked_vmap_matches_vmap", ("chunked_vmap", "chunks_reordered")),
    ("reduce_axes_matches_summed_grads", ("reduce_axes_by_psum", "reduce_axes_mean")),
    ("pile_map_matches_loop", ("piles_by_loop", "piles_shifted")),
    ("pile_grad_matches_loop", ("piles_by_loop", "piles_shifted")),
    ("prng_vmap_matches_loop", ("vmap_slice0",)),
    ("custom_wrapper_uses_rule", ("ignore_custom_rules",)),
    ("custom_wrapper_symbolic_zeros", ("materialized_symbolic_zeros",)),
    ("custom_vjp_forward_over_forward", ("custom_vjp_by_transposed_bwd", "custom_vjp_residuals_constant")),
    ("differential_value", ("numpy_perturbed",)),
    ("differential_jvp", ("numpy_perturbed",)),
    ("differential_vjp", ("vjp_jv",)),
    ("differential_grad", ("reverse_drops_term",)),
    ("differential_vmap", ("vmap_slice0",)),
]

# A hessian error is only visible to the symmetry law off the diagonal: use
# programs whose output depends on two inputs (cross terms).
STRATEGIES = {
    "hessian_symmetric": lambda: cases.programs(smooth=True).filter(
        lambda c: len(c.program.input_dependencies) >= 2),
    # JAX's vmap has no pmax/pmin derivative: the emulation covers single names only
    "named_extrema_derivatives_match_reference":
        lambda: cases.named_axes(require=("pmax", "pmin"), tuples=False),
    # collectives_transpose_wrong breaks psum/ppermute with a custom_vjp, which refuses the
    # law's forward-mode part: draw psum over groups of 2 or more, where the reverse part fails first
    "named_collectives_member_derivatives_match_reference":
        lambda: cases.named_axes(ops=cases.NAMED_SMOOTH_OPS, require=("psum",)).filter(
            lambda c: min(c.sizes) >= 2),
}

# Laws JAX cannot run (it lacks the feature) hold on JAX with a correct
# emulation of the feature: their negative tests break that emulation.
POSITIVE_CONTROLS = [
    ("linear_call_under_vmap", ("loop_vmap",), None),
    ("chunked_vmap_matches_vmap", ("chunked_vmap",), None),
    ("reduce_axes_matches_summed_grads", ("reduce_axes_by_psum",), None),
    ("pile_map_matches_loop", ("piles_by_loop",), None),
    ("pile_grad_matches_loop", ("piles_by_loop",), None),
    ("named_extrema_derivatives_match_reference", ("extrema_by_gather",),
     STRATEGIES["named_extrema_derivatives_match_reference"]),
    ("custom_vjp_forward_over_forward", ("custom_vjp_by_transposed_bwd",), None),
]

RULE_BREAKS = {
    # a transpose that is the function itself: involution still holds, this must not
    "linear_call_dot_product": lambda: cases.linear_functions(wrong_transpose=True),
    # rules that are not the derivative, claimed to be
    "custom_jvp_true_rule": lambda: cases.custom_cases(rules=("wrong",), claims_true=True),
    "custom_vjp_true_rule": lambda: cases.custom_cases(rules=("wrong",), claims_true=True),
    "custom_gradient_true_rule": lambda: cases.custom_cases(rules=("wrong",), claims_true=True),
    # a scaled rule (twice the derivative) claimed to be the derivative
    "custom_wrapper_true_rule_matches_finite_differences":
        lambda: cases.custom_wrappers(rules=("scaled",), claims_true=True),
    # a custom_vjp whose fwd returns a primal output that is not the function's
    "custom_vjp_uses_rule": lambda: cases.custom_cases(bad_fwd=True),
}


# Laws over 8 devices: checked in a subprocess with 8 host devices (properties.multidevice).
DEVICE_BREAKS = [
    ("sharded_jit_matches_unsharded", ("jit_drops_shardings",)),
    ("spmd_axis_name_places_batch_axis", ("spmd_axis_name_ignored",)),
    ("shard_map_matches_reference", ("collectives_wrong",)),
]


def _control_passes(law, backend, case):
    """The law holds for ``case`` on the unbroken backend (AssertionError if not)."""
    try:
        law(backend, case)
    except (CaseFiltered, LawSkipped):
        pass  # outside the law's domain there, or not runnable on plain JAX


@pytest.mark.parametrize("law_name,breaks", BACKEND_BREAKS,
                         ids=[f"{n}-{'+'.join(b)}" for n, b in BACKEND_BREAKS])
def test_law_catches_broken_backend(law_name, breaks):
    law = get(law_name)
    bad = broken("jax", *breaks)
    found = find_counterexample(law, bad, STRATEGIES.get(law_name, lambda: None)())
    assert found is not None, f"law {law_name} did not catch the break {breaks}"
    case, error = found
    assert law_name in str(error)
    # the same case passes without the last break: the failure is the break's doing
    good = broken("jax", *breaks[:-1]) if len(breaks) > 1 else load_backend("jax")
    _control_passes(law, good, case)


@pytest.mark.parametrize("law_name", sorted(RULE_BREAKS))
def test_law_catches_broken_rule(law_name):
    law = get(law_name)
    found = find_counterexample(law, load_backend("jax"), RULE_BREAKS[law_name]())
    assert found is not None, f"law {law_name} did not catch a broken rule"
    assert law_name in str(found[1])


@pytest.mark.parametrize("law_name,breaks,strategy", POSITIVE_CONTROLS,
                         ids=[f"{n}-{'+'.join(b)}" for n, b, _ in POSITIVE_CONTROLS])
def test_law_holds_on_a_correct_emulation(law_name, breaks, strategy):
    """Control for the negative tests of laws JAX cannot run: the law holds on
    JAX with a correct emulation of the missing feature (e.g. a looping vmap
    for linear_call), so the break is what the negative test catches."""
    law = get(law_name)
    found = find_counterexample(law, broken("jax", *breaks), strategy() if strategy else None,
                                max_examples=15)
    assert found is None, f"{law_name} fails on the correct emulation {breaks}: {found}"


def test_device_laws_catch_broken_backends():
    """The 8-device laws catch their breaks (in a subprocess with 8 host
    devices), and each found case passes on plain JAX."""
    from properties.multidevice import run_in_subprocess
    records = run_in_subprocess(negative_pairs=DEVICE_BREAKS)
    assert len(records) == len(DEVICE_BREAKS)
    for rec in records:
        assert rec["caught"], f"law {rec['law']} did not catch the break {rec['breaks']}"
        assert rec["law"] in rec["message"]
        assert not rec["control"].startswith("failed"), rec


def test_every_law_has_a_negative_test():
    covered = {n for n, _ in BACKEND_BREAKS} | set(RULE_BREAKS) | {n for n, _ in DEVICE_BREAKS}
    from properties.laws import LAWS
    assert {law.name for law in LAWS} <= covered


# JAX bugs the laws found. Each is a minimal case, compared with the law's own
# reference; strict, so a JAX release that fixes the bug makes the test fail
# and the filter in properties/laws (KNOWN_JAX_BUGS) can go.
def _all_to_all_of_unbatched():
    import jax
    import numpy as np
    from jax import lax
    f = jax.vmap(lambda v: lax.all_to_all(v, "i", 0, 0, tiled=False), in_axes=None, axis_size=2,
                 axis_name="i")
    got = np.asarray(f(np.array([0.5, 1.5])))
    # member r receives element r of every member: [[0.5, 0.5], [1.5, 1.5]]
    np.testing.assert_array_equal(got, np.array([[0.5, 0.5], [1.5, 1.5]]))


def _all_to_all_transpose_per_member():
    import jax
    import numpy as np
    from jax import lax

    def member_vjp(v, c):  # each member's own vjp: all_to_all's transpose rule runs
        return jax.vjp(lambda v: lax.all_to_all(v, "i", 1, 0, tiled=False), v)[1](c)[0]
    x = np.arange(12.0).reshape(2, 3, 2)   # 2 members, each (3, 2): split axis 1, size 2
    c = np.arange(12.0).reshape(2, 2, 3)   # each member's output is (2, 3)
    got = np.asarray(jax.vmap(member_vjp, axis_name="i")(x, c))  # JAX: ValueError on the cotangent type
    # the transpose of "member r receives slice r of every member" sends slice s of the
    # cotangent back to member s: x-shaped, got[r, :, s] = c[s, r, :]
    np.testing.assert_array_equal(got, np.einsum("srk->rks", c))


def _psum_scatter_inside_inner_axis():
    import jax
    import numpy as np
    from jax import lax
    # members (i, j) of 2 x 1; member (i, j) holds x[i, :, j] (the inner vmap reads axis 1)
    x = np.arange(4.0).reshape(2, 2, 1)
    scatter = jax.vmap(lambda v: lax.psum_scatter(v, "i", tiled=False), in_axes=1, axis_name="j")
    got = jax.vmap(scatter, axis_name="i")(x)  # JAX: IndexError
    # member i receives element i of the sum over the members: x.sum(0)[i, j]
    np.testing.assert_array_equal(np.asarray(got), x.sum(0))


def _clamp_scalar_bound_jvp():
    import jax
    import numpy as np
    from jax import lax
    # lo = 0.5 (tangent 1) clamps x[0]; x[1] is inside (tangent 1); hi = 2 (constant) clamps x[2]
    _, t = jax.jvp(lambda lo, x: lax.clamp(lo, x, 2.0), (0.5, np.array([0.0, 1.0, 3.0])),
                   (1.0, np.ones(3)))   # JAX: TypeError (select cases must have the same shapes)
    np.testing.assert_array_equal(np.asarray(t), [1.0, 1.0, 0.0])


def _dynamic_update_slice_of_own_slice():
    import jax
    import numpy as np
    from jax import lax
    x = np.array([0.0, 1.0, 2.0], np.float32)
    got = jax.jit(lambda x: lax.dynamic_update_slice(x, x[:2], (1,))[None])(x)   # XLA CPU: [[0, 0, 0]]
    # x[1:3] = (old) x[0:2]: [0, 0, 1], which JAX gives eagerly and without the [None]
    np.testing.assert_array_equal(np.asarray(got), [[0.0, 0.0, 1.0]])


def _shard_map_all_to_all_transpose():
    import subprocess
    import sys
    source = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, numpy as np
from jax import lax
from jax.sharding import AxisType, PartitionSpec as P
mesh = jax.make_mesh((2,), ("y",), axis_types=(AxisType.Auto,))
f = jax.shard_map(lambda v: lax.all_to_all(v, "y", 1, 0, tiled=False), mesh=mesh,
                  in_specs=P("y"), out_specs=P("y"))
x = np.arange(8.0).reshape(4, 2)
y = f(x)
ct = jax.vjp(f, x)[1](np.ones_like(y))[0]   # JAX: ValueError, cotangent [2,1,2] for [1,2,2]
np.testing.assert_array_equal(np.asarray(ct), np.ones((4, 2)))
"""
    run = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                         timeout=300)
    if run.returncode:
        raise ValueError(run.stderr.strip().splitlines()[-1])


#: JAX bugs the strategies steer around instead (no law draws the failing form)
AVOIDED_JAX_BUGS = {
    "jit of a dynamic_update_slice whose update is a slice of its own operand, then reshaped, gives "
    "a wrong value on CPU (strategies.ops.DynamicUpdateSlice draws updates independent of the operand)":
        _dynamic_update_slice_of_own_slice,
    "jvp of lax.clamp with a traced scalar bound and an array operand raises TypeError "
    "(strategies.ops.Clamp draws traced bounds of the operand's shape only)": _clamp_scalar_bound_jvp,
    "vjp of shard_map through an untiled all_to_all whose split and concat axes differ raises "
    "ValueError (shard_map_matches_reference skips its vjp check on JAX for such bodies)":
        _shard_map_all_to_all_transpose,
}


KNOWN_JAX_BUGS = {
    "all_to_all of a value unbatched over its axis returns a wrong shape under vmap":
        _all_to_all_of_unbatched,
    "the transpose of an untiled all_to_all whose split and concat axes differ has the wrong "
    "shape inside vmap": _all_to_all_transpose_per_member,
    "an untiled psum_scatter over an outer vmap axis fails when an inner vmap batches its "
    "operand along a nonzero axis (all_gather's transpose too)": _psum_scatter_inside_inner_axis,
}


@pytest.mark.xfail(strict=True, raises=(AssertionError, ValueError, IndexError, TypeError),
                   reason="a bug in JAX 0.10.2")
@pytest.mark.parametrize("bug", sorted(KNOWN_JAX_BUGS) + sorted(AVOIDED_JAX_BUGS))
def test_known_jax_bug(bug):
    {**KNOWN_JAX_BUGS, **AVOIDED_JAX_BUGS}[bug]()


def test_known_jax_bugs_are_the_ones_the_laws_filter():
    from properties.laws.named import KNOWN_JAX_BUGS as FILTERED
    assert set(FILTERED) == set(KNOWN_JAX_BUGS)


def test_the_all_to_all_filter_follows_tangents_inside_the_vmaps():
    """A jvp taken inside the vmaps gives all_to_all an unbatched tangent even after
    `+ axis_index` made the primal vary (found by the default profile on JAX)."""
    import numpy as np

    from properties.laws.named import KNOWN_JAX_BUGS as FILTERED
    from strategies.named import NamedAxisCase, Step
    case = NamedAxisCase(
        names=("i",), sizes=(2,), in_axes=(None,), out_axes=(0,),
        steps=(Step(op="axis_index", names=("i",), params=()),
               Step(op="all_to_all", names=("i",),
                    params=(("split", 0), ("concat", 0), ("tiled", False)))),
        x=np.zeros(2, np.float32), elem_shape=(2,))
    applies = FILTERED["all_to_all of a value unbatched over its axis returns a wrong shape "
                       "under vmap"]
    assert applies(case, "member_jvp") and not applies(case, "value")
