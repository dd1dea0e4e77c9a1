"""Elementwise functions beyond elementwise.py's arithmetic: inverse hyperbolic
functions, cube root, base-2 exponential, the complementary error function, the gamma
family (lgamma, digamma, polygamma, igamma, zeta, betainc), scaled Bessel functions and
population count. Each lowers to its jax.lax function; derivatives follow the calculus
identities (where JAX defines none, impl defines none either)."""
from __future__ import annotations

import numpy as np
from jax import lax

from impl.core import get_aval
from impl.interpreters import ad
from impl.primitives import _operand_dtypes as dt
from impl.primitives.elementwise import (  # the shared rules of elementwise primitives
    _binop, _unop, abs_p, add, div, exp, log, mul, neg, rsqrt, select_n, sign, sub,
    full_like, constant_like, convert_element_type)
from impl.primitives.elementwise import gt, integer_pow_p, square

by_parts = ad.jvp_by_parts


def _scalar_like(x, value):
    return full_like(x, value)


# The derivative rules compute in the order of JAX's, so they round as JAX's do.
acosh_p = _unop("acosh", lax.acosh, by_parts(lambda t, x: mul(t, rsqrt(sub(square(x), 1)))))
asinh_p = _unop("asinh", lax.asinh, by_parts(lambda t, x: mul(t, rsqrt(add(square(x), 1)))))
atanh_p = _unop("atanh", lax.atanh, by_parts(
    lambda t, x: mul(integer_pow_p.bind(add(1, x), y=-1), div(t, sub(1, x)))))
cbrt_p = _unop("cbrt", lax.cbrt, by_parts(
    lambda t, ans, x: mul(t, mul(constant_like(x, 1 / 3), integer_pow_p.bind(ans, y=-2))),
    use_output=True), dt.FLOATING)
exp2_p = _unop("exp2", lax.exp2, by_parts(
    lambda t, ans, x: mul(log(constant_like(x, 2)), mul(t, ans)), use_output=True))
erfc_p = _unop("erfc", lax.erfc, by_parts(
    lambda t, x: mul(constant_like(x, -2 / np.sqrt(np.pi)), mul(t, exp(neg(square(x)))))),
    dt.FLOATING)

def _polygamma_not_in_m(t, m, x):
    raise ValueError("polygamma gradient with respect to m is not supported")


def _times_as_jnp(t, coef):
    """t * coef as JAX's rules written with jnp's `*` compute it: a weakly typed tangent
    meeting a strongly typed coefficient is made strong by a conversion first (whose
    transpose gives the cotangent its weak type back)."""
    if get_aval(t).weak_type and not get_aval(coef).weak_type:
        t = convert_element_type(t, get_aval(t).dtype, weak_type=False)
    return mul(t, coef)


def _polygamma_in_x(t, m, x):
    return _times_as_jnp(t, polygamma(add(m, constant_like(m, 1)), x))


# polygamma(m, x): derivative in x only (m is an order), as in JAX.
polygamma_p = _binop("polygamma", lax.polygamma, by_parts(_polygamma_not_in_m, _polygamma_in_x),
                     accepted=dt.FLOATING)
digamma_p = _unop("digamma", lax.digamma, by_parts(
    lambda t, x: mul(t, polygamma(constant_like(x, 1), x))), dt.FLOATING)
lgamma_p = _unop("lgamma", lax.lgamma, by_parts(lambda t, x: mul(t, digamma(x))),
                 dt.FLOATING)


def polygamma(m, x):
    return polygamma_p.bind(m, x)


def digamma(x):
    return digamma_p.bind(x)


def lgamma(x):
    return lgamma_p.bind(x)


# The regularized incomplete gamma functions: d/dx from the integrand, d/da through
# igamma_grad_a (which itself has no derivative, as in JAX).
igamma_grad_a_p = _binop("igamma_grad_a", lax.igamma_grad_a, None,
                         accepted=dt.FLOATING)


def _igamma_dx(t, a, x):
    return _times_as_jnp(t, exp(sub(sub(mul(sub(a, 1), log(x)), x), lgamma(a))))


igamma_p = _binop("igamma", lax.igamma, by_parts(
    lambda t, a, x: _times_as_jnp(t, igamma_grad_a_p.bind(a, x)), _igamma_dx),
    accepted=dt.FLOATING)
igammac_p = _binop("igammac", lax.igammac, by_parts(
    lambda t, a, x: neg(_times_as_jnp(t, igamma_grad_a_p.bind(a, x))),
    lambda t, a, x: neg(_igamma_dx(t, a, x))), accepted=dt.FLOATING)

# d x / d a of a Gamma(a) sample x at fixed CDF value (the implicit reparameterization
# derivative the gamma sampler's jvp uses). It has no derivative of its own: JAX, whose
# version is JAX code, differentiates it in forward mode (a known gap, docs/random.md).
random_gamma_grad_p = _binop("random_gamma_grad", lax.random_gamma_grad, None,
                             accepted=dt.FLOATING)


def random_gamma_grad(a, x):
    return random_gamma_grad_p.bind(a, x)

# JAX defines no derivative of zeta (nor of igamma_grad_a): neither does impl.
zeta_p = _binop("zeta", lax.zeta, None, accepted=dt.FLOATING)


def _betainc_dx(t, a, b, x):
    # x^(a-1) (1-x)^(b-1) / B(a, b), in logs for range.
    log_beta = sub(add(lgamma(a), lgamma(b)), lgamma(add(a, b)))
    return _times_as_jnp(t, exp(sub(add(mul(sub(a, 1), log(x)),
                                        mul(sub(b, 1), log(sub(1, x)))), log_beta)))


def _betainc_not_in_ab(t, a, b, x):
    raise ValueError("Betainc gradient with respect to a and b not supported.")


regularized_incomplete_beta_p = _binop(
    "regularized_incomplete_beta", lax.betainc,
    by_parts(_betainc_not_in_ab, _betainc_not_in_ab, _betainc_dx),
    accepted=dt.FLOATING, operands=3)

bessel_i0e_p = _unop("bessel_i0e", lax.bessel_i0e, by_parts(
    lambda t, ans, x: _times_as_jnp(t, sub(bessel_i1e_p.bind(x), mul(sign(x), ans))),
    use_output=True),
    dt.FLOATING)


def _bessel_i1e_jvp(t, ans, x):
    # i1e'(x) = i0e(x) - i1e(x) (sign(x) + 1/x); its limit at 0 is 1/2.
    tiny = gt(abs_p.bind(x), _scalar_like(x, np.finfo(np.float32).tiny))
    safe = select_n(tiny, _scalar_like(x, 1.0), x)
    slope = sub(bessel_i0e_p.bind(safe), mul(ans, add(sign(safe), div(1, safe))))
    return _times_as_jnp(t, select_n(tiny, _scalar_like(x, 0.5), slope))


bessel_i1e_p = _unop("bessel_i1e", lax.bessel_i1e, by_parts(_bessel_i1e_jvp, use_output=True),
                     dt.FLOATING)

population_count_p = _unop("population_count", lax.population_count, ad.zero_jvp,
                           dt.INTEGER)
