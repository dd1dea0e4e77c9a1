"""linear_call: a call linear in some arguments, with a user-given transpose.

`linear_call` binds its staged function (`callee`) and its transpose. Transposing the
call gives a `linear_call` of the transpose whose own transpose is the callee again, so
transposing any number of times alternates the two.

The user's transpose is staged only when the call is first transposed: a transpose may
itself call linear_call with the original function as its transpose (recursion), so
staging both at the call would never end. So the `transpose` parameter is an object
whose `stage(callee_consts, transpose_consts, residuals, ct_avals)` returns (program,
consts), the program mapping (consts, residuals, output cotangents) to the cotangents of
the linear inputs: `_LazyTranspose` for the user's function, `_StagedTranspose` for a
staged program (the callee, once the call has been transposed), `_BatchedTranspose`
under vmap.

Operands: the callee's constants, the transpose's constants (none while it is lazy),
the residuals, the linear arguments.
"""
from __future__ import annotations

from impl import core
from impl.core import Tracer, get_aval
from impl.custom_derivatives.common import (
    call_substituted, check_jaxtypes, check_program_args, drop_axis, eval_program,
    instantiate, move_batch_to_front, name_of, stage, tree_flatten, tree_unflatten,
    type_str)
from impl.interpreters import ad, batching, lowering
from impl.interpreters import partial_eval as pe
from impl.interpreters.ad import Zero
from impl.primitives._define import define
from impl.primitives.elementwise import convert_element_type


class _StagedTranspose:
    """A staged transpose program; its constants are the call's transpose constants."""

    def __init__(self, program):
        self.program = program

    def __repr__(self):
        return "staged"

    def stage(self, callee_consts, transpose_consts, res, ct_avals):
        return self.program, list(transpose_consts)


class _LazyTranspose:
    """The user's transpose function, staged when the call is transposed. The values it
    closes over that are also operands of the call (the callee's constants, the
    residuals) stand for their current counterparts (see common.call_substituted)."""

    def __init__(self, fun_transpose, res_tree, out_tree, lin_tree, lin_avals, out_avals,
                 callee_consts, residuals):
        self.fun = fun_transpose
        self.res_tree, self.out_tree, self.lin_tree = res_tree, out_tree, lin_tree
        self.lin_avals, self.out_avals = lin_avals, out_avals
        self.callee_consts, self.residuals = list(callee_consts), list(residuals)
        self.staged = None   # (program, consts) when it holds no tracer

    def __repr__(self):
        return name_of(self.fun)

    def stage(self, callee_consts, transpose_consts, res, ct_avals):
        callee_consts, res = list(callee_consts), list(res)
        reusable = all(a is b for a, b in zip(self.callee_consts + self.residuals,
                                              callee_consts + res))
        if reusable and self.staged is not None:
            return self.staged
        nres = len(res)
        res_avals = [get_aval(r) for r in res]

        def flat_transpose(*xs):
            # The residuals are the program's inputs; the callee's constants outer values.
            return call_substituted(self.callee_consts + self.residuals,
                                    callee_consts + list(xs[:nres]), self._run,
                                    xs[:nres], xs[nres:])

        result = stage(flat_transpose, res_avals + list(self.out_avals))
        if reusable and not any(isinstance(c, Tracer) for c in result[1]):
            self.staged = result
        return result

    def _run(self, res, cts):
        name = name_of(self.fun)
        out = self.fun(tree_unflatten(self.res_tree, res), tree_unflatten(self.out_tree, cts))
        leaves, tree = tree_flatten(out)
        if tree != self.lin_tree:
            raise TypeError("transpose output pytree structure must match that of linear "
                            f"inputs, got output structure {tree} and input structure "
                            f"{self.lin_tree}.")
        check_jaxtypes(leaves, f"The outputs of linear_call transpose {name}")
        bad = [f"  leaf {i}: transpose gives {type_str(get_aval(x))}, linear input is "
               f"{type_str(a)}" for i, (x, a) in enumerate(zip(leaves, self.lin_avals))
               if get_aval(x).shape != a.shape]
        if bad:
            raise TypeError(f"linear_call transpose {name} must produce outputs with the "
                            "shapes of the linear inputs, but got:\n" + "\n".join(bad))
        return [x if get_aval(x).dtype == a.dtype and not get_aval(x).weak_type
                else convert_element_type(x, a.dtype) for x, a in zip(leaves, self.lin_avals)]


class _BatchedTranspose:
    """The transpose of a linear_call under vmap: the inner transpose, staged for one
    example and batched. Every output is batched: vmap's batching rule gives the
    linear inputs a batch axis (broadcasting them), so their cotangents have one."""

    def __init__(self, inner, axis_data, fc_dims, tc_dims, res_dims, ct_dims):
        self.inner, self.axis_data = inner, axis_data
        self.dims = (fc_dims, tc_dims, res_dims, ct_dims)

    def __repr__(self):
        return f"vmap({self.inner!r})"

    def stage(self, callee_consts, transpose_consts, res, ct_avals):
        fc, tc, res = list(callee_consts), list(transpose_consts), list(res)
        fc_d, tc_d, res_d, ct_d = self.dims
        n_fc, n_tc, n_res = len(fc), len(tc), len(res)
        vals_avals = [get_aval(v) for v in fc + tc + res] + list(ct_avals)
        all_dims = fc_d + tc_d + res_d + ct_d
        ex_avals = [drop_axis(a, d) for a, d in zip(vals_avals, all_dims)]

        def per_example(*xs):
            ex_fc, ex_tc, ex_res, ex_cts = _split4(xs, n_fc, n_tc, n_res)
            program, consts = self.inner.stage(ex_fc, ex_tc, ex_res,
                                               _split4(ex_avals, n_fc, n_tc, n_res)[3])
            return eval_program(program, list(consts) + ex_res + ex_cts)

        example = pe.make_closed_jaxpr(per_example, ex_avals)
        program, _ = batching.batch_jaxpr(example, self.axis_data, vals_avals, all_dims,
                                          instantiate=True)
        return program, fc + tc


def _split4(args, nfc, ntc, nres):
    a, b, c = nfc, nfc + ntc, nfc + ntc + nres
    return list(args[:a]), list(args[a:b]), list(args[b:c]), list(args[c:])


def _linear_call_impl(*args, callee, transpose, num_callee_consts, num_transpose_consts,
                      num_res):
    fc, _, res, lin = _split4(args, num_callee_consts, num_transpose_consts, num_res)
    return eval_program(callee, fc + res + lin)


def _linear_call_abstract_eval(*avals, callee, transpose, num_callee_consts,
                               num_transpose_consts, num_res):
    fc, _, res, lin = _split4(avals, num_callee_consts, num_transpose_consts, num_res)
    check_program_args("linear_call", fc + res + lin, callee.in_avals)
    return callee.out_avals


def _linear_call_lowering(*args, callee, transpose, num_callee_consts, num_transpose_consts,
                          num_res):
    fc, _, res, lin = _split4(args, num_callee_consts, num_transpose_consts, num_res)
    return lowering.eval_jaxpr_lowered(callee.jaxpr, callee.consts, fc + res + lin)


def _linear_call_transpose(cts, *args, callee, transpose, num_callee_consts,
                           num_transpose_consts, num_res):
    fc, tc, res, lin = _split4(args, num_callee_consts, num_transpose_consts, num_res)
    if any(ad.is_undefined_primal(x) for x in fc + tc + res):
        raise TypeError("linear_call is linear only in its linear_args; a residual argument "
                        "(or a value its functions close over) depends on the inputs being "
                        "transposed")
    t_program, t_consts = transpose.stage(fc, tc, res, callee.out_avals)
    cts = [instantiate(ct, a) for ct, a in zip(cts, callee.out_avals)]
    outs = linear_call_p.bind(*t_consts, *fc, *res, *cts, callee=t_program,
                              transpose=_StagedTranspose(callee),
                              num_callee_consts=len(t_consts),
                              num_transpose_consts=len(fc), num_res=num_res)
    return [None] * (len(fc) + len(tc) + len(res)) + [
        o if ad.is_undefined_primal(x) else None for o, x in zip(outs, lin)]


def _linear_call_jvp(primals, tangents, *, callee, transpose, num_callee_consts,
                     num_transpose_consts, num_res):
    params = dict(callee=callee, transpose=transpose, num_callee_consts=num_callee_consts,
                  num_transpose_consts=num_transpose_consts, num_res=num_res)
    outs = linear_call_p.bind(*primals, **params)
    fc, tc, res, lin = _split4(primals, num_callee_consts, num_transpose_consts, num_res)
    tfc, _, tres, tlin = _split4(tangents, num_callee_consts, num_transpose_consts, num_res)
    out_ts = [Zero(ad.tangent_aval(a)) for a in callee.out_avals]
    if any(type(t) is not Zero for t in tlin):
        # linear in lin: the same call applied to the tangents
        t1 = linear_call_p.bind(*fc, *tc, *res, *[ad.instantiate_zeros(t) for t in tlin],
                                **params)
        out_ts = [ad.add_tangents(a, b) for a, b in zip(out_ts, t1)]
    if any(type(t) is not Zero for t in tfc + tres):
        # not linear in its residuals: differentiate the callee's program there
        zeros = [Zero(ad.tangent_aval(get_aval(x))) for x in lin]
        _, t2 = ad.jvp_flat(core.jaxpr_as_fun(callee), fc + res + lin, tfc + tres + zeros)
        out_ts = [ad.add_tangents(a, b) for a, b in zip(out_ts, t2)]
    return outs, out_ts


def _linear_call_batch(axis_data, vals, dims, *, callee, transpose, num_callee_consts,
                       num_transpose_consts, num_res):
    vals, dims = move_batch_to_front(vals, dims)
    fc, tc, res, lin = _split4(vals, num_callee_consts, num_transpose_consts, num_res)
    fc_d, tc_d, res_d, lin_d = _split4(dims, num_callee_consts, num_transpose_consts,
                                       num_res)
    # Every linear input batched: then the transpose maps batched cotangents to batched
    # cotangents, and vmap's broadcast of an unbatched input sums them when transposed.
    lin = [batching.broadcast_batch(x, axis_data.size, 0) if d is None else x
           for x, d in zip(lin, lin_d)]
    lin_d = [0] * len(lin)
    bcallee, out_dims = batching.batch_jaxpr(
        callee, axis_data, [get_aval(v) for v in fc + res + lin], fc_d + res_d + lin_d)
    btranspose = _BatchedTranspose(transpose, axis_data, fc_d, tc_d, res_d, out_dims)
    outs = linear_call_p.bind(*fc, *tc, *res, *lin, callee=bcallee, transpose=btranspose,
                              num_callee_consts=num_callee_consts,
                              num_transpose_consts=num_transpose_consts, num_res=num_res)
    return outs, out_dims


linear_call_p = define("linear_call", multiple_results=True, impl=_linear_call_impl,
                       abstract_eval=_linear_call_abstract_eval,
                       lowering=_linear_call_lowering, jvp=_linear_call_jvp,
                       transpose=_linear_call_transpose, batching=_linear_call_batch,
                       vma_rule=core.TYPED_BY_ABSTRACT_EVAL)


def linear_call(fun, fun_transpose, residual_args, linear_args):
    """Call fun(residual_args, linear_args), linear in linear_args, with a custom
    transpose: transposing gives fun_transpose(residual_args, cotangent), whose own
    transpose is `fun` again."""
    res_flat, res_tree = tree_flatten(residual_args)
    lin_flat, lin_tree = tree_flatten(linear_args)
    check_jaxtypes(res_flat, "linear_call residual_args")
    check_jaxtypes(lin_flat, "linear_call linear_args")
    res_avals = [get_aval(x) for x in res_flat]
    lin_avals = [get_aval(x).strip_weak_type() for x in lin_flat]
    nres = len(res_flat)
    store = {}

    def f_flat(*xs):
        out = fun(tree_unflatten(res_tree, xs[:nres]), tree_unflatten(lin_tree, xs[nres:]))
        leaves, store["out_tree"] = tree_flatten(out)
        check_jaxtypes(leaves, f"The outputs of linear_call function {name_of(fun)}")
        return leaves

    callee, f_consts = stage(f_flat, res_avals + lin_avals)
    out_tree = store["out_tree"]
    out_avals = [a.strip_weak_type() for a in callee.out_avals]
    transpose = _LazyTranspose(fun_transpose, res_tree, out_tree, lin_tree, lin_avals,
                               out_avals, f_consts, res_flat)
    outs = linear_call_p.bind(*f_consts, *res_flat, *lin_flat, callee=callee,
                              transpose=transpose, num_callee_consts=len(f_consts),
                              num_transpose_consts=0, num_res=nres)
    return tree_unflatten(out_tree, outs)


__all__ = ["linear_call", "linear_call_p"]
