"""impl/JAX ratio regressions in the stored asv history, found by asv's step detection.

asv stores impl and JAX as two parameter values of one benchmark, so its own
regression report (``asv publish`` -> ``regressions.json``) looks at each
backend's timings on their own: a commit that slows the machine down slows
both, and a change that makes impl slower relative to JAX is only visible by
eye in the ratio plot.  Here the ratio is the series: for every benchmark and
remaining parameters, impl's cost relative to JAX's per measured commit
(impl/JAX for times, memory and tracked seconds or bytes; JAX/impl for
throughputs, so that up is always worse), oldest first along the configured
branch.  That series goes through the two functions ``asv publish`` runs on
every graph: ``asv.step_detect.detect_steps`` fits a piecewise-constant level
to it, and ``asv.step_detect.detect_regressions(steps, threshold)`` returns the
upward steps that leave the newest level worse than the best one, each as the
last commit at the lower level and the first commit at the higher one.

The series carries no weights: asv weights a point by the width of its
confidence interval, but the interval asv records is that of one backend
within one run, while what moves a ratio between commits is mostly the
machine's load drifting between the separate processes that measured impl
and JAX; so every commit counts the same, as asv treats a ``track_``
benchmark, which has no interval either.
"""

import dataclasses
import subprocess

from asv.step_detect import detect_regressions, detect_steps

from benchmarks import plot

#: A step is reported when the ratio rose by more than this fraction of the
#: level before it (asv's ``regressions_thresholds``, whose default is 0.05).
#: Ratios from separate asv processes drift by a few percent on a quiet
#: machine; a tenth keeps that out.  Targets tighter than that (impl within
#: 5 % of JAX) are checked in one process by ``benchmarks.ratios``.
DEFAULT_THRESHOLD = 0.10


@dataclasses.dataclass(frozen=True)
class Regression:
    benchmark: str
    params: tuple  # ((name, value), ...) besides backend and device
    measure: str  # "impl/JAX" or "JAX/impl": the cost ratio, higher is worse
    before: str  # last commit at the lower level
    after: str  # first commit at the higher level
    commits_in_step: int | None  # commits on the branch after ``before`` up to ``after``
    level_before: float
    level_after: float  # the lowest level from ``after`` on
    series: tuple  # ((commit, ratio), ...) oldest first
    notes: tuple = ()  # what else changed in the step (see ``annotate``)

    @property
    def label(self):
        tag = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.benchmark} [{tag}]" if tag else self.benchmark

    @property
    def latest(self):
        return self.series[-1][1]


def cost_ratio_series(series, kinds, commits):
    """{(benchmark, rest): (measure, [ratio or None per commit])}: impl's cost
    relative to JAX's, aligned with ``commits``."""
    out = {}
    for (key, rest), backends in series.items():
        ratios = plot.impl_over_jax(backends)
        if plot.higher_is_better(*kinds[key]):
            measure, ratios = "JAX/impl", {c: 1.0 / r for c, r in ratios.items() if r}
        else:
            measure = "impl/JAX"
        if ratios:
            out[(key, rest)] = (measure, [ratios.get(c) for c in commits])
    return out


def find_regressions(series, kinds, commits, order=None, threshold=DEFAULT_THRESHOLD):
    """The standing impl/JAX regressions of ``plot.collect``'s series, ``commits``
    oldest first; ``order`` (commit -> position on the branch) counts the
    commits inside each step."""
    order = order or {}
    found = []
    for (key, rest), (measure, ys) in sorted(cost_ratio_series(series, kinds, commits).items(),
                                             key=lambda kv: str(kv[0])):
        _, _, jumps = detect_regressions(detect_steps(ys), threshold)
        measured = tuple((c, y) for c, y in zip(commits, ys) if y is not None)
        for before, after, level_before, level_after in jumps or ():
            a, b = commits[before], commits[after]
            inside = order[b] - order[a] if a in order and b in order else None
            found.append(Regression(key, rest, measure, a, b, inside, level_before,
                                    level_after, measured))
    return found


def stored_regressions(results_dir, machine, device, order, threshold=DEFAULT_THRESHOLD):
    """(regressions, commits) of one machine's stored results."""
    series, dates, kinds = plot.collect(results_dir, machine, device)
    if not series:
        raise SystemExit(f"no impl and JAX results for machine {machine}, device {device} "
                         f"in {results_dir}")
    commits = plot.ordered_commits(dates, order)
    return find_regressions(series, kinds, commits, order, threshold), commits


def after_commit(regressions, commit, order):
    """Only the steps that end after ``commit`` on the branch (a step ending
    at a commit off the branch, measured after all of it, is kept)."""
    if commit not in order:
        raise SystemExit(f"{commit[:8]} is not on the benchmarked branch")
    return [r for r in regressions if order.get(r.after, float("inf")) > order[commit]]


def _impl_changed(repo, a, b, package="impl"):
    """True/False: does ``package`` differ between commits a and b; None if
    git cannot tell (commits unknown to the repository)."""
    rc = subprocess.run(["git", "-C", repo, "diff", "--quiet", a, b, "--", package],
                        capture_output=True).returncode
    return {0: False, 1: True}.get(rc)


def annotate(regressions, repo, environments):
    """Add to each step what else explains it: ``impl`` unchanged between its
    two commits (then the step is the machine's noise or the measuring code's,
    not impl's), or a recorded environment change (``environments.jsonl``)."""
    out = []
    for r in regressions:
        notes = []
        if _impl_changed(repo, r.before, r.after) is False:
            notes.append(f"impl/ is the same at {r.before[:8]} and {r.after[:8]}")
        notes.extend(text for _, text in plot.environment_changes([r.before, r.after],
                                                                  environments))
        out.append(dataclasses.replace(r, notes=tuple(notes)))
    return out


def _step_text(r):
    if r.commits_in_step == 1:
        return f"in commit {r.after[:8]}"
    inside = f", {r.commits_in_step} commits" if r.commits_in_step else ""
    return f"in {r.before[:8]}..{r.after[:8]}{inside}"


def format_report(regressions, machine, device, commits, threshold):
    head = (f"impl/JAX ratio regressions on {machine} ({device}), {len(commits)} commits "
            f"measured, asv step detection, threshold {threshold:.0%}:")
    if not regressions:
        return head + "\n  none"
    lines = [head]
    for r in regressions:
        rise = r.level_after / r.level_before - 1 if r.level_before else float("inf")
        lines.append(f"  {r.label}: {r.measure} {r.level_before:.3g} -> {r.level_after:.3g} "
                     f"(+{rise:.0%}) {_step_text(r)}; latest {r.latest:.3g}")
        lines.append("      " + " ".join(f"{c[:8]}:{y:.3g}" for c, y in r.series))
        lines.extend(f"      note: {note}" for note in r.notes)
    return "\n".join(lines)
