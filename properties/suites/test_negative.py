"""Every law catches a deliberately broken backend or rule.

Each test runs a law against a wrapper around JAX with one transformation
broken (properties/broken.py), or on cases with a broken rule, and requires
an AssertionError on at least one drawn case.  For backend breaks the same
case must pass on plain JAX, so the failure is the break's doing.  These run
against ``jax`` whatever --backend says, so they do not depend on impl.

What each law's negative tests break, and whether they run in CI or nightly,
is declared with the law (``negatives`` in properties/laws/__init__.py).
"""
import pytest

from properties.backends import LawSkipped, load_backend
from properties.broken import broken, find_counterexample
from properties.laws import LAWS, NIGHTLY, Breaks, BrokenRule, CaseFiltered, get


def _param(law, negative, test_id):
    """The test of one negative declaration, marked slow when its tier is nightly."""
    marks = [pytest.mark.slow] if negative.tier == NIGHTLY else []
    return pytest.param(law.name, negative, marks=marks, id=test_id)


def backend_breaks():
    """(Law, Breaks) of every law that runs in this process (the 8-device laws'
    are checked together in a subprocess: test_device_laws_catch_broken_backends)."""
    return [(law, n) for law in LAWS if law.devices == 1 for n in law.negatives
            if isinstance(n, Breaks)]


def device_breaks():
    return [(law.name, n.labels) for law in LAWS if law.devices > 1 for n in law.negatives]


def emulations():
    """Laws JAX cannot run (it lacks the feature) hold on JAX with a correct emulation of
    the feature: their negative tests break that emulation (Breaks.emulation)."""
    return [(law, n) for law, n in backend_breaks() if n.emulation]


def _control_passes(law, backend, case):
    """The law holds for ``case`` on the unbroken backend (AssertionError if not)."""
    try:
        law(backend, case)
    except (CaseFiltered, LawSkipped):
        pass  # outside the law's domain there, or not runnable on plain JAX


@pytest.mark.parametrize("law_name,negative", [_param(law, n, f"{law.name}-{n.id}")
                                               for law, n in backend_breaks()])
def test_law_catches_broken_backend(law_name, negative):
    law, breaks = get(law_name), negative.labels
    bad = broken("jax", *breaks)
    found = find_counterexample(law, bad, negative.cases() if negative.cases else None)
    assert found is not None, f"law {law_name} did not catch the break {breaks}"
    case, error = found
    assert law_name in str(error)
    # the same case passes without the last break: the failure is the break's doing
    good = broken("jax", *negative.emulation) if negative.emulation else load_backend("jax")
    _control_passes(law, good, case)


@pytest.mark.parametrize("law_name,negative", [_param(law, n, law.name) for law in LAWS
                                               for n in law.negatives if isinstance(n, BrokenRule)])
def test_law_catches_broken_rule(law_name, negative):
    law = get(law_name)
    found = find_counterexample(law, load_backend("jax"), negative.cases())
    assert found is not None, f"law {law_name} did not catch a broken rule"
    assert law_name in str(found[1])


@pytest.mark.slow
@pytest.mark.parametrize("law_name,negative", [
    pytest.param(law.name, n, id=f"{law.name}-{'+'.join(n.emulation)}") for law, n in emulations()])
def test_law_holds_on_a_correct_emulation(law_name, negative):
    """Control for the negative tests of laws JAX cannot run: the law holds on
    JAX with a correct emulation of the missing feature (e.g. a looping vmap
    for linear_call), so the break is what the negative test catches."""
    law = get(law_name)
    found = find_counterexample(law, broken("jax", *negative.emulation),
                                negative.cases() if negative.cases else None, max_examples=15)
    assert found is None, f"{law_name} fails on the correct emulation {negative.emulation}: {found}"


def test_device_laws_catch_broken_backends():
    """The 8-device laws catch their breaks (in a subprocess with 8 host
    devices), and each found case passes on plain JAX."""
    from properties.multidevice import run_in_subprocess
    pairs = device_breaks()
    records = run_in_subprocess(negative_pairs=pairs)
    assert len(records) == len(pairs)
    for rec in records:
        assert rec["caught"], f"law {rec['law']} did not catch the break {rec['breaks']}"
        assert rec["law"] in rec["message"]
        assert not rec["control"].startswith("failed"), rec


def test_every_law_has_a_negative_test():
    assert all(law.negatives for law in LAWS), [law.name for law in LAWS if not law.negatives]


# JAX bugs the laws found (declared with the laws that draw them: Law.jax_bugs). Each is a
# minimal case compared with the law's own reference; strict, so a JAX release that
# fixes the bug makes the test fail and the filter (or the detour) can go.
def declared_jax_bugs():
    return list({bug.description: bug for law in LAWS for bug in law.jax_bugs}.values())


@pytest.mark.xfail(strict=True, raises=(AssertionError, ValueError, IndexError, TypeError,
                           NotImplementedError, RuntimeError),
                   reason="a bug in JAX 0.10.2")
@pytest.mark.parametrize("bug", sorted(declared_jax_bugs(), key=lambda b: (b.handled == "avoided",
                                                                         b.description)),
                         ids=lambda bug: bug.description)
def test_known_jax_bug(bug):
    bug.reproduce()


def test_a_crash_of_a_recognised_jax_bug_is_filtered_on_jax_only():
    from properties.laws import Law
    from properties.laws.jax_bugs import RECOGNISED
    bug = RECOGNISED[0]

    def crashes(backend, case):
        raise RuntimeError(f"INTERNAL: RET_CHECK failure (external/xla/{bug.error}(x))")

    def crashes_otherwise(backend, case):
        raise RuntimeError("INTERNAL: RET_CHECK failure (external/xla/other.cc:1)")
    law = Law(crashes, cases=lambda: None)
    with pytest.raises(CaseFiltered, match="known JAX bug"):
        law(load_backend("jax"), None)
    with pytest.raises(RuntimeError):   # another backend's crash is its own (or inherited)
        law(load_backend("impl"), None)
    with pytest.raises(RuntimeError):   # another crash of JAX is a finding
        Law(crashes_otherwise, cases=lambda: None)(load_backend("jax"), None)


def test_known_jax_bugs_are_the_ones_the_laws_filter():
    from properties.laws.named import KNOWN_JAX_BUGS as FILTERED
    assert set(FILTERED) == {b.description for b in declared_jax_bugs() if b.handled == "filtered"}


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


def test_the_all_to_all_filter_follows_cotangents_made_invariant_by_psum_scatter():
    """In a per-member vjp, psum_scatter's transpose (an all_gather) hands all_to_all's
    transpose a cotangent that is the same on every member: JAX 0.10.2 raises on it and
    JAX 0.6.0 returns a wrongly shaped cotangent (found by the laws run on JAX 0.6.0).
    The filter covers it, and JAX still fails on the plain program."""
    import jax
    import numpy as np
    from jax import lax

    from properties.laws.named import KNOWN_JAX_BUGS as FILTERED
    from strategies.named import NamedAxisCase, Step
    case = NamedAxisCase(
        names=("i",), sizes=(2,), in_axes=(0,), out_axes=(0,),
        steps=(Step(op="all_to_all", names=("i",),
                    params=(("split", 0), ("concat", 0), ("tiled", False))),
               Step(op="psum_scatter", names=("i",), params=(("dim", 0), ("tiled", False)))),
        x=np.zeros((2, 2, 2), np.float32), elem_shape=(2, 2))
    applies = FILTERED["all_to_all of a value unbatched over its axis returns a wrong shape "
                       "under vmap"]
    assert applies(case, "member_vjp") and not applies(case, "value")

    def body(v):
        return lax.psum_scatter(lax.all_to_all(v, "i", 0, 0, tiled=False), "i",
                                scatter_dimension=0, tiled=False)

    def member_vjp(v, c):
        return jax.vjp(body, v)[1](c)[0]

    x = np.arange(8.0).reshape(2, 2, 2)
    try:
        shape = jax.vmap(member_vjp, axis_name="i")(x, np.ones((2, 2))).shape
    except ValueError:  # JAX 0.10.2: "Expected cotangent type float32[2,2] ..."
        shape = None
    assert shape != x.shape  # a cotangent has its primal's shape: JAX's is wrong or missing
