"""The laws as tables, from their declarations (``properties.laws.LAWS``).

``python -m properties --list`` prints :func:`text`; the tables of
docs/properties.md between the ``laws:begin`` and ``laws:end`` markers are
:func:`markdown` (``python -m properties --list --markdown`` prints it, and a test
checks that the page shows exactly that).
"""
from __future__ import annotations

import inspect

from .laws import LAWS, Breaks, BrokenRule

BEGIN = "<!-- laws:begin (generated: python -m properties --list --markdown) -->"
END = "<!-- laws:end -->"


def _summary(fn):
    """The first paragraph of ``fn``'s docstring, on one line."""
    return " ".join((inspect.getdoc(fn) or "").split("\n\n")[0].split())


def _negative(n):
    if isinstance(n, BrokenRule):
        return "a broken rule"
    return "+".join(n.labels)


def _test(law):
    if law.devices > 1:
        return f"`test_{law.topic}_laws.py::test_device_laws` ({law.devices} devices, subprocess)"
    return f"`test_{law.topic}_laws.py::test_{law.name}`"


def text():
    """Lines of ``--list``: one per law."""
    lines = [f"{'law':<52} {'topic':<12} {'tier':<8} {'reaches':<25} negative tests"]
    for law in LAWS:
        negatives = ", ".join(f"{_negative(n)} ({n.tier})" for n in law.negatives)
        lines.append(f"{law.name:<52} {law.topic:<12} {law.tier:<8} "
                     f"{','.join(law.reaches) or '-':<25} {negatives}")
    return lines


def _cell(s):
    return s.replace("|", "\\|")


def markdown():
    """The law table and the negative-test table of docs/properties.md."""
    out = [BEGIN, "", "| law | what it checks | test | needs | negative tests (tier) | tier |",
           "|---|---|---|---|---|---|"]
    for law in LAWS:
        needs = ", ".join(f"`{n}`" for n in law.needs) + (" (skipped on JAX: it compares with JAX)"
                                                          if law.differential else "")
        negatives = "; ".join(f"{_negative(n)} ({n.tier})" for n in law.negatives)
        out.append(f"| `{law.name}` | {_cell(_summary(law.fn))} | {_test(law)} | {needs} | "
                   f"{negatives} | {law.tier} |")
    from .broken import BREAKS
    caught = {}
    for law in LAWS:
        for n in law.negatives:
            key = n.labels[-1] if isinstance(n, Breaks) else None
            on = f" (on {'+'.join(n.emulation)})" if isinstance(n, Breaks) and n.emulation else ""
            caught.setdefault(key, []).append(law.name + on)
    out += ["", "| break (`properties/broken.py`) | what it does | caught by |", "|---|---|---|"]
    for label in BREAKS:
        if label in caught:
            out.append(f"| `{label}` | {_cell(_summary(BREAKS[label]))} | {', '.join(caught[label])} |")
    out.append(f"| a broken rule (`BrokenRule`: drawn cases whose own rule is wrong) | | "
               f"{', '.join(caught.get(None, []))} |")
    emulations = [label for label in BREAKS if label not in caught]
    if emulations:
        out += ["", "Correct emulations of features JAX lacks, which the breaks above are applied "
                "on: " + "; ".join(f"`{label}`: {_summary(BREAKS[label])}" for label in emulations)]
    out += ["", END]
    return "\n".join(out)
