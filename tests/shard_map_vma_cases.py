"""Varying, unreduced and reduced manual axes in types inside shard_map (check_vma=True),
on 8 host devices, impl against JAX: `typeof(x).mat` and printed types, `lax.pcast`, the
implicit casts (`pvary`, `reduced_vary_cast`) and the collectives' rules, their values
under value, jit, grad and vmap, programs as `make_jaxpr` prints them, and the errors
JAX raises when types disagree (out_specs, in_specs, loop carries, cond branches,
collectives, pcast).

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
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

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
# The messages impl words otherwise than JAX (the others are JAX's, word for word).
MESSAGE_DEPARTURES = {
    "cond branches varying differently": "the hint names the branch to cast and the axes",
    "pbroadcast of an invariant value": "JAX 0.10.2's names ppermute",
    # (the allowed values print as a set, in an order that depends on string hashes)
    "pcast to an unknown type": "the same words, the set's order may differ",
    "all_gather to an unknown type": "the same words, the set's order may differ",
    "sin of unreduced": "JAX's asks to file an issue; impl's says what to do",
    "unreduced out_specs, manual over part of the mesh": "JAX's asks to file a bug",
    "reduced plus varying": "jnp's broadcasting: JAX's operand is f32[1,2], impl's f32[2,2]",
    "dynamic_update_slice of unreduced with reduced":
        "JAX's types print their mesh's axis types, ({Manual: ('x', 'y')})",
    "vmap of psum of unreduced": "JAX's names the parameter the argument is bound to",
    "vmap of gathering to reduced": "JAX's names the parameter the argument is bound to",
}


def same_errors_and_messages(errors):
    """Each of `errors` raises JAX's exception type, and JAX's message but for
    MESSAGE_DEPARTURES; all failures reported together."""
    failures = []
    for name, make in errors.items():
        try:
            got = base.same_error(make)
        except AssertionError as e:
            failures.append(f"{name}: {e}")
            continue
        if name not in MESSAGE_DEPARTURES:
            want = base.raises(Exception, lambda: make(jax, jax.numpy))
            if str(got) != str(want):
                failures.append(f"{name}:\nimpl: {got}\nJAX:  {want}")
    assert not failures, "\n".join(failures)


def case_errors_as_jax():
    """Where JAX refuses a program whose types disagree, impl raises the same exception
    type, with JAX's message but for MESSAGE_DEPARTURES."""
    same_errors_and_messages(ERRORS)
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


# ------------------------------------------------ unreduced and reduced manual axes
# On a mesh whose axes are Explicit a value inside the body may be, over a manual axis,
# unreduced (each device holds its part of a sum) or reduced (replicated, with an
# unreduced cotangent): `pcast` to them and back, psum and psum_scatter of unreduced
# values, all_gather(to='invarying'/'reduced'), specs with unreduced and reduced axes.

EMESH = base.EXPLICIT_MESH                      # Explicit axes x (4) and y (2)


def eput(value, *spec, **axes):
    return jax.device_put(np.asarray(value, np.float32),
                          NamedSharding(EMESH, P(*spec, **axes)))


EX = eput(X, "x", "y")                          # f32[8@x,4@y]: blocks f32[2,2]
EW = eput(W)                                    # f32[2]
EW_REDUCED = eput(W, reduced={"x"})             # f32[2]{R:x}
ROWS = eput(base.rs(8, 4, seed=33), "x")        # f32[8@x,4]: a batch split over x
SHARDS = eput(base.rs(4, 2, seed=34), "x")      # f32[4@x,2]: weights split over x


def esmap(lib, f, in_specs=(P("x", "y"), P()), out_specs=P("x", "y"), **kw):
    return lib.shard_map(f, mesh=EMESH, in_specs=in_specs, out_specs=out_specs, **kw)


def _unreduced_expressions(lib, np_, a, w):
    """(name, value) pairs: each cast, the collectives of unreduced and reduced values,
    and the rules of operations meeting them (implicit casts included)."""
    lax = lib.lax
    u = lax.pcast(a, "x", to="unreduced")                 # {V:y, U:x}
    r = lax.pcast(w, "x", to="reduced")                   # {R:x}
    rxy = lax.pcast(w, ("y", "x"), to="reduced")          # {R:(x,y)}
    return [
        ("pcast to unreduced", u), ("pcast over (y, x)", lax.pcast(a, ("y", "x"), to="unreduced")),
        ("pcast to reduced", r), ("pcast reduced to varying", lax.pcast(r, "x", to="varying")),
        ("psum of unreduced", lax.psum(u, "x")), ("pmean of unreduced", lax.pmean(u, "x")),
        ("psum of unreduced over y", lax.psum(lax.pcast(u, "y", to="unreduced"), ("x", "y"))),
        ("psum of unreduced, other axis", lax.psum(u, "y")),
        ("psum_scatter of unreduced", lax.psum_scatter(lax.pcast(a, "y", to="unreduced"), "y",
                                                       scatter_dimension=1, tiled=True)),
        ("all_gather to invarying", lax.all_gather(a, "x", to="invarying")),
        ("all_gather of invariant to invarying", lax.all_gather(w, "y", to="invarying",
                                                               tiled=True)),
        ("all_gather to reduced", lax.all_gather(a, "x", axis=1, tiled=True, to="reduced")),
        ("all_gather of unreduced over y", lax.all_gather(u, "y")),
        ("u + u", u + u), ("u * reduced scalar", u * lax.pcast(w[0], "x", to="reduced")),
        ("u.T", u.T), ("u.sum(0)", u.sum(0)), ("sin of reduced", np_.sin(r)),
        ("reduced * varying: implicit cast", rxy * a), ("max of reduced", np_.max(r)),
        ("dynamic_update_slice", lax.dynamic_update_slice(u, u[:1], (1, 0))),
        ("stop_gradient", lax.stop_gradient(u)), ("sort of reduced", np_.sort(r)),
        ("jit", lib.jit(lambda v, s: v + s)(u, u)), ("cond", lax.cond(w[0] > 0, np_.sin,
                                                                        np_.cos, r)),
        ("vmap", lib.vmap(lambda v: v + v)(u)),
    ]


def _unreduced_types_seen(lib, np_):
    seen = []

    def body(a, w):
        for name, value in _unreduced_expressions(lib, np_, a, w):
            t = lib.typeof(value)
            seen.append((name, str(t), t.mat.varying, t.mat.unreduced, t.mat.reduced))
        return a
    with jax.set_mesh(EMESH):
        out = lib.jit(esmap(lib, body))(EX, EW)
    return seen, out


def case_unreduced_and_reduced_types_in_the_body_as_jax():
    """Inside the body the types say which manual axes a value is unreduced and reduced
    over, printed (`{V:y, U:x}`) and in `.mat` as JAX's, through casts, collectives and
    the operations' rules."""
    (got, got_out), (want, want_out) = strict(_unreduced_types_seen)
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        assert g == w, f"impl {g}, JAX {w}"
    base.check(got_out, want_out)
    printed = " ".join(w[1] for w in want)
    assert all(s in printed for s in ("{U:(x,y)}", "{R:x}", "{V:y, R:x}", "{V:y, U:x}")), printed


def _reduced_loss(lib, f):
    """Sum of squares of the outputs of `f`, read once summed (resharded to replicated)."""
    def loss(*args):
        outs = jax.tree_util.tree_leaves(f(*args))
        return sum((lib.sharding.reshard(o, P()) ** 2).sum() for o in outs)
    return loss


def _unreduced_programs(lib, np_):
    """name -> (shard_map program, its arguments), whose types carry unreduced or
    reduced manual axes."""
    lax = lib.lax

    def fsdp(a, w):   # weights gathered as reduced, their cotangent reduce-scattered
        return np_.tanh(a @ lax.all_gather(w, "x", tiled=True, to="reduced"))
    return {
        "gathered reduced weights (FSDP)": (
            esmap(lib, fsdp, in_specs=(P("x"), P("x")), out_specs=P("x")), (ROWS, SHARDS)),
        "psum of unreduced": (
            esmap(lib, lambda a, w: lax.psum(lax.pcast(np_.sin(a) * w, "x", to="unreduced"), "x"),
                  out_specs=P(None, "y")), (EX, EW)),
        "unreduced output": (
            esmap(lib, lambda a, w: np_.sin(a) * w, out_specs=P(None, "y", unreduced={"x"})),
            (EX, EW)),
        "reduced input": (
            esmap(lib, lambda a, w: a * lax.pcast(np_.sin(w), "x", to="varying"),
                  in_specs=(P("x", "y"), P(reduced={"x"}))), (EX, EW_REDUCED)),
        "reduced output": (
            esmap(lib, lambda a, w: np_.sin(lax.pcast(w, "x", to="reduced")),
                  out_specs=P(reduced={"x"})), (EX, EW)),
        "psum_scatter of unreduced": (
            esmap(lib, lambda a, w: lax.psum_scatter(lax.pcast(a * w, "y", to="unreduced"), "y",
                                                     scatter_dimension=1, tiled=True)),
            (EX, EW)),
        "all_gather to invarying": (
            esmap(lib, lambda a, w: lax.all_gather(np_.sin(a), "x", to="invarying",
                                                   tiled=True) * w, out_specs=P(None, "y")),
            (EX, EW)),
    }


def _types_of(lib, tree):
    return [str(lib.typeof(leaf)) for leaf in jax.tree_util.tree_leaves(tree)]


def _readable(tree):
    return jax.tree_util.tree_map(
        lambda x: jax.sharding.reshard(x, P()) if jax.typeof(x).sharding.spec.unreduced else x,
        tree)


# CI runs these; the others run nightly.
CI_UNREDUCED_PROGRAMS = ("gathered reduced weights (FSDP)", "psum of unreduced",
                         "reduced input", "all_gather to invarying")


def _compare_unreduced_programs(names):
    def make(lib, np_):
        out = {}
        with jax.set_mesh(EMESH):
            for name, (f, args) in _unreduced_programs(lib, np_).items():
                if name not in names:
                    continue
                grad = lib.jit(lib.grad(_reduced_loss(lib, f), argnums=(0, 1)))(*args)
                primal, tangent = lib.jit(lambda *a: lib.jvp(f, a, a))(*args)
                results = (lib.jit(f)(*args), grad, tangent)
                out[name] = ([_types_of(lib, t) for t in results], _readable(results))
        return out
    got, want = strict(make)
    for name in want:
        assert got[name][0] == want[name][0], f"{name}: types {got[name][0]}, JAX's {want[name][0]}"
        try:
            with jax.set_mesh(EMESH):
                base.check(got[name][1], want[name][1], rtol=1e-4, atol=1e-5)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None
    return want


def case_unreduced_and_reduced_values_and_derivatives():
    """Programs with unreduced and reduced manual axes: their values (jitted), the
    gradients of a loss of their outputs and their jvps, values and types against
    JAX's: the cotangent of a reduced value is unreduced (and summed where the input's
    spec asks), that of an unreduced one reduced."""
    want = _compare_unreduced_programs(CI_UNREDUCED_PROGRAMS)
    assert want["reduced input"][0][1] == ["float32[8@x,4@y]", "float32[2]{U:x}"], want

    def collectives_of_fsdp_gradient(lib, np_):
        f, args = _unreduced_programs(lib, np_)["gathered reduced weights (FSDP)"]
        with jax.set_mesh(EMESH):
            hlo = lib.jit(lib.grad(lambda w: f(args[0], w).sum())).lower(
                args[1]).compile().as_text()
        return {op: hlo.count(f" {op}(") for op in ("all-reduce", "reduce-scatter", "all-gather")}
    got, want = strict(collectives_of_fsdp_gradient)
    # the weights' cotangent is reduce-scattered once, never all-reduced
    assert got == want and want["reduce-scatter"] == 1 and not want["all-reduce"], (got, want)


def case_more_unreduced_and_reduced_values_and_derivatives():
    """As case_unreduced_and_reduced_values_and_derivatives, for the other programs."""
    _compare_unreduced_programs([n for n in _unreduced_programs(impl, impl.numpy)
                                 if n not in CI_UNREDUCED_PROGRAMS])


def case_unreduced_and_reduced_casts_print_as_jax():
    """make_jaxpr prints the casts JAX inserts or pcast binds (`preduced`,
    `reduced_vary_cast_p`, `vary_unreduced_cast_p`, `unreduced_psum`) as JAX does."""
    def body(lib):
        lax = lib.lax
        return lambda a, w: (lax.psum(lax.pcast(a, ("y", "x"), to="unreduced"), ("x", "y"))
                             * lax.pcast(lax.pcast(w, "x", to="reduced"), "x",
                                         to="varying")[0])

    def make(lib, np_):
        with jax.set_mesh(EMESH):
            f = esmap(lib, body(lib), out_specs=P("x"))
            return str(lib.make_jaxpr(f)(EX, EW).jaxpr.eqns[0].params["jaxpr"])
    got, want = strict(make)
    assert got == want, f"impl prints\n{got}\nJAX prints\n{want}"
    assert all(s in want for s in ("preduced[axes=('x',)]", "reduced_vary_cast_p",
                                   "vary_unreduced_cast_p", "unreduced_psum")), want


def _collective_programs(lib):
    """name -> (body, out_specs): each collective and cast inside a shard_map body on
    the Explicit mesh, and the derivatives of some (their transposes)."""
    lax = lib.lax
    perm = [(0, 1), (1, 2), (2, 3), (3, 0)]

    def grad_of(f, arg=0):
        return lambda a, w: lib.grad(lambda v: (f(v) ** 2).sum())((a, w)[arg])
    return {
        "psum": (lambda a, w: lax.psum(a, ("x", "y")), P()),
        "pmean": (lambda a, w: lax.pmean(a, "x"), P(None, "y")),
        "pmax": (lambda a, w: lax.pmax(a, "x"), P(None, "y")),
        "pmin": (lambda a, w: lax.pmin(a, "x"), P(None, "y")),
        "all_gather": (lambda a, w: lax.all_gather(a, "x", axis=1, tiled=True), P("x", "y")),
        "all_gather to invarying": (lambda a, w: lax.all_gather(a, "x", to="invarying"),
                                    P(None, None, "y")),
        "all_gather to reduced": (lambda a, w: lax.all_gather(a, "x", to="reduced", tiled=True),
                                  P(None, "y", reduced={"x"})),
        "psum_scatter": (lambda a, w: lax.psum_scatter(a, "y", scatter_dimension=1, tiled=True),
                         P("x", "y")),
        "psum_scatter of unreduced": (lambda a, w: lax.psum_scatter(
            lax.pcast(a, "y", to="unreduced"), "y", scatter_dimension=1, tiled=True),
            P("x", "y")),
        "all_to_all": (lambda a, w: lax.all_to_all(a, "y", 1, 1, tiled=True), P("x", "y")),
        "ppermute": (lambda a, w: lax.ppermute(a, "x", perm), P("x", "y")),
        "pcasts": (lambda a, w: lax.pcast(lax.pcast(w, "x", to="reduced"), "x", to="varying"),
                   P("x")),
        "psum of unreduced": (lambda a, w: lax.psum(lax.pcast(a, "x", to="unreduced"), "x"),
                              P(None, "y")),
        "grad of pmean": (grad_of(lambda v: lax.pmean(v, "x")), P("x", "y")),
        "grad of psum_scatter": (grad_of(lambda v: lax.psum_scatter(
            v, "y", scatter_dimension=1, tiled=True)), P("x", "y")),
        "grad of all_to_all": (grad_of(lambda v: lax.all_to_all(v, "y", 1, 1, tiled=True)),
                               P("x", "y")),
        "grad of ppermute": (grad_of(lambda v: lax.ppermute(v, "x", perm)), P("x", "y")),
    }


def case_collectives_print_as_jax():
    """make_jaxpr prints each collective and cast (and their transposes) inside a
    shard_map body as JAX does: JAX's primitive names and parameters (`reduce_scatter`,
    `all_gather_dimension`, `axis_name`, `axis_size`, `axis_index_groups=None`), and
    a cotangent cast to vary before it is broadcast."""
    failures, printed = [], []
    with jax.set_mesh(EMESH):
        for name in _collective_programs(impl):
            def make(lib, np_):
                body, out_specs = _collective_programs(lib)[name]
                if name.startswith("grad of"):
                    # the derivative's own program, staged inside the body (make_jaxpr
                    # of the shard_map would print its body with dead code removed by
                    # impl, kept by JAX)
                    seen = []
                    esmap(lib, lambda a, w: seen.append(lib.make_jaxpr(body)(a, w)) or a)(
                        EX, EW)
                    return str(seen[0])
                f = esmap(lib, body, out_specs=out_specs)
                return str(lib.make_jaxpr(f)(EX, EW).jaxpr.eqns[0].params["jaxpr"])
            got, want = strict(make)
            printed.append(want)
            if got != want:
                failures.append(f"{name}: impl prints\n{got}\nJAX prints\n{want}")
    assert not failures, "\n".join(failures)
    text = "\n".join(printed)
    assert all(s in text for s in ("reduce_scatter[", "all_gather_dimension=1",
                                   "axis_index_groups=None", "axis_size=4", "axis_name=y",
                                   "pvary[axes=('y',)] 1.0:f32[]")), text


def _ebody_error(body, in_specs=(P("x", "y"), P()), out_specs=P("x", "y"), args=(EX, EW),
                 **kw):
    def make(lib, np_):
        with jax.set_mesh(EMESH):
            return lib.make_jaxpr(esmap(lib, body(lib, np_), in_specs=in_specs,
                                        out_specs=out_specs, **kw))(*args)
    return make


def _unreduced(lib, a):
    return lib.lax.pcast(a, "x", to="unreduced")


def _reduced(lib, w):
    return lib.lax.pcast(w, "x", to="reduced")


UNREDUCED_ERRORS = {
    # casts JAX has no rule for, and collectives of values in two states
    "pcast varying to reduced": _ebody_error(
        lambda lib, np_: lambda a, w: lib.lax.pcast(a, "x", to="reduced")),
    "pcast unreduced to varying": _ebody_error(
        lambda lib, np_: lambda a, w: lib.lax.pcast(_unreduced(lib, a), "x", to="varying")),
    "pcast reduced to unreduced": _ebody_error(
        lambda lib, np_: lambda a, w: lib.lax.pcast(_reduced(lib, w), "x", to="unreduced")),
    "pcast reduced to reduced": _ebody_error(
        lambda lib, np_: lambda a, w: lib.lax.pcast(_reduced(lib, w), "x", to="reduced")),
    "psum over unreduced and varying axes": _ebody_error(
        lambda lib, np_: lambda a, w: lib.lax.psum(_unreduced(lib, a), ("x", "y")),
        out_specs=P()),
    "pmax of unreduced": _ebody_error(
        lambda lib, np_: lambda a, w: lib.lax.pmax(_unreduced(lib, a), "x"), out_specs=P()),
    "all_gather of unreduced": _ebody_error(
        lambda lib, np_: lambda a, w: lib.lax.all_gather(_unreduced(lib, a), "x")),
    "all_gather of invariant to reduced": _ebody_error(
        lambda lib, np_: lambda a, w: lib.lax.all_gather(w, "x", to="reduced")),
    "all_gather to reduced, unchecked": _ebody_error(
        lambda lib, np_: lambda a, w: lib.lax.all_gather(a, "x", to="reduced"),
        check_vma=False),
    "pcast to unreduced, unchecked": _ebody_error(
        lambda lib, np_: lambda a, w: _unreduced(lib, a), check_vma=False),
    # operations meeting unreduced and reduced values
    "sin of unreduced": _ebody_error(lambda lib, np_: lambda a, w: np_.sin(_unreduced(lib, a))),
    "unreduced times a scalar": _ebody_error(
        lambda lib, np_: lambda a, w: _unreduced(lib, a) * 2.0),
    "reduced times a scalar": _ebody_error(lambda lib, np_: lambda a, w: _reduced(lib, w) * 2.0),
    "reduced plus replicated": _ebody_error(lambda lib, np_: lambda a, w: _reduced(lib, w) + w),
    "reduced plus varying": _ebody_error(lambda lib, np_: lambda a, w: _reduced(lib, w) + a),
    "dynamic_update_slice of unreduced with reduced": _ebody_error(
        lambda lib, np_: lambda a, w: lib.lax.dynamic_update_slice(
            _unreduced(lib, a)[0], _reduced(lib, w), (0,))),
    # specs
    "out_specs without the unreduced axis": _ebody_error(
        lambda lib, np_: lambda a, w: _unreduced(lib, a), out_specs=P(None, "y")),
    "out_specs splitting over the unreduced axis": _ebody_error(
        lambda lib, np_: lambda a, w: _unreduced(lib, a)),
    "out_specs reduced without a cast": _ebody_error(
        lambda lib, np_: lambda a, w: w, out_specs=P(reduced={"x"})),
    "out_specs unreduced of an invariant value": _ebody_error(
        lambda lib, np_: lambda a, w: w, out_specs=P(unreduced={"x"})),
    "in_specs without the input's reduced axis": _ebody_error(
        lambda lib, np_: lambda a, w: a, args=(EX, EW_REDUCED)),
    "in_specs with reduced axes the input lacks": _ebody_error(
        lambda lib, np_: lambda a, w: a, in_specs=(P("x", "y"), P(reduced={"x"}))),
    "unreduced out_specs on Auto axes": lambda lib, np_: lib.make_jaxpr(
        smap(lib, lambda a, w: a, out_specs=P(None, "y", unreduced={"x"})))(X, W),
    "unreduced out_specs, manual over part of the mesh": _ebody_error(
        lambda lib, np_: lambda a, w: a, in_specs=P("x"), out_specs=P(unreduced={"x"}),
        args=(ROWS,), axis_names={"x"}),
    # vmap of the casts and collectives
    "vmap of psum of unreduced": lambda lib, np_: lib.vmap(esmap(
        lib, lambda a, w: lib.lax.psum(_unreduced(lib, a), "x"), in_specs=(P(None, "x", "y"), P()),
        out_specs=P(None, None, "y")))(eput(np.stack([X, X]), None, "x", "y"), EW),
    "vmap of gathering to reduced": lambda lib, np_: lib.vmap(esmap(
        lib, lambda a, w: lib.lax.all_gather(a, "x", to="reduced", tiled=True),
        in_specs=(P(None, "x", "y"), P()), out_specs=P(None, None, "y", reduced={"x"})))(
            eput(np.stack([X, X]), None, "x", "y"), EW),
}


def case_unreduced_and_reduced_errors_as_jax():
    """Where JAX refuses casts, collectives, operations or specs with unreduced and
    reduced manual axes, impl raises the same exception type, with JAX's message but
    for MESSAGE_DEPARTURES."""
    same_errors_and_messages(UNREDUCED_ERRORS)


# Operations without an unreduced rule in JAX 0.10.2: inside shard_map JAX drops an
# unreduced operand's axes from the result's type (keeps them, for sort and top_k),
# typing a device's part of a sum as a whole value; impl refuses them
# (NotImplementedError). Reduced operands go as in JAX.
UNREDUCED_REFUSED_INSIDE = {
    "argmax", "argmin", "reduce_max", "reduce_min", "reduce_prod", "clamp", "cumsum", "cumprod",
    "cummax", "cummin", "cumlogsumexp", "gather", "take_along_axis", "scatter", "scatter_add",
    "scatter_mul", "scatter_min", "scatter_max", "integer_pow", "rev", "sort", "top_k",
    "reduce_window_sum", "reduce_window_max", "reduce_window_min", "conv_general_dilated",
    "lu", "qr", "svd", "triangular_solve", "tridiagonal_solve"}


def _inside_outcome(lib, np_, op, kind):
    rows = eput(base.rs(32, 6, seed=35), "x")
    seen = {}

    def body(a, w):
        v = _unreduced(lib, a) if kind == "U" else _reduced(lib, w)
        seen["types"] = [str(lib.typeof(o)) for o in jax.tree_util.tree_leaves(op(v))]
        return lib.lax.psum(a, "x")
    try:
        with jax.set_mesh(EMESH):
            lib.make_jaxpr(esmap(lib, body, in_specs=(P("x"), P()), out_specs=P()))(
                rows, eput(base.rs(8, 6, seed=36)))
    except Exception as e:  # noqa: BLE001 - compared by the caller
        return e
    return seen["types"]


def case_unreduced_and_reduced_operands_of_each_operation_inside():
    """Each operation of base.operations_of_one_operand on a value unreduced (U) or
    reduced (R) over a manual axis: the types JAX gives, or its exception type; but
    for UNREDUCED_REFUSED_INSIDE (which this checks) impl refuses U operands."""
    failures = []
    names = base.operations_of_one_operand(impl, impl.numpy)
    for name in names:
        for kind in ("U", "R"):
            got, want = (_inside_outcome(lib, np_, base.operations_of_one_operand(lib, np_)[name],
                                         kind) for lib, np_ in base.BOTH)
            if kind == "U" and name in UNREDUCED_REFUSED_INSIDE:
                if isinstance(want, Exception) or not isinstance(got, NotImplementedError):
                    failures.append(f"{name} U: JAX gave {want!r}, impl {got!r}")
            elif isinstance(want, Exception) or isinstance(got, Exception):
                if type(got) is not type(want):
                    failures.append(f"{name} {kind}: JAX gave {want!r}, impl {got!r}")
            elif got != want:
                failures.append(f"{name} {kind}: types {got}, JAX's {want}")
    assert not failures, "\n".join(failures)


# JAX 0.10.2 runs these programs of UNREDUCED_REFUSED_INSIDE's operations (the rest fail
# inside it when run: a NotImplementedError about `eq`, or none said).
JAX_FAILS_RUNNING_INSIDE = {"cumlogsumexp", "cumprod", "sort"}


def case_jax_bug_operations_dropping_unreduced_axes_give_wrong_values():
    """Why impl refuses UNREDUCED_REFUSED_INSIDE's operations of an unreduced operand: JAX
    0.10.2 types the result of such an operation (its device's part, unreduced over x)
    as a whole value invariant over x, and its program returns a device's part: the
    operation of one summand, not of the sum (JAX's own result on the summed value). A
    minimal program: with x split over 4 devices, `shard_map(lambda a:
    jnp.flip(lax.pcast(a, 'x', to='unreduced'), 1), in_specs=P('x'), out_specs=P())`
    gives device 0's block flipped. (sort and top_k keep the axes: a sum of sorted
    parts.) impl raises NotImplementedError there."""
    rows = base.rs(32, 6, seed=35)
    summed = rows.reshape(4, 8, 6).sum(0)
    operations = base.operations_of_one_operand(jax, jax.numpy)
    failures = []
    with jax.set_mesh(EMESH):
        split = eput(rows, "x")
        for name in sorted(UNREDUCED_REFUSED_INSIDE):
            op = operations[name]
            unreduced_out = name in ("sort", "top_k")
            body = lambda a, op=op: op(jax.lax.pcast(a, "x", to="unreduced"))  # noqa: E731
            spec = P(unreduced={"x"}) if unreduced_out else P()
            try:
                got = jax.jit(jax.shard_map(body, in_specs=P("x"), out_specs=spec))(split)
                got = np.asarray(jax.sharding.reshard(got, P()) if unreduced_out else got)
            except Exception as e:  # noqa: BLE001 - compared below
                if name not in JAX_FAILS_RUNNING_INSIDE:
                    failures.append(f"{name}: JAX raised {e!r}")
                continue
            if name in JAX_FAILS_RUNNING_INSIDE:
                failures.append(f"{name}: JAX ran it")
            elif np.allclose(got, np.asarray(jax.jit(op)(summed)), rtol=1e-4, atol=1e-4):
                failures.append(f"{name}: JAX's value is the operation of the sum")
            try:
                impl.make_jaxpr(esmap(impl, lambda a, op=base.operations_of_one_operand(
                    impl, impl.numpy)[name]: op(impl.lax.pcast(a, "x", to="unreduced")),
                    in_specs=P("x"), out_specs=spec))(split)
                failures.append(f"{name}: impl took the unreduced operand")
            except NotImplementedError:
                pass
    assert not failures, "\n".join(failures)


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


def case_negative_an_unreduced_psum_that_does_not_sum_is_caught():
    """psum of unreduced values lowered without the sum leaves each device its own part;
    the value comparison sees it."""
    collectives = importlib.import_module("impl.primitives.collectives")
    lowering = importlib.import_module("impl.interpreters.lowering")
    with base._patched(lowering, "lowering_rules", dict(lowering.lowering_rules)):
        lowering.lowering_rules[collectives.unreduced_psum_p] = lambda x, *, axes: x
        base.raises(AssertionError, case_unreduced_and_reduced_values_and_derivatives)


def case_negative_manual_unreduced_axes_dropped_are_caught():
    """An add that forgets its operands' unreduced axes types a sum of parts as a whole
    value; the type comparison sees it."""
    core = importlib.import_module("impl.core")
    add_p = importlib.import_module("impl.primitives.elementwise").add_p
    with base._patched(core, "unreduced_rules", dict(core.unreduced_rules)):
        core.unreduced_rules[add_p] = lambda x, y: (frozenset(), frozenset())
        base.raises(AssertionError, case_unreduced_and_reduced_types_in_the_body_as_jax)


def case_negative_collectives_printed_with_impl_names_are_caught():
    """all_gather printed with impl's own parameter names: the printing case sees it."""
    core = importlib.import_module("impl.core")
    all_gather_p = importlib.import_module("impl.primitives.collectives").all_gather_p
    with base._patched(core, "pp_params_rules", dict(core.pp_params_rules)):
        del core.pp_params_rules[all_gather_p]
        base.raises(AssertionError, case_collectives_print_as_jax)


def case_negative_unchecked_in_specs_are_caught():
    """Without the check of in_specs against the arguments' types impl accepts a reduced
    argument split as replicated, which JAX refuses; the error comparison sees it."""
    shard_map_module = importlib.import_module("impl.shard_map")
    with base._patched(shard_map_module, "_check_specs_match_types", lambda *a, **k: None):
        base.raises(AssertionError, case_unreduced_and_reduced_errors_as_jax)


def case_negative_unreduced_axes_dropped_as_jax_drops_them_are_caught():
    """Primitives without an unreduced rule that drop unreduced manual axes, as JAX's do,
    instead of refusing them: the comparison of each operation sees it."""
    core = importlib.import_module("impl.core")
    with base._patched(core, "unreduced_rules", dict(core.unreduced_rules)):
        reduce_max_p = importlib.import_module("impl.primitives.reductions").reduce_max_p
        core.unreduced_rules[reduce_max_p] = lambda x, **params: (frozenset(), frozenset())
        base.raises(AssertionError, case_unreduced_and_reduced_operands_of_each_operation_inside)


if __name__ == "__main__":
    sys.exit(base.main(namespace=globals(), description=__doc__.splitlines()[0]))
