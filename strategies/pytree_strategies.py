"""Pytrees with array leaves: every container kind a transformation must handle.

Containers: tuples, lists, dicts, the namedtuple :class:`Point`, ``None``
(an empty subtree) and :class:`Pair`, a user class registered with
``jax.tree_util``. impl uses ``jax.tree_util`` for its pytrees, so the same
registration serves both backends.
"""

from __future__ import annotations

from collections import namedtuple

import jax.tree_util as tree_util
import numpy as np
from hypothesis import strategies as st

from . import array_strategies as _arrays

Point = namedtuple("Point", ["x", "y"])
Point.__doc__ = "A namedtuple container, so namedtuple pytrees get exercised."


@tree_util.register_pytree_node_class
class Pair:
    """A user-defined pytree node with two children and no aux data.

    >>> jax.tree_util.tree_leaves(Pair(1.0, (2.0, 3.0)))
    [1.0, 2.0, 3.0]
    """

    __slots__ = ("first", "second")

    def __init__(self, first, second):
        self.first = first
        self.second = second

    def tree_flatten(self):
        return (self.first, self.second), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)

    def __repr__(self):
        return f"Pair({self.first!r}, {self.second!r})"

    def __eq__(self, other):
        # Structural equality of the children; arrays compare with array_equal.
        if not isinstance(other, Pair):
            return NotImplemented
        return all(
            np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
            for a, b in ((self.first, other.first), (self.second, other.second))
        )

    __hash__ = None


CONTAINERS = ("tuple", "list", "dict", "namedtuple", "none", "custom")
_KEYS = ("a", "b", "c", "w")


def _check_containers(containers):
    if isinstance(containers, str) or not hasattr(containers, "__iter__"):
        raise TypeError(f"containers must be a collection of {CONTAINERS}, got {containers!r}")
    containers = tuple(containers)
    bad = [c for c in containers if c not in CONTAINERS]
    if bad:
        raise ValueError(f"unknown container kinds {bad}; choose from {CONTAINERS}")
    return containers


def _extend(children, containers):
    options = []
    if "tuple" in containers:
        options.append(st.lists(children, max_size=3).map(tuple))
    if "list" in containers:
        options.append(st.lists(children, max_size=3))
    if "dict" in containers:
        options.append(st.dictionaries(st.sampled_from(_KEYS), children, max_size=3))
    if "namedtuple" in containers:
        options.append(st.builds(Point, children, children))
    if "custom" in containers:
        options.append(st.builds(Pair, children, children))
    return st.one_of(options)


def pytrees(leaves=None, *, containers=CONTAINERS, min_leaves=0, max_leaves=6) -> st.SearchStrategy:
    """Nested pytrees of ``leaves`` (default: small float arrays).

    ``containers`` picks from ``("tuple", "list", "dict", "namedtuple",
    "none", "custom")``; "none" puts ``None`` subtrees in, "custom" puts
    :class:`Pair` nodes in.

    >>> tree = pytrees(containers=("dict", "custom")).example()
    >>> jax.tree_util.tree_leaves(tree)   # a list of numpy arrays
    """
    containers = _check_containers(containers)
    if leaves is None:
        leaves = _arrays.arrays(shape=_arrays.shapes(max_dims=2, max_side=3))
    elif not isinstance(leaves, st.SearchStrategy):
        raise TypeError(f"leaves must be a hypothesis strategy, got {leaves!r}")
    if not isinstance(max_leaves, int) or max_leaves < 1:
        raise ValueError(f"max_leaves must be a positive int, got {max_leaves!r}")
    if not isinstance(min_leaves, int) or not 0 <= min_leaves <= min(max_leaves, 2):
        raise ValueError(f"min_leaves must be 0, 1 or 2 (and <= max_leaves), got {min_leaves!r}")
    base = leaves | st.none() if "none" in containers else leaves
    nodes = [c for c in containers if c != "none"]
    trees = base if not nodes else st.recursive(base, lambda children: _extend(children, nodes), max_leaves=max_leaves)
    if min_leaves:
        trees = trees.filter(lambda t: len(tree_util.tree_leaves(t)) >= min_leaves)
    return trees


def _leaf_strategy(example, leaves):
    if leaves is not None:
        return leaves
    shape, dtype = np.shape(example), np.result_type(example)
    if dtype.name not in _arrays.FLOAT_DTYPES + _arrays.INT_DTYPES + ("bool",):
        raise TypeError(f"cannot draw a leaf like {example!r} (dtype {dtype}); pass leaves=")
    return _arrays.arrays(dtype, shape)


def pytrees_of(structure, leaves=None) -> st.SearchStrategy:
    """Pytrees with a fixed structure: a treedef, or an example tree.

    With a treedef, leaves come from ``leaves`` (default: float arrays of any
    small shape). With an example tree, each leaf is drawn with the example
    leaf's shape and dtype unless ``leaves`` is given: handy for tangents
    and cotangents that must match primals.

    >>> pytrees_of({"w": np.zeros((2, 3)), "b": (np.zeros(3), None)}).example()["w"].shape
    (2, 3)
    """
    if leaves is not None and not isinstance(leaves, st.SearchStrategy):
        raise TypeError(f"leaves must be a hypothesis strategy, got {leaves!r}")
    if isinstance(structure, tree_util.PyTreeDef):
        treedef = structure
        leaf_sts = [leaves if leaves is not None else _arrays.arrays()] * treedef.num_leaves
    else:
        example_leaves, treedef = tree_util.tree_flatten(structure)
        leaf_sts = [_leaf_strategy(x, leaves) for x in example_leaves]
    return st.tuples(*leaf_sts).map(lambda xs: tree_util.tree_unflatten(treedef, xs))


@st.composite
def structures(draw, num_leaves: int, containers=CONTAINERS, max_depth: int = 3):
    """An example tree with exactly ``num_leaves`` leaves, numbered 0, 1, ...

    The numbers are placeholders in flattening order; use
    ``jax.tree_util.tree_structure(tree)`` to get a treedef for pytrees_of.
    """
    containers = _check_containers(containers)
    if not isinstance(num_leaves, int) or num_leaves < 0:
        raise ValueError(f"num_leaves must be a non-negative int, got {num_leaves!r}")
    tree = _structure(draw, num_leaves, [c for c in containers if c != "none"], "none" in containers, max_depth)
    leaves, treedef = tree_util.tree_flatten(tree)
    return tree_util.tree_unflatten(treedef, list(range(len(leaves))))


def _structure(draw, n, kinds, with_none, depth):
    if n == 1 and (depth == 0 or not kinds or not draw(st.booleans())):
        return 0
    if n == 0 and (not kinds or depth == 0 or draw(st.booleans())):
        return None if with_none else ()
    if not kinds or depth == 0:  # n > 1 leaves and no room to nest: a flat tuple
        return tuple([0] * n)
    kind = draw(st.sampled_from(kinds))
    if kind in ("namedtuple", "custom"):
        cut = draw(st.integers(0, n))
        parts = [cut, n - cut]
    else:
        k = draw(st.integers(1 if n else 0, min(3, n) if n else 1))
        if with_none and draw(st.booleans()):
            k += 1  # room for an empty (None) child
        cuts = sorted(draw(st.integers(0, n)) for _ in range(max(k - 1, 0)))
        parts = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    children = [_structure(draw, m, kinds, with_none, depth - 1) for m in parts]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return list(children)
    if kind == "dict":
        return dict(zip(_KEYS, children))
    if kind == "namedtuple":
        return Point(*children)
    return Pair(*children)


# ``strategies.pytrees.Pair`` reads naturally in tests; let the function carry it.
pytrees.Pair = Pair
pytrees.Point = Point
