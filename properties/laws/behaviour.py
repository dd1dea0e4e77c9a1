"""Behaviour laws: what a user sees besides the numbers.

A JAX-like system can compute JAX's values and still behave differently: results
strongly typed where JAX's are weakly typed, the user's Python function run more or
fewer times, another exception type for the same mistake, a vjp function that is a
plain closure where JAX's is a pytree, a jit that traces on every call.  The
``differential_*`` laws here compare those with the reference backend (JAX; skipped
when the backend is JAX itself); the others need no reference.

The *behaviour* of a result is :func:`behaviour_of`: its pytree structure and, per
leaf, shape, dtype and weak type.  The *outcome* of running something is its
behaviour or the exception it raised (:func:`outcome`); the differential laws compare
outcomes as plain data (:func:`as_data`), which a standalone script can hold as the
reference's.
"""
from __future__ import annotations

import jax
import numpy as np

from ..backends import LawSkipped, MissingName
from ._common import CaseFiltered, differential, discard, fail
from .jax_bugs import built_on_jax


# --- what is compared ---------------------------------------------------------------------

def _typeof(x):
    """The abstract type of one leaf: JAX's ``typeof`` reads jax arrays, tracers, NumPy
    arrays and Python scalars alike (a Python scalar is weakly typed)."""
    return jax.typeof(x)


def behaviour_of(tree):
    """(treedef, [(shape, dtype, weak_type) per leaf]) of a result pytree."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    types = []
    for leaf in leaves:
        aval = _typeof(leaf)
        types.append((tuple(aval.shape), np.dtype(aval.dtype), bool(aval.weak_type)))
    return treedef, types


class Raised:
    """The outcome of a call that raised: compared by exception type."""

    def __init__(self, exc):
        self.exc = exc


#: exceptions that are not an outcome: the harness' own signals
_SIGNALS = (MissingName, CaseFiltered, LawSkipped)


def outcome(thunk):
    """``behaviour_of(thunk())``, or :class:`Raised` with the exception it raised."""
    try:
        return behaviour_of(thunk())
    except _SIGNALS:
        raise
    except Exception as exc:  # the exception is the behaviour compared
        return Raised(exc)


def as_data(o):
    """An outcome as plain data, as a standalone script records the reference's:
    ``("raises", the exception's class names, most derived first, its message's first line)``
    or ``("returns", the treedef's text, ((shape, dtype name, weak type) per leaf))``."""
    if isinstance(o, Raised):
        return ("raises", tuple(c.__name__ for c in type(o.exc).__mro__ if c is not object),
                (str(o.exc).splitlines() or [""])[0][:160])
    treedef, types = o
    return ("returns", str(treedef),
            tuple((shape, dtype.name, weak) for shape, dtype, weak in types))


def outcomes_agree(got, want):
    """Both return alike, or both raise, ``got`` what a user catching ``want``'s exception
    type catches: an instance of its class (a subclass is fine) or, for a backend with its
    own error classes, one of that name."""
    if got[0] == "raises" or want[0] == "raises":
        return got[0] == want[0] == "raises" and want[1][0] in got[1]
    return got == want


def shown_data(o):
    """An outcome as plain data (:func:`as_data`), for messages: ``raises TypeError: ...``,
    or the treedef and ``~float32[3]`` per leaf (``~``: weakly typed)."""
    if o[0] == "raises":
        return f"raises {o[1][0]}: {o[2]}"
    shown_types = ", ".join(f"{'~' if weak else ''}{dtype}{list(shape)}"
                            for shape, dtype, weak in o[2])
    return f"{o[1]} [{shown_types}]"


def same_outcome(case, what, got, want):
    """Outcomes (:func:`as_data`) that agree (:func:`outcomes_agree`)."""
    if not outcomes_agree(got, want):
        fail(case, f"{what}: {shown_data(got)}; expected {shown_data(want)}")


def same_outcomes(case, what, got, want):
    """``{label: outcome}`` that agree label by label."""
    differ = [f"{label}: {shown_data(got[label])}; expected {shown_data(w)}"
              for label, w in want.items() if not outcomes_agree(got[label], w)]
    if differ:
        fail(case, f"{what}:\n  " + "\n  ".join(differ))


def equal(case, what, got, want):
    """Plain data (counts, facts) equal."""
    if got != want:
        fail(case, f"{what}: {got}; expected {want}")


def shown(o):
    return shown_data(as_data(o))


class Counted:
    """A user function that counts its calls (the side effect the laws watch)."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


# --- differential laws ------------------------------------------------------------------

def result_types_of(backend, case):
    """The outcome of the drawn transformation of the user's function."""
    return as_data(outcome(lambda: case.transform(backend, case.user_function(backend))))


@differential(result_types_of, "result types", same_outcome)
def differential_result_types(backend, case):
    """Under a drawn transformation, results have JAX's pytree structure, dtypes and weak types
    (or both raise the same exception type)."""


def call_counts_of(backend, case):
    """Calls of the user's function: under the transformation, and by a jit called again
    with new values of the same types, and by a second jit of the same function."""
    f = Counted(case.user_function(backend))
    counts = {}
    outcome(lambda: case.transform(backend, f))
    counts[case.transformation] = f.calls
    f = Counted(case.user_function(backend))
    jitted = backend.jit(f)
    for label, args in (("jit", case.call_args), ("jit again", case.call_args),
                        ("jit, new values", case.other_values())):
        outcome(lambda: jitted(*args))
        counts[label] = f.calls
    outcome(lambda: backend.jit(f)(*case.call_args))
    counts["a second jit(f)"] = f.calls
    return counts


@differential(call_counts_of, "calls of the user's function", equal)
def differential_call_counts(backend, case):
    """The user's Python function runs as often as under JAX: under the drawn transformation
    and over repeated calls of jit (cumulative counts)."""


def misuse_outcomes_of(backend, case):
    """The outcome of each misuse."""
    return {misuse: as_data(outcome(lambda: case.run(backend, misuse))) for misuse in case.misuses}


@differential(misuse_outcomes_of, "misuses", same_outcomes)
def differential_misuse_raises_alike(backend, case):
    """A misuse (bad axes, mismatched batch sizes, integer inputs to grad, ...) raises the
    exception type JAX raises, or runs where JAX runs."""


def _function_output(backend, case, which):
    """The function a transformation returns: vjp's pullback or linearize's jvp function."""
    f = case.user_function(backend)
    if which == "vjp":
        return backend.vjp(f, *case.call_args)[1]
    return backend.linearize(f, *case.call_args)[1]


def _function_input(case, which, y):
    return (y,) if which == "vjp" else case.tangents()


def _pytree_facts(backend, case, which):
    """What a user can do with the returned function as a pytree: flatten it to arrays,
    rebuild it and call it (computing what it computed), and return it from jit."""
    fn = _function_output(backend, case, which)
    leaves, treedef = jax.tree_util.tree_flatten(fn)
    facts = {"a pytree (not a leaf)": not (len(leaves) == 1 and leaves[0] is fn)}
    if not facts["a pytree (not a leaf)"]:
        return facts
    facts["leaves are arrays"] = all(hasattr(leaf, "shape") and hasattr(leaf, "dtype")
                                     for leaf in leaves)
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    facts["rebuilt from its leaves, callable"] = callable(rebuilt)
    facts["returned from jit"] = not isinstance(
        outcome(lambda: backend.jit(lambda *a: _function_output(backend, case, which))(
            *case.call_args)), Raised)
    if callable(rebuilt):
        x = _function_input(case, which, case.user_function(backend)(*case.call_args))
        a, b = jax.tree_util.tree_leaves(rebuilt(*x)), jax.tree_util.tree_leaves(fn(*x))
        facts["rebuilt, computes what it computed"] = all(
            np.array_equal(np.asarray(p), np.asarray(q)) for p, q in zip(a, b))
    return facts


def transformation_pytrees_of(backend, case):
    return {which: _pytree_facts(backend, case, which) for which in ("vjp", "linearize")}


@differential(transformation_pytrees_of, "functions vjp and linearize return", equal)
def differential_transformation_pytrees(backend, case):
    """vjp's function and linearize's jvp function are pytrees of arrays where JAX's are: they
    flatten, rebuild into the same function, and can be returned from jit."""


# --- laws without a reference -----------------------------------------------------------

def jit_traces_once_per_signature(backend, case):
    """jit(f) runs f once per argument signature (shapes, dtypes, weak types): not again on
    new values of the same types, once more on new dtypes, not again on the first types."""
    f = Counted(case.user_function(backend))
    jitted = backend.jit(f)
    for label, args, more in (("first call", case.call_args, 1),
                              ("same arguments", case.call_args, 0),
                              ("new values, same types", case.other_values(), 0),
                              ("new dtypes", case.retyped_args(), 0 if all(case.weak) else 1),
                              ("the first arguments again", case.call_args, 0)):
        before = f.calls
        result = outcome(lambda: jitted(*args))
        if isinstance(result, Raised):
            discard(f"jit raised {type(result.exc).__name__} ({label})")
        if f.calls - before != more:
            fail(case, f"jit(f) ran f {f.calls - before} times on the {label}, expected {more}"
                       f" (calls so far: {f.calls})")


def custom_rules_never_run_primal_when_differentiated(backend, case):
    """Under jvp, grad, vjp and linearize (and those under vmap or jit), a custom_jvp function
    runs only its rule and a custom_vjp function only fwd/bwd: the primal function body is
    never called with the tracers of the differentiation."""
    np_ = backend.numpy
    body = Counted(case.primal(np_))
    if case.kind == "custom_jvp":
        f = backend.custom_jvp(body)
        f.defjvp(case.jvp_rule(np_))
    else:
        f = backend.custom_vjp(body)
        f.defvjp(case.fwd(np_), case.bwd(np_), optimize_remat=case.optimize_remat)
    case.differentiate(backend, f)
    if body.calls:
        fail(case, f"{case.kind}: {case.differentiation} ran the primal function {body.calls} "
                   "times; only the rule may run")


def _loop(backend, case, f):
    """The meaning of vmap(f) on the case's batch: f per batch element, stacked."""
    return backend.numpy.stack([f(*case.example_args(i)) for i in range(case.size)])


def result_types_agree_across_transformations(backend, case):
    """The result of f has one dtype and weak type whether f runs eagerly, under jit, or under
    vmap (per example, in a loop or vmapped)."""
    f = case.user_function(backend)
    eager = outcome(lambda: f(*case.call_args))
    if isinstance(eager, Raised):
        discard(f"f raises {type(eager.exc).__name__}")
    _, ((shape, dtype, weak),) = eager
    got = {"jit": outcome(lambda: backend.jit(f)(*case.call_args))}
    vmapped = outcome(lambda: backend.vmap(f)(*case.batch(backend)))
    if not isinstance(vmapped, Raised):   # per example: without the batch axis
        vmapped = (vmapped[0], [(s[1:], d, w) for s, d, w in vmapped[1]])
    got["vmap, per example"] = vmapped
    for label, o in got.items():
        if isinstance(o, Raised):
            continue  # valid_programs_run_under_equivalent_stacks' concern
        _, ((s, d, w),) = o
        if label == "vmap, per example" and _weak_update_on_jax(backend, case):
            w = weak   # JAX's own departure (jax_bugs.DYNAMIC_UPDATE_SLICE_WEAK_UNDER_VMAP)
        if (s, d, w) != (shape, dtype, weak):
            fail(case, f"{label}: {'~' if w else ''}{d}{list(s)}, eagerly "
                       f"{'~' if weak else ''}{dtype}{list(shape)}")


def _weak_update_on_jax(backend, case):
    """Whether JAX's weak type of a batched dynamic_update_slice of a weak operand is
    what this case meets (a backend built on JAX, a weak input, the op drawn)."""
    return (built_on_jax(backend) and any(case.weak)
            and any(n.op == "dynamic_update_slice" for n in case.program.nodes))


def valid_programs_run_under_equivalent_stacks(backend, case):
    """A program that runs eagerly runs under jit; vmap runs where the Python loop runs; grad
    runs under jit where it runs without: no stack raises where an equivalent one does not."""
    f = case.user_function(backend)
    np_ = backend.numpy

    def grad():
        return backend.grad(lambda *a: np_.sum(f(*a)), argnums=case.float_argnums)

    pairs = [("f", lambda: f(*case.call_args), "jit(f)",
              lambda: backend.jit(f)(*case.call_args)),
             ("a loop over the batch", lambda: _loop(backend, case, f), "vmap(f)",
              lambda: backend.vmap(f)(*case.batch(backend))),
             ("grad(f)", lambda: grad()(*case.call_args), "jit(grad(f))",
              lambda: backend.jit(grad())(*case.call_args))]
    for a_label, a, b_label, b in pairs:
        oa, ob = outcome(a), outcome(b)
        if isinstance(oa, Raised) != isinstance(ob, Raised):
            fail(case, f"{a_label} {shown(oa) if isinstance(oa, Raised) else 'runs'}, "
                       f"{b_label} {shown(ob) if isinstance(ob, Raised) else 'runs'}")
