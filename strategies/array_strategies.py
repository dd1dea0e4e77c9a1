"""Strategies for shapes and NumPy arrays that keep programs numerically sane.

Floats come from a bounded range with no NaN, infinity or subnormal (XLA on
CPU flushes subnormals to zero, which would make a backend "disagree" with
NumPy for no interesting reason). Shapes favour small sides, so size-1 and
odd sides are common, and hypothesis shrinks them towards scalars.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .types import FLOAT_DTYPES, INPUT_BOUND

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_INT_RANGE = (-8, 8)


def _check_dtype(dtype) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"dtype must name a NumPy dtype, got {dtype!r}") from e
    if dt.name not in FLOAT_DTYPES + INT_DTYPES + ("bool",):
        raise ValueError(f"unsupported dtype {dt.name!r}; use one of {FLOAT_DTYPES + INT_DTYPES + ('bool',)}")
    return dt


def _check_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    if not isinstance(shape, (tuple, list)) or not all(isinstance(d, (int, np.integer)) for d in shape):
        raise TypeError(f"shape must be a tuple of ints, got {shape!r}")
    if any(d < 0 for d in shape):
        raise ValueError(f"shape must have non-negative sides, got {shape!r}")
    return tuple(int(d) for d in shape)


def dtypes(*, floats=True, ints=False) -> st.SearchStrategy[np.dtype]:
    """Array dtypes: float32/float64, optionally also signed/unsigned ints.

    >>> dtypes(ints=True).example().kind in "fiu"
    True
    """
    names = (FLOAT_DTYPES if floats else ()) + (INT_DTYPES if ints else ())
    if not names:
        raise ValueError("dtypes() needs floats=True or ints=True")
    return st.sampled_from([np.dtype(n) for n in names])


def elements(dtype, *, min_value=None, max_value=None) -> st.SearchStrategy:
    """Element strategy for ``dtype``: finite, no subnormals, bounded.

    Floats default to [-2, 2] (where exp, products and finite differences
    behave); ints to [-8, 8] clipped to the dtype's range.
    """
    dt = _check_dtype(dtype)
    if dt.kind == "f":
        lo = -INPUT_BOUND if min_value is None else float(min_value)
        hi = INPUT_BOUND if max_value is None else float(max_value)
        if lo > hi:
            raise ValueError(f"min_value {lo} > max_value {hi}")
        return st.floats(lo, hi, width=dt.itemsize * 8, allow_nan=False, allow_infinity=False,
                         allow_subnormal=False)
    if dt.kind == "b":
        return st.booleans()
    info = np.iinfo(dt)
    lo = max(info.min, _INT_RANGE[0] if min_value is None else int(min_value))
    hi = min(info.max, _INT_RANGE[1] if max_value is None else int(max_value))
    if lo > hi:
        raise ValueError(f"empty integer range [{lo}, {hi}] for {dt.name}")
    return st.integers(lo, hi)


_elements_for = elements  # arrays() takes a parameter of the same name


def shapes(*, min_dims=0, max_dims=3, min_side=1, max_side=5) -> st.SearchStrategy[tuple[int, ...]]:
    """Array shapes with small sides (1 and odd sides included).

    >>> shapes(min_dims=1, max_dims=2).example()   # e.g. (3, 1)
    """
    for name, v in (("min_dims", min_dims), ("max_dims", max_dims), ("min_side", min_side), ("max_side", max_side)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if not 0 <= min_dims <= max_dims <= 8:
        raise ValueError(f"need 0 <= min_dims <= max_dims <= 8, got {min_dims}, {max_dims}")
    if not 0 <= min_side <= max_side:
        raise ValueError(f"need 0 <= min_side <= max_side, got {min_side}, {max_side}")
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def arrays(dtype=None, shape=None, *, elements=None, unique=False) -> st.SearchStrategy[np.ndarray]:
    """NumPy arrays; ``dtype``/``shape``/``elements`` may be strategies.

    Defaults: float32 or float64, a shape from :func:`shapes`, elements from
    :func:`strategies.elements`.

    >>> arrays("float32", (2, 3)).example().shape
    (2, 3)
    """
    dtype_st = dtypes() if dtype is None else (dtype if isinstance(dtype, st.SearchStrategy) else st.just(_check_dtype(dtype)))
    shape_st = shapes() if shape is None else (shape if isinstance(shape, st.SearchStrategy) else st.just(_check_shape(shape)))
    if elements is not None and not isinstance(elements, st.SearchStrategy):
        raise TypeError(f"elements must be a hypothesis strategy, got {elements!r}")
    elements_arg = elements

    @st.composite
    def draw_array(draw):
        dt = draw(dtype_st)
        shp = draw(shape_st)
        el = elements_arg if elements_arg is not None else _elements_for(dt)
        if unique:
            _check_unique_room(dt, shp, elements_arg)
        return draw(hnp.arrays(dt, shp, elements=el, unique=unique))

    return draw_array()


def _check_unique_room(dt, shape, custom_elements):
    if custom_elements is None and dt.kind in "iub":
        room = 2 if dt.kind == "b" else len(range(*_clip_int_range(dt)))
        if math.prod(shape) > room:
            raise ValueError(f"cannot draw {math.prod(shape)} distinct {dt.name} elements from a range of {room}")


def _clip_int_range(dt):
    info = np.iinfo(dt)
    return max(info.min, _INT_RANGE[0]), min(info.max, _INT_RANGE[1]) + 1


def batched_arrays(batch_size, dtype=None, shape=None, *, axis=0, elements=None) -> st.SearchStrategy[np.ndarray]:
    """Arrays with a batch axis of ``batch_size`` whose slices all differ.

    Every element is distinct, so any two slices along ``axis`` differ at
    every position: a batching bug that mixes or reduces over the batch
    cannot hide behind equal slices. ``axis`` may be negative (counted in
    the batched array, as ``in_axes`` is).

    >>> x = batched_arrays(3, "float64", (2,), axis=-1).example()
    >>> x.shape
    (2, 3)
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool):
        raise TypeError(f"batch_size must be an int, got {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"axis must be an int, got {axis!r}")
    shape_st = shapes() if shape is None else (shape if isinstance(shape, st.SearchStrategy) else st.just(_check_shape(shape)))

    @st.composite
    def draw_batched(draw):
        shp = draw(shape_st)
        rank = len(shp) + 1
        if not -rank <= axis < rank:
            raise ValueError(f"axis {axis} out of range for a batched array of rank {rank}")
        full = shp[: axis % rank] + (batch_size,) + shp[axis % rank:]
        return draw(arrays(dtype, full, elements=elements, unique=True))

    return draw_batched()


def insert_axis(shape: tuple[int, ...], axis: int, size: int) -> tuple[int, ...]:
    """``shape`` with a new side ``size`` at ``axis`` (negative counts in the result)."""
    rank = len(shape) + 1
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    a = axis % rank
    return shape[:a] + (size,) + shape[a:]
