"""Dtype promotion of traced arrays with Python scalars, against JAX (x64 on):
an integer or bool array meeting a higher-kind scalar gives a weak result of the
default dtype; a float array meeting a complex scalar gives the matching complex."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import impl
import impl.numpy as inp

CASES = [(np.int32(1), 0.25), (np.float32(1), 1j), (np.float16(1), 1j), (np.int32(1), 1j),
         (np.bool_(True), 2), (np.uint8(1), 2.0), (np.int8(1), 2), (np.float32(1), 2.0)]


@pytest.mark.parametrize("x, scalar", CASES, ids=lambda v: repr(v))
def test_traced_array_times_python_scalar(x, scalar):
    want = jax.jit(lambda v: jjnp.multiply(v, scalar))(x)
    got = impl.jit(lambda v: inp.multiply(v, scalar))(x)
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_weak_result_does_not_widen_a_float32_array():
    """axis_index (int32) * 0.25 is weak, so adding it to float32 stays float32."""
    def f(v):
        return v + 0.25 * impl.lax.axis_index("i")
    out = impl.vmap(f, axis_name="i")(np.zeros(3, np.float32))
    assert out.dtype == np.float32


GRAD_CASES = {
    "maximum": lambda np_: lambda x, y: np_.maximum(x, y),
    "minimum": lambda np_: lambda x, y: np_.minimum(x, y),
    "where": lambda np_: lambda x, y: np_.where(x > y, x, y),
    "abs": lambda np_: lambda x, y: np_.abs(x) * y,
    "clip": lambda np_: lambda x, y: np_.clip(x, 0.0, y),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_gradients_at_python_floats_stay_weak(name):
    """Rules that build constants (the tie weights of max/min, select's zeros) keep the
    operands' weak type: JAX's gradient at Python floats is weak."""
    want = jax.grad(GRAD_CASES[name](jjnp), argnums=(0, 1))(1.0, 1.0)
    got = impl.grad(GRAD_CASES[name](inp), argnums=(0, 1))(1.0, 1.0)
    for g, w in zip(got, want):
        assert (g.dtype, g.weak_type) == (w.dtype, w.weak_type)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w))


def _avals(make_jaxpr, fn, x):
    return [(a.shape, a.dtype, a.weak_type) for a in make_jaxpr(fn)(x).out_avals]


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like", "full_like"])
@pytest.mark.parametrize("x", [1.0, 2, np.float32(1), np.ones(3, np.float32), True],
                         ids=repr)
@pytest.mark.parametrize("dtype", [None, "float32", "int32"])
def test_like_constructors_keep_a_weak_prototype_weak(name, x, dtype):
    """`*_like` without a dtype is weakly typed exactly when its prototype is."""
    def call(mod):
        fn = getattr(mod, name)
        return (lambda v: fn(v, 2, dtype=dtype)) if name == "full_like" else (
            lambda v: fn(v, dtype=dtype))
    assert _avals(impl.make_jaxpr, call(inp), x) == _avals(jax.make_jaxpr, call(jjnp), x)
    want, got = call(jjnp)(x), call(inp)(x)
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)


def test_eval_shape_reports_weak_types():
    want = jax.eval_shape(lambda v: v * 2.0, 1.0)
    assert impl.eval_shape(lambda v: v * 2.0, 1.0) == want and want.weak_type


@pytest.mark.parametrize("fn", ["concatenate", "stack"])
def test_joining_weak_arrays_stays_weak(fn):
    """Joining weakly typed int and float arrays gives a weak float, as in JAX (r_ too)."""
    def parts(m):
        return [m.asarray(1)[None], m.asarray(2.5)[None]]
    want, got = getattr(jjnp, fn)(parts(jjnp)), getattr(inp, fn)(parts(inp))
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type) and want.weak_type
    assert inp.r_[1, 2.5].weak_type == jjnp.r_[1, 2.5].weak_type


def _dtype_warnings(J, N, call):
    import warnings
    with jax.enable_x64(False), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call(J, N)
    return out.dtype, [str(w.message) for w in caught]


DTYPE_REQUESTS = {
    "zeros": lambda J, N: N.zeros(2, np.float64),
    "ones": lambda J, N: N.ones(2, np.float64),
    "empty": lambda J, N: N.empty(2, np.float64),
    "eye": lambda J, N: N.eye(2, dtype=np.float64),
    "identity": lambda J, N: N.identity(2, np.float64),
    "array": lambda J, N: N.array([1.0], np.float64),
    "asarray": lambda J, N: N.asarray(1, np.int64),
    "zeros_like": lambda J, N: N.zeros_like(N.ones(2, np.float32), np.float64),
    "full_like": lambda J, N: N.full_like(N.ones(2, np.float32), 1, np.float64),
    "mean": lambda J, N: N.mean(N.ones(2, np.float32), dtype=np.float64),
    "cumsum": lambda J, N: N.cumsum(N.ones(2, np.float32), dtype=np.float64),
    "convert_element_type": lambda J, N: J.lax.convert_element_type(np.float32(1), np.float64),
    "normal": lambda J, N: J.random.normal(J.random.key(0), (2,), np.float64),
    "int32 asked": lambda J, N: N.zeros(2, np.int32),
}


@pytest.mark.parametrize("name", DTYPE_REQUESTS)
def test_64bit_dtype_requests_warn_as_jax_without_x64(name):
    """Without x64, an explicit 64-bit dtype is truncated with JAX's warning, naming
    the function JAX names (its random samplers name none)."""
    want = _dtype_warnings(jax, jjnp, DTYPE_REQUESTS[name])
    got = _dtype_warnings(impl, inp, DTYPE_REQUESTS[name])
    assert got == want
    assert len(want[1]) == (0 if name == "int32 asked" else 1)


Z = np.complex64(0.3 + 0.4j)
COMPLEX_TO_REAL = {
    "lax.convert_element_type": lambda J, N: J.lax.convert_element_type(Z, np.float32),
    "astype": lambda J, N: N.asarray(Z).astype(np.float32),
    "astype under jit": lambda J, N: J.jit(lambda z: z.astype(np.float32))(Z),
    "astype to bool under jit": lambda J, N: J.jit(lambda z: z.astype(bool))(Z),
    "sum with a real dtype": lambda J, N: N.sum(N.asarray([Z]), dtype=np.float32),
    "real": lambda J, N: N.real(Z),
    # the cotangent of real/imag parts goes back through a conversion: no warning
    "vjp through real and imag": lambda J, N: J.vjp(
        lambda z: N.real(z) * 2.0 + N.imag(z) * 1j, Z)[1](N.asarray(np.complex64(1 + 2j))),
}


@pytest.mark.parametrize("name", COMPLEX_TO_REAL)
def test_complex_to_real_warns_where_jax_warns(name):
    import warnings

    def run(J, N):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = COMPLEX_TO_REAL[name](J, N)
        return [w.category for w in caught], jax.tree.map(np.asarray, out)
    (want, want_out), (got, got_out) = run(jax, jjnp), run(impl, inp)
    assert got == want
    jax.tree.map(np.testing.assert_array_equal, got_out, want_out)


SCALAR_TYPE_USES = {
    "int16(1) + 1": lambda J, N: N.int16(1) + 1,
    "int16(1) + numpy array": lambda J, N: N.int16(1) + np.array(1),
    "numpy int16 + 1 + int16": lambda J, N: np.int16(1) + 1 + N.int16(1),
    "float32 of a Python float": lambda J, N: N.float32(2.5),
    "bfloat16 of an int": lambda J, N: N.bfloat16(3),
    "bool_ of an array": lambda J, N: N.bool_(np.arange(3)),
    "float32 under jit": lambda J, N: J.jit(lambda x: N.float32(x) * 2)(3),
    "lax.add of float32(1) and 1.0": lambda J, N: J.lax.add(N.float32(1), 1.0),
}


@pytest.mark.parametrize("name", SCALAR_TYPE_USES)
def test_scalar_types_make_arrays_as_jax(name):
    """jnp.float32(x) and the like make rank-0 arrays (as JAX's scalar types do), which
    then promote by JAX's rules, not NumPy's."""
    with jax.enable_x64(False):   # JAX's defaults: Python floats are float32
        want = SCALAR_TYPE_USES[name](jax, jjnp)
        got = SCALAR_TYPE_USES[name](impl, inp)
    assert isinstance(got, jax.Array) == isinstance(want, jax.Array)
    assert (got.dtype, getattr(got, "weak_type", None)) == (want.dtype,
                                                             getattr(want, "weak_type", None))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_scalar_types_name_dtypes_as_jax():
    for name in ["float32", "int8", "bool_", "bfloat16", "complex64", "uint32", "int4"]:
        t, jt = getattr(inp, name), getattr(jjnp, name)
        assert np.dtype(t) == np.dtype(jt) and t == jt.dtype.type and hash(t) == hash(jt)
        assert isinstance(np.zeros((), np.dtype(jt))[()], t)
        assert inp.zeros(2, t).dtype == jjnp.zeros(2, jt).dtype
    assert inp.bool is inp.bool_ and inp.single is inp.float32
    assert inp.issubdtype(inp.float32, inp.floating) and not isinstance(1.0, inp.float32)


def test_broadcasting_nothing_or_equal_shapes_as_jax():
    """broadcast_arrays of no operand is an empty list; operands of one shape (the
    shortcut elementwise functions take) keep it, promoted together."""
    assert inp.broadcast_arrays() == [] == jjnp.broadcast_arrays()
    x, y = np.ones((2, 3), np.float32), np.arange(6, dtype=np.int32).reshape(2, 3)
    for got, want in zip(inp.broadcast_arrays(x, y), jjnp.broadcast_arrays(x, y)):
        assert (got.shape, got.dtype) == (want.shape, want.dtype)
    for fn in ("add", "multiply", "subtract", "arctan2"):
        got = impl.jit(getattr(inp, fn))(x, x)
        want = jax.jit(getattr(jjnp, fn))(x, x)
        assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(TypeError, match="incompatible shapes"):
        impl.jit(inp.multiply)(x, np.ones((3, 2), np.float32))
    with pytest.raises(TypeError, match="incompatible shapes"):
        jax.jit(jjnp.multiply)(x, np.ones((3, 2), np.float32))
