"""Varying, unreduced and reduced manual axes in types inside shard_map (typeof(x).mat,
lax.pcast, the implicit casts and the collectives' rules, the errors of check_vma=True)
on 8 host devices, against JAX.

The cases (`tests/shard_map_vma_cases.py`) run in one subprocess with 8 host devices
(see `tests/_device_cases.py`); each `case_*` there is reported here as one test, and
the subprocess runs only the cases this pytest run selected.
"""
from __future__ import annotations

import pathlib

from tests._device_cases import selected_case_tests

CASES_FILE = pathlib.Path(__file__).with_name("shard_map_vma_cases.py")

# Nightly: the programs beyond CI's under value, jit, grad and vmap (with varying, and
# with unreduced and reduced axes), the negative tests that rerun the value
# comparisons, and the values of JAX's operations that drop unreduced axes.
NIGHTLY_CASES = {"case_more_values_under_jit_grad_and_vmap",
                 "case_negative_pvary_transpose_averaging_is_caught",
                 "case_more_unreduced_and_reduced_values_and_derivatives",
                 "case_negative_an_unreduced_psum_that_does_not_sum_is_caught",
                 "case_jax_bug_operations_dropping_unreduced_axes_give_wrong_values"}

case_results, test_on_8_devices = selected_case_tests(CASES_FILE, __file__, NIGHTLY_CASES)
