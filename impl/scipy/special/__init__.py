"""jax.scipy.special functions over impl's primitives."""
from __future__ import annotations

import numpy as np

from impl import core, lax
from impl.custom_derivatives import custom_jvp
from impl.core import get_aval
from impl.primitives import elementwise as ew
from impl.numpy import _core as c
from impl.numpy import _ufuncs as uf
from impl.numpy._reductions import max as _max
from impl.numpy._util import (asarray, broadcast_promoted, broadcast_shapes, broadcast_to,
                              canonicalize_axes)

from impl.scipy.special._gamma import (  # noqa: E402
    gammaln, digamma, gammasgn, gamma, loggamma, betaln, beta, betainc, gammainc, gammaincc,
    polygamma, zeta, multigammaln, factorial, comb, poch)
from impl.scipy.special._normal import erfinv, ndtr, ndtri, log_ndtr, erfcx  # noqa: E402
from impl.scipy.special._information import (  # noqa: E402
    xlogy, xlog1py, entr, rel_entr, kl_div, i0, i0e, i1, i1e, spence)

__all__ = ["logsumexp", "expit", "logit", "erf", "erfc", "xlogy", "softmax", "log_softmax",
           "gammaln", "digamma", "gammasgn", "gamma", "loggamma", "betaln", "beta", "betainc",
           "gammainc", "gammaincc", "polygamma", "zeta", "multigammaln", "factorial", "comb",
           "poch", "erfinv", "ndtr", "ndtri", "log_ndtr", "erfcx", "xlog1py", "entr",
           "rel_entr", "kl_div", "i0", "i0e", "i1", "i1e", "spence"]


def _float(x):
    return uf._float_operand(x)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) computed stably: the maximum is subtracted first (under
    stop_gradient, so it does not change the derivative); entries outside the `where`
    mask count as -inf."""
    a = _float(a)
    if where is not None:
        a = uf.where(where, a, -np.inf)
    if b is not None:
        b = asarray(b) if not isinstance(b, core.Tracer) else b
        a, b = broadcast_promoted(a, b)
        shape = broadcast_shapes(get_aval(a).shape, get_aval(b).shape)
        a, b = broadcast_to(a, shape), broadcast_to(b, shape)
    nd = get_aval(a).ndim
    axes = canonicalize_axes(axis, nd)
    amax = _max(ew.stop_gradient_p.bind(a), axis=axes, keepdims=True)
    amax = uf.where(uf.isfinite(amax), amax, ew.zeros_like(amax))
    shifted = uf.exp(uf.subtract(a, amax))
    if b is not None:
        shifted = uf.multiply(b, shifted)
    s = c.sum(shifted, axis=axes, keepdims=True)
    sign = None
    if return_sign:
        sign = uf.sign(s)
        s = uf.absolute(s)
    out = uf.add(uf.log(s), amax)
    if not keepdims:
        out = c.squeeze(out, axes)
        if sign is not None:
            sign = c.squeeze(sign, axes)
    return (out, sign) if return_sign else out


def expit(x):
    return ew.logistic_p.bind(_float(x))


@custom_jvp
def logit(x):
    x = _float(x)
    return ew.log(ew.div(x, ew.sub(ew.constant_like(x, 1), x)))


def _logit_jvp(g, ans, x):
    x = _float(x)   # JAX's rule, and its constants' types: 1 / (x (1 - x))
    return ew.div(g, ew.mul(x, ew.sub(ew.constant_like(x, 1), x)))


logit.defjvps(_logit_jvp)


def erf(x):
    return ew.erf_p.bind(_float(x))


def erfc(x):
    return lax.erfc(_float(x))


def _shifted(x, axis, where):
    """x minus its maximum along `axis` (over the `where` mask), the maximum held
    constant under differentiation; masked-out entries become -inf."""
    x = _float(x)
    axes = canonicalize_axes(axis, get_aval(x).ndim)
    if where is not None:
        x = uf.where(where, x, -np.inf)
    m = ew.stop_gradient_p.bind(_max(x, axis=axes, keepdims=True))
    m = uf.where(uf.isfinite(m), m, ew.zeros_like(m))
    return uf.subtract(x, m), axes


def _softmax(x, axis, where):
    shifted, axes = _shifted(x, axis, where)
    e = uf.exp(shifted)
    return uf.true_divide(e, c.sum(e, axis=axes, keepdims=True))


def _log_softmax(x, axis, where):
    shifted, axes = _shifted(x, axis, where)
    return uf.subtract(shifted, uf.log(c.sum(uf.exp(shifted), axis=axes, keepdims=True)))


def softmax(x, /, *, axis=None):
    """exp(x) / sum(exp(x)) along `axis` (all axes when None)."""
    return _softmax(x, axis, None)


def log_softmax(x, /, *, axis=None):
    return _log_softmax(x, axis, None)
