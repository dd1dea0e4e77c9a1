"""Helpers shared by the custom-rule test files: run one program written against a
module pair on impl and on JAX, compare results and raised errors."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np

import impl
import impl.numpy as inp
from helpers import TOLERANCE, assert_tree_close

F32 = np.float32
BACKENDS = {"impl": (impl, inp), "jax": (jax, jjnp)}


_TOL = TOLERANCE["custom rules"]


def assert_trees_close(got, want, rtol=_TOL["rtol"], atol=_TOL["atol"], check_dtypes=True):
    assert_tree_close(got, want, tol=dict(rtol=rtol, atol=atol), check_dtype=check_dtypes)


def run_both(program, *args, **kwargs):
    """program(m, np_, *args) on impl and on JAX: (impl result, JAX result)."""
    return (program(impl, inp, *args, **kwargs), program(jax, jjnp, *args, **kwargs))


def check_against_jax(program, *args, rtol=_TOL["rtol"], atol=_TOL["atol"], **kwargs):
    got, want = run_both(program, *args, **kwargs)
    assert_trees_close(got, want, rtol=rtol, atol=atol)
    return got


# impl's own exception classes standing for JAX's
_EQUIVALENT = {jax.errors.UnexpectedTracerError: impl.UnexpectedTracerError,
               jax.errors.ConcretizationTypeError: impl.ConcretizationTypeError}


def raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test inspects what was raised
        return e
    raise AssertionError(f"{fn} raised nothing")


def check_same_error(program, *needles):
    """program(m, np_) raises on both backends: the same exception type (impl's own
    class where JAX has its own) and messages that both contain every needle."""
    got = raised(lambda: program(impl, inp))
    want = raised(lambda: program(jax, jjnp))
    want_type = _EQUIVALENT.get(type(want), type(want))
    assert isinstance(got, want_type), (type(got), type(want), got, want)
    for needle in needles:
        assert needle in str(want), f"JAX's message lacks {needle!r}: {want}"
        assert needle in str(got), f"impl's message lacks {needle!r}: {got}"
    return got, want
