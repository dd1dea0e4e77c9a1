"""`custom_linear_solve`: a linear solve whose derivatives come from the equation it
solves (implicit differentiation), not from differentiating the solver.

The primitive holds four programs without constants, `programs` (a `SolvePrograms`):
`matvec` (the linear map A), `vecmat` (its transpose), `solve` (x from b, plus any
auxiliary outputs) and `transpose_solve` (the solve of the transposed system); `vecmat`
and `transpose_solve` are None when no transpose_solve was given. The operands are each
program's constants, in that order (`const_counts` of them), then the leaves of b.

* evaluation and lowering run `solve`.
* jvp: from A x = b, A dx = db - dA x; dx is another solve with the same programs
  (dA x is the derivative of matvec with respect to its constants at fixed x).
  Auxiliary outputs get zero tangents.
* transpose (linear in b): the cotangent of b solves the transposed system, A^T ct_b =
  ct_x: the same primitive with the programs swapped (vecmat for matvec, transpose_solve
  for solve). It needs transpose_solve (TypeError otherwise, as JAX).
* batching: every b and x is batched (the programs batched to match), which keeps the
  four programs consistent without JAX's fixpoint over which of them vary.
"""
from __future__ import annotations

from typing import NamedTuple

from impl import core
from impl.core import get_aval
from impl.interpreters import ad, batching, lowering
from impl.interpreters.ad import Zero, instantiate_zeros, is_undefined_primal
from impl.primitives._define import define
from impl.primitives.elementwise import neg


class SolvePrograms(NamedTuple):
    matvec: core.ClosedJaxpr
    vecmat: core.ClosedJaxpr | None
    solve: core.ClosedJaxpr
    transpose_solve: core.ClosedJaxpr | None

    def transposed(self):
        return SolvePrograms(self.vecmat, self.matvec, self.transpose_solve, self.solve)


def _split(args, const_counts):
    """(constants of each program, b)."""
    groups, start = [], 0
    for n in const_counts:
        groups.append(list(args[start:start + n]))
        start += n
    return SolvePrograms(*groups), list(args[start:])


def _solve_aval(*avals, programs, const_counts):
    _, b = _split(avals, const_counts)
    n_aux = len(programs.solve.out_avals) - len(programs.matvec.out_avals)
    return list(b) + list(programs.solve.out_avals[len(b):len(b) + n_aux])


def _solve_eval(*args, programs, const_counts):
    consts, b = _split(args, const_counts)
    return core.eval_jaxpr(programs.solve.jaxpr, [], *consts.solve, *b)


def _solve_lower(*args, programs, const_counts):
    consts, b = _split(args, const_counts)
    return lowering.eval_jaxpr_lowered(programs.solve.jaxpr, [], list(consts.solve) + b)


def _zero_tangent(x):
    return Zero(ad.tangent_aval(get_aval(x)))


def _solve_jvp(primals, tangents, *, programs, const_counts):
    params = dict(programs=programs, const_counts=const_counts)
    outs = custom_linear_solve_p.bind(*primals, **params)
    consts, b = _split(primals, const_counts)
    consts_dot, b_dot = _split(tangents, const_counts)
    x = outs[:len(b)]
    rhs = list(b_dot)
    if any(type(t) is not Zero for t in consts_dot.matvec):
        # dA x: the derivative of matvec along its constants' tangents, x held fixed
        _, da_x = ad.jvp_flat(core.jaxpr_as_fun(programs.matvec), consts.matvec + x,
                              consts_dot.matvec + [_zero_tangent(v) for v in x])
        rhs = [ad.add_tangents(r, neg(d)) if type(d) is not Zero else r
               for r, d in zip(rhs, da_x)]
    if all(type(r) is Zero for r in rhs):
        return outs, [_zero_tangent(o) for o in outs]
    flat_consts = [c for group in consts for c in group]
    x_dot = custom_linear_solve_p.bind(*flat_consts, *map(instantiate_zeros, rhs), **params)
    return outs, list(x_dot[:len(b)]) + [_zero_tangent(o) for o in outs[len(b):]]


def _solve_transpose(cts, *args, programs, const_counts):
    if programs.transpose_solve is None:
        raise TypeError("transpose_solve required for backwards mode automatic "
                        "differentiation of custom_linear_solve")
    consts, b = _split(args, const_counts)
    if any(is_undefined_primal(c) for group in consts for c in group):
        raise NotImplementedError("custom_linear_solve: transposing with respect to the "
                                  "constants of matvec or solve is not supported (as JAX)")
    ct_x, ct_aux = cts[:len(b)], cts[len(b):]
    if any(type(ct) is not Zero for ct in ct_aux):
        raise NotImplementedError("custom_linear_solve: the auxiliary outputs of solve "
                                  "cannot be transposed (as JAX)")
    swapped = consts.transposed()
    ct_b = custom_linear_solve_p.bind(
        *[c for group in swapped for c in group], *map(instantiate_zeros, ct_x),
        programs=programs.transposed(), const_counts=tuple(map(len, swapped)))
    return [None] * sum(const_counts) + list(ct_b[:len(b)])


def _batched_avals(avals, dims, size):
    return [a if d is None else a.update(shape=(size,) + a.shape, explicit_sharding=None)
            for a, d in zip(avals, dims)]


def _solve_batch(axis_data, vals, dims, *, programs, const_counts):
    size = axis_data.size
    consts, b = _split(vals, const_counts)
    const_dims, b_dims = _split(dims, const_counts)
    consts = [[batching.bdim_at_front(c, d, size) if d is not None else c
               for c, d in zip(cs, ds)] for cs, ds in zip(consts, const_dims)]
    const_dims = [[None if d is None else 0 for d in ds] for ds in const_dims]
    b = [batching.bdim_at_front(x, d, size) for x, d in zip(b, b_dims)]
    vec_dims = [0] * len(b)

    def batch(program, cdims):
        if program is None:
            return None
        in_dims = list(cdims) + vec_dims
        avals = _batched_avals(program.in_avals, in_dims, size)
        return batching.batch_jaxpr(program, axis_data, avals, in_dims, instantiate=True)[0]

    batched = SolvePrograms(*[batch(p, ds) for p, ds in zip(programs, const_dims)])
    outs = custom_linear_solve_p.bind(*[c for group in consts for c in group], *b,
                                      programs=batched, const_counts=const_counts)
    return outs, [0] * len(outs)


custom_linear_solve_p = define(
    "custom_linear_solve", abstract_eval=_solve_aval, lowering=_solve_lower,
    impl=_solve_eval, jvp=_solve_jvp, transpose=_solve_transpose, batching=_solve_batch,
    multiple_results=True, vma_rule=core.TYPED_BY_ABSTRACT_EVAL,
    sharding_rule=core.TYPED_BY_ABSTRACT_EVAL)   # x has b's type, as in JAX
