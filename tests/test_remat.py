"""impl.checkpoint / impl.remat, checkpoint policies and checkpoint_name against JAX:
values and gradients equal the un-rematerialized ones, the residuals the backward
pass keeps follow the policy (read off the IR, compared with JAX's), the
recomputation is fenced by an optimization barrier (prevent_cse), and checkpoint
composes with scan, vmap, jit and higher-order differentiation. Also the realistic
example of docs/control_flow.md: a recurrent model trained with scan + checkpoint +
dropout under jit(grad).
"""
from __future__ import annotations

import types

import jax
import jax._src.ad_checkpoint as jax_ad_checkpoint
import jax.ad_checkpoint
import numpy as np
import pytest

import impl
import impl.numpy as inp
from impl.interpreters import partial_eval as pe
from impl.primitives.remat import checkpoint_p
from _compare import F32, IMPL, JAX, assert_trees_close, check, x32

# saved_residuals is public in impl.ad_checkpoint; JAX keeps it in jax._src.
IMPL.ckpt = types.SimpleNamespace(name=impl.ad_checkpoint.checkpoint_name,
                                  saved=impl.ad_checkpoint.saved_residuals,
                                  policies=impl.checkpoint_policies)
JAX.ckpt = types.SimpleNamespace(name=jax.ad_checkpoint.checkpoint_name,
                                 saved=jax_ad_checkpoint.saved_residuals,
                                 policies=jax.checkpoint_policies)


def mlp(B):
    def f(w1, w2, x):
        h = B.ckpt.name(B.np.tanh(x @ w1), "hidden")
        y = B.np.sin(h @ w2)
        return B.np.sum(y * y)
    return f


MLP_ARGS = (x32(4, 5, seed=1) * 0.5, x32(5, 3, seed=2) * 0.5, x32(2, 4, seed=3))

POLICIES = {
    "default": lambda P: None,
    "nothing_saveable": lambda P: P.nothing_saveable,
    "everything_saveable": lambda P: P.everything_saveable,
    "dots_saveable": lambda P: P.dots_saveable,
    "checkpoint_dots": lambda P: P.checkpoint_dots,
    "dots_with_no_batch_dims_saveable": lambda P: P.dots_with_no_batch_dims_saveable,
    "save_only_these_names": lambda P: P.save_only_these_names("hidden"),
    "save_any_names_but_these": lambda P: P.save_any_names_but_these("hidden"),
    "save_from_both_policies": lambda P: P.save_from_both_policies(
        P.dots_saveable, P.save_only_these_names("hidden")),
}


def remat_mlp(policy):
    def prog(B):
        return B.api.checkpoint(mlp(B), policy=POLICIES[policy](B.ckpt.policies))
    return prog


def residuals(B, f, *args):
    """What the backward pass keeps: sorted (shape, dtype, source) triples."""
    return sorted((tuple(a.shape), np.dtype(a.dtype).name, d.split(" from /")[0])
                  for a, d in B.ckpt.saved(f, *args))


@pytest.mark.parametrize("policy", list(POLICIES))
def test_gradients_equal_unrematerialized(policy):
    check(remat_mlp(policy), *MLP_ARGS, eager="grad" if policy == "default" else "value")
    # The same gradient as without checkpoint, exactly in float64.
    args64 = tuple(a.astype(np.float64) for a in MLP_ARGS)
    g_remat = impl.grad(remat_mlp(policy)(IMPL), argnums=(0, 1, 2))(*args64)
    g_plain = jax.grad(mlp(JAX), argnums=(0, 1, 2))(*args64)
    assert_trees_close(g_remat, g_plain, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("policy", [p for p in POLICIES if p != "everything_saveable"])
def test_saved_residuals_follow_the_policy_as_in_jax(policy):
    got = residuals(IMPL, remat_mlp(policy)(IMPL), *MLP_ARGS)
    want = residuals(JAX, remat_mlp(policy)(JAX), *MLP_ARGS)
    assert got == want


def test_saved_residuals_by_policy():
    def kinds(policy):
        return sorted(d for _, _, d in residuals(IMPL, remat_mlp(policy)(IMPL), *MLP_ARGS))
    args = ["from the argument w1", "from the argument w2", "from the argument x"]
    assert kinds("nothing_saveable") == args
    assert kinds("default") == args
    assert kinds("dots_saveable") == sorted(args + ["output of dot_general"] * 2)
    assert kinds("save_only_these_names") == sorted(args + ["named 'hidden'"])
    # everything_saveable keeps what the plain function keeps.
    assert (residuals(IMPL, remat_mlp("everything_saveable")(IMPL), *MLP_ARGS)
            == residuals(IMPL, mlp(IMPL), *MLP_ARGS))
    # Outside a checkpoint, the backward pass keeps intermediates (sin's cosine, ...).
    assert len(residuals(IMPL, mlp(IMPL), *MLP_ARGS)) > len(args) + 2


def test_save_anything_except_these_names_saves_everything_as_jax_does():
    # JAX 0.10.2's policy of this name saves every value (tests/test_saved_residuals.py
    # compares the printed residuals with JAX's): the named value is kept under its name.
    plain = residuals(IMPL, mlp(IMPL), *MLP_ARGS)
    f = impl.checkpoint(mlp(IMPL), policy=impl.checkpoint_policies
                        .save_anything_except_these_names("hidden"))
    got = residuals(IMPL, f, *MLP_ARGS)
    assert "named 'hidden'" in [d for _, _, d in plain]
    assert got == residuals(IMPL, remat_mlp("everything_saveable")(IMPL), *MLP_ARGS)
    # the name-only policy excluding it does not save it
    f = impl.checkpoint(mlp(IMPL), policy=impl.checkpoint_policies
                        .save_any_names_but_these("hidden"))
    assert "named 'hidden'" not in [d for _, _, d in residuals(IMPL, f, *MLP_ARGS)]


def test_recomputation_lives_in_the_backward_checkpoint():
    f = impl.checkpoint(mlp(IMPL))
    ir = impl.make_jaxpr(impl.grad(f, argnums=(0, 1, 2)))(*MLP_ARGS)
    (eqn,) = [e for e in ir.eqns if e.primitive is checkpoint_p]
    assert eqn.params["differentiated"] is True
    names = [e.primitive.name for e in eqn.params["jaxpr"].eqns]
    assert "tanh" in names and "sin" in names          # recomputed from the inputs
    assert len(eqn.invars) == 3 + 1                    # w1, w2, x and the seed
    # With everything saved, the backward pass recomputes nothing.
    f = impl.checkpoint(mlp(IMPL), policy=impl.checkpoint_policies.everything_saveable)
    ir = impl.make_jaxpr(impl.grad(f, argnums=(0, 1, 2)))(*MLP_ARGS)
    (eqn,) = [e for e in ir.eqns if e.primitive is checkpoint_p]
    names = [e.primitive.name for e in eqn.params["jaxpr"].eqns]
    assert "tanh" not in names and "sin" not in names


@pytest.mark.parametrize("prevent_cse", [True, False])
def test_prevent_cse_puts_an_optimization_barrier(prevent_cse):
    f = impl.checkpoint(mlp(IMPL), prevent_cse=prevent_cse)
    text = impl.jit(impl.grad(f)).lower(*MLP_ARGS).as_text()
    assert ("optimization_barrier" in text) == prevent_cse
    # Forward-only evaluation needs no barrier (nothing is recomputed).
    assert "optimization_barrier" not in impl.jit(f).lower(*MLP_ARGS).as_text()


def test_prevent_cse_per_argument():
    f = impl.checkpoint(mlp(IMPL), prevent_cse=(True, False, False))
    text = impl.jit(impl.grad(f)).lower(*MLP_ARGS).as_text()
    barrier = [line for line in text.splitlines() if "optimization_barrier" in line]
    assert len(barrier) == 1 and "tensor<4x5xf32>" in barrier[0]
    assert_trees_close(impl.grad(f)(*MLP_ARGS), jax.grad(mlp(JAX))(*MLP_ARGS))


def test_static_argnums_and_argnames():
    def f(B):
        def g(x, train, scale=2.):
            return B.np.sin(x) * scale if train else B.np.cos(x)
        return g
    x = x32(3)
    for train in (True, False):
        fi = impl.checkpoint(f(IMPL), static_argnums=(1,))
        fj = jax.checkpoint(f(JAX), static_argnums=(1,))
        assert_trees_close(impl.grad(lambda x: inp.sum(fi(x, train)))(x),
                           jax.grad(lambda x: jax.numpy.sum(fj(x, train)))(x))
    fi = impl.checkpoint(f(IMPL), static_argnames=("train",))
    assert_trees_close(fi(x, train=True, scale=3.), f(JAX)(x, True, 3.))
    assert_trees_close(impl.remat(f(IMPL), static_argnums=1)(x, False), f(JAX)(x, False))


def test_checkpoint_name_is_the_identity_under_transformations():
    name = impl.ad_checkpoint.checkpoint_name
    x = x32(3)
    tree = name({"a": x, "b": (x, 2 * x)}, "t")
    assert_trees_close(tree, {"a": x, "b": (x, 2 * x)})
    assert_trees_close(impl.vmap(lambda v: name(v * 2, "n"))(x), x * 2)
    assert_trees_close(impl.jvp(lambda v: name(inp.sin(v), "n"), (x,), (x,)),
                       jax.jvp(jax.numpy.sin, (x,), (x,)))
    assert_trees_close(impl.linear_transpose(lambda v: name(v, "n"), x)(x), (x,))


# ---------------------------------------------------------------- compositions

def checkpoint_in_scan(policy):
    def prog(B):
        def f(w, h0, xs):
            cell = B.api.checkpoint(lambda h, x: B.np.tanh(h @ w + x),
                                    policy=POLICIES[policy](B.ckpt.policies))
            return B.lax.scan(lambda h, x: (cell(h, x), B.np.sum(h)), h0, xs)
        return f
    return prog


def scan_in_checkpoint(B):
    def f(w, h0, xs):
        def run(h0, xs):
            return B.lax.scan(lambda h, x: (B.np.sin(h * w + x), h), h0, xs)
        return B.api.checkpoint(run)(h0, xs)
    return f


def nested_checkpoints(B):
    def f(x, y):
        inner = B.api.checkpoint(lambda a: B.np.sin(a) * y)
        return B.api.checkpoint(lambda a: inner(B.np.cos(a)) * inner(a))(x)
    return f


@pytest.mark.parametrize("prog,args", [
    (checkpoint_in_scan("default"), (x32(3, 3) * 0.5, x32(2, 3), x32(4, 2, 3, seed=1))),
    (checkpoint_in_scan("dots_saveable"), (x32(3, 3) * 0.5, x32(2, 3), x32(4, 2, 3, seed=1))),
    (scan_in_checkpoint, (F32(0.7), x32(3), x32(4, 3, seed=1))),
    (nested_checkpoints, (x32(3), F32(1.3))),
], ids=["in_scan", "in_scan_dots", "scan_inside", "nested"])
def test_checkpoint_composes(prog, args):
    check(prog, *args)


def test_checkpoint_in_scan_saves_per_step_what_the_policy_allows():
    args = (x32(3, 3) * 0.5, x32(2, 3), x32(4, 2, 3, seed=1))
    for policy in ("default", "dots_saveable"):
        f = lambda B: (lambda *a: B.np.sum(checkpoint_in_scan(policy)(B)(*a)[1]))  # noqa
        assert residuals(IMPL, f(IMPL), *args) == residuals(JAX, f(JAX), *args)


def test_higher_order_and_vmap_of_grad():
    f = lambda B: remat_mlp("dots_saveable")(B)  # noqa: E731
    w1, w2, x = MLP_ARGS
    hess_i = impl.jit(impl.hessian(lambda v: f(IMPL)(w1, w2, v)))(x)
    hess_j = jax.jit(jax.hessian(lambda v: f(JAX)(w1, w2, v)))(x)
    assert_trees_close(hess_i, hess_j, 1e-4, 1e-4)
    xs = np.stack([x, 2 * x])
    assert_trees_close(impl.vmap(impl.grad(f(IMPL), 2), (None, None, 0))(w1, w2, xs),
                       jax.vmap(jax.grad(f(JAX), 2), (None, None, 0))(w1, w2, xs))


def test_broken_residual_selection_is_caught(monkeypatch):
    # A partial evaluator that ignores the policy (keeps every known value) saves
    # intermediates where nothing_saveable keeps only the inputs.
    monkeypatch.setattr(pe.RecomputingTrace, "get_var", pe.JaxprTrace.get_var)
    got = residuals(IMPL, remat_mlp("nothing_saveable")(IMPL), *MLP_ARGS)
    assert got != residuals(JAX, remat_mlp("nothing_saveable")(JAX), *MLP_ARGS)


# ------------------------------------------------------------------------ errors

def test_checkpoint_errors():
    f = lambda x: x  # noqa: E731
    for B in (impl, jax):
        with pytest.raises(NotImplementedError, match="concrete"):
            B.checkpoint(f, concrete=True)
        with pytest.raises(TypeError):
            B.checkpoint(f, static_argnums=1.5)(1.)
        with pytest.raises(ValueError, match="static_argnums"):
            B.checkpoint(f, static_argnums=(3,))(1.)
        with pytest.raises(TypeError, match="prevent_cse"):
            B.checkpoint(f, prevent_cse=None)
    with pytest.raises(TypeError, match="policy"):
        impl.checkpoint(f, policy="dots")
    with pytest.raises(NotImplementedError, match="offload"):
        impl.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")


# ------------------------------------------------------- the realistic example
# A small recurrent model (docs/control_flow.md) trained with scan + checkpoint +
# dropout under jit(grad). The dropout masks are drawn inside the training step from a
# key argument (impl.random gives bit-for-bit jax.random's masks for the same key).

HIDDEN, FEATURES, BATCH, STEPS, KEEP = 8, 3, 4, 6, 0.9


def recurrent_model(B):
    policy = B.ckpt.policies.dots_with_no_batch_dims_saveable

    def cell(params, h, x, mask):
        h = B.np.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
        return h * mask / KEEP                       # dropout

    def loss(params, xs, ys, masks):
        step_fn = B.api.checkpoint(cell, policy=policy)

        def step(h, inputs):
            x, mask = inputs
            h = step_fn(params, h, x, mask)
            return h, h @ params["wo"]

        h0 = B.np.zeros((xs.shape[1], HIDDEN), xs.dtype)
        _, preds = B.lax.scan(step, h0, (xs, masks))
        return B.np.mean((preds - ys) ** 2)

    @B.api.jit
    def train_step(params, xs, ys, key):
        masks = B.random.bernoulli(key, KEEP, (xs.shape[0], xs.shape[1], HIDDEN))
        masks = masks.astype(xs.dtype)
        value, grads = B.api.value_and_grad(loss)(params, xs, ys, masks)
        return value, jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)

    return loss, train_step


def _example_data():
    rng = np.random.RandomState(0)
    params = {"wx": rng.normal(size=(FEATURES, HIDDEN)).astype(F32) * 0.5,
              "wh": rng.normal(size=(HIDDEN, HIDDEN)).astype(F32) * 0.3,
              "b": np.zeros(HIDDEN, F32),
              "wo": rng.normal(size=(HIDDEN, 1)).astype(F32) * 0.5}
    xs = rng.normal(size=(STEPS, BATCH, FEATURES)).astype(F32)
    ys = np.cumsum(xs[..., :1], axis=0).astype(F32)
    return params, xs, ys


def test_recurrent_model_trains_as_in_jax():
    params, xs, ys = _example_data()
    (_, step_i), (_, step_j) = recurrent_model(IMPL), recurrent_model(JAX)
    p_i = p_j = params
    losses = []
    keys_i = impl.random.split(impl.random.key(0), 3)
    keys_j = jax.random.split(jax.random.key(0), 3)
    for key_i, key_j in zip(keys_i, keys_j):
        loss_i, p_i = step_i(p_i, xs, ys, key_i)
        loss_j, p_j = step_j(p_j, xs, ys, key_j)
        assert_trees_close((loss_i, p_i), (loss_j, p_j), 1e-5, 1e-5)
        losses.append(float(loss_i))
    assert losses[-1] < losses[0]


def test_recurrent_model_ir_keeps_the_loop_and_the_policy():
    params, xs, ys = _example_data()
    ir = impl.make_jaxpr(recurrent_model(IMPL)[1])(params, xs, ys, impl.random.key(0))
    (jit_eqn,) = ir.eqns
    body = jit_eqn.params["jaxpr"]
    scans = [e for e in body.eqns if e.primitive.name == "scan"]
    assert [e.params["reverse"] for e in scans] == [False, True]
    # The forward loop runs the cell's known half inline; the backward loop recomputes
    # the rest inside a checkpoint.
    assert not any(b.primitive is checkpoint_p for b in scans[0].params["jaxpr"].eqns)
    (remat,) = [b for b in scans[1].params["jaxpr"].eqns if b.primitive is checkpoint_p]
    assert remat.params["differentiated"] is True
    assert "tanh" in [b.primitive.name for b in remat.params["jaxpr"].eqns]
    # Per step the backward pass keeps the two matmul results of the cell (the
    # policy), the hidden state before and after it, and the dropout mask (impl passes
    # the scanned-over mask itself, JAX a stacked copy); the tanh result is recomputed.
    masks = np.asarray(jax.random.bernoulli(jax.random.key(0), KEEP, (STEPS, BATCH, HIDDEN)),
                       F32)
    loss = lambda B: lambda p: recurrent_model(B)[0](p, xs, ys, masks)  # noqa: E731
    per_step = [(s, d) for s, _, d in residuals(IMPL, loss(IMPL), params)
                if s == (STEPS, BATCH, HIDDEN)]
    assert sorted(d for _, d in per_step) == ["from a constant"] + ["output of scan"] * 4
    assert len(per_step) == len([s for s, _, _ in residuals(JAX, loss(JAX), params)
                                 if s == (STEPS, BATCH, HIDDEN)])


def _debug_prints_under_remat(api, np_):
    """Prints of checkpointed functions under grad: of an input, of an intermediate, by
    a callback, under each policy (JAX shows them again when the backward pass
    recomputes them, unless the policy saves what they print)."""
    def of_input(x):
        api.debug.print("input {x}", x=x)
        return np_.sin(x)

    def of_intermediate(x):
        y = np_.sin(x)
        api.debug.print("intermediate {y}", y=y)
        return np_.cos(y)

    def by_callback(x):
        api.debug.callback(lambda v: print("callback", v), x)
        return np_.sin(x) * x

    policies = api.checkpoint_policies
    for i, policy in enumerate((None, policies.everything_saveable, policies.dots_saveable)):
        for fn in (of_input, of_intermediate, by_callback):
            print("policy", i, fn.__name__)
            api.grad(api.checkpoint(fn, policy=policy))(1.0)
            api.grad(lambda x: api.checkpoint(fn, policy=policy)(x).sum())(
                np_.arange(3.0, dtype=np.float32))
    api.jit(api.grad(api.checkpoint(of_intermediate)))(1.0)


def test_debug_prints_repeat_as_in_jax_when_the_backward_pass_recomputes(capsys):
    _debug_prints_under_remat(jax, jax.numpy)
    want = capsys.readouterr().out
    _debug_prints_under_remat(impl, inp)
    assert capsys.readouterr().out == want
    assert want.count("intermediate") > want.count("policy")   # some are shown twice
