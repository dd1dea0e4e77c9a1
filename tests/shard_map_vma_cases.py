"""Varying manual axes in types inside shard_map (check_vma=True), on 8 host devices,
impl against JAX: `typeof(x).mat.varying` and printed types, `lax.pcast`, the implicit
casts (`pvary`) and the collectives' rules, their values under value, jit, grad and
vmap, programs as `make_jaxpr` prints them, and the errors JAX raises when types
disagree (out_specs, loop carries, cond branches, collectives, pcast).

XLA must see 8 CPU devices before JAX is imported, so these cases run in a process of
their own: `tests/test_shard_map_vma.py` starts `python tests/shard_map_vma_cases.py
--json FILE` once and reports each `case_*` function as one test. Run this file
directly to see the cases' output (`-k NAME` picks some).
"""
from __future__ import annotations

import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import sharding_cases as base  # noqa: E402  (sets XLA_FLAGS before JAX is imported)

import importlib  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import impl  # noqa: E402

MESH = base.MESH                        # Auto axes x (4) and y (2)
BOTH = base.BOTH
X = base.rs(8, 4, seed=31)              # split P('x', 'y'): blocks f32[2,2]
W = base.rs(2, seed=32)                 # replicated P(): invariant inside
PERM_X = [(0, 1), (1, 2), (2, 3), (3, 0)]


def smap(lib, f, in_specs=(P("x", "y"), P()), out_specs=P("x", "y"), **kw):
    return lib.shard_map(f, mesh=MESH, in_specs=in_specs, out_specs=out_specs, **kw)


def strict(make):
    """`make(lib, np_)` for impl and JAX with strict dtype promotion."""
    with jax.numpy_dtype_promotion("strict"):
        return base.both(make)


# ------------------------------------------------------------------ types in the body

def _typed_expressions(lib, np_, a, w):
    """(name, value) pairs covering each rule: elementwise with implicit casts,
    collectives, pcast, creation like a varying value, calls and control flow."""
    lax = lib.lax
    return [
        ("block", a), ("replicated", w), ("a * w", a * w), ("w + 1", w + 1.0),
        ("a * 2.0", a * 2.0), ("psum x", lax.psum(a, "x")), ("psum xy", lax.psum(a, ("x", "y"))),
        ("psum of invariant", lax.psum(w, "x")), ("pmean y", lax.pmean(a, "y")),
        ("pmax of invariant", lax.pmax(w, "x")), ("pmin x", lax.pmin(a, "x")),
        ("all_gather x", lax.all_gather(a, "x")),
        ("all_gather of invariant", lax.all_gather(w, "y", tiled=True)),
        ("psum_scatter y", lax.psum_scatter(a, "y", scatter_dimension=1, tiled=True)),
        ("ppermute x", lax.ppermute(a, "x", PERM_X)),
        ("ppermute of invariant", lax.ppermute(w, "y", [(0, 1), (1, 0)])),
        ("all_to_all y", lax.all_to_all(a, "y", 1, 1, tiled=True)),
        ("axis_index y", lax.axis_index("y")), ("axis_index xy", lax.axis_index(("x", "y"))),
        ("axis_size", a * lax.axis_size("x")),
        ("pcast x", lax.pcast(w, "x", to="varying")),
        ("pcast (y, x)", lax.pcast(w, ("y", "x"), to="varying")),
        ("pcast of a pytree", lax.pcast({"u": w, "v": w * 2.0}, "y", to="varying")),
        ("zeros_like", np_.zeros_like(a)), ("ones_like of invariant", np_.ones_like(w)),
        ("full_like", lax.full_like(a, 2.0)), ("sum", a.sum()), ("dot", a @ w),
        ("where", np_.where(a > 0, a, w)), ("jit", lib.jit(lambda u, v: u * v)(a, w)),
        ("cond on invariant", lax.cond(w[0] > 0, lambda u: u * 2.0, lambda u: u, a)),
        ("cond on varying", lax.cond(a[0, 0] > 0, lambda v: v * 2.0, lambda v: v, w)),
        ("scan", lax.scan(lambda c, r: (c * r, c.sum()), lax.pcast(w, ("x", "y"),
                                                                    to="varying"), a)),
        ("while", lax.fori_loop(0, 3, lambda k, c: c * 0.5 + a[0], a[1])),
        ("vmap", lib.vmap(lambda r: r * w)(a)),
        ("grad of invariant", lib.grad(lambda v: (np_.sin(a) * v).sum())(w)),
        ("jvp", lib.jvp(lambda v: a * v, (w,), (w,))[1]),
    ]


def _types_seen(lib, np_, check_vma, jitted):
    seen = []

    def body(a, w):
        for name, value in _typed_expressions(lib, np_, a, w):
            for leaf in jax.tree_util.tree_leaves(value):
                t = lib.typeof(leaf)
                seen.append((name, str(t), repr(t), sorted(t.mat.varying)))
        return lib.lax.psum(a, "x")

    f = smap(lib, body, out_specs=P(None, "y"), check_vma=check_vma)
    out = (lib.jit(f) if jitted else f)(X, W)
    return seen, out


def case_types_in_the_body_as_jax():
    """Inside a shard_map body each value's type says which manual axes it varies over,
    printed and in `.mat.varying` as JAX's (check_vma=True); with check_vma=False
    nothing is tracked. The same under jit of the shard_map; outside, types are empty."""
    varying = {}
    for check_vma in (True, False):
        for jitted in (False, True):
            (got, got_out), (want, want_out) = strict(
                lambda lib, np_: _types_seen(lib, np_, check_vma, jitted))
            assert len(got) == len(want), (len(got), len(want))
            for g, w in zip(got, want):
                assert g == w, f"check_vma={check_vma} jit={jitted}: impl {g}, JAX {w}"
            base.check(got_out, want_out)
            varying[check_vma] = {name for name, *_, v in got if v}
    assert len(varying[True]) > 20 and not varying[False], varying
    assert impl.typeof(X).mat.varying == jax.typeof(X).mat.varying == frozenset()
    assert str(impl.typeof(X)) == str(jax.typeof(X))


# -------------------------------------------------- values under jit, grad and vmap

def _programs(lib, np_):
    """shard_map programs (of X and W) whose types need implicit casts, pcast or the
    collectives' rules, by name."""
    lax = lib.lax
    return {
        "pcast": smap(lib, lambda a, w: np_.sin(a) * lax.pcast(w, "x", to="varying")),
        "psum of invariant and varying": smap(
            lib, lambda a, w: (lax.psum(w, "x"), lax.psum(a * w, "x")),
            out_specs=(P(), P(None, "y"))),
        "grad of an invariant input inside": smap(
            lib, lambda a, w: lib.grad(lambda v: (np_.sin(a) * v * v).sum())(w), out_specs=P()),
        "collectives of invariant values": smap(
            lib, lambda a, w: (lax.all_gather(w, "x"), lax.ppermute(w * a[0], "x", PERM_X),
                               lax.pmean(a * w, "y") + lax.pmean(w, "x")),
            out_specs=(P("x"), P(("x", "y")), P("x", "y"))),
        "scan with a varying carry": smap(
            lib, lambda a, w: lax.scan(lambda c, r: (np_.cos(c) * r + 1.0, c.sum()),
                                       lax.pcast(w, ("x", "y"), to="varying"), a),
            out_specs=(P(("x", "y")), P(("x", "y")))),
        "cond on a varying predicate": smap(
            lib, lambda a, w: (lax.cond(a.sum() > 0, lambda v: v * 2.0, lambda v: np_.sin(v), w),
                               a * 2.0),
            out_specs=(P(("x", "y")), P("x", "y"))),
        "outputs cast to their out_specs": smap(
            lib, lambda a, w: (lax.psum(a, ("x", "y")) * w, w * 3.0),
            out_specs=(P(("x", "y")), P("y"))),
        "unchecked: pcast is no cast": smap(
            lib, lambda a, w: np_.sin(a) * lax.pcast(w, "x", to="varying"), check_vma=False),
        "unchecked: grad inside is per device": smap(
            lib, lambda a, w: lib.grad(lambda v: (np_.sin(a) * v * v).sum())(w),
            out_specs=P(("x", "y")), check_vma=False),
    }


def _loss(f):
    return lambda a, w: sum((o ** 2).sum() for o in jax.tree_util.tree_leaves(f(a, w)))


# JAX 0.10.2 fails to vmap these (its batched cond mixes a varying predicate with
# invariant branch values): the reference is JAX's program applied to each example.
JAX_CANNOT_VMAP = {"cond on a varying predicate"}


# The programs CI runs (the others run nightly): pvary's and psum's transposes.
CI_PROGRAMS = ("pcast", "psum of invariant and varying", "grad of an invariant input inside",
               "unchecked: grad inside is per device")


def case_values_under_jit_grad_and_vmap():
    """Each program's values, its jit, the gradient of a loss of its outputs with
    respect to both inputs, and its vmap over a batch of both inputs, as JAX's."""
    want = _compare_programs(CI_PROGRAMS)
    # The gradient of an invariant input inside the body is summed over the devices
    # with check_vma=True, not without: the two programs differ.
    assert not np.allclose(want["grad of an invariant input inside"][0][0],
                           want["unchecked: grad inside is per device"][0][0][:2])


def case_more_values_under_jit_grad_and_vmap():
    """As case_values_under_jit_grad_and_vmap, for the other programs (nightly)."""
    _compare_programs([n for n in _programs(impl, impl.numpy) if n not in CI_PROGRAMS])


def _compare_programs(names):
    examples = [(X, W), (X * 0.5 - 1.0, W + 2.0)]
    stacked = tuple(np.stack(xs) for xs in zip(*examples))

    def make(lib, np_):
        out = {}
        for name, f in _programs(lib, np_).items():
            if name not in names:
                continue
            if lib is jax and name in JAX_CANNOT_VMAP:
                each = [f(*e) for e in examples]
                batched = jax.tree_util.tree_map(lambda *o: np.stack(o), *each)
            else:
                batched = lib.vmap(f)(*stacked)
            out[name] = ((f(X, W), lib.jit(f)(X, W),
                          base.eager(lib, lib.grad(_loss(f), argnums=(0, 1)))(X, W)), batched)
        return out
    got, want = strict(make)
    for name in want:
        try:
            base.check(got[name][0], want[name][0], rtol=1e-4, atol=1e-5)
            # (vmapped, impl places a replicated result as P() where JAX says P(None,):
            # the same placement)
            base.check(got[name][1], want[name][1], rtol=1e-4, atol=1e-5, shardings=False)
            if name not in JAX_CANNOT_VMAP:
                for g, w in zip(*(jax.tree_util.tree_leaves(t[name][1]) for t in (got, want))):
                    assert g.sharding.is_equivalent_to(w.sharding, g.ndim), (g.sharding,
                                                                             w.sharding)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None
    return want


def case_pcast_jvp_and_linear_transpose():
    """pcast is linear: its jvp casts the tangent, and its transpose sums the cotangent
    over the axes it added (the gradient of `w` is 4 copies' worth)."""
    def make(lib, np_):
        f = smap(lib, lambda w: lib.lax.pcast(w, "x", to="varying"), in_specs=P(),
                 out_specs=P("x"))
        g = lib.linear_transpose(f, W)
        return (lib.jvp(f, (W,), (W * 2.0,)), base.eager(lib, g)(np.tile(W, 4)),
                base.eager(lib, lib.grad(lambda w: f(w).sum()))(W))
    got, want = strict(make)
    base.check(got, want)
    np.testing.assert_allclose(np.asarray(want[2]), np.full(2, 4.0, np.float32))


# ------------------------------------------------------------ printed programs

def case_programs_print_as_jax():
    """make_jaxpr prints the block program's types with their varying axes, and the
    casts JAX inserts (`pvary`, `psum_invariant`) as JAX does."""
    lax_of = lambda lib: lib.lax  # noqa: E731
    programs = [
        (lambda lib: lambda a, w: lax_of(lib).pcast(w, ("x", "x"), to="varying"),
         (P("x"), P()), P("x"), {}),
        (lambda lib: lambda a, w: lax_of(lib).psum(w, "x"), (P("x"), P()), P(), {}),
        (lambda lib: lambda a, w: a * lax_of(lib).axis_index("x").astype(np.float32),
         (P("x"), P()), P("x"), {}),
        (lambda lib: lambda a, w: a * lax_of(lib).axis_size("x"), (P("x"), P()), P("x"), {}),
        (lambda lib: lambda a, w: (a, w), (P("x"), P()), (P(("x", "y")), P("x")), {}),
        (lambda lib: lambda a, w: lax_of(lib).pcast(a, "x", to="varying")
         * lax_of(lib).axis_index("x").astype(np.float32), (P("x"), P()), P("x"),
         {"check_vma": False}),
    ]
    printed = []
    for body, in_specs, out_specs, kw in programs:
        def make(lib, np_):
            f = smap(lib, body(lib), in_specs=in_specs, out_specs=out_specs, **kw)
            return str(lib.make_jaxpr(f)(X, W).jaxpr.eqns[0].params["jaxpr"])
        got, want = strict(make)
        assert got == want, f"impl prints\n{got}\nJAX prints\n{want}"
        printed.append(want)
    text = "\n".join(printed)
    assert all(s in text for s in ("{V:x}", "{V:(x,y)}", "pvary[axes=('x',)]",
                                   "psum_invariant[axes=('x',)]")), text


# ------------------------------------------------------------------------ errors

def _body_error(body, in_specs=(P("x"), P()), out_specs=P("x")):
    return lambda lib, np_: lib.make_jaxpr(smap(lib, body(lib, np_), in_specs=in_specs,
                                                out_specs=out_specs))(X, W)


ERRORS = {
    # out_specs that leave out an axis the output varies over
    "out_specs P() of a varying value": _body_error(lambda lib, np_: lambda a, w: a,
                                                    out_specs=P()),
    "out_specs of a tuple": _body_error(lambda lib, np_: lambda a, w: (a, w),
                                        out_specs=(P(), P("x"))),
    "out_specs with two axes left out": _body_error(
        lambda lib, np_: lambda a, w: a.sum() + w.sum() * lib.lax.axis_index("y"),
        out_specs=P()),
    "out_specs naming the other axis": _body_error(lambda lib, np_: lambda a, w: a,
                                                   out_specs=P("y")),
    # loops and branches whose types change
    "scan carry becoming varying": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.scan(lambda c, r: (c + r[0], c), w, a)[0],
        out_specs=P()),
    "fori_loop carry becoming varying": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.fori_loop(0, 3, lambda k, c: c + a[0, :2], w),
        out_specs=P()),
    "cond branches varying differently": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.cond(w[0] > 0, lambda u, v: v, lambda u, v: u[0, :2],
                                                   a, w)),
    # collectives and casts
    "psum over axes varied over in part": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.psum(a, ("x", "y")), out_specs=P()),
    "pbroadcast of an invariant value": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.pbroadcast(w, "x", 0)),
    "pcast of a varying value": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.pcast(a, "x", to="varying")),
    "pcast over axes varied over in part": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.pcast(a, ("x", "y"), to="varying")),
    "pcast to an unknown type": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.pcast(w, "x", to="foo")),
    "pcast to unreduced from invariant": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.pcast(w, "x", to="unreduced")),
    "pcast over a set of axes": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.pcast(w, {"x"}, to="varying")),
    "pcast outside shard_map": lambda lib, np_: lib.lax.pcast(W, "x", to="varying"),
    "pcast under jit outside shard_map": lambda lib, np_: lib.jit(
        lambda w: lib.lax.pcast(w, "x", to="varying"))(W),
    "pcast under vmap naming its axis": lambda lib, np_: lib.vmap(
        lambda w: lib.lax.pcast(w, "i", to="varying"), axis_name="i")(X),
    "all_gather to an unknown type": _body_error(
        lambda lib, np_: lambda a, w: lib.lax.all_gather(a, "x", to="everywhere")),
    "lax.pvary is gone": lambda lib, np_: lib.lax.pvary,
}
# Messages JAX words as impl does, word for word (the others: type only).
SAME_MESSAGE = {"out_specs P() of a varying value", "out_specs of a tuple",
                "out_specs with two axes left out", "out_specs naming the other axis",
                "scan carry becoming varying", "pcast of a varying value",
                "pcast outside shard_map", "lax.pvary is gone"}


def case_errors_as_jax():
    """Where JAX refuses a program whose types disagree, impl raises the same exception
    type (and for these, the same message)."""
    for name, make in ERRORS.items():
        try:
            got = base.same_error(make)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None
        if name in SAME_MESSAGE:
            want = base.raises(Exception, lambda: make(jax, jax.numpy))
            assert str(got) == str(want), f"{name}:\nimpl: {got}\nJAX:  {want}"
    # The mismatched cond branches: the hint names the branch to cast and its axes.
    err = base.raises(TypeError, lambda: ERRORS["cond branches varying differently"](
        impl, impl.numpy))
    assert "so the manual axis types do not match" in str(err)
    assert "pcast(..., ('x',), to='varying')` to the output of true_fun" in str(err), err


def case_unknown_axis_in_pcast_is_a_name_error():
    """pcast over a name that is no manual axis: impl raises NameError, as for any
    unbound axis name (JAX 0.10.2 fails an internal assertion)."""
    make = _body_error(lambda lib, np_: lambda a, w: lib.lax.pcast(w, "k", to="varying"))
    base.raises(AssertionError, lambda: make(jax, jax.numpy))
    base.raises(NameError, lambda: make(impl, impl.numpy), match="k")


# ------------------------------------------------ the checks catch broken rules

def case_negative_pvary_transpose_averaging_is_caught():
    """A pvary whose transpose averages the cotangent over the axes it added, where it
    should sum, makes the gradients of replicated inputs too small; the value
    comparison sees it."""
    ad = importlib.import_module("impl.interpreters.ad")
    collectives = importlib.import_module("impl.primitives.collectives")

    def averaging(ct, x, *, axes):
        return [impl.lax.div(collectives.psum_invariant_p.bind(ct, axes=axes),
                             np.float32(impl.lax.axis_size(axes)))]
    with base._patched(ad, "transpose_rules", dict(ad.transpose_rules)):
        ad.transpose_rules[collectives.pvary_p] = averaging
        base.raises(AssertionError, case_values_under_jit_grad_and_vmap)


def case_negative_a_wrong_vma_rule_is_caught():
    """axis_index typed as invariant: the type comparison sees it."""
    core = importlib.import_module("impl.core")
    axis_index_p = importlib.import_module("impl.primitives.collectives").axis_index_p
    with base._patched(core, "vma_rules", dict(core.vma_rules)):
        core.vma_rules[axis_index_p] = lambda *, axis_name: ()
        base.raises(AssertionError, case_types_in_the_body_as_jax)


def case_negative_a_missing_out_specs_check_is_caught():
    """Without the out_specs check impl accepts what JAX refuses; the error comparison
    sees it."""
    shard_map_module = importlib.import_module("impl.shard_map")
    with base._patched(shard_map_module, "_check_out_vma", lambda *a, **k: None):
        base.raises(AssertionError, case_errors_as_jax)


if __name__ == "__main__":
    sys.exit(base.main(namespace=globals(), description=__doc__.splitlines()[0]))
