"""Item 10: scan/fori_loop/while_loop/cond/switch/map are their Python meaning,
differentiate like finite differences, and batch like a loop."""


def test_control_flow_matches_python(check_law):
    check_law("control_flow_matches_python")


def test_control_flow_jvp_matches_finite_differences(check_law):
    check_law("control_flow_jvp_matches_finite_differences")


def test_control_flow_vjp_matches_finite_differences(check_law):
    check_law("control_flow_vjp_matches_finite_differences")


def test_control_flow_vmap_matches_loop(check_law):
    check_law("control_flow_vmap_matches_loop")
