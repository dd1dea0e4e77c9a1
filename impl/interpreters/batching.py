"""vmap: a trace whose tracers carry a value with one extra (batch) axis.

Each tracer records which axis of its value is the batch axis (`batch_dim`): an int,
`not_mapped` (None) when the value is the same for every batch element, or a
`ConcatAxis` when the elements are ragged (a `Pile`: elements of different lengths
stored one after another along one axis). Rules receive the axis data (size and name),
the values and their batch dims, and return the outputs with theirs.

Besides the trace this module holds what vmap needs around it: the named-axis
environment collectives look sizes up in, the registry of user types vmap can map
(`register_vmappable`), ragged piles, and the rule makers for common rule shapes.
"""
from __future__ import annotations

import threading
from functools import partial
from typing import Any, Callable

import jax
import numpy as np

from impl import core
from impl.core import ClosedJaxpr, ShapedArray, Tracer, get_aval
from impl.interpreters import partial_eval as pe

not_mapped = None
batching_rules: dict = {}   # prim -> rule(axis_data, vals, dims, **params) -> (out, out_dims)


class AxisData:
    """The size and name of the axis a BatchTrace maps over, and the mesh axes its batch
    dimension is sharded over (`vmap(..., spmd_axis_name=...)`: a tuple, or None)."""

    __slots__ = ("name", "size", "spmd_name")

    def __init__(self, name, size, spmd_name=None):
        self.name = name
        self.size = size
        self.spmd_name = spmd_name

    def __repr__(self):
        return f"AxisData(name={self.name!r}, size={self.size}, spmd_name={self.spmd_name!r})"


# ------------------------------------------------------------------ named axes

class _AxisEnv(threading.local):
    def __init__(self):
        self.frames = []   # (name, size), innermost last


_axis_env = _AxisEnv()


class extend_axis_env:
    """Bind axis names to sizes while staging a program, without mapping anything:
    `make_jaxpr(f, axis_env=[('i', 4)])` stages `psum(x, 'i')` as an equation."""

    __slots__ = ("frames",)

    def __init__(self, frames):
        self.frames = [(name, int(size)) for name, size in frames]

    def __enter__(self):
        _axis_env.frames.extend(self.frames)
        return self

    def __exit__(self, *exc):
        del _axis_env.frames[len(_axis_env.frames) - len(self.frames):]
        return False


def unbound_axis_error(name, api_name):
    return NameError(f"Found an unbound axis name: {name}. To fix this, please call "
                     f"{api_name} under a vmap or shard_map that binds the axis name "
                     f"{name!r}.")


def axis_size(name, api_name="axis_size"):
    """The size of the innermost axis called `name`: a vmap's (by the trace stack), one
    bound for staging (`extend_axis_env`), or one JAX binds while impl code runs inside
    `jax.vmap`/`jax.shard_map` (then the collective lowers to JAX's own)."""
    trace = core.current_trace()
    while trace is not None:
        if isinstance(trace, BatchTrace) and trace.axis_data.name == name:
            return trace.axis_data.size
        trace = trace.parent
    for bound, size in reversed(_axis_env.frames):
        if bound == name:
            return size
    try:
        return int(jax.lax.axis_size(name))
    except NameError:
        raise unbound_axis_error(name, api_name) from None


def axis_env_key():
    """The named axes visible now, for caches of programs staged here (a program with
    collectives depends on the sizes of the axes they name)."""
    names = []
    trace = core.current_trace()
    while trace is not None:
        if isinstance(trace, BatchTrace) and trace.axis_data.name is not None:
            names.append((trace.axis_data.name, trace.axis_data.size))
        trace = trace.parent
    vma = core.tracked_vma_axes()   # whether types track varying manual axes here
    return tuple(names) + tuple(_axis_env.frames) + ((("vma",) + vma,) if vma else ())


# ------------------------------------------------------------------ ragged piles

class ConcatAxis:
    """The batch dim of a ragged value: element k is the k-th run of `lengths[k]`
    positions along `axis` of the value (the elements are concatenated there)."""

    __slots__ = ("axis", "lengths")

    def __init__(self, axis, lengths):
        self.axis = int(axis)
        self.lengths = tuple(int(n) for n in lengths)

    def __eq__(self, other):
        return (type(other) is ConcatAxis and other.axis == self.axis
                and other.lengths == self.lengths)

    def __hash__(self):
        return hash((self.axis, self.lengths))

    def __repr__(self):
        return f"ConcatAxis(axis={self.axis}, lengths={self.lengths})"

    def bounds(self):
        """(start, stop) of each element along the axis."""
        ends = np.cumsum(self.lengths)
        return [(int(e - n), int(e)) for e, n in zip(ends, self.lengths)]


class RaggedSize:
    """The length of a pile element along its ragged axis. It differs between the
    elements, so it is not a static integer: using it as one raises a clear TypeError
    instead of silently computing with one element's length."""

    __slots__ = ("lengths",)

    def __init__(self, lengths):
        self.lengths = lengths

    def __eq__(self, other):
        return type(other) is RaggedSize and other.lengths == self.lengths

    def __hash__(self):
        return hash(("ragged", self.lengths))

    def __repr__(self):
        return f"ragged{self.lengths}"

    def __index__(self):
        raise TypeError(
            f"The elements of this pile have different lengths {self.lengths} along their "
            "ragged axis, so inside vmap(..., in_axes=pile_axis) that length is not a static "
            "integer. Use operations that act per element (elementwise math, sums and "
            "other reductions, dot products) rather than computing with the shape.")

    __int__ = __float__ = __index__


class RaggedShapedArray(ShapedArray):
    """The abstract value of one element of a pile: its ragged axis is a RaggedSize."""

    __slots__ = ()

    def __init__(self, shape, dtype, weak_type=False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self.explicit_sharding = None   # piles are not sharded over Explicit mesh axes
        self.vma = ()                   # nor mapped over manual mesh axes
        self.manual_unreduced = self.manual_reduced = ()
        self.mesh = None                # nor on a mesh


class PileAxis:
    """The in_axes/out_axes spec of a Pile (the value `pile_axis`)."""

    def __repr__(self):
        return "pile_axis"


pile_axis = PileAxis()


class Pile:
    """A ragged batch: `len(lengths)` arrays that differ only in their size along `axis`,
    stored concatenated along it (no padding). `axis=None` is a regular batch stacked
    along a new leading axis (what `out_axes=pile_axis` gives for regular outputs).
    Map over one with `vmap(f, in_axes=pile_axis, axis_size=n)`."""

    __slots__ = ("data", "lengths", "axis")

    def __init__(self, data, lengths, axis):
        self.data = data
        self.lengths = None if lengths is None else tuple(int(n) for n in lengths)
        self.axis = None if axis is None else int(axis)

    @property
    def size(self):
        return len(self.lengths) if self.axis is not None else get_aval(self.data).shape[0]

    def unpile(self):
        """The elements, as a list of arrays."""
        if self.axis is None:
            return [self.data[k] for k in range(self.size)]
        return [core.ops.slice_in_dim(self.data, lo, hi, 1, self.axis)
                for lo, hi in ConcatAxis(self.axis, self.lengths).bounds()]

    def __repr__(self):
        return f"Pile(lengths={self.lengths}, axis={self.axis}, data={self.data!r})"


jax.tree_util.register_pytree_node(
    Pile, lambda p: ((p.data,), (p.lengths, p.axis)),
    lambda aux, children: Pile(children[0], *aux))


def pile(arrays, axis=0):
    """A Pile of `arrays`, which must agree in rank, dtype and every size but `axis`."""
    arrays = list(arrays)
    if not arrays:
        raise ValueError("pile: needs at least one array")
    avals = [get_aval(a) for a in arrays]
    ndim = avals[0].ndim
    if ndim == 0:
        raise TypeError("pile: the arrays must have at least one axis to be ragged along")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"pile: axis {axis} is out of bounds for arrays of rank {ndim}")
    axis %= ndim
    for i, a in enumerate(avals):
        if a.ndim != ndim or a.dtype != avals[0].dtype:
            raise TypeError(f"pile: array {i} is {a.str_short()} but array 0 is "
                            f"{avals[0].str_short()}; they must share rank and dtype")
        others = a.shape[:axis] + a.shape[axis + 1:]
        if others != avals[0].shape[:axis] + avals[0].shape[axis + 1:]:
            raise TypeError(f"pile: array {i} has shape {a.shape} and array 0 {avals[0].shape}; "
                            f"they may differ only along axis {axis}")
    data = core.ops.concatenate(arrays, axis)
    return Pile(data, [a.shape[axis] for a in avals], axis)


# ------------------------------------------------------------------ the trace

def example_aval(x, batch_dim):
    """The abstract value of one example of `x` (batch axis `batch_dim` or None)."""
    aval = get_aval(x)
    if batch_dim is None:
        return aval
    if type(batch_dim) is ConcatAxis:
        shape = list(aval.shape)
        shape[batch_dim.axis] = RaggedSize(batch_dim.lengths)
        return RaggedShapedArray(shape, aval.dtype, aval.weak_type)
    shape = aval.shape[:batch_dim] + aval.shape[batch_dim + 1:]
    sharding = aval.explicit_sharding
    if sharding is not None:   # an example's type: the batch axis's entry leaves the spec
        entries = tuple(sharding.spec.partitions)
        sharding = core.sharding_with_partitions(
            sharding, entries[:batch_dim] + entries[batch_dim + 1:])
    return aval.update(shape=shape, explicit_sharding=sharding)


class BatchTracer(Tracer):
    __slots__ = ("val", "batch_dim", "_example_aval")

    def __init__(self, trace, val, batch_dim):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim
        self._example_aval = None

    @property
    def aval(self):
        # Asked for by every primitive applied to it: computed once (val and batch_dim
        # never change).
        aval = self._example_aval
        if aval is None:
            aval = self._example_aval = example_aval(self.val, self.batch_dim)
        return aval

    def __repr__(self):
        return f"VmapTracer(aval={self.aval}, batched={get_aval(self.val)})"


def _holds_collective(params):
    """Whether a primitive's programs (a jit body, a custom rule's function, a branch)
    apply a collective: such a primitive refers to the vmapped axes even when none of
    its operands is batched, so vmap must process it."""
    return any(e.primitive.collective or _holds_collective(e.params)
               for p in params.values() for j in core.programs_in(p) for e in j.eqns)


def collective_over(programs, axis_name):
    """Whether `programs` (or a program they hold) apply a collective over the vmapped
    axis `axis_name`: then an element's values reach the other elements' results."""
    return axis_name is not None and any(
        (e.primitive.collective and axis_name in e.params.get("axes", ()))
        or collective_over([j for p in e.params.values() for j in core.programs_in(p)],
                           axis_name)
        for j in programs for e in j.eqns)


class BatchTrace(core.Trace):
    __slots__ = ("axis_data",)

    def __init__(self, parent, axis_data):
        super().__init__(parent)
        self.axis_data = axis_data

    def process_primitive(self, prim, args, params):
        vals, dims, batched = [], [], False
        for x in args:
            if type(x) is BatchTracer and x._trace is self:
                vals.append(x.val)
                dims.append(x.batch_dim)
                batched = batched or x.batch_dim is not None
            else:
                if isinstance(x, Tracer):
                    self.check_alive(x)
                vals.append(x)
                dims.append(None)
        if not batched and not prim.collective and not _holds_collective(params):
            with core.set_current_trace(self.parent):
                return prim.bind(*vals, **params)
        rule = batching_rules.get(prim)
        if rule is None:
            raise core.missing_rule("Batching", prim)
        ragged = any(type(d) is ConcatAxis for d in dims)
        if ragged and prim.collective:
            raise TypeError(f"'{prim.name}' is not supported on ragged values (piles)")
        if ragged and not getattr(rule, "handles_ragged", False):
            rule = partial(per_element_rule, prim)
        elif not ragged and not _typed_alike_by_rule(rule, vals, dims):
            # Type-check one example first: an error then names the shapes and axes the
            # user wrote, not the ones the rule shifted past the batch axis.
            core.abstract_eval(prim, [example_aval(x, d) for x, d in zip(vals, dims)], params)
        with core.set_current_trace(self.parent):
            out, out_dims = rule(self.axis_data, vals, dims, **params)
        if prim.multiple_results:
            return [self.wrap(o, d) for o, d in zip(out, out_dims)]
        return self.wrap(out, out_dims)

    def wrap(self, val, dim):
        return val if dim is None else BatchTracer(self, val, dim)


def per_element_rule(prim, axis_data, vals, dims, **params):
    """Batching by applying `prim` to each element and reassembling: the rule for
    primitives that meet ragged operands and have no ragged-aware rule. Each element
    has static shapes, so any primitive whose parameters do not depend on the ragged
    length is handled exactly; outputs of equal shapes are stacked (regular), outputs
    differing along one axis are concatenated there (ragged)."""
    per_k = []
    for k in range(axis_data.size):
        args = [_element(x, d, k) for x, d in zip(vals, dims)]
        out = prim.bind(*args, **params)
        per_k.append(out if prim.multiple_results else [out])
    outs, out_dims = zip(*[_reassemble(list(col)) for col in zip(*per_k)])
    return (list(outs), list(out_dims)) if prim.multiple_results else (outs[0], out_dims[0])


def _element(x, d, k):
    if d is None:
        return x
    if type(d) is ConcatAxis:
        lo, hi = d.bounds()[k]
        return core.ops.slice_in_dim(x, lo, hi, 1, d.axis)
    shape = get_aval(x).shape
    piece = core.ops.slice_in_dim(x, k, k + 1, 1, d)
    return core.ops.reshape(piece, shape[:d] + shape[d + 1:])


def _reassemble(outs):
    shapes = [get_aval(o).shape for o in outs]
    if all(s == shapes[0] for s in shapes):
        return core.ops.concatenate([core.ops.reshape(o, (1,) + s) for o, s in zip(outs, shapes)],
                                    0), 0
    differ = [i for i in range(len(shapes[0])) if len({s[i] for s in shapes}) > 1]
    if len(differ) != 1 or len({len(s) for s in shapes}) != 1:
        raise TypeError(f"the elements of a pile gave outputs of shapes {shapes}, which "
                        "differ along more than one axis; a pile can be ragged along one")
    axis = differ[0]
    return core.ops.concatenate(outs, axis), ConcatAxis(axis, [s[axis] for s in shapes])


# ------------------------------------------------------------ vmappable types

to_elt_handlers: dict = {}     # data type -> to_elt(cont, get_idx, value, spec)
from_elt_handlers: dict = {}   # data type -> from_elt(cont, axis_size, elt, spec)
make_iota_handlers: dict = {}  # axis size type -> make_iota(axis_size)
vmappables: dict = {}          # data type -> (spec type, axis size type)
spec_types: set = {PileAxis}


def register_vmappable(data_type, spec_type, axis_size_type, to_elt, from_elt, make_iota):
    """Teach vmap to map values of `data_type` (given with in/out specs of `spec_type`).

    `to_elt(cont, get_idx, value, spec)` turns a batched value into one element, calling
    `cont(array, int_or_None)` for the arrays inside it; `from_elt(cont, axis_size, elt,
    spec)` turns an output element back into a batched value, calling
    `cont(axis_size, array, int_or_None)`. `get_idx()` is the element's index along the
    mapped axis; `make_iota(axis_size)` builds all indices for sizes of `axis_size_type`.
    """
    vmappables[data_type] = (spec_type, axis_size_type)
    spec_types.add(spec_type)
    to_elt_handlers[data_type] = to_elt
    from_elt_handlers[data_type] = from_elt
    if make_iota is not None:
        make_iota_handlers[axis_size_type] = make_iota


def unregister_vmappable(data_type):
    """Undo `register_vmappable(data_type, ...)`."""
    if data_type not in vmappables:
        raise ValueError(f"unregister_vmappable: {data_type.__name__} is not registered")
    spec_type, axis_size_type = vmappables.pop(data_type)
    if all(s is not spec_type for s, _ in vmappables.values()) and spec_type is not PileAxis:
        spec_types.discard(spec_type)
    del to_elt_handlers[data_type]
    del from_elt_handlers[data_type]
    if all(a is not axis_size_type for _, a in vmappables.values()):
        make_iota_handlers.pop(axis_size_type, None)


def is_vmappable(x) -> bool:
    return type(x) is Pile or type(x) in vmappables


def is_spec(spec) -> bool:
    """Whether `spec` is a leaf of an in_axes/out_axes tree (not a container of them)."""
    return spec is None or isinstance(spec, (int, np.integer)) or type(spec) in spec_types


def make_iota(axis_size):
    handler = make_iota_handlers.get(type(axis_size))
    if handler is not None:
        return handler(axis_size)
    return np.arange(int(axis_size), dtype=np.int32)


def not_a_pile_error(x):
    return TypeError(f"vmap: in_axes=pile_axis was given for a value of type "
                     f"{type(x).__name__}, which is not a Pile (build one with impl.pile)")


def to_elt(trace, get_idx, x, spec):
    """One element of the batched input `x` mapped as `spec`."""
    handler = to_elt_handlers.get(type(x))
    if handler is not None:
        return handler(partial(to_elt, trace, get_idx), get_idx, x, spec)
    if type(x) is Pile:
        if spec is not pile_axis:
            raise TypeError(f"vmap: a Pile was given with in_axes {spec!r}; map over a pile "
                            "with in_axes=pile_axis")
        dim = 0 if x.axis is None else ConcatAxis(x.axis, x.lengths)
        return BatchTracer(trace, x.data, dim)
    if spec is pile_axis:
        raise not_a_pile_error(x)
    if spec is None:
        return x
    ndim = get_aval(x).ndim
    return BatchTracer(trace, x, int(spec) % ndim if ndim else int(spec))


def from_elt(trace, axis_size, x, spec, sum_match=False):
    """The batched output for one output element `x`, laid out as `spec`."""
    handler = from_elt_handlers.get(type(x))
    if handler is not None:
        return handler(lambda size, y, s: from_elt(trace, size, y, s, sum_match),
                       axis_size, x, spec)
    val, dim = (x.val, x.batch_dim) if type(x) is BatchTracer and x._trace is trace \
        else (x, None)
    if type(dim) is ConcatAxis:
        if spec is not pile_axis:
            raise TypeError(f"vmap: an output is ragged (a pile with lengths {dim.lengths}) "
                            f"but its out_axes is {spec!r}; use out_axes=pile_axis for it")
        return Pile(val, dim.lengths, dim.axis)
    if spec is pile_axis:
        return Pile(matchaxis(axis_size, dim, 0, val), None, None)
    return matchaxis(axis_size, dim, spec, val, sum_match)


# --------------------------------------------------------------------- helpers

def moveaxis(x, src, dst):
    if src == dst:
        return x
    ndim = get_aval(x).ndim
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return core.ops.transpose(x, tuple(perm))


def broadcast_batch(x, size, dim):
    """Give an unbatched value a batch axis of `size` at position `dim`."""
    aval = get_aval(x)
    shape = list(aval.shape)
    shape.insert(dim, size)
    bdims = tuple(i for i in range(len(shape)) if i != dim)
    return core.ops.broadcast_in_dim(x, tuple(shape), bdims)


def matchaxis(size, src, dst, x, sum_match=False):
    """Move (or create, by broadcasting) the batch axis of `x` from `src` to `dst`; with
    `sum_match`, a mapped value asked for unmapped is summed over its batch axis."""
    if dst is None:
        if src is None:
            return x
        if sum_match:
            return core.ops.reduce_sum(x, (src,))
        raise ValueError(f"a value mapped along axis {src} cannot be made unmapped")
    if src is None:
        return broadcast_batch(x, size, dst)
    return moveaxis(x, src, dst)


def bdim_at_front(x, dim, size):
    return matchaxis(size, dim, 0, x)


def vmap_flat(fun, args, in_specs, axis_size, axis_name, out_specs_fn, name="function",
              sum_match=False, mapped_outs=None, spmd_axis_name=None):
    """Map `fun` over `args` (flat lists of values, Piles or registered vmappables).
    `out_specs_fn(n)` gives the specs of the n outputs once `fun` has run; a list given
    as `mapped_outs` receives, per output, whether it varies along the mapped axis."""
    trace = BatchTrace(core.current_trace(), AxisData(axis_name, axis_size, spmd_axis_name))
    with core.new_trace(trace):
        idx = []

        def get_idx():
            if not idx:
                idx.append(BatchTracer(trace, make_iota(axis_size), 0))
            return idx[0]

        ins = [to_elt(trace, get_idx, x, s) for x, s in zip(args, in_specs)]
        outs = fun(*ins)
        specs = out_specs_fn(len(outs))
        for o, s in zip(outs, specs):
            mapped = (type(o) is BatchTracer and o._trace is trace
                      and type(o.batch_dim) is int)
            if mapped_outs is not None:
                mapped_outs.append(mapped)
            if s is None and mapped and not sum_match:
                raise ValueError(f"at vmap out_axes, got axis spec None but output was "
                                 f"batched on axis {o.batch_dim} (vmap of {name}, "
                                 f"axis_name={axis_name}): return only unmapped values "
                                 "there, give an integer out_axes, or pass sum_match=True "
                                 "to sum it over the mapped axis.")
        return [from_elt(trace, axis_size, o, s, sum_match) for o, s in zip(outs, specs)]


def batch_with_dims(fun, args, in_dims, axis_size, axis_name, spmd_axis_name=None):
    """Map `fun` over arrays batched along `in_dims`; returns outputs with their batch
    dims, unmoved."""
    trace = BatchTrace(core.current_trace(), AxisData(axis_name, axis_size, spmd_axis_name))
    with core.new_trace(trace):
        ins = [BatchTracer(trace, x, d) if d is not None else x for x, d in zip(args, in_dims)]
        outs = fun(*ins)
        res = []
        for o in outs:
            if type(o) is BatchTracer and o._trace is trace:
                res.append((o.val, o.batch_dim))
            else:
                res.append((o, None))
    return res


def batch_jaxpr(closed: ClosedJaxpr, axis_data, in_avals, in_dims, instantiate=False):
    """A program over batched inputs whose batched outputs carry the batch axis first;
    returns it with the output batch dims (0 or None). `instantiate` (a bool, or one per
    output) batches those outputs even when they do not vary, so that loops can keep a
    carry's type. Cached on `closed`."""
    if any(type(d) is ConcatAxis for d in in_dims):
        raise TypeError("a staged program (jit, custom rules) cannot be applied to the "
                        "elements of a pile inside vmap(..., in_axes=pile_axis): apply jit "
                        "outside that vmap")
    inst = core.bools_per(instantiate, len(closed.out_avals))
    key = ("batch", axis_data.size, axis_data.name, axis_data.spmd_name, tuple(in_avals),
           tuple(in_dims), inst)
    hit = closed._cache.get(key)
    if hit is not None:
        return hit
    box = {}

    def fun(*args):
        res = batch_with_dims(core.jaxpr_as_fun(closed), args, in_dims,
                              axis_data.size, axis_data.name, axis_data.spmd_name)
        res = [(broadcast_batch(x, axis_data.size, 0), 0) if d is None and i else (x, d)
               for (x, d), i in zip(res, inst)]
        box["out_dims"] = [None if d is None else 0 for _, d in res]
        return [x if d is None else moveaxis(x, d, 0) for x, d in res]

    new = pe.make_closed_jaxpr(fun, in_avals)
    closed._cache[key] = result = (new, box["out_dims"])
    return result


# ------------------------------------------------------------- rule makers
# Each builds a batching rule once the primitive exists; pass them to
# `impl.primitives._define.define(batching=...)`. The rules they build also accept
# ragged operands (`handles_ragged`).

def _ragged_aware(rule):
    rule.handles_ragged = True
    return rule


def _typed_alike_by_rule(rule, vals, dims):
    """Whether `rule` binds its primitive to the operands as they are, with parameters
    that name no axis, and the operands' examples all have one shape (or none): then
    the primitive's own type check sees what an example's would (the same dtypes, no
    shape to disagree on) and the example need not be checked first."""
    if not getattr(rule, "elementwise", False):
        return False
    shape = None
    for x, d in zip(vals, dims):
        aval = get_aval(x)
        if aval.explicit_sharding is not None:   # its messages show the batched spec
            return False
        if aval.ndim - (d is not None):
            example = aval.shape if d is None else aval.shape[:d] + aval.shape[d + 1:]
            if shape is not None and example != shape:
                return False
            shape = example
    return True


def _elementwise(rule):
    rule.elementwise = True
    return rule


def _make_vectorized(prim):
    def rule(axis_data, vals, dims, **params):
        (x,), (d,) = vals, dims
        return prim.bind(x, **params), d
    return _elementwise(_ragged_aware(rule))


# Elementwise unary (or shape-preserving) op: the batch axis stays where it is.
vectorized = core.RuleMaker(_make_vectorized)


def frame_shape(vals, dims):
    """The per-example shape of an elementwise op whose rank-0 operands, and axes of
    size 1, broadcast."""
    shapes = [get_aval(x).shape[:d] + get_aval(x).shape[d + 1:] if d is not None
              else get_aval(x).shape for x, d in zip(vals, dims)]
    rank = max(len(s) for s in shapes)
    return core.broadcast_sizes([s for s in shapes if len(s) == rank])


def to_batched_shape(x, d, size, frame, out_sharding=None):
    """Give `x` (batch axis `d` or None) the shape (size, *frame), batch axis first;
    broadcast (when it must be) to the explicit sharding `out_sharding` if given."""
    target = (size,) + tuple(frame)
    if d is not None:
        x = moveaxis(x, d, 0)
        if get_aval(x).shape == target:
            return x
        example_ndim = get_aval(x).ndim - 1   # 0, or the frame's (axes of size 1)
        return core.ops.broadcast_in_dim(
            x, target, (0, *range(1 + len(frame) - example_ndim, 1 + len(frame))),
            out_sharding=out_sharding)
    ndim = get_aval(x).ndim
    return core.ops.broadcast_in_dim(x, target, tuple(range(1 + len(frame) - ndim,
                                                            1 + len(frame))),
                                     out_sharding=out_sharding)


def _make_broadcasting(prim):
    def rule(axis_data, vals, dims, **params):
        ragged = [d for d in dims if type(d) is ConcatAxis]
        if ragged:
            # Same raggedness everywhere and rank-0 constants: the op acts on the
            # concatenated data as it is; anything else goes element by element.
            ranks = {get_aval(x).ndim for x, d in zip(vals, dims) if d is not None}
            if (all(d == ragged[0] or (d is None and not get_aval(x).ndim)
                    for x, d in zip(vals, dims)) and len(ranks) == 1):
                return prim.bind(*vals, **params), ragged[0]
            return per_element_rule(prim, axis_data, vals, dims, **params)
        first = next(d for d in dims if d is not None)
        ranks = {get_aval(x).ndim for x, d in zip(vals, dims) if d is not None or
                 get_aval(x).ndim}
        if all(d == first or (d is None and not get_aval(x).ndim)
               for x, d in zip(vals, dims)) and len(ranks) == 1:
            return prim.bind(*vals, **params), first
        frame = frame_shape(vals, dims)
        aligned = [x if d is None and not get_aval(x).ndim
                   else to_batched_shape(x, d, axis_data.size, frame)
                   for x, d in zip(vals, dims)]
        return prim.bind(*aligned, **params), 0
    return _elementwise(_ragged_aware(rule))


# Elementwise n-ary op (rank-0 operands broadcast): align the batch axes.
broadcasting = core.RuleMaker(_make_broadcasting)


def _make_reducer(prim):
    def rule(axis_data, vals, dims, *, axes, **params):
        (x,), (d,) = vals, dims
        if type(d) is ConcatAxis:
            if d.axis in axes:   # each element reduces its own run: regular outputs
                return per_element_rule(prim, axis_data, vals, dims, axes=axes, **params)
            out = prim.bind(x, axes=axes, **params)
            return out, ConcatAxis(d.axis - sum(a < d.axis for a in axes), d.lengths)
        axes = tuple(a + (a >= d) for a in axes)
        out = prim.bind(x, axes=axes, **params)
        out_d = d - sum(a < d for a in axes)
        return out, out_d
    return _ragged_aware(rule)


# Reduction over `axes`: shift the axes past the batch axis.
reducer = core.RuleMaker(_make_reducer)
