"""vmap: a trace whose tracers carry a value with one extra (batch) axis.

Each tracer records which axis of its value is the batch axis (`batch_dim`), or
`not_mapped` (None) when the value is the same for every batch element. Rules receive
the axis data (size and name), the values and their batch dims, and return the
outputs with theirs.
"""
from __future__ import annotations

from impl import core
from impl.core import ClosedJaxpr, ShapedArray, Tracer, get_aval
from impl.interpreters import partial_eval as pe

not_mapped = None
batching_rules: dict = {}   # prim -> rule(axis_data, vals, dims, **params) -> (out, out_dims)


class AxisData:
    """The size and name of the axis a BatchTrace maps over."""

    __slots__ = ("name", "size")

    def __init__(self, name, size):
        self.name = name
        self.size = size

    def __repr__(self):
        return f"AxisData(name={self.name!r}, size={self.size})"


def example_aval(x, batch_dim):
    """The abstract value of one example of `x` (batch axis `batch_dim` or None)."""
    aval = get_aval(x)
    if batch_dim is None:
        return aval
    shape = aval.shape[:batch_dim] + aval.shape[batch_dim + 1:]
    return ShapedArray(shape, aval.dtype, aval.weak_type)


class BatchTracer(Tracer):
    __slots__ = ("val", "batch_dim")

    def __init__(self, trace, val, batch_dim):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim

    @property
    def aval(self):
        return example_aval(self.val, self.batch_dim)

    def __repr__(self):
        return f"Traced<{self.aval.str_short()}>with<BatchTrace(axis={self._trace.axis_data.name}, size={self._trace.axis_data.size})>"


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
        if not batched and not prim.collective:
            with core.set_current_trace(self.parent):
                return prim.bind(*vals, **params)
        rule = batching_rules.get(prim)
        if rule is None:
            raise core.missing_rule("Batching", prim)
        if not prim.collective:
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


def find_axis(name):
    """The innermost live BatchTrace mapping over the axis called `name`."""
    trace = core.current_trace()
    while trace is not None:
        if isinstance(trace, BatchTrace) and trace.axis_data.name == name:
            return trace
        trace = trace.parent
    raise NameError(f"unbound axis name: {name!r} (no enclosing vmap has axis_name={name!r})")


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


def matchaxis(size, src, dst, x):
    """Move (or create, by broadcasting) the batch axis of `x` from `src` to `dst`."""
    if dst is None:
        if src is None:
            return x
        raise ValueError(f"a value mapped along axis {src} cannot be made unmapped")
    if src is None:
        return broadcast_batch(x, size, dst)
    return moveaxis(x, src, dst)


def bdim_at_front(x, dim, size):
    return matchaxis(size, dim, 0, x)


def vmap_flat(fun, args, in_dims, axis_size, axis_name, out_dims_fn, name="function"):
    """Map `fun` over `args` (flat lists). `out_dims_fn(n)` gives the n output dims."""
    res = batch_with_dims(fun, args, in_dims, axis_size, axis_name)
    out_dims = out_dims_fn(len(res))
    for (_, d), od in zip(res, out_dims):
        if od is None and d is not None:
            raise ValueError(f"vmap of {name} has mapped output (axis_name={axis_name}) but "
                             "out_axes is None for it: return only unmapped values there or "
                             "give an integer out_axes.")
    return [matchaxis(axis_size, d, od, v) for (v, d), od in zip(res, out_dims)]


def batch_with_dims(fun, args, in_dims, axis_size, axis_name):
    """Like vmap_flat but returns outputs with their batch dims, unmoved."""
    trace = BatchTrace(core.current_trace(), AxisData(axis_name, axis_size))
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
    inst = core.bools_per(instantiate, len(closed.out_avals))
    key = ("batch", axis_data.size, axis_data.name, tuple(in_avals), tuple(in_dims), inst)
    hit = closed._cache.get(key)
    if hit is not None:
        return hit
    box = {}

    def fun(*args):
        res = batch_with_dims(core.jaxpr_as_fun(closed), args, in_dims,
                              axis_data.size, axis_data.name)
        res = [(broadcast_batch(x, axis_data.size, 0), 0) if d is None and i else (x, d)
               for (x, d), i in zip(res, inst)]
        box["out_dims"] = [None if d is None else 0 for _, d in res]
        return [x if d is None else moveaxis(x, d, 0) for x, d in res]

    new = pe.make_closed_jaxpr(fun, in_avals)
    closed._cache[key] = result = (new, box["out_dims"])
    return result


# ------------------------------------------------------------- rule makers
# Each builds a batching rule once the primitive exists; pass them to
# `impl.primitives._define.define(batching=...)`.

def _make_vectorized(prim):
    def rule(axis_data, vals, dims, **params):
        (x,), (d,) = vals, dims
        return prim.bind(x, **params), d
    return rule


# Elementwise unary (or shape-preserving) op: the batch axis stays where it is.
vectorized = core.RuleMaker(_make_vectorized)


def frame_shape(vals, dims):
    """The per-example shape of an elementwise op whose rank-0 operands broadcast."""
    shapes = [get_aval(x).shape[:d] + get_aval(x).shape[d + 1:] if d is not None
              else get_aval(x).shape for x, d in zip(vals, dims)]
    return max(shapes, key=len)


def to_batched_shape(x, d, size, frame):
    """Give `x` (batch axis `d` or None) the shape (size, *frame), batch axis first."""
    target = (size,) + tuple(frame)
    if d is not None:
        x = moveaxis(x, d, 0)
        if get_aval(x).shape == target:
            return x
        return core.ops.broadcast_in_dim(x, target, (0,))
    ndim = get_aval(x).ndim
    return core.ops.broadcast_in_dim(x, target, tuple(range(1 + len(frame) - ndim,
                                                            1 + len(frame))))


def _make_broadcasting(prim):
    def rule(axis_data, vals, dims, **params):
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
    return rule


# Elementwise n-ary op (rank-0 operands broadcast): align the batch axes.
broadcasting = core.RuleMaker(_make_broadcasting)


def _make_reducer(prim):
    def rule(axis_data, vals, dims, *, axes, **params):
        (x,), (d,) = vals, dims
        axes = tuple(a + (a >= d) for a in axes)
        out = prim.bind(x, axes=axes, **params)
        out_d = d - sum(a < d for a in axes)
        return out, out_d
    return rule


# Reduction over `axes`: shift the axes past the batch axis.
reducer = core.RuleMaker(_make_reducer)
