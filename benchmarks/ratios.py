"""impl/JAX speed ratios measured in one process, for the closing note.

    python -m benchmarks.ratios                 # the target ratios
    python -m benchmarks.ratios --all           # every time_ benchmark
    python -m benchmarks.ratios --output reports/ratios.md
    python -m benchmarks.ratios --from-asv [--commit SHA]  # from stored asv results

Both backends are set up side by side and their repeats are interleaved
(impl, jax, jax, impl, ...) so drift in machine load hits both equally.
Each repeat times ``number`` back-to-back calls (calibrated so a repeat
lasts ``--min-time``); a compiled program's calls alternate one by one
within the repeat instead.  The ratio reported is the median over repeats of
impl/jax within a repeat (its two timings are a fraction of a second apart,
so slow drift of the machine cancels), with a distribution-free 95% interval
of that median; a target counts as met only when the whole interval is under it.
The benchmark bodies are the asv ones.
"""

import argparse
import math
import os
import platform
import statistics
import sys
import time

from benchmarks._harness import iter_cases

# (benchmark name, fixed params, target ratio): the ratios impl / JAX each benchmark must
# stay under.
TARGETS = [
    ("PerExampleGrads.time_compiled", {}, 1.05),
    ("Dispatch.time_cached_jit_dispatch", {}, 1.05),
    ("DispatchAdd.time_cached_jit_dispatch", {}, 1.05),
    ("EagerElementwise.time_add", {}, 1.0),
    ("EagerElementwise.time_sin", {}, 1.0),
    ("Tracing.time_make_jaxpr_vmap_grad_mlp", {}, 0.3),
    ("ConvLayerForward.time_compiled", {}, 1.05),
    ("ConvLayerGrad.time_compiled", {}, 1.05),
    ("ScanLoop.time_jit", {}, 1.05),
    ("CondHeavy.time_jit", {}, 1.05),
]


# What a repeat is timed with: wall-clock time, or the CPU time of the whole process
# (every thread, XLA's included), which other work sharing the cores inflates far less.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = CLOCKS["wall"]


def _calibrate(fn, min_time):
    """Calls per repeat so one repeat lasts at least ``min_time`` seconds.  A first call
    runs untimed: it may fill caches (a first trace, a first compile), and timed, it could
    make a repeat a single call, which would then also time what the other backend's
    repeat just left behind (a trace right after JAX's took a third longer)."""
    fn()
    number = 1
    while True:
        start = _clock()
        for _ in range(number):
            fn()
        elapsed = _clock() - start
        if elapsed >= min_time or number >= 1 << 20:
            return number
        number *= max(2, min(10, int(min_time / max(elapsed, 1e-9)) + 1))


def _repeat(fn, number):
    start = _clock()
    for _ in range(number):
        fn()
    return (_clock() - start) / number


#: Calls whose calling thread is busy for less than this share of their wall time (the
#: work runs on XLA's threads: a compiled program) are interleaved call by call within a
#: repeat (impl, jax, jax, impl, ...). Their time drifts over tens of calls (measured on a
#: 2-core VM: consecutive calls of a 5 ms program correlate at 0.5, and impl's and JAX's
#: calls made side by side at 0.6), so pairing calls cancels more of the drift than
#: pairing blocks. Calls that are Python on the calling thread (dispatch, tracing) keep
#: whole blocks: right after the other backend's call, the caches that call filled would
#: weigh on them (a trace right after JAX's took a tenth longer).
INTERLEAVE_BELOW_CALLER_SHARE = 0.5


def _caller_share(fn, number):
    """The calling thread's CPU time over the wall time of ``number`` calls."""
    wall, thread = time.perf_counter(), time.thread_time()
    for _ in range(number):
        fn()
    return (time.thread_time() - thread) / max(time.perf_counter() - wall, 1e-9)


def _interleaved_repeat(fns, order, number):
    """{backend: seconds per call}: ``number`` rounds, each calling every backend once
    in ``order`` (reversed every other round)."""
    totals = dict.fromkeys(order, 0.0)
    for k in range(number):
        for b in (order if k % 2 == 0 else order[::-1]):
            start = _clock()
            fns[b]()
            totals[b] += _clock() - start
    return {b: t / number for b, t in totals.items()}


def median_interval(values, confidence=0.95):
    """(low, high): a distribution-free interval for the median of ``values``,
    from the order statistics whose ranks the binomial(n, 1/2) law brackets."""
    xs = sorted(values)
    n = len(xs)
    tail, k = 0.0, 0   # k = how many order statistics fall outside on each side
    while True:
        nxt = tail + math.comb(n, k) / 2 ** n
        if nxt > (1 - confidence) / 2:
            break
        tail, k = nxt, k + 1
    if k == 0:
        return xs[0], xs[-1]   # too few repeats for the confidence asked
    return xs[k - 1], xs[n - k]


def verdict(low, high, target):
    if high <= target:
        return "meets target"
    if low > target:
        return "misses target"
    return "undecided: interval straddles target"


def measure_pair(case, repeats, min_time):
    """{"impl": [s per call], "jax": [...]} per repeat (paired by index) for one
    case, or a skip reason string."""
    pair = {b: case.with_param("backend", b) for b in ("impl", "jax")}
    objs = {}
    try:
        for b in ("jax", "impl"):
            try:
                objs[b] = pair[b].instance()
            except NotImplementedError as exc:
                return f"skipped ({b}): {exc}"
        fns = {b: pair[b].bound(objs[b]) for b in objs}
        numbers = {b: _calibrate(fns[b], min_time) for b in fns}
        samples = {b: [] for b in fns}
        interleave = all(_caller_share(fns[b], numbers[b]) < INTERLEAVE_BELOW_CALLER_SHARE
                         for b in fns)
        for i in range(repeats):
            # Alternate who goes first: the first of a pair pays for any
            # cache/branch-predictor state the other one left behind.
            order = ("impl", "jax") if i % 2 == 0 else ("jax", "impl")
            if interleave:
                for b, t in _interleaved_repeat(fns, order, max(numbers.values())).items():
                    samples[b].append(t)
                continue
            for b in order:
                samples[b].append(_repeat(fns[b], numbers[b]))
        return samples
    finally:
        for b in reversed(list(objs)):
            pair[b].teardown(objs[b])


def select(all_cases, device):
    """Cases to measure: targets (default) or every time_ benchmark."""
    cases = [
        c
        for c in iter_cases(prefixes=("time_",))
        if c.param("backend") == "jax" and c.param("device") == device
    ]
    if all_cases:
        return [(c, None) for c in cases]
    chosen = []
    for name, fixed, target in TARGETS:
        for c in cases:
            if c.name == name and all(c.param(k) == v for k, v in fixed.items()):
                chosen.append((c, target))
    return chosen


def fmt_time(seconds):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def machine_line(device):
    import jax

    from benchmarks.machine import cpu_model

    dev = jax.devices(device)[0] if device != "cpu" else None
    what = dev.device_kind if dev is not None else cpu_model()
    return (
        f"{platform.node()}: {what}, {platform.machine()}, {os.cpu_count()} cores, "
        f"device={device}, jax {jax.__version__}, Python {platform.python_version()}"
    )


def from_asv(commit, machine, device):
    """impl/jax for every benchmark (time, peakmem, track) of one stored run."""
    import os

    from benchmarks import plot

    _, results_dir = plot.load_config(os.path.join(plot.ROOT, "asv.conf.json"))
    if machine is None:
        from benchmarks.machine import machine_info

        machine = machine_info()["machine"]
    series, dates, kinds = plot.collect(results_dir, machine, device)
    if not dates:
        raise SystemExit(f"no stored results for machine {machine}")
    if commit is None:
        order = plot.commit_order(plot.ROOT, "main")
        commit = max(dates, key=lambda c: (order.get(c, -1), dates[c]))
    else:
        matches = [c for c in dates if c.startswith(commit)]
        if not matches:
            raise SystemExit(f"no stored results for {commit} on {machine}")
        commit = matches[0]
    lines = [
        f"asv results for commit {commit[:8]} on machine {machine}, device {device}",
        "(time: asv median seconds; peakmem: bytes; track: examples/s, higher is better)",
        "",
        "| benchmark [params] | impl | jax | impl/jax |",
        "|---|---|---|---|",
    ]
    for (key, rest), backends in sorted(series.items(), key=lambda kv: str(kv[0])):
        impl = backends.get("impl", {}).get(commit)
        jaxv = backends.get("jax", {}).get(commit)
        tag = ",".join(str(v) for _, v in rest)
        label = f"{key.split('.', 1)[-1]}[{tag}]" if tag else key.split(".", 1)[-1]

        def show(v):
            if v is None:
                return "n/a"
            return fmt_time(v) if kinds[key][0] == "time" else f"{v:.4g}"

        ratio = f"{impl / jaxv:.3f}" if impl is not None and jaxv else "n/a"
        lines.append(f"| {label} | {show(impl)} | {show(jaxv)} | {ratio} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every time_ benchmark")
    parser.add_argument("-k", dest="only", help="only benchmarks whose name contains this")
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds per repeat")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="time repeats by wall clock (default) or by the process' CPU "
                             "time (steadier on a machine other work shares)")
    parser.add_argument("--output", help="also write the table (markdown) here")
    parser.add_argument("--from-asv", action="store_true",
                        help="read stored asv results instead of measuring")
    parser.add_argument("--commit", help="with --from-asv: commit prefix (default newest)")
    parser.add_argument("--machine", help="with --from-asv: asv machine name")
    args = parser.parse_args(argv)

    if args.from_asv:
        text = from_asv(args.commit, args.machine, args.device)
        print(text)
        if args.output:
            with open(args.output, "w") as fh:
                fh.write(text + "\n")
        return 0

    global _clock
    _clock = CLOCKS[args.clock]
    rows = []
    for case, target in select(args.all, args.device):
        if args.only and args.only not in case.id:
            continue
        try:
            res = measure_pair(case, args.repeats, args.min_time)
        except Exception as exc:  # a broken impl commit: report, keep going
            res = f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        label = case.id.replace("-jax-", "-").replace("[jax-", "[")
        target_text = "" if target is None else f"<= {target}"
        if isinstance(res, str):
            rows.append((label, "", "", "", "", target_text, res))
        else:
            ratios = [i / j for i, j in zip(res["impl"], res["jax"])]
            low, high = median_interval(ratios)
            rows.append(
                (label, fmt_time(statistics.median(res["impl"])),
                 fmt_time(statistics.median(res["jax"])),
                 f"{statistics.median(ratios):.3f}", f"{low:.3f}-{high:.3f}", target_text,
                 "" if target is None else verdict(low, high, target))
            )
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)

    header = ("benchmark [params]", "impl median", "jax median", "impl/jax",
              "95% interval", "target", "note")
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"Machine: {machine_line(args.device)}",
        f"Load average (1/5/15 min) at the end: {load} -- other work shares these cores.",
        f"{args.repeats} interleaved repeats (>= {args.min_time}s of {args.clock} time "
        "each) per backend; "
        "impl/jax is the median of the per-repeat ratios, with its 95% interval; "
        "compiled programs (the calling thread busy under "
        f"{INTERLEAVE_BELOW_CALLER_SHARE:.0%} of a call) alternate call by call.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
