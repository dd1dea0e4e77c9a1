"""The rest of the batching seed's machinery, against JAX: chunked vmap
(`chunk_size`), `reduce_axes` for grad/value_and_grad/vjp/linear_transpose,
`register_vmappable`, and vmap's `sum_match`."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.interpreters import batching as jax_batching
from jax import lax

import impl
import impl.numpy as inp
from impl import lax as ilax
from impl.interpreters import batching


def close(got, want, tol=1e-10):
    jax.tree_util.tree_map(
        lambda g, w: np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol,
                                                atol=tol), got, want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype


def rs(*shape, seed=0):
    return np.random.RandomState(seed).standard_normal(shape)


def layer(np_):
    return lambda w, x: np_.tanh(x @ w["W"] + w["b"])


PARAMS = {"W": rs(5, 4), "b": rs(4, seed=1)}
X = rs(10, 5, seed=2)


# ---------------------------------------------------------------- chunk_size

@pytest.mark.parametrize("k", [1, 3, 4, 10, 16])
def test_chunked_equals_vmap(k):
    got = impl.vmap(layer(inp), in_axes=(None, 0), chunk_size=k)(PARAMS, X)
    close(got, jax.vmap(layer(jnp), in_axes=(None, 0))(PARAMS, X))


def test_chunked_axes_pytrees_and_unmapped_outputs():
    def f(np_):
        return lambda x, y: {"s": np_.sum(x * y[1]), "p": x * 2, "c": y[0]}
    x, y = rs(3, 7), (rs(2), rs(7, 3, seed=1))
    kw = dict(in_axes=(1, (None, 0)), out_axes={"s": 0, "p": 1, "c": None})
    got = impl.vmap(f(inp), chunk_size=3, **kw)(x, y)
    close(got, jax.vmap(f(jnp), **kw)(x, y))


def test_chunked_under_jit_grad_jvp_and_vmap():
    def loss(np_, vmap_):
        return lambda w, xs: np_.sum(vmap_(layer(np_), in_axes=(None, 0))(w, xs) ** 2)
    chunked = lambda f, **kw: impl.vmap(f, chunk_size=4, **kw)
    close(impl.jit(loss(inp, chunked))(PARAMS, X), loss(jnp, jax.vmap)(PARAMS, X))
    grads = impl.grad(loss(inp, chunked), argnums=(0, 1))(PARAMS, X)
    close(grads, jax.grad(loss(jnp, jax.vmap), argnums=(0, 1))(PARAMS, X))
    close(impl.jit(impl.grad(loss(inp, chunked)))(PARAMS, X),
          jax.grad(loss(jnp, jax.vmap))(PARAMS, X))
    t = jax.tree_util.tree_map(np.ones_like, PARAMS)
    close(impl.jvp(lambda w: loss(inp, chunked)(w, X), (PARAMS,), (t,)),
          jax.jvp(lambda w: loss(jnp, jax.vmap)(w, X), (PARAMS,), (t,)))
    ws = {"W": np.stack([PARAMS["W"], -PARAMS["W"]]), "b": np.stack([PARAMS["b"]] * 2)}
    close(impl.vmap(lambda w: chunked(layer(inp), in_axes=(None, 0))(w, X))(ws),
          jax.vmap(lambda w: jax.vmap(layer(jnp), in_axes=(None, 0))(w, X))(ws))


def test_chunked_inside_a_named_vmap_sees_the_outer_axis():
    def f(L, vmap_kw):
        inner = lambda x: x * L.psum(x, "o")
        return lambda xs: (impl.vmap if L is ilax else jax.vmap)(inner, **vmap_kw)(xs)
    xs = rs(2, 7)
    got = impl.vmap(f(ilax, dict(chunk_size=3)), axis_name="o")(xs)
    close(got, jax.vmap(f(lax, {}), axis_name="o")(xs))


def test_chunked_program_is_a_loop_over_chunk_sized_values():
    """Lowered, the chunks run one after another in a loop whose values are one chunk's
    (the memory this saves is measured against JAX in benchmarks/bench_batching.py)."""
    w, xs = rs(64, 64), rs(512, 64)

    def f(chunk):
        return impl.jit(impl.vmap(lambda x: inp.sum(inp.tanh(inp.outer(x, x) @ w) @ w),
                                  chunk_size=chunk))
    assert "chunk_map" in str(impl.make_jaxpr(f(8))(xs))
    whole, chunked = f(None).lower(xs).as_text(), f(8).lower(xs).as_text()
    assert "tensor<512x64x64xf64>" in whole and "while" not in whole
    assert "stablehlo.while" in chunked and "tensor<8x64x64xf64>" in chunked
    assert "tensor<512x64x64xf64>" not in chunked
    close(f(8)(xs), f(None)(xs))


def test_chunked_negative_axes_unmapped_inputs_linearize_and_hessian():
    x = rs(3, 7)
    close(impl.vmap(lambda v: inp.sin(v) * 2, in_axes=-1, out_axes=-2, chunk_size=2)(x),
          jax.vmap(lambda v: jnp.sin(v) * 2, in_axes=-1, out_axes=-2)(x))
    close(impl.vmap(lambda v: v * 2, in_axes=None, axis_size=5, chunk_size=2)(x[0]),
          jax.vmap(lambda v: v * 2, in_axes=None, axis_size=5)(x[0]))
    t = rs(7, seed=1)
    close(impl.linearize(impl.vmap(inp.sin, chunk_size=3), x[0])[1](t),
          jax.linearize(jax.vmap(jnp.sin), x[0])[1](t))
    hess = impl.hessian(lambda v: inp.sum(impl.vmap(inp.sin, chunk_size=3)(v) ** 2))
    close(impl.jit(hess)(x[0]),
          jax.hessian(lambda v: jnp.sum(jax.vmap(jnp.sin)(v) ** 2))(x[0]))


def test_chunk_size_errors():
    for bad in (0, -2, 1.5, True, "4"):
        with pytest.raises(ValueError, match="chunk_size must be a positive int"):
            impl.vmap(lambda x: x, chunk_size=bad)
    with pytest.raises(ValueError, match="chunk_size cannot be combined with axis_name"):
        impl.vmap(lambda x: x, axis_name="i", chunk_size=2)
    pile = impl.pile([np.ones(2), np.ones(3)])
    with pytest.raises(NotImplementedError, match="chunk_size is not supported for piles"):
        impl.vmap(lambda x: x, in_axes=batching.pile_axis, out_axes=batching.pile_axis,
                  chunk_size=1)(pile)


# --------------------------------------------------------------- reduce_axes

def loss(np_):
    return lambda w, x: np_.sum(layer(np_)(w, x) ** 2)


def per_example_total():
    """The reference: JAX's per-example gradients, summed."""
    return jax.tree_util.tree_map(lambda g: g.sum(0),
                                  jax.vmap(jax.grad(loss(jnp)), in_axes=(None, 0))(PARAMS, X))


def test_grad_reduce_axes_is_the_total_gradient():
    f = impl.vmap(impl.grad(loss(inp), reduce_axes=("batch",)), in_axes=(None, 0),
                  out_axes=None, axis_name="batch")
    close(f(PARAMS, X), per_example_total())
    close(impl.jit(f)(PARAMS, X), per_example_total())


def test_mapped_inputs_keep_per_example_gradients():
    f = impl.vmap(impl.grad(loss(inp), argnums=(0, 1), reduce_axes="batch"),
                  in_axes=(None, 0), out_axes=(None, 0), axis_name="batch")
    gw, gx = f(PARAMS, X)
    close(gw, per_example_total())
    close(gx, jax.vmap(jax.grad(loss(jnp), 1), in_axes=(None, 0))(PARAMS, X))


def test_value_and_grad_vjp_and_linear_transpose_reduce_axes():
    vg = impl.vmap(impl.value_and_grad(loss(inp), reduce_axes=("b",)), in_axes=(None, 0),
                   out_axes=(0, None), axis_name="b")(PARAMS, X)
    close(vg[0], jax.vmap(loss(jnp), in_axes=(None, 0))(PARAMS, X))
    close(vg[1], per_example_total())

    def pulled(w, x):
        out, f_vjp = impl.vjp(lambda w: layer(inp)(w, x), w, reduce_axes=("b",))
        return f_vjp(out)[0]
    want = jax.tree_util.tree_map(lambda g: g.sum(0), jax.vmap(
        lambda w, x: jax.vjp(lambda w: layer(jnp)(w, x), w)[1](layer(jnp)(w, x))[0],
        in_axes=(None, 0))(PARAMS, X))
    close(impl.vmap(pulled, in_axes=(None, 0), out_axes=None, axis_name="b")(PARAMS, X), want)

    a = rs(5)

    def transposed(ct):
        return impl.linear_transpose(lambda v: v * a, a, reduce_axes="b")(ct)[0]
    cts = rs(3, 5, seed=4)
    close(impl.vmap(transposed, axis_name="b", out_axes=None)(cts), (cts * a).sum(0))


def test_reduce_axes_of_a_value_not_used_per_example():
    """The cotangent of a broadcast input is the same in every element: summing it over
    the axis multiplies it by the axis size."""
    f = impl.vmap(impl.grad(lambda w, x: w * 2.0 + 0 * x, reduce_axes="b"),
                  in_axes=(None, 0), out_axes=None, axis_name="b")
    close(f(1.5, rs(6)), jnp.asarray(12.0, dtype=jnp.float64))


@impl.custom_vjp
def _square_vjp(x):
    return x ** 2


_square_vjp.defvjp(lambda x: (x ** 2, x), lambda x, g: (2 * x * g,))


@impl.custom_jvp
def _sin_jvp(x):
    return inp.sin(x)


_sin_jvp.defjvp(lambda p, t: (inp.sin(p[0]), inp.cos(p[0]) * t[0]))

# The same loss, sum(sin(x @ W) ** 2), written through each construct reduce_axes must
# pass through: custom rules, jit, remat, and control flow.
THROUGH = {
    "custom_vjp": lambda w, x: inp.sum(_square_vjp(inp.sin(x @ w))),
    "custom_jvp": lambda w, x: inp.sum(_sin_jvp(x @ w) ** 2),
    "jit": lambda w, x: impl.jit(lambda w, x: inp.sum(inp.sin(x @ w) ** 2))(w, x),
    "checkpoint": lambda w, x: impl.checkpoint(lambda w, x: inp.sum(inp.sin(x @ w) ** 2))(w, x),
    "scan": lambda w, x: ilax.scan(lambda c, r: (c + inp.sum(inp.sin(r @ w) ** 2), None),
                                   0.0, x[None])[0],
    "cond": lambda w, x: ilax.cond(x[0] > -100.0, lambda w: inp.sum(inp.sin(x @ w) ** 2),
                                   lambda w: 0.0 * inp.sum(w), w),
    "fori_loop": lambda w, x: ilax.fori_loop(0, 1, lambda i, c: c + inp.sum(inp.sin(x @ w)
                                                                          ** 2), 0.0),
}


@pytest.mark.parametrize("construct", THROUGH)
def test_reduce_axes_through_custom_rules_jit_remat_and_control_flow(construct):
    w = PARAMS["W"]
    per_example = jax.vmap(jax.grad(lambda w, x: jnp.sum(jnp.sin(x @ w) ** 2)),
                           in_axes=(None, 0))(w, X)
    f = impl.vmap(impl.grad(THROUGH[construct], reduce_axes="b"), in_axes=(None, 0),
                  out_axes=None, axis_name="b")
    close(f(w, X), per_example.sum(0))


def test_reduce_axes_over_one_of_two_named_axes():
    xs = rs(2, 3, 5)
    f = impl.vmap(impl.vmap(impl.grad(loss(inp), reduce_axes="j"), in_axes=(None, 0),
                            out_axes=None, axis_name="j"), in_axes=(None, 0), axis_name="i")
    per = jax.vmap(jax.vmap(jax.grad(loss(jnp)), in_axes=(None, 0)), in_axes=(None, 0))(
        PARAMS, xs)
    close(f(PARAMS, xs), jax.tree_util.tree_map(lambda g: g.sum(1), per))


def test_reduce_axes_does_not_materialise_per_example_gradients_when_compiled():
    w, xs = {"W": rs(256, 256), "b": rs(256)}, rs(512, 256)
    f = impl.jit(impl.vmap(impl.grad(loss(inp), reduce_axes="b"), in_axes=(None, 0),
                           out_axes=None, axis_name="b"))
    temp = f.lower(w, xs).compile().memory_analysis().temp_size_in_bytes
    per_example_bytes = 512 * 256 * 256 * 8
    assert temp < per_example_bytes / 16, temp


def test_reduce_axes_errors():
    with pytest.raises(NameError, match="unbound axis name: b"):
        impl.grad(loss(inp), reduce_axes="b")(PARAMS, X[0])
    with pytest.raises(NotImplementedError, match="reduce_axes"):
        jax.vmap(impl.grad(loss(inp), reduce_axes="b"), in_axes=(None, 0),
                 axis_name="b")(PARAMS, X)


# --------------------------------------------------------- register_vmappable

class Masked:
    """A value with a validity mask, mapped as one: in/out specs are ints."""

    def __init__(self, values, mask):
        self.values, self.mask = values, mask

    shape = property(lambda self: self.values.shape)


jax.tree_util.register_pytree_node(Masked, lambda m: ((m.values, m.mask), None),
                                   lambda _, c: Masked(*c))


def _masked_to_elt(cont, get_idx, m, spec):
    return Masked(cont(m.values, spec), cont(m.mask, spec))


def _masked_from_elt(cont, axis_size, m, spec):
    return Masked(cont(axis_size, m.values, spec), cont(axis_size, m.mask, spec))


class Shared:
    """Only its first field is mapped; `spec` is a SharedSpec."""

    def __init__(self, per_elem, common, index=None):
        self.per_elem, self.common, self.index = per_elem, common, index


jax.tree_util.register_pytree_node(Shared, lambda s: ((s.per_elem, s.common, s.index), None),
                                   lambda _, c: Shared(*c))


class SharedSpec:
    def __init__(self, axis):
        self.axis = axis


def _shared_to_elt(cont, get_idx, s, spec):
    return Shared(cont(s.per_elem, spec.axis), s.common, get_idx())


def _shared_from_elt(cont, axis_size, s, spec):
    return Shared(cont(axis_size, s.per_elem, spec.axis), cont(axis_size, s.common, None),
                  cont(axis_size, s.index, 0))


@pytest.fixture
def registered():
    for reg in (batching.register_vmappable, jax_batching.register_vmappable):
        reg(Masked, int, int, _masked_to_elt, _masked_from_elt, None)
        reg(Shared, SharedSpec, int, _shared_to_elt, _shared_from_elt, None)
    yield
    batching.unregister_vmappable(Masked)
    batching.unregister_vmappable(Shared)
    for table in (jax_batching.vmappables, jax_batching.to_elt_handlers,
                  jax_batching.from_elt_handlers):
        table.pop(Masked, None)
        table.pop(Shared, None)


def _as_tuple(x):
    if isinstance(x, Masked):
        return ("Masked", x.values, x.mask)
    return ("Shared", x.per_elem, x.common, x.index)


def test_registered_type_with_int_specs(registered):
    def f(np_):
        return lambda m, c: Masked(np_.where(m.mask, m.values * c, 0.0), m.mask)
    m = Masked(rs(3, 4), np.arange(12).reshape(3, 4) % 2 == 0)
    for vmap, np_, wrap in ((impl.vmap, inp, impl.jit), (jax.vmap, jnp, jax.jit)):
        out = wrap(vmap(f(np_), in_axes=(1, None), out_axes=0))(m, 2.0)
        if np_ is inp:
            got = _as_tuple(out)
        else:
            close(got[1:], _as_tuple(out)[1:])
            assert got[0] == "Masked"


def test_registered_type_with_its_own_spec_and_get_idx(registered):
    def f(np_):
        return lambda s: Shared(s.per_elem * s.common, s.common + 1, s.index * 10)
    s = Shared(rs(4, 2), rs(2, seed=1))
    kw = dict(in_axes=SharedSpec(0), out_axes=SharedSpec(1))
    got = impl.vmap(f(inp), axis_size=4, **kw)(s)
    want = jax.vmap(f(jnp), axis_size=4, **kw)(s)
    close(_as_tuple(got)[1:], _as_tuple(want)[1:])
    # Neither can tell the size from a spec it does not know:
    with pytest.raises(ValueError, match="at least one non-None value in in_axes"):
        impl.vmap(f(inp), **kw)(s)
    with pytest.raises(ValueError, match="at least one non-None value in in_axes"):
        jax.vmap(f(jnp), **kw)(s)


def test_registered_type_with_its_own_spec_under_jit(registered):
    def f(np_):
        return lambda s: Shared(s.per_elem * s.common, s.common + 1, s.index * 10)
    s = Shared(rs(4, 2), rs(2, seed=1))
    kw = dict(in_axes=SharedSpec(0), out_axes=SharedSpec(1), axis_size=4)
    got = impl.jit(impl.vmap(f(inp), **kw))(s)
    want = jax.jit(jax.vmap(f(jnp), **kw))(s)
    close(_as_tuple(got)[1:], _as_tuple(want)[1:])


def test_make_iota_handler_and_unregister():
    calls = []

    def iota(n):
        calls.append(n)
        return np.arange(n, dtype=np.int32) * 100

    class Size(int):
        pass

    batching.register_vmappable(Shared, SharedSpec, Size, _shared_to_elt, _shared_from_elt,
                                iota)
    try:
        assert batching.make_iota(Size(3)).tolist() == [0, 100, 200]
        assert batching.make_iota(3).tolist() == [0, 1, 2]
    finally:
        batching.unregister_vmappable(Shared)
    assert Size not in batching.make_iota_handlers and not batching.is_vmappable(
        Shared(1, 2)) and calls == [3]
    with pytest.raises(ValueError, match="not registered"):
        batching.unregister_vmappable(Shared)


# ------------------------------------------------------------------ sum_match

def test_sum_match():
    def f(np_):
        return lambda x, y: (x * y, np_.sin(y))
    x, y = rs(4, 3), rs(3, seed=1)
    kw = dict(in_axes=(0, None), out_axes=(None, None), sum_match=True)
    close(impl.vmap(f(inp), **kw)(x, y), jax.vmap(f(jnp), **kw)(x, y))
    close(impl.vmap(f(inp), chunk_size=3, **kw)(x, y), jax.vmap(f(jnp), **kw)(x, y))
    with pytest.raises(ValueError, match="sum_match"):
        impl.vmap(f(inp), in_axes=(0, None), out_axes=None)(x, y)


# ------------------------------------------------------------------------ docs

def test_docs_batching_examples_run():
    """Every code block of docs/batching.md runs (the documented API is the real one)."""
    import pathlib
    import re
    text = (pathlib.Path(__file__).parent.parent / "docs" / "batching.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 7
    namespace = {}
    for block in blocks:
        exec(compile(block, "docs/batching.md", "exec"), namespace)
    assert isinstance(namespace["doubled"], batching.Pile)
    assert np.shape(namespace["total"]) == (5, 4)
    batching.unregister_vmappable(namespace["Masked"])
