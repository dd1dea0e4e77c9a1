"""Ragged batches: `impl.pile`, `vmap(..., in_axes=pile_axis)`, `Pile.unpile`.

JAX has no piles (the batching seed had them); each element's result is checked against
JAX applied to that element on its own."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from impl.interpreters.batching import Pile, pile_axis

LENGTHS = (3, 1, 4)


def elems(*tail, axis=0, seed=0, lengths=LENGTHS):
    rng = np.random.RandomState(seed)
    out = []
    for n in lengths:
        shape = list(tail)
        shape.insert(axis, n)
        out.append(rng.standard_normal(shape))
    return out


def close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-12)
    assert np.asarray(got).dtype == np.asarray(want).dtype


def close_pile(p, wants):
    assert isinstance(p, Pile)
    got = p.unpile()
    assert len(got) == len(wants)
    for g, w in zip(got, wants):
        close(g, w)


def test_pile_is_concatenated_without_padding():
    xs = elems(2, axis=1)
    p = impl.pile(xs, axis=1)
    assert p.lengths == LENGTHS and p.axis == 1 and p.size == 3
    assert np.shape(p.data) == (2, sum(LENGTHS))    # no padding to the longest element
    close_pile(p, xs)


def test_pile_input_errors():
    with pytest.raises(TypeError, match="may differ only along axis 0"):
        impl.pile([np.ones((2, 3)), np.ones((2, 4))])
    with pytest.raises(TypeError, match="share rank and dtype"):
        impl.pile([np.ones(2), np.ones(3, np.float32)])
    with pytest.raises(TypeError, match="at least one axis"):
        impl.pile([np.float64(1.0)])
    with pytest.raises(ValueError, match="out of bounds"):
        impl.pile([np.ones(2)], axis=1)
    with pytest.raises(ValueError, match="at least one array"):
        impl.pile([])


def vmap_pile(f, in_axes=pile_axis, out_axes=pile_axis, **kw):
    return impl.vmap(f, in_axes=in_axes, out_axes=out_axes, **kw)


def test_elementwise_ops_keep_the_pile_ragged():
    xs, ys = elems(), elems(seed=1)

    def f(np_):
        return lambda x, y: np_.sin(x) * 2.0 + x * y - np_.exp(-x) / 3
    got = vmap_pile(f(inp), in_axes=(pile_axis, pile_axis))(impl.pile(xs), impl.pile(ys))
    close_pile(got, [f(jnp)(x, y) for x, y in zip(xs, ys)])


@pytest.mark.parametrize("reduction", ["sum", "max", "min", "prod", "argmax"])
def test_reductions_over_the_ragged_axis_are_regular(reduction):
    xs = elems(2)
    got = vmap_pile(lambda x: getattr(inp, reduction)(x, axis=0), out_axes=0)(impl.pile(xs))
    close(got, jnp.stack([getattr(jnp, reduction)(x, axis=0) for x in xs]))


def test_reduction_over_another_axis_stays_ragged():
    xs = elems(2, 3, axis=1)
    got = vmap_pile(lambda x: inp.sum(x, axis=(0, 2)))(impl.pile(xs, axis=1))
    close_pile(got, [jnp.sum(x, axis=(0, 2)) for x in xs])


def test_dot_of_two_ragged_vectors():
    xs, ys = elems(), elems(seed=1)
    got = vmap_pile(inp.dot, in_axes=(pile_axis, pile_axis), out_axes=0)(impl.pile(xs),
                                                                         impl.pile(ys))
    close(got, jnp.stack([jnp.dot(x, y) for x, y in zip(xs, ys)]))


def test_matmul_contracting_the_ragged_dim():
    a, b = elems(2, axis=1), elems(5, seed=1)
    got = vmap_pile(lambda x, y: x @ y, in_axes=(pile_axis, pile_axis), out_axes=0)(
        impl.pile(a, axis=1), impl.pile(b))
    close(got, jnp.stack([x @ y for x, y in zip(a, b)]))


def test_matmul_with_a_shared_matrix_stays_ragged():
    xs, w = elems(4), np.random.RandomState(3).standard_normal((4, 2))
    got = vmap_pile(lambda x, m: inp.tanh(x @ m), in_axes=(pile_axis, None))(impl.pile(xs), w)
    close_pile(got, [jnp.tanh(x @ w) for x in xs])


def test_ragged_with_regular_batched_operand():
    xs, c = elems(), np.array([0.5, -2.0, 3.0])
    got = vmap_pile(lambda x, s: inp.sum(x * s), in_axes=(pile_axis, 0), out_axes=0)(
        impl.pile(xs), c)
    close(got, jnp.stack([jnp.sum(x * s) for x, s in zip(xs, c)]))


def test_grad_through_a_pile_vmap():
    xs = elems(2)

    def loss(np_, per_elem):
        return np_.sum(per_elem ** 2)

    def f_impl(p):
        return loss(inp, vmap_pile(lambda x: inp.sum(inp.sin(x) * x), out_axes=0)(p))

    g = impl.grad(f_impl)(impl.pile(xs))
    want = jax.grad(lambda zs: loss(jnp, jnp.stack([jnp.sum(jnp.sin(z) * z) for z in zs])))(xs)
    close_pile(g, want)


def test_jit_through_a_pile_vmap():
    xs = elems(3)
    f = impl.jit(lambda p: vmap_pile(lambda x: inp.exp(x) * 2)(p))
    out = f(impl.pile(xs))
    close_pile(out, [jnp.exp(x) * 2 for x in xs])
    sums = impl.jit(lambda p: vmap_pile(lambda x: inp.sum(x, 0), out_axes=0)(p))(impl.pile(xs))
    close(sums, jnp.stack([jnp.sum(x, 0) for x in xs]))


@pytest.mark.parametrize("op", ["cumsum", "sort", "flip"])
def test_ops_along_the_ragged_axis_act_per_element(op):
    xs = elems(2)
    got = vmap_pile(lambda x: getattr(inp, op)(x, axis=0))(impl.pile(xs))
    close_pile(got, [getattr(jnp, op)(x, axis=0) for x in xs])


def test_per_element_scalar_broadcast_along_the_ragged_axis():
    xs = elems()
    got = vmap_pile(lambda x: x / inp.sum(x) - inp.max(x))(impl.pile(xs))
    close_pile(got, [x / jnp.sum(x) - jnp.max(x) for x in xs])


def test_axis_size_regular_out_axes_and_jit_of_grad():
    xs = elems(2)
    got = vmap_pile(lambda x: inp.sum(x, 0), out_axes=1, axis_size=3)(impl.pile(xs))
    close(got, jnp.stack([jnp.sum(x, 0) for x in xs], axis=1))
    g = impl.jit(impl.grad(lambda p: inp.sum(vmap_pile(lambda x: inp.sum(x ** 3),
                                                       out_axes=0)(p))))(impl.pile(xs))
    close_pile(g, [jax.grad(lambda z: jnp.sum(z ** 3))(x) for x in xs])


def test_regular_output_as_a_pile():
    xs = elems()
    out = vmap_pile(lambda x: inp.sum(x))(impl.pile(xs))
    assert out.axis is None
    close_pile(out, [jnp.sum(x) for x in xs])


def test_ragged_output_without_pile_axis_is_a_type_error():
    p = impl.pile(elems())
    with pytest.raises(TypeError, match="out_axes=pile_axis"):
        vmap_pile(lambda x: x * 2, out_axes=0)(p)
    with pytest.raises(TypeError, match="out_axes=pile_axis"):
        vmap_pile(lambda x: x * 2, out_axes=None)(p)


def test_spec_errors():
    p = impl.pile(elems())
    with pytest.raises(TypeError, match="in_axes=pile_axis"):
        impl.vmap(lambda x: x, in_axes=0)(p)
    with pytest.raises(TypeError, match="not a Pile"):
        impl.vmap(lambda x: x, in_axes=pile_axis)(np.ones(3))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        vmap_pile(lambda x: x, axis_size=4)(p)


def test_a_per_element_vector_broadcasts_back_along_the_ragged_axis():
    """Normalising columns: the column sums broadcast back over each element's own
    length (the operation broadcasts the size-1 axis, as JAX's jnp does), with no static
    length needed."""
    got = vmap_pile(lambda x: x / inp.sum(x, 0))(impl.pile(elems(2))).unpile()
    for g, e in zip(got, elems(2)):
        e = np.asarray(e, np.float64)
        np.testing.assert_allclose(np.asarray(g), e / e.sum(0), rtol=1e-6)


def test_what_needs_a_static_length_says_so():
    """The length of one element is not a static int: using it raises, never computes
    with a wrong length."""
    p = impl.pile(elems())
    with pytest.raises(TypeError, match="not a static"):
        vmap_pile(lambda x: inp.mean(x), out_axes=0)(p)
    with pytest.raises(TypeError, match="not a static"):
        vmap_pile(impl.jit(lambda x: x * 2))(p)
    # an inner vmap over the ragged axis
    with pytest.raises(TypeError, match="not a static"):
        vmap_pile(lambda x: impl.vmap(lambda r: r * 2)(x))(p)
    with pytest.raises(TypeError, match=r"ragged\(3, 1, 4\),\), \(ragged\(1, 3, 4\)"):
        vmap_pile(lambda x, y: x + y, in_axes=(pile_axis, pile_axis))(
            p, impl.pile(elems(lengths=(1, 3, 4))))
