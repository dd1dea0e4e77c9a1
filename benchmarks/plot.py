"""Render the asv history as PNGs in reports/, impl and JAX side by side.

    python -m benchmarks.plot                       # every machine in results_dir
    python -m benchmarks.plot --machine vm-cpu --device cpu

Writes ``reports/benchmarks-history-<machine>.png``: one panel per benchmark,
time (or memory / throughput) per commit, impl solid and JAX dashed in the
same colour for the same remaining parameters; and
``reports/benchmarks-ratio-<machine>.png``: impl/JAX per commit with the
parity line.  Values are asv's stored medians.  Commits are ordered as on
the configured branch (git rev-list), falling back to commit date.
"""

import argparse
import ast
import collections
import itertools
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def collect(results_dir, machine, device):
    """{(benchmark, rest-params): {backend: {commit: value}}}, commit dates."""
    from asv import results as asv_results

    series = collections.defaultdict(lambda: collections.defaultdict(dict))
    dates, units = {}, {}
    for res in asv_results.iter_results_for_machine(results_dir, machine):
        dates[res.commit_hash] = res.date
        for key in res.get_all_result_keys():
            params = res.get_result_params(key)
            names = _param_names(results_dir, key, len(params))
            if "backend" not in names:
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
                units[key] = _unit(key)
    return series, dates, units


def _is_literal(text):
    try:
        ast.literal_eval(text)
        return True
    except (ValueError, SyntaxError):
        return False


_BENCHMARKS_JSON = {}


def _param_names(results_dir, key, n):
    """Parameter names from asv's benchmarks.json (written by every run)."""
    import json

    if results_dir not in _BENCHMARKS_JSON:
        path = os.path.join(results_dir, "benchmarks.json")
        try:
            with open(path) as fh:
                _BENCHMARKS_JSON[results_dir] = json.load(fh)
        except OSError:
            _BENCHMARKS_JSON[results_dir] = {}
    info = _BENCHMARKS_JSON[results_dir].get(key, {})
    names = info.get("param_names") or []
    return names if len(names) == n else ["backend", "device", "size", "rule"][:n]


def _unit(key):
    method = key.rsplit(".", 1)[-1]
    if method.startswith("peakmem_"):
        return "peak RSS (MB)"
    if method.startswith("track_"):
        return "value"
    return "seconds"


def _fmt_seconds(v):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if v >= scale:
            return f"{v / scale:g} {unit}"
    return f"{v / 1e-9:g} ns"


def plot(series, dates, units, order, machine, device, outdir):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    commits = sorted(dates, key=lambda c: (order.get(c, float("inf")), dates[c]))
    x_of = {c: i for i, c in enumerate(commits)}
    labels = [c[:8] for c in commits]
    by_bench = collections.defaultdict(list)
    for (key, rest), backends in sorted(series.items(), key=lambda kv: str(kv[0])):
        by_bench[key].append((rest, backends))
    if not by_bench:
        raise SystemExit(f"no results with a backend parameter for {machine}/{device}")

    paths = []
    for kind in ("history", "ratio"):
        n = len(by_bench)
        cols = 3 if n > 4 else 2
        rows = -(-n // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.6 * rows), squeeze=False)
        for ax, (key, entries) in zip(axes.flat, sorted(by_bench.items())):
            colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
            for i, (rest, backends) in enumerate(entries):
                color = colors[i % len(colors)]
                tag = ", ".join(f"{v}" for _, v in rest)
                if kind == "history":
                    for backend, style in (("impl", "-o"), ("jax", "--s")):
                        pts = sorted((x_of[c], v) for c, v in backends.get(backend, {}).items())
                        if not pts:
                            continue
                        xs, ys = zip(*pts)
                        if units[key].startswith("peak"):
                            ys = [y / 2**20 for y in ys]
                        ax.plot(xs, ys, style, color=color, ms=4,
                                label=f"{backend} {tag}".strip())
                    if units[key] == "seconds":
                        from matplotlib.ticker import FuncFormatter, NullFormatter

                        ax.set_yscale("log")
                        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _fmt_seconds(v)))
                        ax.yaxis.set_minor_formatter(NullFormatter())
                    ax.set_ylabel(units[key])
                else:
                    impl, jaxv = backends.get("impl", {}), backends.get("jax", {})
                    pts = sorted((x_of[c], impl[c] / jaxv[c]) for c in impl if c in jaxv and jaxv[c])
                    if pts:
                        xs, ys = zip(*pts)
                        ax.plot(xs, ys, "-o", color=color, ms=4, label=tag or "impl/jax")
                    ax.axhline(1.0, color="gray", lw=0.8)
                    ax.set_ylabel("impl / jax")
            ax.set_title(key.split(".", 1)[-1], fontsize=9)
            ax.set_xticks(range(len(commits)))
            ax.set_xticklabels(labels, rotation=45, fontsize=7)
            ax.set_xlim(-0.5, len(commits) - 0.5)
            handles, _ = ax.get_legend_handles_labels()
            if handles:
                ax.legend(fontsize=6, ncol=2)
            else:
                ax.text(0.5, 0.5, "no impl data yet", ha="center", va="center",
                        transform=ax.transAxes, color="gray")
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        title = "impl vs JAX" if kind == "history" else "impl / JAX (lower is better for time)"
        fig.suptitle(f"{title}: machine {machine}, device {device}", fontsize=11)
        fig.tight_layout()
        path = os.path.join(outdir, f"benchmarks-{kind}-{machine}.png")
        fig.savefig(path, dpi=110)
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
        series, dates, units = collect(results_dir, machine, args.device)
        for path in plot(series, dates, units, order, machine, args.device, args.outdir):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
