"""The public transformations over pytrees and in combination, against JAX running the
same program (`import impl as jax` vs `import jax`)."""
from __future__ import annotations

import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import impl
import impl.numpy as inp
from impl.core import float0

from helpers import TOLERANCE, assert_tree_close, rs

close = functools.partial(assert_tree_close, tol=TOLERANCE["transformations"])


Point = collections.namedtuple("Point", ["x", "y"])


class Box:
    """A custom pytree node (registered below) holding two arrays and static metadata."""

    def __init__(self, a, b, tag="box"):
        self.a, self.b, self.tag = a, b, tag


jax.tree_util.register_pytree_node(
    Box, lambda bx: ((bx.a, bx.b), bx.tag), lambda tag, ch: Box(ch[0], ch[1], tag))


def both(fn_maker):
    """Run `fn_maker(jax_like, numpy_like)` with impl and with jax."""
    return fn_maker(impl, inp), fn_maker(jax, jnp)


# ---------------------------------------------------------------------- pytrees

def _tree_fn(np_):
    def f(tree):
        (a, b), d, p, none, box = tree
        out = np_.sin(a) * b + np_.sum(d["w"] ** 2) + p.x * p.y + np_.tanh(box.a) @ box.b
        return {"out": out, "aux": (np_.cos(d["v"]), None)}
    return f


def _tree_input():
    return ((rs(3, seed=1), rs(3, seed=2)), {"w": rs(2, seed=3), "v": rs(4, seed=4)},
            Point(rs(3, seed=5), rs(3, seed=6)), None, Box(rs(3, 3, seed=7), rs(3, seed=8)))


def _scalar_tree_fn(np_):
    f = _tree_fn(np_)
    return lambda t: np_.sum(f(t)["out"]) + np_.sum(f(t)["aux"][0])


@pytest.mark.parametrize("transform", ["eager", "jit", "jvp", "vjp", "grad", "linearize",
                                       "vmap", "jacfwd", "jacrev", "value_and_grad"])
def test_pytrees_through_transformations(transform):
    tree = _tree_input()
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        f, fs = _tree_fn(np_), _scalar_tree_fn(np_)
        if transform == "eager":
            res.append(f(tree))
        elif transform == "jit":
            res.append(J.jit(f)(tree))
        elif transform == "jvp":
            tan = jax.tree_util.tree_map(lambda x: np.ones_like(x) * 0.5, tree)
            res.append(J.jvp(f, (tree,), (tan,)))
        elif transform == "vjp":
            out, f_vjp = J.vjp(f, tree)
            res.append((out, f_vjp(jax.tree_util.tree_map(np.ones_like, out))))
        elif transform == "grad":
            res.append(J.grad(fs)(tree))
        elif transform == "value_and_grad":
            res.append(J.value_and_grad(fs)(tree))
        elif transform == "linearize":
            out, f_lin = J.linearize(f, tree)
            res.append((out, f_lin(jax.tree_util.tree_map(lambda x: np.full_like(x, 0.3),
                                                           tree))))
        elif transform == "vmap":
            batched = jax.tree_util.tree_map(lambda x: np.stack([x, 2 * x]), tree)
            res.append(J.vmap(f)(batched))
        elif transform == "jacfwd":
            res.append(J.jacfwd(lambda p: f((tree[0], tree[1], p, None, tree[4]))["out"])(
                tree[2]))
        elif transform == "jacrev":
            res.append(J.jacrev(lambda d: f((tree[0], d, tree[2], None, tree[4])))(tree[1]))
    close(*res)


def test_custom_node_output_keeps_static_data():
    f = lambda bx: Box(bx.a * 2, impl.numpy.sin(bx.b), tag=bx.tag + "!")
    out = impl.jit(impl.vmap(f))(Box(rs(2, 3), rs(2, 4), "t"))
    assert isinstance(out, Box) and out.tag == "t!"
    assert out.a.shape == (2, 3) and out.b.shape == (2, 4)


# ----------------------------------------------------------------------- has_aux

def _aux_fn(np_):
    def f(x, y):
        z = np_.sin(x) * y
        return np_.sum(z), {"z": z, "n": np_.cos(y)}
    return f


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "vjp", "jvp", "linearize",
                                       "jacfwd", "jacrev"])
def test_has_aux(transform):
    x, y = rs(3, seed=1), rs(3, seed=2)
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        f = _aux_fn(np_)
        if transform == "grad":
            res.append(J.grad(f, argnums=(0, 1), has_aux=True)(x, y))
        elif transform == "value_and_grad":
            res.append(J.value_and_grad(f, has_aux=True)(x, y))
        elif transform == "vjp":
            out, f_vjp, aux = J.vjp(f, x, y, has_aux=True)
            res.append((out, aux, f_vjp(np.float64(1.0))))
        elif transform == "jvp":
            res.append(J.jvp(f, (x, y), (np.ones(3), np.ones(3)), has_aux=True))
        elif transform == "linearize":
            out, f_lin, aux = J.linearize(f, x, y, has_aux=True)
            res.append((out, aux, f_lin(np.ones(3), np.full(3, 2.0))))
        elif transform == "jacfwd":
            res.append(J.jacfwd(lambda x: (np_.sin(x) * y, np_.cos(x)), has_aux=True)(x))
        elif transform == "jacrev":
            res.append(J.jacrev(lambda x: (np_.sin(x) * y, np_.cos(x)), has_aux=True)(x))
    close(*res)


# ------------------------------------------------------------------------ argnums

@pytest.mark.parametrize("argnums", [0, 1, 2, -1, (0,), (0, 2), (2, 0), (1, 2)])
def test_argnums(argnums):
    args = (rs(3, seed=1), rs(3, seed=2), rs(3, seed=3))
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        f = lambda a, b, c: np_.sum(np_.sin(a) * b * np_.exp(c))  # noqa: E731
        res.append((J.grad(f, argnums=argnums)(*args),
                    J.jacfwd(f, argnums=argnums)(*args),
                    J.jacrev(f, argnums=argnums)(*args)))
    close(*res)


# ------------------------------------------------------------- integers and float0

def test_jvp_integer_inputs_float0_tangents():
    x, n = rs(3), np.arange(3, dtype=np.int64)
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        f = lambda x, n: (x * n, n * 2, np_.sin(x))  # noqa: E731
        res.append(J.jvp(f, (x, n), (np.ones(3), np.zeros(3, float0))))
    close(*res)
    (_, (t_xn, t_n, t_sin)) = res[0]
    assert t_n.dtype == float0 and t_xn.dtype == np.float64


def test_jvp_integer_input_needs_float0_tangent():
    for J in (impl, jax):
        with pytest.raises(TypeError, match="float0"):
            J.jvp(lambda n: n * 2, (np.arange(3),), (np.ones(3, np.int64),))


def test_vjp_integer_input_gets_float0_cotangent():
    x, n = rs(3), np.arange(3)
    res = []
    for J in (impl, jax):
        out, f_vjp = J.vjp(lambda x, n: x * n, x, n)
        res.append(f_vjp(np.ones(3)))
    close(*res)
    assert res[0][1].dtype == float0


def test_grad_allow_int():
    x, n = rs(3), np.arange(3)
    res = [J.grad(lambda x, n: (x * n).sum(), argnums=(0, 1), allow_int=True)(x, n)
           for J in (impl, jax)]
    close(*res)


# ---------------------------------------------------------------- symbolic zeros

def test_unused_input_gets_zero_cotangent():
    x, y = rs(3, seed=1), rs(2, seed=2)
    res = [J.grad(lambda x, y: (x ** 2).sum(), argnums=(0, 1))(x, y) for J in (impl, jax)]
    close(*res)
    assert np.all(np.asarray(res[0][1]) == 0)


def test_vjp_program_does_not_materialise_zeros_for_unused_input():
    """The backward program of f(x, y) = sum(sin(x)) has no broadcast of zeros for y."""
    x, y = rs(3, seed=1), rs(4, seed=2)

    def backward(x, y):
        _, f_vjp = impl.vjp(lambda x, y: inp.sum(inp.sin(x)), x, y)
        return f_vjp(1.0)[0]       # only the x cotangent is returned

    # make_jaxpr keeps what the program does not use, as JAX's does: look at the rest.
    from impl.interpreters import partial_eval as pe
    text = str(pe.drop_unused_eqns(impl.make_jaxpr(backward)(x, y).jaxpr))
    assert "cos" in text and "mul" in text
    assert "broadcast_in_dim" not in text.replace("f64[3] = broadcast_in_dim", "")
    assert "f64[4]" not in text.split(". let")[1]   # nothing of y's shape is computed


def test_backward_pass_keeps_unused_cotangent_symbolic():
    """Inside the backward pass the cotangent of an unused input stays a symbolic Zero,
    and the staged linear program computes nothing for it."""
    from impl.interpreters import ad
    x, y = rs(3, seed=1), rs(4, seed=2)
    out, lin = ad.linearize_flat(lambda x, y: [inp.sum(inp.sin(x))], [x, y])
    assert "f64[4]" not in str(lin.jaxpr).split(". let")[1]
    assert "broadcast_in_dim" not in str(lin.jaxpr)
    ct_x, ct_y = lin.transpose([np.float64(1.0)])
    assert isinstance(ct_y, ad.Zero) and ct_y.aval.shape == (4,)
    np.testing.assert_allclose(ct_x, np.cos(x))


def test_jvp_program_has_no_zero_tangent_for_constant_input():
    x, y = rs(3, seed=1), rs(3, seed=2)
    text = str(impl.make_jaxpr(lambda x, y: impl.jvp(lambda x: inp.sin(x) * y, (x,),
                                                     (x,))[1])(x, y))
    assert "broadcast_in_dim" not in text
    assert "cos" in text


def test_linearize_of_function_ignoring_input():
    x, y = rs(3, seed=1), rs(3, seed=2)
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        out, f_lin = J.linearize(lambda x, y: np_.sin(x), x, y)
        res.append((out, f_lin(np.ones(3), np.ones(3))))
    close(*res)


# ------------------------------------------------------------ nested transformations

def test_no_perturbation_confusion():
    res = []
    for J in (impl, jax):
        f = lambda x: x * J.jvp(lambda y: x + y, (1.,), (1.,))[1]  # noqa: E731
        res.append(J.jvp(f, (1.,), (1.,)))
    close(*res)
    assert float(res[0][1]) == 1.0


def test_no_perturbation_confusion_grad():
    res = []
    for J in (impl, jax):
        f = lambda x: J.grad(lambda y: x * y)(2.0)  # noqa: E731
        res.append((J.grad(f)(3.0), J.grad(lambda x: x * J.grad(lambda y: x * y)(2.0))(3.0)))
    close(*res)


@pytest.mark.parametrize("order", [2, 3])
def test_grad_of_grad(order):
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        f = lambda x: np_.sin(x) * np_.exp(x) * x  # noqa: E731
        for _ in range(order):
            f = J.grad(f)
        res.append(f(0.7))
    close(*res)


def test_jvp_of_grad_and_grad_of_jvp():
    x = rs(3)
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        f = lambda x: np_.sum(np_.tanh(x) ** 3)  # noqa: E731
        a = J.jvp(J.grad(f), (x,), (np.ones(3),))
        b = J.grad(lambda x: np_.sum(J.jvp(f, (x,), (np.ones(3),))[1]))(x)
        res.append((a, b))
    close(*res)


def test_jit_inside_vmap_inside_grad_and_vice_versa():
    x, w = rs(4, 3, seed=1), rs(3, seed=2)
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        inner = J.jit(lambda w, x: np_.tanh(x @ w))
        f1 = J.grad(lambda w: np_.sum(J.vmap(inner, in_axes=(None, 0))(w, x)))
        f2 = J.jit(J.vmap(J.grad(lambda w, x: np_.sum(inner(w, x) ** 2)), in_axes=(None, 0)))
        f3 = J.vmap(J.jit(J.grad(lambda x: np_.sum(J.jit(np_.sin)(x) * w))))
        res.append((f1(w), f2(w, x), f3(x)))
    close(*res)


def test_hessian_of_multi_arg():
    x, y = rs(3, seed=1), rs(3, seed=2)
    res = [J.hessian(lambda x, y: (np_.sin(x) * y ** 2).sum(), argnums=(0, 1))(x, y)
           for J, np_ in ((impl, inp), (jax, jnp))]
    close(*res)


# ------------------------------------------------------------------------- vmap

def test_vmap_of_vmap_with_axes_trees():
    a, b = rs(3, 4, 5, seed=1), rs(5, 4, seed=2)
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        f = lambda d: {"s": d["a"] * d["b"], "t": np_.sin(d["b"])}  # noqa: E731
        inner = J.vmap(f, in_axes=({"a": 1, "b": 0},), out_axes={"s": 1, "t": 0})
        outer = J.vmap(inner, in_axes=({"a": 0, "b": None},), out_axes=({"s": -1, "t": None}))
        res.append(outer({"a": a, "b": b}))
    close(*res)


@pytest.mark.parametrize("in_axes,out_axes,shapes", [
    (-1, 0, ((3, 4), (5, 4))), ((0, -2), -1, ((3, 4), (3, 2))),
    ((None, 1), -2, ((4,), (4, 3))), ([1, None], 1, ((4, 3), (2,))), (0, (-1, 0), None)])
def test_vmap_axes(in_axes, out_axes, shapes):
    """Negative axes, None entries, list in_axes and out_axes trees."""
    if shapes is None:
        x, y = rs(3, 4, seed=1), rs(3, 2, seed=2)
        res = [J.vmap(lambda x, y: (np_.sin(x)[:, None] * y[None, :], np_.sum(y)),
                      in_axes=in_axes, out_axes=out_axes)(x, y)
               for J, np_ in ((impl, inp), (jax, jnp))]
    else:
        x, y = rs(*shapes[0], seed=1), rs(*shapes[1], seed=2)
        res = []
        for J, np_ in ((impl, inp), (jax, jnp)):
            f = lambda x, y: (np_.sin(x) * 2 + np_.sum(y)) * np_.ones((2, 1))  # noqa: E731
            res.append(J.vmap(f, in_axes=in_axes, out_axes=out_axes)(x, y))
    close(*res)


def test_vmap_axis_size_with_all_none():
    x = rs(3)
    res = [J.vmap(lambda x: x * 2, in_axes=None, axis_size=4)(x) for J in (impl, jax)]
    close(*res)
    assert res[0].shape == (4, 3)


def test_vmap_out_axes_none_for_unbatched_output():
    x, c = rs(5, 3), rs(3)
    res = [J.vmap(lambda x: (x * c, c * 2), out_axes=(0, None))(x) for J in (impl, jax)]
    close(*res)
    assert res[0][1].shape == (3,)


def test_vmap_kwargs_are_mapped():
    x, y = rs(4, 3, seed=1), rs(4, 3, seed=2)
    res = [J.vmap(lambda x, y=None: x * y)(x, y=y) for J in (impl, jax)]
    close(*res)


# -------------------------------------------------------------------------- jit

def test_jit_static_argnums_and_argnames():
    x = rs(3)
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        def f(x, n, *, mode):
            return np_.sin(x) * n if mode == "sin" else np_.cos(x) + n
        g = J.jit(f, static_argnums=1, static_argnames="mode")
        res.append((g(x, 3, mode="sin"), g(x, 2, mode="cos")))
    close(*res)


def test_jit_static_argnames_positional():
    x = rs(3)
    res = []
    for J in (impl, jax):
        g = J.jit(lambda x, k: x ** k, static_argnames="k")
        res.append((g(x, 2), g(x, k=3)))
    close(*res)


def test_jit_caching_trace_count():
    count = {"n": 0}

    def f(x, y):
        count["n"] += 1
        return impl.numpy.sin(x) * y

    g = impl.jit(f)
    g(rs(3), rs(3, seed=1))
    g(rs(3, seed=2), rs(3, seed=3))
    assert count["n"] == 1, "second call with the same shapes must not retrace"
    g(rs(4), rs(4))
    assert count["n"] == 2, "a new shape must retrace"
    g(rs(3).astype(np.float32), rs(3).astype(np.float32))
    assert count["n"] == 3, "a new dtype must retrace"
    g(rs(4, seed=5), rs(4, seed=6))
    assert count["n"] == 3


def test_jit_static_arg_change_retraces():
    count = {"n": 0}

    def f(x, k):
        count["n"] += 1
        return x * k

    g = impl.jit(f, static_argnums=1)
    g(rs(3), 2)
    g(rs(3), 2)
    assert count["n"] == 1
    g(rs(3), 3)
    assert count["n"] == 2


def test_jit_decorator_form_and_pytree_output():
    @impl.jit
    def f(x):
        return {"a": x * 2, "b": (x.sum(), None)}

    out = f(rs(3))
    want = jax.jit(lambda x: {"a": x * 2, "b": (x.sum(), None)})(rs(3))
    close(out, want)


# -------------------------------------------------------------------- make_jaxpr

def test_make_jaxpr_readable():
    closed = impl.make_jaxpr(lambda x, y: inp.sum(inp.sin(x) * y + 1.0))(rs(3), rs(3))
    text = str(closed)
    for word in ("lambda", "sin", "mul", "add", "reduce_sum", "f64[3]", "let", "in"):
        assert word in text, word
    assert text.count("\n") >= 4


def test_make_jaxpr_of_transformations_names_primitives():
    text = str(impl.make_jaxpr(impl.grad(lambda x: inp.sum(inp.exp(x))))(rs(3)))
    assert "exp" in text and "mul" in text
    text = str(impl.make_jaxpr(impl.vmap(lambda x: x @ x))(rs(2, 3)))
    assert "dot_general" in text
    text = str(impl.make_jaxpr(lambda x: impl.jit(inp.cos)(x) * 2)(rs(3)))
    assert "jit" in text and "cos" in text


def test_make_jaxpr_eval_matches():
    from impl import core
    f = lambda x, y: inp.tanh(x) @ y + inp.sum(x)  # noqa: E731
    x, y = rs(2, 3, seed=1), rs(3, seed=2)
    closed = impl.make_jaxpr(f)(x, y)
    (got,) = core.eval_jaxpr(closed.jaxpr, closed.consts, x, y)
    want = jnp.tanh(x) @ y + jnp.sum(x)
    close(got, want)
    # the program itself can be transformed
    g = impl.grad(lambda x: inp.sum(core.jaxpr_as_fun(closed)(x, y)[0]))(x)
    close(g, jax.grad(lambda x: jnp.sum(jnp.tanh(x) @ y + jnp.sum(x)))(x))


def test_make_jaxpr_static_argnums_and_shapes():
    closed, shape = impl.make_jaxpr(lambda x, n: x * n, static_argnums=1,
                                    return_shape=True)(rs(3), 2)
    assert shape.shape == (3,) and shape.dtype == np.float64
    assert len(closed.jaxpr.invars) == 1


def test_eval_shape():
    out = impl.eval_shape(lambda x: {"y": inp.sum(x, axis=0)}, jax.ShapeDtypeStruct((3, 4),
                                                                                  np.float32))
    assert out["y"].shape == (4,) and out["y"].dtype == np.float32


# ----------------------------------------------------------------- linear_transpose

def test_linear_transpose_pytree():
    x = {"a": rs(3, seed=1), "b": rs(2, 3, seed=2)}
    res = []
    for J, np_ in ((impl, inp), (jax, jnp)):
        f = lambda d: (2.0 * d["a"] + np_.sum(d["b"], axis=0), d["b"].T)  # noqa: E731
        f_t = J.linear_transpose(f, x)
        res.append(f_t((np.ones(3), np.ones((3, 2)))))
    close(*res)
