"""Deliberately broken backends: wrappers around a real backend.

Each break changes one transformation in a way some law must catch; the
negative tests (suites/test_negative.py) run the law against the wrapper
and require an AssertionError.  ``loop_vmap`` is the exception: a *correct*
vmap written as a Python loop, so that laws JAX cannot run (it has no
batching rule for linear_call) still get a positive and a negative test.
"""
from __future__ import annotations

import jax
import numpy as np

from .backends import Backend, load_backend

tree_map = jax.tree_util.tree_map
tree_leaves = jax.tree_util.tree_leaves


class Wrapped(Backend):
    """``base`` with some API names replaced."""

    def __init__(self, base, label, overrides):
        super().__init__(f"{base.name}+{label}", base.module)
        self._base = base
        self._overrides = dict(overrides)

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        if attr in self._overrides:
            return self._overrides[attr]
        return getattr(self._base, attr)


def _drop_last(x):
    """x with the last element (in flattened order) multiplied by zero."""
    shape = np.shape(x)
    mask = np.ones(shape, dtype=getattr(x, "dtype", None))
    if mask.size:
        mask.reshape(-1)[-1] = 0
    return x * mask


def _drop_last_of_tuple(t):
    """Drop a term from the last entry of a tuple of arrays (or from an array)."""
    if isinstance(t, (tuple, list)):
        return type(t)(list(t[:-1]) + [_drop_last(t[-1])]) if t else t
    return _drop_last(t)


def _is_traced(tree):
    return any(isinstance(x, jax.core.Tracer) for x in tree_leaves(tree))


# --- the breaks ---------------------------------------------------------------

def vmap_slice0(base):
    """vmap gives every batch element the result of batch element 0."""
    np_ = base.numpy

    def vmap(f, in_axes=0, out_axes=0, **kw):
        vf = base.vmap(f, in_axes=in_axes, out_axes=out_axes, **kw)
        if not isinstance(out_axes, int):
            return vf

        def first_everywhere(o):
            ax = out_axes % np_.ndim(o)
            first = np_.take(o, np.array([0]), axis=ax)
            return np_.repeat(first, o.shape[ax], axis=ax)

        def g(*args):
            return tree_map(first_everywhere, vf(*args))
        return g
    return {"vmap": vmap}


def jit_perturb(base):
    """jit's top-level results are off by about 1e-3 (relative)."""
    def jit(f, **kw):
        jf = base.jit(f, **kw)

        def g(*args, **kwargs):
            out = jf(*args, **kwargs)
            if _is_traced((args, kwargs)):
                return out
            return tree_map(lambda o: o * (1 + 1e-3) + 1e-3, out)
        return g
    return {"jit": jit}


def forward_drops_term(base):
    """jvp ignores the last element of the last tangent."""
    def jvp(f, primals, tangents, **kw):
        return base.jvp(f, primals, _drop_last_of_tuple(tuple(tangents)), **kw)
    return {"jvp": jvp}


def jvp_scaled(base):
    """jvp returns 1.01 times the true tangent (the primal output is right): consistent
    with itself, so only a reference outside jvp (finite differences of a jvp) shows it."""
    def jvp(f, primals, tangents, **kw):
        out = base.jvp(f, primals, tangents, **kw)
        return (out[0], tree_map(lambda t: t * 1.01, out[1])) + tuple(out[2:])
    return {"jvp": jvp}


def linearize_stale(base):
    """linearize returns the right value but linearizes at a shifted point."""
    def linearize(f, *primals):
        y, _ = base.linearize(f, *primals)
        shifted = tuple(np.asarray(p) + np.asarray(0.1, np.asarray(p).dtype) for p in primals)
        _, f_lin = base.linearize(f, *shifted)
        return y, f_lin
    return {"linearize": linearize}


def vjp_jv(base):
    """vjp's pullback returns J v (v resized to the inputs) instead of J^T v."""
    def vjp(f, *primals, **kw):
        y, _ = base.vjp(f, *primals, **kw)

        def pullback(ct):
            flat = np.ravel(np.asarray(ct))
            tangents = tuple(np.resize(flat, np.shape(p)).astype(np.asarray(p).dtype)
                             for p in primals)
            jv = np.ravel(np.asarray(base.jvp(f, primals, tangents)[1]))
            return tuple(np.resize(jv, np.shape(p)).astype(np.asarray(p).dtype)
                         for p in primals)
        return y, pullback
    return {"vjp": vjp}


def reverse_drops_term(base):
    """Reverse mode (vjp, grad, jacrev, hessian) drops the derivative with
    respect to the last element of the last input."""
    def vjp(f, *primals, **kw):
        y, pb = base.vjp(f, *primals, **kw)
        return y, lambda ct: _drop_last_of_tuple(pb(ct))

    def grad(f, argnums=0, **kw):
        g = base.grad(f, argnums=argnums, **kw)
        return lambda *a: _drop_last_of_tuple(g(*a))

    def jacrev(f, argnums=0, **kw):
        j = base.jacrev(f, argnums=argnums, **kw)

        def broken(*args):
            idx = argnums if isinstance(argnums, tuple) else (argnums,)
            mask = np.ones(np.shape(args[idx[-1]]))
            if mask.size:
                mask.reshape(-1)[-1] = 0
            out = j(*args)
            if isinstance(out, tuple):
                return out[:-1] + (out[-1] * mask,)
            return out * mask
        return broken

    def hessian(f, argnums=0, **kw):
        return base.jacfwd(jacrev(f, argnums=argnums), argnums=argnums)
    return {"vjp": vjp, "grad": grad, "jacrev": jacrev, "hessian": hessian}


def grad_scaled(base):
    """grad and value_and_grad return 1.001 times the true gradient (the value is right)."""
    def scaled(tree):
        return tree_map(lambda t: t * 1.001, tree)

    def grad(f, argnums=0, has_aux=False, **kw):
        g = base.grad(f, argnums=argnums, has_aux=has_aux, **kw)

        def broken(*a, **k):
            out = g(*a, **k)
            return (scaled(out[0]), out[1]) if has_aux else scaled(out)
        return broken

    def value_and_grad(f, argnums=0, has_aux=False, **kw):
        vg = base.value_and_grad(f, argnums=argnums, has_aux=has_aux, **kw)
        return lambda *a, **k: (lambda out: (out[0], scaled(out[1])))(vg(*a, **k))
    return {"grad": grad, "value_and_grad": value_and_grad}


def _block_transposed(np_, block, x):
    """A Jacobian block J (out_shape + x.shape) replaced by J^T laid out in J's shape."""
    n = int(np.size(x))
    m = int(np.size(block)) // max(n, 1)
    return np_.reshape(np_.transpose(np_.reshape(block, (m, n))), np.shape(block))


def jacrev_transposed(base):
    """jacrev returns the transposed Jacobian (J^T laid out in J's shape)."""
    def jacrev(f, argnums=0, **kw):
        j = base.jacrev(f, argnums=argnums, **kw)

        def broken(*args):
            out = j(*args)
            if isinstance(argnums, (tuple, list)):
                return tuple(_block_transposed(base.numpy, b, args[i])
                             for b, i in zip(out, argnums))
            return _block_transposed(base.numpy, out, args[argnums])
        return broken
    return {"jacrev": jacrev}


def hessian_drops_term(base):
    """hessian (only) drops the derivative with respect to the last input element."""
    return {"hessian": reverse_drops_term(base)["hessian"]}


def transpose_drops_term(base):
    """linear_transpose drops the last element of the last cotangent."""
    def linear_transpose(f, *primals, **kw):
        T = base.linear_transpose(f, *primals, **kw)
        return lambda *cts: _drop_last_of_tuple(T(*cts))
    return {"linear_transpose": linear_transpose}


class _IgnoredRule:
    """A custom_jvp/custom_vjp that accepts rules and never uses them."""

    def __init__(self, fun, **kw):
        self.fun = fun

    def __call__(self, *args, **kwargs):
        return self.fun(*args, **kwargs)

    def defjvp(self, rule, **kw):
        return rule

    def defjvps(self, *rules):
        return None

    def defvjp(self, fwd, bwd, **kw):
        return None


def ignore_custom_rules(base):
    """custom_jvp, custom_vjp and custom_gradient ignore the user's rule."""
    def custom_gradient(f):
        return lambda *a, **k: f(*a, **k)[0]
    return {"custom_jvp": _IgnoredRule, "custom_vjp": _IgnoredRule,
            "custom_gradient": custom_gradient}


class _Scaled:
    """A numpy/lax namespace whose float results are scaled by ``factor``."""

    UNTOUCHED = {"asarray", "array", "shape", "ndim", "size", "dtype", "result_type",
                 "finfo", "iinfo", "issubdtype", "zeros", "ones", "zeros_like", "ones_like",
                 "full", "full_like", "arange", "eye"}

    def __init__(self, namespace, factor):
        self._ns, self._factor = namespace, factor

    def __getattr__(self, name):
        value = getattr(self._ns, name)
        if (not callable(value) or name in self.UNTOUCHED or isinstance(value, type)
                or name.startswith(("float", "int", "uint", "bool", "complex"))):
            return value

        def scaled(*args, **kwargs):
            out = value(*args, **kwargs)
            return tree_map(lambda o: o * self._factor if getattr(getattr(o, "dtype", None),
                                                                  "kind", "") == "f" else o, out)
        return scaled


def numpy_perturbed(base):
    """Every numpy/lax function's float result is off by 1% (a wrong primitive)."""
    return {"numpy": _Scaled(base.numpy, 1.01), "lax": _Scaled(base.lax, 1.01)}


class _Patched:
    """A numpy/lax namespace with some functions replaced."""

    def __init__(self, namespace, replacements):
        self._ns, self._replacements = namespace, dict(replacements)

    def __getattr__(self, name):
        if name in self._replacements:
            return self._replacements[name]
        return getattr(self._ns, name)


def control_flow_wrong(base):
    """Control flow means something else: scan ignores reverse, fori_loop and
    while_loop run one step too few, cond swaps its branches, switch wraps the
    index around instead of clamping it, map visits the elements backwards."""
    lax = base.lax
    np_ = base.numpy

    def scan(f, init, xs=None, length=None, reverse=False, unroll=1, **kw):
        return lax.scan(f, init, xs, length=length, unroll=unroll, **kw)

    def fori_loop(lower, upper, body, init, **kw):
        return lax.fori_loop(lower, upper - 1 if upper > lower else upper, body, init, **kw)

    def while_loop(cond_fun, body_fun, init):  # stops while one more step would still run
        return lax.while_loop(lambda s: cond_fun(body_fun(s)), body_fun, init)

    def cond(pred, true_fun, false_fun, *operands, **kw):
        return lax.cond(pred, false_fun, true_fun, *operands, **kw)

    def switch(index, branches, *operands, **kw):
        return lax.switch(np_.mod(index, len(branches)), branches, *operands, **kw)

    def map_(f, xs, **kw):  # results come back in reverse order
        return lax.map(f, tree_map(lambda x: np_.flip(x, 0), xs), **kw)

    return {"lax": _Patched(lax, {"scan": scan, "fori_loop": fori_loop, "while_loop": while_loop,
                                  "cond": cond, "switch": switch, "map": map_})}


def _damped(base, tree):
    """tree with derivatives through its float leaves scaled by 0.99 (values unchanged)."""
    lax, np_ = base.lax, base.numpy

    def damp(x):
        if not np_.issubdtype(np_.result_type(x), np_.floating):
            return x
        return x * 0.99 + lax.stop_gradient(x * 0.01)
    return tree_map(damp, tree)


def control_flow_derivative_damped(base):
    """Derivatives through every control-flow body are 0.99 times the true ones
    (each body sees its carry and operands through x*0.99 + stop_gradient(x*0.01))."""
    lax = base.lax

    def scan(f, init, xs=None, **kw):
        return lax.scan(lambda c, x: f(_damped(base, c), x), init, xs, **kw)

    def fori_loop(lower, upper, body, init, **kw):
        return lax.fori_loop(lower, upper, lambda i, c: body(i, _damped(base, c)), init, **kw)

    def while_loop(cond_fun, body_fun, init):
        return lax.while_loop(cond_fun, lambda s: body_fun(_damped(base, s)), init)

    def cond(pred, true_fun, false_fun, *operands, **kw):
        return lax.cond(pred, lambda *o: true_fun(*_damped(base, o)),
                        lambda *o: false_fun(*_damped(base, o)), *operands, **kw)

    def switch(index, branches, *operands, **kw):
        return lax.switch(index, [lambda *o, b=b: b(*_damped(base, o)) for b in branches],
                          *operands, **kw)

    def map_(f, xs, **kw):
        return lax.map(lambda x: f(_damped(base, x)), xs, **kw)

    return {"lax": _Patched(lax, {"scan": scan, "fori_loop": fori_loop, "while_loop": while_loop,
                                  "cond": cond, "switch": switch, "map": map_})}


def collectives_wrong(base):
    """Collectives mean something else: psum averages, ppermute applies the
    inverse permutation, axis_index counts from 1, all_gather stacks the
    members in reverse order."""
    lax, np_ = base.lax, base.numpy

    def ppermute(x, axis_name, perm):
        return lax.ppermute(x, axis_name, [(dst, src) for src, dst in perm])

    def all_gather(x, axis_name, *, axis=0, tiled=False, **kw):
        out = lax.all_gather(x, axis_name, axis=axis, tiled=tiled, **kw)
        return out if tiled else np_.flip(out, axis)

    return {"lax": _Patched(lax, {
        "psum": lax.pmean, "ppermute": ppermute, "all_gather": all_gather,
        "axis_index": lambda axis_name: lax.axis_index(axis_name) + 1})}


_COLLECTIVE_NAMES = ("psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "all_to_all",
                     "ppermute")


def collectives_derivative_damped(base):
    """Derivatives through every collective are 0.99 times the true ones (values unchanged)."""
    lax = base.lax

    def damped(name):
        fn = getattr(lax, name)
        return lambda x, *a, **k: fn(_damped(base, x), *a, **k)
    return {"lax": _Patched(lax, {n: damped(n) for n in _COLLECTIVE_NAMES if hasattr(lax, n)})}


def collectives_transpose_wrong(base):
    """Reverse mode through collectives is wrong, forward mode right: the
    transpose of ppermute permutes forward again (not by the inverse), the
    transpose of psum forgets to sum the cotangents."""
    lax = base.lax

    def with_bwd(fn, bwd):
        @base.custom_vjp
        def f(x):
            return fn(x)
        f.defvjp(lambda x: (fn(x), None), lambda _, g: (bwd(g),))
        return f

    def ppermute(x, axis_name, perm):
        return with_bwd(lambda v: lax.ppermute(v, axis_name, perm),
                        lambda g: lax.ppermute(g, axis_name, perm))(x)

    def psum(x, axis_name, **kw):
        return with_bwd(lambda v: lax.psum(v, axis_name, **kw), lambda g: g)(x)
    return {"lax": _Patched(lax, {"ppermute": ppermute, "psum": psum})}


def extrema_by_gather(base):
    """A *correct* pmax/pmin that JAX can differentiate under vmap: the max
    (min) of all_gather over the axis (single axis names only)."""
    lax, np_ = base.lax, base.numpy
    return {"lax": _Patched(lax, {
        "pmax": lambda x, axis_name: np_.max(lax.all_gather(x, axis_name), axis=0),
        "pmin": lambda x, axis_name: np_.min(lax.all_gather(x, axis_name), axis=0)})}


def checkpoint_damped(base):
    """checkpoint(f) computes f but its derivatives are 0.99 times f's."""
    def checkpoint(fun, **kw):
        return base.checkpoint(lambda *a: fun(*_damped(base, a)), **kw)
    return {"checkpoint": checkpoint, "remat": checkpoint}


def _arg_axes(in_axes, args):
    axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    if len(axes) != len(args):
        raise ValueError(f"in_axes {in_axes!r} does not match {len(args)} arguments")
    return axes


def chunked_vmap(base, reorder=False):
    """A *correct* vmap(..., chunk_size=k) (JAX has none): vmap each chunk of k
    examples and concatenate the results along out_axes."""
    np_ = base.numpy

    def vmap(f, in_axes=0, out_axes=0, chunk_size=None, **kw):
        plain = base.vmap(f, in_axes=in_axes, out_axes=out_axes, **kw)
        if chunk_size is None:
            return plain

        def g(*args):
            axes = _arg_axes(in_axes, args)
            n = {np_.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None}.pop()
            outs = []
            for start in range(0, n, chunk_size):
                idx = np.arange(start, min(n, start + chunk_size))
                outs.append(plain(*[a if ax is None else np_.take(a, idx, axis=ax)
                                    for a, ax in zip(args, axes)]))
            if reorder:
                outs = outs[::-1]
            return tree_map(lambda *o: np_.concatenate(o, axis=out_axes), *outs)
        return g
    return {"vmap": vmap}


def chunks_reordered(base):
    """Chunked vmap concatenates its chunks in reverse order."""
    return chunked_vmap(base._base if isinstance(base, Wrapped) else base, reorder=True)


def _mapped_over(x, names):
    """Whether ``x`` varies over one of the vmapped axes ``names``. JAX has no public
    query for it; its batching tracers say which axis they carry."""
    from jax._src.interpreters import batching
    return (isinstance(x, batching.BatchTracer) and x.batch_dim is not None
            and x._trace.axis_data.name in names)


def reduce_axes_by_psum(base, reduce=None):
    """A *correct* grad/value_and_grad(..., reduce_axes=names) (JAX has none): the
    gradient of an argument that does not vary over the named axes is summed over them
    with psum; a varying argument's gradient stays per example."""
    reduce = reduce or base.lax.psum

    def wrap(make, pick):
        def transform(f, argnums=0, has_aux=False, reduce_axes=(), **kw):
            inner = make(f, argnums=argnums, has_aux=has_aux, **kw)
            if not reduce_axes:
                return inner
            names = tuple(reduce_axes)

            def summed(args, grads):
                if isinstance(argnums, int):
                    return summed_one(args[argnums], grads)
                return tuple(summed_one(args[i], g) for i, g in zip(argnums, grads))

            def summed_one(arg, grad):
                return tree_map(lambda a, t: t if _mapped_over(a, names) else reduce(t, names),
                                arg, grad)
            return lambda *a, **k: pick(inner(*a, **k), lambda g: summed(a, g))
        return transform
    return {"grad": wrap(base.grad, lambda out, red: red(out)),
            "value_and_grad": wrap(base.value_and_grad, lambda out, red: (out[0], red(out[1])))}


def reduce_axes_mean(base):
    """grad with reduce_axes averages the per-example gradients instead of summing them."""
    root = base._base if isinstance(base, Wrapped) else base
    return reduce_axes_by_psum(root, reduce=root.lax.pmean)


@jax.tree_util.register_pytree_node_class
class _LoopPile:
    """A pile emulated as a list of arrays (a pytree, so jit takes it)."""

    def __init__(self, arrays):
        self.arrays = list(arrays)

    def unpile(self):
        return list(self.arrays)

    def tree_flatten(self):
        return self.arrays, None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children)


PILE_AXIS = object()


def piles_by_loop(base, shift=0):
    """A *correct* ragged pile (JAX has none): pile() keeps the list, and vmap
    over pile_axis loops over it (out_axes pile_axis gives a pile back)."""
    np_ = base.numpy

    def vmap(f, in_axes=0, out_axes=0, axis_size=None, **kw):
        if in_axes is not PILE_AXIS:
            return base.vmap(f, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size, **kw)

        def g(p):
            xs = p.arrays[shift:] + p.arrays[:shift]
            outs = [f(x) for x in xs]
            return _LoopPile(outs) if out_axes is PILE_AXIS else np_.stack(outs, axis=out_axes)
        return g
    return {"vmap": vmap, "pile": lambda arrays, axis=0: _LoopPile(arrays), "pile_axis": PILE_AXIS}


def piles_shifted(base):
    """vmap over a pile gives element i the function of element i+1."""
    root = base._base if isinstance(base, Wrapped) else base
    return piles_by_loop(root, shift=1)


class _PerturbedPrimal:
    def __init__(self, value):
        self.value, self.perturbed = value, True


def materialized_symbolic_zeros(base):
    """symbolic_zeros=True is accepted but ignored: custom_jvp rules get
    materialised zero tangents, custom_vjp fwd sees every primal perturbed."""
    def custom_jvp(fun, **kw):
        f = base.custom_jvp(fun, **kw)
        plain_defjvp = f.defjvp

        def defjvp(rule, symbolic_zeros=False):
            return plain_defjvp(rule)
        f.defjvp = defjvp
        return f

    def custom_vjp(fun, **kw):
        f = base.custom_vjp(fun, **kw)
        plain_defvjp = f.defvjp

        def defvjp(fwd, bwd, symbolic_zeros=False, **kw2):
            if symbolic_zeros:
                return plain_defvjp(lambda *xs: fwd(*[_PerturbedPrimal(x) for x in xs]), bwd, **kw2)
            return plain_defvjp(fwd, bwd, **kw2)
        f.defvjp = defvjp
        return f
    return {"custom_jvp": custom_jvp, "custom_vjp": custom_vjp}


def jit_drops_shardings(base):
    """jit ignores in_shardings/out_shardings and with_sharding_constraint is
    the identity: values stay right, results do not carry the requested sharding."""
    def jit(f, in_shardings=None, out_shardings=None, **kw):
        return base.jit(f, **kw)
    return {"jit": jit, "lax": _Patched(base.lax, {"with_sharding_constraint": lambda x, s: x})}


def reshard_ignored(base):
    """reshard returns its operand: values stay right, types keep the operand's sharding."""
    return {"sharding": _Patched(base.sharding, {"reshard": lambda x, out_sharding: x})}


def out_sharding_ignored(base):
    """jnp.dot, matmul, einsum and lax.dot_general accept out_sharding= and ignore it:
    values stay right, results are typed by the operands (or refused, where only
    out_sharding= says how a sharded contraction is split)."""
    def dropping(fn):
        def call(*args, out_sharding=None, **kw):
            return fn(*args, **kw)
        return call
    np_, lax = base.numpy, base.lax
    return {"numpy": _Patched(np_, {n: dropping(getattr(np_, n)) for n in ("dot", "matmul", "einsum")}),
            "lax": _Patched(lax, {"dot_general": dropping(lax.dot_general)})}


def spmd_axis_name_ignored(base):
    """vmap accepts spmd_axis_name and ignores it."""
    def vmap(f, in_axes=0, out_axes=0, spmd_axis_name=None, **kw):
        return base.vmap(f, in_axes=in_axes, out_axes=out_axes, **kw)
    return {"vmap": vmap}


def loop_vmap(base):
    """A *correct* vmap: loop over the batch and stack (slow, but it needs no
    batching rules, so it can batch what the base cannot, e.g. linear_call)."""
    np_ = base.numpy

    def vmap(f, in_axes=0, out_axes=0, axis_size=None, **kw):
        def g(*args):
            axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
            if len(axes) != len(args):
                raise ValueError(f"in_axes {in_axes!r} does not match {len(args)} arguments")
            sizes = {np_.shape(leaf)[ax] for a, ax in zip(args, axes) if ax is not None
                     for leaf in tree_leaves(a)}
            if len(sizes) > 1:
                raise ValueError(f"inconsistent batch sizes {sizes}")
            n = sizes.pop() if sizes else axis_size
            if n is None:
                raise ValueError("vmap needs a batched argument or axis_size")
            outs = [f(*[a if ax is None else tree_map(lambda l: np_.take(l, i, axis=ax), a)
                        for a, ax in zip(args, axes)]) for i in range(n)]
            return tree_map(lambda *xs: np_.stack(xs, axis=out_axes), *outs)
        return g
    return {"vmap": vmap}


class _ForwardModeCustomVJP:
    """custom_vjp with forward mode, as impl does it: a custom_jvp whose tangent is the
    transpose of ``ct -> bwd(res, ct)`` (so bwd must be linear in ct)."""

    def __init__(self, base, fun, **kw):
        self.base, self.fun, self.kw, self.rule = base, fun, kw, None

    def defvjp(self, fwd, bwd, **kw):
        b = self.base
        f = b.custom_jvp(self.fun, **self.kw)

        def rule(primals, tangents):
            out, res = fwd(*primals)
            (t_out,) = b.linear_transpose(lambda ct: bwd(res, ct), out)(tuple(tangents))
            return out, t_out
        f.defjvp(rule)
        self.rule = f

    def __call__(self, *args):
        if self.rule is None:
            raise TypeError("custom_vjp function called before defvjp")
        return self.rule(*args)


def custom_vjp_by_transposed_bwd(base):
    """A *correct* forward mode for custom_vjp (which JAX refuses): the tangent is
    bwd transposed in the output cotangent."""
    return {"custom_vjp": lambda fun, **kw: _ForwardModeCustomVJP(base, fun, **kw)}


def custom_vjp_residuals_constant(base):
    """custom_vjp's fwd residuals are cut from differentiation (stop_gradient):
    first derivatives stay right, second derivatives through bwd lose the terms
    that come from the residuals' dependence on the inputs."""
    def custom_vjp(fun, **kw):
        f = base.custom_vjp(fun, **kw)
        plain_defvjp = f.defvjp

        def defvjp(fwd, bwd, **kw2):
            def cut(*xs):
                out, res = fwd(*xs)
                return out, tree_map(base.lax.stop_gradient, res)
            return plain_defvjp(cut, bwd, **kw2)
        f.defvjp = defvjp
        return f
    return {"custom_vjp": custom_vjp}


# --- behaviour breaks: the numbers stay right, what a user sees besides them does not

def _strongly_typed(base, tree):
    """``tree`` with weakly typed leaves cast to their own dtype: strongly typed."""
    np_ = base.numpy
    return tree_map(lambda o: np_.asarray(o, dtype=o.dtype) if hasattr(o, "dtype") else o, tree)


def grad_strong_types(base):
    """grad and value_and_grad return strongly typed results where JAX's are weakly typed."""
    def grad(f, *a, **kw):
        g = base.grad(f, *a, **kw)
        return lambda *args, **kwargs: _strongly_typed(base, g(*args, **kwargs))

    def value_and_grad(f, *a, **kw):
        vg = base.value_and_grad(f, *a, **kw)
        return lambda *args, **kwargs: _strongly_typed(base, vg(*args, **kwargs))
    return {"grad": grad, "value_and_grad": value_and_grad}


def jit_strong_types(base):
    """jit returns strongly typed results where JAX's are weakly typed."""
    def jit(f, *a, **kw):
        jf = base.jit(f, *a, **kw)
        return lambda *args, **kwargs: _strongly_typed(base, jf(*args, **kwargs))
    return {"jit": jit}


def calling_first(transformation):
    """``transformation`` (of a function, returning a function) whose result calls the user's
    function once more, before running."""
    def transform(f, *a, **kw):
        g = transformation(f, *a, **kw)

        def run(*args, **kwargs):
            f(*args, **kwargs)
            return g(*args, **kwargs)
        return run
    return transform


def extra_calls(base):
    """grad and value_and_grad run the user's function once more than JAX does (a primal
    evaluation before differentiating)."""
    return {"grad": calling_first(base.grad), "value_and_grad": calling_first(base.value_and_grad)}


def jit_retraces(base):
    """jit never reuses a trace: every call traces the function again."""
    def jit(f, *a, **kw):
        return lambda *args, **kwargs: base.jit(lambda *x, **k: f(*x, **k), *a, **kw)(
            *args, **kwargs)
    return {"jit": jit}


def _type_error_as_value_error(transformation):
    def transform(*a, **kw):
        t = transformation(*a, **kw)

        def run(*args, **kwargs):
            try:
                return t(*args, **kwargs)
            except TypeError as exc:
                raise ValueError(str(exc)) from exc
        return run
    return transform


def exceptions_changed(base):
    """grad, jit and vmap raise ValueError where JAX raises TypeError."""
    return {name: _type_error_as_value_error(getattr(base, name)) for name in ("grad", "jit", "vmap")}


def vjp_not_pytree(base):
    """vjp's function and linearize's jvp function are plain closures, not pytrees."""
    def vjp(f, *primals, **kw):
        out = base.vjp(f, *primals, **kw)
        return (out[0], lambda *ct: out[1](*ct)) + tuple(out[2:])

    def linearize(f, *primals, **kw):
        out = base.linearize(f, *primals, **kw)
        return (out[0], lambda *t: out[1](*t)) + tuple(out[2:])
    return {"vjp": vjp, "linearize": linearize}


def _rule_calls_primal(base, kind, define, primals_of):
    """``kind`` (custom_jvp/custom_vjp) whose rule given to ``define`` (defjvp/defvjp) also
    calls the primal function, on the primal arguments ``primals_of(rule's arguments)``."""
    def make(fun, *a, **kw):
        f = getattr(base, kind)(fun, *a, **kw)
        plain_define = getattr(f, define)

        def define_rule(rule, *rest, **kw2):
            def rule_and_primal(*args):
                fun(*primals_of(args))
                return rule(*args)
            return plain_define(rule_and_primal, *rest, **kw2)
        setattr(f, define, define_rule)
        return f
    return {kind: make}


def custom_jvp_calls_primal(base):
    """A custom_jvp function evaluates its primal function as well as its rule under jvp."""
    return _rule_calls_primal(base, "custom_jvp", "defjvp", lambda args: args[0])


def custom_vjp_calls_primal(base):
    """A custom_vjp function evaluates its primal function as well as fwd under grad."""
    return _rule_calls_primal(base, "custom_vjp", "defvjp", lambda args: args)


def jit_rejects_python_scalars(base):
    """jit raises TypeError on a Python scalar argument (a crash on a valid program)."""
    def jit(f, *a, **kw):
        jf = base.jit(f, *a, **kw)

        def run(*args, **kwargs):
            if any(isinstance(x, (int, float, complex)) for x in tree_leaves((args, kwargs))):
                raise TypeError("jit_rejects_python_scalars: a Python scalar argument")
            return jf(*args, **kwargs)
        return run
    return {"jit": jit}


def jit_refuses_static_argnames(base):
    """jit raises on ``static_argnames`` (a crash on a valid program, not a wrong value)."""
    def jit(fun=None, **kw):
        if kw.get("static_argnames"):
            raise NotImplementedError("jit: static_argnames is not supported")
        return base.jit(fun, **kw)
    return {"jit": jit}


BREAKS = {f.__name__: f for f in (
    vmap_slice0, jit_perturb, forward_drops_term, jvp_scaled, linearize_stale, vjp_jv,
    reverse_drops_term, transpose_drops_term, ignore_custom_rules, numpy_perturbed,
    loop_vmap, grad_scaled, jacrev_transposed, hessian_drops_term, control_flow_wrong,
    control_flow_derivative_damped, collectives_wrong, collectives_derivative_damped,
    collectives_transpose_wrong, extrema_by_gather, checkpoint_damped, chunked_vmap, chunks_reordered,
    reduce_axes_by_psum, reduce_axes_mean, piles_by_loop, piles_shifted, materialized_symbolic_zeros,
    jit_drops_shardings, reshard_ignored, out_sharding_ignored, spmd_axis_name_ignored,
    custom_vjp_by_transposed_bwd, custom_vjp_residuals_constant, grad_strong_types,
    jit_strong_types, extra_calls, jit_retraces, exceptions_changed, vjp_not_pytree,
    custom_jvp_calls_primal, custom_vjp_calls_primal,
    jit_rejects_python_scalars, jit_refuses_static_argnames)}


def broken(base, *labels):
    """``base`` (a Backend or name) with the named breaks applied in order."""
    backend = load_backend(base)
    for label in labels:
        if label not in BREAKS:
            raise ValueError(f"unknown break {label!r}; known: {sorted(BREAKS)}")
        backend = Wrapped(backend, label, BREAKS[label](backend))
    return backend


def load(name):
    """The backend named ``name``: a module (``jax``, ``impl``, ...) or a module with breaks,
    ``jax+vmap_slice0`` (``--backend`` accepts both: the CLI can run, and a hunt can
    find, the negative tests' broken backends)."""
    if isinstance(name, Backend):
        return name
    base, *labels = name.split("+")
    return broken(base, *labels)


def find_counterexample(law, backend, strategy=None, max_examples=60):
    """The first drawn case on which ``law`` raises AssertionError, or None.

    Derandomized (the same cases every run) and without shrinking: a
    negative test only needs to know the law *can* fail.
    """
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample

    from .laws import CaseFiltered

    strategy = strategy if strategy is not None else law.cases()
    found = []

    def fails(case):
        try:
            law(backend, case)
        except CaseFiltered:
            return False
        except AssertionError as exc:
            found.append((case, exc))
            return True
        return False

    config = settings(max_examples=max_examples, derandomize=True, database=None,
                      phases=[Phase.explicit, Phase.generate], deadline=None,
                      suppress_health_check=list(HealthCheck))
    try:
        find(strategy, fails, settings=config)
    except NoSuchExample:
        return None
    return found[-1]
