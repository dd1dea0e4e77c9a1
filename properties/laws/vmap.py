"""Laws of vmap: vmap means "loop and stack"."""
from __future__ import annotations

import numpy as np

from ._common import (all_argnums, assert_close, check_conditioning, evaluate, example_args,
                      loop_vmap, one_level, require_finite, scalarize, stack)


def _per_example_check(f, case):
    """Filter cases with a badly conditioned batch element."""
    in_axes, _, size = one_level(case)
    for i in range(size):
        check_conditioning(f, example_args(case.args, in_axes, i))


def _example_output(f, case):
    sliced = example_args(case.args, one_level(case)[0], 0)
    return evaluate(f, *sliced), sliced


def vmap_matches_loop(backend, case):
    """vmap(f, in_axes, out_axes) equals calling f per element and stacking."""
    f = case.program.build(backend)
    _per_example_check(f, case)
    in_axes, out_axes, size = one_level(case)
    got = evaluate(backend.vmap(f, in_axes=in_axes, out_axes=out_axes), *case.args)
    want = loop_vmap(f, case.args, in_axes, out_axes, size)
    assert_close(case, "vmap(f) vs loop", got, want)


def nested_vmap_matches_loops(backend, case):
    """vmap(vmap(f)) equals two nested loops."""
    f = case.program.build(backend)
    (outer_in, inner_in), (outer_out, inner_out) = case.in_axes, case.out_axes
    outer_size, inner_size = case.axis_sizes

    def inner_loop(*mid):
        return loop_vmap(f, mid, inner_in, inner_out, inner_size)

    # conditioning of every element
    for i in range(outer_size):
        mid = example_args(case.args, outer_in, i)
        for j in range(inner_size):
            check_conditioning(f, example_args(mid, inner_in, j))
    want = loop_vmap(inner_loop, case.args, outer_in, outer_out, outer_size)
    vf = backend.vmap(backend.vmap(f, in_axes=inner_in, out_axes=inner_out),
                      in_axes=outer_in, out_axes=outer_out)
    got = evaluate(vf, *case.args)
    assert_close(case, "vmap(vmap(f)) vs nested loops", got, want)


def vmap_jit_commute(backend, case):
    """vmap(jit(f)) equals jit(vmap(f))."""
    f = case.program.build(backend)
    _per_example_check(f, case)
    in_axes, out_axes, _ = one_level(case)
    kw = dict(in_axes=in_axes, out_axes=out_axes)
    a = evaluate(backend.vmap(backend.jit(f), **kw), *case.args)
    b = evaluate(backend.jit(backend.vmap(f, **kw)), *case.args)
    assert_close(case, "vmap(jit(f)) vs jit(vmap(f))", a, b)


def vmap_grad_matches_loop(backend, case):
    """vmap(grad(f)) equals per-example gradients computed in a loop."""
    f = case.program.build(backend)
    _per_example_check(f, case)
    out0, sliced = _example_output(f, case)
    g = scalarize(backend, f, out0)
    argnums = all_argnums(case.args)
    in_axes, _, size = one_level(case)
    got = evaluate(backend.vmap(backend.grad(g, argnums=argnums), in_axes=in_axes), *case.args)
    want = loop_vmap(backend.grad(g, argnums=argnums), case.args, in_axes, 0, size)
    require_finite(want, what="per-example gradient")
    assert_close(case, "vmap(grad(f)) vs loop of grad(f)", got, want)


def grad_of_batch_sum(backend, case):
    """grad of sum(vmap(f)) is the per-example gradients, summed over the
    batch for unbatched (shared) inputs."""
    f = case.program.build(backend)
    _per_example_check(f, case)
    out0, _ = _example_output(f, case)
    g = scalarize(backend, f, out0)
    argnums = all_argnums(case.args)
    np_ = backend.numpy
    in_axes, _, size = one_level(case)

    def total(*args):
        return np_.sum(backend.vmap(g, in_axes=in_axes)(*args))

    got = evaluate(backend.grad(total, argnums=argnums), *case.args)
    per_example = [evaluate(backend.grad(g, argnums=argnums), *example_args(case.args, in_axes, i))
                   for i in range(size)]
    require_finite(per_example, what="per-example gradient")
    want = []
    for k, ax in enumerate(in_axes):
        parts = [p[k] for p in per_example]
        want.append(np.sum(np.stack(parts), axis=0) if ax is None else stack(parts, ax))
    assert_close(case, "grad(sum of vmap(f)) vs summed loop", got, tuple(want))


def vmap_pytrees_match_loops(backend, case):
    """1 to 3 nested vmaps over pytree arguments, with axis-spec prefixes
    (None, ints, negative ints, per leaf) and out_axes None where allowed,
    equal nested loops over the examples."""
    f = case.fun(backend)
    depth = case.depth

    def examples(level, tree):
        if level == depth:
            yield tree
        else:
            for sub in tree:
                yield from examples(level + 1, sub)
    for ex in examples(0, case.unbatched_args):
        check_conditioning(f, ex)

    def loop(level, tree):
        if level == depth:
            return evaluate(f, *tree)
        outs = [loop(level + 1, sub) for sub in tree]
        axis = case.out_axes[level]
        return outs[0] if axis is None else stack(outs, axis)

    got = evaluate(case.vmapped(backend), *case.args)
    assert_close(case, "nested vmaps vs nested loops", got, loop(0, case.unbatched_args))
