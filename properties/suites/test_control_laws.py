"""Item 10: scan/fori_loop/while_loop/cond/switch/map are their Python meaning,
differentiate like finite differences, and batch like a loop."""
from properties.plugin import law_test


@law_test
def test_control_flow_matches_python(law_run, case):
    law_run.check(case)


@law_test
def test_control_flow_jvp_matches_finite_differences(law_run, case):
    law_run.check(case)


@law_test
def test_control_flow_vjp_matches_finite_differences(law_run, case):
    law_run.check(case)


@law_test
def test_control_flow_vmap_matches_loop(law_run, case):
    law_run.check(case)
