"""Laws of the batching extensions: chunked vmap, reduce_axes, ragged piles,
and vmap over PRNG keys.

JAX lacks chunk_size, reduce_axes and piles: those laws are skipped there as
unsupported (properties.features probes each), and run on any backend that
has them.
"""
from __future__ import annotations

import numpy as np

from .. import features
from ._common import (all_argnums, assert_close, check_conditioning, directions, discard, evaluate,
                      evaluate_compiled, example_args, fail, one_level, require_finite, scalarize, stack)
from .vmap import _example_output, _per_example_check


def chunked_vmap_matches_vmap(backend, case):
    """vmap(f, chunk_size=k) equals vmap(f): values, under jit and under an outer
    vmap, and the gradient of a weighted sum of the batched outputs."""
    f = case.program.build(backend)
    _per_example_check(f, case)
    in_axes, out_axes, _ = one_level(case)
    kw = dict(in_axes=in_axes, out_axes=out_axes)
    want = evaluate(backend.vmap(f, **kw), *case.args)
    chunked = backend.vmap(f, chunk_size=case.chunk_size, **kw)
    assert_close(case, f"vmap(f, chunk_size={case.chunk_size}) vs vmap(f)",
                 evaluate(chunked, *case.args), want)
    assert_close(case, "jit of the chunked vmap vs vmap(f)",
                 evaluate_compiled(backend, chunked, *case.args), want)
    # under an outer vmap over the arguments and their batch-reversed copies
    flipped = [a if ax is None else np.flip(a, ax) for a, ax in zip(case.args, in_axes)]
    outer = backend.vmap(chunked, in_axes=tuple(None if ax is None else 0 for ax in in_axes))
    got = evaluate(outer, *[a if ax is None else np.stack([a, b])
                            for a, b, ax in zip(case.args, flipped, in_axes)])
    assert_close(case, "vmap of the chunked vmap vs vmap(f) of each",
                 got, np.stack([want, evaluate(backend.vmap(f, **kw), *flipped)]))
    argnums = all_argnums(case.args)
    g_want = evaluate(backend.grad(scalarize(backend, backend.vmap(f, **kw), want), argnums=argnums),
                      *case.args)
    require_finite(g_want, what="gradient")
    g_got = evaluate(backend.grad(scalarize(backend, chunked, want), argnums=argnums), *case.args)
    assert_close(case, "grad through the chunked vmap vs through vmap(f)", g_got, g_want)


def reduce_axes_matches_summed_grads(backend, case):
    """vmap(grad(g, reduce_axes=('batch',)), in_axes=(None, ...), out_axes=None,
    axis_name='batch') returns the sum over the batch of the per-example
    gradients with respect to the shared (unbatched) first argument, and the
    per-example gradients with respect to a batched one."""
    f = case.program.build(backend)
    _per_example_check(f, case)
    out0, _ = _example_output(f, case)
    g = scalarize(backend, f, out0)
    # a batched argument's gradient is not summed: it stays per example
    in_axes, _, size = one_level(case)
    k = next((i for i, ax in enumerate(in_axes) if ax is not None), None)
    if k is None:
        discard("no batched argument")
    mapped = in_axes[k]
    per_example = [evaluate(backend.grad(g, argnums=(0, k)), *example_args(case.args, in_axes, i))
                   for i in range(size)]
    require_finite(per_example, what="per-example gradient")
    want = np.sum(np.stack([p[0] for p in per_example]), axis=0)
    total = backend.vmap(backend.grad(g, argnums=(0, k), reduce_axes=("batch",)), in_axes=in_axes,
                         out_axes=(None, mapped), axis_name="batch")
    got, got_mapped = evaluate(total, *case.args)
    assert_close(case, "grad with reduce_axes vs summed per-example gradients", got, want)
    assert_close(case, "grad with reduce_axes of a batched argument vs per-example gradients",
                 got_mapped, np.stack([p[1] for p in per_example], axis=mapped))
    value_total = backend.vmap(backend.value_and_grad(g, argnums=0, reduce_axes=("batch",)),
                               in_axes=in_axes, out_axes=(0, None), axis_name="batch")
    _, got = evaluate(value_total, *case.args)
    assert_close(case, "value_and_grad with reduce_axes vs summed per-example gradients", got, want)
    # Second order, inside the vmap (where the cotangent sum is bound): the summed gradient's
    # jvp along u is the sum of the per-example gradients' jvps, and its vjp against w is,
    # on each member, that member's per-example vjp against the sum of every member's w
    # (the summing step transposes to itself, as psum does). No reduce_axes in the
    # references: this checks the rules of the summing step itself.
    x0, rest, rest_axes = case.args[0], case.args[1:], in_axes[1:]
    (u,), (w,) = directions((x0,), salt=11), directions((np.asarray(want),), salt=12)
    summed = backend.grad(g, argnums=0, reduce_axes=("batch",))
    forward = backend.vmap(lambda x, *r: backend.jvp(lambda a: summed(a, *r), (x,), (u,))[1],
                           in_axes=in_axes, out_axes=None, axis_name="batch")
    backward = backend.vmap(lambda x, *r: backend.vjp(lambda a: summed(a, *r), x)[1](w)[0],
                            in_axes=in_axes, out_axes=0, axis_name="batch")
    forward_want, backward_want = [], []
    for i in range(size):
        sliced = example_args(rest, rest_axes, i)
        example = backend.grad(g, argnums=0)
        forward_want.append(evaluate(lambda x: backend.jvp(lambda a: example(a, *sliced), (x,), (u,))[1], x0))
        backward_want.append(evaluate(lambda x: backend.vjp(lambda a: example(a, *sliced), x)[1](
            size * w)[0], x0))
    assert_close(case, "jvp of the reduce_axes gradient vs summed per-example jvps",
                 evaluate(forward, *case.args), np.sum(np.stack(forward_want), axis=0))
    assert_close(case, "per-member vjp of the reduce_axes gradient vs per-example vjps",
                 evaluate(backward, *case.args), np.stack(backward_want))


def _pile_run(backend, case, w, jit=False):
    axis = features.pile_axis(backend)
    f = case.element_fun(backend, w)
    out_axes = axis if case.ragged_output else 0
    mapped = backend.vmap(f, in_axes=axis, out_axes=out_axes, axis_size=len(case.xs))
    run = (lambda p: mapped(p)) if not jit else backend.jit(mapped)
    out = run(backend.pile(list(case.xs), axis=case.axis))
    return out.unpile() if case.ragged_output else out


def pile_map_matches_loop(backend, case):
    """vmap over a pile (pile_axis in, pile_axis or 0 out) equals a loop over
    the unpiled arrays, eagerly and under jit."""
    f = case.element_fun(backend)
    want = [evaluate(f, x) for x in case.xs]
    require_finite(want, what="per-element output")
    for jit in (False, True):
        got = evaluate(lambda: _pile_run(backend, case, case.w, jit))
        if case.ragged_output:
            if len(got) != len(want):
                fail(case, f"unpile gave {len(got)} arrays, expected {len(want)}")
            assert_close(case, f"{'jit ' if jit else ''}pile map vs loop", got, want)
        else:
            assert_close(case, f"{'jit ' if jit else ''}pile map vs loop", got, stack(want, 0))


def pile_grad_matches_loop(backend, case):
    """The gradient, with respect to a shared scalar, of a weighted sum of a
    pile map's outputs equals the sum of the per-element gradients."""
    np_ = backend.numpy
    f = case.element_fun(backend)
    outs = [evaluate(f, x) for x in case.xs]
    weights = [np.cos(np.arange(o.size, dtype=np.float64)).reshape(o.shape).astype(o.dtype)
               for o in outs]

    def per_element(w, x, wt):
        return np_.sum(case.element_fun(backend, w)(x) * wt)
    want = sum(float(evaluate(backend.grad(per_element), case.w, x, wt)) for x, wt in zip(case.xs, weights))

    def total(w):
        out = _pile_run(backend, case, w)
        shapes = [np.shape(o) for o in out] if case.ragged_output else np.shape(out)
        want_shapes = [wt.shape for wt in weights] if case.ragged_output else \
            (len(weights),) + weights[0].shape
        if shapes != want_shapes:
            fail(case, f"pile map output shapes {shapes}, expected {want_shapes}")
        if case.ragged_output:
            return sum(np_.sum(o * wt) for o, wt in zip(out, weights))
        return np_.sum(out * np.stack(weights))
    got = evaluate(backend.grad(total), case.w)
    require_finite(got, what="gradient")
    assert_close(case, "grad through the pile map vs summed per-element gradients",
                 got, np.asarray(want, case.dtype))


def prng_vmap_matches_loop(backend, case):
    """vmap over split PRNG keys equals a loop over the keys (and so does jit of the vmap)."""
    program = case.program(backend)
    keys = case.keys(backend)
    want = stack([evaluate(program, keys[i], case.x) for i in range(case.num_keys)], 0)
    check_conditioning(lambda x: program(keys[0], x), (case.x,))
    mapped = backend.vmap(program, in_axes=(0, None))
    assert_close(case, "vmap over keys vs loop", evaluate(mapped, keys, case.x), want)
    assert_close(case, "jit(vmap over keys) vs loop", evaluate_compiled(backend, mapped, keys, case.x),
                 want)
