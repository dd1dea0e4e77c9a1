"""einsum, triangles/diagonals, norms, impl.nn and impl.scipy.special against
jax.numpy / jax.nn / jax.scipy.special: values, dtypes, gradients and vmap."""
from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest

import impl
import impl.numpy as inp
import impl.scipy.special as isp

from helpers import TOLERANCE, assert_tree_close, first_in_ci, floats_in_ci, rs

close = functools.partial(assert_tree_close, tol=TOLERANCE["numpy"], exact_non_float=True)


def check_fn(ifn, jfn, args, dtype, grad=True, vmap=True):
    """Value; gradient of the sum w.r.t. the first argument; vmap over the first."""
    close(ifn(*args), jfn(*args))
    if grad:
        close(impl.grad(lambda x, *r: inp.sum(ifn(x, *r)))(*args),
              jax.grad(lambda x, *r: jnp.sum(jfn(x, *r)))(*args))
    if vmap:
        batched = (np.stack([args[0], args[0] * 0.5 + 0.1]),) + tuple(args[1:])
        ax = (0,) + (None,) * (len(args) - 1)
        close(impl.vmap(ifn, in_axes=ax)(*batched), jax.vmap(jfn, in_axes=ax)(*batched))


FLOATS = [np.float32, np.float64]


# ----------------------------------------------------------------------- einsum

EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 2)]), ("ij,jk", [(3, 4), (4, 2)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("bij,bjk->kbi", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("ij->j", [(3, 4)]), ("ii->", [(3, 3)]),
    ("ii->i", [(3, 3)]), ("ij,ij->i", [(3, 4), (3, 4)]), ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(4,), (4,)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("ijk,ikj->i", [(2, 3, 4), (2, 4, 3)]),
    ("ab,cd->", [(2, 3), (3, 2)]),
    # ellipses, broadcast as in NumPy (size-1 axes against larger ones)
    ("...ij,jk->...ik", [(2, 3, 4), (4, 5)]), ("...j,jk", [(2, 3, 4), (4, 5)]),
    ("ij...,j...->i...", [(3, 4, 2), (4, 2)]), ("...ii->...i", [(2, 3, 3)]),
    ("...,...", [(2, 1, 3), (4, 3)]), ("b...,b...->b", [(2, 3, 4), (2, 1, 4)]),
    ("...ij,...jk,...kl->...il", [(2, 3, 4), (1, 4, 2), (2, 2, 3)]),
    ("...ij->ji...", [(5, 2, 3)]),
]


def alternating(rows, ids):
    """Rows paired with float32 and float64 in turn (each dtype on half of the rows)."""
    return [pytest.param(*(r if isinstance(r, tuple) else (r,)), FLOATS[i % 2],
                         id=f"{ids(r)}-{np.dtype(FLOATS[i % 2]).name}")
            for i, r in enumerate(rows)]


@pytest.mark.parametrize("subs,shapes,dtype", alternating(EINSUMS, lambda e: e[0]))
def test_einsum(subs, shapes, dtype):
    ops = [rs(*s, seed=i, dtype=dtype) for i, s in enumerate(shapes)]
    check_fn(lambda *o: inp.einsum(subs, *o), lambda *o: jnp.einsum(subs, *o), ops, dtype)


def test_einsum_grad_all_operands_and_jit():
    a, b = rs(3, 4, seed=1), rs(4, 5, seed=2)
    f = lambda np_, a, b: np_.sum(np_.sin(np_.einsum("ij,jk->ik", a, b)))  # noqa: E731
    close(impl.jit(impl.grad(lambda a, b: f(inp, a, b), argnums=(0, 1)))(a, b),
          jax.grad(lambda a, b: f(jnp, a, b), argnums=(0, 1))(a, b))


def test_einsum_errors():
    with pytest.raises(ValueError, match="operand"):
        inp.einsum("ij,jk->ik", rs(3, 4))
    with pytest.raises(ValueError, match="size"):
        inp.einsum("ij,jk->ik", rs(3, 4), rs(5, 2))
    with pytest.raises(ValueError, match="subscript"):
        inp.einsum("ijk->i", rs(3, 4))
    with pytest.raises(ValueError, match="broadcast"):
        inp.einsum("...,...", rs(2, 3), rs(4, 3))
    with pytest.raises(ValueError):
        jnp.einsum("...,...", rs(2, 3), rs(4, 3))


# ------------------------------------------------------- triangles and diagonals

@pytest.mark.parametrize("k", [-1, 0, 2])
@pytest.mark.parametrize("name", ["tril", "triu"])
def test_tri(name, k):
    x = rs(2, 4, 5)
    check_fn(lambda x: getattr(inp, name)(x, k), lambda x: getattr(jnp, name)(x, k), [x],
             np.float64)


@pytest.mark.parametrize("k", [-2, 0, 1, 6])
def test_diag_and_diagonal_and_trace(k):
    m, v = rs(4, 5), rs(3)
    check_fn(lambda m: inp.diag(m, k), lambda m: jnp.diag(m, k), [m], np.float64)
    check_fn(lambda v: inp.diag(v, k), lambda v: jnp.diag(v, k), [v], np.float64)
    x = rs(4, 3, 5)
    check_fn(lambda x: inp.diagonal(x, k, 0, 2), lambda x: jnp.diagonal(x, k, 0, 2), [x],
             np.float64)
    check_fn(lambda m: inp.trace(m, k), lambda m: jnp.trace(m, k), [m], np.float64)


# --------------------------------------------------------------------- ufuncs

@pytest.mark.parametrize("dtype", FLOATS)
def test_logaddexp_sign_heaviside(dtype):
    x, y = rs(5, seed=1, dtype=dtype) * 3, rs(5, seed=2, dtype=dtype) * 3
    check_fn(inp.logaddexp, jnp.logaddexp, [x, y], dtype)
    close(inp.logaddexp(np.array([-np.inf, 800.0, -np.inf], dtype), np.array(
        [1.0, 800.0, -np.inf], dtype)), jnp.logaddexp(np.array([-np.inf, 800.0, -np.inf],
                                                                dtype),
                                                       np.array([1.0, 800.0, -np.inf], dtype)))
    check_fn(inp.sign, jnp.sign, [x], dtype)
    h = np.array([-1.0, 0.0, 2.0], dtype)
    close(inp.heaviside(h, np.array(0.5, dtype)), jnp.heaviside(h, np.array(0.5, dtype)))


# ----------------------------------------------------------------------- norms

NORMS = [dict(), dict(ord=2), dict(ord=1), dict(ord=np.inf), dict(ord=3),
         dict(axis=0), dict(axis=1, keepdims=True), dict(ord="fro"),
         dict(ord=1, axis=(0, 1)), dict(ord=np.inf, axis=(1, 0))]


@pytest.mark.parametrize("kw", NORMS, ids=[str(k) for k in NORMS])
def test_norm(kw):
    x = rs(3, 4) if (kw.get("ord") in ("fro",) or "axis" in kw or kw == {}) else rs(5)
    if kw.get("ord") in (1, np.inf) and "axis" in kw:
        x = rs(3, 4)
    check_fn(lambda x: inp.linalg.norm(x, **kw), lambda x: jnp.linalg.norm(x, **kw), [x],
             np.float64)


def test_norm_vector_float32():
    x = rs(6, dtype=np.float32)
    check_fn(inp.linalg.norm, jnp.linalg.norm, [x], np.float32)


# --------------------------------------------------------------------- impl.nn

NN = ["relu", "sigmoid", "softplus", "silu", "swish", "log_sigmoid", "tanh", "elu",
      "leaky_relu", "relu6", "hard_tanh"]


@pytest.mark.parametrize("name,dtype", alternating(NN + NN[:4], str))
def test_nn_activations(name, dtype):
    x = rs(4, 5, seed=3, dtype=dtype) * 4
    check_fn(getattr(impl.nn, name), getattr(jax.nn, name), [x], dtype)


@pytest.mark.parametrize("dtype", floats_in_ci(np.float64))
@pytest.mark.parametrize("approximate", [True, False])
def test_gelu(approximate, dtype):
    x = rs(4, 5, seed=3, dtype=dtype) * 3
    check_fn(lambda x: impl.nn.gelu(x, approximate=approximate),
             lambda x: jax.nn.gelu(x, approximate=approximate), [x], dtype)


def test_relu_derivative_at_zero_matches_jax():
    x = np.array([-1.0, 0.0, 2.0])
    close(impl.grad(lambda x: inp.sum(impl.nn.relu(x)))(x),
          jax.grad(lambda x: jnp.sum(jax.nn.relu(x)))(x))
    assert np.isnan(np.asarray(impl.nn.relu(np.array([np.nan])))[0])


@pytest.mark.parametrize("name,axis,dtype", alternating(
    [(n, a) for n in ["softmax", "log_softmax"] for a in [-1, 0, (0, 1)]],
    lambda r: f"{r[0]}-{r[1]}"))
def test_softmax(name, axis, dtype):
    x = rs(3, 4, seed=5, dtype=dtype) * 3
    check_fn(lambda x: getattr(impl.nn, name)(x, axis=axis),
             lambda x: getattr(jax.nn, name)(x, axis=axis), [x], dtype)


def test_softmax_stable_for_large_inputs():
    x = np.array([1000.0, 1001.0, 999.0])
    close(impl.nn.softmax(x), jax.nn.softmax(x))
    close(impl.nn.log_softmax(x), jax.nn.log_softmax(x))
    close(impl.grad(lambda x: impl.nn.log_softmax(x)[1])(x),
          jax.grad(lambda x: jax.nn.log_softmax(x)[1])(x))


@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_one_hot(axis, dtype):
    labels = np.array([[0, 2, 1], [3, 1, 0]])
    close(impl.nn.one_hot(labels, 4, axis=axis, dtype=dtype),
          jax.nn.one_hot(labels, 4, axis=axis, dtype=dtype))
    close(impl.vmap(lambda l: impl.nn.one_hot(l, 4))(labels),
          jax.vmap(lambda l: jax.nn.one_hot(l, 4))(labels))


def test_one_hot_default_dtype_and_out_of_range():
    labels = np.array([0, 5, -1, 2])
    close(impl.nn.one_hot(labels, 3), jax.nn.one_hot(labels, 3))


# ------------------------------------------------------------ scipy.special

LSE = [dict(), dict(axis=0), dict(axis=1, keepdims=True), dict(axis=(0, 1)),
       dict(axis=-1, b="b"), dict(axis=0, b="b", return_sign=True), dict(b="b_neg",
                                                                        return_sign=True)]


@pytest.mark.parametrize("kw,lib,dtype", first_in_ci(3, alternating(
    [(kw, "scipy") for kw in LSE] + [(kw, "nn") for kw in LSE[3:5]],
    lambda r: f"{r[1]}-{r[0]}")))
def test_logsumexp(kw, lib, dtype):
    x = rs(3, 4, seed=7, dtype=dtype) * 5
    kw = dict(kw)
    if kw.get("b") == "b":
        kw["b"] = np.abs(rs(3, 4, seed=8, dtype=dtype)) + 0.1
    elif kw.get("b") == "b_neg":
        kw["b"] = rs(3, 4, seed=9, dtype=dtype)
    ifn = (isp if lib == "scipy" else impl.nn).logsumexp
    jfn = (jsp if lib == "scipy" else jax.nn).logsumexp
    if kw.get("return_sign"):
        close(ifn(x, **kw), jfn(x, **kw))
        check_fn(lambda x: ifn(x, **kw)[0], lambda x: jfn(x, **kw)[0], [x], dtype)
    else:
        check_fn(lambda x: ifn(x, **kw), lambda x: jfn(x, **kw), [x], dtype)


def test_logsumexp_stable_and_infinite():
    x = np.array([1000.0, 1000.0, -np.inf])
    close(isp.logsumexp(x), jsp.logsumexp(x))
    close(isp.logsumexp(np.full(3, -np.inf)), jsp.logsumexp(np.full(3, -np.inf)))
    close(impl.grad(isp.logsumexp)(x), jax.grad(jsp.logsumexp)(x))
    text = str(impl.make_jaxpr(isp.logsumexp)(x))
    assert "stop_gradient" in text and "reduce_max" in text


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["expit", "logit", "erf", "erfc"])
def test_special(name, dtype):
    x = np.random.RandomState(11).uniform(0.05, 0.95, (3, 4)).astype(dtype)
    check_fn(getattr(isp, name), getattr(jsp, name), [x], dtype)


def test_xlogy():
    x = np.array([0.0, 1.0, 2.0])
    y = np.array([0.0, 2.0, 3.0])
    close(isp.xlogy(x, y), jsp.xlogy(x, y))
    close(impl.grad(lambda y: inp.sum(isp.xlogy(x, y)))(y + 1),
          jax.grad(lambda y: jnp.sum(jsp.xlogy(x, y)))(y + 1))


def test_jax_program_runs_on_impl():
    """A small classifier step written against the jax API runs unchanged on impl."""
    def make(jax_, jnp_):
        def loss(params, x, labels):
            h = jax_.nn.gelu(jnp_.einsum("bi,ij->bj", x, params["w"]) + params["b"])
            logits = jnp_.tril(jnp_.ones((4, 4)))[0] * h
            onehot = jax_.nn.one_hot(labels, 4)
            return -jnp_.mean(jnp_.sum(jax_.nn.log_softmax(logits) * onehot, axis=-1))
        return jax_.jit(jax_.value_and_grad(loss))

    params = {"w": rs(3, 4, seed=1), "b": rs(4, seed=2)}
    x, labels = rs(5, 3, seed=3), np.array([0, 1, 2, 3, 1])
    close(make(impl, inp)(params, x, labels), make(jax, jnp)(params, x, labels))


# ------------------------------------------------------ integer inputs promote

@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_])
@pytest.mark.parametrize("name", ["sin", "sqrt", "exp", "mean", "var", "std", "log2",
                                  "true_divide", "arctan2", "logaddexp", "hypot"])
def test_integer_inputs_promote_like_jax(name, dtype):
    """Integer inputs of floating functions get JAX's floating dtype (float32 for
    32-bit and smaller integers, float64 for 64-bit ones)."""
    a = np.array([1, 2, 3]).astype(dtype)
    args = (a,) if name in ("sin", "sqrt", "exp", "mean", "var", "std", "log2") else (a, a)
    close(getattr(inp, name)(*args), getattr(jnp, name)(*args))


@pytest.mark.parametrize("x, y", [(1.0, 1.0), (-5.0, -5.0), (1.0, 2.0), (-np.inf, 2.0), (3.0, -np.inf)])
def test_logaddexp_gradient_splits_ties_as_jax(x, y):
    """At x == y each argument gets 1/2 (softplus'(0) = 1/2), as JAX's rule gives."""
    close(impl.grad(inp.logaddexp, (0, 1))(x, y), jax.grad(jnp.logaddexp, (0, 1))(x, y))
    close(impl.grad(impl.nn.softplus)(x), jax.grad(jax.nn.softplus)(x))


# ------------------------------------------------------- rounding and finiteness by dtype

ROUNDING = {
    "round int": lambda np_: np_.round(np_.array([15, 26])),
    "round int negative decimals": lambda np_: np_.round(np_.array([15, 26]), -1),
    "round bool": lambda np_: np_.round(np_.array([True])),
    "round float decimals": lambda np_: np_.round(np_.array([1.25, 2.35]), 1),
    "round complex": lambda np_: np_.round(np_.array([1.5 + 2.5j, -0.5 - 1.5j])),
    "round complex decimals": lambda np_: np_.round(np_.array([1.25 + 2.35j]), 1),
    "round weak scalar": lambda np_: np_.round(2.5),
    "round weak scalar decimals": lambda np_: np_.round(2.56, 1),
    "round float16 decimals": lambda np_: np_.round(np_.array([1.25, 2.35], np.float16), 1),
    "floor int": lambda np_: np_.floor(np_.array([1, 2], np.int8)),
    "ceil bool": lambda np_: np_.ceil(True),
    "rint int": lambda np_: np_.rint(np_.array([1, 2])),
    "rint bool": lambda np_: np_.rint(np_.array([True])),
    "rint complex": lambda np_: np_.rint(np_.array([1.5 + 2.5j, 0.5 - 3.5j])),
    "isfinite int": lambda np_: np_.isfinite(np_.array([1, 2])),
    "isfinite complex": lambda np_: np_.isfinite(
        np_.array([1 + np.inf * 1j, np.nan + 1j, 1 + 1j])),
    "isfinite weak scalar": lambda np_: np_.isfinite(2.0),
}


@pytest.mark.parametrize("name", sorted(ROUNDING))
def test_rounding_and_finiteness_of_every_dtype_as_jax(name):
    """Values, dtypes and weak types as JAX's, or JAX's exception (integers keep their
    dtype, complex numbers are rounded part by part)."""
    try:
        want = ROUNDING[name](jnp)
    except Exception as e:   # noqa: BLE001  (the test is that impl raises alike)
        with pytest.raises(type(e), match=re.escape(str(e))):
            ROUNDING[name](inp)
        return
    got = ROUNDING[name](inp)
    assert str(jax.typeof(got)) == str(jax.typeof(want))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_gradient_through_complex_rounding_as_jax():
    def loss(np_):
        return lambda x: np_.real(np_.round(x * (1 + 1j)) + x * x)
    np.testing.assert_allclose(impl.grad(loss(inp))(1.3), jax.grad(loss(jnp))(1.3))


def _staged_calls(api, np_):
    x = np_.asarray(np.array([[0.5, -1.25, 2.0], [3.5, 0.25, -0.75]], np.float32))
    v = np_.asarray(np.array([1.5, -2.0, 0.5], np.float32))
    fs = {
        "linspace": lambda s, t: np_.linspace(s, t, 7),
        "linspace no endpoint, retstep": lambda s, t: np_.linspace(s, t, 4, endpoint=False,
                                                                   retstep=True),
        "linspace of vectors along axis 1": lambda s, t: np_.linspace(s * v, t * v, 5, axis=1),
        "linspace int dtype": lambda s, t: np_.linspace(s, t * 10, 6, dtype=np.int32),
        "linspace num 1 and 0": lambda s, t: (np_.linspace(s, t, 1), np_.linspace(s, t, 0)),
        "var": lambda s, t: (np_.var(x * s), np_.var(x * t, axis=0, ddof=1),
                             np_.var(x * s, axis=1, keepdims=True)),
        "std": lambda s, t: np_.std(x * s + t, axis=0),
        "cumsum": lambda s, t: np_.cumsum(x * s, axis=1).ravel() + np_.cumprod(x * t),
        "norm": lambda s, t: (np_.linalg.norm(x * s), np_.linalg.norm(v * t, ord=1)),
    }
    smooth = {k: f for k, f in fs.items() if k not in ("linspace int dtype",
                                                        "linspace num 1 and 0")}
    s, t = np.float32(0.3), np.float32(2.5)

    def total(s, t):
        return sum(np_.sum(o) for f in smooth.values()
                   for o in jax.tree_util.tree_leaves(f(s, t)))

    return {"eager": {k: f(s, t) for k, f in fs.items()},
            "jit": api.jit(lambda s, t: {k: f(s, t) for k, f in fs.items()})(s, t),
            "grad": api.jit(api.grad(total, argnums=(0, 1)))(s, t),
            "vmap": api.jit(api.vmap(lambda s, t: {k: f(s, t) for k, f in smooth.items()}))(
                np_.asarray([s, t]), np_.asarray([t, s]))}


@pytest.mark.slow
def test_functions_jax_stages_as_calls_compute_as_jax():
    """linspace, var, std, cumsum and norm run as JAX's programs (staged as calls named
    as JAX's): values, derivatives and vmap equal to JAX's to float32 rounding."""
    want, got = _staged_calls(jax, jnp), _staged_calls(impl, inp)
    assert want.keys() == got.keys()
    for name in want:
        assert_tree_close(got[name], want[name], tol=dict(rtol=2e-6, atol=1e-6),
                          exact_non_float=True)


def test_var_of_complex_values_is_real_as_jax():
    z = np.array([1 + 2j, -0.5 + 1j, 3 - 1j], np.complex64)
    for fn in ("var", "std"):
        got, want = getattr(inp, fn)(z), getattr(jnp, fn)(z)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    with pytest.raises(ValueError):
        jnp.var(z, dtype=np.float32)
    with pytest.raises(ValueError):
        inp.var(z, dtype=np.float32)
