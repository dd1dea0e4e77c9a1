"""The analysed mutants, as data: each name with a one-line reason.

``EQUIVALENT``: the wrong rule computes what the true one does on every input it can
receive, so no law can kill it; the run skips them and the report counts them apart.
``OPEN_GAPS``: survivors analysed and found *not* equivalent; the reason names what lets
them live (a strategy that never draws the exposing program, or a law that never takes
the derivative that shows it) -- work left for the strategies and laws.
"""
from __future__ import annotations


def _each(names, reason):
    return dict.fromkeys(names, reason)


def _ops(table, prim, ops):
    return [f"{table}:{prim}:{op}" for op in ops]


# why a mutant is equivalent: the rule's inputs it could change are never there
INTEGER_TANGENT = ("the operand it drops is integer (indices, a start index, a predicate, a "
                   "branch index, PRNG key data): its tangent is always a symbolic zero, which the rule never reads")
INTEGER_SWAP = ("the two operands have one type only when both are integer, and then both "
                "tangents are symbolic zeros: the swap changes nothing")
ONE_LINEAR_OPERAND = ("the rule returns None for the operand that is never linear (indices, "
                      "predicate, branch index, a bilinear op's other factor), so the swap, "
                      "which needs two same-typed cotangents, never applies")
SAME_COTANGENTS = ("both cotangents are unbroadcast(ct) to the operands' one type, i.e. equal: "
                   "swapping them changes nothing")
SUM_OF_TANGENTS = ("the tangent is the sum of the two operands' tangents, and they swap only "
                   "when of one type: the sum is unchanged")
LINEAR_IN_FIRST = ("the rule is linear in operand 0 only (ad.linear_in_jvp((0,))) and never "
                   "reads operand 1's tangent (the values that select)")
KEY_AND_PARAMETER = ("the first two operands are the key data (uint32, as the abstract evaluation "
                     "requires) and a float parameter: never of one type, so the swap never applies")
NAMED_AXES = ("its `axes` are mesh axis names, which JAX lowers only as strings, and the mutant "
              "shifts integer axes only: it changes nothing")

EQUIVALENT: dict[str, str] = {
    **_each(["jvp:gather:drop_last", "jvp:dynamic_slice:drop_last", "jvp:take_along_axis:drop_last",
             "jvp:scatter_add_along_axis:drop_last", "jvp:cond:drop_first", "jvp:select_n:drop_first",
             "jvp:random_gamma:drop_first"],
            INTEGER_TANGENT),
    "jvp:random_gamma:swap": KEY_AND_PARAMETER,
    "jvp:psum_unmapped:drop_first": ("psum_unmapped reads its first operand only for the axes it "
                                     "is mapped along, never its tangent"),
    **_each([f"jvp:{p}:swap" for p in ("gather", "dynamic_slice", "scatter", "scatter_add", "scatter_mul",
                                       "scatter_min", "scatter_max", "scatter_add_along_axis",
                                       "take_along_axis", "cond", "select_n")], INTEGER_SWAP),
    **_each(["jvp:add:swap", "jvp:add_any:swap"], SUM_OF_TANGENTS),
    **_each([f"jvp:{p}:drop_last" for p in ("select_and_scatter_add", "select_and_gather_add",
                                            "cumchooser_tangent", "cumchooser_cotangent")], LINEAR_IN_FIRST),
    "jvp:regularized_incomplete_beta:swap": ("the rule raises for a tangent of a or of b alike (no "
                                             "derivative there, as in JAX); with both zero it swaps zeros"),
    **_each([f"transpose:{p}:swap" for p in (
        "scatter_add_along_axis", "scatter_add", "scatter", "scatter_mul", "take_along_axis", "gather",
        "dynamic_slice", "div", "cond", "select_n", "psum_unmapped", "mul", "dot_general",
        "conv_general_dilated", "triangular_solve", "tridiagonal_solve", "linear_recurrence", "select_and_gather_add",
        "cumchooser_tangent", "cumchooser_cotangent", "select_and_scatter_add")], ONE_LINEAR_OPERAND),
    **_each(["transpose:add:swap", "transpose:add_any:swap"], SAME_COTANGENTS),
    "batching:axis_index:move_batch_axis": ("axis_index's result is one number per member: batched, it "
                                            "has the batch axis alone, which there is nowhere to move"),
    # (the casts of unreduced and reduced axes have no batching mutants: vmap refuses them)
    **_each([f"{t}:{p}:axis_off_by_one" for p in ("pvary", "preduced", "reduced_vary_cast_p",
                                                  "vary_unreduced_cast_p", "unreduced_psum")
             for t in ("jvp", "transpose")] + ["batching:pvary:axis_off_by_one"], NAMED_AXES),
}

OPEN_GAPS: dict[str, str] = {
    **_each(_ops("transpose", "name", ("scale", "drop_first")),
            "only linear_transpose of a named linear value reaches it, and JAX has no transpose of "
            "`name`, so no law that must pass on JAX draws it (tests/test_remat.py checks the rule)"),
    **_each(_ops("transpose", "custom_vmap_call", ("scale", "drop_first", "swap")),
            "only linear_transpose of a custom_vmap function reaches it, and JAX has no transpose of "
            "custom_vmap_call (NotImplementedError), so no law that must pass on JAX draws it "
            "(tests/test_custom_batching.py checks the rule)"),
    "jvp:clamp:drop_first": ("shows only where a traced lower bound clamps and reaches the output; "
                             "the focused programs seldom hold such a case"),
    **_each(["jvp:polygamma:drop_first", "jvp:regularized_incomplete_beta:drop_first"],
            "turns JAX's (and impl's) error for a derivative in m or a into a silent zero; laws "
            "must pass on JAX, so none perturbs it (tests/test_lax_operations.py checks the error)"),
    "jvp:reduce:drop_last": ("drops the tangent of the last initial value, which is a symbolic zero "
                             "wherever the rule does not raise (a nonzero one raises NotImplementedError, "
                             "as in JAX): it turns that error into a silent zero; laws must pass on JAX, "
                             "so none perturbs an initial value (tests/test_lax_reduce_solve_barrier.py "
                             "checks the error)"),
    "jvp:pad:drop_last": ("a traced padding value is drawn only by strategies.ops.Pad, seldom among "
                          "pad's focused cases"),
    "jvp:custom_linear_solve:swap": ("applies to two same-typed constants of the solve's programs with different "
                                     "tangents; the drawn solves (strategies.ops.LinearSolve) close over one "
                                     "matrix, the same value in each program, so the two tangents are one"),
    "transpose:custom_linear_solve:swap": ("applies only to a solve without constants and two same-typed right-hand "
                                           "sides (b a pytree): the rule returns None for each constant, and the "
                                           "drawn solves close over their matrix and solve one array"),
    **_each(_ops("jvp", "random_gamma", ("scale", "drop_last")),
            "the sampler's derivative in a is the implicit reparameterization one (at a fixed CDF "
            "value), which no finite difference of the drawn samples shows; the other laws derive "
            "vjp, linearize and jacobians from the same rule, so they agree with a consistently wrong "
            "one (tests/test_random_dists.py checks it against JAX and the gamma CDF)"),
    **_each(_ops("jvp", "unreduced_reduce_scatter", ("axis_off_by_one",))
            + _ops("transpose", "unreduced_reduce_scatter", ("axis_off_by_one",)),
            "with one device only an untiled psum_scatter of an unreduced value shows the dimension "
            "scattered (a size-1 one beside a larger one); the quick profile's focused cases seldom "
            "draw it (strategies.manual)"),
    "batching:ge:shift_batch": ("ge is bound by abs's derivative (the sign of its operand): a shifted batch "
                                "shows only under vmap of grad where abs's operand changes sign between a "
                                "batch's examples; the quick profile's focused cases seldom draw one (the "
                                "default profile kills it)"),
    **_each(_ops("batching", "io_callback", ("move_batch_axis", "shift_batch")),
            "not drawn: JAX refuses an io_callback where checkpoint's partial evaluation meets it "
            "(NotImplementedError: effects not supported), so an op drawing it into every law's "
            "programs fails the remat laws on JAX; tests/test_toplevel.py checks its vmap against JAX"),
    "batching:name:move_batch_axis": ("shows only where a named (checkpoint_name) value batched beside "
                                      "an axis of size > 1 reaches the output; remat_matches_no_remat's "
                                      "focused cases in the quick profile move it past axes of size one "
                                      "only (the mutation never applies)"),
    "batching:pmax:move_batch_axis": ("needs pmax over the outer of two named vmaps on a value batched "
                                      "along the inner one; the quick profile's focused cases draw none "
                                      "(the default profile kills it)"),
}
