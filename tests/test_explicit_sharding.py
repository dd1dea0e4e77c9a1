"""Explicit sharding (shardings in types, per-primitive propagation rules, out_sharding=,
reshard, ShardingTypeError, partitioned compilation) on 8 host devices, against JAX.

The cases (`tests/explicit_sharding_cases.py`) run in one subprocess with 8 host devices
(see `tests/_device_cases.py`); each `case_*` there is reported here as one test, and the
subprocess runs only the cases this pytest run selected (the heavy ones are nightly, see
NIGHTLY_CASE_SUFFIXES in the root conftest.py).
"""
from __future__ import annotations

import pathlib

import pytest

from tests._device_cases import case_names, report, run_cases_once, selected_cases

CASES_FILE = pathlib.Path(__file__).with_name("explicit_sharding_cases.py")


@pytest.fixture(scope="session")
def case_results(request, tmp_path_factory):
    return run_cases_once(CASES_FILE, tmp_path_factory, only=selected_cases(request, __file__))


@pytest.mark.parametrize("name", case_names(CASES_FILE))
def test_on_8_devices(case_results, name):
    report(case_results, name)
