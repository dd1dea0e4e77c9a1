"""jax.lax.custom_linear_solve and jax.lax.custom_root: solvers whose derivatives come
from implicit differentiation of the equation they solve.

Both stage the user's functions as programs without constants (their constants become
explicit operands, so that derivatives with respect to closed-over values flow):
custom_linear_solve binds the `custom_linear_solve` primitive
(impl/primitives/linear_solve.py); custom_root is a custom_jvp function whose rule
solves the linearized system with `tangent_solve`:
f(m, u*(m)) = 0  gives  du* = -(d_u f)^-1 (d_m f dm).
"""
from __future__ import annotations

from jax import tree_util

from impl import core
from impl.core import get_aval
from impl.custom_derivatives.jvp import custom_jvp
from impl.interpreters import ad
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import UndefinedPrimal, Zero, instantiate_zeros
from impl.primitives.elementwise import neg
from impl.primitives.linear_solve import SolvePrograms, custom_linear_solve_p


def _stage(flat_fun, avals):
    """(program without constants, its constants) for a function of flat arrays."""
    closed, _ = pe.trace_to_jaxpr(flat_fun, list(avals))
    return pe.convert_constvars_to_invars(closed)


def _with_tree(fun, tree, fun_name, expected_name, has_aux, aux_box, check_shapes=None):
    """`fun` of a pytree shaped `tree`, as a function of flat leaves returning the flat
    leaves of its output (then of its auxiliary output, whose tree goes in `aux_box`)."""
    def flat(*leaves):
        out = fun(tree_util.tree_unflatten(tree, leaves))
        aux = []
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise ValueError(f"{fun_name}() produced a pytree with structure "
                                 f"{tree_util.tree_structure(out)}, but a pytree tuple with "
                                 "auxiliary output was expected because has_aux was set to "
                                 "True.")
            out, aux = out
        out_leaves, out_tree = tree_util.tree_flatten(out)
        if check_shapes is not None:   # checked first, as JAX
            got = [get_aval(x).shape for x in out_leaves]
            if got != check_shapes:
                raise ValueError(f"{fun_name}() output shapes must match {expected_name}, "
                                 f"got {got} and {check_shapes}")
        if out_tree != tree:
            raise TypeError(f"{fun_name}() output pytree structure must match "
                            f"{expected_name}, got {out_tree} and {tree}.")
        aux_leaves, aux_box["tree"] = tree_util.tree_flatten(aux)
        return list(out_leaves) + list(aux_leaves)
    return flat


def _as_tree_fun(flat_fun, tree):
    return lambda x: tree_util.tree_unflatten(
        tree, flat_fun(*tree_util.tree_leaves(x)))


# ------------------------------------------------------------ custom_linear_solve

def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
    """solve(matvec, b), differentiated through the equation matvec(x) = b rather than
    through `solve`. Reverse mode needs `transpose_solve` (or symmetric=True)."""
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_leaves, tree = tree_util.tree_flatten(b)
    avals = [get_aval(x) for x in b_leaves]
    shapes = [a.shape for a in avals]
    box = {}
    matvec_prog, matvec_consts = _stage(
        _with_tree(matvec, tree, "matvec", "b", False, box, shapes), avals)
    solve_prog, solve_consts = _stage(_with_tree(
        lambda y: solve(matvec, y), tree, "solve", "b", has_aux, box, shapes), avals)
    aux_tree = box["tree"]
    vecmat_prog = tr_prog = None
    vecmat_consts = tr_consts = []
    if transpose_solve is not None:
        if symmetric:
            vecmat_prog, vecmat_consts, vecmat = matvec_prog, matvec_consts, matvec
        else:
            def vecmat_flat(*cts):
                linear = list(matvec_consts) + [UndefinedPrimal(a) for a in avals]
                out = ad.backward_pass(matvec_prog.jaxpr, [], linear, list(cts))
                return [instantiate_zeros(c) for c in out[len(matvec_consts):]]
            vecmat_prog, vecmat_consts = _stage(vecmat_flat, avals)
            vecmat = _as_tree_fun(vecmat_flat, tree)
        tr_prog, tr_consts = _stage(_with_tree(
            lambda y: transpose_solve(vecmat, y), tree, "transpose_solve", "b", has_aux,
            {}, shapes), avals)
    groups = (matvec_consts, vecmat_consts, solve_consts, tr_consts)
    outs = custom_linear_solve_p.bind(
        *[c for g in groups for c in g], *b_leaves,
        programs=SolvePrograms(matvec_prog, vecmat_prog, solve_prog, tr_prog),
        const_counts=tuple(map(len, groups)))
    x = tree_util.tree_unflatten(tree, outs[:len(b_leaves)])
    if has_aux:
        return x, tree_util.tree_unflatten(aux_tree, outs[len(b_leaves):])
    return x


# -------------------------------------------------------------------- custom_root

def _tangent_or_zero(primal, tangent):
    """The rule's tangent of `primal`, or a symbolic zero where none can flow."""
    if not core.is_float_dtype(get_aval(primal).dtype):
        return Zero(ad.tangent_aval(get_aval(primal)))
    return tangent


def _checked_tangents(avals, tangents):
    """Tangents for the linearized f, which must have the types of its inputs."""
    for a, t in zip(avals, tangents):
        got = get_aval(t)
        if got.shape != a.shape or got.dtype != a.dtype:
            raise ValueError("custom_root: the linearized function given to tangent_solve "
                             f"was called on a tangent of type {got.str_short()} where its "
                             f"input has type {a.str_short()}")
    return list(tangents)


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """solve(f, initial_guess), differentiated (with respect to what f closes over) by
    the implicit function theorem at the root, with `tangent_solve(g, y)` solving the
    linearized system g(x) = y."""
    guess, tree = tree_util.tree_flatten(initial_guess)
    n = len(guess)
    avals = [get_aval(x) for x in guess]
    box = {}
    f_flat = _with_tree(f, tree, "f", "initial_guess", False, box)
    f_prog, f_consts = _stage(f_flat, avals)
    solve_prog, solve_consts = _stage(_with_tree(
        lambda x: solve(f, x), tree, "solve", "initial_guess", has_aux, box), avals)
    aux_tree = box["tree"]

    def linearize_and_solve(*args):
        x, rhs = args[:n], args[n:]
        _, linear = ad.linearize_flat(f_flat, list(x))
        g = _as_tree_fun(lambda *t: [instantiate_zeros(o) for o in linear.jvp(
            _checked_tangents(linear.in_avals, t))], tree)
        return _with_tree(lambda y: tangent_solve(g, y), tree, "tangent_solve", "x", False,
                          {})(*rhs)
    ls_prog, ls_consts = _stage(linearize_and_solve, avals * 2)
    counts = (len(f_consts), len(solve_consts), len(ls_consts))

    def split(args):
        a, b, c = counts
        return args[:a], args[a:a + b], args[a + b:a + b + c], args[a + b + c:]

    def solve_root(*args):
        _, s_consts, _, x0 = split(args)
        return core.eval_jaxpr(solve_prog.jaxpr, [], *s_consts, *x0)

    root = custom_jvp(solve_root)

    @root.defjvp
    def _root_jvp(primals, tangents):
        fc, _, lc, _ = split(primals)
        fc_dot = [_tangent_or_zero(p, t) for p, t in zip(fc, split(tangents)[0])]
        outs = root(*primals)
        solution, aux = list(outs[:n]), list(outs[n:])
        f_at_root = lambda *c: core.eval_jaxpr(f_prog.jaxpr, [], *c, *solution)  # noqa: E731
        _, rhs = ad.jvp_flat(f_at_root, list(fc), fc_dot)
        rhs = [instantiate_zeros(r) for r in rhs]
        dx = core.eval_jaxpr(ls_prog.jaxpr, [], *lc, *solution, *rhs)
        return outs, [neg(d) for d in dx] + [
            ad.zeros_like_aval(ad.tangent_aval(get_aval(a))) for a in aux]

    outs = root(*f_consts, *solve_consts, *ls_consts, *guess)
    x = tree_util.tree_unflatten(tree, outs[:n])
    if has_aux:
        return x, tree_util.tree_unflatten(aux_tree, outs[n:])
    return x
