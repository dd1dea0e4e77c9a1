"""Render the asv history as PNGs in reports/, impl and JAX side by side.

    python -m benchmarks.plot                       # every machine in results_dir
    python -m benchmarks.plot --machine vm-cpu --device cpu

Writes ``reports/benchmarks-history-<machine>.png``: one panel per benchmark,
its value per commit (time per call, peak memory or throughput, with the
unit on the axis), impl solid and JAX dashed in the same colour for the same
remaining parameters; and ``reports/benchmarks-ratio-<machine>.png``:
impl/JAX per commit against the parity line.  Values are asv's stored
medians.  Commits are ordered as on the configured branch (git rev-list),
falling back to commit date.  Where the recorded environment changed
between two commits (``environments.jsonl``: Python, jax, jaxlib, numpy,
kernel, devices) the lines break and a numbered marker points to the
change, listed under the figure.  A panel spanning more than a factor of
20 uses a log axis (ticks at 1, 2 and 5 of each decade, or at each decade
past a factor 1000); others are linear from zero.
"""

import argparse
import ast
import collections
import itertools
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: per machine, beside asv's results: one JSON line per (commit, environment)
ENVIRONMENTS = "environments.jsonl"

#: environment fields whose change marks a break in the plotted series
ENV_FIELDS = ("python", "jax", "jaxlib", "numpy", "kernel", "devices")
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def load_config(path):
    from asv.config import Config

    conf = Config.load(path)
    results_dir = conf.results_dir
    if not os.path.isabs(results_dir):
        results_dir = os.path.join(os.path.dirname(os.path.abspath(path)), results_dir)
    return conf, results_dir


def commit_order(repo_dir, branch):
    """Commit hash -> position on the branch, oldest first."""
    try:
        out = subprocess.run(
            ["git", "-C", repo_dir, "rev-list", "--reverse", "--topo-order", branch],
            check=True, capture_output=True, text=True,
        ).stdout.split()
    except (subprocess.CalledProcessError, OSError):
        return {}
    return {sha: i for i, sha in enumerate(out)}


def _benchmarks_json(results_dir):
    try:
        with open(os.path.join(results_dir, "benchmarks.json")) as fh:
            return json.load(fh)
    except OSError:
        return {}


def read_environment_rows(path):
    """The rows of an environments.jsonl file (none if it is absent)."""
    try:
        with open(path) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except OSError:
        return []


def read_environments(results_dir, machine):
    """{commit: environment} recorded for ``machine`` (newest record wins)."""
    rows = read_environment_rows(os.path.join(results_dir, machine, ENVIRONMENTS))
    return {r["commit"]: r for r in rows}


def _kind(info, key):
    """(kind, unit) of a benchmark from its method's prefix: time/seconds,
    peakmem/bytes, track/<its declared unit>."""
    kind = key.rsplit(".", 1)[-1].split("_", 1)[0]
    unit = info.get("unit") or {"time": "seconds", "peakmem": "bytes"}.get(kind, "")
    return kind, unit


def higher_is_better(kind, unit):
    """True for a throughput: a ``track_`` benchmark whose unit is a rate
    (``examples/s``).  Times, memory and tracked seconds or bytes are costs."""
    return kind == "track" and unit.endswith("/s")


def impl_over_jax(backends):
    """{commit: impl/JAX} for the commits where both backends were measured."""
    impl, jax = backends.get("impl", {}), backends.get("jax", {})
    return {c: impl[c] / jax[c] for c in impl if jax.get(c)}


def ordered_commits(dates, order):
    """The measured commits oldest first: as on the branch, then by date."""
    return sorted(dates, key=lambda c: (order.get(c, float("inf")), dates[c]))


def collect(results_dir, machine, device):
    """{(benchmark, rest-params): {backend: {commit: value}}}, commit dates, kinds."""
    from asv import results as asv_results

    meta = _benchmarks_json(results_dir)
    series = collections.defaultdict(lambda: collections.defaultdict(dict))
    dates, kinds = {}, {}
    for res in asv_results.iter_results_for_machine(results_dir, machine):
        dates[res.commit_hash] = res.date
        for key in res.get_all_result_keys():
            params = res.get_result_params(key)
            names = meta.get(key, {}).get("param_names") or []
            if "backend" not in names or len(names) != len(params):
                continue
            values = res.get_result_value(key, params)
            for combo, value in zip(itertools.product(*params), values):
                combo = [ast.literal_eval(p) if _is_literal(p) else p for p in combo]
                named = dict(zip(names, combo))
                if named.get("device", device) != device or value is None:
                    continue
                if value != value:  # NaN: failed
                    continue
                rest = tuple((k, v) for k, v in named.items() if k not in ("backend", "device"))
                series[(key, rest)][named["backend"]][res.commit_hash] = value
                kinds[key] = _kind(meta.get(key, {}), key)
    return series, dates, kinds


def _is_literal(text):
    try:
        ast.literal_eval(text)
        return True
    except (ValueError, SyntaxError):
        return False


def environment_changes(commits, environments):
    """[(x boundary, text)] where the environment differs from the previous commit's."""
    out, previous = [], None
    for i, commit in enumerate(commits):
        env = environments.get(commit)
        if env is None:
            continue
        if previous is not None:
            before, prev_commit = previous
            diffs = [f"{k} {_show(before.get(k))} -> {_show(env.get(k))}" for k in ENV_FIELDS
                     if k in before and k in env and before[k] != env[k]]
            if diffs:
                out.append((i - 0.5, f"{prev_commit[:8]} -> {commit[:8]}: " + "; ".join(diffs)))
        previous = (env, commit)
    return out


def _show(value):
    return ",".join(value) if isinstance(value, list) else str(value)


def _broken_line(points, boundaries):
    """xs, ys with a NaN gap wherever consecutive points straddle a boundary."""
    xs, ys = [], []
    for x, y in points:
        if xs and any(xs[-1] < b < x for b in boundaries):
            xs.append((xs[-1] + x) / 2)
            ys.append(float("nan"))
        xs.append(x)
        ys.append(y)
    return xs, ys


def _axis_unit(kind, unit, values):
    """(scale, label): values are divided by scale and plotted under label."""
    if kind == "time":
        typical = sorted(values)[len(values) // 2] if values else 1.0
        name, scale = next(((n, s) for n, s in TIME_UNITS if typical >= s), TIME_UNITS[-1])
        return scale, f"time per call [{name}]"
    if kind == "peakmem":
        return 2.0 ** 20, "peak RSS [MiB]"
    return 1.0, unit or "value"


def _value_axis(ax, kind, unit, values):
    """Label the value axis with its unit and pick its scale; returns the factor
    the values are divided by.  Past a factor 20 the axis is logarithmic, with
    labelled ticks at 1, 2 and 5 of each decade (only at each decade past a
    factor 1000, so the labels stay apart); otherwise linear from zero."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    scale, label = _axis_unit(kind, unit, values)
    ax.set_ylabel(label)
    scaled = [v / scale for v in values if v > 0]
    span = max(scaled) / min(scaled) if scaled else 1.0
    if span > 20:
        ax.set_yscale("log")
        labelled = (1.0, 2.0, 5.0) if span <= 1000 else (1.0,)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=labelled))
        ax.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.set_ylim(bottom=0, top=max(scaled or [1.0]) * 1.15)
    return scale


def _panels(series):
    """[(benchmark, [(rest-params, {backend: {commit: value}})])], one per panel."""
    by_bench = collections.defaultdict(list)
    for (key, rest), backends in sorted(series.items(), key=lambda kv: str(kv[0])):
        by_bench[key].append((rest, backends))
    return sorted(by_bench.items())


def _tag(rest):
    return " ".join(str(v) for _, v in rest)


def _draw_history(ax, entries, kind, unit, x_of, boundaries, colors):
    """Values per commit: impl solid with circles, JAX dashed with squares."""
    values = [v for _, backends in entries for b in backends.values() for v in b.values()]
    scale = _value_axis(ax, kind, unit, values)
    for color, (rest, backends) in zip(itertools.cycle(colors), entries):
        for backend, style in (("impl", "-o"), ("jax", "--s")):
            points = sorted((x_of[c], v / scale) for c, v in backends.get(backend, {}).items())
            if points:
                ax.plot(*_broken_line(points, boundaries), style, color=color, ms=4,
                        label=f"{backend} {_tag(rest)}".strip())


def _draw_ratio(ax, entries, kind, unit, x_of, boundaries, colors):
    """impl/JAX per commit (where both were measured) against the parity line."""
    from matplotlib.ticker import MaxNLocator

    tops = [1.0]
    for color, (rest, backends) in zip(itertools.cycle(colors), entries):
        points = sorted((x_of[c], r) for c, r in impl_over_jax(backends).items())
        if points:
            ax.plot(*_broken_line(points, boundaries), "-o", color=color, ms=4,
                    label=_tag(rest) or "impl / jax")
            tops.extend(y for _, y in points)
    ax.axhline(1.0, color="0.3", lw=1.0, ls=":")
    better = "higher is better" if higher_is_better(kind, unit) else "lower is better"
    ax.set_ylabel(f"impl / JAX [ratio; {better}]")
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.set_ylim(bottom=0, top=max(tops) * 1.15)


def _commit_axis(ax, commits):
    ax.set_xticks(range(len(commits)))
    ax.set_xticklabels([c[:8] for c in commits], rotation=30, fontsize=7)
    ax.set_xlim(-0.5, len(commits) - 0.5)
    ax.set_xlabel("commit (oldest to newest)", fontsize=8)


def _mark_environment_changes(ax, boundaries):
    """A dashed red line, numbered, between two commits measured in different
    environments (the lines of the series break there too)."""
    for number, x in enumerate(boundaries, 1):
        ax.axvline(x, color="tab:red", lw=1, ls="--")
        ax.annotate(f"env {number}", (x, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(2, -10), textcoords="offset points", color="tab:red", fontsize=7)


def _legend_outside(ax):
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    else:
        ax.text(0.5, 0.5, "no data for this figure yet", ha="center", va="center",
                transform=ax.transAxes, color="gray")


def _footnotes(fig, notes):
    """The environment changes, one line each, under the panels."""
    line = 0.02
    fig.tight_layout(rect=(0, line * len(notes), 1, 0.98))
    for n, note in enumerate(notes):
        fig.text(0.01, 0.005 + line * (len(notes) - 1 - n), note, fontsize=8, color="tab:red")


FIGURE_TITLES = {
    "history": "impl (solid) vs JAX (dashed)",
    "ratio": "impl / JAX (time and memory: lower is better; throughput: higher)",
}


def plot(series, dates, kinds, order, machine, device, outdir, environments=None):
    """Write the history and ratio PNGs of one machine and device; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(series)
    if not panels:
        raise SystemExit(f"no results with a backend parameter for {machine}/{device}")
    commits = ordered_commits(dates, order)
    x_of = {c: i for i, c in enumerate(commits)}
    changes = environment_changes(commits, environments or {})
    boundaries = [x for x, _ in changes]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    paths = []
    for figure, title in FIGURE_TITLES.items():
        cols, rows = 2, -(-len(panels) // 2)
        fig, axes = plt.subplots(rows, cols, figsize=(8.5 * cols, 3.4 * rows + 0.9),
                                 squeeze=False)
        for ax, (key, entries) in zip(axes.flat, panels):
            kind, unit = kinds[key]
            if figure == "history":
                _draw_history(ax, entries, kind, unit, x_of, boundaries, colors)
            else:
                _draw_ratio(ax, entries, kind, unit, x_of, boundaries, colors)
            _mark_environment_changes(ax, boundaries)
            _commit_axis(ax, commits)
            ax.set_title(key.split(".", 1)[-1], fontsize=9)
            ax.grid(True, axis="y", which="major", alpha=0.3)
            _legend_outside(ax)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        fig.suptitle(f"{title}: machine {machine}, device {device}", fontsize=11)
        _footnotes(fig, [f"env {n}: {text}" for n, (_, text) in enumerate(changes, 1)])
        path = os.path.join(outdir, f"benchmarks-{figure}-{machine}.png")
        fig.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(ROOT, "asv.conf.json"))
    parser.add_argument("--machine", action="append", help="default: all in results_dir")
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--outdir", default=os.path.join(ROOT, "reports"))
    args = parser.parse_args(argv)

    conf, results_dir = load_config(args.config)
    machines = args.machine or sorted(
        d for d in os.listdir(results_dir) if os.path.isdir(os.path.join(results_dir, d))
    )
    branch = (conf.branches or ["main"])[0] or "HEAD"
    order = commit_order(os.path.dirname(os.path.abspath(args.config)), branch)
    os.makedirs(args.outdir, exist_ok=True)
    for machine in machines:
        series, dates, kinds = collect(results_dir, machine, args.device)
        for path in plot(series, dates, kinds, order, machine, args.device, args.outdir,
                         read_environments(results_dir, machine)):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
