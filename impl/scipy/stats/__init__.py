"""jax.scipy.stats's most used distributions over impl: each a module of
log-density/density/distribution functions with scipy's loc/scale arguments."""
from impl.scipy.stats import (  # noqa: F401
    bernoulli, beta, cauchy, expon, gamma, laplace, logistic, multivariate_normal, norm,
    poisson, t, uniform)
