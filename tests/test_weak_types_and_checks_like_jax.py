"""Weak types of reductions and gradients, argnums and cotangent checks, and
broadcast_to's result type, against JAX (x64 on, strict dtype promotion)."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as inp

SIDES = {"jax": (jax, jjnp), "impl": (impl, inp)}


@pytest.fixture(autouse=True)
def strict_promotion():
    with jax.numpy_dtype_promotion("strict"):
        yield


def _type(x):
    return str(jax.typeof(x))


def _weak_vector(api, np_, value):
    """A weakly typed rank-1 array (a Python scalar computed under jit, broadcast)."""
    return np_.broadcast_to(api.jit(lambda: value)(), (3,))


# sum and max in CI; the rest (each a second or so of compiling) nightly.
REDUCTIONS = ["sum", "max"] + [
    pytest.param(name, marks=pytest.mark.slow)
    for name in ["min", "amax", "amin", "ptp", "median", "prod", "mean", "nanmax", "nanmin"]]


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("value", [2.0, 2], ids=["float", "int"])
def test_reduction_of_a_weak_array_is_strong(name, value):
    def run(side, jitted):
        api, np_ = SIDES[side]
        fn = getattr(np_, name)
        whole = api.jit(fn) if jitted else fn
        x = _weak_vector(api, np_, value)
        return whole(x), api.jit(lambda v: fn(v, axis=0, keepdims=True))(x)

    for jitted in (False, True):
        want, got = run("jax", jitted), run("impl", jitted)
        assert [_type(g) for g in got] == [_type(w) for w in want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_masked_sum_with_initial_of_a_weak_array_is_strong():
    mask = np.array([True, False, True])
    got, want = [np_.sum(_weak_vector(api, np_, 2.0), where=mask, initial=1.0)
                 for api, np_ in (SIDES["impl"], SIDES["jax"])]
    assert _type(got) == _type(want)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


GRAD_FUNCTIONS = {
    "times numpy scalar": lambda np_: lambda x: x * np.float64(2),
    "sin times numpy scalar": lambda np_: lambda x: np_.sin(x) * np.float64(2),
    "plus strong array": lambda np_: lambda x: x + np_.asarray(1.0, np.float64),
}


@pytest.mark.parametrize("name", sorted(GRAD_FUNCTIONS))
def test_gradient_keeps_the_weak_type_of_its_primal(name):
    def run(side):
        api, np_ = SIDES[side]
        f = GRAD_FUNCTIONS[name](np_)
        weak, strong = np_.asarray(0.5), np_.asarray(0.5, np.float64)
        outs = [api.grad(f)(weak), api.grad(f)(strong), api.jit(api.grad(f))(weak),
                api.vjp(f, weak)[1](np_.ones((), np.float64))[0],
                api.vmap(api.grad(f))(np_.broadcast_to(weak, (2,)))]
        return outs

    want, got = run("jax"), run("impl")
    assert [_type(g) for g in got] == [_type(w) for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-15)


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "jacfwd", "jacrev"])
@pytest.mark.parametrize("argnums", [-2, (0, -3), 2, (2, -3)], ids=repr)
def test_out_of_range_argnums_raise_jax_exception_type(transform, argnums):
    def raised(api):
        try:
            getattr(api, transform)(lambda x, y=1.0: x * y, argnums=argnums)(1.0)
        except Exception as e:   # the exception's type is what is compared
            return type(e)
        return None

    want = raised(jax)
    assert want is not None
    assert raised(impl) is want


COTANGENTS = {
    "float16 for float64": (lambda np_: np_.sin, np.ones(2), lambda: np.ones(2, np.float16)),
    "wrong shape": (lambda np_: np_.sin, np.ones(2), lambda: np.ones(3)),
    "complex for real": (lambda np_: np_.sin, np.ones(2), lambda: np.ones(2, np.complex128)),
    "python int for float": (lambda np_: np_.sin, np.float64(1), lambda: 1),
    "float32 for float64": (lambda np_: np_.sin, np.float64(1), lambda: np.float32(1)),
}


@pytest.mark.parametrize("name", sorted(COTANGENTS))
def test_cotangent_of_the_wrong_type_is_a_value_error(name):
    fn, primal, cotangent = COTANGENTS[name]
    for api, np_ in (SIDES["jax"], SIDES["impl"]):
        pullback = api.vjp(fn(np_), np_.asarray(primal))[1]
        with pytest.raises(ValueError, match="unexpected JAX type") as info:
            pullback(cotangent())
        if api is jax:
            want = str(info.value)
        else:
            assert str(info.value) == want


def test_any_cotangent_goes_for_an_integer_output():
    def run(api, np_):
        x = np_.ones(2)
        pullback = api.vjp(lambda a: (np_.sin(a), np_.arange(2)), x)[1]
        return [pullback((np_.ones(2), ct)) for ct in (np_.arange(2), np_.ones(2))]

    want, got = run(*SIDES["jax"]), run(*SIDES["impl"])
    for g, w in zip(got, want):
        assert _type(g[0]) == _type(w[0])
        np.testing.assert_array_equal(np.asarray(g[0]), np.asarray(w[0]))


@pytest.mark.parametrize("value", [2.0, 3, np.float32(2), np.ones(3)],
                         ids=["float", "int", "float32", "ndarray"])
def test_broadcast_to_the_same_shape_returns_an_array(value):
    want = jjnp.broadcast_to(value, np.shape(value))
    got = inp.broadcast_to(value, np.shape(value))
    assert isinstance(got, jax.Array)
    assert _type(got) == _type(want)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
