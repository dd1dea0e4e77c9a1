"""jit's trace cache, against JAX: traces are kept on the function object (weakly), keyed
by static arguments, argument types and the tracing configuration, and shared by every
`jit(f)` and `make_jaxpr(f)` of the function; `clear_caches` empties every cache.

Each test runs the same program on JAX and on impl and compares how many times Python
ran the user's function (a side-effect counter) or what it printed."""
from __future__ import annotations

import gc
import weakref

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from impl import core

APIS = {"jax": (jax, jjnp), "impl": (impl, inp)}
X = np.float32(1.0)


def test_a_global_read_is_the_one_of_the_first_trace(capsys):
    # The "pure functions" gotcha of JAX's sharp-bits page.
    def run(J):
        scope = {"g": 0.0, "J": J}
        exec("def impure_uses_globals(x):\n    return x + g\n", scope)
        f = scope["impure_uses_globals"]
        print(J.jit(f)(4.0))
        scope["g"] = 10.0
        print(J.jit(f)(5.0))      # a new jit of the same function: the first trace
        return capsys.readouterr().out
    want, got = run(jax), run(impl)
    assert want == "4.0\n5.0\n"
    assert got == want


def _count_traces(J, N, steps):
    calls = []

    def f(x):
        calls.append(1)
        return x * 2.0

    counts = []
    for step in steps:
        del calls[:]
        step(J, N, f)
        counts.append(len(calls))
    return counts


STEPS = {
    "jit made twice": lambda J, N, f: (J.jit(f)(X), J.jit(f)(X)),
    "grad of another jit": lambda J, N, f: J.grad(J.jit(f))(X),
    "vmap of another jit": lambda J, N, f: J.vmap(J.jit(f))(np.ones(3, np.float32)),
    "weak-typed argument": lambda J, N, f: J.jit(f)(1.0),
    "donating jit": lambda J, N, f: J.jit(f, donate_argnums=0)(N.ones(())),
    "static argument": lambda J, N, f: J.jit(f, static_argnums=0)(1.0),
    "static argument again": lambda J, N, f: J.jit(f, static_argnums=0)(1.0),
    "make_jaxpr of the jit": lambda J, N, f: J.make_jaxpr(J.jit(f))(X),
    "make_jaxpr of the function": lambda J, N, f: J.make_jaxpr(f)(X),
    "jit inside jit": lambda J, N, f: J.jit(lambda y: J.jit(f)(y) + 1)(X),
    "new shape": lambda J, N, f: J.jit(f)(np.ones(2, np.float32)),
    "new shape inside jit": lambda J, N, f: J.jit(lambda y: J.jit(f)(y) + 2)(
        np.ones(2, np.float32)),
}


def test_traces_are_shared_by_every_jit_of_a_function():
    steps = list(STEPS.values())
    want = _count_traces(jax, jjnp, steps)
    got = _count_traces(impl, inp, steps)
    assert dict(zip(STEPS, got)) == dict(zip(STEPS, want))
    assert want[0] == 1 and 0 in want   # the check sees both tracing and reuse


def _counted_add_one():
    """x + 1.0, and the list its calls are appended to (one entry per trace)."""
    calls = []

    def f(x):
        calls.append(1)
        return x + 1.0

    return f, calls


@pytest.mark.parametrize("name", ["jax", "impl"])
def test_the_tracing_configuration_is_part_of_the_key(name):
    J, N = APIS[name]
    f, calls = _counted_add_one()
    J.jit(f)(X)
    with J.numpy_dtype_promotion("strict"):
        J.jit(f)(X)
    J.jit(f)(X)
    assert len(calls) == 2


@pytest.mark.parametrize("name", ["jax", "impl"])
def test_clear_caches_makes_every_jit_trace_again(name):
    J, N = APIS[name]
    f, calls = _counted_add_one()
    J.jit(f)(X)
    J.grad(J.jit(f))(X)
    J.clear_caches()
    J.jit(f)(X)
    J.make_jaxpr(f)(X)
    assert len(calls) == 2


def test_clear_caches_empties_the_programs_derived_from_staged_ones():
    f = impl.jit(lambda x: inp.sin(x) * 2.0)
    impl.grad(f)(X)
    impl.vmap(f)(np.ones(3, np.float32))
    assert core._programs_with_derived
    impl.clear_caches()
    assert not core._programs_with_derived


@pytest.mark.parametrize("name", ["jax", "impl"])
def test_the_cache_does_not_keep_the_function_alive(name):
    J, N = APIS[name]

    def make():
        def f(x):
            return x * 2.0
        return f

    f = make()
    alive = weakref.ref(f)
    jf = J.jit(f)
    jf(X)
    J.grad(jf)(X)
    J.make_jaxpr(f)(X)
    del f, jf
    gc.collect()
    assert alive() is None


def test_functions_that_cannot_be_weakly_referenced_are_jitted_and_cleared():
    class Slotted:
        __slots__ = ()

        def __call__(self, x):
            calls.append(1)
            return x + 1.0

    calls = []
    f = impl.jit(Slotted())
    assert f(X) == 2.0 and f(X) == 2.0 and impl.grad(f)(X) == 1.0
    assert len(calls) == 1
    impl.clear_caches()
    f(X)
    assert len(calls) == 2


CHECKPOINT_STEPS = {
    "grad of checkpoint": lambda J, N, f: J.grad(J.checkpoint(f))(X),
    "grad of another checkpoint": lambda J, N, f: J.grad(J.checkpoint(f))(X),
    "checkpoint called": lambda J, N, f: J.checkpoint(f)(X),
    "another policy": lambda J, N, f: J.grad(J.checkpoint(
        f, policy=J.checkpoint_policies.dots_saveable))(X),
    "jit keeps its own cache": lambda J, N, f: J.jit(f)(X),
    "checkpoint inside jit": lambda J, N, f: J.jit(J.checkpoint(f))(X),
    "vmap of checkpoint": lambda J, N, f: J.vmap(J.checkpoint(f))(np.ones(3, np.float32)),
    "weak-typed argument": lambda J, N, f: J.checkpoint(f)(1.0),
}


def test_checkpoint_caches_its_traces_on_the_function_as_jax():
    steps = list(CHECKPOINT_STEPS.values())
    want = _count_traces(jax, jjnp, steps)
    got = _count_traces(impl, inp, steps)
    assert dict(zip(CHECKPOINT_STEPS, got)) == dict(zip(CHECKPOINT_STEPS, want))
    assert want[0] == 1 and want[1] == 0
