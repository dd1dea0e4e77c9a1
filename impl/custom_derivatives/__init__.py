"""User-defined differentiation rules, as jax.custom_derivatives.

One module per API: `jvp` (custom_jvp, SymbolicZero), `vjp` (custom_vjp, custom_lin,
remat_opt, CustomVJPPrimal), `gradient` (custom_gradient, closure_convert), `linear`
(linear_call); `common` holds what they share. custom_vmap lives in
`impl.custom_batching`.
"""
from impl.custom_derivatives.jvp import (  # noqa: F401
    SymbolicZero, custom_jvp, custom_jvp_call_p, zero_from_primal)
from impl.custom_derivatives.vjp import (  # noqa: F401
    CustomVJPPrimal, custom_vjp, custom_vjp_call_p, custom_vjp_primal_tree_values,
    remat_opt_p)
from impl.custom_derivatives.gradient import closure_convert, custom_gradient  # noqa: F401
from impl.custom_derivatives.linear import linear_call  # noqa: F401

__all__ = ["closure_convert", "custom_gradient", "custom_jvp", "custom_jvp_call_p",
           "custom_vjp", "custom_vjp_call_p", "custom_vjp_primal_tree_values",
           "CustomVJPPrimal", "linear_call", "remat_opt_p", "SymbolicZero",
           "zero_from_primal"]
