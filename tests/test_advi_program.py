"""A short variational-inference program (a Gaussian fitted to a funnel density by
differentiating a Monte Carlo ELBO, with momentum) run on impl and on JAX: the fitted
parameters must be JAX's to the last bit of float32, which needs impl's random stream and
the order of operations in its derivative rules (here: the quotient rule) to be JAX's."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import jax.scipy.stats.norm as jnorm
import numpy as np

import impl
import impl.numpy as inp
import impl.scipy.stats.norm as inorm


def _fit(api, np_, norm, steps=6, samples=16):
    random, vmap = api.random, api.vmap

    def sample(key, mean, log_std):
        return mean + np_.exp(log_std) * random.normal(key, mean.shape)

    def log_q(x, mean, log_std):
        return np_.sum(vmap(norm.logpdf)(x, mean, np_.exp(log_std)))

    def log_p(z):  # Neal's funnel
        return norm.logpdf(z[0], 0, np_.exp(z[1])) + norm.logpdf(z[1], 0, 1.35)

    def elbo(key, params):
        z = sample(key, *params)
        return log_p(z) - log_q(z, *params)

    @api.jit
    def loss(params, t):
        keys = random.split(random.PRNGKey(t), samples)
        return -np_.mean(vmap(elbo, in_axes=(0, None))(keys, params))

    @api.jit
    def step(t, state):
        params, velocity = state
        g = api.grad(loss)(params, t)
        velocity = api.tree_util.tree_map(lambda v, d: 0.9 * v + d, velocity, g)
        return api.tree_util.tree_map(lambda p, v: p - 0.1 * v, params, velocity), velocity

    params = (np_.zeros(2), np_.zeros(2))
    state = (params, api.tree_util.tree_map(np_.zeros_like, params))
    for t in range(steps):
        state = step(t, state)
    return [np.asarray(x) for x in state[0]], np.asarray(loss(state[0], steps))


def test_advi_fit_gives_jaxs_numbers():
    mine, mine_loss = _fit(impl, inp, inorm)
    theirs, their_loss = _fit(jax, jnp, jnorm)
    for a, b in zip(mine, theirs):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(mine_loss, their_loss)


def test_quotient_rule_rounds_as_jax():
    # the derivative of x / y in y, per element, bit for bit (float32)
    r = np.random.RandomState(0)
    x, y = r.randn(64).astype(np.float32), np.exp(r.randn(64)).astype(np.float32)
    mine = impl.vmap(impl.grad(lambda a, b: a / b, (0, 1)))(x, y)
    theirs = jax.vmap(jax.grad(lambda a, b: a / b, (0, 1)))(x, y)
    for a, b in zip(mine, theirs):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # and the derivative is still right (central differences in float64)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    fd = (x64 / (y64 + 1e-6) - x64 / (y64 - 1e-6)) / 2e-6
    np.testing.assert_allclose(np.asarray(mine[1]), fd, rtol=1e-3, atol=1e-4)


def test_advi_objective_pieces_match_jax():
    key = jax.random.PRNGKey(3)
    keys_i, keys_j = impl.random.split(impl.random.PRNGKey(3), 8), jax.random.split(key, 8)
    np.testing.assert_array_equal(np.asarray(keys_i), np.asarray(keys_j))
    draw = partial(np.asarray)
    zi = impl.vmap(lambda k: impl.random.normal(k, (2,)))(keys_i)
    zj = jax.vmap(lambda k: jax.random.normal(k, (2,)))(keys_j)
    np.testing.assert_array_equal(draw(zi), draw(zj))
