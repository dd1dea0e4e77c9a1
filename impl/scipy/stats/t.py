"""Student's t distribution with df degrees of freedom."""
import math

import impl.numpy as jnp
from impl import lax
from impl.scipy.stats._common import const_typed_args, standardized


def logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = const_typed_args(x, df, loc, scale)
    y = standardized(x, loc, scale)
    half_df = df / 2
    normalizer = (lax.lgamma(half_df) + jnp.log(scale * scale * math.pi * df) / 2
                  - lax.lgamma(half_df + 0.5))
    return -(normalizer + (half_df + 0.5) * jnp.log1p(y * y / df))


def pdf(x, df, loc=0, scale=1):
    return jnp.exp(logpdf(x, df, loc, scale))
