"""Tests of the strategies package, run against the ``jax`` package itself.

Reference values come from jax (vmap vs a Python loop, jit vs eager,
linear_transpose of the plain function) or from float64 central finite
differences. Statistics over many programs use independent seeded draws
(``sample``) rather than @given, whose adaptive search correlates examples.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.control import BuildContext
from hypothesis.internal.conjecture.data import ConjectureData

import strategies as S
from strategies.vocabulary import VOCABULARY

from helpers import first_in_ci, nightly

SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(autouse=True)
def _x64():
    """float64 programs need x64; the context keeps it local to each test."""
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def sample(strategy, n, seed):
    """``n`` independent draws from ``strategy`` with a seeded random source."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        data = ConjectureData(random=rnd)
        with BuildContext(data, wrapped_test=None):
            out.append(data.draw(strategy))
    return out


def fd_directional(f, args, direction, eps=1e-6):
    """Central finite difference of ``f`` at ``args`` along ``direction`` (float64)."""
    plus = f(*[a + eps * d for a, d in zip(args, direction)])
    minus = f(*[a - eps * d for a, d in zip(args, direction)])
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


def rand_like(rng, args):
    return [rng.uniform(-1, 1, np.shape(a)).astype(a.dtype) for a in args]


def vjp_vs_fd(program, args, seed):
    """<ct, J v> by finite differences and by jax.vjp; returns both numbers."""
    f = jax.jit(program.build(jax))
    rng = np.random.default_rng(seed)
    v = rand_like(rng, args)
    out = np.asarray(f(*args))
    ct = rng.uniform(-1, 1, out.shape)
    pullback = jax.jit(lambda xs, ct: jax.vjp(f, *xs)[1](ct))
    by_vjp = sum(float(np.sum(np.asarray(g) * d)) for g, d in zip(pullback(tuple(args), jnp.asarray(ct)), v))
    by_fd = float(np.sum(ct * fd_directional(f, args, v)))
    return by_vjp, by_fd


# ----------------------------------------------------------------- programs

OPTION_MIX = [
    {},
    {"custom_rules": True},
    {"smooth": True},
    {"linear": True},
    {"smooth": True, "custom_rules": True, "dtype": "float64"},
    {"linear": True, "custom_rules": True},
    {"wrong_rules": True},
    {"min_ops": 8, "max_ops": 12},
]


@pytest.mark.parametrize("options", first_in_ci(1, OPTION_MIX), ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_drawn_cases_run_on_jax(options):
    """At least 99% of drawn (program, args) run, with the promised type."""
    cases = sample(S.program_cases(**options), 50, seed=1)
    failures = []
    for program, args in cases:
        try:  # jit: one compile per program is far cheaper than eager dispatch
            out = np.asarray(jax.jit(program.build(jax))(*args))
            assert out.shape == program.output_type[0], (out.shape, program.output_type)
            assert out.dtype == np.dtype(program.output_type[1])
            assert np.all(np.isfinite(out)), "non-finite output"
            lo, hi = program.output_bounds
            slack = 1e-3 * max(1.0, abs(lo), abs(hi))
            assert np.all(out >= lo - slack) and np.all(out <= hi + slack), "outside proven bounds"
        except Exception as e:  # counted, then reported below
            failures.append(f"{e!r}\n{program.source()}")
    assert len(failures) <= 0.01 * len(cases), "\n\n".join(failures[:3])


@pytest.mark.parametrize("op", ["optimization_barrier", "reduce_precision", "reduce", "tridiagonal_solve",
                                # each program compiles two LU solves: seconds
                                pytest.param("custom_linear_solve", marks=pytest.mark.slow)])
def test_compiler_control_reduce_and_solver_ops_keep_their_promises(op):
    """Programs of the op alone run on JAX with the promised type, within the proven bounds;
    drawn linear (the linear ops), they are linear (a x + b y maps to a f(x) + b f(y))."""
    for linear in (False, True) if VOCABULARY[op].linear else (False,):
        # a draw whose inputs the op does not accept (e.g. scalars) is a program without it
        drawn = [(p, a) for p, a in sample(S.program_cases(ops=(op,), dtype="float64", linear=linear), 10, seed=5)
                 if op in p.ops]
        assert len(drawn) >= 3, f"{op} drawn in {len(drawn)} of 10 programs"
        for program, args in drawn:
            f = jax.jit(program.build(jax))
            out = np.asarray(f(*args))
            assert out.shape == program.output_type[0] and out.dtype == np.float64
            lo, hi = program.output_bounds
            assert np.all((out >= lo - 1e-9) & (out <= hi + 1e-9)), (out, program.output_bounds, program)
            if linear:
                other = [np.cos(3.0 * np.asarray(a)) for a in args]
                mixed = np.asarray(f(*[0.5 * a - 1.5 * b for a, b in zip(args, other)]))
                np.testing.assert_allclose(mixed, 0.5 * out - 1.5 * np.asarray(f(*other)), rtol=1e-9, atol=1e-9)


def test_prng_cases_draw_the_samplers_only_on_request():
    """Without ``samplers`` no case holds a rejection sampler (they compile for seconds);
    with some, every case holds one of them and no other."""
    from strategies.prng import SAMPLER_TEMPLATES
    for case in sample(S.prng_cases(), 30, seed=7):
        assert not {s[0] for s in case.steps} & set(SAMPLER_TEMPLATES), case
    for samplers in (("poisson",), ("gamma_grad", "gamma"), ("binomial",)):
        for case in sample(S.prng_cases(samplers=samplers), 10, seed=7):
            drawn = {s[0] for s in case.steps} & set(SAMPLER_TEMPLATES)
            assert drawn and drawn <= set(samplers), case


def test_every_op_appears_across_a_few_hundred_draws():
    seen = set()
    for program in sample(S.random_programs(custom_rules=True, forward_only_ops=True), 400, seed=2):
        seen.update(program.ops)
    assert seen == set(S.OP_NAMES), f"never drawn: {set(S.OP_NAMES) - seen}"


def test_source_is_the_runnable_function_build_returns():
    for program, args in sample(S.program_cases(custom_rules=True, max_ops=5), 20, seed=3):
        src = program.source()
        n = program.num_inputs
        assert src.startswith(f"def program(backend, {', '.join(f'x{i}' for i in range(n))}):\n")
        namespace = {}
        exec(src, namespace)
        from_source = jax.jit(lambda *xs: namespace["program"](jax, *xs))
        np.testing.assert_array_equal(np.asarray(from_source(*args)),
                                      np.asarray(jax.jit(program.build(jax))(*args)))
        assert src in repr(program)
        assert len(re.findall(r"^    v\d+ = ", src, flags=re.M)) == len(program.ops)


def test_programs_are_traceable_by_jit():
    for program, args in sample(S.program_cases(smooth=True, dtype="float64", custom_rules=True, max_ops=4), 10, seed=4):
        f = program.build(jax)
        np.testing.assert_allclose(np.asarray(jax.jit(f)(*args)), np.asarray(f(*args)), rtol=1e-9, atol=1e-9)


def test_options_shape_the_programs():
    smooth_ok = set(S.SMOOTH_OPS)
    for p in sample(S.random_programs(smooth=True, custom_rules=True), 80, seed=5):
        assert set(p.ops) <= smooth_ok and p.custom_ops
    for p in sample(S.random_programs(linear=True, custom_rules=True), 80, seed=6):
        assert set(p.ops) <= set(S.LINEAR_OPS) and "linear_call" in p.ops
    for p in sample(S.random_programs(wrong_rules=True), 40, seed=7):
        assert p.nodes[-1].wrong and p.wrong_rule == p.ops[-1] and sum(n.wrong for n in p.nodes) == 1
    for p in sample(S.random_programs(min_ops=3, max_ops=5, dtype="float32", num_inputs=2), 40, seed=8):
        assert 3 <= len(p.ops) <= 5 and p.num_inputs == 2 and p.dtype == "float32"
    for p in sample(S.random_programs(custom_rules=("custom_jvp",)), 30, seed=9):
        assert set(p.custom_ops) == {"custom_jvp"}
    for p in sample(S.random_programs(ops=("transpose", "sum"), min_ops=2, max_ops=2), 20, seed=24):
        assert set(p.ops) <= {"transpose", "sum"}
    for p in sample(S.random_programs(ops=("transpose",), input_types=[((), "float32")]), 5, seed=25):
        assert p.ops == () and p.output_type == ((), "float32")  # nothing fits a scalar
    forward_only = {n for n, o in S.VOCABULARY.items() if not o.reverse}
    assert forward_only, "no op without reverse mode: forward_only_ops tests nothing"
    for p in sample(S.random_programs(ops=("sin", *forward_only)), 30, seed=26):
        assert not set(p.ops) & forward_only
    drawn = sample(S.random_programs(ops=("sin", *forward_only), forward_only_ops=True), 30, seed=26)
    assert any(set(p.ops) & forward_only for p in drawn)


def test_smooth_programs_agree_with_float64_finite_differences():
    """The smooth option delivers: vjp matches central differences."""
    cases = sample(S.program_cases(smooth=True, custom_rules=True, dtype="float64"), 25, seed=10)
    for i, (program, args) in enumerate(cases):
        by_vjp, by_fd = vjp_vs_fd(program, args, seed=i)
        assert abs(by_vjp - by_fd) <= 1e-5 * (1 + abs(by_vjp)), program


def test_wrong_rules_differ_measurably_from_the_true_derivative():
    cases = sample(S.program_cases(smooth=True, wrong_rules=True, dtype="float64"), 30, seed=11)
    caught = considered = 0
    for i, (program, args) in enumerate(cases):
        by_vjp, by_fd = vjp_vs_fd(program, args, seed=i)
        if by_vjp == 0 and abs(by_fd) < 1e-12:
            continue  # the output does not depend on the inputs (e.g. .at[].set over all of it)
        considered += 1
        # Relative to the size of the two numbers: a wrong rule is off by a factor, and a
        # program whose gradient happens to be small must not hide it (float64 central
        # differences are good to ~1e-9 relative here).
        caught += abs(by_vjp - by_fd) > 1e-4 * (abs(by_vjp) + abs(by_fd)) + 1e-9
    assert considered >= 20 and caught >= 0.95 * considered, (caught, considered)


def test_each_wrong_rule_is_off_from_the_correct_one():
    """Same draw with and without wrong_rules: only the rule differs, and by a lot."""
    x = np.linspace(-2, 2, 7)
    for kind in S.CUSTOM_KINDS:
        progs = [sample(S.random_programs(wrong_rules=w, custom_rules=(kind,), max_ops=1,
                                          input_types=[((7,), "float64")]), 1, seed=12)[0]
                 for w in (False, True)]
        right, wrong = (p.build(jax) for p in progs)
        assert progs[0].ops == progs[1].ops == (kind,) and progs[1].wrong_rule == kind
        np.testing.assert_array_equal(np.asarray(right(x)), np.asarray(wrong(x)))
        ct = jnp.ones_like(right(x))
        (g_right,), (g_wrong,) = jax.vjp(right, x)[1](ct), jax.vjp(wrong, x)[1](ct)
        assert np.min(np.abs(np.asarray(g_wrong) - np.asarray(g_right))) > 0.1, progs[1]


def test_linear_programs_are_linear_and_transposable():
    for i, (program, args) in enumerate(sample(S.program_cases(linear=True, custom_rules=True, dtype="float64"), 20, seed=13)):
        f = jax.jit(program.build(jax))
        rng = np.random.default_rng(i)
        y = rand_like(rng, args)
        combo = [2.0 * a - 3.0 * b for a, b in zip(args, y)]
        np.testing.assert_allclose(np.asarray(f(*combo)), 2.0 * np.asarray(f(*args)) - 3.0 * np.asarray(f(*y)),
                                   rtol=1e-9, atol=1e-9)
        ct = rng.uniform(-1, 1, program.output_type[0])
        xt = jax.jit(jax.linear_transpose(f, *args))(jnp.asarray(ct))
        lhs = float(np.sum(ct * np.asarray(f(*y))))
        rhs = sum(float(np.sum(np.asarray(a) * b)) for a, b in zip(xt, y))
        assert abs(lhs - rhs) <= 1e-9 * (1 + abs(lhs))


def _buggy_jax():
    """jax with a planted bug: transpose ignores its permutation (reverses axes)."""

    class BuggyNumpy:
        def __getattr__(self, name):
            return getattr(jnp, name)

        @staticmethod
        def transpose(x, axes=None):
            return jnp.transpose(x)

    class Backend:
        numpy = BuggyNumpy()
        lax = jax.lax
        custom_jvp, custom_vjp, custom_derivatives = jax.custom_jvp, jax.custom_vjp, jax.custom_derivatives

    return Backend()


_BUGGY = _buggy_jax()


@functools.lru_cache(maxsize=None)
def _program_exposes_bug(program):
    # Only shapes matter here, so the verdict depends on the program alone.
    args = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in program.input_types]
    good = jax.eval_shape(program.build(jax), *args)
    try:
        bad = jax.eval_shape(program.build(_BUGGY), *args)
    except Exception:
        return True  # e.g. a shape error downstream of the bug
    return good.shape != bad.shape


def _exposes_bug(case):
    """Whether the buggy backend gets the output type wrong (traced, not run)."""
    return _program_exposes_bug(case[0])


#: a slice of the vocabulary for the shrinking tests: transpose among a few
#: shape-changing and elementwise ops, so a draw meets it often
SHRINK_OPS = ("transpose", "sin", "add", "mul", "sum", "reshape", "matmul", "broadcast_to", "slice", "take")


@pytest.mark.slow
def test_planted_failure_shrinks_to_a_tiny_program():
    minimal = find(S.program_cases(max_ops=6, dtype="float32", ops=SHRINK_OPS), _exposes_bug,
                   settings=settings(max_examples=2000, database=None, deadline=None,
                                     suppress_health_check=list(HealthCheck)))
    program, _ = minimal
    assert "transpose" in program.ops
    assert len(program.ops) <= 3, program


@pytest.mark.slow
def test_failing_given_reports_a_shrunk_program():
    seen = []

    @settings(max_examples=500, database=None, deadline=None, report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck))
    @given(S.program_cases(max_ops=6, ops=SHRINK_OPS))
    def law(case):
        seen.append(case[0])
        assert not _exposes_bug(case)

    with pytest.raises(AssertionError):
        law()
    final = seen[-1]  # hypothesis replays the shrunk example last
    assert len(final.ops) <= 3 and "transpose" in final.ops, final


# ----------------------------------------------------------------- arrays


@SETTINGS
@given(st.data())
def test_batched_arrays_slices_differ_everywhere(data):
    size = data.draw(st.integers(1, 5))
    shape = data.draw(S.shapes(max_dims=2))
    axis = data.draw(st.integers(-(len(shape) + 1), len(shape)))
    x = data.draw(S.batched_arrays(size, shape=shape, axis=axis))
    assert x.shape == S.array_strategies.insert_axis(shape, axis, size)
    slices = [np.take(x, i, axis=axis) for i in range(size)]
    for i in range(size):
        for j in range(i):
            assert np.all(slices[i] != slices[j])


@SETTINGS
@given(S.arrays())
def test_arrays_are_finite_bounded_float(x):
    assert x.dtype in (np.float32, np.float64)
    assert np.all(np.isfinite(x)) and np.all(np.abs(x) <= 2)
    tiny = np.finfo(x.dtype).tiny
    assert not np.any((x != 0) & (np.abs(x) < tiny)), "subnormal element"


@SETTINGS
@given(S.arrays("int32", (3, 2)))
def test_int_arrays(x):
    assert x.dtype == np.int32 and x.shape == (3, 2) and np.all(np.abs(x) <= 8)


def test_shapes_include_size_one_and_odd_sides():
    sides = {d for s in sample(S.shapes(), 200, seed=14) for d in s}
    assert {1, 3, 5} <= sides
    assert () in sample(S.shapes(), 200, seed=15)


# ----------------------------------------------------------------- pytrees


def _node_kinds(tree, acc):
    if isinstance(tree, S.Pair):
        acc.add("custom")
        _node_kinds(tree.first, acc), _node_kinds(tree.second, acc)
    elif isinstance(tree, S.Point):
        acc.add("namedtuple")
        for c in tree:
            _node_kinds(c, acc)
    elif isinstance(tree, (tuple, list)):
        acc.add(type(tree).__name__)
        for c in tree:
            _node_kinds(c, acc)
    elif isinstance(tree, dict):
        acc.add("dict")
        for c in tree.values():
            _node_kinds(c, acc)
    elif tree is None:
        acc.add("none")
    return acc


def test_pytrees_cover_every_container_and_roundtrip():
    kinds = set()
    for tree in sample(S.pytrees(), 150, seed=16):
        _node_kinds(tree, kinds)
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        assert all(isinstance(x, np.ndarray) for x in leaves)
        again = jax.tree_util.tree_unflatten(treedef, leaves)
        assert jax.tree_util.tree_structure(again) == treedef
    assert kinds == set(S.CONTAINERS)


def test_custom_node_is_a_registered_pytree():
    assert S.pytrees.Pair is S.Pair
    tree = S.Pair(np.ones(2), {"a": S.Pair(1.0, None)})
    assert len(jax.tree_util.tree_leaves(tree)) == 2
    doubled = jax.tree_util.tree_map(lambda x: 2 * x, tree)
    assert isinstance(doubled, S.Pair) and doubled.second["a"].first == 2.0
    out = jax.jit(lambda t: t.first * t.second["a"].first)(tree)
    np.testing.assert_array_equal(np.asarray(out), np.ones(2))


@SETTINGS
@given(st.data())
def test_pytrees_of_keeps_the_structure(data):
    example = data.draw(S.pytrees(min_leaves=1))
    treedef = jax.tree_util.tree_structure(example)
    same = data.draw(S.pytrees_of(example))
    assert jax.tree_util.tree_structure(same) == treedef
    for a, b in zip(jax.tree_util.tree_leaves(example), jax.tree_util.tree_leaves(same)):
        assert a.shape == b.shape and a.dtype == b.dtype
    other = data.draw(S.pytrees_of(treedef))
    assert jax.tree_util.tree_structure(other) == treedef


@SETTINGS
@given(st.data())
def test_structures_have_the_requested_leaves(data):
    n = data.draw(st.integers(0, 6))
    tree = data.draw(S.structures(n))
    assert jax.tree_util.tree_leaves(tree) == list(range(n))


# ----------------------------------------------------------------- vmap


def _assert_vmap_matches_loop(case):
    got = np.asarray(jax.jit(case.vmapped(jax))(*case.args))
    want = case.expected(jax, jit=True)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@settings(SETTINGS, max_examples=25)
@given(S.vmap_cases(smooth=True, dtype="float64", max_ops=5))
def test_vmap_cases_are_valid_and_match_the_loop(case):
    _assert_vmap_matches_loop(case)
    assert case.depth == 1 and len(case.unbatched_args) == case.axis_sizes[0]


@settings(SETTINGS, max_examples=15)
@given(S.nested_vmap_cases(depth=2, smooth=True, dtype="float64", max_ops=4))
def test_nested_vmap_cases_are_valid_and_match_the_loop(case):
    _assert_vmap_matches_loop(case)
    assert len(case.unbatched_args) == case.axis_sizes[0]
    assert all(len(inner) == case.axis_sizes[1] for inner in case.unbatched_args)


@SETTINGS
@given(S.vmap_cases())
def test_vmap_batched_leaves_have_distinct_slices(case):
    leaves = jax.tree_util.tree_leaves(case.args)
    (leaf_axes,), (size,) = case.leaf_axes, case.axis_sizes
    assert any(a is not None for a in leaf_axes)
    for x, axis in zip(leaves, leaf_axes):
        if axis is not None:
            slices = [np.take(x, i, axis=axis) for i in range(size)]
            assert all(np.all(slices[i] != slices[j]) for i in range(len(slices)) for j in range(i))


def test_vmap_specs_cover_the_spec_language():
    """Across draws: negative ints, None, one int for all, per-leaf containers."""
    seen = set()

    def walk(spec, top=False):
        if spec is None:
            seen.add("none")
        elif isinstance(spec, int):
            seen.add("negative" if spec < 0 else "int")
            if top:
                seen.add("one int for all")
        else:
            seen.add(type(spec).__name__)
            if isinstance(spec, S.Pair):
                children = [spec.first, spec.second]
            elif isinstance(spec, dict):
                children = list(spec.values())
            else:
                children = list(spec)
            for child in children:
                walk(child)

    sizes = set()
    for case in sample(S.vmap_cases(), 150, seed=17):
        (in_axes,), (out_axes,), (size,) = case.in_axes, case.out_axes, case.axis_sizes
        sizes.add(size)
        walk(in_axes, top=True)
        if out_axes is None:
            seen.add("out none")
        elif out_axes < 0:
            seen.add("out negative")
    assert {"none", "int", "negative", "one int for all", "tuple", "list", "dict", "Point", "Pair",
            "out none", "out negative"} <= seen, seen
    assert {1, 3, 5} <= sizes


def test_vmap_case_for_a_given_program():
    program = sample(S.random_programs(dtype="float64", smooth=True, num_inputs=2), 1, seed=18)[0]
    for case in sample(S.vmap_cases(program=program), 5, seed=19):
        assert case.program is program
        assert len(case.args) == 2 and all(isinstance(a, np.ndarray) for a in case.args)
        _assert_vmap_matches_loop(case)


# ----------------------------------------------------------------- linear functions


def _leaves_close(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(
        np.allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-5) for x, y in zip(la, lb))


@pytest.mark.parametrize("wrong", [False, nightly(True)])
def test_linear_functions_transposes(wrong):
    for lf in sample(S.linear_functions(wrong_transpose=wrong, kinds=S.LINEAR_KINDS), 24, seed=20 + wrong):
        res, lin = lf.example_args
        ct = lf.example_cotangent
        reference = jax.jit(jax.linear_transpose(lambda x: lf.fun(jax)(res, x), lin))(ct)[0]
        via_linear_call = jax.jit(jax.linear_transpose(lf.call(jax), lin))(ct)[0]
        assert _leaves_close(via_linear_call, lf.transpose(jax)(res, ct))
        assert _leaves_close(via_linear_call, reference) != wrong, lf
        np.testing.assert_allclose(np.asarray(jax.tree_util.tree_leaves(lf.call(jax)(lin))[0]),
                                   np.asarray(jax.tree_util.tree_leaves(lf.fun(jax)(res, lin))[0]))


def test_linear_function_source_runs():
    for lf in sample(S.linear_functions(wrong_transpose=True, kinds=S.LINEAR_KINDS), 10, seed=22):
        namespace = {}
        exec(lf.source(), namespace)
        got = namespace["fun_transpose"](jax, namespace["residual_args"], lf.example_cotangent)
        assert _leaves_close(got, lf.transpose(jax)(lf.residual_args, lf.example_cotangent))


def test_linear_function_pair_kind_has_no_residual():
    """The pair kind's call has two same-typed linear operands and nothing else,
    with distinct coefficients: a transpose that swaps the two cotangents is wrong."""
    pairs = [lf for lf in sample(S.linear_functions(kinds=("pair",)), 6, seed=23)]
    for lf in pairs:
        x, y = lf.linear_args
        a, b = lf.coefficients
        assert lf.residual_args == () and a != b and x.shape == y.shape and x.dtype == y.dtype
        ct = lf.example_cotangent
        got = jax.linear_transpose(lf.call(jax), lf.linear_args)(ct)[0]
        assert _leaves_close(got, (a * ct, b * ct)), lf
        assert not _leaves_close(got, (b * ct, a * ct)), lf


# ----------------------------------------------------------------- custom wrappers


def test_custom_wrapper_staging_calls_the_custom_function_through_a_transformation():
    """A staged wrapper (jit, checkpoint, cond) computes what the unstaged one does, and its
    trace holds the staging transformation's primitive around the custom-rule call."""
    drawn = sample(S.custom_wrapper_cases(), 40, seed=27)
    assert set(S.STAGINGS) <= {c.staging for c in drawn}
    primitive = {"jit": "jit[", "checkpoint": "remat2[", "cond": "cond["}   # JAX's names
    for c in [c for c in drawn if c.staging][:6]:
        f, _ = c.make(jax)
        plain, _ = dataclasses.replace(c, staging="").make(jax)
        assert _leaves_close(f(*c.args), plain(*c.args)), c
        assert primitive[c.staging] in str(jax.make_jaxpr(f)(*c.args)), c


def test_custom_wrapper_weighted_sums_save_no_residual():
    """One drawn wrapper in three is w0 * x0 + w1 * x1 (w0 != w1, same-typed
    inputs) whose custom_vjp fwd saves no residual; its source runs, and vjp
    returns the rule's (scaled) weights times the cotangent."""
    drawn = sample(S.custom_wrapper_cases(kinds=("custom_vjp",), rules=("true", "scaled")), 30, seed=24)
    cases = [c for c in drawn if c.weights]
    assert 4 <= len(cases) < len(drawn)
    for c in cases[:4]:
        namespace = {}
        exec(c.source().replace("print(f(*args))", ""), namespace)
        f, (fwd, _) = namespace["make"](jax, [])
        w0, w1 = c.weights
        assert w0 != w1 and c.args[0].shape == c.args[1].shape and c.args[0].dtype == c.args[1].dtype
        assert fwd(*c.args)[1] is None
        g = np.ones_like(np.asarray(f(*c.args)))
        cts = jax.vjp(f, *c.args)[1](g)
        assert _leaves_close(cts, (c.scale * w0 * g, c.scale * w1 * g)), c


# ----------------------------------------------------------------- bad input


@pytest.mark.parametrize("call, error", [
    (lambda: S.program_cases(max_ops=-1), ValueError),
    (lambda: S.program_cases(min_ops=5, max_ops=2), ValueError),
    (lambda: S.program_cases(smooth="yes"), TypeError),
    (lambda: S.program_cases(forward_only_ops=1), TypeError),
    (lambda: S.program_cases(custom_rules=("bogus",)), ValueError),
    (lambda: S.program_cases(custom_rules="custom_jvp"), TypeError),
    (lambda: S.program_cases(dtype="int32"), ValueError),
    (lambda: S.program_cases(dtype=object()), TypeError),
    (lambda: S.program_cases(linear=True, custom_rules=("custom_jvp",)), ValueError),
    (lambda: S.random_programs(input_types=[((2,), "float32"), ((2,), "float64")]), ValueError),
    (lambda: S.random_programs(ops=["nope"]), ValueError),
    (lambda: S.arrays(shape="x"), TypeError),
    (lambda: S.arrays("complex64"), ValueError),
    (lambda: S.arrays(elements=[1, 2]), TypeError),
    (lambda: S.batched_arrays(0), ValueError),
    (lambda: S.batched_arrays(2.5), TypeError),
    (lambda: S.shapes(min_dims=3, max_dims=1), ValueError),
    (lambda: S.pytrees(containers=("set",)), ValueError),
    (lambda: S.pytrees_of({"a": 1}, leaves=[1]), TypeError),
    (lambda: S.vmap_cases(axis_size=0), ValueError),
    (lambda: S.nested_vmap_cases(depth=9), ValueError),
    (lambda: S.VmapCase(None, (np.ones(2),), (0,), 0, (2,)), TypeError),   # out_axes not per level
    (lambda: S.VmapCase(None, (np.ones(2),), (0, 0), (0,), (2,)), ValueError),   # levels disagree
    (lambda: S.linear_functions(kinds=("x",)), ValueError),
    (lambda: S.linear_functions(wrong_transpose=1), TypeError),
    (lambda: S.prng_cases(samplers=("gamma", "nope")), ValueError),
    (lambda: S.manual_axis_cases(ops=("nope",)), ValueError),
    (lambda: S.manual_axis_cases(ops=("sin",), require=("preduced",)), ValueError),
    (lambda: S.manual_axis_cases(max_steps=0), ValueError),
    (lambda: S.manual_axis_cases(dtype="int32"), ValueError),
])
def test_bad_input_is_refused_clearly(call, error):
    with pytest.raises(error):
        call()


def test_build_refuses_a_non_backend():
    program = sample(S.random_programs(), 1, seed=23)[0]
    with pytest.raises(TypeError, match="JAX's API"):
        program.build(object())


# ----------------------------------------------------------------- impl's primitives

def test_every_impl_primitive_is_declared_once_and_drawn_by_what_declares_it():
    """strategies/vocabulary.py's PRIMITIVES has one entry per primitive of impl's registry,
    and each drawn entry's source (a vocabulary op, collective, control kind or case family)
    binds that primitive when its cases are traced as drawn and under jvp, vjp, vmap and jit;
    no exempt primitive is drawn."""
    import impl
    from properties.primitives import impl_primitives
    from strategies.coverage import check_table
    problems = check_table(impl, impl_primitives())
    assert not problems, "\n".join(problems)


@pytest.fixture
def toy_cube(monkeypatch):
    """A toy primitive added as docs/impl.md says: a define block (the rule's own code)
    and its user-facing function in impl.lax; removed from the registry afterwards."""
    import impl
    from impl.interpreters import ad, batching
    from impl.primitives import _define
    from impl.primitives.elementwise import add, mul

    def cube_jvp(t, x):     # d(x^3) = 3 x^2 t
        u = mul(t, mul(x, x))
        return add(u, add(u, u))

    toy_cube_p = _define.define("toy_cube", abstract_eval=lambda x: x, lowering=lambda x: x * x * x,
                                jvp=ad.jvp_by_parts(cube_jvp), batching=batching.vectorized)
    monkeypatch.setattr(impl.lax, "toy_cube", toy_cube_p.bind, raising=False)
    try:
        yield toy_cube_p
    finally:
        del _define.registry["toy_cube"], _define.defined_in["toy_cube"]


def test_a_new_primitive_needs_one_table_entry(toy_cube):
    """The toy primitive's one strategy entry (its op, declared in the table) makes the
    programs draw it, and the coverage check sees it drawn; without the entry, or with an
    entry naming an op that does not bind it, the check says so."""
    import impl
    from strategies.coverage import check_table
    from strategies.ops import Unary
    from strategies.vocabulary import VOCABULARY, declared, op

    entry = op(Unary("toy_cube", "lax.toy_cube({})", lambda lo, hi: (lo ** 3, hi ** 3),
                     accepts=lambda t, ctx: t.bound <= 4.0))
    assert check_table(impl, {"toy_cube"}, {}) == [
        "toy_cube: no entry in the primitive table (strategies/vocabulary.py): declare what draws it, "
        "or an exemption with a reason"]
    with declared("toy_cube", entry):
        for program, args in sample(S.program_cases(ops=("toy_cube",), max_ops=1, dtype="float64"), 5, seed=31):
            assert program.ops == ("toy_cube",), program
            got = np.asarray(program.build(impl)(*args))
            np.testing.assert_allclose(got, np.asarray(args[program.nodes[0].inputs[0]], np.float64) ** 3,
                                       rtol=1e-12)
            lo, hi = program.output_bounds
            assert np.all((lo <= got) & (got <= hi))
        assert check_table(impl, {"toy_cube"}, {"toy_cube": entry}) == []
        assert check_table(impl, {"toy_cube"}, {"toy_cube": op("sin")}) == [
            "toy_cube: declared drawn by ('op', 'sin'), whose drawn cases do not bind it"]
    assert "toy_cube" not in VOCABULARY and "toy_cube" not in S.PRIMITIVES


def test_op_table_is_consistent():
    assert set(S.OP_NAMES) == set(VOCABULARY)
    assert set(S.CUSTOM_KINDS) <= set(S.OP_NAMES)
    assert set(S.LINEAR_OPS) <= set(S.SMOOTH_OPS)


def test_some_loops_close_over_two_program_inputs():
    """Drawn scan/fori_loop/while_loop steps sometimes close over the inputs k0, k1
    (the loop's constant operands, not its carry), and still mean their Python loop."""
    closed = [c for c in sample(S.control_flow_cases(kinds=("scan", "fori_loop", "while_loop"), dtype="float64"),
                                12, seed=5) if dict(c.params).get("closure")]
    assert closed
    for case in closed[:3]:
        jaxpr = jax.make_jaxpr(case.build(jax))(*case.args).jaxpr
        k0, k1 = (jaxpr.invars[case.arg_names.index(k)] for k in ("k0", "k1"))
        loop = next(e for e in jaxpr.eqns if e.primitive.name in ("scan", "while"))
        p = loop.params
        n_consts = p["num_consts"] if "num_consts" in p else p["cond_nconsts"] + p["body_nconsts"]
        assert {k0, k1} <= set(loop.invars[:n_consts])
        for got, want in zip(jax.tree_util.tree_leaves(case.build(jax)(*case.args)),
                             jax.tree_util.tree_leaves(case.reference(jax)(*case.args)), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_control_flow_source_computes_what_the_graph_builds():
    """A control-flow case is built from its graph (no printed text runs) and printed as a
    module: the printed ``program`` and ``reference`` return exactly what ``build`` and
    ``reference`` return, for every kind."""
    cases = [c for kind in S.CONTROL_KINDS
             for c in sample(S.control_flow_cases(kinds=(kind,), dtype="float64"), 1, seed=7)]
    for case in cases:
        namespace = {}
        exec(compile(case.text(), "<control case>", "exec"), namespace)
        for name, built in (("program", case.build(jax)), ("reference", case.reference(jax))):
            printed = namespace[name](jax, *case.args)
            got = built(*case.args)
            assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(printed), (name, case)
            for g, p in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(printed), strict=True):
                np.testing.assert_array_equal(np.asarray(g), np.asarray(p), err_msg=f"{name} of {case!r}")
    with pytest.raises(TypeError, match="arguments"):
        case.build(jax)(*case.args[:-1])


def test_some_remat_bodies_are_linear_in_two_same_typed_inputs():
    linear = [c for c in sample(S.remat_cases(dtype="float64"), 12, seed=5) if c.body.linear]
    assert linear
    for case in linear[:3]:
        assert case.body.input_types[0] == case.body.input_types[1]
        f = case.body.build(jax)
        x = [np.asarray(a) for a in case.args]
        np.testing.assert_allclose(f(*[2.0 * a for a in x]), 2.0 * np.asarray(f(*x)), rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------- one-device shard_map


@pytest.mark.parametrize("step", ["all_gather_invariant", "unreduced_psum_scatter", "all_gather_reduced",
                                  "reduced_to_varying"])
def test_manual_axis_cases_apply_the_required_step_and_match_jax(step):
    """A case drawn with require=(step,) applies it, on an Explicit mesh when the step needs
    one, and JAX's shard_map computes the NumPy reference (values only: the laws check the rest)."""
    from strategies.manual import MANUAL_OPS
    for case in sample(S.manual_axis_cases(require=(step,), dtype="float64"), 2, seed=7):
        assert step in case.ops
        assert case.axis_type == "Explicit" or not MANUAL_OPS[step].explicit
        assert (case.batch is None) == any(not MANUAL_OPS[s].vmappable for s in case.ops)
        got = jax.jit(case.program(jax))(*case.args)
        np.testing.assert_allclose(np.asarray(got), case.reference(*case.args), rtol=1e-12)
