"""conv_general_dilated and windowed reductions (pooling) against JAX.

Every case runs through value, jit, jvp, grad (both operands for convolutions) and
vmap (both operands mapped, and only the input mapped) -- see _against_jax.py --
covering dimension-number layouts, string and explicit padding, strides, input and
kernel dilation, feature and batch groups; pooling with ties checks JAX's choice of
the first maximum of a window.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from impl import lax as ilax
from _against_jax import check_transforms, rng_for
from helpers import first_in_ci, floats_in_ci, nightly


def normal(shape, seed=0):
    return lambda dtype: rng_for("conv", shape, seed).standard_normal(shape).astype(dtype)


def ties(shape):
    """Few distinct values: windows with several equal maxima."""
    return lambda dtype: rng_for("ties", shape).randint(0, 3, shape).astype(dtype)


CONV = [  # (name, lhs shape, rhs shape, keyword arguments)
    ("nchw_valid", (2, 3, 6, 5), (4, 3, 3, 2), dict(window_strides=(1, 1), padding="VALID")),
    ("nhwc_same_strided", (2, 7, 6, 3), (3, 2, 3, 4),
     dict(window_strides=(2, 2), padding="SAME",
          dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("explicit_padding_dilations", (2, 3, 7, 6), (4, 3, 3, 2),
     dict(window_strides=(1, 2), padding=((2, 1), (1, 1)), lhs_dilation=(2, 1),
          rhs_dilation=(1, 2))),
    ("feature_groups", (2, 6, 6, 5), (4, 3, 3, 2),
     dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    ("batch_groups", (4, 3, 6, 5), (6, 3, 3, 2),
     dict(window_strides=(2, 1), padding=((1, 0), (0, 1)), batch_group_count=2)),
    ("1d_groups_kernel_dilation", (2, 6, 9), (6, 2, 3),
     dict(window_strides=(2,), padding="VALID", feature_group_count=3, rhs_dilation=(2,))),
    ("odd_layout_same_lower", (3, 5, 6, 4), (3, 2, 2, 3),
     dict(window_strides=(1, 1), padding="SAME_LOWER",
          dimension_numbers=("CNHW", "IOHW", "HWNC"))),
]


# CI runs the first seven cases (layouts, padding, dilations, then feature groups in
# float64); the rest run nightly.
CONV_CASES = first_in_ci(7, [pytest.param(*case, dtype, id=f"{case[0]}-{np.dtype(dtype).name}")
                             for case in CONV for dtype in (np.float64, np.float32)])


@pytest.mark.parametrize("name, lhs, rhs, kw, dtype", CONV_CASES)
def test_conv_general_dilated(name, lhs, rhs, kw, dtype):
    check_transforms(f"conv_{name}", lambda x, w: ilax.conv_general_dilated(x, w, **kw),
                     lambda x, w: jax.lax.conv_general_dilated(x, w, **kw),
                     [normal(lhs)(dtype), normal(rhs, 1)(dtype)],
                     eager=name == "nchw_valid", fd=dtype == np.float64)


def test_conv_rhs_only_mapped():
    """Per-example kernels against one shared input (the kernel alone is mapped),
    with and without groups."""
    for lhs, rhs, kw in [((2, 3, 6, 5), (4, 3, 3, 2), dict(window_strides=(1, 1),
                                                          padding="SAME")),
                         ((2, 6, 6, 5), (4, 3, 3, 2), dict(window_strides=(1, 1),
                                                          padding="VALID",
                                                          feature_group_count=2)),
                         ((4, 3, 6, 5), (6, 3, 3, 2), dict(window_strides=(1, 1),
                                                          padding="VALID",
                                                          batch_group_count=2))]:
        x = normal(lhs)(np.float64)
        ws = normal((3,) + rhs, 2)(np.float64)
        got = impl.vmap(lambda w: ilax.conv_general_dilated(x, w, **kw))(ws)
        want = jax.vmap(lambda w: jax.lax.conv_general_dilated(x, w, **kw))(ws)
        np.testing.assert_allclose(got, want, rtol=1e-10)


def test_conv_second_order_and_wrappers():
    x, w = normal((2, 3, 8, 7))(np.float64), normal((4, 3, 3, 2), 1)(np.float64)
    t = normal((2, 3, 8, 7), 2)(np.float64)
    loss = lambda l: lambda x, w: (l.conv_general_dilated(x, w, (2, 1), "SAME") ** 2).sum()  # noqa: E731
    got = impl.jvp(impl.grad(loss(ilax), 1), (x, w), (t, np.zeros_like(w)))[1]
    want = jax.jvp(jax.grad(loss(jax.lax), 1), (x, w), (t, np.zeros_like(w)))[1]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(ilax.conv(x, w, (1, 2), "SAME"),
                               jax.lax.conv(x, w, (1, 2), "SAME"), rtol=1e-12)
    args = ((1, 2), ((1, 1), (0, 2)), (2, 1), (1, 2))
    np.testing.assert_allclose(ilax.conv_with_general_padding(x, w, *args),
                               jax.lax.conv_with_general_padding(x, w, *args), rtol=1e-12)


@pytest.mark.parametrize("padding", ["SAME", "VALID", ((1, 2), (0, 1))])
@pytest.mark.parametrize("transpose_kernel", [False, nightly(True)])
def test_conv_transpose(padding, transpose_kernel):
    x = normal((2, 5, 6, 3))(np.float64)
    w = normal((3, 3, 4, 3) if transpose_kernel else (3, 3, 3, 4), 1)(np.float64)
    kw = dict(strides=(2, 1), padding=padding, transpose_kernel=transpose_kernel)
    check_transforms(f"conv_transpose_{padding}_{transpose_kernel}",
                     lambda x, w: ilax.conv_transpose(x, w, **kw),
                     lambda x, w: jax.lax.conv_transpose(x, w, **kw), [x, w], vmap=False)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("fn", ["convolve", "correlate"])
def test_numpy_convolve_correlate(fn, mode):
    for n_a, n_v in [(7, 3), (3, 6)]:
        a, v = normal((n_a,))(np.float64), normal((n_v,), 1)(np.float64)
        check_transforms(f"{fn}_{mode}_{n_a}_{n_v}",
                         lambda a, v: getattr(inp, fn)(a, v, mode),
                         lambda a, v: getattr(jnp, fn)(a, v, mode), [a, v])


# ----------------------------------------------------------------- pooling

WINDOWS = [  # (name, keyword arguments of reduce_window after the computation)
    ("pool_2x2", dict(window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1),
                      padding="VALID")),
    ("same_3x3_stride", dict(window_dimensions=(1, 3, 3, 1), window_strides=(1, 2, 1, 1),
                             padding="SAME")),
    ("explicit_padding", dict(window_dimensions=(2, 2, 1, 2), window_strides=(1, 1, 2, 1),
                              padding=((0, 1), (1, 0), (0, 0), (1, 1)))),
    ("base_dilation", dict(window_dimensions=(1, 2, 2, 1), window_strides=(1, 1, 2, 1),
                           padding=((0, 0), (1, 0), (0, 1), (0, 0)),
                           base_dilation=(1, 2, 1, 1))),
]
MONOIDS = {"sum": (0.0, ilax.add, jax.lax.add), "max": (-np.inf, ilax.max, jax.lax.max),
           "min": (np.inf, ilax.min, jax.lax.min)}


@pytest.mark.parametrize("dtype", floats_in_ci(np.float64, (np.float64, np.float32)))
@pytest.mark.parametrize("kind", list(MONOIDS))
@pytest.mark.parametrize("name, kw", WINDOWS, ids=[w[0] for w in WINDOWS])
def test_reduce_window(name, kw, kind, dtype):
    init, op, jop = MONOIDS[kind]
    make = ties((2, 5, 6, 3)) if kind != "sum" else normal((2, 5, 6, 3))
    check_transforms(f"reduce_window_{kind}_{name}",
                     lambda x: ilax.reduce_window(x, init, op, **kw),
                     lambda x: jax.lax.reduce_window(x, init, jop, **kw), [make(dtype)],
                     eager=name == "pool_2x2", fd=kind == "sum" and dtype == np.float64)


def test_window_dilation_forward_and_jvp():
    """Window dilation: values and jvp for every reduction; JAX has no reverse mode for
    a dilated max window, and impl raises the same NotImplementedError."""
    kw = dict(window_dimensions=(2, 2), window_strides=(1, 1), padding="VALID",
              window_dilation=(2, 1))
    x = ties((5, 4))(np.float64)
    t = normal((5, 4))(np.float64)
    for init, op, jop in MONOIDS.values():
        f = lambda v: ilax.reduce_window(v, init, op, **kw)  # noqa: E731
        fj = lambda v: jax.lax.reduce_window(v, init, jop, **kw)  # noqa: E731
        np.testing.assert_allclose(impl.jvp(f, (x,), (t,))[1], jax.jvp(fj, (x,), (t,))[1])
    np.testing.assert_allclose(
        impl.grad(lambda v: inp.sum(ilax.reduce_window(v, 0.0, ilax.add, **kw)))(x),
        jax.grad(lambda v: jnp.sum(jax.lax.reduce_window(v, 0.0, jax.lax.add, **kw)))(x))
    with pytest.raises(NotImplementedError, match="window dilation"):
        jax.grad(lambda v: jnp.sum(jax.lax.reduce_window(v, -np.inf, jax.lax.max, **kw)))(x)
    with pytest.raises(NotImplementedError, match="window dilation"):
        impl.grad(lambda v: inp.sum(ilax.reduce_window(v, -np.inf, ilax.max, **kw)))(x)


def test_max_pool_gradient_second_order_and_ir():
    """The max-pool gradient is a select_and_scatter_add; forward over reverse works."""
    kw = (1, 2, 2, 1), (1, 2, 2, 1), "VALID"
    x = ties((2, 4, 4, 3))(np.float64)
    t = normal((2, 4, 4, 3))(np.float64)
    loss = lambda l, s: lambda v: s((l.reduce_window(v, -np.inf, l.max, *kw) ** 2))  # noqa: E731
    got = impl.jvp(impl.grad(loss(ilax, inp.sum)), (x,), (t,))[1]
    want = jax.jvp(jax.grad(loss(jax.lax, jnp.sum)), (x,), (t,))[1]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    text = str(impl.make_jaxpr(impl.grad(loss(ilax, inp.sum)))(x))
    assert "select_and_scatter_add" in text and "reduce_window_max" in text


@pytest.mark.parametrize("init, op, jop", [
    (1.5, ilax.add, jax.lax.add), (0.3, ilax.max, jax.lax.max),
    (-0.2, inp.minimum, jax.lax.min), (0.0, lambda a, b: a + b, jax.lax.add),
    (-np.inf, jax.lax.max, jax.lax.max)], ids=["add_init", "max_init", "jnp_minimum",
                                               "lambda_add", "jax_max"])
def test_reduce_window_computations_and_initial_values(init, op, jop):
    kw = dict(window_dimensions=(2, 3), window_strides=(1, 2), padding="SAME")
    x = normal((5, 6))(np.float64)
    np.testing.assert_allclose(ilax.reduce_window(x, init, op, **kw),
                               jax.lax.reduce_window(x, init, jop, **kw), rtol=1e-12)


def test_reduce_window_integers_and_bad_input():
    xi = ties((4, 5))(np.int32)
    kw = dict(window_dimensions=(2, 2), window_strides=(1, 1), padding="SAME")
    for init, op, jop in [(0, ilax.add, jax.lax.add),
                          (np.iinfo(np.int32).min, ilax.max, jax.lax.max)]:
        got = ilax.reduce_window(xi, np.int32(init), op, **kw)
        want = jax.lax.reduce_window(xi, np.int32(init), jop, **kw)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    with pytest.raises(NotImplementedError, match="computation 'mul'"):
        ilax.reduce_window(xi, 1, ilax.mul, (2, 2))
    with pytest.raises(TypeError, match="window_strides .* one entry per operand axis"):
        ilax.reduce_window(xi, 0, ilax.add, (2, 2), (1,))
    with pytest.raises(NotImplementedError, match="pytree"):
        ilax.reduce_window((xi, xi), (0, 0), ilax.add, (2, 2))


def test_conv_bad_input():
    x, w = np.ones((1, 2, 5, 5)), np.ones((3, 2, 2, 2))
    with pytest.raises(ValueError, match="same number of dimensions"):
        ilax.conv_general_dilated(x, w[0], (1, 1), "VALID")
    with pytest.raises(ValueError, match="window_strides"):
        ilax.conv_general_dilated(x, w, (1,), "VALID")
    with pytest.raises(ValueError, match="String padding is not implemented"):
        ilax.conv_general_dilated(x, w, (1, 1), "SAME", lhs_dilation=(2, 1))
    with pytest.raises(ValueError, match="feature_group_count"):
        ilax.conv_general_dilated(x, w, (1, 1), "VALID", feature_group_count=3)
    with pytest.raises(ValueError, match="1-dimensional"):
        inp.convolve(np.ones((2, 2)), np.ones(2))
    with pytest.raises(ValueError, match="mode must be one of"):
        inp.correlate(np.ones(3), np.ones(2), "wide")
