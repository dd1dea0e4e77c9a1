"""The public transformations over pytrees: jvp, linearize, vjp, grad, jacobians,
linear_transpose, vmap, jit and make_jaxpr, with JAX's names and signatures."""
from __future__ import annotations

import contextlib
import functools
import inspect
import operator
import sys
import weakref
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax import tree_util
from jax._src import config as jax_config

from impl import core
from impl._traceback_util import api_boundary, boundary_method, filter_at_boundary
from impl.core import ShapedArray, Tracer, float0, get_aval
from impl.interpreters import ad, batching, dispatch, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero
from impl.primitives import collectives, mapping
from impl.primitives import elementwise as ew
from impl.primitives import shape as shape_ops
from impl.primitives.call import jit_p
from impl.primitives.sharding import (broadcast_prefix, check_sharding_leaf,
                                      check_vmap_explicit_axes)

tree_flatten = tree_util.tree_flatten
tree_unflatten = tree_util.tree_unflatten


# ------------------------------------------------------------------ flattening

def _check_leaf(x, what):
    if not core.valid_jaxtype(x):
        raise TypeError(f"{what} must be arrays or scalars, but got a value of type "
                        f"{type(x).__name__}: {x!r}")
    return x


def flatten_fun(fun, in_tree, has_aux=False, name="function"):
    """A function of flat leaves; `store` receives the output tree (and aux count)."""
    store = {}

    def flat_fun(*leaves):
        out = fun(*tree_unflatten(in_tree, leaves))
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"{name} with has_aux=True must return a pair (output, aux), "
                                f"got {type(out).__name__}")
            out, aux = out
            aux_leaves, store["aux_tree"] = tree_flatten(aux)
        else:
            aux_leaves = []
        out_leaves, store["out_tree"] = tree_flatten(out)
        for x in out_leaves:
            _check_leaf(x, f"The outputs of {name}")
        store["num_out"] = len(out_leaves)
        return out_leaves + aux_leaves
    return flat_fun, store


def _split_aux(flat, store, has_aux):
    n = store["num_out"]
    out = tree_unflatten(store["out_tree"], flat[:n])
    if not has_aux:
        return out, None
    return out, tree_unflatten(store["aux_tree"], flat[n:])


def _fun_name(fun):
    return getattr(fun, "__name__", type(fun).__name__)


def _materialize(t):
    return ad.instantiate_zeros(t) if type(t) is Zero else t


# ------------------------------------------------------------------------ jvp

@api_boundary
def jvp(fun: Callable, primals, tangents, has_aux: bool = False):
    """Forward-mode Jacobian-vector product of `fun` at `primals` along `tangents`."""
    _check_callable(fun)
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples or lists, got "
                        f"{type(primals).__name__} and {type(tangents).__name__}")
    if len(primals) != len(tangents):
        raise TypeError(f"jvp: primals and tangents must have the same length, got "
                        f"{len(primals)} and {len(tangents)}")
    flat_p, in_tree = tree_flatten(tuple(primals))
    flat_t, t_tree = tree_flatten(tuple(tangents))
    if in_tree != t_tree:
        raise TypeError(f"jvp: primal and tangent arguments must have the same tree "
                        f"structure; got {in_tree} and {t_tree}")
    tangents_in = []
    for i, (p, t) in enumerate(zip(flat_p, flat_t)):
        _check_leaf(p, "jvp primals")
        pa, ta = get_aval(p), get_aval(t)
        expected = ad.tangent_aval(pa)
        if pa.shape != ta.shape:
            raise ValueError(f"jvp: primal and tangent arguments must have equal shapes; "
                             f"leaf {i} has primal shape {pa.shape} and tangent shape "
                             f"{ta.shape}")
        if expected.dtype == float0:
            if ta.dtype != float0:
                raise TypeError(f"jvp: the primal at leaf {i} has dtype {pa.dtype}, so its "
                                f"tangent must have dtype float0, got {ta.dtype}")
            tangents_in.append(Zero(expected))
        else:
            if ta.dtype != pa.dtype:
                raise TypeError(f"jvp: primal and tangent arguments must have the same "
                                f"dtypes; leaf {i} has primal dtype {pa.dtype} and tangent "
                                f"dtype {ta.dtype}")
            tangents_in.append(t)
    flat_fun, store = flatten_fun(fun, in_tree, has_aux, _fun_name(fun))
    out_p, out_t = ad.jvp_flat(flat_fun, flat_p, tangents_in)
    n = store["num_out"]
    primals_out = tree_unflatten(store["out_tree"], out_p[:n])
    tangents_out = tree_unflatten(store["out_tree"], [_materialize(t) for t in out_t[:n]])
    if has_aux:
        return primals_out, tangents_out, tree_unflatten(store["aux_tree"], out_p[n:])
    return primals_out, tangents_out


# ------------------------------------------------------------ linearize / vjp

def _linearize_tree(fun, primals, has_aux, api_name):
    """Shared by linearize and vjp: flatten, evaluate and stage the tangent map."""
    flat_p, in_tree = tree_flatten(primals)
    for p in flat_p:
        _check_leaf(p, f"{api_name} primals")
    flat_fun, store = flatten_fun(fun, in_tree, has_aux, _fun_name(fun))
    out_flat, lin = ad.linearize_flat(flat_fun, flat_p)
    out, aux = _split_aux(out_flat, store, has_aux)
    return in_tree, store, out_flat, lin, out, aux


@api_boundary
def linearize(fun: Callable, *primals, has_aux: bool = False):
    """Evaluate `fun` and return its linear tangent map as a function (a
    `tree_util.Partial` whose leaves are the residuals, as JAX's)."""
    _check_callable(fun)
    in_tree, store, out_flat, lin, out, aux = _linearize_tree(fun, primals, has_aux,
                                                              "linearize")
    push = _Pushforward(lin, in_tree, store["out_tree"], store["num_out"], _fun_name(fun))
    f_jvp = tree_util.Partial(push, *lin.jaxpr.consts)
    return (out, f_jvp, aux) if has_aux else (out, f_jvp)


class _LinearMap:
    """What a function returned by linearize or vjp knows besides its residuals: the
    linear program without their values and the structures around it. The residuals
    are the leaves of the `tree_util.Partial` holding this object, so the function is a
    pytree as in JAX: it can be returned from jit, passed through tree_map and staged.
    Compared by identity (as the program it holds)."""

    def __init__(self, lin, in_tree, out_tree, num_out, name):
        self.program = lin.jaxpr.jaxpr
        self.num_res = len(lin.jaxpr.consts)
        self.in_avals, self.out_avals = lin.in_avals, lin.out_avals
        self.out_nonzero = lin.out_nonzero
        self.in_tree, self.out_tree, self.num_out = in_tree, out_tree, num_out
        self.name = name

    def linearized(self, residuals):
        return ad.LinearizedFunction(core.ClosedJaxpr(self.program, residuals),
                                     self.in_avals, self.out_avals, self.out_nonzero)


class _Pushforward(_LinearMap):
    """linearize's tangent map: (residuals..., tangents...) -> output tangents."""

    @api_boundary
    def __call__(self, *args):
        residuals, tangents = args[:self.num_res], args[self.num_res:]
        flat_t, t_tree = tree_flatten(tangents)
        if t_tree != self.in_tree:
            raise TypeError(f"linearized function expects tangents with structure "
                            f"{self.in_tree}, got {t_tree}")
        _check_avals("linearized function tangents", flat_t, self.in_avals)
        outs = self.linearized(residuals).jvp(flat_t)
        return tree_unflatten(self.out_tree,
                              [_materialize(t) for t in outs[:self.num_out]])


class _Pullback(_LinearMap):
    """vjp's cotangent map: (residuals..., [primals... when summing over reduce_axes],
    output cotangent) -> input cotangents."""

    def __init__(self, lin, in_tree, out_tree, num_out, name, out_avals, aux_avals,
                 reduce_axes):
        super().__init__(lin, in_tree, out_tree, num_out, name)
        self.primal_out_avals = out_avals
        self.aux_tangent_avals = [ad.tangent_aval(a) for a in aux_avals]
        self.reduce_axes = reduce_axes

    @api_boundary
    def __call__(self, *args):
        num_primals = self.in_tree.num_leaves if self.reduce_axes else 0
        nfixed = self.num_res + num_primals
        if len(args) != nfixed + 1:
            raise TypeError(f"The function returned by `vjp` applied to {self.name} was "
                            f"called with {len(args) - nfixed} arguments; it takes one: "
                            f"the cotangent of {self.name}'s output (one value, even when "
                            "the output is a tuple or another container).")
        residuals, flat_p = args[:self.num_res], args[self.num_res:nfixed]
        flat_ct, ct_tree = tree_flatten(args[-1])
        if ct_tree != self.out_tree:
            raise ValueError(f"unexpected tree structure of the cotangent: the vjp function "
                             f"expects the structure of the primal output {self.out_tree}, "
                             f"got {ct_tree}")
        for c, a in zip(flat_ct, self.primal_out_avals):
            _check_cotangent_type(c, a)
        # a cotangent varies over the manual mesh axes its output varies over (JAX casts
        # a seed of one before the rules see it)
        flat_ct = [ew.vary_as(c, a) for c, a in zip(flat_ct, self.primal_out_avals)]
        cts = flat_ct + [Zero(a) for a in self.aux_tangent_avals]
        cts_in = self.linearized(residuals).transpose(cts)
        if self.reduce_axes:
            cts_in = [collectives.sum_cotangent(p, c, self.reduce_axes)
                      for p, c in zip(flat_p, cts_in)]
        return tree_unflatten(self.in_tree, [_zero_cotangent(c) for c in cts_in])


def _check_cotangent_type(ct, primal_aval):
    """As JAX's vjp functions: a cotangent has its output's cotangent shape, dtype
    (weak types aside) and sharding (over Explicit mesh axes), checked before any rule
    runs; for an output without a tangent space (integers, bools) any cotangent goes."""
    expected = ad.tangent_aval(primal_aval)
    if expected.dtype == float0:
        return
    got = get_aval(ct)
    if (got.shape != expected.shape or got.dtype != expected.dtype
            or not core.sharded_alike(got, expected)):
        raise ValueError(
            "unexpected JAX type (e.g. shape/dtype) for argument to VJP function: "
            f"got {got.strip_weak_type()}, but expected {expected.strip_weak_type()} "
            "because the corresponding output of the differentiated function had JAX type "
            f"{primal_aval.strip_weak_type()}")


def _check_avals(what, values, avals):
    for i, (v, a) in enumerate(zip(values, avals)):
        va = get_aval(v)
        if va.shape != a.shape or (va.dtype != a.dtype and not va.weak_type):
            raise ValueError(f"{what}: leaf {i} should have shape {a.shape} and dtype "
                             f"{a.dtype}, got shape {va.shape} and dtype {va.dtype}")


def _zero_cotangent(t):
    if type(t) is not Zero:
        return t
    if t.aval.dtype == float0:
        return np.zeros(t.aval.shape, float0)
    z = ad.instantiate_zeros(t)
    # eagerly a rank-0 zero comes back as numpy; results are jax arrays, as in JAX
    return jax.numpy.asarray(z) if isinstance(z, np.ndarray) else z


@api_boundary
def vjp(fun: Callable, *primals, has_aux: bool = False, reduce_axes=()):
    """Evaluate `fun` and return a function mapping output cotangents to input ones (a
    `tree_util.Partial` whose leaves are the residuals, a pytree as JAX's).

    `reduce_axes` names vmap axes over which the cotangent of an input that is not
    mapped along them (broadcast to every element) is summed, as in the custom
    derivatives seed: the total rather than the per-element cotangent."""
    _check_callable(fun)
    reduce_axes = _reduce_axes_tuple(reduce_axes)
    in_tree, store, out_flat, lin, out, aux = _linearize_tree(fun, primals, has_aux, "vjp")
    n = store["num_out"]
    pull = _Pullback(lin, in_tree, store["out_tree"], n, _fun_name(fun),
                     [get_aval(o) for o in out_flat[:n]],
                     [get_aval(o) for o in out_flat[n:]], reduce_axes)
    # Summing over reduce_axes asks each primal whether it is mapped along them.
    summed_primals = tree_util.tree_leaves(primals) if reduce_axes else []
    f_vjp = tree_util.Partial(pull, *lin.jaxpr.consts, *summed_primals)
    return (out, f_vjp, aux) if has_aux else (out, f_vjp)


def _reduce_axes_tuple(reduce_axes):
    if isinstance(reduce_axes, (tuple, list)):
        return tuple(reduce_axes)
    return (reduce_axes,)


# ------------------------------------------------------------------------ grad

def _argnums_tuple(argnums, nargs, name, *, too_few_args_is_type_error=False):
    """`argnums` as (whether it was a single int, the nonnegative indices). As in JAX,
    grad reports an index past the last argument as too few arguments (TypeError) and
    every other out-of-range index, negative ones included, as a ValueError."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for a in nums:
        if not isinstance(a, int):
            raise TypeError(f"{name}: argnums must be an int or a tuple of ints, got {argnums!r}")
    if too_few_args_is_type_error and nums and max(nums) >= nargs:
        raise TypeError(f"{name}: differentiating with respect to argnums={argnums!r} "
                        f"requires at least {max(nums) + 1} positional "
                        f"arguments to be passed by the caller, but got only {nargs} "
                        "positional arguments.")
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError("Positional argument indices, e.g. for `static_argnums`, must "
                             "have value greater than or equal to -len(args) and less than "
                             f"len(args), but got value {a} for len(args) == {nargs}.")
    return single, tuple(a % nargs for a in nums)


def _partial_over(fun, args, argnums, kwargs):
    def f_partial(*dyn):
        full = list(args)
        for i, x in zip(argnums, dyn):
            full[i] = x
        return fun(*full, **kwargs)
    return f_partial


def _is_complex(dtype):
    return np.issubdtype(dtype, np.complexfloating)


def _check_grad_inputs(dyn, name, allow_int, holomorphic=False):
    """Inputs of reverse-mode derivatives: complex when holomorphic, else inexact
    (or integer with allow_int), with JAX's errors."""
    for x in tree_util.tree_leaves(dyn):
        aval = get_aval(x)
        if holomorphic and not _is_complex(aval.dtype):
            raise TypeError(f"{name} with holomorphic=True requires inputs with complex "
                            f"dtype, but got {aval.dtype.name}.")
        if not core.is_float_dtype(aval.dtype) and not allow_int:
            raise TypeError(f"{name} requires real- or complex-valued inputs (input dtype "
                            f"that is a sub-dtype of np.inexact), but got {aval.dtype.name}. "
                            "If you want to use Boolean- or integer-valued inputs, use vjp "
                            "or set allow_int to True.")


def _check_grad_outputs(out, name, holomorphic):
    """Outputs of reverse-mode derivatives: complex when holomorphic, else real floating."""
    for x in tree_util.tree_leaves(out):
        dtype = get_aval(x).dtype
        if holomorphic:
            if not _is_complex(dtype):
                raise TypeError(f"{name} with holomorphic=True requires outputs with "
                                f"complex dtype, but got {dtype.name}.")
        elif _is_complex(dtype):
            raise TypeError(f"{name} requires real-valued outputs (output dtype that is a "
                            f"sub-dtype of np.floating), but got {dtype.name}. For "
                            "holomorphic differentiation, pass holomorphic=True. For "
                            "differentiation of non-holomorphic functions involving complex "
                            "outputs, use impl.vjp directly.")
        elif not core.is_float_dtype(dtype):
            raise TypeError(f"{name} requires real-valued outputs (output dtype that is a "
                            f"sub-dtype of np.floating), but got {dtype.name}. For "
                            "differentiation of functions with integer outputs, use "
                            "impl.vjp directly.")


def _check_jacfwd_inputs(dyn, holomorphic):
    for x in tree_util.tree_leaves(dyn):
        dtype = get_aval(x).dtype
        if holomorphic and not _is_complex(dtype):
            raise TypeError("jacfwd with holomorphic=True requires inputs with complex "
                            f"dtype, but got {dtype.name}.")
        if not holomorphic and not jax.dtypes.issubdtype(dtype, np.floating):  # bfloat16 too
            raise TypeError("jacfwd requires real-valued inputs (input dtype that is a "
                            f"sub-dtype of np.floating), but got {dtype.name}. For "
                            "holomorphic differentiation, pass holomorphic=True. For "
                            "differentiation of non-holomorphic functions involving complex "
                            "inputs or integer inputs, use impl.jvp directly.")


def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
                   allow_int: bool = False, reduce_axes=()):
    """A function returning `fun`'s value and its gradient with respect to `argnums`
    (summed over the vmap axes named in `reduce_axes` where an input is broadcast)."""
    _check_callable(fun)
    name = f"value_and_grad({_fun_name(fun)})"

    @api_boundary
    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        single, nums = _argnums_tuple(argnums, len(args), "grad",
                                       too_few_args_is_type_error=True)
        dyn = tuple(args[i] for i in nums)
        _check_grad_inputs(dyn, "grad", allow_int, holomorphic)
        f_partial = _partial_over(fun, args, nums, kwargs)
        if has_aux:
            out, f_vjp, aux = vjp(f_partial, *dyn, has_aux=True, reduce_axes=reduce_axes)
        else:
            out, f_vjp = vjp(f_partial, *dyn, reduce_axes=reduce_axes)
        leaves = tree_util.tree_leaves(out)
        if len(leaves) != 1 or not isinstance(out, (Tracer, jax.Array, np.ndarray, np.generic,
                                                     float, int)) or get_aval(out).shape != ():
            shape = get_aval(leaves[0]).shape if len(leaves) == 1 else None
            raise TypeError("Gradient only defined for scalar-output functions. Output "
                            + (f"had shape: {shape}." if shape is not None else
                               f"was a {type(out).__name__} with {len(leaves)} leaves."))
        aval = get_aval(out)
        _check_grad_outputs(out, "grad", holomorphic)
        (g,) = [f_vjp(_gradient_seed(aval.dtype, aval.weak_type))]
        g = g[0] if single else tuple(g)
        return ((out, aux), g) if has_aux else (out, g)

    value_and_grad_f.__name__ = name
    return value_and_grad_f


def _gradient_seed(dtype, weak_type):
    """The cotangent grad starts from: an array of one, weakly typed for a weakly typed
    output (from Python scalars) so that the gradient keeps the weak type, as in JAX;
    custom_vjp bwd rules see it as their cotangent. Made once per dtype, weak type,
    default device and mesh in context (arrays are immutable)."""
    key = (dtype, weak_type, jax.config.jax_default_device, jax.sharding.get_abstract_mesh())
    seed = _seeds.get(key)
    if seed is None:
        seed = jax.numpy.ones((), dtype)
        if weak_type:   # a Python scalar of the output's kind is weakly typed
            seed = jax.numpy.asarray(seed.item())
        _seeds[key] = seed
    return seed


_seeds: dict = {}
core.register_cache(_seeds.clear)


def grad(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
         allow_int: bool = False, reduce_axes=()):
    """The gradient of scalar-valued `fun` with respect to the arguments `argnums`; with
    `reduce_axes`, summed over those vmap axes for inputs not mapped along them."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @api_boundary
    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    grad_f.__name__ = f"grad({_fun_name(fun)})"
    return grad_f


# ------------------------------------------------------------------- jacobians

def _std_basis(leaves):
    """Identity rows split per leaf: a list of (N, *leaf.shape) numpy arrays."""
    avals = [get_aval(x) for x in leaves]
    sizes = [a.size for a in avals]
    total = sum(sizes)
    dtype = np.result_type(*[a.dtype for a in avals]) if avals else np.float32
    eye = np.eye(total, dtype=dtype)
    out, start = [], 0
    for a, s in zip(avals, sizes):
        out.append(eye[:, start:start + s].reshape((total,) + a.shape).astype(a.dtype))
        start += s
    return out


def _split_columns(flat_jac, axis_sizes, shapes, axis):
    """Split a batched jacobian leaf along `axis` into pieces reshaped to `shapes`."""
    pieces, start = [], 0
    for size, shape in zip(axis_sizes, shapes):
        idx = [slice(None)] * get_aval(flat_jac).ndim
        idx[axis] = slice(start, start + size)
        piece = flat_jac[tuple(idx)]
        pieces.append(piece)
        start += size
    return pieces


def jacfwd(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The Jacobian by forward mode: one jvp per input coordinate, vmapped."""
    _check_callable(fun)

    @api_boundary
    def jacfun(*args, **kwargs):
        single, nums = _argnums_tuple(argnums, len(args), "jacfwd")
        dyn = tuple(args[i] for i in nums)
        _check_jacfwd_inputs(dyn, holomorphic)
        f_partial = _partial_over(fun, args, nums, kwargs)
        dyn_leaves, dyn_tree = tree_flatten(dyn)
        basis = tree_unflatten(dyn_tree, _std_basis(dyn_leaves))

        def push(t):
            res = jvp(f_partial, dyn, t, has_aux=has_aux)
            return (res[0], res[1], res[2]) if has_aux else (res[0], res[1], None)

        y, jac, aux = vmap(push, out_axes=(None, -1, None))(basis)
        if holomorphic:
            _check_grad_outputs(y, "jacfwd", True)
        in_shapes = [get_aval(x).shape for x in dyn_leaves]
        in_sizes = [int(np.prod(s, dtype=np.int64)) for s in in_shapes]

        def per_output(j):
            out_shape = get_aval(j).shape[:-1]
            pieces = _split_columns(j, in_sizes, in_shapes, -1)
            pieces = [shape_ops.reshape(p, out_shape + s) for p, s in zip(pieces, in_shapes)]
            tree = tree_unflatten(dyn_tree, pieces)
            return tree[0] if single else tree

        jac_tree = tree_util.tree_map(per_output, jac)
        return (jac_tree, aux) if has_aux else jac_tree

    return jacfun


def jacrev(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False):
    """The Jacobian by reverse mode: one vjp per output coordinate, vmapped."""
    _check_callable(fun)

    @api_boundary
    def jacfun(*args, **kwargs):
        single, nums = _argnums_tuple(argnums, len(args), "jacrev")
        dyn = tuple(args[i] for i in nums)
        _check_grad_inputs(dyn, "jacrev", allow_int, holomorphic)
        f_partial = _partial_over(fun, args, nums, kwargs)
        if has_aux:
            y, f_vjp, aux = vjp(f_partial, *dyn, has_aux=True)
        else:
            (y, f_vjp), aux = vjp(f_partial, *dyn), None
        _check_grad_outputs(y, "jacrev", holomorphic)
        y_leaves, y_tree = tree_flatten(y)
        basis = tree_unflatten(y_tree, _std_basis(y_leaves))
        jac = vmap(f_vjp)(basis)      # tuple over dyn args; leaves (N_out, *in_shape)
        out_shapes = [get_aval(x).shape for x in y_leaves]
        out_sizes = [int(np.prod(s, dtype=np.int64)) for s in out_shapes]
        jac_leaves, jac_tree = tree_flatten(jac)
        # per input leaf: split rows per output leaf
        per_in = []
        for j in jac_leaves:
            in_shape = get_aval(j).shape[1:]
            rows = _split_columns(j, out_sizes, out_shapes, 0)
            per_in.append([shape_ops.reshape(r, s + in_shape) for r, s in zip(rows, out_shapes)])
        out_pieces = []
        for k in range(len(y_leaves)):
            tree = tree_unflatten(jac_tree, [p[k] for p in per_in])
            out_pieces.append(tree[0] if single else tree)
        result = tree_unflatten(y_tree, out_pieces)
        return (result, aux) if has_aux else result

    return jacfun


def jacobian(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
             allow_int: bool = False):
    """The Jacobian of `fun` (reverse mode, as jax.jacobian)."""
    return jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int)


def hessian(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The Hessian: forward over reverse."""
    return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)


# ------------------------------------------------------------ linear_transpose

@api_boundary
def linear_transpose(fun: Callable, *primals, reduce_axes=()):
    """The transpose of the linear function `fun` at inputs shaped like `primals`
    (cotangents summed over the vmap axes in `reduce_axes` along which a primal is not
    mapped)."""
    reduce_axes = _reduce_axes_tuple(reduce_axes)
    flat_p, in_tree = tree_flatten(primals)
    in_avals = [get_aval(x).strip_weak_type() for x in flat_p]
    flat_fun, store = flatten_fun(fun, in_tree, False, _fun_name(fun))
    closed, _ = pe.trace_to_jaxpr(flat_fun, in_avals)
    out_tree = store["out_tree"]
    out_avals = closed.out_avals

    @api_boundary
    def transposed_fun(out_cotangent):
        flat_ct, ct_tree = tree_flatten(out_cotangent)
        if ct_tree != out_tree:
            raise TypeError(f"cotangent tree does not match function output: expected "
                            f"{out_tree}, got {ct_tree}")
        for i, (c, a) in enumerate(zip(flat_ct, out_avals)):
            ca = get_aval(c)
            if ca.shape != a.shape or ca.dtype != a.dtype:
                raise TypeError(f"cotangent leaf {i} should have shape {a.shape} and dtype "
                                f"{a.dtype.name}, got {ca.shape} and {ca.dtype.name}")
        args = [ad.UndefinedPrimal(a) for a in in_avals]
        cts = ad.backward_pass(closed.jaxpr, closed.consts, args, flat_ct)
        cts = [collectives.sum_cotangent(p, c, reduce_axes) for p, c in zip(flat_p, cts)]
        return tree_unflatten(in_tree, [_zero_cotangent(c) for c in cts])

    return transposed_fun


# ------------------------------------------------------------------------ vmap

def _flatten_axes(what, tree, axes):
    """Broadcast the prefix tree `axes` to one entry per leaf of `tree`."""
    proxy = tree_unflatten(tree, [object()] * tree.num_leaves)
    out = []

    def add(ax, sub):
        n = len(tree_util.tree_leaves(sub, is_leaf=batching.is_vmappable))
        out.extend([ax] * n)

    try:
        tree_util.tree_map(add, axes, proxy, is_leaf=batching.is_spec)
    except (ValueError, TypeError) as e:
        raise ValueError(f"vmap {what} specification must be a tree prefix of the "
                         f"corresponding value, got specification {axes!r} for value tree "
                         f"{tree}.") from e
    if len(out) != tree.num_leaves:
        raise ValueError(f"vmap {what} specification {axes!r} does not match the value "
                         f"tree {tree}")
    for ax in out:
        if not batching.is_spec(ax):
            raise TypeError(f"vmap {what} must be int, None, or (nested) container with "
                            f"those types as leaves, but got {ax!r}")
    return out


def vmap(fun: Callable, in_axes=0, out_axes=0, axis_name=None, axis_size=None,
         spmd_axis_name=None, sum_match: bool = False, *, chunk_size=None):
    """Vectorise `fun` over an axis of its inputs (see jax.vmap). `spmd_axis_name` (a
    mesh axis name or a tuple of them) shards the batch axis over those mesh axes
    wherever the function asks for a sharding (constraints, jit shardings, shard_map).

    Beyond JAX: inputs may be ragged `Pile`s (`in_axes=pile_axis`) or types registered
    with `batching.register_vmappable`; `chunk_size=k` computes the same result k
    elements at a time, so peak memory is bounded by a chunk."""
    _check_callable(fun)
    if spmd_axis_name is not None and type(spmd_axis_name) is not tuple:
        spmd_axis_name = (spmd_axis_name,)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    name = _fun_name(fun)
    if chunk_size is not None:
        chunk_size = mapping.check_chunk_size(chunk_size)
        if axis_name is not None:
            raise ValueError("vmap: chunk_size cannot be combined with axis_name: a "
                             "collective over the chunked axis would need every chunk at "
                             "once")

    @api_boundary
    @functools.wraps(fun)
    def vmapped(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap in_axes must be an int, None, or a tuple of entries "
                             f"corresponding to the positional arguments passed to the "
                             f"function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)}")
        flat_args, in_tree = tree_flatten((args, kwargs), is_leaf=batching.is_vmappable)
        axes_spec = (in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args),
                     {k: 0 for k in kwargs})
        specs = _flatten_axes("in_axes", in_tree, axes_spec)
        for x in flat_args:
            if not batching.is_vmappable(x):
                _check_leaf(x, "vmap arguments")
        size = _batch_size(name, flat_args, specs, axis_size)
        check_vmap_explicit_axes(flat_args, specs, spmd_axis_name)
        store = {}

        def flat_fun(*leaves):
            a, k = tree_unflatten(in_tree, leaves)
            out = fun(*a, **k)
            out_leaves, store["out_tree"] = tree_flatten(out, is_leaf=batching.is_vmappable)
            for o in out_leaves:
                if not (batching.is_vmappable(o) or core.valid_jaxtype(o)):
                    raise TypeError(f"Output from batched function {o!r} with type {type(o)} "
                                    "is not a valid JAX type")
            store["out_ranks"] = [None if batching.is_vmappable(o) else get_aval(o).ndim
                                  for o in out_leaves]
            return out_leaves

        def out_specs_fn(n):
            specs_out = _flatten_axes("out_axes", store["out_tree"], out_axes)
            res = []
            for d, r in zip(specs_out, store["out_ranks"]):
                if isinstance(d, (int, np.integer)) and r is not None:
                    if not -(r + 1) <= d <= r:
                        raise ValueError(f"axis {d} is out of bounds for array of "
                                         f"dimension {r + 1}")
                    d = int(d) % (r + 1)
                res.append(d)
            return res

        if chunk_size is not None and chunk_size < size:
            if any(batching.is_vmappable(x) for x in flat_args):
                raise NotImplementedError("vmap: chunk_size is not supported for piles or "
                                          "registered vmappable types")
            if spmd_axis_name is not None:
                raise NotImplementedError("vmap: chunk_size cannot be combined with "
                                          "spmd_axis_name (a chunk is not a mesh shard)")
            dims = [d if d is None else int(d) % get_aval(x).ndim
                    for x, d in zip(flat_args, specs)]
            outs = mapping.vmap_chunked(flat_fun, flat_args, dims, size, out_specs_fn,
                                        chunk_size, name, sum_match)
        else:
            outs = batching.vmap_flat(flat_fun, flat_args, specs, size, axis_name,
                                      out_specs_fn, name, sum_match,
                                      spmd_axis_name=spmd_axis_name)
        return tree_unflatten(store["out_tree"], outs)

    return vmapped


def _mapped_size(x, spec):
    """The size of the axis `spec` maps of `x`, or None when `x` does not say."""
    if type(x) is batching.Pile:
        return x.size
    if spec is batching.pile_axis:
        raise batching.not_a_pile_error(x)
    if not isinstance(spec, (int, np.integer)):
        return None
    shape = get_aval(x).shape if not batching.is_vmappable(x) else getattr(x, "shape", None)
    if shape is None:
        return None
    if not -len(shape) <= spec < len(shape):
        raise ValueError(f"vmap was requested to map its argument along axis {spec}, which "
                         f"implies that its rank should be at least "
                         f"{spec + 1 if spec >= 0 else -spec}, but is only {len(shape)} (its "
                         f"shape is {shape})")
    return int(shape[spec])


def _batch_size(name, flat_args, specs, axis_size):
    sizes = []
    for i, (x, d) in enumerate(zip(flat_args, specs)):
        if d is None:
            continue
        s = _mapped_size(x, d)
        if s is not None:
            sizes.append((i, d, s, getattr(x, "shape", None)))
    distinct = {s for _, _, s, _ in sizes}
    if axis_size is not None:
        distinct.add(int(axis_size))
    if not distinct:
        raise ValueError("vmap must have at least one non-None value in in_axes, or be "
                         "given axis_size")
    if len(distinct) > 1:
        lines = [f"  * leaf {i} (shape {shape}) has size {s} along axis {d}"
                 for i, d, s, shape in sizes]
        if axis_size is not None:
            lines.append(f"  * axis_size was given as {axis_size}")
        raise ValueError(f"vmap of {name} got inconsistent sizes for array axes to be "
                         f"mapped:\n" + "\n".join(lines))
    return distinct.pop()


# ------------------------------------------------------------------------- jit

def _avals_of_jax_values(leaves):
    return [ShapedArray(x.shape, x.dtype, getattr(getattr(x, "aval", x), "weak_type",
                                                    getattr(x, "weak_type", False)),
                        core.jax_explicit_sharding(x) if hasattr(x, "aval") else None,
                        mesh=core.array_mesh(x) if hasattr(x, "aval") else None)
            for x in leaves]


def _avals_of(leaves):
    return [get_aval(x) for x in leaves]


class StagedFunction:
    """A Python function with static arguments, staged to impl's IR on demand.

    Traces are cached as JAX caches them: on the function object itself (weakly, so
    the cache lives as long as the function), keyed by the static arguments, the
    structure and types (shape, dtype, weak type) of the others, the named axes in
    scope and JAX's tracing configuration. Every `jit(f)` and `make_jaxpr(f)` of one
    function shares them, so Python runs `f` once per key, and a global it reads is
    seen as it was when first traced."""

    def __init__(self, fun, static_argnums, static_argnames, cache=None):
        self.fun = fun
        self.static_argnums = static_argnums
        self.static_argnames = static_argnames
        self.name = _fun_name(fun)
        # `cache`: a table of traces by function, for a transformation that keeps its
        # own (as JAX's checkpoint does); jit's and make_jaxpr's by default.
        self._traces = _traces_of(fun, _traces if cache is None else cache)

    def _split(self, args, kwargs):
        nargs = len(args)
        static = tuple(i % nargs for i in self.static_argnums if -nargs <= i < nargs)
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}

        def rebuild(dyn_a, dyn_k):
            it = iter(dyn_a)
            full = [a if i in static else next(it) for i, a in enumerate(args)]
            return full, {**{k: v for k, v in kwargs.items() if k in self.static_argnames},
                          **dyn_k}
        return dyn_args, dyn_kwargs, rebuild

    def _key(self, args, kwargs, in_tree, avals):
        nargs = len(args)
        positional = tuple(args[i % nargs] for i in self.static_argnums if -nargs <= i < nargs)
        named = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
        for value in positional + tuple(v for _, v in named):
            core.check_static_hashable(value)
        # Collectives in the program depend on the sizes of the axes they name.
        return (self.static_argnums, self.static_argnames, in_tree, tuple(avals),
                positional + named, batching.axis_env_key(), _tracing_config())

    def stage(self, args, kwargs, avals_of=None, tracing_context=None):
        """The function staged for arguments like these, from the cache when traced
        before: (StagedTrace, flat dynamic arguments). `tracing_context` (a context
        manager factory) surrounds the tracing itself, not the cache lookup."""
        dyn_args, dyn_kwargs, rebuild = self._split(args, kwargs)
        flat, in_tree = tree_flatten((dyn_args, dyn_kwargs))
        avals = (avals_of or _avals_of)(flat)
        key = self._key(args, kwargs, in_tree, avals)
        hit = self._traces.get(key)
        if hit is not None:
            return hit, flat
        store = {}

        def flat_fun(*leaves):
            a, k = tree_unflatten(in_tree, leaves)
            full_args, full_kwargs = rebuild(a, k)
            out = self.fun(*full_args, **full_kwargs)
            out_leaves, store["out_tree"] = tree_flatten(out)
            for o in out_leaves:
                _check_leaf(o, f"The outputs of the jitted function {self.name}")
            return out_leaves

        with tracing_context() if tracing_context else contextlib.nullcontext():
            closed, _ = pe.trace_to_jaxpr(flat_fun, avals, dce=False)
        staged = StagedTrace(closed, store["out_tree"])
        # Constants that are tracers belong to this call only; don't keep them.
        if not any(isinstance(c, (Tracer, jax.core.Tracer)) for c in closed.consts):
            self._traces[key] = staged
        return staged, flat

    def _lower_and_run(self, *args, **kwargs):
        # Called by jax.jit while it traces: stage to impl's IR, then lower each equation.
        staged, flat = self.stage(args, kwargs, _avals_of_jax_values,
                                  lowering.staging_for_jax)
        outs = lowering.eval_jaxpr_lowered(staged.program.jaxpr, [],
                                           [*staged.consts, *flat])
        return tree_unflatten(staged.out_tree, outs)


def _tracing_config():
    """JAX's configuration that tracing depends on (the part of JAX's own trace-cache
    key), without the constant-folding flag impl itself sets while staging for jax.jit."""
    context = jax_config.trace_context()
    return tuple(v for i, v in enumerate(context) if i != _OWN_FLAG_INDEX)


def _own_flag_index():
    try:
        return jax_config.trace_context_names().index("eager_constant_folding")
    except (NotImplementedError, ValueError):
        return None


_OWN_FLAG_INDEX = _own_flag_index()


class StagedTrace:
    """One trace of a function: its program as written (what make_jaxpr shows), the
    program that runs (without the equations nothing uses, taking the constants as
    leading arguments: what a jit call binds) and the structure of its output."""

    __slots__ = ("closed", "out_tree", "_runnable")

    def __init__(self, closed, out_tree):
        self.closed = closed
        self.out_tree = out_tree
        self._runnable = None

    def _runnable_program(self):
        # Derived on the first call: make_jaxpr only shows the program as written.
        if self._runnable is None:
            live = core.ClosedJaxpr(pe.drop_unused_eqns(self.closed.jaxpr), self.closed.consts)
            self._runnable = pe.convert_constvars_to_invars(live)
        return self._runnable

    @property
    def program(self):
        return self._runnable_program()[0]

    @property
    def consts(self):
        return self._runnable_program()[1]


class _Traces(dict):
    """The traces of one function: {key: StagedTrace}; compared by identity."""
    __slots__ = ("__weakref__",)
    __hash__ = object.__hash__
    __eq__ = object.__eq__


# function -> its _Traces, weak on the function as JAX's trace cache is. A function that
# cannot be weakly referenced (or hashed) keeps its own. Staged functions hold their
# _Traces, so clearing empties each of them (the live ones are in `_all_traces`).
_traces = weakref.WeakKeyDictionary()   # jit's and make_jaxpr's
_all_traces = weakref.WeakSet()


@core.register_cache
def _clear_traces():
    for traces in list(_all_traces):
        traces.clear()


def new_trace_cache():
    """A table of traces by function (weak on the function)."""
    return weakref.WeakKeyDictionary()


def _traces_of(fun, table):
    try:
        traces = table.get(fun)
        if traces is None:
            traces = table[fun] = _Traces()
    except TypeError:
        traces = _Traces()
    _all_traces.add(traces)
    return traces


_trace_state = core._state
_eval_trace = core.eval_trace


class _JittedFunction(StagedFunction):
    """A function staged to the IR and compiled by XLA as one program.

    What `jit` returns is not this object but its `dispatcher`: a jax.jit C++ dispatch
    object of its own, so that a cached call outside impl's transformations runs no
    Python at all, as a call of JAX's jitted functions does. The dispatcher hands every
    call it cannot answer from its cache to `_cache_miss` (Python): a first call, a call
    while an impl transformation is active (`core.transforming` keys its cache), an impl
    tracer or an argument that is no array. That is where impl's staging and errors
    are."""

    def __init__(self, fun, static_argnums, static_argnames, inline=False, in_shardings=None,
                 out_shardings=None, **jax_jit_options):
        super().__init__(fun, static_argnums, static_argnames)
        # Options about the compiled executable (donation, devices, compiler flags,
        # shardings) are jax.jit's own: impl hands them over unchanged.
        shardings = {k: v for k, v in (("in_shardings", in_shardings),
                                       ("out_shardings", out_shardings)) if v is not None}
        def run(*args, **kwargs):
            # jax.jit only traces this (calls go to the dispatcher): lowering, compiling
            # and `lower` run impl's staging through it.
            return self._lower_and_run(*args, **kwargs)
        run.__name__ = run.__qualname__ = self.name   # JAX names the program after it
        self._compiled = jax.jit(run, static_argnums=static_argnums,
                                 static_argnames=static_argnames, inline=inline,
                                 **shardings, **jax_jit_options)
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings
        self.inline = inline
        self.dispatcher = self._make_dispatcher()

    def _make_dispatcher(self):
        # Under jax.disable_jit() the dispatcher calls the Python function, through a
        # wrapper of its own (whose __wrapped__ gives the dispatcher fun's signature).
        call_uncompiled = api_boundary(self.fun)
        # JAX's own resolution of the static arguments, as its dispatcher has them.
        jit_info = self._compiled._jit_info
        dispatcher = dispatch.dispatcher(self.fun, self.name, call_uncompiled,
                                         self._cache_miss, jit_info.static_argnums,
                                         jit_info.static_argnames)
        # Set after the wrapper copied fun.__dict__ (another jitted function has these).
        dispatcher.lower = self.lower
        dispatcher.trace = self.trace
        dispatcher.eval_shape = self.eval_shape
        dispatcher.clear_cache = self.clear_cache
        return dispatcher

    def __call__(self, *args, **kwargs):
        return self.dispatcher(*args, **kwargs)

    @boundary_method
    def _cache_miss(self, *args, **kwargs):
        """What the dispatcher calls for a call its cache has no executable for: the
        result, the executable for its cache (JAX's own, from jax.jit's cache miss) or
        None (calls like this one come back here), and whether to recompile."""
        __tracebackhide__ = True  # noqa: F841  (pytest and IPython hide this frame)
        try:
            if _trace_state.trace is not _eval_trace:
                return self._bind(args, kwargs), None, False
            try:
                return self._compiled._cache_miss(*args, **kwargs)
            except TypeError:
                for x in tree_util.tree_leaves((args, kwargs)):
                    if isinstance(x, Tracer):
                        raise core.escaped_tracer_error(x) from None
                self._raise_if_bad_argument(args, kwargs)
                raise
        except Exception as e:
            filter_at_boundary(e, sys._getframe())
            raise

    def _raise_if_bad_argument(self, args, kwargs):
        """A TypeError naming the user's function and the parameter (with the path inside
        it) of the first dynamic argument that is not an array or scalar."""
        dyn_args, dyn_kwargs, _ = self._split(args, kwargs)
        static = {i % len(args) for i in self.static_argnums if -len(args) <= i < len(args)}
        positions = [i for i in range(len(args)) if i not in static]
        names = _positional_names(self.fun) or []
        labelled = [(names[i] if i < len(names) else f"args[{i}]", a)
                    for i, a in zip(positions, dyn_args)] + list(dyn_kwargs.items())
        for label, value in labelled:
            for path, leaf in tree_util.tree_flatten_with_path(value)[0]:
                if not core.valid_jaxtype(leaf):
                    raise TypeError(
                        f"Error interpreting argument to {self.fun!r} as an abstract array. "
                        f"The problematic value is of type {type(leaf)} and was passed to "
                        f"the function at path {label}{tree_util.keystr(path)}. This "
                        "typically means that a jit-wrapped function was called with a "
                        "non-array argument, and this argument was not marked as static "
                        "using the static_argnums or static_argnames parameters of "
                        "jit.") from None

    def _bind(self, args, kwargs):
        if self.inline and self.in_shardings is None and self.out_shardings is None:
            return self.fun(*args, **kwargs)   # trace into the enclosing transformation
        try:
            staged, flat = self.stage(args, kwargs)
        except TypeError:
            self._raise_if_bad_argument(args, kwargs)
            raise
        outs = jit_p.bind(*staged.consts, *flat, jaxpr=staged.program, name=self.name,
                          in_shardings=(None,) * len(staged.consts) + self._flat_in_shardings(
                              args, kwargs, len(flat)),
                          out_shardings=self._flat_out_shardings(staged.out_tree))
        return tree_unflatten(staged.out_tree, outs)

    def _flat_in_shardings(self, args, kwargs, num_flat):
        """One sharding (or None) per dynamic argument leaf, from the in_shardings prefix
        of the positional arguments (as jax.jit reads it)."""
        if self.in_shardings is None:
            return (None,) * num_flat
        dyn_args, dyn_kwargs, _ = self._split(args, kwargs)
        if dyn_kwargs:
            raise ValueError(f"jit of {self.name} does not support keyword arguments when "
                             f"in_shardings is specified (got {sorted(dyn_kwargs)}); pass "
                             "them positionally")
        prefix = self.in_shardings
        prefix = tuple(prefix) if isinstance(prefix, list) else prefix
        flat = broadcast_prefix(prefix, tree_util.tree_structure(dyn_args),
                                "jit in_shardings (a prefix of the positional arguments)")
        return tuple(check_sharding_leaf(s, "jit in_shardings", allow_none=True)
                     for s in flat)

    def _flat_out_shardings(self, out_tree):
        if self.out_shardings is None:
            return (None,) * out_tree.num_leaves
        flat = broadcast_prefix(self.out_shardings, out_tree, "jit out_shardings")
        return tuple(check_sharding_leaf(s, "jit out_shardings", allow_none=True)
                     for s in flat)

    def lower(self, *args, **kwargs):
        return self._compiled.lower(*args, **kwargs)

    @boundary_method
    def trace(self, *args, **kwargs):
        """JAX's `jit(f).trace(*args, **kwargs)`: `f` staged for these arguments (from
        the cache when traced before), as a `Traced`."""
        staged, _ = self.stage(args, kwargs)
        return Traced(self, staged, args, kwargs)

    def eval_shape(self, *args, **kwargs):
        """JAX's `jit(f).eval_shape(*args, **kwargs)`: the shapes and dtypes of the
        result (`jax.ShapeDtypeStruct`s), without running anything."""
        return self.trace(*args, **kwargs).out_info

    def clear_cache(self):
        """Forget the executables and traces of this function, as JAX's
        `jit(f).clear_cache()` does: the next call traces it again."""
        self.dispatcher._clear_cache()
        self._compiled.clear_cache()
        self._traces.clear()


class Traced:
    """What JAX's `jit(f).trace(...)` returns: the program as written (`jaxpr`, what
    make_jaxpr shows), its output types (`out_info`), and `lower()` of the same call."""

    __slots__ = ("_jitted", "_staged", "_args", "_kwargs")

    def __init__(self, jitted, staged, args, kwargs):
        self._jitted, self._staged = jitted, staged
        self._args, self._kwargs = args, kwargs

    jaxpr = property(lambda self: self._staged.closed)
    out_tree = property(lambda self: self._staged.out_tree)
    fun_name = property(lambda self: self._jitted.name)

    @property
    def out_avals(self):
        return tree_unflatten(self.out_tree, self.jaxpr.out_avals)

    @property
    def out_info(self):
        return tree_unflatten(self.out_tree,
                              [a.to_shape_dtype() for a in self.jaxpr.out_avals])

    def lower(self):
        return self._jitted.lower(*self._args, **self._kwargs)

    def __call__(self, *args, **kwargs):
        return self._jitted(*args, **kwargs)


def _positional_names(fun):
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _index_tuple(x):
    try:
        return (operator.index(x),)
    except TypeError:
        return tuple(map(operator.index, x))


def _str_tuple(x):
    names = (x,) if isinstance(x, str) else tuple(x)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"argument is not a string: {n}")
    return names


def _argnums_and_names(params, argnums, argnames, what):
    """Both spellings of a set of arguments (static or donated), the missing one
    inferred from the signature `params` when only one is given, as jax.jit does;
    each checked against the signature (ValueError naming `what`)."""
    if argnums is None and argnames is None:
        return (), ()
    nums = None if argnums is None else _index_tuple(argnums)
    names = None if argnames is None else _str_tuple(argnames)
    if params is None:   # no signature (some builtins): nothing to infer or check
        return nums or (), names or ()
    either = [(i, p.name) for i, p in enumerate(params) if p.kind is p.POSITIONAL_OR_KEYWORD]
    if names is None:
        names = tuple(n for i, n in either if i in nums)
    elif nums is None:
        nums = tuple(i for i, n in either if n in names)
    if not any(p.kind is p.VAR_POSITIONAL for p in params):
        npos = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        if nums and (-min(nums) > npos or max(nums) >= npos):
            raise ValueError(f"Jitted function has {what}_argnums={nums}, but only accepts "
                             f"{npos} positional arguments.")
    positional_only = {p.name for p in params
                       if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL)}
    if bad := positional_only & set(names):
        raise ValueError(f"Jitted function has invalid argnames {bad} in {what}_argnames. "
                         "These are positional-only")
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        keywords = {p.name for p in params
                    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if bad := set(names) - keywords:
            raise ValueError(f"Jitted function has invalid argnames {bad} in "
                             f"{what}_argnames. Function does not take these args.")
    return nums, names


def _both_spellings(params, nums, names):
    """`nums` with the positions of `names`, `names` with the names of `nums`."""
    if params is None:
        return nums, names
    positional = [p.name for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    all_nums = set(nums) | {positional.index(n) for n in names if n in positional}
    all_names = set(names) | {positional[i] for i in nums
                              if 0 <= i < len(positional) and positional[i] in by_name}
    return tuple(sorted(all_nums)), tuple(sorted(all_names))


def _signature_params(fun):
    try:
        return list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return None


def _check_callable(fun):
    if isinstance(fun, staticmethod):
        raise TypeError(f"staticmethod arguments are not supported, got {fun}")
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun}")
    if inspect.isgeneratorfunction(fun):
        raise TypeError(f"Expected a function, got a generator function: {fun}")


def jit(fun: Callable | None = None, /, *, static_argnums=None, static_argnames=None,
        donate_argnums=None, donate_argnames=None, keep_unused=False, device=None,
        backend=None, inline=False, compiler_options=None, in_shardings=None,
        out_shardings=None):
    """Stage `fun` to impl's IR and compile the whole program with XLA (via jax.jit).

    Donation, `keep_unused`, `device`, `backend` and `compiler_options` are options of
    the compiled executable and behave as in jax.jit; `inline=True` traces `fun` into
    an enclosing transformation instead of calling it as one staged program.
    `in_shardings`/`out_shardings` (jax.sharding objects, pytree prefixes of the
    positional arguments and of the result, None for unspecified) go to XLA's SPMD
    partitioner, also when the call is differentiated or vmapped."""
    options = dict(in_shardings=in_shardings, out_shardings=out_shardings,
                   static_argnums=static_argnums, static_argnames=static_argnames,
                   donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                   keep_unused=keep_unused, device=device, backend=backend, inline=inline,
                   compiler_options=compiler_options)
    if fun is None:
        return lambda f: jit(f, **options)
    _check_callable(fun)
    params = _signature_params(fun)
    if params is None and donate_argnames is not None:
        raise ValueError(f"Getting the signature of function {fun} failed. Pass "
                         "donate_argnums instead of donate_argnames.")
    nums, names = _argnums_and_names(params, static_argnums, static_argnames, "static")
    donate_nums, donate_names = _argnums_and_names(params, donate_argnums, donate_argnames,
                                                   "donate")
    if both := set(names) & set(donate_names):
        raise ValueError("static_argnames and donate_argnames cannot intersect. Argument "
                         f"names {both} appear in both static_argnames and "
                         "donate_argnames")
    # The compiled program is a function of (*args, **kwargs): it knows arguments by
    # position or by keyword only, so each set is given both ways.
    nums, names = _both_spellings(params, nums, names)
    donate_nums, _ = _both_spellings(params, donate_nums, donate_names)
    executable_options = dict(keep_unused=keep_unused, compiler_options=compiler_options)
    if donate_nums:
        executable_options["donate_argnums"] = donate_nums
    if device is not None:
        executable_options["device"] = device
    if backend is not None:
        executable_options["backend"] = backend
    return _JittedFunction(fun, nums, names, inline=inline, in_shardings=in_shardings,
                           out_shardings=out_shardings, **executable_options).dispatcher


# ------------------------------------------------------------------ make_jaxpr

def make_jaxpr(fun: Callable, static_argnums=(), axis_env=None, return_shape: bool = False):
    """A function returning the IR program of `fun` for the given arguments.

    `axis_env`, a sequence of (axis name, size) pairs, binds those names while staging,
    so collectives over them appear in the program as equations."""
    _check_callable(fun)
    frames = _axis_env_frames(axis_env)
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)

    @api_boundary
    @functools.wraps(fun)
    def make(*args, **kwargs):
        with batching.extend_axis_env(frames):
            staged, _ = StagedFunction(fun, tuple(static_argnums), ()).stage(args, kwargs)
        closed, out_tree = staged.closed, staged.out_tree
        if return_shape:
            shapes = [a.to_shape_dtype() for a in closed.out_avals]
            return closed, tree_unflatten(out_tree, shapes)
        return closed

    return make


def _axis_env_frames(axis_env):
    if axis_env is None:
        return []
    frames = []
    for entry in axis_env:
        try:
            name, size = entry
            size = int(size)
        except (TypeError, ValueError):
            raise TypeError(f"make_jaxpr: axis_env must be a sequence of (axis name, size) "
                            f"pairs, got the entry {entry!r}") from None
        if size < 1:
            raise ValueError(f"make_jaxpr: axis_env gives the axis {name!r} size {size}; "
                             "sizes must be positive")
        frames.append((name, size))
    return frames


@api_boundary
def eval_shape(fun, *args, **kwargs):
    closed, out = make_jaxpr(fun, return_shape=True)(*args, **kwargs)
    return out
