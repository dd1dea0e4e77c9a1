"""Indexing primitives (concatenate, pad, slice, rev, dynamic_slice,
dynamic_update_slice, gather, scatter_add, scatter), their jax.lax-style wrappers, the
impl.numpy joining/taking functions and NumPy-style indexing (`x[idx]`, `x.at[idx]`),
checked against the jax package under every transformation in float32 and float64.

Each table row is an `Op`: impl function, jax function, argument makers (float arrays
are differentiated, integer arrays are indices). Index makers draw fresh indices for
every vmapped example, so batched indices really differ across the batch.
"""
from __future__ import annotations

import functools
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import impl
import impl.numpy as inp
from impl import lax as ilax
from impl.core import Tracer
from impl.numpy import _indexing as nix

import helpers
from helpers import (batched_args, floats_in_ci, make_args, nightly, partial_args as _partial,
                     seeded_rng as _rng)

FLOATS = [np.float32, np.float64]
# ----------------------------------------------------------------- arg makers

class F:
    """A float array argument of the given shape (differentiated)."""
    is_float = True

    def __init__(self, shape, lo=-2.0, hi=2.0):
        self.shape, self.lo, self.hi = tuple(shape), lo, hi

    def __call__(self, rng, dtype, lead=()):
        return rng.uniform(self.lo, self.hi, lead + self.shape).astype(dtype)


class I:
    """An integer index argument, uniform in [lo, hi)."""
    is_float = False

    def __init__(self, shape, lo, hi, dtype=np.int32):
        self.shape, self.lo, self.hi, self.dtype = tuple(shape), lo, hi, dtype

    def __call__(self, rng, dtype, lead=()):
        return rng.randint(self.lo, self.hi, lead + self.shape).astype(self.dtype)


class Perm:
    """`k` distinct indices into range(n), shaped (k, 1) (or (k,) with flat=True)."""
    is_float = False

    def __init__(self, n, k, flat=False):
        self.n, self.k, self.flat = n, k, flat

    def __call__(self, rng, dtype, lead=()):
        count = int(np.prod(lead, dtype=np.int64))
        out = np.stack([rng.permutation(self.n)[:self.k] for _ in range(count)])
        shape = (self.k,) if self.flat else (self.k, 1)
        return out.reshape(lead + shape).astype(np.int32)


class Op:
    """A row: `linear` are argnums in which the function is jointly linear."""

    def __init__(self, name, impl_fn, jax_fn, makers, linear=None, vmap_axes=None):
        self.name, self.impl_fn, self.jax_fn, self.makers = name, impl_fn, jax_fn, makers
        self.diff = tuple(i for i, m in enumerate(makers) if m.is_float)
        self.linear = linear
        self.vmap_axes = vmap_axes

    def __repr__(self):
        return self.name


def ix(a):
    """`a` as something whose [] is impl's indexing (tracers are; eager values are not)."""
    return a if isinstance(a, Tracer) else _Eager(a)


class _Eager:
    def __init__(self, a):
        self.a = a

    def __getitem__(self, idx):
        return nix.getitem(self.a, idx)

    @property
    def at(self):
        return nix._IndexUpdateHelper(self.a)


def jx(a):
    return jnp.asarray(a)


# ----------------------------------------------------------------- dnums

GDN, SDN = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers

G_ROWS = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
G_WIN = GDN(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1))
G_BATCHED = GDN(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,),
                operand_batching_dims=(0,), start_indices_batching_dims=(0,))
G_COLS = GDN(offset_dims=(0,), collapsed_slice_dims=(1,), start_index_map=(1,))
S_ROWS = SDN(update_window_dims=(1,), inserted_window_dims=(0,),
             scatter_dims_to_operand_dims=(0,))
S_WIN = SDN(update_window_dims=(1, 2), inserted_window_dims=(),
            scatter_dims_to_operand_dims=(0, 1))
S_BATCHED = SDN(update_window_dims=(), inserted_window_dims=(1,),
                scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                scatter_indices_batching_dims=(0,))
S_COLS = SDN(update_window_dims=(0,), inserted_window_dims=(1,),
             scatter_dims_to_operand_dims=(1,))


def _pv(x):
    """A padding value of x's dtype (jax.lax.pad rejects a float64 scalar for float32)."""
    return np.asarray(1.5, x.dtype)


IDX2 = np.array([[0, 1], [1, 1]])
MASK = np.array([[True, False, True, False], [False, False, True, True],
                 [True, True, False, False]])

OPS = [
    # ---------------------------------------------------------- lax level
    Op("concatenate_2", lambda x, y: ilax.concatenate([x, y], 1),
       lambda x, y: lax.concatenate([x, y], 1), [F((2, 3)), F((2, 2))], linear=(0, 1)),
    Op("concatenate_3", lambda x, y, z: ilax.concatenate([x, y, z], 0),
       lambda x, y, z: lax.concatenate([x, y, z], 0), [F((1, 3)), F((2, 3)), F((3, 3))],
       linear=(0, 1, 2)),
    Op("pad", lambda x, v: ilax.pad(x, v, [(1, 2, 0), (0, 1, 1)]),
       lambda x, v: lax.pad(x, v, [(1, 2, 0), (0, 1, 1)]), [F((3, 4)), F(())],
       linear=(0, 1)),
    Op("pad_negative", lambda x, v: ilax.pad(x, v, [(-1, 1, 1), (2, -2, 0)]),
       lambda x, v: lax.pad(x, v, [(-1, 1, 1), (2, -2, 0)]), [F((3, 4)), F(())],
       linear=(0, 1)),
    Op("pad_const_value", lambda x: ilax.pad(x, _pv(x), [(1, 0, 2), (0, 0, 0)]),
       lambda x: lax.pad(x, _pv(x), [(1, 0, 2), (0, 0, 0)]), [F((3, 2))]),
    Op("slice", lambda x: ilax.slice(x, (1, 0), (4, 5)),
       lambda x: lax.slice(x, (1, 0), (4, 5)), [F((4, 5))], linear=(0,)),
    Op("slice_strided", lambda x: ilax.slice(x, (0, 1), (4, 5), (2, 3)),
       lambda x: lax.slice(x, (0, 1), (4, 5), (2, 3)), [F((4, 5))], linear=(0,)),
    Op("slice_in_dim", lambda x: ilax.slice_in_dim(x, 1, -1, 2, axis=1),
       lambda x: lax.slice_in_dim(x, 1, -1, 2, axis=1), [F((3, 6))], linear=(0,)),
    Op("index_in_dim", lambda x: ilax.index_in_dim(x, -2, axis=1, keepdims=False),
       lambda x: lax.index_in_dim(x, -2, axis=1, keepdims=False), [F((3, 4))],
       linear=(0,)),
    Op("rev", lambda x: ilax.rev(x, (0, 2)), lambda x: lax.rev(x, (0, 2)),
       [F((2, 3, 4))], linear=(0,)),
    Op("dynamic_slice", lambda x, i, j: ilax.dynamic_slice(x, (i, j), (2, 3)),
       lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)),
       [F((4, 5)), I((), -6, 6), I((), -6, 6)], linear=(0,)),
    Op("dynamic_slice_i64", lambda x, i: ilax.dynamic_slice(x, (i, 1), (2, 2)),
       lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)),
       [F((4, 3)), I((), -4, 4, np.int64)], linear=(0,)),
    Op("dynamic_slice_in_dim", lambda x, i: ilax.dynamic_slice_in_dim(x, i, 2, axis=1),
       lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=1),
       [F((3, 5)), I((), -5, 5)], linear=(0,)),
    Op("dynamic_index_in_dim",
       lambda x, i: ilax.dynamic_index_in_dim(x, i, axis=0, keepdims=False),
       lambda x, i: lax.dynamic_index_in_dim(x, i, axis=0, keepdims=False),
       [F((4, 3)), I((), -4, 4)], linear=(0,)),
    Op("dynamic_update_slice",
       lambda x, u, i, j: ilax.dynamic_update_slice(x, u, (i, j)),
       lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)),
       [F((4, 5)), F((2, 3)), I((), -6, 6), I((), -6, 6)], linear=(0, 1)),
    Op("gather_rows", lambda x, i: ilax.gather(x, i, G_ROWS, (1, 3)),
       lambda x, i: lax.gather(x, i, G_ROWS, (1, 3)), [F((5, 3)), I((4, 1), 0, 5)],
       linear=(0,)),
    Op("gather_window_clip", lambda x, i: ilax.gather(x, i, G_WIN, (2, 3), mode="clip"),
       lambda x, i: lax.gather(x, i, G_WIN, (2, 3), mode="clip"),
       [F((5, 6)), I((2, 2), -2, 7)], linear=(0,)),
    Op("gather_fill", lambda x, i: ilax.gather(x, i, G_ROWS, (1, 3), mode="fill",
                                               fill_value=-1.5),
       lambda x, i: lax.gather(x, i, G_ROWS, (1, 3), mode="fill", fill_value=-1.5),
       [F((5, 3)), I((4, 1), -2, 7)]),
    Op("gather_fill_zero", lambda x, i: ilax.gather(x, i, G_ROWS, (1, 3), mode="fill",
                                                    fill_value=0),
       lambda x, i: lax.gather(x, i, G_ROWS, (1, 3), mode="fill", fill_value=0),
       [F((5, 3)), I((4, 1), -2, 7)], linear=(0,)),
    Op("gather_batching_dims", lambda x, i: ilax.gather(x, i, G_BATCHED, (1, 1)),
       lambda x, i: lax.gather(x, i, G_BATCHED, (1, 1)), [F((3, 5)), I((3, 2, 1), 0, 5)],
       linear=(0,)),
    Op("gather_cols", lambda x, i: ilax.gather(x, i, G_COLS, (4, 1)),
       lambda x, i: lax.gather(x, i, G_COLS, (4, 1)), [F((4, 5)), I((2, 3, 1), 0, 5)],
       linear=(0,)),
    Op("scatter_add_rows_dups", lambda x, i, u: ilax.scatter_add(x, i, u, S_ROWS),
       lambda x, i, u: lax.scatter_add(x, i, u, S_ROWS),
       [F((5, 3)), I((4, 1), 0, 3), F((4, 3))], linear=(0, 2)),
    Op("scatter_add_window_clip",
       lambda x, i, u: ilax.scatter_add(x, i, u, S_WIN, mode="clip"),
       lambda x, i, u: lax.scatter_add(x, i, u, S_WIN, mode="clip"),
       [F((5, 6)), I((2, 2), -2, 7), F((2, 2, 3))], linear=(0, 2)),
    Op("scatter_add_drop", lambda x, i, u: ilax.scatter_add(x, i, u, S_ROWS, mode="drop"),
       lambda x, i, u: lax.scatter_add(x, i, u, S_ROWS, mode="drop"),
       [F((5, 3)), I((4, 1), -2, 7), F((4, 3))], linear=(0, 2)),
    Op("scatter_add_batching_dims", lambda x, i, u: ilax.scatter_add(x, i, u, S_BATCHED),
       lambda x, i, u: lax.scatter_add(x, i, u, S_BATCHED),
       [F((3, 5)), I((3, 2, 1), 0, 5), F((3, 2))], linear=(0, 2)),
    Op("scatter_add_cols", lambda x, i, u: ilax.scatter_add(x, i, u, S_COLS),
       lambda x, i, u: lax.scatter_add(x, i, u, S_COLS),
       [F((4, 5)), I((3, 1), 0, 5), F((4, 3))], linear=(0, 2)),
    Op("scatter_unique",
       lambda x, i, u: ilax.scatter(x, i, u, S_ROWS, unique_indices=True),
       lambda x, i, u: lax.scatter(x, i, u, S_ROWS, unique_indices=True),
       [F((5, 3)), Perm(5, 3), F((3, 3))], linear=(0, 2)),
    Op("scatter_distinct_not_promised", lambda x, i, u: ilax.scatter(x, i, u, S_ROWS),
       lambda x, i, u: lax.scatter(x, i, u, S_ROWS),
       [F((5, 3)), Perm(5, 4), F((4, 3))]),
    Op("scatter_window_clip",
       lambda x, i, u: ilax.scatter(x, i, u, S_WIN, mode="clip", unique_indices=True),
       lambda x, i, u: lax.scatter(x, i, u, S_WIN, mode="clip", unique_indices=True),
       [F((5, 6)), I((1, 2), -2, 7), F((1, 2, 3))], linear=(0, 2)),
    # ------------------------------------------------------- numpy level
    Op("np_concatenate", lambda x, y: inp.concatenate([x, y], axis=-1),
       lambda x, y: jnp.concatenate([x, y], axis=-1), [F((2, 3)), F((2, 1))], linear=(0, 1)),
    Op("np_concatenate_none", lambda x, y: inp.concatenate([x, y], axis=None),
       lambda x, y: jnp.concatenate([x, y], axis=None), [F((2, 3)), F((4,))],
       linear=(0, 1)),
    Op("np_stack", lambda x, y: inp.stack([x, y, x], axis=1),
       lambda x, y: jnp.stack([x, y, x], axis=1), [F((2, 3)), F((2, 3))], linear=(0, 1)),
    Op("np_hstack", lambda x, y: inp.hstack([x, y]), lambda x, y: jnp.hstack([x, y]),
       [F((2, 3)), F((2, 2))], linear=(0, 1)),
    Op("np_vstack", lambda x, y: inp.vstack([x, y]), lambda x, y: jnp.vstack([x, y]),
       [F((3,)), F((2, 3))], linear=(0, 1)),
    Op("np_split_sections", lambda x: inp.split(x, 3, axis=1),
       lambda x: jnp.split(x, 3, axis=1), [F((2, 6))], linear=(0,)),
    Op("np_split_indices", lambda x: inp.split(x, [1, 3]),
       lambda x: jnp.split(x, [1, 3]), [F((5, 2))], linear=(0,)),
    Op("np_pad", lambda x: inp.pad(x, ((1, 0), (2, 1))), lambda x: jnp.pad(x, ((1, 0), (2, 1))),
       [F((2, 3))], linear=(0,)),
    Op("np_pad_value", lambda x, v: inp.pad(x, 1, constant_values=v),
       lambda x, v: jnp.pad(x, 1, constant_values=v), [F((2, 3)), F(())]),
    Op("np_take", lambda x, i: inp.take(x, i, axis=1), lambda x, i: jnp.take(x, i, axis=1),
       [F((3, 5)), I((2, 2), -5, 5)], linear=(0,)),
    Op("np_take_flat", lambda x, i: inp.take(x, i), lambda x, i: jnp.take(x, i),
       [F((3, 4)), I((5,), 0, 12)], linear=(0,)),
    Op("np_take_clip", lambda x, i: inp.take(x, i, axis=0, mode="clip"),
       lambda x, i: jnp.take(x, i, axis=0, mode="clip"), [F((4, 2)), I((3,), -6, 7)],
       linear=(0,)),
    Op("np_take_along_axis", lambda x, i: inp.take_along_axis(x, i, axis=1),
       lambda x, i: jnp.take_along_axis(x, i, axis=1), [F((3, 4)), I((3, 2), -4, 4)],
       linear=(0,)),
    Op("np_take_along_axis_bcast", lambda x, i: inp.take_along_axis(x, i, axis=0),
       lambda x, i: jnp.take_along_axis(x, i, axis=0), [F((4, 3)), I((2, 1), 0, 4)],
       linear=(0,)),
    Op("np_flip", lambda x: inp.flip(x, axis=(0, -1)), lambda x: jnp.flip(x, axis=(0, -1)),
       [F((2, 3, 2))], linear=(0,)),
    Op("np_flip_all", lambda x: inp.flip(x), lambda x: jnp.flip(x), [F((2, 3))],
       linear=(0,)),
    Op("np_tile", lambda x: inp.tile(x, (2, 1, 3)), lambda x: jnp.tile(x, (2, 1, 3)),
       [F((2, 3))], linear=(0,)),
    Op("np_repeat", lambda x: inp.repeat(x, 2, axis=1), lambda x: jnp.repeat(x, 2, axis=1),
       [F((2, 3))], linear=(0,)),
    Op("np_repeat_counts", lambda x: inp.repeat(x, np.array([1, 0, 3])),
       lambda x: jnp.repeat(x, np.array([1, 0, 3])), [F((3,))], linear=(0,)),
    # ------------------------------------------------------------ x[idx]
    Op("idx_int", lambda x: ix(x)[1], lambda x: jx(x)[1], [F((3, 4))], linear=(0,)),
    Op("idx_neg_int", lambda x: ix(x)[-1, 2], lambda x: jx(x)[-1, 2], [F((3, 4))],
       linear=(0,)),
    Op("idx_traced_int", lambda x, i: ix(x)[i], lambda x, i: jx(x)[i],
       [F((4, 3)), I((), -4, 4)], linear=(0,)),
    Op("idx_traced_int_pair", lambda x, i: ix(x)[1:, i], lambda x, i: jx(x)[1:, i],
       [F((4, 3)), I((), -3, 3)], linear=(0,)),
    Op("idx_slices", lambda x: ix(x)[:, 1:3], lambda x: jx(x)[:, 1:3], [F((3, 4))],
       linear=(0,)),
    Op("idx_steps", lambda x: ix(x)[::2, 3:0:-2], lambda x: jx(x)[::2, 3:0:-2],
       [F((5, 4))], linear=(0,)),
    Op("idx_negative_slice", lambda x: ix(x)[-2:, ::-1], lambda x: jx(x)[-2:, ::-1],
       [F((3, 4))], linear=(0,)),
    Op("idx_empty_slice", lambda x: ix(x)[2:1], lambda x: jx(x)[2:1], [F((3, 4))],
       linear=(0,)),
    Op("idx_const_array", lambda x: ix(x)[np.array([2, 0, 2])],
       lambda x: jx(x)[np.array([2, 0, 2])], [F((3, 4))], linear=(0,)),
    Op("idx_list", lambda x: ix(x)[:, [0, -1]], lambda x: jx(x)[:, [0, -1]], [F((3, 4))],
       linear=(0,)),
    Op("idx_traced_array", lambda x, i: ix(x)[:, i], lambda x, i: jx(x)[:, i],
       [F((3, 4)), I((2, 2), -4, 4)], linear=(0,)),
    Op("idx_two_arrays_bcast", lambda x, i, j: ix(x)[i, :, j],
       lambda x, i, j: jx(x)[i, :, j], [F((3, 2, 4)), I((2, 1), 0, 3), I((3,), -4, 4)],
       linear=(0,)),
    Op("idx_adjacent_arrays", lambda x, i, j: ix(x)[:, i, j],
       lambda x, i, j: jx(x)[:, i, j], [F((2, 3, 4)), I((2,), 0, 3), I((2,), 0, 4)],
       linear=(0,)),
    Op("idx_int_and_array", lambda x, i: ix(x)[1, :, i], lambda x, i: jx(x)[1, :, i],
       [F((2, 3, 4)), I((2,), 0, 4)], linear=(0,)),
    Op("idx_int_next_to_array", lambda x: ix(x)[:, 1, IDX2], lambda x: jx(x)[:, 1, IDX2],
       [F((2, 3, 4))], linear=(0,)),
    Op("idx_none_ellipsis", lambda x: ix(x)[None, ..., 1, None],
       lambda x: jx(x)[None, ..., 1, None], [F((2, 3, 4))], linear=(0,)),
    Op("idx_ellipsis_array", lambda x, i: ix(x)[..., i], lambda x, i: jx(x)[..., i],
       [F((2, 3, 4)), I((3,), 0, 4)], linear=(0,)),
    Op("idx_bool_mask", lambda x: ix(x)[MASK], lambda x: jx(x)[MASK], [F((3, 4))],
       linear=(0,)),
    Op("idx_bool_mask_rows", lambda x: ix(x)[np.array([True, False, True])],
       lambda x: jx(x)[np.array([True, False, True])], [F((3, 4))], linear=(0,)),
    # --------------------------------------------------------- x.at[idx]
    Op("at_set_int", lambda x: ix(x).at[1].set(5.0), lambda x: jx(x).at[1].set(5.0),
       [F((3, 4))]),
    Op("at_set_traced_value", lambda x, v: ix(x).at[:, 1:3].set(v),
       lambda x, v: jx(x).at[:, 1:3].set(v), [F((3, 4)), F((3, 1))], linear=(0, 1)),
    Op("at_set_array_unique", lambda x, v, i: ix(x).at[i].set(v, unique_indices=True),
       lambda x, v, i: jx(x).at[i].set(v, unique_indices=True), [F((5, 2)), F((3, 2)), Perm(5, 3, flat=True)],
       linear=(0, 1)),
    Op("at_set_traced_int", lambda x, v, i: ix(x).at[i, 0].set(v),
       lambda x, v, i: jx(x).at[i, 0].set(v), [F((4, 3)), F(()), I((), -4, 4)],
       linear=(0, 1)),
    Op("at_add_dups", lambda x, v, i: ix(x).at[i].add(v),
       lambda x, v, i: jx(x).at[i].add(v), [F((4, 3)), F((5, 3)), I((5,), -4, 4)],
       linear=(0, 1)),
    Op("at_add_steps", lambda x, v: ix(x).at[::-2, 1].add(v),
       lambda x, v: jx(x).at[::-2, 1].add(v), [F((5, 3)), F((3,))], linear=(0, 1)),
    Op("at_add_out_of_bounds_dropped", lambda x, v: ix(x).at[np.array([0, 7, -9])].add(v),
       lambda x, v: jx(x).at[np.array([0, 7, -9])].add(v), [F((4, 2)), F((3, 2))],
       linear=(0, 1)),
    Op("at_get", lambda x, i: ix(x).at[i, 1:].get(), lambda x, i: jx(x).at[i, 1:].get(),
       [F((3, 4)), I((2,), 0, 3)], linear=(0,)),
    Op("at_set_mask", lambda x: ix(x).at[MASK].set(0.0), lambda x: jx(x).at[MASK].set(0.0),
       [F((3, 4))]),
]

OPS_BY_NAME = {op.name: op for op in OPS}
LINEAR_OPS = [op for op in OPS if op.linear]


# ------------------------------------------------------------------- helpers

assert_tree_close = functools.partial(helpers.assert_tree_close, tol=helpers.TOLERANCE["indexing"])


def _isum(out):
    return sum(inp.sum(inp.sin(o)) for o in jax.tree_util.tree_leaves(out))


def _jsum(out):
    return sum(jnp.sum(jnp.sin(o)) for o in jax.tree_util.tree_leaves(out))


def _loss(fn, s):
    return lambda *a: s(fn(*a))


def _cts(out, dtype, key):
    rng = _rng(*key)
    return jax.tree_util.tree_map(lambda o: rng.standard_normal(np.shape(o)).astype(dtype),
                                  out)


def _vmap_axes(op):
    """in_axes variants: all batched at 0; at 1 where possible; operands only; indices
    only (operands shared)."""
    n = len(op.makers)
    ranks = [len(m.shape) if hasattr(m, "shape") else 2 for m in op.makers]
    opts = [(0,) * n]
    if all(r >= 1 for r in ranks):
        opts.append((1,) * n)
    floats = [m.is_float for m in op.makers]
    if not all(floats):
        opts.append(tuple(0 if f else None for f in floats))
        opts.append(tuple(None if f else (1 if r >= 1 else 0)
                          for f, r in zip(floats, ranks)))
    elif n >= 2:
        opts.append((0,) + (None,) * (n - 1))
        opts.append((None,) * (n - 1) + (1 if ranks[-1] >= 1 else 0,))
    return list(dict.fromkeys(opts))


VMAP_CASES = [(op, ax) for op in OPS for ax in _vmap_axes(op)]
ids = lambda op: op.name  # noqa: E731
vmap_ids = [f"{op.name}-{ax}".replace(" ", "") for op, ax in VMAP_CASES]


# One dtype per case where a check is about the rule, not the dtype: the two float
# dtypes alternate across the table (deterministically), so both are exercised for every
# transformation while the suite stays fast.

def _alt(*key):
    return FLOATS[zlib.crc32(repr(key).encode()) % 2]


ALT = [(op, _alt(op.name)) for op in OPS]
ALT_LINEAR = [(op, _alt(op.name, "lt")) for op in LINEAR_OPS]
VMAP_ALT = [(op, ax, _alt(op.name, ax)) for op, ax in VMAP_CASES]
VMAP_GRAD_ALT = [(op, ax, _alt(op.name, ax, "g")) for op in OPS
                 for ax in dict.fromkeys([_vmap_axes(op)[0], _vmap_axes(op)[-1]])]
alt_ids = [f"{op.name}-{np.dtype(d).name}" for op, d in ALT]
alt_lin_ids = [f"{op.name}-{np.dtype(d).name}" for op, d in ALT_LINEAR]
vmap_alt_ids = [f"{op.name}-{ax}-{np.dtype(d).name}".replace(" ", "") for op, ax, d in VMAP_ALT]
vmap_grad_ids = [f"{op.name}-{ax}-{np.dtype(d).name}".replace(" ", "")
                 for op, ax, d in VMAP_GRAD_ALT]


# ------------------------------------------------------------- eager / jit

@pytest.mark.parametrize("dtype", floats_in_ci(np.float32))
@pytest.mark.parametrize("op", OPS, ids=ids)
def test_eager(op, dtype):
    args = make_args(op, dtype)
    assert_tree_close(op.impl_fn(*args), op.jax_fn(*args), dtype)


@pytest.mark.parametrize("op,dtype", ALT, ids=alt_ids)
def test_jit(op, dtype):
    args = make_args(op, dtype)
    assert_tree_close(impl.jit(op.impl_fn)(*args), jax.jit(op.jax_fn)(*args), dtype)


# -------------------------------------------------------------------- AD

@pytest.mark.parametrize("op,dtype", ALT, ids=alt_ids)
def test_jvp(op, dtype):
    args = make_args(op, dtype)
    dyn = [args[i] for i in op.diff]
    ts = _cts(dyn, dtype, (op.name, "jvp"))
    got = impl.jvp(_partial(op.impl_fn, args, op.diff), dyn, ts)
    want = jax.jvp(_partial(op.jax_fn, args, op.diff), dyn, ts)
    assert_tree_close(got, want, dtype)


# Reverse mode: both dtypes for the lax-level rows (float64 in CI, float32 nightly),
# alternating for the numpy-level ones (which are compositions of the same primitives).
NUMPY_LEVEL = ("np_", "idx_", "at_")
VJP_CASES = [(op, d) for op in OPS for d in
             (FLOATS if not op.name.startswith(NUMPY_LEVEL) else [_alt(op.name, "vjp")])]
VJP_PARAMS = [nightly(op, d) if d is np.float32 and not op.name.startswith(NUMPY_LEVEL)
              else (op, d) for op, d in VJP_CASES]


@pytest.mark.parametrize("op,dtype", VJP_PARAMS,
                         ids=[f"{op.name}-{np.dtype(d).name}" for op, d in VJP_CASES])
def test_vjp(op, dtype):
    """Reverse mode with a random cotangent (values and cotangents of every input)."""
    args = make_args(op, dtype)
    dyn = [args[i] for i in op.diff]
    out, f_vjp = impl.vjp(_partial(op.impl_fn, args, op.diff), *dyn)
    jout, jf_vjp = jax.vjp(_partial(op.jax_fn, args, op.diff), *dyn)
    ct = _cts(jout, dtype, (op.name, "ct"))
    assert_tree_close(out, jout, dtype)
    assert_tree_close(f_vjp(ct), jf_vjp(ct), dtype)


@pytest.mark.parametrize("op,dtype", ALT_LINEAR, ids=alt_lin_ids)
def test_linear_transpose(op, dtype):
    args = make_args(op, dtype)
    dyn = [args[i] for i in op.linear]
    f_t = impl.linear_transpose(_partial(op.impl_fn, args, op.linear), *dyn)
    jf_t = jax.linear_transpose(_partial(op.jax_fn, args, op.linear), *dyn)
    ct = _cts(op.jax_fn(*args), dtype, (op.name, "lt"))
    assert_tree_close(f_t(ct), jf_t(ct), dtype)


# -------------------------------------------------------------------- vmap

@pytest.mark.parametrize("op,in_axes,dtype", VMAP_ALT, ids=vmap_alt_ids)
def test_vmap(op, in_axes, dtype):
    args = batched_args(op, dtype, in_axes)
    got = impl.vmap(op.impl_fn, in_axes=in_axes)(*args)
    want = jax.vmap(op.jax_fn, in_axes=in_axes)(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("op,in_axes,dtype", VMAP_GRAD_ALT, ids=vmap_grad_ids)
@pytest.mark.slow
def test_vmap_of_grad(op, in_axes, dtype):
    args = batched_args(op, dtype, in_axes, "grad")
    got = impl.vmap(impl.grad(_loss(op.impl_fn, _isum), argnums=op.diff),
                    in_axes=in_axes)(*args)
    want = jax.vmap(jax.grad(_loss(op.jax_fn, _jsum), argnums=op.diff),
                    in_axes=in_axes)(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("op,dtype", ALT, ids=alt_ids)
@pytest.mark.slow
def test_jit_vmap_grad(op, dtype):
    in_axes = (0,) * len(op.makers)
    args = batched_args(op, dtype, in_axes, "jvg")
    got = impl.jit(impl.vmap(impl.grad(_loss(op.impl_fn, _isum), argnums=op.diff)))(*args)
    want = jax.jit(jax.vmap(jax.grad(_loss(op.jax_fn, _jsum), argnums=op.diff)))(*args)
    assert_tree_close(got, want, dtype)


GRAD_OF_VMAP = ["dynamic_slice", "dynamic_update_slice", "gather_window_clip",
                "gather_batching_dims", "scatter_add_rows_dups", "scatter_unique", "pad",
                "idx_two_arrays_bcast", "at_add_dups", "at_set_array_unique"]


@pytest.mark.parametrize("op", [OPS_BY_NAME[n] for n in GRAD_OF_VMAP], ids=ids)
@pytest.mark.slow
def test_grad_of_vmap(op):
    dtype = np.float64
    in_axes = _vmap_axes(op)[-1]
    args = batched_args(op, dtype, in_axes, "gov")
    got = impl.grad(_loss(impl.vmap(op.impl_fn, in_axes=in_axes), _isum),
                    argnums=op.diff)(*args)
    want = jax.grad(_loss(jax.vmap(op.jax_fn, in_axes=in_axes), _jsum),
                    argnums=op.diff)(*args)
    assert_tree_close(got, want, dtype)


@pytest.mark.parametrize("op", [OPS_BY_NAME[n] for n in (
    "dynamic_slice", "gather_window_clip", "scatter_add_rows_dups", "idx_two_arrays_bcast",
    "at_add_dups", "dynamic_update_slice")], ids=ids)
@pytest.mark.slow
def test_vmap_of_vmap(op):
    """Two nested vmaps: batched indices and operands inside batched ones."""
    dtype = np.float64
    args = [np.stack([a, a[::-1] if np.ndim(a) else a])
            for a in batched_args(op, dtype, (0,) * len(op.makers), "vv")]
    got = impl.vmap(impl.vmap(op.impl_fn))(*args)
    want = jax.vmap(jax.vmap(op.jax_fn))(*args)
    assert_tree_close(got, want, dtype)


# -------------------------------------------------------- scatter with repeats

def test_scatter_duplicates_grad():
    """Overwriting scatter with repeated indices: exactly one update per position lands,
    and only it gets a gradient (the same one jax picks)."""
    x = np.arange(6.0).reshape(3, 2)
    idx = np.array([[1], [1], [0], [1]])
    u = np.arange(8.0).reshape(4, 2) + 10

    def f(S, L):
        return lambda x, u: S.sum(L.scatter(x, idx, u * u, S_ROWS) * np.arange(6.0).reshape(3, 2))

    got_val = ilax.scatter(x, idx, u, S_ROWS)
    want_val = lax.scatter(x, idx, u, S_ROWS)
    assert_tree_close(got_val, want_val, np.float64)
    got = impl.grad(f(inp, ilax), argnums=(0, 1))(x, u)
    want = jax.grad(f(jnp, lax), argnums=(0, 1))(x, u)
    assert_tree_close(got, want, np.float64)
    # each written row gets its gradient from exactly one update
    assert (np.asarray(got[1]).any(axis=1)).sum() == 2
    # the transpose (jax has none for repeated indices; its vjp is the reference)
    ct = np.arange(6.0).reshape(3, 2) - 2.5
    lin_i = lambda x, u: ilax.scatter(x, idx, u, S_ROWS)  # noqa: E731
    lin_j = lambda x, u: lax.scatter(x, idx, u, S_ROWS)  # noqa: E731
    got = impl.linear_transpose(lin_i, x, u)(ct)
    want = jax.vjp(lin_j, x, u)[1](ct)
    assert_tree_close(got, want, np.float64)


# ------------------------------------------------------------- jaxpr shapes

def test_jaxpr_uses_expected_primitives():
    x = np.ones((4, 3), np.float32)
    text = str(impl.make_jaxpr(lambda x, i: x[i])(x, 1))
    assert "dynamic_slice" in text and "gather" not in text
    text = str(impl.make_jaxpr(lambda x, i: x[i])(x, np.array([1, 2])))
    assert "gather" in text
    text = str(impl.make_jaxpr(lambda x: x[1:3, ::-1])(x))
    assert "slice" in text and "rev" in text
    batched = str(impl.make_jaxpr(impl.vmap(lambda x, i: ilax.dynamic_slice(x, (i, 0), (2, 3))))(
        np.ones((2, 4, 3)), np.array([0, 1])))
    assert "gather" in batched and "operand_batching_dims=(0,)" in batched


def test_shapes_dtypes_and_weak_types():
    x32 = np.ones((3, 4), np.float32)
    out = impl.jit(lambda x: inp.concatenate([x, x], 0))(x32)
    assert out.shape == (6, 4) and out.dtype == np.float32
    out = impl.jit(lambda x: x.at[0].set(2))(np.ones(3, np.int32))
    want = jnp.ones(3, np.int32).at[0].set(2)
    assert out.dtype == want.dtype and np.array_equal(out, want)
    out = impl.jit(lambda x: inp.stack([x, 1.0]))(np.float32(2.0))
    want = jax.jit(lambda x: jnp.stack([x, 1.0]))(np.float32(2.0))
    assert out.dtype == want.dtype and np.array_equal(out, want)
    out = impl.jit(lambda x: x[np.array([0, 0])])(np.arange(3, dtype=np.int64))
    assert out.dtype == np.int64 and np.array_equal(out, [0, 0])


def test_eager_impl_numpy_on_jax_arrays():
    """impl.numpy functions on eager jax arrays go through impl's primitives."""
    x = jnp.arange(6.0).reshape(2, 3)
    assert_tree_close(inp.take(x, np.array([2, 0]), axis=1),
                      jnp.take(x, np.array([2, 0]), axis=1), np.float64)
    assert_tree_close(inp.concatenate([x, x]), jnp.concatenate([x, x]), np.float64)
    assert_tree_close(nix.getitem(x, (1, slice(None, None, -1))), x[1, ::-1], np.float64)


# ------------------------------------------------------------------ bad input

BAD = [
    ("slice_out_of_bounds", lambda: ilax.slice(np.ones((3, 4)), (0, 1), (3, 5)),
     TypeError, r"slice: indices out of bounds"),
    ("slice_wrong_rank", lambda: ilax.slice(np.ones((3, 4)), (0,), (3,)),
     TypeError, r"slice: .*one entry per axis"),
    ("slice_start_after_limit", lambda: ilax.slice(np.ones(4), (3,), (2,)),
     TypeError, r"slice: indices out of bounds"),
    ("dynamic_slice_wrong_count", lambda: ilax.dynamic_slice(np.ones((3, 4)), (1,), (2, 2)),
     TypeError, r"dynamic_slice: got 1 start indices"),
    ("dynamic_slice_too_big", lambda: ilax.dynamic_slice(np.ones((3, 4)), (0, 0), (4, 2)),
     TypeError, r"dynamic_slice: slice_sizes \(4, 2\) must fit"),
    ("dynamic_slice_float_index",
     lambda: ilax.dynamic_slice(np.ones((3, 4)), (np.float32(1), 0), (2, 2)),
     TypeError, r"start indices must be integers"),
    ("dus_too_big", lambda: ilax.dynamic_update_slice(np.ones((3, 4)), np.ones((4, 1)), (0, 0)),
     TypeError, r"dynamic_update_slice: update shape \(4, 1\) must fit"),
    ("dus_wrong_count", lambda: ilax.dynamic_update_slice(np.ones((3, 4)), np.ones((1, 1)),
                                                          (0, 0, 0)),
     TypeError, r"dynamic_update_slice: got 3 start indices"),
    ("concat_shape", lambda: ilax.concatenate([np.ones((2, 3)), np.ones((3, 3))], 1),
     TypeError, r"concatenate: operand shapes must agree except along dimension 1"),
    ("concat_dtype", lambda: ilax.concatenate([np.ones(2, np.float32), np.ones(2)], 0),
     TypeError, r"lax.concatenate requires arguments to have the same dtypes"),
    ("pad_config", lambda: ilax.pad(np.ones((2, 3)), 0.0, [(1, 1, 0)]),
     TypeError, r"pad: padding_config"),
    ("pad_negative_size", lambda: ilax.pad(np.ones(2), 0.0, [(-2, -1, 0)]),
     TypeError, r"pad: padding_config .* negative size"),
    ("gather_bad_index_vector",
     lambda: ilax.gather(np.ones((5, 3)), np.zeros((4, 2), np.int32), G_ROWS, (1, 3)),
     TypeError, r"gather: the last axis of indices"),
    ("gather_float_indices",
     lambda: ilax.gather(np.ones((5, 3)), np.zeros((4, 1)), G_ROWS, (1, 3)),
     TypeError, r"gather: indices must be integers"),
    ("gather_slice_too_big",
     lambda: ilax.gather(np.ones((5, 3)), np.zeros((4, 1), np.int32), G_ROWS, (1, 4)),
     TypeError, r"gather: slice_sizes \(1, 4\) must fit"),
    ("scatter_updates_shape",
     lambda: ilax.scatter_add(np.ones((5, 3)), np.zeros((4, 1), np.int32), np.ones((3, 3)),
                              S_ROWS),
     TypeError, r"scatter_add: updates shape \(3, 3\) does not match"),
    ("getitem_too_many", lambda: nix.getitem(np.ones((2, 3)), (0, 1, 2)),
     IndexError, r"Too many indices: array is 2-dimensional, but 3 were indexed"),
    ("getitem_two_ellipses", lambda: nix.getitem(np.ones((2, 3)), (Ellipsis, Ellipsis)),
     IndexError, r"single ellipsis"),
    ("getitem_float", lambda: nix.getitem(np.ones((2, 3)), 1.5),
     TypeError, r"Indexing with float"),
    ("getitem_float_array", lambda: nix.getitem(np.ones((2, 3)), np.array([1.0])),
     TypeError, r"integer or boolean type"),
    ("getitem_traced_mask", lambda: impl.jit(lambda x: x[x > 0])(np.ones(3)),
     IndexError, r"boolean indices must be concrete"),
    ("getitem_traced_slice_bound", lambda: impl.jit(lambda x, i: x[i:])(np.ones(3), 1),
     IndexError, r"slice bounds must be static"),
    ("at_set_bad_shape", lambda: impl.jit(lambda x: x.at[0].set(np.ones(5)))(np.ones((2, 3))),
     ValueError, r"cannot be broadcast to the indexed shape \(3,\)"),
    ("split_unequal", lambda: inp.split(np.ones(5), 2), ValueError, r"equal division"),
    ("concat_scalars", lambda: inp.concatenate([np.float32(1), np.float32(2)]), ValueError,
     r"zero-dimensional"),
    ("pad_mode", lambda: inp.pad(np.ones(3), 1, mode="edge"), NotImplementedError,
     r"only mode='constant'"),
    ("repeat_traced", lambda: impl.jit(lambda x, r: inp.repeat(x, r))(np.ones(3), np.ones(3, int)),
     TypeError, r"repeat counts"),
]


@pytest.mark.parametrize("name,fn,exc,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input(name, fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
