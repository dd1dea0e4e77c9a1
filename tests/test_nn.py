"""The rest of jax.nn on impl against JAX: the activations (values, dtypes, jvp, grad,
vmap under jit, derivatives at the kinks where JAX uses custom_jvp), and
impl.nn.initializers drawing JAX's numbers bit for bit from the same key."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from _compare import IMPL, JAX, check, stack
from helpers import assert_tree_close

ACTIVATIONS = ["celu", "selu", "mish", "hard_sigmoid", "hard_silu", "hard_swish", "soft_sign",
               "squareplus", "sparse_plus", "sparse_sigmoid", "identity", "relu", "relu6",
               "elu", "leaky_relu", "hard_tanh"]


def all_activations(B, x):
    """Every activation of x in one program (one compilation per backend)."""
    nn = B.api.nn
    out = {name: getattr(nn, name)(x) for name in ACTIVATIONS}
    out["celu_alpha"] = nn.celu(x, alpha=0.7)
    out["squareplus_b"] = nn.squareplus(x, b=1.5)
    out["glu_last"] = nn.glu(x)
    out["glu_first"] = nn.glu(x, axis=0)
    out["log1mexp"] = nn.log1mexp(B.np.abs(x) + 0.05)
    out["logmeanexp"] = nn.logmeanexp(x)
    out["logmeanexp_axis"] = nn.logmeanexp(x, axis=1, keepdims=True)
    out["logmeanexp_where"] = nn.logmeanexp(x, axis=0, where=x > -0.5)
    return out


def test_activations_value_jvp_grad_vmap_under_jit():
    x = np.random.RandomState(1).normal(size=(4, 6)) * 3
    # the batched inputs as jax.Arrays: JAX fails on NumPy ones (test_jax_bug_... below)
    check(lambda B: lambda x: all_activations(B, x), x, batched=(jnp.asarray(stack(x)),),
          rtol=1e-10, atol=1e-12, eager=False)


def test_activations_in_float32_under_jit():
    x = (np.random.RandomState(2).normal(size=(4, 6)) * 3).astype(np.float32)
    assert_tree_close(impl.jit(lambda x: all_activations(IMPL, x))(x),
                      jax.jit(lambda x: all_activations(JAX, x))(x),
                      tol=dict(rtol=2e-6, atol=2e-7))


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="JAX 0.10.2: vmap of a custom_jvp function over a NumPy array "
                          "closed over by jit fails ('non-canonical constant')")
def test_jax_bug_custom_jvp_under_vmap_of_a_numpy_constant_in_jit():
    f = jax.custom_jvp(lambda x: x * 2.0)
    f.defjvps(lambda g, ans, x: g)
    batch = np.ones(3, np.float32)
    out = jax.jit(lambda: jax.vmap(f)(batch))()
    np.testing.assert_array_equal(out, 2 * batch)   # the reference: jit of jnp's input


KINKS = np.array([-7., -3., -1., -0.5, 0., 0.5, 1., 3., 6., 8.])


@pytest.mark.parametrize("name", ["relu", "relu6", "hard_sigmoid", "hard_silu", "celu", "elu",
                                  "selu", "sparse_plus", "sparse_sigmoid", "hard_tanh",
                                  "leaky_relu"])
def test_derivatives_at_the_kinks_are_jaxs(name):
    """At 0, +-1, +-3 and 6 the derivative is a convention (custom_jvp in relu, relu6)."""
    got = impl.grad(lambda x: inp.sum(getattr(impl.nn, name)(x)))(KINKS)
    want = jax.grad(lambda x: jnp.sum(getattr(jax.nn, name)(x)))(KINKS)
    assert_tree_close(got, want, tol=dict(rtol=1e-12, atol=0))


def test_log1mexp_derivative_is_jaxs_custom_rule():
    x = np.array([1e-3, 0.1, np.log(2.0), 0.9, 5.0, 20.0])
    assert_tree_close(impl.jvp(impl.nn.log1mexp, (x,), (np.ones_like(x),)),
                      jax.jvp(jax.nn.log1mexp, (x,), (np.ones_like(x),)),
                      tol=dict(rtol=1e-12, atol=0))
    # float64 finite differences, independent of either implementation's rule
    eps = 1e-7
    def ref(x):   # each of the two float64 forms where it is accurate
        return np.where(x < 0.5, np.log(-np.expm1(-x)), np.log1p(-np.exp(-x)))
    fd = (ref(x + eps) - ref(x - eps)) / (2 * eps)
    np.testing.assert_allclose(impl.grad(lambda x: inp.sum(impl.nn.log1mexp(x)))(x), fd,
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_result_dtypes_follow_jaxs_promotion(dtype):
    x = np.array([-3, -1, 0, 2, 7]).astype(dtype)
    names = ACTIVATIONS + ["mish", "log1mexp", "gelu", "softplus"]

    def every(nn, x):
        return {n: getattr(nn, n)(abs(x) + 1 if n == "log1mexp" else x) for n in names}
    got, want = impl.jit(lambda x: every(impl.nn, x))(x), jax.jit(lambda x: every(jax.nn, x))(x)
    for name in names:
        assert got[name].dtype == want[name].dtype, (name, got[name].dtype, want[name].dtype)
        np.testing.assert_allclose(np.asarray(got[name]), np.asarray(want[name]), rtol=1e-6)


def test_glu_needs_an_even_axis():
    x = np.ones((3, 4))
    # JAX raises a bare AssertionError here; impl a ValueError naming the axis and shape
    with pytest.raises(AssertionError):
        jax.nn.glu(x, axis=0)
    with pytest.raises(ValueError, match=r"axis 0 .*\(3, 4\)"):
        impl.nn.glu(x, axis=0)


def test_new_names_are_exported():
    missing = {n for n in dir(jax.nn) if not n.startswith("_")} - set(dir(impl.nn))
    # FP8/FP4 block-scaled matmuls (GPU formats) are the only names impl.nn leaves out
    assert missing == {"get_scaled_dot_general_config", "scaled_dot_general",
                       "scaled_matmul"}, missing


# ------------------------------------------------------------------ initializers

J, I = jax.nn.initializers, impl.nn.initializers

FACTORIES = [("zeros", None), ("ones", None), ("constant", (2.5,)), ("normal", ()),
             ("normal", (0.3,)), ("uniform", (2.0,)), ("truncated_normal", (0.5,)),
             ("truncated_normal", (1.0, None, -1.0, 0.5)),
             ("glorot_uniform", ()), ("glorot_normal", ()), ("xavier_uniform", ()),
             ("xavier_normal", ()), ("lecun_uniform", ()), ("lecun_normal", ()),
             ("he_uniform", ()), ("he_normal", ()), ("kaiming_uniform", ()),
             ("kaiming_normal", ()), ("variance_scaling", (1.5, "fan_geo_avg", "normal")),
             ("variance_scaling", (0.5, "fan_out", "uniform", 0, 1)),
             ("variance_scaling", (2.0, "fan_in", "truncated_normal", (0, 1), -1)),
             ("orthogonal", ()), ("orthogonal", (2.0, 0))]
BATCHED_FACTORIES = [("variance_scaling", (1.0, "fan_avg", "uniform", 1, 2, 0)),
                     ("variance_scaling", (3.0, "fan_in", "normal", -2, -1, (0, 1)))]
SHAPES = [(3, 4), (5, 2), (2, 3, 6), (4, 3, 2, 5)]


DTYPES = [np.float32, np.float64, None]


def draw_all(module, key_fn, factories):
    """Each factory's draw for one shape and dtype (taken in turn), in one program."""
    out = {}
    for f, (name, args) in enumerate(factories):
        init = getattr(module, name) if args is None else getattr(module, name)(*args)
        shape = SHAPES[2 + f % 2] if (name, args) in BATCHED_FACTORIES else SHAPES[f % 2]
        dtype = DTYPES[f % len(DTYPES)]
        out[f"{f}:{name}{args}{shape}{dtype}"] = init(key_fn(f), shape, dtype)
    return out


def assert_same_draws(factories, delta_shapes=()):
    """Bit for bit, under jit (one compilation per backend: XLA's compile time is most
    of the cost)."""
    def both(module, key_fn):
        out = draw_all(module, key_fn, factories)
        for i, shape in enumerate(delta_shapes):
            out[f"delta_orthogonal{shape}"] = module.delta_orthogonal(1.5)(
                key_fn(100 + i), shape, DTYPES[i])
        return out
    got = impl.jit(lambda: both(I, impl.random.key))()
    want = jax.jit(lambda: both(J, jax.random.key))()
    assert got.keys() == want.keys()
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]), err_msg=k)


# one of each sampling path: constant, normal, uniform, truncated normal, the three
# variance_scaling distributions (one with batch axes), delta_orthogonal (orthogonal's
# QR is compiled once, there; orthogonal itself: test_initializers_eagerly_with_legacy_keys)
CORE_FACTORIES = [("constant", (2.5,)), ("normal", (0.3,)), ("uniform", (2.0,)),
                  ("truncated_normal", (1.0, None, -1.0, 0.5)), ("glorot_uniform", ()),
                  ("he_normal", ()), BATCHED_FACTORIES[1]]


def test_initializers_give_jaxs_numbers_for_the_same_key():
    assert_same_draws(CORE_FACTORIES, delta_shapes=[(3, 2, 5, 6)])


@pytest.mark.slow
def test_every_initializer_gives_jaxs_numbers_for_the_same_key():
    assert_same_draws(FACTORIES + BATCHED_FACTORIES,
                      delta_shapes=[(3, 4, 4), (3, 2, 5, 6), (2, 3, 1, 4, 4)])


def test_aliases_are_jaxs():
    for alias, name in [("xavier_uniform", "glorot_uniform"), ("xavier_normal", "glorot_normal"),
                        ("kaiming_uniform", "he_uniform"), ("kaiming_normal", "he_normal")]:
        assert (getattr(I, alias) is getattr(I, name)) == (getattr(J, alias) is getattr(J, name))


@pytest.mark.parametrize("name", ["normal", "glorot_uniform", "orthogonal"])
def test_initializers_eagerly_with_legacy_keys(name):
    got = getattr(I, name)()(impl.random.PRNGKey(3), (6, 4), np.float32)
    want = getattr(J, name)()(jax.random.PRNGKey(3), (6, 4), np.float32)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_the_factory_dtype_is_the_default():
    got = I.he_uniform(dtype=np.float32)(impl.random.key(5), (8, 3))
    want = J.he_uniform(dtype=np.float32)(jax.random.key(5), (8, 3))
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def test_orthogonal_rows_are_orthonormal_and_empty_shapes():
    q = np.asarray(I.orthogonal()(impl.random.key(0), (3, 7)))
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-12)
    assert I.orthogonal()(impl.random.key(0), (0, 4)).shape == (0, 4)


@pytest.mark.parametrize("make,shape,exc,match", [
    (lambda m: m.orthogonal(), (4,), ValueError, "at least a 2D"),
    (lambda m: m.delta_orthogonal(), (3, 3), ValueError, "3D, 4D or 5D"),
    (lambda m: m.delta_orthogonal(), (3, 5, 2), ValueError, "fan_in"),
    (lambda m: m.glorot_normal(), (5,), ValueError, "in_axis"),
    (lambda m: m.variance_scaling(1.0, "fan_max", "normal"), (3, 4), ValueError, "mode"),
    (lambda m: m.variance_scaling(1.0, "fan_in", "cauchy"), (3, 4), ValueError,
     "distribution"),
])
def test_initializer_bad_input_errors_as_jax(make, shape, exc, match):
    with pytest.raises(exc, match=match):
        make(J)(jax.random.key(0), shape)
    with pytest.raises(exc, match=match):
        make(I)(impl.random.key(0), shape)


def test_out_sharding_is_refused_by_name():
    with pytest.raises(NotImplementedError, match="out_sharding"):
        I.normal()(impl.random.key(0), (2, 2), out_sharding=object())


# ------------------------------------------------------------ dot_product_attention

def attention_program(B):
    r = np.random.RandomState(4)
    bias = r.normal(size=(1, 4, 3, 5))
    mask = r.uniform(size=(2, 1, 3, 5)) > 0.3
    q_len, kv_len = np.array([2, 3], np.int32), np.array([4, 1], np.int32)

    def f(qkv):   # one argument (one vmap spec, a smaller program)
        q, k, v = qkv[:, :3, :4], qkv[:, :, 4:6], qkv[:, :, 6:]
        att = B.api.nn.dot_product_attention
        return {"bias_mask": att(q, k, v, bias, mask, scale=0.4),
                "causal_residual": att(q, k, v, is_causal=True, return_residual=True),
                "lengths": att(q, k, v, query_seq_lengths=q_len,
                               key_value_seq_lengths=kv_len),
                "unbatched_mqa_window": att(q[0], k[0, :, :1], v[0, :, :1],
                                            local_window_size=(1, 0), implementation="xla")}
    return f


def test_dot_product_attention_value_jvp_grad_vmap_under_jit():
    """Grouped heads (N = 4 query heads, K = 2 key/value heads) and every masking option.
    The softmax runs in float32 (as JAX's), hence the tolerance."""
    qkv = np.random.RandomState(3).normal(size=(2, 5, 8, 8))
    check(attention_program, qkv, batched=(jnp.asarray(stack(qkv)),), eager=False,
          rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(implementation="flash"), ValueError, "implementation"),
    (dict(value=np.ones((2, 5, 2, 8), np.float32)), ValueError, "value dtype"),
    (dict(query=np.ones((2, 3, 3, 8))), ValueError, "multiple of key/value heads"),
    (dict(mask=np.ones((2, 1, 3, 5))), ValueError, "mask dtype"),
    (dict(query_seq_lengths=np.array([1, 2])), ValueError, "query_seq_lengths dtype"),
])
def test_dot_product_attention_bad_input_as_jax(kwargs, exc, match):
    args = dict(query=np.ones((2, 3, 4, 8)), key=np.ones((2, 5, 2, 8)),
                value=np.ones((2, 5, 2, 8)))
    args.update(kwargs)
    for nn in (jax.nn, impl.nn):
        with pytest.raises(exc, match=match):
            nn.dot_product_attention(**args)


def test_cudnn_attention_is_refused_by_name():
    x = np.ones((1, 2, 1, 4), np.float32)
    with pytest.raises(NotImplementedError, match="implementation='cudnn'"):
        impl.nn.dot_product_attention(x, x, x, implementation="cudnn")


@pytest.mark.parametrize("name", ["sigmoid", "silu", "swish"])
def test_logistic_activations_refuse_integers_as_jax(name):
    x = np.arange(3, dtype=np.int32)
    with pytest.raises(TypeError, match="logistic"):
        getattr(jax.nn, name)(x)
    with pytest.raises(TypeError, match="logistic"):
        getattr(impl.nn, name)(x)
