"""Arguments of the transformations checked as JAX checks them: jit's static and donated
argument numbers and names against the function's signature (ValueError when jit is
made), and a function argument that is not callable (TypeError when the transformation
is made). Each case runs on JAX and on impl; the exception types must agree."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import impl


def one(x):
    return x


def two(x, y=1.0):
    return x


def pos_only(x, /, y):
    return x


def var_args(*args):
    return args[0]


def var_kwargs(x, **kw):
    return x


CASES = {
    "donate_argnums past the arguments": lambda J: J.jit(one, donate_argnums=5),
    "negative donate_argnums past the arguments": lambda J: J.jit(one, donate_argnums=-2),
    "static_argnums past the arguments": lambda J: J.jit(one, static_argnums=1),
    "unknown donate_argnames": lambda J: J.jit(one, donate_argnames="z"),
    "unknown static_argnames": lambda J: J.jit(two, static_argnames=("y", "z")),
    "positional-only static_argnames": lambda J: J.jit(pos_only, static_argnames="x"),
    "static and donated": lambda J: J.jit(two, static_argnums=0, donate_argnums=0),
    "static_argnums a string": lambda J: J.jit(one, static_argnums="x"),
    "static_argnums a float": lambda J: J.jit(one, static_argnums=1.0),
    "static_argnames not strings": lambda J: J.jit(two, static_argnames=(1,)),
    "any argnums with *args": lambda J: J.jit(var_args, static_argnums=4),
    "any argnames with **kwargs": lambda J: J.jit(var_kwargs, static_argnames="q"),
    "valid argnums and argnames": lambda J: J.jit(two, static_argnames="y",
                                                 donate_argnums=0),
    "jit of a non-callable": lambda J: J.jit(3),
    "grad of a non-callable": lambda J: J.grad(3),
    "value_and_grad of a non-callable": lambda J: J.value_and_grad(3),
    "vmap of a non-callable": lambda J: J.vmap(3),
    "jacfwd of a non-callable": lambda J: J.jacfwd(3),
    "jacrev of a non-callable": lambda J: J.jacrev(3),
    "hessian of a non-callable": lambda J: J.hessian(3),
    "make_jaxpr of a non-callable": lambda J: J.make_jaxpr(3),
    "jvp of a non-callable": lambda J: J.jvp(3, (1.0,), (1.0,)),
    "vjp of a non-callable": lambda J: J.vjp(3, 1.0),
    "linearize of a non-callable": lambda J: J.linearize(3, 1.0),
    "jit of a generator function": lambda J: J.jit(_generator),
}


def _generator(x):
    yield x


def _outcome(J, case):
    try:
        case(J)
    except Exception as e:   # noqa: BLE001 - the type is what is compared
        return type(e), str(e)
    return None, ""


@pytest.mark.parametrize("name", list(CASES))
def test_argument_checks_raise_as_in_jax(name):
    want_type, want_msg = _outcome(jax, CASES[name])
    got_type, got_msg = _outcome(impl, CASES[name])
    assert got_type is want_type, (got_msg, want_msg)
    if want_type is ValueError:   # jit's own argument checks: JAX's message too
        assert got_msg == want_msg


def test_the_checks_run_when_jit_is_made_and_before_any_call():
    for J in (jax, impl):
        with pytest.raises(ValueError, match="donate_argnums=\\(5,\\)"):
            J.jit(one, donate_argnums=5)
        f = J.jit(two, static_argnames="y")
        assert f(np.float32(2.0), y=3) == 2.0
