"""Explicit sharding (shardings in types, per-primitive propagation rules, out_sharding=,
reshard, ShardingTypeError, partitioned compilation) on 8 host devices, against JAX.

The cases (`tests/explicit_sharding_cases.py`) run in one subprocess with 8 host devices
(see `tests/_device_cases.py`); each `case_*` there is reported here as one test, and the
subprocess runs only the cases this pytest run selected (the heavy ones are nightly).
"""
from __future__ import annotations

import pathlib

from tests._device_cases import selected_case_tests

CASES_FILE = pathlib.Path(__file__).with_name("explicit_sharding_cases.py")

# Nightly: the rule groups checked under every transformation (each 20-60 programs compiled
# by impl and by JAX), the random draws, the MLP, auto/explicit_axes, jit's shardings and
# the negative tests that rerun rule groups, the derivatives of unreduced and reduced
# values. CI keeps printing, context, creation, unreduced and reduced types,
# refusals, the partitioned HLO, the data-parallel program, shard_map, vmap's batch axis
# and the drawing of shardings.
NIGHTLY_CASES = {
    "case_elementwise_and_broadcasting_rules", "case_reduction_rules", "case_layout_rules",
    "case_sorting_and_dynamic_slicing_rules", "case_control_flow_rules",
    "case_gather_scatter_and_indexing_rules", "case_convolution_and_window_rules",
    "case_negative_a_refusing_gather_rule_is_caught", "case_auto_and_explicit_axes",
    "case_jit_shardings_agree_with_types",
    "case_random_draws_with_out_sharding", "case_data_parallel_mlp_training_steps",
    "case_linear_algebra_rules", "case_fft_rules", "case_decompositions_jax_fails_on",
    "case_negative_a_wrong_rule_is_caught",
    "case_unreduced_and_reduced_axes_under_differentiation",
    "case_negative_unreduced_axes_dropped_are_caught",
    "case_negative_a_rule_refusing_what_jax_takes_is_caught",
    "case_negative_an_fft_lowered_as_jax_lowers_it_is_caught",
    "case_every_elementwise_rule", "case_more_rules"}


case_results, test_on_8_devices = selected_case_tests(CASES_FILE, __file__, NIGHTLY_CASES)
