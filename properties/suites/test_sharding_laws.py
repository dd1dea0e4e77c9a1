"""The sharding laws: sharded programs equal unsharded ones and carry their shardings.

The law on a one-device mesh runs here, one test as for every topic; the others need
8 devices. One subprocess with 8 host devices runs all of
them (properties.multidevice), once, whatever the number of xdist workers;
each law's record joins the report. A law that failed fails the test; a law
that was skipped makes the test a skip naming it (never a pass)."""
import pytest

from properties.multidevice import device_laws, run_in_subprocess
from properties.plugin import law_tests
from properties.runner import RECORDS, LawRecord

globals().update(law_tests("sharding"))


def _record(rec, nodeid):
    fields = {k: v for k, v in rec.items() if k in LawRecord.__dataclass_fields__
              and k not in ("filtered", "unsupported", "nodeid")}
    return LawRecord(**fields, nodeid=nodeid)


def test_device_laws(pytestconfig, request):
    records = run_in_subprocess(backend=pytestconfig.getoption("--backend"),
                                profile=pytestconfig.getoption("--profile") or "default")
    RECORDS.extend(_record(rec, request.node.nodeid) for rec in records)
    request.node.user_properties.append(("law_records", records))  # a report row each
    failed = [f"law {r['law']}: {r.get('reason')}\n{r.get('counterexample', '')}"
              for r in records if r["outcome"] == "failed"]
    assert not failed, "\n\n".join(failed)
    skipped = [f"{r['law']}: {r['reason']}" for r in records if r["outcome"] == "skipped"]
    if skipped:
        passed = [r["law"] for r in records if r["outcome"] == "passed"]
        pytest.skip(f"skipped {'; '.join(skipped)} (passed: {', '.join(passed) or 'none'})")
    assert {r['law'] for r in records} == {law.name for law in device_laws()} and all(r["outcome"] == "passed" for r in records)
