"""Root conftest: registers the properties pytest plugin (options --backend, --profile, ...)
for every test run from the repository, so `pytest -n 2 --dist loadfile --profile quick` works here.

It also keeps the CI budget in one place: the tests below are marked ``slow`` (nightly:
``pytest -m slow`` or ``-m ""``) so that the README's test command stays under 20 minutes
on 2 cores.  What stays in CI: every function of the op tables under value, jit, jvp, grad
and vmap (one dtype where a test has both); every law; for the negative tests, one law for
each of 10 kinds of break (every law's own negative test runs nightly).
"""
import pytest

pytest_plugins = ["properties.plugin"]

# file -> test functions that run nightly only, each with why it is not in CI.
NIGHTLY = {
    # Compositions of transformations already checked one by one in CI.
    "tests/test_elementwise.py": ("test_jit_vmap_grad", "test_jacfwd", "test_jacrev", "test_hessian",
                                  "test_grad_of_vmap", "test_vmap_of_grad"),
    "tests/test_reductions.py": ("test_jit_vmap_grad", "test_vmap_of_grad"),
    "tests/test_indexing.py": ("test_jit_vmap_grad", "test_vmap_of_grad", "test_grad_of_vmap",
                               "test_vmap_of_vmap"),
    # Checks of the harness itself that run whole law suites in subprocesses.
    "properties/suites/test_harness.py": ("test_failures_replay_first_from_the_database",
                                          "test_cases_with_ops_the_backend_lacks_make_the_law_skipped",
                                          "test_hypothesis_options_work_on_the_law_tests",
                                          "test_a_law_that_filters_too_much_fails"),
    # Controls showing the emulations used by negative tests are correct.
    "properties/suites/test_negative.py": ("test_law_holds_on_a_correct_emulation",),
    # Shrinking demonstrations (minutes of hypothesis shrinking each).
    "tests/test_strategies.py": ("test_planted_failure_shrinks_to_a_tiny_program",
                                 "test_failing_given_reports_a_shrunk_program"),
}

# file::function -> how many of its parametrized cases run in CI (the first ones; the
# cases are option mixes of the same check, the rest run nightly).
FIRST_CASES = {
    "tests/test_strategies.py::test_drawn_cases_run_on_jax": 1,
    "tests/test_strategies.py::test_linear_functions_transposes": 1,
    "tests/test_convolution.py::test_conv_transpose": 3,
    "tests/test_convolution.py::test_conv_general_dilated": 7,
    "tests/test_scatter_update.py::test_at_update": 18,
    "tests/test_collectives.py::test_outer_axis_jvp_and_grad": 8,
    "tests/test_collectives.py::test_tuple_of_names_grad": 6,
    "tests/test_collectives.py::test_tuple_of_names": 7,
    "tests/test_collectives.py::test_grad_under_vmap": 8,
    "tests/test_numpy_api.py::test_logsumexp": 3,
}

# Tests whose cases run in both float32 and float64: CI runs the case in the dtype named
# here and leaves its twin to the nightly run -- float64 for derivatives (tight
# tolerances), float32 for values (the dtype programs use, weak types and promotion).
ONE_DTYPE = {
    **dict.fromkeys(("tests/test_indexing.py::test_vjp", "tests/test_reductions.py::test_grad",
                     "tests/test_reductions.py::test_jvp", "tests/test_reductions.py::test_vmap",
                     "tests/test_elementwise.py::test_grad", "tests/test_elementwise.py::test_linearize",
                     "tests/test_convolution.py::test_reduce_window",
                     "tests/test_numpy_api.py::test_gelu"), "float64"),
    **dict.fromkeys(("tests/test_indexing.py::test_eager", "tests/test_reductions.py::test_eager_and_jit",
                     "tests/test_elementwise.py::test_jit", "tests/test_elementwise.py::test_eager",
                     "tests/test_scatter_update.py::test_at_update",
                     "tests/test_random.py::test_every_sampler_under_jit"), "float32"),
}

# file::function -> case-id suffixes (transformation stacks) that run nightly only: CI keeps
# each custom rule under eval, jit, jvp, vjp, grad, vmap, linearize, hessian and the
# two-level stacks grad_grad, jvp_grad, vmap_grad, grad_vmap.
# Explicit sharding on 8 devices: CI keeps the dot_general rules under every transformation,
# the types, errors, creation, partitioned HLO and a negative test; the other rule groups
# (each 20-60 programs compiled by impl and by JAX), the random draws, the MLP and the
# negative test that reruns the layout rules run nightly.
NIGHTLY_CASE_SUFFIXES = {
    "tests/test_explicit_sharding.py::test_on_8_devices": (
        "[case_elementwise_and_broadcasting_rules]", "[case_reduction_rules]",
        "[case_layout_rules]", "[case_sorting_and_dynamic_slicing_rules]",
        "[case_control_flow_rules]", "[case_random_draws_with_out_sharding]",
        "[case_data_parallel_mlp_training_steps]", "[case_negative_a_wrong_rule_is_caught]"),
    "tests/test_custom_derivatives.py::test_against_jax": (
        "-grad_jit]", "-grad_of_jit_of_vmap]", "-grad_vmap_unbatched]", "-jacfwd]", "-jacrev]",
        "-jit_grad]", "-jit_jvp]", "-jit_vmap_grad]", "-jvp_jit]", "-jvp_jvp]", "-jvp_vmap]",
        "-vmap_grad_unbatched]", "-vmap_in_axes]", "-vmap_jit_grad]", "-vmap_jvp]", "-vmap_vmap]"),
}

# Negative tests: in CI, the first law of each of the first kinds of break (the break set
# in the id), but not the breaks whose laws take longest; every law's negative test runs nightly.
NEGATIVE_BREAK_KINDS_IN_CI = 10
NEGATIVE_BREAKS_NIGHTLY = ("hessian_drops_term",)  # 25 s of hypothesis search over hessians
ONE_PER_BREAK = "properties/suites/test_negative.py::test_law_catches_broken_backend"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    seen_cases, seen_breaks = {}, set()
    ids = {item.name for item in items}
    for item in items:
        path, _, name = item.nodeid.partition("::")
        function = name.split("[")[0]
        key = f"{path}::{function}"
        nightly = function in NIGHTLY.get(path, ())
        if key in FIRST_CASES:
            seen_cases[key] = seen_cases.get(key, 0) + 1
            nightly = seen_cases[key] > FIRST_CASES[key]
        elif key == ONE_PER_BREAK and "[" in name:
            breaks = name[name.index("[") + 1:-1].split("-", 1)[-1]
            nightly = (breaks in seen_breaks or breaks in NEGATIVE_BREAKS_NIGHTLY
                       or len(seen_breaks) >= NEGATIVE_BREAK_KINDS_IN_CI)
            if breaks not in NEGATIVE_BREAKS_NIGHTLY:
                seen_breaks.add(breaks)
        elif key in NIGHTLY_CASE_SUFFIXES:
            nightly = name.endswith(NIGHTLY_CASE_SUFFIXES[key])
        elif key in ONE_DTYPE:
            keep = ONE_DTYPE[key]
            other = "float32" if keep == "float64" else "float64"
            twin = name[:-len(other) - 1] + keep + "]"
            nightly = name.endswith(f"{other}]") and name[-len(other) - 2] in "-[" and twin in ids
        if nightly:
            item.add_marker(pytest.mark.slow)
