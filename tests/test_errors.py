"""Every user error the transformations detect: the exception type and the key words of
its message (the values that were wrong), not exact strings."""
from __future__ import annotations

import numpy as np
import pytest

import impl
import impl.numpy as inp
from impl.primitives._define import define

from helpers import rs


def _has_all(msg, *words):
    low = msg.lower()
    missing = [w for w in words if w.lower() not in low]
    assert not missing, f"message lacks {missing}: {msg}"


# ------------------------------------------------------------------------ vmap

def test_vmap_in_axes_tuple_length_mismatch():
    with pytest.raises(ValueError) as e:
        impl.vmap(lambda x, y: x + y, in_axes=(0, 0, 0))(rs(3), rs(3))
    _has_all(str(e.value), "in_axes", "3", "2")


def test_vmap_in_axes_tree_mismatch():
    with pytest.raises(ValueError) as e:
        impl.vmap(lambda d: d["a"], in_axes=({"a": 0, "b": 0},))({"a": rs(3)})
    _has_all(str(e.value), "in_axes")


def test_vmap_in_axes_out_of_rank():
    with pytest.raises(ValueError) as e:
        impl.vmap(lambda x: x, in_axes=2)(rs(3, 4))
    _has_all(str(e.value), "axis 2", "rank", "(3, 4)")


def test_vmap_in_axes_bad_leaf_type():
    with pytest.raises((TypeError, ValueError)) as e:
        impl.vmap(lambda x: x, in_axes="zero")(rs(3))
    _has_all(str(e.value), "in_axes")


def test_vmap_out_axes_out_of_rank():
    import jax
    messages = []
    for m in (impl, jax):
        with pytest.raises(ValueError) as e:
            m.vmap(lambda x: x.sum(), out_axes=3)(rs(4, 2))
        messages.append(str(e.value))
    assert messages[0] == messages[1], messages   # JAX's message: the axis and the rank
    _has_all(messages[0], "3", "dimension 1")


def test_vmap_out_axes_tree_mismatch():
    with pytest.raises(ValueError) as e:
        impl.vmap(lambda x: (x, x), out_axes=(0, 0, 0))(rs(3))
    _has_all(str(e.value), "out_axes")


def test_vmap_out_axes_none_for_mapped_output():
    with pytest.raises(ValueError) as e:
        impl.vmap(lambda x: x * 2, out_axes=None)(rs(3))
    _has_all(str(e.value), "out_axes", "None")


def test_vmap_inconsistent_batch_sizes_lists_sizes():
    with pytest.raises(ValueError) as e:
        impl.vmap(lambda x, y: x + y)(rs(3, 2), rs(5, 2))
    _has_all(str(e.value), "inconsistent", "3", "5")


def test_vmap_axis_size_disagrees():
    with pytest.raises(ValueError) as e:
        impl.vmap(lambda x: x, axis_size=4)(rs(3))
    _has_all(str(e.value), "4", "3")


def test_vmap_all_none_without_axis_size():
    with pytest.raises(ValueError) as e:
        impl.vmap(lambda x: x, in_axes=None)(rs(3))
    _has_all(str(e.value), "axis_size")


# ------------------------------------------------------------------------ grad

def test_grad_of_non_scalar_output():
    with pytest.raises(TypeError) as e:
        impl.grad(lambda x: x * 2)(rs(3))
    _has_all(str(e.value), "scalar", "(3,)")


def test_grad_of_tuple_output():
    with pytest.raises(TypeError) as e:
        impl.grad(lambda x: (x.sum(), x.sum()))(rs(3))
    _has_all(str(e.value), "scalar")


def test_grad_of_integer_input():
    with pytest.raises(TypeError) as e:
        impl.grad(lambda x: x * 2)(3)
    _has_all(str(e.value), "int", "allow_int")


def test_grad_of_integer_output():
    with pytest.raises(TypeError) as e:
        impl.grad(lambda x: inp.sum(x > 0), allow_int=True)(rs(3))
    _has_all(str(e.value), "real")


def test_grad_argnums_out_of_range():
    with pytest.raises((ValueError, TypeError)) as e:
        impl.grad(lambda x: x.sum(), argnums=3)(rs(3))
    _has_all(str(e.value), "argnums")


def test_has_aux_not_pair():
    with pytest.raises(TypeError) as e:
        impl.grad(lambda x: x.sum(), has_aux=True)(rs(3))
    _has_all(str(e.value), "has_aux", "pair")


def test_non_array_output():
    with pytest.raises(TypeError) as e:
        impl.jvp(lambda x: "text", (1.0,), (1.0,))
    _has_all(str(e.value), "str")


# ------------------------------------------------------------------------- jvp

def test_jvp_shape_mismatch():
    with pytest.raises(ValueError) as e:
        impl.jvp(lambda x: x, (rs(3),), (rs(4),))
    _has_all(str(e.value), "(3,)", "(4,)")


def test_jvp_dtype_mismatch():
    with pytest.raises(TypeError) as e:
        impl.jvp(lambda x: x, (rs(3),), (rs(3).astype(np.float32),))
    _has_all(str(e.value), "float64", "float32")


def test_jvp_tree_mismatch():
    with pytest.raises(TypeError) as e:
        impl.jvp(lambda x, y: x, (rs(3), rs(3)), (rs(3),))
    _has_all(str(e.value), "same")


def test_vjp_cotangent_shape_mismatch():
    _, f_vjp = impl.vjp(lambda x: x * 2, rs(3))
    with pytest.raises(ValueError) as e:
        f_vjp(rs(4))
    _has_all(str(e.value), "[4]", "[3]")   # JAX's message prints the types, e.g. float32[4]


# -------------------------------------------------------------- escaped tracers

def test_tracer_escaping_grad_then_used():
    store = []

    def f(x):
        store.append(x)
        return inp.sum(x * x)

    impl.grad(f)(rs(3))
    with pytest.raises(impl.UnexpectedTracerError) as e:
        inp.sin(store[0])
    assert issubclass(impl.UnexpectedTracerError, TypeError)
    _has_all(str(e.value), "tracer")


def test_tracer_escaping_vmap_used_in_jit():
    store = []
    impl.vmap(lambda x: store.append(x) or x)(rs(2, 3))
    with pytest.raises(impl.UnexpectedTracerError):
        impl.jit(lambda y: y + store[0])(rs(3))


def test_tracer_escaping_jit_used_in_another_transformation():
    store = []
    impl.jit(lambda x: store.append(x) or x)(rs(3))
    with pytest.raises(TypeError):   # JAX's own escaped-tracer error, or impl's
        impl.vmap(lambda y: y * store[0])(rs(2, 3))


def test_tracer_escaping_jvp_used_under_grad():
    store = []
    impl.jvp(lambda x: store.append(x) or x, (rs(3),), (rs(3),))
    with pytest.raises(impl.UnexpectedTracerError) as e:
        impl.grad(lambda y: inp.sum(y * store[0]))(rs(3))
    _has_all(str(e.value), "escaped")


# --------------------------------------------------------------- missing rules

def _impl_only_primitive(name):
    return define(name, abstract_eval=lambda x: x, lowering=lambda x: x * 2, jvp=None,
                  batching=None)


def _jax_primitive_without_rules(name):
    """JAX's own primitive with evaluation and abstract evaluation only: the reference for
    the errors of transformations that meet a primitive they have no rule for."""
    import jax
    from jax.extend.core import Primitive
    p = Primitive(name)
    p.def_impl(lambda x: x * 2)
    p.def_abstract_eval(lambda x: x)
    return jax, p


def _raised(fn):
    with pytest.raises(Exception) as e:
        fn()
    return e.value


def _missing_rule_program(api, p, transform):
    x = rs(3).astype(np.float32)
    return {
        "jvp": lambda: api.jvp(p.bind, (x,), (x,)),
        "grad": lambda: api.grad(lambda x: p.bind(x).sum())(x),
        "vmap": lambda: api.vmap(p.bind)(rs(2, 3).astype(np.float32)),
        "transpose": lambda: api.linear_transpose(p.bind, x)(x),
        "jit": lambda: api.jit(p.bind)(x),
    }[transform]


@pytest.mark.parametrize("transform", ["jvp", "grad", "vmap", "transpose", "jit"])
def test_missing_rule_raises_jax_error(transform):
    """A transformation meeting a primitive without its rule raises JAX's
    NotImplementedError, in JAX's words (naming the primitive and the rule)."""
    name = f"only_evaluated_{transform}"
    jax, jax_p = _jax_primitive_without_rules(name)
    p = define(name, abstract_eval=lambda x: x, lowering=lambda x: x * 2, jvp=None,
               batching=None)
    if transform == "transpose":   # linear in forward mode, with no transpose
        from jax.interpreters import ad as jax_ad
        from impl.interpreters import ad
        jax_ad.primitive_jvps[jax_p] = lambda primals, tangents: (
            jax_p.bind(*primals), jax_p.bind(*tangents))
        ad.jvp_rules[p] = lambda primals, tangents: (p.bind(*primals), p.bind(*tangents))
    if transform == "jit":
        p = define(f"{name}_no_lowering", abstract_eval=lambda x: x, lowering=None,
                   impl=lambda x: np.asarray(x) * 2, jvp=None, batching=None)
        jax_p.name = p.name
    assert np.allclose(p.bind(rs(3)), 2 * rs(3))           # evaluation works
    want = _raised(_missing_rule_program(jax, jax_p, transform))
    got = _raised(_missing_rule_program(impl, p, transform))
    assert type(got) is type(want) is NotImplementedError
    assert str(got) == str(want)


def test_missing_abstract_eval_rule():
    p = define("no_abstract_eval", abstract_eval=None, lowering=lambda x: x, jvp=None,
               batching=None)
    with pytest.raises(NotImplementedError) as e:
        impl.make_jaxpr(p.bind)(rs(3))
    _has_all(str(e.value), "no_abstract_eval")


# ------------------------------------------------------------- concretization

def test_python_if_on_traced_value_under_jit():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(impl.ConcretizationTypeError) as e:
        impl.jit(f)(rs(3))
    assert issubclass(impl.ConcretizationTypeError, TypeError)
    _has_all(str(e.value), "concrete", "bool")


@pytest.mark.parametrize("conv", [float, int, bool])
def test_python_conversion_of_traced_value_under_jit(conv):
    with pytest.raises(impl.ConcretizationTypeError):
        impl.jit(lambda x: conv(x.sum()))(rs(3))


def test_python_if_allowed_under_grad_and_jvp():
    """Outside jit the values are concrete, so Python control flow works (as in JAX)."""
    f = lambda x: x * 2 if x > 0 else -x   # noqa: E731
    assert float(impl.grad(f)(1.5)) == 2.0
    assert float(impl.jvp(f, (-1.5,), (1.0,))[1]) == -1.0


def test_static_argnums_avoid_concretization():
    f = impl.jit(lambda x, n: x * 2 if n > 0 else -x, static_argnums=1)
    np.testing.assert_allclose(f(rs(3), 1), 2 * rs(3))


# ----------------------------------------------------------------- shape errors

def test_add_shape_mismatch_names_shapes():
    with pytest.raises((ValueError, TypeError)) as e:
        inp.add(inp.ones((3, 4)), inp.ones((5,)))
    _has_all(str(e.value), "(3, 4)", "(5,)")


def test_add_shape_mismatch_under_jit_and_vmap():
    with pytest.raises((ValueError, TypeError)) as e:
        impl.jit(lambda x, y: x + y)(rs(3, 4), rs(2))
    _has_all(str(e.value), "(3, 4)", "(2,)")
    with pytest.raises((ValueError, TypeError)) as e:
        impl.vmap(lambda x, y: x + y)(rs(2, 3), rs(2, 4))
    _has_all(str(e.value), "(3,)", "(4,)")


def test_primitive_shape_mismatch():
    from impl.primitives import elementwise as ew
    with pytest.raises(TypeError) as e:
        ew.add(rs(3), rs(4))
    _has_all(str(e.value), "add", "(3,)", "(4,)")


def test_primitive_dtype_mismatch():
    from impl.primitives import elementwise as ew
    with pytest.raises(TypeError) as e:
        impl.jit(ew.mul)(rs(3), rs(3).astype(np.float32))
    _has_all(str(e.value), "mul", "float32", "float64")


def test_matmul_shape_mismatch():
    with pytest.raises((ValueError, TypeError)) as e:
        inp.matmul(inp.ones((2, 3)), inp.ones((4, 5)))
    _has_all(str(e.value), "3", "4")


def test_reshape_bad_size():
    with pytest.raises((ValueError, TypeError)) as e:
        impl.jit(lambda x: x.reshape(4, 2))(rs(3, 2))
    _has_all(str(e.value), "(3, 2)")


def test_invalid_argument_type():
    with pytest.raises(TypeError) as e:
        impl.jvp(lambda x: x, ("abc",), ("abc",))
    _has_all(str(e.value), "str")
