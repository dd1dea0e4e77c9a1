"""Behaviour mutants of impl: its API with the numbers right and the behaviour wrong.

``python -m tools.mutation.behaviour [--examples N] [--only SUBSTRING]``

Each mutant wraps one transformation of impl (``properties.broken.Wrapped``) with one
behaviour operator: results strongly typed, float results as float64, one extra call of the
user's function, TypeError and ValueError swapped, a returned function that is a plain
closure, a jit that never caches, custom rules that also run the primal function.  The
behaviour laws (``properties/laws/behaviour.py``; the differential ones included: comparing
with JAX is what they are for) run against it, on cases that use the mutated
transformation; a mutant is *killed* when a law fails on a case that passes on impl itself.
Prints one line per mutant and the kill rate; ``--json PATH`` writes the results.
"""
from __future__ import annotations

import argparse
import json
import time

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from properties import broken, cases
from properties.backends import LawSkipped, load_backend
from properties.laws import CaseFiltered, get

#: transformations returning a function of the user's arguments, and those called at once
RETURNS_FUNCTION = ("grad", "value_and_grad", "vmap", "jit")
CALLED_AT_ONCE = ("jvp", "vjp", "linearize")


def _map_outputs(transformation, name, fn):
    """``transformation`` with ``fn`` applied to what the user gets back (for vjp and
    linearize: the primal output and the returned function's outputs)."""
    if name in RETURNS_FUNCTION:
        def transform(f, *a, **kw):
            g = transformation(f, *a, **kw)
            return lambda *args, **kwargs: fn(g(*args, **kwargs))
        return transform
    if name == "jvp":
        return lambda *a, **kw: fn(transformation(*a, **kw))

    def returning_function(*a, **kw):
        y, g, *rest = transformation(*a, **kw)
        return (fn(y), lambda *args: fn(g(*args)), *rest)
    return returning_function


def _strong(base):
    return lambda tree: broken._strongly_typed(base, tree)


def _float64(base):
    np_ = base.numpy

    def cast(tree):
        return broken.tree_map(lambda o: np_.asarray(o, dtype="float64")
                               if getattr(o, "dtype", None) == "float32" else o, tree)
    return cast


def _extra_call(transformation, name):
    """``transformation`` that calls the user's function once more, first."""
    if name in RETURNS_FUNCTION:
        return broken.calling_first(transformation)

    def at_once(f, *a, **kw):
        f(*(a[0] if name == "jvp" else a))
        return transformation(f, *a, **kw)
    return at_once


def _swapped(transformation, raised, raising):
    def call(fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except raised as exc:
            raise raising(str(exc)) from exc

    def swapping(out):
        return (lambda *args, **kwargs: call(out, *args, **kwargs)) if callable(out) else out

    def transform(*a, **kw):
        out = call(transformation, *a, **kw)
        if isinstance(out, tuple):   # vjp's and linearize's functions
            return tuple(swapping(o) for o in out)
        return swapping(out)
    return transform


def _closure(transformation):
    def transform(*a, **kw):
        y, g, *rest = transformation(*a, **kw)
        return (y, lambda *args: g(*args), *rest)
    return transform


def mutants(base):
    """[(name, overrides, laws to run in order, transformations the cases must use)]."""
    out = []
    for t in RETURNS_FUNCTION + CALLED_AT_ONCE:
        transformation = getattr(base, t)
        out += [
            (f"{t}: strong types", {t: _map_outputs(transformation, t, _strong(base))},
             ("differential_result_types", "result_types_agree_across_transformations"), t),
            (f"{t}: float64 results", {t: _map_outputs(transformation, t, _float64(base))},
             ("differential_result_types", "result_types_agree_across_transformations"), t),
            (f"{t}: an extra call", {t: _extra_call(transformation, t)},
             ("differential_call_counts", "jit_traces_once_per_signature"), t),
            (f"{t}: ValueError for TypeError", {t: _swapped(transformation, TypeError, ValueError)},
             ("differential_misuse_raises_alike",), t),
            (f"{t}: TypeError for ValueError", {t: _swapped(transformation, ValueError, TypeError)},
             ("differential_misuse_raises_alike",), t),
        ]
    out += [(f"{t}: a closure", {t: _closure(getattr(base, t))},
             ("differential_transformation_pytrees",), t) for t in ("vjp", "linearize")]
    out.append(("jit: retraces", broken.jit_retraces(base),
                ("jit_traces_once_per_signature", "differential_call_counts"), "jit"))
    out += [(f"{kind}: runs the primal", getattr(broken, f"{kind}_calls_primal")(base),
             ("custom_rules_never_run_primal_when_differentiated",), kind)
            for kind in ("custom_jvp", "custom_vjp")]
    return out


def _cases(law, transformation):
    """The law's cases, restricted to those using ``transformation`` where they draw one (the
    misuse law: one misuse per case, so that the control on impl is per misuse)."""
    uses = f"jax.{transformation}("
    if law.name == "differential_misuse_raises_alike":
        names = [n for n, expr in cases.MISUSES.items() if uses in expr]
        return cases.misuses(one_of=names) if names else law.cases()
    if law.name == "custom_rules_never_run_primal_when_differentiated":
        return law.cases().filter(lambda case: case.kind == transformation)
    if law.name in ("differential_result_types", "differential_call_counts"):
        names = [n for n, expr in cases.TRANSFORMATIONS.items() if uses in expr]
        if names:
            return cases.behaviour_cases(transformations=names)
    return law.cases()


def _passes(law, backend, case):
    try:
        law(backend, case)
    except (CaseFiltered, LawSkipped):
        return True
    except AssertionError:
        return False
    return True


def kill(base, overrides, label, law_names, transformation, examples):
    """(law, message) of the first law failing on the mutant on a case impl passes, or None."""
    mutant = broken.Wrapped(base, label, overrides)
    for name in law_names:
        law = get(name)
        found = []

        def killed(case):
            if _passes(law, mutant, case):
                return False
            if not _passes(law, base, case):
                return False   # impl itself fails there: not the mutant's doing
            found.append(case)
            return True
        config = settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                          phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        try:
            find(_cases(law, transformation), killed, settings=config)
        except NoSuchExample:
            continue
        return name, found[-1].describe()
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=12, help="cases per law and mutant")
    parser.add_argument("--only", default="", help="mutants whose name contains this")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    base = load_backend("impl")
    results = []
    for label, overrides, laws, transformation in mutants(base):
        if args.only not in label:
            continue
        start = time.time()
        verdict = kill(base, overrides, label.replace(" ", "_"), laws, transformation,
                       args.examples)
        results.append({"mutant": label, "killed_by": verdict and verdict[0],
                        "case": verdict and verdict[1], "seconds": round(time.time() - start, 1)})
        print(f"{label:40s} {'killed by ' + verdict[0] if verdict else 'SURVIVED'}"
              f"  {time.time() - start:.0f} s", flush=True)
    killed = sum(1 for r in results if r["killed_by"])
    print(f"killed {killed} of {len(results)} behaviour mutants"
          f" ({100 * killed / max(len(results), 1):.0f}%)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
