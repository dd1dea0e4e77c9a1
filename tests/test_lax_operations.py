"""impl.lax's operations (special functions, shape and product helpers, bitwise
reductions, lax.fft), each against jax.lax: values, dtypes and weak types, and for
differentiable ones jvp, grad and vmap (tests/_against_jax)."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import impl
from impl import lax as ilax
from jax import lax as jlax

from _against_jax import check_transforms, rng_for

F32 = np.float32


def _u(lo, hi, *shape, key="u"):
    return rng_for(key, lo, hi, shape).uniform(lo, hi, shape).astype(F32)


# name -> (args, differentiated argnums)
DIFFERENTIABLE = {
    "acosh": ((_u(1.2, 3, 4),), (0,)),
    "asinh": ((_u(-2, 2, 4),), (0,)),
    "atanh": ((_u(-0.8, 0.8, 4),), (0,)),
    "cbrt": ((_u(0.5, 3, 4),), (0,)),
    "exp2": ((_u(-2, 2, 4),), (0,)),
    "erfc": ((_u(-2, 2, 4),), (0,)),
    "lgamma": ((_u(0.5, 4, 4),), (0,)),
    "digamma": ((_u(0.5, 4, 4),), (0,)),
    "polygamma": ((np.full(4, 1, F32), _u(0.5, 3, 4)), (1,)),
    "igamma": ((_u(0.5, 3, 4), _u(0.5, 3, 4, key="x")), (0, 1)),
    "igammac": ((_u(0.5, 3, 4), _u(0.5, 3, 4, key="x")), (0, 1)),
    "betainc": ((_u(0.5, 3, 4), _u(0.5, 3, 4, key="b"), _u(0.1, 0.9, 4)), (2,)),
    "bessel_i0e": ((_u(-3, 3, 4),), (0,)),
    "bessel_i1e": ((np.array([-2.0, -0.3, 0.0, 1.5], F32),), (0,)),
    "reciprocal": ((_u(0.5, 2, 4),), (0,)),
    "select": ((np.array([True, False, True, False]), _u(-1, 1, 4), _u(-1, 1, 4, key="b")),
               (1, 2)),
    "broadcast": ((_u(-1, 1, 3), (2,)), (0,)),
    "broadcast_to_rank": ((_u(-1, 1, 3), 3), (0,)),
    "collapse": ((_u(-1, 1, 2, 3, 2), 1), (0,)),
    "tile": ((_u(-1, 1, 2, 3), (2, 1)), (0,)),
    "split": ((_u(-1, 1, 5, 2), (2, 3)), (0,)),
    "stack": (([_u(-1, 1, 3), _u(-1, 1, 3, key="b")], 1), (0,)),
    "unstack": ((_u(-1, 1, 3, 2), 1), (0,)),
    "dynamic_update_index_in_dim": ((_u(-1, 1, 3, 2), _u(-1, 1, 2), np.int32(1), 0), (0, 1)),
    "dot": ((_u(-1, 1, 3, 2), _u(-1, 1, 2)), (0, 1)),
    "batch_matmul": ((_u(-1, 1, 2, 3, 2), _u(-1, 1, 2, 2, 4)), (0, 1)),
    "full_like": ((_u(-1, 1, 3), 2.5), ()),
}
# Static (non-array) arguments are closed over, so only arrays are mapped.
STATIC = {"broadcast": (1,), "broadcast_to_rank": (1,), "collapse": (1,), "tile": (1,),
          "split": (1,), "stack": (1,), "unstack": (1,), "dynamic_update_index_in_dim": (3,),
          "full_like": (1,)}


def _bind_static(fn, args, static):
    dyn = [a for i, a in enumerate(args) if i not in static]

    def call(*d):
        it = iter(d)
        return fn(*[a if i in static else next(it) for i, a in enumerate(args)])
    return call, dyn


# XLA compiles these series (and their derivatives) slowly: nightly only.
HEAVY = {"igamma", "igammac", "betainc", "polygamma", "igamma_grad_a"}


def _params(names):
    return [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in names]


@pytest.mark.parametrize("name", _params(sorted(DIFFERENTIABLE)))
def test_against_jax_under_transformations(name):
    args, diff = DIFFERENTIABLE[name]
    static = STATIC.get(name, ())
    fi, dyn = _bind_static(getattr(ilax, name), args, static)
    fj, _ = _bind_static(getattr(jlax, name), args, static)
    # argnums among the dynamic args
    index = [i for i in range(len(args)) if i not in static]
    diff = tuple(index.index(i) for i in diff)
    if name == "stack":   # a list argument: the two arrays are the dynamic leaves
        fi = lambda a, b: ilax.stack([a, b], 1)  # noqa: E731
        fj = lambda a, b: jlax.stack([a, b], 1)  # noqa: E731
        dyn, diff = list(args[0]), (0, 1)
    # the integer index is not mapped (vmap of a traced index is dynamic_update_slice's)
    batched = None
    if name == "dynamic_update_index_in_dim":
        batched = [np.stack([d] * 3) for d in dyn]
    check_transforms(name, fi, fj, dyn, diff=diff, batched_args=batched,
                     vmap=name != "dynamic_update_index_in_dim")


NON_DIFFERENTIABLE = {
    "population_count": (np.array([0, 1, 7, -1, 255], np.int32),),
    "reduce_and": (np.array([[True, False], [True, True]]), (1,)),
    "reduce_or": (np.array([[True, False], [False, False]]), (1,)),
    "reduce_xor": (np.array([[True, True, True], [True, False, False]]), (1,)),
    "zeta": (_u(1.5, 4, 4), _u(0.5, 3, 4, key="q")),
    "igamma_grad_a": (_u(0.5, 3, 4), _u(0.5, 3, 4, key="x")),
    "full": ((2, 3), 1.5),
    "empty": ((2, 3), np.float32),
    "dtype": (np.ones(2, np.int16),),
}


@pytest.mark.parametrize("name", _params(sorted(NON_DIFFERENTIABLE)))
def test_values_and_types_as_jax(name):
    args = NON_DIFFERENTIABLE[name]
    got, want = getattr(ilax, name)(*args), getattr(jlax, name)(*args)
    if name == "dtype":
        assert got == want
        return
    if name == "empty":   # contents unspecified: only the type must agree
        assert (got.shape, got.dtype) == (want.shape, want.dtype)
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.weak_type == want.weak_type
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    if name in ("population_count", "zeta", "igamma_grad_a", "reduce_xor"):
        mapped = [np.stack([a, a[::-1]]) if isinstance(a, np.ndarray) else a for a in args]
        axes = tuple(0 if isinstance(a, np.ndarray) else None for a in args)
        if name == "reduce_xor":
            fi = lambda x: ilax.reduce_xor(x, (1,))  # noqa: E731
            fj = lambda x: jlax.reduce_xor(x, (1,))  # noqa: E731
            mapped, axes = mapped[:1], (0,)
        else:
            fi, fj = getattr(ilax, name), getattr(jlax, name)
        np.testing.assert_allclose(np.asarray(impl.vmap(fi, axes)(*mapped)),
                                   np.asarray(jax.vmap(fj, axes)(*mapped)), rtol=1e-5)


@pytest.mark.parametrize("call", [
    lambda L: L.full((2,), 3), lambda L: L.full((2,), 3.0), lambda L: L.full((2,), True),
    lambda L: L.full((2,), 3.0, np.float16), lambda L: L.full_like(np.ones(2, F32), 2),
    lambda L: L.full_like(np.ones(2, np.int32), 2.7, np.float32, (3,)),
    lambda L: L.asinh(0.5), lambda L: L.cbrt(8.0), lambda L: L.lgamma(3.5),
    lambda L: L.reciprocal(4.0), lambda L: L.select(True, 1.0, 2.0),
    lambda L: L.broadcast(2.0, (3,)), lambda L: L.round(2.5, L.RoundingMethod.TO_NEAREST_EVEN),
    lambda L: L.round(2.5, L.RoundingMethod.AWAY_FROM_ZERO),
], ids=lambda c: "")
def test_weak_types_and_scalars_as_jax(call):
    got, want = call(ilax), call(jlax)
    assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


@pytest.mark.parametrize("fn, exc", [
    (lambda L, a: L.betainc(a, 2.0, 0.5), ValueError),       # not in a (as JAX)
    (lambda L, a: L.polygamma(a, 2.0), ValueError),          # not in m
    (lambda L, a: L.zeta(a, 2.0), NotImplementedError),      # no derivative at all
    (lambda L, a: L.zeta(3.0, a), NotImplementedError),
    (lambda L, a: L.igamma_grad_a(a, 2.0), NotImplementedError),
    (lambda L, a: L.nextafter(a, 2.0), NotImplementedError),
    (lambda L, a: L.nextafter(0.5, a), NotImplementedError),
])
def test_derivatives_jax_lacks_raise_as_jax(fn, exc):
    """The exception JAX raises, and where JAX has no rule at all (NotImplementedError)
    its very message, under grad, jvp and jit of grad."""
    def raised(J, L, transform):
        with pytest.raises(exc) as e:
            transform(J, lambda a: fn(L, a))
        return e.value

    with jax.numpy_dtype_promotion("strict"):
        for transform in (lambda J, f: J.grad(f)(1.5), lambda J, f: J.jvp(f, (1.5,), (1.0,)),
                          lambda J, f: J.jit(J.grad(f))(1.5)):
            want, got = raised(jax, jlax, transform), raised(impl, ilax, transform)
            assert type(got) is type(want)
            if exc is NotImplementedError:
                assert str(got) == str(want)


def test_logical_reductions_of_integers_and_booleans_as_jax():
    ints = np.array([[3, 5, 6], [7, 1, 12]], np.int32)
    bools = ints > 4
    for name in ("reduce_and", "reduce_or"):
        for x in (ints, bools):
            for axes in ((0,), (1,), (0, 1)):
                got = getattr(ilax, name)(x, axes)
                want = getattr(jlax, name)(x, axes)
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        for lib in (ilax, jlax):   # floats are JAX's TypeError
            with pytest.raises(TypeError, match="logical reduction"):
                getattr(lib, name)(np.ones(2, F32), (0,))
    with pytest.raises(TypeError, match="reduce_xor"):   # integer xor: not yet in impl
        ilax.reduce_xor(ints, (0,))


def test_unsupported_parameters_raise_naming_them():
    with pytest.raises(NotImplementedError, match="accuracy"):
        ilax.cbrt(np.ones(2, F32), accuracy=1e-3)
    with pytest.raises(NotImplementedError, match="sharding"):
        ilax.full((2,), 1.0, sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0]))


def test_precision_reaches_the_compiled_program():
    x = np.ones((2, 2), F32)
    f = impl.jit(lambda a, b: ilax.dot(a, b, precision=ilax.Precision.HIGHEST))
    assert "HIGHEST" in f.lower(x, x).as_text()


# ------------------------------------------------------------ primitives by JAX's name

PRIMITIVE_NAMES = sorted(n for n in dir(ilax) if n.endswith("_p"))


def test_primitive_names_are_impls_registered_primitives():
    from impl.primitives._define import registry
    assert len(PRIMITIVE_NAMES) > 100
    for n in PRIMITIVE_NAMES:
        assert getattr(ilax, n) is registry[n[:-2]], n
        assert hasattr(jlax, n), n


@pytest.mark.parametrize("call, prim", [
    (lambda x: ilax.sin(x), "sin_p"), (lambda x: ilax.add(x, x), "add_p"),
    (lambda x: ilax.cumsum(x), "cumsum_p"), (lambda x: ilax.asinh(x), "asinh_p"),
    (lambda x: ilax.reduce_max(x, (0,)), "reduce_max_p"),
    (lambda x: ilax.betainc(x, x, x), "regularized_incomplete_beta_p"),
    (lambda x: ilax.dot(x, x), "dot_general_p"),
])
def test_programs_name_the_exported_primitives(call, prim):
    """An interpreter of impl's IR can recognise equations by `lax.<name>_p`, as with
    JAX's jaxprs; the same program in JAX names JAX's primitive of that name."""
    x = np.full(3, 0.5, F32)
    eqns = impl.make_jaxpr(call)(x).jaxpr.eqns
    assert any(e.primitive is getattr(ilax, prim) for e in eqns)
    jcall = lambda x: call.__code__ and eval_in_jax(call, x)  # noqa: E731
    assert any(e.primitive is getattr(jlax, prim) for e in jax.make_jaxpr(jcall)(x).eqns)


def eval_in_jax(call, x):
    """Run `call` with jax.lax in place of impl.lax."""
    import types
    g = dict(call.__globals__, ilax=jlax)
    return types.FunctionType(call.__code__, g)(x)


@pytest.mark.parametrize("fft_type, lengths, dtype", [
    (jlax.FftType.FFT, (8,), np.complex128), ("IFFT", (2, 8), np.complex128),
    ("rfft", (8,), np.float64), (jlax.FftType.IRFFT, (8,), np.complex128)])
def test_lax_fft_against_jax(fft_type, lengths, dtype):
    """lax.fft with an FftType member or its name, under value, jit, jvp, grad and vmap."""
    shape = (3, 2, 8) if fft_type != jlax.FftType.IRFFT else (3, 2, 5)
    rng = rng_for("fft", str(fft_type))
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    x = x.astype(dtype)
    impl_type = ilax.FftType[fft_type.name] if isinstance(fft_type, jlax.FftType) else fft_type
    check_transforms("fft", lambda v: ilax.fft(v, impl_type, lengths),
                     lambda v: jlax.fft(v, fft_type, lengths), [x])


def test_lax_fft_unknown_type_raises_as_jax():
    x = np.ones(4, np.complex64)
    with pytest.raises(ValueError, match="Unknown FFT type"):
        jlax.fft(x, "dct", (4,))
    with pytest.raises(ValueError, match="Unknown FFT type"):
        ilax.fft(x, "dct", (4,))


# jax.lax's elementwise operations broadcast operands of one rank along axes of size 1.
SIZE_ONE_BROADCASTS = [((3,), (1,)), ((2, 1), (1, 3)), ((1, 1), (2, 3))]


@pytest.mark.parametrize("op", ["add", "max", pytest.param("div", marks=pytest.mark.slow),
                                pytest.param("atan2", marks=pytest.mark.slow)])
@pytest.mark.parametrize("shapes", SIZE_ONE_BROADCASTS, ids=str)
def test_axes_of_size_one_broadcast_as_in_jax(op, shapes):
    args = tuple(_u(0.5, 2, *s, key=f"{op}{i}") for i, s in enumerate(shapes))
    check_transforms(f"{op}{shapes}", getattr(ilax, op), getattr(jlax, op), args, eager=True)


def _ones(*shape):
    return np.ones(shape, F32)


@pytest.mark.parametrize("call", [
    lambda lax: lax.add(_ones(3), _ones(2)),
    lambda lax: lax.mul(_ones(3, 4), _ones(4)),
    lambda lax: lax.select_n(True, _ones(3), _ones(1)),
    lambda lax: lax.select_n(True, _ones(3), 1.0),
    lambda lax: lax.select_n(np.array([True]), _ones(3), _ones(3)),
    lambda lax: lax.select_n(True),
], ids=["incompatible sizes", "ranks differ", "select cases", "select scalar case",
        "select which", "select no case"])
def test_shape_errors_as_jax(call):
    with pytest.raises(Exception) as want:
        call(jlax)
    with pytest.raises(want.type) as got:
        call(ilax)
    assert str(got.value) == str(want.value)
