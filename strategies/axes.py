"""vmap cases: axis specs that are valid prefixes of the arguments' pytrees,
batched arguments built to match, and the per-example slices to loop over.

A spec is drawn for each vmap level, innermost first, over the ranks the
leaves have at that level: ``None`` (a whole subtree unbatched), one int
for a whole subtree (negative ones included, valid for every leaf in it),
or a spec per child (per leaf at the bottom). Batched leaves have all
elements distinct, so slices along every batch axis differ everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.tree_util as tree_util
import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays
from .programs import Program, _input_types, random_programs
from .pytree_strategies import CONTAINERS, Pair, _structure
from .source import IMPORTS, Case, tree_literal


def _flat_leaf_axes(args, in_axes, depth):
    """Per level, the normalised batch axis of each argument (arrays, one spec entry
    each, or one int for all) or None."""
    ranks = [np.ndim(a) for a in args]
    out = []
    for level in range(depth):
        spec = in_axes[level]
        axes = [spec] * len(args) if spec is None or isinstance(spec, int) else list(spec)
        out.append(tuple(None if a is None else a % r for a, r in zip(axes, ranks)))
        ranks = [r - (a is not None) for r, a in zip(ranks, axes)]
    return tuple(out)


@dataclass(frozen=True, repr=False)
class VmapCase(Case):
    """A nest of vmaps around a program, levels listed outermost first (one level: a
    plain vmap).

    ``vmapped(backend)`` is
    ``vmap(... vmap(fun, in_axes[-1], out_axes[-1]) ..., in_axes[0], out_axes[0])``
    and ``unbatched_args[i][j]...`` are the arguments of one example. ``in_axes``,
    ``out_axes`` and ``axis_sizes`` have one entry per level; ``leaf_axes`` per level
    the batch axis of each leaf (normalised) or None. Made from plain arrays (one
    ``in_axes`` entry per argument), the last two are computed.
    """

    program: object
    args: tuple
    in_axes: tuple
    out_axes: tuple
    axis_sizes: tuple[int, ...]
    unbatched_args: tuple | None = None
    leaf_axes: tuple | None = None

    label = "vmap"
    imports = IMPORTS + "from strategies import Pair, Point\n"

    def __post_init__(self):
        for name in ("in_axes", "out_axes", "axis_sizes"):
            if not isinstance(getattr(self, name), tuple):
                raise TypeError(f"{name} must be a tuple with one entry per vmap level, got {getattr(self, name)!r}")
        if len({len(self.in_axes), len(self.out_axes), len(self.axis_sizes)}) != 1 or not self.axis_sizes:
            raise ValueError(f"in_axes, out_axes and axis_sizes need one entry per level (at least one), got "
                             f"{self.in_axes!r}, {self.out_axes!r}, {self.axis_sizes!r}")
        if self.leaf_axes is None:
            object.__setattr__(self, "leaf_axes", _flat_leaf_axes(self.args, self.in_axes, self.depth))
        if self.unbatched_args is None:
            treedef = tree_util.tree_structure(tuple(self.args))
            object.__setattr__(self, "unbatched_args",
                               _slice_examples(tuple(self.args), treedef, self.leaf_axes, self.axis_sizes, 0))

    @property
    def depth(self) -> int:
        """The number of nested vmaps."""
        return len(self.axis_sizes)

    @property
    def dtype(self):
        """The narrowest float dtype among the arguments' leaves."""
        return min((np.asarray(x).dtype for x in tree_util.tree_leaves(self.args)), key=lambda d: d.itemsize)

    def fun(self, backend):
        """The unbatched function: the program applied to the args' leaves."""
        prog = self.program.build(backend)

        def fun(*args):
            return prog(*tree_util.tree_leaves(args))

        return fun

    def vmapped(self, backend):
        f = self.fun(backend)
        for spec_in, spec_out in zip(reversed(self.in_axes), reversed(self.out_axes)):
            f = backend.vmap(f, in_axes=spec_in, out_axes=spec_out)
        return f

    def expected(self, backend, *, jit=False):
        """What the vmaps must return, computed by looping over the examples.

        ``jit=True`` runs each example through ``backend.jit`` (one compile
        for all examples: much faster than eager op-by-op dispatch).
        """
        f = self.fun(backend)
        if jit:
            f = backend.jit(f)

        def loop(level, examples):
            if level == self.depth:
                return np.asarray(f(*examples))
            outs = [loop(level + 1, ex) for ex in examples]
            if self.out_axes[level] is None:
                return outs[0]
            return np.stack(outs, axis=self.out_axes[level])

        return loop(0, self.unbatched_args)

    # ---- printing
    def text(self):
        return self.program.source()

    def describe(self):
        shapes = tree_util.tree_map(lambda x: f"{np.asarray(x).dtype}{list(np.shape(x))}", self.args)
        return (f"program {getattr(self.program, 'ops', self.program)!r} on {shapes} in_axes={self.in_axes!r} "
                f"out_axes={self.out_axes!r} axis_sizes={self.axis_sizes!r}")

    def example(self):
        return (f"args = {tree_literal(tuple(self.args))}\n"
                f"in_axes = {self.in_axes!r}  # per level, outermost first\n"
                f"out_axes = {self.out_axes!r}\naxis_sizes = {self.axis_sizes!r}\n"
                "f = lambda *trees: program(jax, *jax.tree_util.tree_leaves(trees))\n"
                "for spec_in, spec_out in zip(reversed(in_axes), reversed(out_axes)):\n"
                "    f = jax.vmap(f, in_axes=spec_in, out_axes=spec_out)\n"
                "print(f(*args))\n")


# ------------------------------------------------------------------ specs


def _children(tree):
    """(children, rebuild) for the containers we draw, or None for a leaf."""
    if isinstance(tree, Pair):
        return [tree.first, tree.second], lambda cs: Pair(*cs)
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return list(tree), lambda cs: type(tree)(*cs)
    if isinstance(tree, tuple):
        return list(tree), tuple
    if isinstance(tree, list):
        return list(tree), list
    if isinstance(tree, dict):
        keys = sorted(tree)
        return [tree[k] for k in keys], lambda cs: dict(zip(keys, cs))
    return None


def _spec(draw, tree):
    """Draw an axis spec for ``tree`` (leaves: ranks); also return per-leaf axes."""
    ranks = tree_util.tree_leaves(tree)
    if not ranks:
        return None, []
    split = _children(tree)
    how = draw(st.integers(0, 2 if split else 1))
    if how == 0:
        return None, [None] * len(ranks)
    if how == 1:
        r = min(ranks)
        axis = draw(st.integers(-(r + 1), r))
        return axis, [axis % (k + 1) for k in ranks]
    children, rebuild = split
    specs, axes = [], []
    for child in children:
        s, a = _spec(draw, child)
        specs.append(s)
        axes.extend(a)
    return rebuild(specs), axes


@st.composite
def _level_spec(draw, rank_trees):
    """in_axes for one level: an int for all args, or a tuple of per-arg specs."""
    all_ranks = tree_util.tree_leaves(rank_trees)
    if draw(st.integers(0, 3)) == 0:  # one int for every argument
        r = min(all_ranks)
        axis = draw(st.integers(-(r + 1), r))
        return axis, [axis % (k + 1) for k in all_ranks]
    specs, axes = [], []
    for tree in rank_trees:
        s, a = _spec(draw, tree)
        specs.append(s)
        axes.extend(a)
    if all(a is None for a in axes):  # vmap needs one batched argument
        first = len(tree_util.tree_leaves(rank_trees[0]))
        specs[0] = 0
        axes[:first] = [0] * first
    return tuple(specs), axes


# ------------------------------------------------------------------ cases


def _check_size(name, v, lo=1, hi=16):
    if v is None:
        return
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"{name} must be an int, got {v!r}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {v}")


@st.composite
def _args_and_program(draw, program, pytree_args, dtype, num_args, program_options, depth):
    if program is not None:
        if not isinstance(program, Program):
            raise TypeError(f"program must be a Program, got {type(program).__name__}")
        trees = tuple(range(program.num_inputs))
        return program, trees
    dt = dtype or draw(st.sampled_from(_arrays.FLOAT_DTYPES))
    n_leaves = draw(st.integers(1, 4))
    # Small leaves: every vmap level multiplies their size, and hypothesis
    # allows a test case only about a thousand floats.
    leaf_types, _ = draw(_input_types(dt, n_leaves, max_rank=2 if depth <= 2 else 1, max_side=3))
    prog = draw(random_programs(input_types=leaf_types, **program_options))
    if not pytree_args:
        return prog, tuple(range(n_leaves))
    n_args = num_args or draw(st.integers(1, min(3, n_leaves)))
    if n_args > n_leaves:
        raise ValueError(f"num_args={n_args} exceeds the number of leaves {n_leaves}")
    cuts = sorted(draw(st.integers(1, n_leaves - 1)) for _ in range(n_args - 1)) if n_args > 1 else []
    parts = [b - a for a, b in zip([0] + cuts, cuts + [n_leaves])]
    if any(p == 0 for p in parts):  # each argument gets at least one leaf
        parts = [1] * (n_args - 1) + [n_leaves - n_args + 1]
    nodes = [c for c in CONTAINERS if c != "none"]
    trees = tuple(_structure(draw, m, nodes, True, 2) for m in parts)
    leaves, treedef = tree_util.tree_flatten(trees)
    return prog, tree_util.tree_unflatten(treedef, list(range(len(leaves))))


def _slice_examples(args, treedef, axes_per_level, sizes, level):
    if level == len(sizes):
        return args
    leaves = treedef.flatten_up_to(args)
    out = []
    for i in range(sizes[level]):
        sliced = [x if a is None else np.take(x, i, axis=a) for x, a in zip(leaves, axes_per_level[level])]
        out.append(_slice_examples(treedef.unflatten(sliced), treedef, axes_per_level, sizes, level + 1))
    return tuple(out)


@st.composite
def _nested_case(draw, depth, program, pytree_args, axis_size, max_axis_size, dtype, num_args, program_options):
    prog, placeholder_trees = draw(_args_and_program(program, pytree_args, dtype, num_args, program_options, depth))
    index_leaves, treedef = tree_util.tree_flatten(placeholder_trees)
    shapes = [prog.input_types[i][0] for i in index_leaves]
    sizes = tuple(axis_size if axis_size is not None else draw(st.integers(1, max_axis_size)) for _ in range(depth))
    ranks = [len(s) for s in shapes]
    out_rank = len(prog.output_type[0])
    deps = prog.input_dependencies
    in_specs, out_specs, leaf_axes = [None] * depth, [None] * depth, [None] * depth
    for level in reversed(range(depth)):  # innermost first: it sees the smallest ranks
        rank_trees = treedef.unflatten(ranks)
        in_specs[level], axes = draw(_level_spec(rank_trees))
        leaf_axes[level] = tuple(axes)
        ranks = [r + (a is not None) for r, a in zip(ranks, axes)]
        batched = any(a is not None and i in deps for i, a in zip(index_leaves, axes))
        if batched or draw(st.booleans()):
            out_specs[level] = draw(st.integers(-(out_rank + 1), out_rank))
            out_rank += 1
    # Leaves get their batch axes inserted innermost first, so each level's
    # normalised axis indexes the shape that level sees.
    leaves = []
    for shape, per_leaf in zip(shapes, zip(*leaf_axes)):
        full = tuple(shape)
        for level in reversed(range(depth)):
            if per_leaf[level] is not None:
                full = _arrays.insert_axis(full, per_leaf[level], sizes[level])
        dt = prog.dtype
        if full == tuple(shape):
            leaves.append(draw(_arrays.arrays(dt, full)))
        else:
            leaves.append(draw(_arrays.arrays(dt, full, unique=True)))
    args = treedef.unflatten(leaves)
    examples = _slice_examples(args, treedef, leaf_axes, sizes, 0)
    return VmapCase(prog, args, tuple(in_specs), tuple(out_specs), sizes, examples, tuple(leaf_axes))


def nested_vmap_cases(*, depth=2, program=None, pytree_args=True, axis_size=None, max_axis_size=3,
                      dtype=None, num_args=None, **program_options) -> st.SearchStrategy[VmapCase]:
    """Cases for ``depth`` nested vmaps (specs per level, outermost first).

    >>> @given(nested_vmap_cases(depth=2, smooth=True))
    ... def test_nested(case):
    ...     np.testing.assert_allclose(case.vmapped(jax)(*case.args), case.expected(jax), rtol=1e-5)
    """
    _check_size("depth", depth, 1, 4)
    _check_size("axis_size", axis_size)
    _check_size("max_axis_size", max_axis_size)
    _check_size("num_args", num_args, 1, 4)
    if not isinstance(pytree_args, bool):
        raise TypeError(f"pytree_args must be a bool, got {pytree_args!r}")
    if program is not None and program_options:
        raise ValueError("pass either program= or program options, not both")
    return _nested_case(depth, program, pytree_args, axis_size, max_axis_size, dtype, num_args, program_options)


def vmap_cases(*, program=None, pytree_args=True, axis_size=None, max_axis_size=5, dtype=None,
               num_args=None, **program_options) -> st.SearchStrategy[VmapCase]:
    """Draw a :class:`VmapCase` of one level: a program over the leaves of pytree
    arguments (or the given ``program`` over plain arrays), batched args,
    ``in_axes[0]`` (a valid prefix: ints, negative ints, None, per leaf),
    ``out_axes[0]`` (None only when the output ignores every batched leaf),
    ``axis_sizes[0]`` (``axis_size`` if given, else 1 to ``max_axis_size``, 1 and odd
    sizes included) and the per-example args. Extra keyword arguments go to the
    program strategy (``smooth=True``, ``max_ops=4``, ...).

    >>> @given(vmap_cases())
    ... def test_vmap(case):
    ...     np.testing.assert_allclose(case.vmapped(jax)(*case.args), case.expected(jax), rtol=1e-5)
    """
    return nested_vmap_cases(depth=1, program=program, pytree_args=pytree_args, axis_size=axis_size,
                             max_axis_size=max_axis_size, dtype=dtype, num_args=num_args, **program_options)
