"""`print_saved_residuals` prints what JAX prints for the programs of JAX's remat
tutorial (docs/notebooks/autodiff_remat.md): the residuals in JAX's order (constants,
arguments, then computed values in the order they were computed) with JAX's
provenance ("from the argument x", "output of sin from file:line:column (fn)").

The programs are written once over the module pair, so both runs compute at the same
lines and columns of this file."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
from jax import ad_checkpoint as jax_ad_checkpoint

import impl
import impl.numpy as inp
from impl import ad_checkpoint as impl_ad_checkpoint

APIS = {"jax": (jax, jjnp, jax_ad_checkpoint), "impl": (impl, inp, impl_ad_checkpoint)}


def _tutorial(J, N, A):
    """The tutorial's cells, each printing its residuals."""
    def g(W, x):
        y = N.dot(W, x)
        return N.sin(y)

    def f(W1, W2, W3, x):
        x = g(W1, x)
        x = g(W2, x)
        x = g(W3, x)
        return x

    W1, W2, W3, x = N.ones((5, 4)), N.ones((6, 5)), N.ones((7, 6)), N.ones(4)
    A.print_saved_residuals(f, W1, W2, W3, x)

    def f2(W1, W2, W3, x):
        x = J.checkpoint(g)(W1, x)
        x = J.checkpoint(g)(W2, x)
        x = J.checkpoint(g)(W3, x)
        return x

    A.print_saved_residuals(f2, W1, W2, W3, x)
    f3 = J.checkpoint(f, policy=J.checkpoint_policies.checkpoint_dots_with_no_batch_dims)
    A.print_saved_residuals(f3, W1, W2, W3, x)

    def f4(W1, W2, W3, x):
        x = A.checkpoint_name(g(W1, x), name='a')
        x = A.checkpoint_name(g(W2, x), name='b')
        x = A.checkpoint_name(g(W3, x), name='c')
        return x

    f4 = J.checkpoint(f4, policy=J.checkpoint_policies.save_only_these_names('a'))
    A.print_saved_residuals(f4, W1, W2, W3, x)

    def layer(W, x):
        return N.sin(N.dot(W, x))

    def predict(params, x):
        *Ws, Wlast = params
        for i, W in enumerate(Ws):
            x = layer(W, x)
            x = A.checkpoint_name(x, name=f'layer{i}_output')
        return N.dot(Wlast, x)

    def loss(params, x, y):
        return N.sum((predict(params, x) - y) ** 2)

    W = N.ones((4, 4))
    params, x, y = [W, W, W], N.ones(4), N.ones(4)
    A.print_saved_residuals(loss, params, x, y)
    for policy in (J.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
                   J.checkpoint_policies.save_any_names_but_these('layer1_output')):
        A.print_saved_residuals(J.checkpoint(loss, policy=policy), params, x, y)
    A.print_saved_residuals(lambda x: N.sin(N.sin(x)) * x, 1.0)
    A.print_saved_residuals(lambda a, b=2.0: N.exp(a) * b, 1.0, b=3.0)


def test_print_saved_residuals_prints_as_jax(capsys):
    _tutorial(*APIS["jax"])
    want = capsys.readouterr().out
    _tutorial(*APIS["impl"])
    got = capsys.readouterr().out
    assert f"output of sin from {__file__}:" in want and "from the argument W1" in want
    assert got.splitlines() == want.splitlines()


def _name_policies(J, N, A):
    def f(W1, W2, x):
        h = A.checkpoint_name(N.sin(N.dot(W1, x)), 'a')
        g = A.checkpoint_name(N.cos(N.dot(W2, h)), 'b')
        return N.sum(N.tanh(g) * h)

    P = J.checkpoint_policies
    W1, W2, x = N.ones((3, 3)), N.ones((3, 3)) * 0.5, N.ones(3)
    for policy in (P.save_anything_except_these_names('a'),
                   P.save_anything_except_these_names('a', 'b'),
                   P.save_only_these_names('a'), P.save_only_these_names('a', 'b'),
                   P.save_any_names_but_these('a'), P.save_any_names_but_these(),
                   P.save_from_both_policies(P.dots_saveable, P.save_only_these_names('b'))):
        A.print_saved_residuals(J.checkpoint(f, policy=policy), W1, W2, x)
        print("--")


def test_name_policies_save_what_jax_saves(capsys):
    # JAX 0.10.2's save_anything_except_these_names saves every value, named ones under
    # their names included.
    _name_policies(*APIS["jax"])
    want = capsys.readouterr().out
    _name_policies(*APIS["impl"])
    got = capsys.readouterr().out
    assert "named 'a'" in want.split("--")[0]
    assert got.splitlines() == want.splitlines()


def test_saved_residuals_of_a_jitted_function_name_it():
    # JAX keeps saved_residuals out of its public ad_checkpoint module.
    from jax._src import ad_checkpoint as jax_internal

    def run(J, N, saved):
        h = J.jit(lambda x: N.sin(x) * 2.0)
        return [d.split(" from ")[0] for _, d in saved(lambda x: N.sin(h(x)),
                                                       np.float32(0.5))]
    want = run(jax, jjnp, jax_internal.saved_residuals)
    got = run(impl, inp, impl_ad_checkpoint.saved_residuals)
    assert got == want


def _redefined_global(J, N, A):
    # The tutorial redefines `predict` after checkpointing `loss`: the checkpoint of
    # the same `loss` keeps its first trace, so the names the new `predict` gives are
    # not seen (JAX caches checkpoint's traces on the function).
    scope = {"predict": N.sin}

    def loss(x):
        return N.sum(scope["predict"](x) ** 2)

    x = N.ones(3)
    policies = J.checkpoint_policies
    A.print_saved_residuals(J.checkpoint(loss, policy=policies.dots_saveable), x)
    scope["predict"] = lambda x: A.checkpoint_name(N.sin(x), name="hidden")
    A.print_saved_residuals(J.checkpoint(
        loss, policy=policies.save_any_names_but_these("other")), x)
    A.print_saved_residuals(loss, x)   # not checkpointed: traced afresh


def test_checkpoint_keeps_the_first_trace_of_a_function(capsys):
    _redefined_global(*APIS["jax"])
    want = capsys.readouterr().out
    _redefined_global(*APIS["impl"])
    got = capsys.readouterr().out
    first, second = want.splitlines()[:2]   # both checkpoints keep only x
    assert first == second and first.endswith("from the argument x")
    assert got.splitlines() == want.splitlines()
