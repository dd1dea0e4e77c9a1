"""Weak types of reductions and gradients, argnums and cotangent checks, broadcast_to's
result type, and lax's checks of its operands' dtypes, against JAX (x64 on, strict dtype
promotion)."""
import jax
import jax.numpy as jjnp
import jax.scipy.special  # noqa: F401  (logit)
from jax import lax as jlax
import numpy as np
import pytest

import impl
import impl.numpy as inp
import impl.scipy.special  # noqa: F401  (logit)
from impl import lax as ilax

SIDES = {"jax": (jax, jjnp), "impl": (impl, inp)}
LAX = {jax: jlax, impl: ilax}


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


# ------------------------------------------------------------ lax's operand dtypes
# jax.lax takes a Python scalar at its default dtype (int32 and float32, int64 and
# float64 with x64) and gives weakly typed operands no leeway: operands that must share a
# dtype must have equal ones. Each case: (call(lax, numpy, *arrays), arrays); the arrays
# are traced under jit, vmap (a batch of two copies) and grad.
F32, I32, F16 = np.ones(3, np.float32), np.arange(3, dtype=np.int32), np.ones(3, np.float16)
U32, BOOLS = np.arange(3, dtype=np.uint32), np.array([True, False, True])
ROWS = np.ones((2, 3), np.float32)
INDICES = np.array([[0], [2]], np.int32)
SCATTER_DNUMS = jlax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                             scatter_dims_to_operand_dims=(0,))
PAD = [(1, 1, 0)]


def _weak(L, value, n=3):
    """A weakly typed vector (lax.full of a Python scalar)."""
    return L.full((n,), value)


# Why a case is not differentiated (its third entry): JAX's derivative fails first.
NO_DERIVATIVE = "JAX looks up the missing derivative rule before it checks dtypes"
PROMOTING_DERIVATIVE = ("JAX's derivative promotes like jnp, which strict promotion refuses "
                        "(test_pow_with_an_integer_exponent_differentiates_as_jax)")
GENERIC_REDUCE_WINDOW = ("JAX's derivative of a reduce_window with a non-identity initial "
                         "value fails on its own (ValueError)")

LAX_DTYPE_CASES = {
    "add(f16, 2.0)": (lambda L, N, a: L.add(a, 2.0), (F16,)),
    "add(i32, 2.0)": (lambda L, N, a: L.add(a, 2.0), (I32,)),
    "add(f32, 2.0)": (lambda L, N, a: L.add(a, 2.0), (F32,)),
    "add(i32, 2)": (lambda L, N, a: L.add(a, 2), (I32,)),
    "add(f32, float64 scalar)": (lambda L, N, a: L.add(a, np.float64(2)), (F32,)),
    "add(2, 3.0)": (lambda L, N: L.add(2, 3.0), ()),
    "add(2.0, 3.0)": (lambda L, N: L.add(2.0, 3.0), ()),
    "add(f16, asarray(2.0))": (lambda L, N, a: L.add(a, N.asarray(2.0)), (F16,)),
    "add(f32, weak vector)": (lambda L, N, a: L.add(a, _weak(L, 2.0)), (F32,)),
    "sub(f32, f16)": (lambda L, N, a, b: L.sub(a, b), (F32, F16)),
    "mul(2, f32)": (lambda L, N, a: L.mul(2, a), (F32,)),
    "div(i32, 2.0)": (lambda L, N, a: L.div(a, 2.0), (I32,)),
    "div(i32, 2)": (lambda L, N, a: L.div(a, 2), (I32,)),
    "rem(f32, 2)": (lambda L, N, a: L.rem(a, 2), (F32,)),
    "max(f32, 0)": (lambda L, N, a: L.max(a, 0), (F32,)),
    "min(f32, 0.0)": (lambda L, N, a: L.min(a, 0.0), (F32,)),
    "eq(f32, 1)": (lambda L, N, a: L.eq(a, 1), (F32,)),
    "ne(i32, 1)": (lambda L, N, a: L.ne(a, 1), (I32,)),
    "lt(i32, 1.0)": (lambda L, N, a: L.lt(a, 1.0), (I32,)),
    "ge(f32, f32)": (lambda L, N, a, b: L.ge(a, b), (F32, F32)),
    "le(f32, 1)": (lambda L, N, a: L.le(a, 1), (F32,)),
    "gt(f16, 1.0)": (lambda L, N, a: L.gt(a, 1.0), (F16,)),
    "atan2(f32, 1)": (lambda L, N, a: L.atan2(a, 1), (F32,)),
    "atan2(f32, 1.0)": (lambda L, N, a: L.atan2(a, 1.0), (F32,)),
    "nextafter(f32, 1)": (lambda L, N, a: L.nextafter(a, 1), (F32,), NO_DERIVATIVE),
    "nextafter(f32, f16)": (lambda L, N, a, b: L.nextafter(a, b), (F32, F16), NO_DERIVATIVE),
    "pow(f32, 2)": (lambda L, N, a: L.pow(a, 2), (F32,)),
    "pow(f32, 2.0)": (lambda L, N, a: L.pow(a, 2.0), (F32,)),
    "pow(f32, i32)": (lambda L, N, a, b: L.pow(a, b), (F32, I32), PROMOTING_DERIVATIVE),
    "pow(f16, f32)": (lambda L, N, a, b: L.pow(a, b), (F16, F32)),
    "integer_pow(f32, 2)": (lambda L, N, a: L.integer_pow(a, 2), (F32,)),
    "bitwise_or(i32, 1)": (lambda L, N, a: L.bitwise_or(a, 1), (I32,)),
    "bitwise_xor(u32, 1)": (lambda L, N, a: L.bitwise_xor(a, 1), (U32,)),
    "bitwise_and(bool, True)": (lambda L, N, a: L.bitwise_and(a, True), (BOOLS,)),
    "shift_left(u32, 1)": (lambda L, N, a: L.shift_left(a, 1), (U32,)),
    "shift_right_logical(i32, 1)": (lambda L, N, a: L.shift_right_logical(a, 1), (I32,)),
    "shift_right_arithmetic(u32, u32)":
        (lambda L, N, a, b: L.shift_right_arithmetic(a, b), (U32, U32)),
    "clamp(0, f32, 1)": (lambda L, N, a: L.clamp(0, a, 1), (F32,)),
    "clamp(0.0, f32, 1.0)": (lambda L, N, a: L.clamp(0.0, a, 1.0), (F32,)),
    "clamp(0.0, f16, 1.0)": (lambda L, N, a: L.clamp(0.0, a, 1.0), (F16,)),
    "clamp(f16 scalar, f32, 1.0)": (lambda L, N, a: L.clamp(np.float16(0), a, 1.0), (F32,)),
    "clamp(0.0, 2.0, 1.0)": (lambda L, N: L.clamp(0.0, 2.0, 1.0), ()),
    "select_n(True, 1.0, 2.0)": (lambda L, N: L.select_n(True, 1.0, 2.0), ()),
    "complex(1.0, 2.0)": (lambda L, N: L.complex(1.0, 2.0), ()),
    "select_n(True, f32, f32)": (lambda L, N, a: L.select_n(True, a, a), (F32,)),
    "select_n(bool, f32, f16)": (lambda L, N, a, b: L.select_n(BOOLS, a, b), (F32, F16)),
    "select_n(bool, f32, weak vector)":
        (lambda L, N, a: L.select_n(BOOLS, a, _weak(L, 0.0)), (F32,)),
    "select(bool, i32, f32)": (lambda L, N, a, b: L.select(BOOLS, a, b), (I32, F32)),
    "pad(f32, 0)": (lambda L, N, a: L.pad(a, 0, PAD), (F32,)),
    "pad(f32, 0.0)": (lambda L, N, a: L.pad(a, 0.0, PAD), (F32,)),
    "pad(f16, 0.0)": (lambda L, N, a: L.pad(a, 0.0, PAD), (F16,)),
    "concatenate(f32, f16)": (lambda L, N, a, b: L.concatenate([a, b], 0), (F32, F16)),
    "concatenate(f32, weak vector)":
        (lambda L, N, a: L.concatenate([a, _weak(L, 2.0)], 0), (F32,)),
    "stack(f32, f16)": (lambda L, N, a, b: L.stack([a, b]), (F32, F16)),
    "dynamic_update_slice(f32, f16)":
        (lambda L, N, a, b: L.dynamic_update_slice(a, b[:1], (0,)), (F32, F16)),
    "dynamic_update_slice(f32, weak vector)":
        (lambda L, N, a: L.dynamic_update_slice(a, _weak(L, 2.0, 1), (0,)), (F32,)),
    "dynamic_update_slice_in_dim(f32, i32)":
        (lambda L, N, a, b: L.dynamic_update_slice_in_dim(a, b[:1], 0, 0), (F32, I32)),
    "dynamic_update_index_in_dim(f32, f16)":
        (lambda L, N, a, b: L.dynamic_update_index_in_dim(a, b, 0, 0), (ROWS, F16)),
    "scatter_add(f32, f16)":
        (lambda L, N, a, b: L.scatter_add(a, INDICES, b[:2], SCATTER_DNUMS), (F32, F16)),
    "scatter(f32, weak vector)":
        (lambda L, N, a: L.scatter(a, INDICES, _weak(L, 2.0, 2), SCATTER_DNUMS), (F32,)),
    "scatter_mul(f32, i32)":
        (lambda L, N, a, b: L.scatter_mul(a, INDICES, b[:2], SCATTER_DNUMS), (F32, I32)),
    "scatter_min(f32, f16)":
        (lambda L, N, a, b: L.scatter_min(a, INDICES, b[:2], SCATTER_DNUMS), (F32, F16)),
    "scatter_max(f32, weak vector)":
        (lambda L, N, a: L.scatter_max(a, INDICES, _weak(L, 2.0, 2), SCATTER_DNUMS), (F32,)),
    "scatter_sub(f32, f32)":
        (lambda L, N, a, b: L.scatter_sub(a, INDICES, b[:2], SCATTER_DNUMS), (F32, F32)),
    "complex(f32, 1.0)": (lambda L, N, a: L.complex(a, 1.0), (F32,)),
    "complex(f32, 1)": (lambda L, N, a: L.complex(a, 1), (F32,)),
    "complex(f32, f16)": (lambda L, N, a, b: L.complex(a, b), (F32, F16)),
    "igamma(f32, 1.0)": (lambda L, N, a: L.igamma(a, 1.0), (F32,)),
    "igammac(f32, 1)": (lambda L, N, a: L.igammac(a, 1), (F32,)),
    "polygamma(1, f32)": (lambda L, N, a: L.polygamma(1, a), (F32,)),
    "polygamma(1.0, f32)": (lambda L, N, a: L.polygamma(1.0, a), (F32,)),
    "igamma_grad_a(f32, 1.0)": (lambda L, N, a: L.igamma_grad_a(a, 1.0), (F32,),
                                NO_DERIVATIVE),
    "zeta(f32, f16)": (lambda L, N, a, b: L.zeta(a, b), (F32, F16), NO_DERIVATIVE),
    "betainc(1.0, f32, f32)": (lambda L, N, a: L.betainc(1.0, a, a), (F32,)),
    "random_gamma_grad(f32, f16)": (lambda L, N, a, b: L.random_gamma_grad(a, b), (F32, F16)),
    "reduce(f32, 0, add)": (lambda L, N, a: L.reduce(a, 0, L.add, (0,)), (F32,)),
    "reduce(f32, 1, add)": (lambda L, N, a: L.reduce(a, 1, L.add, (0,)), (F32,)),
    "reduce_window(f32, 0, add)":
        (lambda L, N, a: L.reduce_window(a, 0, L.add, (2,), (1,), "VALID"), (F32,)),
    "reduce_window(f32, 1, add)":
        (lambda L, N, a: L.reduce_window(a, 1, L.add, (2,), (1,), "VALID"), (F32,),
         GENERIC_REDUCE_WINDOW),
    "reduce_window(f32, f16 -inf, max)":
        (lambda L, N, a: L.reduce_window(a, np.float16(-np.inf), L.max, (2,), (1,),
                                         "VALID"), (F32,)),
    "reduce_window(f32, f16 0, max)":
        (lambda L, N, a: L.reduce_window(a, np.float16(0), L.max, (2,), (1,), "VALID"),
         (F32,)),
    "sort(f32, i32)": (lambda L, N, a, b: L.sort((a, b), num_keys=1), (F32, I32)),
    "dot_general(f32, f16)":
        (lambda L, N, a, b: L.dot_general(a, b, (((0,), (0,)), ((), ()))), (F32, F16)),
}
# JAX builds random_gamma_grad from other operations, so its message names those.
OWN_WORDS = {"random_gamma_grad"}


def _outcome(fn):
    """('raises', type, message) or ('returns', [(dtype, weak_type) per result])."""
    try:
        out = fn()
    except Exception as e:   # the exception's type and words are what is compared
        return "raises", type(e), str(e).split("\n")[0]
    return "returns", [(np.dtype(r.dtype), r.weak_type) for r in jax.tree.leaves(out)]


def _transformed(api, transform, call, arrays):
    L = LAX[api]
    np_ = SIDES["jax" if api is jax else "impl"][1]
    fn = lambda *a: call(L, np_, *a)  # noqa: E731
    if transform == "eager":
        return lambda: fn(*arrays)
    if transform == "jit":
        return lambda: api.jit(fn)(*arrays)
    if transform == "vmap":
        return lambda: api.vmap(fn)(*[np.stack([a, a]) for a in arrays])

    def total(first, *rest):   # grad: a scalar out of the float results
        outs = jax.tree.leaves(fn(first, *rest))
        return sum(np_.sum(o.astype(np.float32)) for o in outs
                   if np.issubdtype(o.dtype, np.floating))
    return lambda: api.grad(total)(*arrays)


def _transforms(arrays, no_grad):
    yield "eager"
    if arrays:
        yield from ("jit", "vmap")
        if np.issubdtype(arrays[0].dtype, np.floating) and not no_grad:
            yield "grad"


# Special functions that compile for seconds where they run (the check they share with
# every binary function is in CI through the others): nightly.
SLOW_CASES = {"igamma(f32, 1.0)", "igamma_grad_a(f32, 1.0)", "betainc(1.0, f32, f32)",
              "polygamma(1.0, f32)"}


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CASES
                                  else n for n in sorted(LAX_DTYPE_CASES)])
def test_lax_checks_operand_dtypes_as_jax(name, x64):
    call, arrays, *no_grad = LAX_DTYPE_CASES[name]
    with jax.enable_x64(x64):
        for transform in _transforms(arrays, no_grad):
            want = _outcome(_transformed(jax, transform, call, arrays))
            got = _outcome(_transformed(impl, transform, call, arrays))
            assert got[:2] == want[:2], (transform, got, want)
            # The words too where JAX checks the primitive itself (its vmap and grad
            # rules may bind others first: a batched dynamic_update_slice is a scatter).
            if want[:2] == ("raises", TypeError) and transform in ("eager", "jit") and not any(
                    n in name for n in OWN_WORDS):
                assert got[2] == want[2], transform


def test_lax_dtype_cases_cover_both_outcomes():
    """The table holds calls JAX refuses and calls it accepts, with and without x64."""
    for x64 in (False, True):
        with jax.enable_x64(x64):
            kinds = {_outcome(_transformed(jax, "eager", call, arrays))[0]
                     for call, arrays, *_ in LAX_DTYPE_CASES.values()}
        assert kinds == {"raises", "returns"}


# impl.lax's functions whose primitive has another name.
_PRIMITIVE_OF = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor",
                 "betainc": "regularized_incomplete_beta", "select": "select_n",
                 "dynamic_update_slice_in_dim": "dynamic_update_slice",
                 "dynamic_update_index_in_dim": "dynamic_update_slice",
                 "scatter_sub": "scatter_add", "stack": "concatenate"}


def test_lax_dtype_cases_cover_every_declared_contract():
    """Each primitive that declares which dtypes its operands take has a case (add_any
    is impl's own, no function of impl.lax binds it)."""
    from impl.primitives._operand_dtypes import declared
    called = {name.split("(")[0] for name in LAX_DTYPE_CASES}
    covered = {_PRIMITIVE_OF.get(name, name) for name in called}
    assert set(declared) - {"add_any"} <= covered, set(declared) - covered


UNARY = ("neg sign floor ceil round is_finite exp exp2 log expm1 log1p tanh logistic sin cos "
         "tan asin acos atan sinh cosh asinh acosh atanh sqrt rsqrt cbrt square bitwise_not "
         "population_count clz lgamma digamma bessel_i0e bessel_i1e erf erfc erf_inv abs real "
         "imag conj reciprocal cumsum cumprod cummax cummin cumlogsumexp").split()
UNARY_DTYPES = [np.bool_, np.int32, np.uint32, np.float16, np.float32, np.complex64]


@pytest.mark.parametrize("name", UNARY)
def test_lax_unary_functions_accept_the_dtypes_jax_does(name):
    """Each dtype either works in both (same result type, computed and staged) or raises
    JAX's TypeError in JAX's words in both."""
    for dtype in UNARY_DTYPES:
        x = np.ones(3, dtype)
        want = _outcome(lambda: getattr(jlax, name)(x))
        got = _outcome(lambda: getattr(ilax, name)(x))
        if name == "cumlogsumexp" and np.issubdtype(dtype, np.integer):
            # JAX crashes computing its integer identity (-inf); impl refuses the dtype.
            assert (want[:2], got[:2]) == (("raises", OverflowError), ("raises", TypeError))
        else:
            assert got == want, np.dtype(dtype)
        if want[0] == "returns":   # the staged type too (a computed one is JAX's own)
            staged = _outcome(lambda: impl.make_jaxpr(getattr(ilax, name))(x).out_avals)
            assert staged == want, (np.dtype(dtype), staged)


def test_pow_with_an_integer_exponent_differentiates_as_jax():
    """lax.pow takes an integer exponent array; its derivative in the base is JAX's
    (under standard promotion, which JAX's own rule needs)."""
    x, n = np.array([1.5, 2.0, 3.0], np.float32), np.array([2, 3, 0], np.int32)
    with jax.numpy_dtype_promotion("standard"):
        want = jax.grad(lambda a: jlax.pow(a, n).sum())(x)
    got = impl.grad(lambda a: ilax.pow(a, n).sum())(x)
    assert _type(got) == _type(want)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_impl_internals_still_mix_weak_scalars():
    """impl's own functions (what impl.numpy builds on) keep letting a Python scalar take
    the array's dtype, where impl.lax refuses."""
    from impl.primitives import elementwise as ew
    from impl.primitives import indexing as ix
    with jax.enable_x64(True):
        assert ew.add(F16, 2.0).dtype == np.float16
        assert ix.pad(F32, 0.0, PAD).dtype == np.float32
        with pytest.raises(TypeError, match="lax.add requires arguments to have the same"):
            ilax.add(F16, 2.0)
        with pytest.raises(TypeError, match="pad operand and padding_value must be same"):
            ilax.pad(F32, 0.0, PAD)


@pytest.mark.parametrize("op", ["set", "add", "min", "max"])
@pytest.mark.parametrize("weak", [(True, True), (True, False), (False, True)],
                         ids=["both weak", "operand weak", "updates weak"])
def test_derivatives_of_indexed_updates_keep_jax_weak_types(op, weak):
    """jvp tangents and grad cotangents of `.at[].set/add/min/max` have JAX's weak types
    (their rules' constants and zeros must not make a weak result strong)."""
    idx = np.array([0, 1, 1])

    def run(side):
        api, np_ = SIDES[side]

        def f(x, u):
            x, u = (np_.broadcast_to(np_.asarray(v) if w else np_.asarray(v, np.float64), (3,))
                    for v, w in zip((x, u), weak))
            return getattr(x.at[idx], op)(u)
        primal, tangent = api.jvp(f, (1.0, 2.0), (1.0, 1.0))
        grads = api.grad(lambda x, u: np_.sum(f(x, u)), argnums=(0, 1))(1.0, 2.0)
        return [primal, tangent, *grads]

    want, got = run("jax"), run("impl")
    assert [_type(g) for g in got] == [_type(w) for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w))


WEAK_DERIVATIVE_FUNCTIONS = ["tan", "sqrt", "arcsin", "arccos", "arctan", "cbrt", "exp2",
                             "reciprocal", "log2", "log10", "deg2rad", "rad2deg", "arcsinh",
                             "arccosh", "square", "tanh", "sin", "logit"]


@pytest.mark.parametrize("name", WEAK_DERIVATIVE_FUNCTIONS)
def test_gradients_through_rule_constants_are_typed_as_jax(name):
    """A derivative rule's constant is weak beside a weakly typed scalar and strong beside
    a weakly typed array (JAX's `_const`), so grad of a Python float is weak through a
    scalar program and strong through one broadcasting it."""
    def run(side):
        api, np_ = SIDES[side]
        fn = getattr(np_, name, None) or getattr(api.scipy.special, name)
        shift = 2.0 if name == "arccosh" else 0.0
        scalar = api.grad(lambda x: fn(0.5 * x + shift))(0.3)
        array = api.grad(lambda x: np_.sum(fn(0.5 * np_.broadcast_to(np_.asarray(x), (3,))
                                              + shift)))(0.3)
        return scalar, array

    want, got = run("jax"), run("impl")
    assert [_type(g) for g in got] == [_type(w) for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


@pytest.mark.parametrize("name", ["polygamma", "igamma", "igammac", "betainc_x",
                                  "bessel_i0e", "bessel_i1e"])
def test_special_function_gradients_at_a_python_float_are_typed_as_jax(name):
    """JAX writes these rules with jnp's `*`, which converts a weak tangent meeting a
    strong coefficient; the cotangent of a Python float then stays weak."""
    def run(side):
        api, np_ = SIDES[side]
        lax = LAX[api]
        fn = {"betainc_x": lambda a, x: lax.betainc(a, a, 0.3 * x),
              "bessel_i0e": lambda a, x: a * lax.bessel_i0e(x),
              "bessel_i1e": lambda a, x: a * lax.bessel_i1e(x)}.get(
                  name, lambda a, x: getattr(lax, name)(a, x))
        return [api.grad(lambda x: np_.sum(fn(np_.full(shape, 1.0, np.float64),
                                              2.5 + 0.5 * np_.broadcast_to(x, shape))))(0.3)
                for shape in [(), (3,)]]

    want, got = run("jax"), run("impl")
    assert [_type(g) for g in got] == [_type(w) for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


@pytest.mark.parametrize("name", ["matmul", "dot", "dot with a scalar"])
def test_products_of_a_weak_and_a_strong_operand_differentiate_as_jax(name):
    """jnp's products leave an operand that is only weakly typed as it is (no conversion
    whose transpose would make its cotangent weak): grad at a Python float is strong."""
    def run(side):
        api, np_ = SIDES[side]
        m = np_.asarray([[0.25, 0.5]], np.float64)
        f = {"matmul": lambda x: np_.matmul(np_.broadcast_to(x, (1,)), m),
             "dot": lambda x: np_.dot(np_.broadcast_to(x, (1,)), m),
             "dot with a scalar": lambda x: np_.dot(x, m)}[name]
        return [f(0.3), api.grad(lambda x: np_.sum(f(x)))(0.3)]

    want, got = run("jax"), run("impl")
    assert [_type(g) for g in got] == [_type(w) for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


@pytest.mark.parametrize("at", [0.0, 1.0, 0.3])
def test_sinc_derivatives_are_typed_and_valued_as_jax(at):
    """jnp.sinc's constants are typed as JAX's: grad of a Python float is weak, grad of a
    weakly typed array strong (under jit and vjp too), vmap's weak; and its value and
    derivatives at 0 come from sin(y)/y's series, so the second and fourth derivatives at
    0 are -pi**2/3 and pi**4/5, not 0."""
    def run(side):
        api, np_ = SIDES[side]
        vector = np_.broadcast_to(at, (2,))
        summed = api.grad(lambda v: np_.sum(np_.sinc(v)))
        outs = [np_.sinc(at), api.grad(np_.sinc)(at), api.jit(api.grad(np_.sinc))(at),
                np_.sinc(vector), summed(vector), api.jit(summed)(vector),
                api.vmap(api.grad(np_.sinc))(vector),
                *api.jvp(np_.sinc, (vector,), (vector,)),
                *api.vjp(np_.sinc, vector)[1](np_.ones(2, np.float64))]
        higher = np_.sinc
        for _ in range(4):
            higher = api.grad(higher)
            outs.append(higher(at))
        return outs

    want, got = run("jax"), run("impl")
    assert [_type(g) for g in got] == [_type(w) for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-15)
    if at == 0.0:   # the series' terms, independently of both
        np.testing.assert_allclose([float(got[-3]), float(got[-1])],
                                   [-np.pi ** 2 / 3, np.pi ** 4 / 5], rtol=1e-12)


def test_sinc_of_a_complex_array_is_jax():
    z = np.array([0.5 + 0.2j, 0j, -1.5 + 2j])
    got, want = inp.sinc(z), jjnp.sinc(z)
    assert _type(got) == _type(want)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got)[0], np.sin(np.pi * z[0]) / (np.pi * z[0]))
