"""Every validation error of the custom-rule APIs, raised on impl and on JAX 0.10: the
same exception type (impl's own class where JAX has its own, e.g.
UnexpectedTracerError) and messages carrying the same information (each needle must
appear in both messages). Where JAX does not check (a custom_vmap rule's output
shapes) impl's own clear error is tested separately."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import impl
from _custom_helpers import F32, assert_trees_close, check_same_error, run_both

X = np.ones(3, F32)


# ------------------------------------------------------------------- custom_jvp

def _jvp_with_rule(m, np_, rule, transform="jvp"):
    @m.custom_jvp
    def f(x, y):
        return np_.sin(x) * y, x

    f.defjvp(rule)
    if transform == "jvp_jit":     # JAX compares with the function's output only here
        return m.jvp(m.jit(f), (X, X), (X, X))
    if transform == "grad_jit":
        return m.grad(m.jit(lambda a: np_.sum(f(a, a)[0])))(X)
    return m.jvp(f, (X, X), (X, X))


def _single_output(m, np_, rule):
    @m.custom_jvp
    def f(x):
        return x

    f.defjvp(rule)
    return m.jvp(f, (X,), (X,))


JVP_RULE_ERRORS = [
    ("not a pair", lambda p, t: p[0], "jvp",
     ["must produce a pair (list or tuple of length two) representing primal and tangent"]),
    ("triple", lambda p, t: (p[0], p[0], p[0]), "jvp",
     ["must produce a pair (list or tuple of length two)"]),
    ("trees differ", lambda p, t: ((p[0], p[0]), [t[0], t[0]]), "jvp",
     ["equal container (pytree) structures, but got PyTreeDef((*, *)) and "
      "PyTreeDef([*, *]) respectively"]),
    ("tree vs function", lambda p, t: ([p[0], p[0]], [t[0], t[0]]), "jvp_jit",
     ["of the same container/pytree structure", "[float32[3], float32[3]]",
      "(float32[3], float32[3])"]),
    ("tree vs function under grad", lambda p, t: ([p[0], p[0]], [t[0], t[0]]), "grad_jit",
     ["container/pytree structure"]),
    ("shapes vs function", lambda p, t: ((p[0][:2], p[0]), (t[0][:2], t[0])), "jvp_jit",
     ["with leaves of the same shape/dtype", "(float32[2], float32[3])"]),
    ("tangent dtype", lambda p, t: ((p[0], p[0]), (t[0], t[0].astype(np.float16))), "jvp",
     ["corresponding shapes and dtypes, but got:",
      "primal float32[3] with tangent float16[3], expecting tangent float32[3]"]),
    ("tangent shapes", lambda p, t: ((p[0], p[0]), (t[0][:2], t[0][:1])), "jvp",
     ["primal float32[3] with tangent float32[2], expecting tangent float32[3]",
      "primal float32[3] with tangent float32[1], expecting tangent float32[3]"]),
]


@pytest.mark.parametrize("case", JVP_RULE_ERRORS, ids=[c[0] for c in JVP_RULE_ERRORS])
def test_custom_jvp_rule_errors(case):
    _, rule, transform, needles = case
    check_same_error(lambda m, np_: _jvp_with_rule(m, np_, rule, transform), *needles)


def test_custom_jvp_single_output_tangent_shape():
    check_same_error(lambda m, np_: _single_output(m, np_, lambda p, t: (p[0], t[0][:2])),
                     "corresponding shapes and dtypes. Expected float32[3] (tangent type of "
                     "float32[3]) but got float32[2].")


def test_custom_jvp_int_output_needs_float0_tangent():
    def program(m, np_):
        @m.custom_jvp
        def g(x, n):
            return np_.sin(x) * n, n * 2

        g.defjvp(lambda p, t: (g(*p), (np_.cos(p[0]) * t[0] * p[1], 0. * p[1])))
        return m.jvp(lambda x: g(x, 3), (X,), (X,))
    check_same_error(program, "expecting tangent float0[]")


def test_custom_jvp_without_rule():
    def eager(m, np_):
        return m.custom_jvp(lambda x: x)(1.)

    def under_jit(m, np_):
        return m.jit(m.custom_jvp(lambda x: x))(1.)
    for program in (eager, under_jit):
        check_same_error(program, "No JVP defined for custom_jvp function <lambda> using "
                                  "defjvp.")


def test_defjvps_with_nondiff_argnums():
    check_same_error(lambda m, np_: m.custom_jvp(lambda g, x: x,
                                                nondiff_argnums=(0,)).defjvps(None),
                     "Can't use ``defjvps`` with ``nondiff_argnums``.")


@pytest.mark.parametrize("api", ["custom_jvp", "custom_vjp"])
def test_unresolvable_keyword_arguments(api):
    def program(m, np_):
        f = getattr(m, api)(lambda x, **kw: x)
        if api == "custom_jvp":
            f.defjvp(lambda p, t: (p, t))
        else:
            f.defvjp(lambda x: (x, None), lambda r, g: (g,))
        return f(1., a=2.)
    check_same_error(program, f"The input arguments to the {api}-decorated function <lambda> "
                              "could not be resolved to positional-only arguments",
                     "The following keyword arguments could not be resolved to positions: a")


def test_defjvp_twice_uses_the_last_rule():
    def program(m, np_):
        f = m.custom_jvp(lambda x: x)
        f.defjvp(lambda p, t: (p[0], t[0]))
        f.defjvp(lambda p, t: (p[0], 2. * t[0]))
        return m.jvp(f, (F32(1.),), (F32(1.),))
    got, want = run_both(program)
    assert_trees_close(got, want)
    assert float(got[1]) == 2.


def test_custom_jvp_argument_not_an_array():
    def program(m, np_):
        @m.custom_jvp
        def f(x, y):
            return x
        f.defjvp(lambda p, t: (p[0], t[0]))
        return m.jvp(lambda x: f(x, "s"), (F32(1.),), (F32(1.),))
    check_same_error(program, "<class 'str'>")


@pytest.mark.parametrize("api", ["custom_jvp", "custom_vjp"])
def test_differentiating_a_closed_over_value(api):
    def program(m, np_):
        def closes_over(y):
            h = getattr(m, api)(lambda x: x * y)
            if api == "custom_jvp":
                h.defjvp(lambda p, t: (h(p[0]), t[0] * y))
            else:
                h.defvjp(lambda x: (h(x), None), lambda r, g: (g * y,))
            return h(F32(1.))
        return m.grad(closes_over)(F32(2.))
    got, _ = check_same_error(program)
    assert "closes over" in str(got)


# ------------------------------------------------------------------- custom_vjp

def _vjp_with(m, np_, fwd, bwd, transform="grad"):
    @m.custom_vjp
    def f(x, p):
        return x * p["a"]

    f.defvjp(fwd, bwd)
    loss = lambda a: np_.sum(f(a, {"a": a}))  # noqa: E731
    if transform == "grad_jit":   # JAX compares fwd with the function only here
        return m.grad(m.jit(loss))(X)
    return m.grad(loss)(X)


GOOD_FWD = lambda x, p: (x * p["a"], (x, p))  # noqa: E731

VJP_ERRORS = [
    ("fwd not a pair", lambda x, p: x * p["a"], lambda r, g: (g, None), "grad",
     ["must produce a pair (list or tuple of length two) where the first element "
      "represents the primal output", "instead of a pair the fwd rule <lambda> produced"]),
    ("fwd tree", lambda x, p: ([x * p["a"]], None), lambda r, g: (g, None), "grad_jit",
     ["container/pytree structure:\n    [float32[3]]", "output container/pytree structure"]),
    ("fwd shape", lambda x, p: ((x * p["a"])[:2], None), lambda r, g: (g, None), "grad_jit",
     ["shapes/dtypes of:\n    float32[2]", "float32[3]"]),
    ("bwd too short", GOOD_FWD, lambda r, g: (g,), "grad",
     ["Custom VJP bwd rule must produce an output with the same container (pytree) "
      "structure as the args tuple of the primal function",
      "but got bwd output structure PyTreeDef((*,)) for primal input structure "
      "PyTreeDef((*, {'a': *}))"]),
    ("bwd structure", GOOD_FWD, lambda r, g: (g, {"b": g}), "grad",
     ["PyTreeDef((*, {'b': *})) for primal input structure PyTreeDef((*, {'a': *}))"]),
    ("bwd not a tuple", GOOD_FWD, lambda r, g: g, "grad",
     ["must produce a tuple of length equal to the number of arguments"]),
    ("bwd shape", GOOD_FWD, lambda r, g: (g[:2], None), "grad",
     ["at output[0] the bwd rule produced an output of type float32[2] corresponding to "
      "an input of type float32[3]", "shapes do not match"]),
    ("bwd scalar", GOOD_FWD, lambda r, g: (1., None), "grad",
     ["at output[0]", "corresponding to an input of type float32[3]"]),
    ("bwd leaf shape in a dict", GOOD_FWD, lambda r, g: (g, {"a": g[:1]}), "grad",
     ["at output[1]['a'] the bwd rule produced an output of type float32[1]"]),
    ("bwd not an array", GOOD_FWD, lambda r, g: ("s", None), "grad",
     ["<class 'str'>", "not a valid JAX type"]),
    ("residual not an array", lambda x, p: (x * p["a"], "str"), lambda r, g: (g, None),
     "grad", ["<class 'str'>", "not a valid JAX type"]),
]


@pytest.mark.parametrize("case", VJP_ERRORS, ids=[c[0] for c in VJP_ERRORS])
def test_custom_vjp_errors(case):
    _, fwd, bwd, transform, needles = case
    check_same_error(lambda m, np_: _vjp_with(m, np_, fwd, bwd, transform), *needles)


def test_bwd_symbolic_zero_of_wrong_type():
    def program(m, np_):
        @m.custom_vjp
        def h(x, y):
            return x * y

        h.defvjp(lambda x, y: (h(x.value, y.value), (x.value, y.value)),
                 lambda r, g: (g * r[1], m.custom_derivatives.SymbolicZero.from_primal_value(
                     np.ones(4, F32))), symbolic_zeros=True)
        return m.grad(lambda x, y: np_.sum(h(x, y)), (0, 1))(X, X)
    check_same_error(program, "Custom VJP bwd rule produced a SymbolicZero with a shape/dtype "
                              "that does not match", "at output[1] the SymbolicZero had "
                              "shape/dtype float32[4]")


def test_custom_vjp_without_rule():
    check_same_error(lambda m, np_: m.custom_vjp(lambda x: x)(1.),
                     "No VJP defined for custom_vjp function <lambda> using defvjp.")


@pytest.mark.parametrize("where", ["grad", "jit"])
def test_tracer_in_nondiff_argnums_of_custom_vjp(where):
    def program(m, np_):
        @partial(m.custom_vjp, nondiff_argnums=(1,))
        def nd(x, n):
            return x * n

        nd.defvjp(lambda x, n: (nd(x, n), None), lambda n, r, ct: (ct * n,))
        if where == "grad":
            return m.grad(lambda n: nd(F32(2.), n))(F32(3.))
        return m.jit(lambda n: nd(F32(2.), n))(F32(3.))
    check_same_error(program, "Found a JAX Tracer object passed as an argument to a "
                              "custom_vjp function in a position indicated by "
                              "nondiff_argnums as non-differentiable")


def test_bwd_cotangent_of_another_float_dtype():
    """JAX accepts a float16 cotangent for a float32 input and passes it on; impl
    converts it to the input's dtype. The values agree."""
    def program(m, np_):
        return _vjp_with(m, np_, GOOD_FWD, lambda r, g: (g.astype(np.float16), None))
    got, want = run_both(program)
    assert np.asarray(got).dtype == np.float32 and np.asarray(want).dtype == np.float16
    assert_trees_close(got, np.asarray(want).astype(np.float32))


def test_bwd_output_for_an_integer_input_is_ignored():
    def program(m, np_):
        @m.custom_vjp
        def h(x, n):
            return x * n

        h.defvjp(lambda x, n: (h(x, n), n), lambda n, g: (g * n, "ignored"))
        return m.grad(h)(F32(1.), 3)
    got, want = run_both(program)
    assert_trees_close(got, want, check_dtypes=False)


# ---------------------------------------------- custom_gradient and closure_convert

def test_custom_gradient_wrong_number_of_cotangents():
    def program(m, np_):
        @m.custom_gradient
        def h(x):
            return x * 2., lambda ct: (ct, ct)
        return m.grad(h)(F32(3.))
    check_same_error(program, "bwd output structure PyTreeDef((*, *)) for primal input "
                              "structure PyTreeDef((*,))")


def test_custom_gradient_keyword_arguments():
    def program(m, np_):
        @m.custom_gradient
        def h(x, y=2.):
            return x * y, lambda ct: (ct * y, ct * x)
        return m.grad(lambda x: h(x, y=4.))(F32(3.))
    check_same_error(program, "could not be resolved to positional-only arguments",
                     "The following keyword arguments could not be resolved to positions: y")


def test_closure_convert_wrong_structure():
    def program(m, np_):
        conv, _ = m.closure_convert(lambda x: x * 2., F32(1.))
        return conv((F32(1.), F32(2.)))
    check_same_error(program, "The inputs to the closure produced by closure_convert must "
                              "have the same Pytree structure as the example arguments",
                     "Expected PyTreeDef((*,)), but got PyTreeDef(((*, *),))")


# ------------------------------------------------------------------ linear_call

def test_linear_call_transpose_structure():
    def program(m, np_):
        lc = m.custom_derivatives.linear_call
        f = lambda x: lc(lambda r, x: x[0] + x[1], lambda r, t: t, (), x)  # noqa: E731
        return m.linear_transpose(f, (F32(1.), F32(2.)))(F32(1.))
    check_same_error(program, "transpose output pytree structure must match that of linear "
                              "inputs, got output structure PyTreeDef(*) and input structure "
                              "PyTreeDef((*, *))")


def test_linear_call_transpose_shapes():
    # JAX does not check; impl names the leaf.
    f = lambda x: impl.custom_derivatives.linear_call(  # noqa: E731
        lambda r, x: x, lambda r, t: t[:2], (), x)
    with pytest.raises(TypeError, match="(?s)shapes of the linear inputs.*leaf 0"):
        impl.linear_transpose(f, X)(X)


# ------------------------------------------------------------------- custom_vmap

def _cvmap(m, np_, rule):
    f = m.custom_batching.custom_vmap(lambda x: x)
    if rule is not None:
        f.def_vmap(rule)
    return m.vmap(f)(X)


VMAP_ERRORS = [
    ("no rule", None, AttributeError,
     ["No batching rule defined for custom_vmap function <lambda> using def_vmap."]),
    ("output tree", lambda n, b, x: ((x, x), (True, True)), ValueError,
     ["structure of output returned by custom vmap rule (<lambda>) does not match that of "
      "original custom-vmapped function.", "Original output: PyTreeDef(*)",
      "Rule output: PyTreeDef((*, *))"]),
    ("out_batched tree", lambda n, b, x: (x, [True]), ValueError,
     ["structure of output value and output batching specification returned by custom "
      "vmap rule (<lambda>) do not match.", "Batching spec: PyTreeDef([*])"]),
]


@pytest.mark.parametrize("case", VMAP_ERRORS, ids=[c[0] for c in VMAP_ERRORS])
def test_custom_vmap_errors(case):
    _, rule, exc, needles = case
    got, _ = check_same_error(lambda m, np_: _cvmap(m, np_, rule), *needles)
    assert isinstance(got, exc)


def test_custom_vmap_without_rule_even_eagerly():
    check_same_error(lambda m, np_: m.custom_batching.custom_vmap(lambda x: x)(X),
                     "No batching rule defined")


def test_custom_vmap_rule_not_a_pair():
    # JAX: "too many values to unpack"; impl says what the rule must return.
    check_same_error(lambda m, np_: _cvmap(m, np_, lambda n, b, x: x))


@pytest.mark.parametrize("rule, pattern", [
    (lambda n, b, x: (x[:2], True), "output 0 of shape \\(2,\\).*vmapped axis, of size 3"),
    (lambda n, b, x: (x, "yes"), "pytree of bools"),
])
def test_custom_vmap_rule_outputs_checked(rule, pattern):
    # JAX does not check these (it returns whatever the rule gives); impl refuses a
    # batched output without the vmapped axis in front, and non-bool batching flags.
    with pytest.raises(ValueError, match=pattern):
        _cvmap(impl, impl.numpy, rule)


@pytest.mark.parametrize("staged", [False, True])
def test_rule_closing_over_an_escaped_tracer(staged):
    """Values a rule closes over are only stood in for when the call carries them as
    operands; a tracer that escaped its (finished) transformation is still refused."""
    def program(m, np_):
        leaked = []
        m.jit(lambda x: leaked.append(x) or x)(F32(1.))

        @m.custom_jvp
        def f(x):
            return x

        f.defjvp(lambda p, t: (p[0], t[0] * leaked[0]))
        run = lambda x: m.jvp(f, (x,), (F32(1.),))  # noqa: E731
        return m.jit(run)(F32(2.)) if staged else run(F32(2.))
    check_same_error(program)
