"""Sharding on 8 host devices (jit shardings, with_sharding_constraint, vmap's
spmd_axis_name, shard_map), against JAX.

The cases (`tests/sharding_cases.py`) run in one subprocess with 8 host devices (see
`tests/_device_cases.py`); each `case_*` there is reported here as one test.
"""
from __future__ import annotations

import pathlib

import pytest

from tests._device_cases import case_names, report, run_cases_once

CASES_FILE = pathlib.Path(__file__).with_name("sharding_cases.py")


@pytest.fixture(scope="session")
def case_results(tmp_path_factory):
    return run_cases_once(CASES_FILE, tmp_path_factory)


@pytest.mark.parametrize("name", case_names(CASES_FILE))
def test_on_8_devices(case_results, name):
    report(case_results, name)
