"""The law declarations (properties.laws.LAWS): each is complete, the pages show them, and
a law declared once -- a toy law here -- gets its test and its negative test."""
import dataclasses
import importlib
import pathlib
import types

import pytest
from hypothesis import is_hypothesis_test
from hypothesis.strategies import SearchStrategy

from properties import cases, features, listing
from properties.backends import API_NAMES, load_backend
from properties.broken import BREAKS, broken, find_counterexample
from properties.laws import (CI, LAWS, TABLES, TIERS, Breaks, BrokenRule, CaseFiltered, JaxBug,
                             Law, discard, get, topics)
from properties.laws._common import assert_close, check_conditioning, evaluate
from properties.plugin import law_tests
from properties.runner import LawRun

SUITES = pathlib.Path(__file__).resolve().parent
DOCS = SUITES.parents[1] / "docs" / "properties.md"


def problems(law):
    """What is wrong with ``law``'s declaration (empty when complete)."""
    out = []
    if importlib.import_module(law.fn.__module__).__dict__.get(law.name) is not law.fn:
        out.append(f"{law.name} is not the function of that name in {law.fn.__module__}")
    if not isinstance(law.cases(), SearchStrategy):
        out.append("cases() is not a hypothesis strategy")
    if not law.negatives:
        out.append("no negative test")
    for n in law.negatives:
        if isinstance(n, Breaks):
            out += [f"unknown break {label!r}" for label in n.labels if label not in BREAKS]
            if n.cases is not None and not isinstance(n.cases(), SearchStrategy):
                out.append(f"{n}: cases() is not a hypothesis strategy")
        elif isinstance(n, BrokenRule):
            if not isinstance(n.cases(), SearchStrategy):
                out.append(f"{n}: cases() is not a hypothesis strategy")
        else:
            out.append(f"negative {n!r} is neither Breaks nor BrokenRule")
        if n.tier not in TIERS:
            out.append(f"negative {n!r}: tier {n.tier!r} not in {TIERS}")
    if law.tier not in TIERS:
        out.append(f"tier {law.tier!r} not in {TIERS}")
    out += [f"unknown rule table {t!r}" for t in law.reaches + law.references if t not in TABLES]
    if not set(law.references) <= set(law.reaches):
        out.append(f"references {law.references} not among the tables it reaches {law.reaches}")
    jax = load_backend("jax").module
    out += [f"needs {n!r}: neither a feature probe nor a name of JAX's API" for n in law.needs
            if n not in features.PROBES and n not in API_NAMES and not hasattr(jax, n)]
    out += [f"jax_bugs: {b!r} is not a JaxBug" for b in law.jax_bugs if not isinstance(b, JaxBug)]
    if law.devices < 1:
        out.append("devices < 1")
    if law.devices > 1 and any(n.tier != CI or not isinstance(n, Breaks) for n in law.negatives):
        out.append("the 8-device laws' negative tests are Breaks run together in CI "
                   "(test_device_laws_catch_broken_backends): declare them tier=CI")
    return out


def test_every_declaration_is_complete():
    assert {law.name: problems(law) for law in LAWS if problems(law)} == {}
    assert len({law.name for law in LAWS}) == len(LAWS), "two laws of one name"


def test_each_topic_has_a_file_holding_the_tests_of_its_laws_only():
    for topic in topics():
        path = SUITES / f"test_{topic}_laws.py"
        if not any(law.devices == 1 for law in LAWS if law.topic == topic):
            continue
        module = importlib.import_module(f"properties.suites.{path.stem}")
        tests = {name: fn for name, fn in vars(module).items() if name.startswith("test_")}
        in_process = {f"test_{law.name}" for law in LAWS if law.topic == topic and law.devices == 1}
        on_devices = {"test_device_laws"} if any(law.devices > 1 for law in LAWS if law.topic == topic) else set()
        assert set(tests) == in_process | on_devices, topic
        # @given on the test itself, so hypothesis' pytest options work on it
        assert all(is_hypothesis_test(tests[name]) for name in in_process)
    # the 8-device laws run together in one subprocess
    assert "run_in_subprocess" in (SUITES / "test_sharding_laws.py").read_text()


def test_docs_show_the_declared_laws():
    """docs/properties.md's law tables are `python -m properties --list --markdown`."""
    text = DOCS.read_text()
    assert listing.BEGIN in text and listing.END in text
    shown = text[text.index(listing.BEGIN):text.index(listing.END) + len(listing.END)]
    assert shown == listing.markdown(), ("the law tables of docs/properties.md are out of date: "
                                         "paste `python -m properties --list --markdown` there")


def test_the_cli_lists_every_law():
    lines = listing.text()
    assert len(lines) == len(LAWS) + 1
    assert all(line.split()[0] == law.name for line, law in zip(lines[1:], LAWS))


# --- a toy law, added as docs/properties.md's "Adding a law" says: its code, one declaration

def toy_jit_matches_eager(backend, case):
    """jit(f) equals f (a toy copy of jit_matches_eager)."""
    f = case.program.build(backend)
    y = check_conditioning(f, case.args)
    assert_close(case, "jit(f) vs f", evaluate(backend.jit(f), *case.args), y)


# few small programs of a few cheap ops: the test shows the mechanism, not the law's power
TOY = Law(toy_jit_matches_eager, lambda: cases.programs(max_ops=2, ops=("sin", "mul", "add")),
          negatives=(Breaks("jit_perturb", tier=CI),))


@pytest.fixture
def toy_declared():
    """The toy law in LAWS (the declaration mechanism), for this test only."""
    LAWS.append(TOY)
    try:
        yield TOY
    finally:
        LAWS.remove(TOY)


def test_a_toy_law_declared_once_runs_and_is_caught(toy_declared):
    from properties.suites import test_negative
    assert get("toy_jit_matches_eager") is toy_declared and problems(toy_declared) == []
    # its pytest test: generated for its topic (this module), a hypothesis test, run on JAX
    tests = law_tests(toy_declared.topic)
    test = tests["test_toy_jit_matches_eager"]
    assert list(tests) == ["test_toy_jit_matches_eager"] and is_hypothesis_test(test)
    assert [m.name for m in test.pytestmark] == ["law"]   # tier CI: no slow mark
    run = LawRun(toy_declared, load_backend("jax"))
    with run.running():
        test(law_run=run)
    assert run.record.outcome == "passed" and run.record.passed > 0
    # its negative test: in the negative tests' parametrisation, and it catches jit_perturb
    ((law, negative),) = [(law, n) for law, n in test_negative.backend_breaks()
                          if law is toy_declared]
    assert negative.labels == ("jit_perturb",) and negative.tier == CI
    test_negative.test_law_catches_broken_backend(law.name, negative)
    # ... and it is listed
    assert "`toy_jit_matches_eager`" in listing.markdown()
    assert any(line.startswith("toy_jit_matches_eager ") for line in listing.text())


def test_laws_named_outside_the_declarations_are_declared():
    """The benchmarks pick laws by name (asv parameters are strings): a renamed law fails
    here, not as a silently skipped benchmark."""
    from benchmarks import bench_laws
    assert set(bench_laws.LAWS) <= {law.name for law in LAWS}


def _renamed(fn, name):
    """A copy of the function ``fn`` called ``name``: what renaming its ``def`` line makes."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__qualname__, copy.__doc__, copy.__module__ = name, fn.__doc__, fn.__module__
    return copy


def test_renaming_a_law_is_renaming_its_function(monkeypatch):
    """A law's failure messages carry the name of its function, given nowhere else: the
    same body, renamed and declared, fails under its new name -- no string to edit."""
    fn = _renamed(toy_jit_matches_eager, "toy_renamed_law")
    monkeypatch.setitem(globals(), fn.__name__, fn)   # the module now defines the new name
    renamed = dataclasses.replace(TOY, fn=fn)
    assert renamed.name == "toy_renamed_law" and problems(renamed) == []
    for law in (TOY, renamed):
        found = find_counterexample(law, broken("jax", "jit_perturb"), max_examples=20)
        assert found is not None, law.name
        message = str(found[1])
        assert message.startswith(f"law {law.name} failed: jit(f) vs f: max error "), message
        assert "\n  case: " in message
    assert "toy_jit_matches_eager" not in message


def test_a_law_failure_is_its_own_assertion_error_with_the_name_in_front():
    """Law.__call__ adds the name to the law's own AssertionError (any, not only the
    helpers'), keeping its type and traceback -- where hypothesis tells failures apart
    and replays them -- and lets a filtered case through untouched."""
    class Mismatch(AssertionError):
        pass

    def toy_raises(backend, case):
        if case == "filtered":
            discard("outside the domain")
        raise Mismatch("values differ")

    law = Law(toy_raises, lambda: None)
    with pytest.raises(Mismatch) as info:
        law(None, "case")
    assert str(info.value) == "law toy_raises failed: values differ"
    assert info.traceback[-1].name == "toy_raises"   # raised where the law raised it
    with pytest.raises(CaseFiltered, match="^outside the domain$"):
        law(None, "filtered")


def test_cli_list_prints_the_declarations(capsys):
    cli = importlib.import_module("properties.__main__")
    assert cli.main(["--list"]) == 0
    assert capsys.readouterr().out.splitlines() == listing.text()
    assert cli.main(["--list", "--markdown"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == listing.markdown()
