"""Checkers for users' own code: run the relevant laws on given and drawn inputs.

Each checker raises an AssertionError naming the law and the smallest failing
input (hypothesis shrinks the drawn inputs), so it can sit in any test suite::

    from properties import check_grads
    def test_my_loss():
        check_grads(my_loss, (w, x), order=2)

Inputs: the arrays you pass are checked first, then ``max_examples`` more
drawn with the same shapes and dtypes (elements in [-2, 2]); pass
``max_examples=0`` to check only yours.  ``backend`` defaults to ``jax``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

import strategies as _strategies

from . import broken as _broken
from .backends import LawSkipped, load_backend
from .cases import LinearCase, VmapCase, args_source
from .laws import Law, linear as _linear, vmap as _vmap
from .laws._common import (assert_close, assert_dot_equal, check_conditioning, directions,
                           evaluate, fd_jvp, fail, leaves, require_finite)
from .runner import run_law


@dataclass
class PointCase:
    """User inputs for a checker."""
    args: tuple

    @property
    def dtype(self):
        return min((np.asarray(a).dtype for a in self.args), key=lambda d: np.finfo(d).bits)

    def describe(self):
        return "args = (" + ", ".join(np.array2string(np.asarray(a), precision=8,
                                                      separator=", ") for a in self.args) + ")"

    def source(self):
        return "import numpy as np\n" + args_source(self.args)


class _UserFunction:
    """Looks like a strategies Program to the vmap laws: build() returns f."""

    def __init__(self, f):
        self.f = f

    def build(self, backend):
        return self.f

    def source(self):
        return f"# the user's function {getattr(self.f, '__name__', self.f)!r}\n"

    def __repr__(self):
        return getattr(self.f, "__name__", repr(self.f))


# --- input handling -----------------------------------------------------------

def _check_callable(name, f):
    if not callable(f):
        raise TypeError(f"{name} must be callable, got {type(f).__name__}")


def _as_arrays(args, what="args"):
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"{what} must be a tuple of arrays, got {type(args).__name__}")
    if not args:
        raise ValueError(f"{what} must not be empty")
    out = []
    for i, a in enumerate(args):
        arr = np.asarray(a)
        if arr.dtype not in (np.float32, np.float64):
            raise TypeError(f"{what}[{i}] must be a float32 or float64 array, got {arr.dtype}")
        out.append(arr)
    return tuple(out)


def _points(args):
    """Strategy of argument tuples shaped and typed like ``args``."""
    return st.tuples(*(_strategies.arrays(a.dtype, a.shape) for a in args)).map(PointCase)


def _settings(max_examples):
    if not isinstance(max_examples, int) or max_examples < 0:
        raise ValueError(f"max_examples must be a non-negative int, got {max_examples!r}")
    phases = list(Phase) if max_examples else [Phase.explicit]
    return settings(max_examples=max(1, max_examples), derandomize=True, database=None,
                    deadline=None, suppress_health_check=list(HealthCheck), phases=phases)


def _run(laws, backend, given, strategy, max_examples):
    """Run each law on the given case first, then on drawn ones."""
    backend = load_backend(backend)
    outcome = {}
    for law in laws:
        st_ = st.just(given) if max_examples == 0 else strategy
        try:
            run_law(law, backend, st_, settings=_settings(max_examples), examples=[given])
            outcome[law.name] = "passed"
        except LawSkipped as exc:
            outcome[law.name] = f"skipped: {exc}"
    return outcome


def _law(fn, name=None):
    """``fn`` as a law, its cases given by the checker.  A Law is named by its function;
    ``name`` names one made at run time (the derivative laws of each order)."""
    if name is None:
        return Law(fn, lambda: None)

    def check(backend, case):
        return fn(backend, case)
    check.__name__ = check.__qualname__ = name
    check.__doc__ = fn.__doc__
    return Law(check, lambda: None)


# --- check_grads --------------------------------------------------------------

def _single_output(name, y):
    if len(leaves(y)) != 1:
        raise TypeError(f"{name}: the function must return one array, got {len(leaves(y))}")


def _derivative_laws(f, order, modes, tag=""):
    """fwd/rev laws for f, and recursively for its directional derivatives."""
    laws = []

    def fwd(backend, case):
        y = check_conditioning(f, case.args)
        _single_output("check_grads", y)
        t = directions(case.args, salt=41)
        _, jt = evaluate(lambda: backend.jvp(f, case.args, t))
        require_finite(jt, what="tangent")
        assert_close(case, "jvp vs float64 finite differences", jt,
                     fd_jvp(f, case.args, t), kind="reference")

    def rev(backend, case):
        y = check_conditioning(f, case.args)
        _single_output("check_grads", y)
        u = directions(case.args, salt=42)
        v = directions((leaves(y)[0],), salt=43)[0]
        ct = evaluate(backend.vjp(f, *case.args)[1], v)
        require_finite(ct, what="cotangent")
        assert_dot_equal(case, "<v, FD(u)> vs <vjp(v), u>",
                         (v, fd_jvp(f, case.args, u)), (ct, u), kind="reference")

    if "fwd" in modes:
        laws.append(_law(fwd, f"grads_fwd{tag}"))
    if "rev" in modes:
        laws.append(_law(rev, f"grads_rev{tag}"))
    if order > 1:
        backend_holder = {}

        def next_f(*args):
            backend = backend_holder["backend"]
            if "fwd" in modes:
                return backend.jvp(f, args, directions(args, salt=44))[1]
            y = f(*args)
            return backend.vjp(f, *args)[1](directions((y,), salt=45)[0])[0]
        inner = _derivative_laws(next_f, order - 1, modes, tag=f"{tag}_order{order}")
        for law in inner:
            def bound(backend, case, law=law):
                backend_holder["backend"] = backend
                return law.fn(backend, case)
            laws.append(_law(bound, law.name))
    return laws


def check_grads(f, args, order=1, modes=("fwd", "rev"), *, backend="jax", max_examples=20):
    """Check f's forward and reverse derivatives against float64 finite
    differences, up to ``order`` (derivatives of derivatives for order > 1).

    ``f`` returns one array.  Example::

        check_grads(lambda x: jnp.sin(x) * x, (np.ones(3),), order=2)
    """
    _check_callable("f", f)
    args = _as_arrays(args)
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"order must be a positive int, got {order!r}")
    modes = tuple(modes) if not isinstance(modes, str) else (modes,)
    if not modes or any(m not in ("fwd", "rev") for m in modes):
        raise ValueError(f"modes must be a non-empty subset of ('fwd', 'rev'), got {modes!r}")
    return _run(_derivative_laws(f, order, modes), backend, PointCase(args), _points(args),
                max_examples)


# --- custom rules ---------------------------------------------------------------

def check_custom_jvp(f, *args, backend="jax", max_examples=20):
    """Check a custom_jvp function: jvp's primal is f's value, the rule agrees
    with float64 finite differences and (when ``f.fun`` exists) with autodiff
    of the undecorated function.

        f = jax.custom_jvp(lambda x: jnp.sin(x))
        f.defjvp(lambda p, t: (jnp.sin(p[0]), jnp.cos(p[0]) * t[0]))
        check_custom_jvp(f, np.ones(3))
    """
    _check_callable("f", f)
    args = _as_arrays(args)
    primal = getattr(f, "fun", None)

    def custom_jvp_rule(backend, case):
        y = check_conditioning(f, case.args)
        t = directions(case.args, salt=46)
        y_out, t_out = evaluate(lambda: backend.jvp(f, case.args, t))
        require_finite(t_out, what="tangent")
        assert_close(case, "jvp primal output vs f", y_out, y)
        assert_close(case, "rule vs float64 finite differences", t_out,
                     fd_jvp(f, case.args, t), kind="reference")
        if callable(primal):
            _, auto = evaluate(lambda: backend.jvp(primal, case.args, t))
            if all(np.all(np.isfinite(x)) for x in leaves(auto)):
                assert_close(case, "rule vs autodiff of f.fun", t_out, auto, kind="reference")

    return _run([_law(custom_jvp_rule)], backend, PointCase(args), _points(args),
                max_examples)


def check_custom_vjp(f, *args, backend="jax", max_examples=20):
    """Check a custom_vjp (or custom_gradient) function: vjp's primal is f's
    value, fwd's primal output is f's (when ``f.fwd`` exists), and bwd is the
    transpose of the derivative: <g, FD(u)> == <bwd(g), u> in float64.

        f = jax.custom_vjp(lambda x: jnp.sin(x))
        f.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (jnp.cos(x) * g,))
        check_custom_vjp(f, np.ones(3))
    """
    _check_callable("f", f)
    args = _as_arrays(args)
    fwd_rule = getattr(f, "fwd", None)

    def custom_vjp_rule(backend, case):
        y = check_conditioning(f, case.args)
        if callable(fwd_rule):
            assert_close(case, "fwd primal output vs f",
                         evaluate(fwd_rule, *_fwd_args(backend, f, case.args))[0], y)
        y_out, pullback = backend.vjp(f, *case.args)
        assert_close(case, "vjp primal output vs f", evaluate(lambda: y_out), y)
        g = directions(leaves(y), salt=47)
        g = g[0] if len(g) == 1 else tuple(g)
        ct = evaluate(pullback, g)
        require_finite(ct, what="cotangent")
        u = directions(case.args, salt=48)
        assert_dot_equal(case, "<g, FD(u)> vs <bwd(g), u>",
                         (g, fd_jvp(f, case.args, u)), (ct, u), kind="reference")

    return _run([_law(custom_vjp_rule)], backend, PointCase(args), _points(args),
                max_examples)


def _fwd_args(backend, f, args):
    """fwd's arguments: a rule defined with symbolic_zeros=True takes CustomVJPPrimal
    leaves (value, perturbed)."""
    if not getattr(f, "symbolic_zeros", False):
        return args
    primal = backend.custom_derivatives.CustomVJPPrimal
    return tuple(primal(a, True) for a in args)


class _UserLinear:
    def __init__(self, fun, fun_transpose, residual_args, linear_args):
        self._fun, self._t = fun, fun_transpose
        self.example_args = (residual_args, linear_args)

    def fun(self, backend):
        return self._fun

    def transpose(self, backend):
        return self._t

    def describe(self):
        return f"the user's fun / fun_transpose at {self.example_args!r}"

    def source(self):
        return "# the user's fun / fun_transpose\n"


def check_linear_call(fun, fun_transpose, residual_args, linear_args, *, backend="jax",
                      vmap=True):
    """Check a linear_call pair: transposing once gives fun_transpose, twice
    fun, three times fun_transpose; and the dot-product test
    <v, fun(u)> == <fun_transpose(v), u>, plain and under jit, and under vmap
    (``vmap=True``; JAX has no batching rule for linear_call, so there the
    vmap law is reported as skipped unless you pass vmap="loop", which checks
    it with a looping vmap).

        check_linear_call(lambda r, x: r * x, lambda r, ct: r * ct, 2.0, np.ones(3))
    """
    _check_callable("fun", fun)
    _check_callable("fun_transpose", fun_transpose)
    linear_args = np.asarray(linear_args)
    if linear_args.dtype not in (np.float32, np.float64):
        raise TypeError(f"linear_args must be a float32 or float64 array, got {linear_args.dtype}")
    case = LinearCase(_UserLinear(fun, fun_transpose, residual_args, linear_args))
    b = load_backend(backend)
    laws = [_law(_linear.linear_call_involution), _law(_linear.linear_call_dot_product)]
    outcome = _run(laws, b, case, st.just(case), 0)
    if vmap:
        vb = _broken.broken(b, "loop_vmap") if vmap == "loop" else b
        outcome.update(_run([_law(_linear.linear_call_under_vmap)],
                            vb, case, st.just(case), 0))
    return outcome


# --- vmap -----------------------------------------------------------------------

def check_vmap(f, in_axes, *args, out_axes=0, backend="jax", max_examples=20):
    """Check vmap(f, in_axes, out_axes) on batched ``args`` against a loop, and
    vmap(jit(f)) against jit(vmap(f)).

        check_vmap(lambda w, x: jnp.dot(w, x), (None, 0), np.ones(3), np.ones((4, 3)))
    """
    _check_callable("f", f)
    args = _as_arrays(args)
    in_axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    if len(in_axes) != len(args):
        raise ValueError(f"in_axes has {len(in_axes)} entries for {len(args)} arguments")
    sizes = set()
    for a, ax in zip(args, in_axes):
        if ax is None:
            continue
        if not isinstance(ax, int) or not -a.ndim <= ax < a.ndim:
            raise ValueError(f"in_axes entry {ax!r} is invalid for an array of rank {a.ndim}")
        sizes.add(a.shape[ax])
    if len(sizes) != 1:
        raise ValueError(f"need at least one batched argument and one batch size, got {sizes}")
    if not isinstance(out_axes, int):
        raise TypeError(f"out_axes must be an int, got {out_axes!r}")
    size = sizes.pop()
    program = _UserFunction(f)

    def to_case(point):
        return VmapCase(program, point.args, (in_axes,), (out_axes,), (size,))

    laws = [_law(_vmap.vmap_matches_loop), _law(_vmap.vmap_jit_commute)]
    return _run(laws, backend, to_case(PointCase(args)), _points(args).map(to_case),
                max_examples)


__all__ = ["check_grads", "check_custom_jvp", "check_custom_vjp", "check_linear_call",
           "check_vmap"]
