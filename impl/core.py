"""The heart of impl: abstract values, the typed IR, primitives and the trace machinery.

This module knows no primitive and no transformation. Transformations live in
`impl.interpreters`; each owns a table of rules keyed by `Primitive`.

Dispatch is "stackless": there is one *current trace*. `Primitive.bind` hands the
primitive to it; a transformation's trace interprets its own tracers and runs the
rule with the current trace set to its *parent* (the trace that was current when the
transformation started). Values that are not the trace's own tracers belong to an
outer trace (or are constants), so they are treated as constants. This is what keeps
nested transformations free of perturbation confusion.
"""
from __future__ import annotations

import itertools
import os
import sys
import sysconfig
import collections
import threading
import weakref
from typing import Any, Callable

import numpy as np
import jax
from jax import dtypes as jax_dtypes
from jax._src.config import config_ext as jax_config_ext

from impl import _pretty as pp

from impl.errors import (ConcretizationTypeError, TracerArrayConversionError,  # noqa: F401
                         ShardingTypeError, TracerBoolConversionError,
                         TracerIntegerConversionError, UnexpectedTracerError)

float0 = jax_dtypes.float0


# --------------------------------------------------------------------------- avals

_KEEP = object()   # `ShapedArray.update`: keep the sharding
# The classes of NumPy's dtype objects (np.dtype(x) of one of them is itself).
_NUMPY_DTYPE_TYPES = frozenset(type(np.dtype(t)) for t in np.sctypeDict.values())

class ShapedArray:
    """Abstract value: what the IR knows of an array (shape, dtype, weak type, the
    sharding of its axes over `Explicit` mesh axes, and the manual mesh axes it varies
    over inside a shard_map body).

    `explicit_sharding` is a NamedSharding over an AbstractMesh with one spec entry per
    axis, or None when no Explicit mesh axis shards the value (the default, free path:
    arrays on one device, or on meshes whose axes are Auto or Manual).

    `vma` (varying manual axes) names, in mesh order, the manual mesh axes over which
    the value may differ from device to device; empty everywhere but inside the body of
    a shard_map with check_vma=True. JAX's aval spells it `mat.varying`.
    `manual_unreduced` and `manual_reduced` name, in mesh order, the manual mesh axes
    over which the value is a device's part of a sum still to be taken, or replicated
    with a cotangent that is such a part (JAX's `mat.unreduced` and `mat.reduced`; the
    same over Explicit axes are in `explicit_sharding`'s spec).

    `mesh` is the abstract mesh the type of a value no Explicit axis shards is on
    (replicated over it), or None for JAX's empty mesh: NumPy arrays, Python scalars and
    arrays made outside any mesh have no mesh, values made under one (and the results of
    operations on them) have it. JAX tells the two apart (`typeof(x).sharding`, and a
    select's predicate on a mesh must be sharded as its cases), so impl does; types
    that differ only there are equal, as JAX's typematch has them."""

    __slots__ = ("shape", "dtype", "weak_type", "explicit_sharding", "vma", "mesh",
                 "manual_unreduced", "manual_reduced")

    def __init__(self, shape, dtype, weak_type=False, explicit_sharding=None, vma=(),
                 mesh=None, manual_unreduced=(), manual_reduced=()):
        # Built for every staged value: the conversions run in C (map, np.dtype's type).
        self.shape = tuple(map(int, shape))
        self.dtype = dtype if type(dtype) in _NUMPY_DTYPE_TYPES else np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self.explicit_sharding = explicit_sharding
        self.vma = vma
        self.mesh = mesh
        self.manual_unreduced = manual_unreduced
        self.manual_reduced = manual_reduced

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    @property
    def sharding(self):
        """JAX's view of the type's sharding: always a NamedSharding (replicated over
        the type's mesh, maybe the empty one, when no Explicit axis shards the value)."""
        if self.explicit_sharding is not None:
            return self.explicit_sharding
        return jax.sharding.NamedSharding(EMPTY_MESH if self.mesh is None else self.mesh,
                                          jax.sharding.PartitionSpec(*[None] * self.ndim))

    @property
    def on_mesh(self):
        """Whether the value's type is on a (non-empty) mesh, sharded or not."""
        return self.explicit_sharding is not None or self.mesh is not None

    @property
    def mat(self):
        """JAX's manual axis type of the value: its varying, unreduced and reduced
        manual axes, as sets."""
        return jax.sharding.ManualAxisType(varying=frozenset(self.vma),
                                           unreduced=frozenset(self.manual_unreduced),
                                           reduced=frozenset(self.manual_reduced))

    manual_axis_type = mat

    def __eq__(self, other):
        return (isinstance(other, ShapedArray) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type
                and self.explicit_sharding == other.explicit_sharding
                and self.vma == other.vma
                and self.manual_unreduced == other.manual_unreduced
                and self.manual_reduced == other.manual_reduced)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type, self.explicit_sharding,
                     self.vma, self.manual_unreduced, self.manual_reduced))

    def update(self, shape=None, dtype=None, weak_type=None, explicit_sharding=_KEEP,
               vma=None, mesh=_KEEP, manual_unreduced=None, manual_reduced=None):
        shape = self.shape if shape is None else shape
        if explicit_sharding is _KEEP:   # kept while it still fits the rank
            explicit_sharding = (self.explicit_sharding if len(shape) == self.ndim else None)
        if mesh is _KEEP:
            mesh = self.mesh if self.explicit_sharding is None else self.explicit_sharding.mesh
        return ShapedArray(shape, self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type,
                           explicit_sharding, self.vma if vma is None else vma, mesh,
                           self.manual_unreduced if manual_unreduced is None
                           else manual_unreduced,
                           self.manual_reduced if manual_reduced is None else manual_reduced)

    def strip_weak_type(self):
        return self.update(weak_type=False) if self.weak_type else self

    @property
    def unreduced(self):
        """The mesh axes over which the value is a sum of the devices' parts still to
        be added up: Explicit ones (JAX's `sharding.spec.unreduced`) and manual ones
        inside a shard_map body (`mat.unreduced`), as JAX's rules read them."""
        s = self.explicit_sharding
        explicit = frozenset() if s is None else s.spec.unreduced
        return explicit | frozenset(self.manual_unreduced) if self.manual_unreduced else explicit

    @property
    def reduced(self):
        """The mesh axes over which the value is replicated and whose cotangent is
        unreduced: Explicit ones (`sharding.spec.reduced`) and manual ones
        (`mat.reduced`)."""
        s = self.explicit_sharding
        explicit = frozenset() if s is None else s.spec.reduced
        return explicit | frozenset(self.manual_reduced) if self.manual_reduced else explicit

    def str_short(self):
        return (f"{dtype_short_name(self.dtype)}[{shape_str(self.shape, self.explicit_sharding)}]"
                f"{axes_suffix(self)}")

    def str_long(self):
        """The type as JAX's messages write it: float32[3,2], float32[8@X,4], float32[4]{V:i},
        float32[8,6]{U:X}."""
        return (f"{self.dtype.name}[{shape_str(self.shape, self.explicit_sharding)}]"
                f"{axes_suffix(self)}")

    def __str__(self):   # as JAX prints a type: ~float32[3] (~ for a weak type), 8@X
        return f"{'~' if self.weak_type else ''}{self.str_long()}"

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_long()}{weak})"

    def to_shape_dtype(self):
        return jax.ShapeDtypeStruct(self.shape, self.dtype, weak_type=self.weak_type,
                                    sharding=self.explicit_sharding)


def axes_suffix(aval):
    """`{V:i}`, `{V:(i,j)}` for a value varying over manual mesh axes, `{U:X}` and
    `{R:X}` for one unreduced or reduced over Explicit ones (`{V:i, U:j}` together), as
    JAX prints types; empty for the others."""
    vma, unreduced, reduced = aval.vma, aval.unreduced, aval.reduced
    if not (vma or unreduced or reduced):
        return ""
    s = aval.explicit_sharding
    order = ((s.mesh.axis_names if s is not None else ())
             + aval.manual_unreduced + aval.manual_reduced)
    parts = [f"{tag}:{names[0] if len(names) == 1 else '(' + ','.join(names) + ')'}"
             for tag, names in (("V", tuple(vma)),
                                ("U", tuple(dict.fromkeys(n for n in order if n in unreduced))),
                                ("R", tuple(dict.fromkeys(n for n in order if n in reduced))))
             if names]
    return "{" + ", ".join(parts) + "}"


def shape_str(shape, sharding):
    """`8,4`, or with explicit sharding `8@X,4` (`32@(X,Y)` for several mesh axes), as
    JAX prints types."""
    if sharding is None:
        return ",".join(map(str, shape))
    return spec_dims_str(shape, sharding.spec.partitions)


def spec_dims_str(shape, spec):
    dims = []
    for d, entry in zip(shape, spec):
        if entry is None:
            dims.append(str(d))
        elif isinstance(entry, tuple):
            dims.append(f"{d}@({','.join(entry)})")
        else:
            dims.append(f"{d}@{entry}")
    return ",".join(dims)


EMPTY_MESH = jax.sharding.AbstractMesh((), ())   # JAX's: no mesh


def sharding_with_partitions(sharding, entries):
    """`sharding` (a type's) with other spec entries, its unreduced and reduced axes
    kept; None when it then shards nothing."""
    spec = sharding.spec
    if all(e is None for e in entries) and not (spec.unreduced or spec.reduced):
        return None
    return sharding.update(spec=spec.update(partitions=tuple(entries)))


def cotangent_sharding(aval):
    """The explicit sharding of a cotangent of a value of type `aval`: the value's,
    with its unreduced and reduced axes swapped (the cotangent of a value replicated
    as `reduced` is a sum still to be added up, and the reverse), as in JAX."""
    s = aval.explicit_sharding
    if s is None or not (s.spec.unreduced or s.spec.reduced):
        return s
    return s.update(spec=s.spec.update(unreduced=s.spec.reduced, reduced=s.spec.unreduced))


def explicit_sharding_of(sharding, ndim):
    """The part of a jax NamedSharding that is a type: the Explicit mesh axes of its spec
    (Auto and Manual axes are the partitioner's business), over the abstract mesh, one
    entry per axis; None when no Explicit axis is named."""
    if not isinstance(sharding, jax.sharding.NamedSharding):
        return None
    mesh = sharding.mesh
    if not mesh._any_axis_explicit:
        return None
    explicit = set(mesh.explicit_axes)
    entries, named = [], False
    given = sharding.spec.partitions
    for entry in tuple(given) + (None,) * (ndim - len(given)):
        names = tuple(n for n in (entry if isinstance(entry, tuple) else (entry,))
                      if n is not None and n is not jax.sharding.PartitionSpec.UNCONSTRAINED
                      and n in explicit)
        named = named or bool(names)
        entries.append(None if not names else names[0] if len(names) == 1 else names)
    unreduced = sharding.spec.unreduced & explicit
    reduced = sharding.spec.reduced & explicit
    if not (named or unreduced or reduced):
        return None
    return jax.sharding.NamedSharding(mesh.abstract_mesh, jax.sharding.PartitionSpec(
        *entries, unreduced=unreduced, reduced=reduced))


_SHORT_NAMES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
                "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
                "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
                "bool": "bool", "complex64": "c64", "complex128": "c128"}


def dtype_short_name(dtype):
    dtype = np.dtype(dtype)
    if dtype == float0:
        return "float0"
    return _SHORT_NAMES.get(dtype.name, dtype.name)


def argsort(values):
    """The positions that put the few ints `values` (axis numbers) in increasing order, as
    numpy.argsort's, without its cost per call: rules that renumber axes run at every
    trace."""
    return tuple(sorted(range(len(values)), key=values.__getitem__))


def broadcast_sizes(shapes):
    """The shape that shapes of one rank broadcast to: on each axis their common size,
    sizes of 1 taking the others' (ValueError where two other sizes differ). Sizes are
    compared with == only, so a ragged size broadcasts with itself."""
    out = []
    for sizes in zip(*shapes):
        others = [n for n in sizes if not (isinstance(n, (int, np.integer)) and n == 1)]
        if any(n != others[0] for n in others[1:]):
            raise ValueError(f"incompatible sizes {sizes}")
        out.append(others[0] if others else sizes[0])
    return tuple(out)


def canonical_dtype(dtype):
    """The dtype JAX would use (float64 becomes float32 unless x64 is enabled)."""
    return np.dtype(jax_dtypes.canonicalize_dtype(dtype))


def user_dtype(dtype, fun_name=None):
    """A dtype the user passed to `fun_name` (Python types stand for the default
    dtypes), checked and canonicalized by JAX's own rule, so that a 64-bit dtype without
    x64 brings JAX's warning (or error, as `jax_explicit_x64_dtypes` says)."""
    from jax._src import dtypes as jax_private_dtypes
    return np.dtype(jax_private_dtypes.check_and_canonicalize_user_dtype(dtype, fun_name))


_PY_SCALAR_DTYPES = {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}


def get_aval(x) -> ShapedArray:
    """The abstract value of any value impl accepts: tracer, array or Python scalar."""
    if isinstance(x, Tracer):
        return x.aval
    t = type(x)
    if t in _PY_SCALAR_DTYPES:
        return ShapedArray((), canonical_dtype(_PY_SCALAR_DTYPES[t]), weak_type=t is not bool)
    if isinstance(x, jax.Array):
        return ShapedArray(x.shape, x.dtype, x.weak_type, jax_explicit_sharding(x),
                           mesh=array_mesh(x))
    if isinstance(x, (np.ndarray, np.generic)):
        dtype = x.dtype if x.dtype == float0 else canonical_dtype(x.dtype)
        return ShapedArray(x.shape, dtype)
    if isinstance(x, jax.ShapeDtypeStruct):
        return ShapedArray(x.shape, x.dtype, getattr(x, "weak_type", False))
    if isinstance(x, (int, float, complex)):
        # Subclasses of Python scalars, such as the typed scalars jax.lax returns for
        # Python-scalar inputs (jax.lax.stop_gradient(3.0)): weakly typed, as in JAX.
        base = next(b for b in (bool, int, float, complex) if isinstance(x, b))
        dtype = getattr(x, "dtype", None) or _PY_SCALAR_DTYPES[base]
        return ShapedArray((), canonical_dtype(dtype), weak_type=base is not bool)
    raise TypeError(f"Value {x!r} of type {type(x).__name__} is not a valid impl type: "
                    "expected an array, a Python scalar or a tracer.")


def array_mesh(x):
    """The abstract mesh of a jax value's type: its aval's, or, when JAX's eager
    operation left that empty for an array placed on a mesh, its sharding's; None
    for arrays on no mesh (one device)."""
    mesh = x.aval.sharding.mesh
    if mesh.empty:
        if isinstance(x, jax.core.Tracer):   # JAX's, while jax.jit traces
            return None
        sharding = x.sharding
        if not isinstance(sharding, jax.sharding.NamedSharding) or sharding.mesh.empty:
            return None
        mesh = sharding.mesh.abstract_mesh
    return mesh


def jax_explicit_sharding(x):
    """The explicit sharding in a jax value's type (JAX's aval has already dropped Auto
    and Manual axes), or None."""
    aval = getattr(x, "aval", None)
    if aval is None:
        return None
    sharding = aval.sharding
    if sharding.mesh.empty and not isinstance(x, jax.core.Tracer):
        # an array's type is its placement's, as JAX's typeof has it: JAX's own aval of
        # a result whose type was off any mesh keeps no mesh while XLA placed it on one
        return explicit_sharding_of(getattr(x, "sharding", None), aval.ndim)
    spec = sharding.spec
    if sharding.mesh.empty or (all(e is None for e in spec.partitions)
                               and not spec.unreduced and not spec.reduced):
        return None
    return sharding


def valid_jaxtype(x) -> bool:
    try:
        get_aval(x)
        return True
    except TypeError:
        return False


def is_float_dtype(dtype):
    # JAX's issubdtype: NumPy's does not know bfloat16 (ml_dtypes) is floating
    return jax_dtypes.issubdtype(np.dtype(dtype), np.inexact) and np.dtype(dtype) != float0


# ------------------------------------------------------------------------------ IR

_var_ids = itertools.count()


class Var:
    """A variable of the IR; it has an abstract value and an identity."""

    __slots__ = ("aval", "id")

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.id = next(_var_ids)

    def __repr__(self):
        return f"Var({self.id}:{self.aval.str_short()})"


class Literal:
    """A constant written inline in the IR (a scalar)."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self):
        v = self.val
        return repr(v.item() if hasattr(v, "item") else v)


class JaxprEqn:
    """One primitive application. `name_stack`: the `impl.named_scope` names active
    when it was staged (they reach the compiled program's op names). `source`: where
    in the user's code it was staged, recorded only inside `recording_sources()`."""
    __slots__ = ("primitive", "invars", "outvars", "params", "name_stack", "source")

    def __init__(self, primitive, invars, outvars, params, name_stack=()):
        self.primitive = primitive
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.params = params
        self.name_stack = name_stack or _state.name_stack
        self.source = (_state.source or user_frame()) if _state.recording else None

    def __repr__(self):
        return pp_eqn(self, _Namer())


class Jaxpr:
    """A typed program: constvars and invars flow through equations to outvars."""

    __slots__ = ("constvars", "invars", "outvars", "eqns", "__weakref__")

    def __init__(self, constvars, invars, outvars, eqns):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    def __str__(self):
        return self.pretty_print()

    __repr__ = __str__

    def pretty_print(self, **options):
        return pretty_print_jaxpr(self, **options)


# ------------------------------------------------------------------------- caches
# Every cache impl keeps registers how to empty it here, so `impl.clear_caches()` reaches
# them all without searching memory for them.
_cache_clearers: list[Callable[[], None]] = []


def register_cache(clear: Callable[[], None]):
    """Register `clear`, a function emptying one of impl's caches."""
    _cache_clearers.append(clear)
    return clear


def clear_caches():
    """Empty every registered cache (staged traces, derived and compiled programs)."""
    for clear in _cache_clearers:
        clear()


def check_static_hashable(value):
    """A static argument (of jit, or of a jax.numpy function JAX jits with it static)
    keys a cache, so it must be hashable: JAX's ValueError otherwise (a traced value or
    an array is not)."""
    try:
        hash(value)
    except TypeError as e:
        raise ValueError(
            "Non-hashable static arguments are not supported. An error occurred while "
            f"trying to hash an object of type {type(value)}, {value}. The error was:\n"
            f"{type(e).__name__}: {e}\n") from None


class ClosedJaxpr:
    """A Jaxpr together with the values of its constvars."""

    __slots__ = ("jaxpr", "consts", "_derived", "__weakref__")

    def __init__(self, jaxpr: Jaxpr, consts):
        self.jaxpr = jaxpr
        self.consts = list(consts)
        self._derived = None

    @property
    def _cache(self) -> dict:
        """Programs derived from this one (jvp, batched, compiled), keyed by
        transformation; the programs holding some are remembered for clear_caches."""
        derived = self._derived
        if derived is None:
            derived = self._derived = {}
            _programs_with_derived.add(self)
        return derived

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __str__(self):
        return self.jaxpr.pretty_print()

    __repr__ = __str__

    def pretty_print(self, **options):
        return pretty_print_jaxpr(self.jaxpr, **options)


_programs_with_derived: "weakref.WeakSet[ClosedJaxpr]" = weakref.WeakSet()


@register_cache
def _clear_derived_programs():
    for program in list(_programs_with_derived):
        program._derived = None
    _programs_with_derived.clear()


# -------------------------------------------------------------------- pretty-print
# Programs print as JAX prints them: the same layout (impl._pretty), variables named
# a, b, ..., z, ba, bb, ... in order of appearance across nested programs, literals
# with their types (2.0:f32[]), and `_` for an equation's output nothing reads.

class _Namer:
    """Names variables as they are first printed; carries the printing options."""

    def __init__(self, print_shapes=True, custom_rules=True):
        self.names = {}
        self.shared = {}     # id of a program printed once, before the program -> its name
        self.fresh = 0
        self.print_shapes = print_shapes     # variables' types after their names
        self.custom_rules = custom_rules     # pp_params_rules, else every parameter

    def __call__(self, v):
        if isinstance(v, Literal):
            return _pp_literal(v)
        name = self.names.get(v.id)
        if name is None:
            name = self.names[v.id] = _var_name(self.fresh)
            self.fresh += 1
        return name

    def suggest(self, new_vars, like_vars):
        """Name each of `new_vars` (a nested program's) as the matching `like_vars`."""
        if len(new_vars) != len(like_vars):
            return
        taken = set()
        for new, like in zip(new_vars, like_vars):
            if type(like) is Var and like.id not in taken and new.id not in self.names:
                taken.add(like.id)
                self.names[new.id] = self(like)


def _var_name(i):
    s = ""
    while not s or i:
        i, digit = divmod(i, 26)
        s = chr(ord("a") + digit) + s
    return s


def _pp_literal(lit):
    val = lit.val
    if np.shape(val):
        shown = "[...]"
    else:
        arr = np.asarray(val)
        shown = str(arr.astype(lit.aval.dtype).item() if arr.dtype != lit.aval.dtype
                    else arr.item())
    return f"{shown}:{lit.aval.str_short()}"


# Rules printing a primitive's parameters differently from `name=value` for each in
# name order: rule(eqn, namer) -> [(name, value)] (which, in what order); a rule may
# name the variables of a program it prints after the equation's own.
pp_params_rules: dict = {}


def _pp_param_value(value, namer):
    if isinstance(value, tuple) and value and all(
            isinstance(v, (ClosedJaxpr, Jaxpr)) for v in value):   # cond's branches
        docs = [_jaxpr_doc(v.jaxpr if isinstance(v, ClosedJaxpr) else v, namer)
                for v in value]
        return pp.group(pp.concat([
            pp.nest(2, pp.concat([pp.text("("), pp.brk(""), pp.join(pp.brk(), docs)])),
            pp.brk(""), pp.text(")")]))
    if isinstance(value, ClosedJaxpr):
        return _jaxpr_doc(value.jaxpr, namer)
    if isinstance(value, Jaxpr):
        return _jaxpr_doc(value, namer)
    if isinstance(value, np.dtype) or isinstance(value, type):
        return pp.text(np.dtype(value).name)
    if callable(value):
        return pp.text(getattr(value, "__name__", type(value).__name__))
    if isinstance(value, jax.sharding.NamedSharding) and isinstance(
            value.mesh, jax.sharding.AbstractMesh):
        return pp.text(str(value.spec))   # a type's sharding: the mesh is the operands'
    return pp.text(str(value))


def _pp_vars(vs, names, separator="", typed=False):
    docs = [pp.text(names(v)) + pp.color(pp.text(f":{v.aval.str_short()}"),
                                         pp.TYPE_ANNOTATION) if typed else pp.text(names(v))
            for v in vs]
    return pp.nest(2, pp.group(pp.join(pp.text(separator) + pp.group(pp.brk()), docs)))


def _eqn_doc(eqn, namer, unread=frozenset()):
    outs = _pp_vars(eqn.outvars, lambda v: "_" if v.id in unread else namer(v),
                    typed=namer.print_shapes)
    rule = pp_params_rules.get(eqn.primitive) if namer.custom_rules else None
    params = rule(eqn, namer) if rule else sorted(eqn.params.items())
    rhs = [pp.text(eqn.primitive.name)]
    if params:
        pairs = [pp.text(f"{k}=") + _pp_param_value(v, namer) for k, v in params]
        rhs.append(pp.group(pp.concat([
            pp.nest(2, pp.concat([pp.text("["), pp.brk(""), pp.join(pp.brk(), pairs)])),
            pp.brk(""), pp.text("]")])))
    rhs.append(pp.text(" ") + _pp_vars(eqn.invars, namer))
    if not eqn.outvars:
        return pp.concat(rhs)
    return pp.concat([outs, pp.text(" = "), *rhs])


def _programs_in_params(params):
    for value in params.values():
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, Jaxpr):
                yield v
            elif isinstance(v, ClosedJaxpr):
                yield v.jaxpr


def _shared_programs(top):
    """The nested programs JAX prints once, before the program (`let name = {...} in`),
    by JAX's rule: those reached more than once, counting one of more than 10 equations
    twice, in the order reached, each named by the `name` parameter of the first equation
    holding it ("jaxpr" without one; a repeated name numbered)."""
    counts, programs, names = collections.Counter(), {}, {}
    queue = collections.deque([top])
    while queue:
        jaxpr = queue.popleft()
        programs[id(jaxpr)] = jaxpr
        counts[id(jaxpr)] += 1 + (jaxpr is not top and len(jaxpr.eqns) > 10)
        for eqn in jaxpr.eqns:
            name = eqn.params.get("name")
            for sub in _programs_in_params(eqn.params):
                queue.append(sub)
                if name is not None:
                    names.setdefault(id(sub), str(name).strip("<>"))
    shared, used = [], collections.Counter()
    for key, count in counts.items():
        if count == 1:
            continue
        name = names.get(key, "jaxpr")
        if used[name]:
            used[name] += 1
            name += str(used[name] - 1)
        used[name] += 1
        shared.append((name, programs[key]))
    return shared


def _jaxpr_doc(jaxpr, namer):
    name = namer.shared.get(id(jaxpr))
    if name is not None:   # printed once, before the program
        return pp.text(name)
    return _jaxpr_body_doc(jaxpr, namer)


def _jaxpr_body_doc(jaxpr, namer):
    read = {v.id for e in jaxpr.eqns for v in e.invars if type(v) is Var}
    read.update(v.id for v in jaxpr.outvars if type(v) is Var)
    unread = frozenset(v.id for e in jaxpr.eqns for v in e.outvars if v.id not in read)
    consts = _pp_vars(jaxpr.constvars, namer, typed=namer.print_shapes)
    ins = _pp_vars(jaxpr.invars, namer, typed=namer.print_shapes)
    eqns = pp.join(pp.brk("; "), [_eqn_doc(e, namer, unread) for e in jaxpr.eqns])
    outs = pp.concat([pp.text("("), _pp_vars(jaxpr.outvars, namer, separator=","),
                      pp.text(",)" if len(jaxpr.outvars) == 1 else ")")])
    keyword = lambda word: pp.color(pp.text(word), pp.KEYWORD)  # noqa: E731
    return pp.group(pp.nest(2, pp.concat([
        pp.text("{ "), keyword("lambda "), consts, pp.text("; "), ins, pp.text(". "),
        keyword("let"), pp.nest(2, pp.brk() + eqns), pp.brk(), keyword("in "),
        outs])) + pp.text(" }"))


def pp_eqn(eqn, name=None):
    return pp.format(_eqn_doc(eqn, name or _Namer()))


def pp_jaxpr(jaxpr: Jaxpr, name=None):
    return pp.format(_jaxpr_doc(jaxpr, name or _Namer()))


def _jax_default_use_color():
    # JAX's own decision (a terminal or a notebook, and its jax_pprint_use_color flag),
    # so that impl's programs print in colour exactly where JAX's do.
    from jax._src import pretty_printer
    return pretty_printer.CAN_USE_COLOR and pretty_printer._PPRINT_USE_COLOR.value


def pretty_print_jaxpr(jaxpr: Jaxpr, *, source_info=False, print_shapes=True,
                       name_stack=False, custom_pp_eqn_rules=True, print_effects=False,
                       width=80, use_color=None) -> str:
    """JAX's `Jaxpr.pretty_print`: types after variables unless `print_shapes=False`,
    every parameter as is with `custom_pp_eqn_rules=False`, ANSI colours with
    `use_color` (None: where JAX would use them)."""
    for flag, value in (("source_info", source_info), ("name_stack", name_stack),
                        ("print_effects", print_effects)):
        if value:
            raise NotImplementedError(f"pretty_print: {flag}=True is not supported by impl")
    if use_color is None:
        use_color = _jax_default_use_color()
    namer = _Namer(print_shapes=print_shapes, custom_rules=custom_pp_eqn_rules)
    shared = _shared_programs(jaxpr)
    namer.shared.update((id(program), name) for name, program in shared)
    docs = [pp.concat([pp.text(f"let {name} = "), _jaxpr_body_doc(program, namer),
                       pp.text(" in"), pp.brk()]) for name, program in shared]
    docs.append(_jaxpr_doc(jaxpr, namer))
    return pp.format(pp.concat(docs), width=width, use_color=use_color)


# ------------------------------------------------------------------------ primitives

class Primitive:
    """An operation of the IR. Its rules live in the tables of each transformation.

    `collective`: the primitive refers to named vmap axes (psum, axis_index, ...), so
    vmap must show it to its batching rule even when no operand is batched."""

    __slots__ = ("name", "multiple_results", "collective")

    def __init__(self, name: str, multiple_results: bool = False, *, collective: bool = False):
        self.name = name
        self.multiple_results = multiple_results
        self.collective = collective

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        if _state.vma_axes and len(args) > 1 and self not in vma_rules:
            args = _match_vma(args)
        return _state.trace.process_primitive(self, args, params)


def _match_vma(args):
    """The operands of a primitive with the standard vma rule, made to vary over the
    same manual axes: those that vary over fewer are cast with `pvary` (a no-op on the
    values whose transpose sums the cotangent over the axes added), or, when they are
    reduced over exactly the axes missing, with `reduced_vary_cast` (whose transpose
    leaves the cotangent unreduced), as JAX does."""
    avals = [get_aval(x) for x in args]
    union = ordered_vma(n for a in avals for n in a.vma)
    if all(len(a.vma) == len(union) for a in avals):
        return args
    out = []
    for x, a in zip(args, avals):
        missing = tuple(n for n in union if n not in a.vma)
        if not missing:
            out.append(x)
        elif a.manual_reduced and set(a.manual_reduced) == set(missing):
            out.append(ops.reduced_vary_cast(x, missing))
        else:
            out.append(ops.pvary(x, missing))
    return out


def always_raises(exc_type: type[Exception], message: str) -> Callable:
    """A rule for a transformation the primitive refuses (as JAX's does): every call
    raises `exc_type(message)`. Declared so that tools reading the rule tables know it
    never computes anything (a mutation of it could change nothing)."""
    def rule(*args, **params):
        raise exc_type(message)
    rule.always_raises = True
    return rule


def no_results(*avals, **params) -> list:
    """Abstract evaluation of a primitive that has a side effect and no results (host
    callbacks): its rules have no tangent, cotangent or batched value to produce."""
    return []


class RuleMaker:
    """A rule that can only be built once its primitive exists (a linear primitive's
    jvp re-binds the primitive on tangents); `impl.primitives._define` builds it."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[Primitive], Callable]):
        self.make = make


# Rule tables owned by core: evaluation on concrete arrays and abstract evaluation.
impl_rules: dict[Primitive, Callable] = {}
abstract_eval_rules: dict[Primitive, Callable] = {}


# How each primitive's results are sharded over Explicit mesh axes:
#   rule(*avals, **params) -> per result a spec (a tuple of PartitionSpec entries, one
#   per axis) or a NamedSharding; a list of them when multiple_results.
# TYPED_BY_ABSTRACT_EVAL marks primitives whose abstract evaluation already gives the
# results their shardings (calls and control flow: the types of their programs).
# Consulted only when an operand is explicitly sharded or the equation asks for a
# sharding (`out_sharding=`): programs without Explicit mesh axes never pay for it.
sharding_rules: dict[Primitive, Callable] = {}
TYPED_BY_ABSTRACT_EVAL = RuleMaker(None)

# Which Explicit mesh axes each primitive's results are unreduced and reduced over:
#   rule(*avals, **params) -> (unreduced, reduced), frozensets of axis names (lists of
#   them, one per result, when multiple_results), as JAX's `ur_rule`s. Consulted only
#   when an operand or the `out_sharding=` parameter is unreduced or reduced; a
#   primitive without a rule refuses such operands, as JAX's do.
unreduced_rules: dict[Primitive, Callable] = {}


# Which manual mesh axes each primitive's results vary over inside a shard_map body
# with check_vma=True: rule(*avals, **params) -> the axis names (a list of them when
# multiple_results). Primitives without a rule have the standard one: their operands
# vary over the same axes (`Primitive.bind` casts them to) and so do their results.
# TYPED_BY_ABSTRACT_EVAL: the abstract evaluation's results carry their vma already.
vma_rules: dict[Primitive, Callable] = {}


def abstract_eval(prim, avals, params):
    """Output aval(s) of `prim` applied to `avals`; a list when multiple_results."""
    rule = abstract_eval_rules.get(prim)
    if rule is None:
        raise missing_rule("Abstract evaluation", prim)
    out = rule(*avals, **params)
    if _state.vma_axes:
        out = _with_vma(prim, avals, params, out)
    if "out_sharding" in params:
        return _with_explicit_shardings(prim, avals, params, out)
    for a in avals:
        if a.explicit_sharding is not None:
            return _with_explicit_shardings(prim, avals, params, out)
    return _on_operands_mesh(prim, avals, out)


# Primitives of one operand whose results are on the mesh in context when the operand
# has no mesh (broadcast_in_dim, as in JAX); the others keep it off any mesh.
results_on_context_mesh: set[Primitive] = set()


def _on_operands_mesh(prim, avals, out):
    """Results no Explicit axis shards are on their operands' mesh. Operations on values
    without one put their results on the mesh in context, as JAX's do, but for most of
    one operand, which keep them off any mesh. (JAX's rule is each primitive's: its
    dot_general of two values without a mesh keeps the result off it, impl's not.)"""
    for a in avals:
        if a.mesh is not None:
            mesh = a.mesh
            break
    else:
        if len(avals) == 1 and prim not in results_on_context_mesh:
            return out
        mesh = jax.sharding.get_abstract_mesh()
        if mesh.empty:
            return out
    if sharding_rules.get(prim) is TYPED_BY_ABSTRACT_EVAL:   # its programs' types
        return out

    def placed(o):
        return o if o.mesh is mesh or o.explicit_sharding is not None else o.update(mesh=mesh)
    return [placed(o) for o in out] if prim.multiple_results else placed(out)


def _with_vma(prim, avals, params, out):
    """The results' varying manual axes, and their unreduced and reduced ones when an
    operand has some (`_manual_unreduced`)."""
    rule = vma_rules.get(prim)
    if rule is TYPED_BY_ABSTRACT_EVAL:
        return out
    if rule is None:
        vma = avals[0].vma if avals else ()
        if any(a.vma != vma for a in avals):
            raise ValueError(
                f"Primitive {prim.name} requires varying manual axes to match, but got "
                f"{[frozenset(a.vma) for a in avals]}. As a workaround pass the "
                "check_vma=False argument to `jax.shard_map`")
        vmas = [vma] * len(out) if prim.multiple_results else vma
    else:
        vmas = rule(*avals, **params)
    if not prim.multiple_results:
        out, vmas = [out], [vmas]
    urs = _manual_unreduced(prim, avals, params, len(out))
    typed = [o.update(vma=ordered_vma(v), manual_unreduced=ordered_vma(u),
                      manual_reduced=ordered_vma(r))
             for o, v, (u, r) in zip(out, vmas, urs)]
    return typed if prim.multiple_results else typed[0]


def _manual_unreduced(prim, avals, params, n_out):
    """Per result, the manual mesh axes it is unreduced and reduced over, by the
    primitive's unreduced rule (the one that reads Explicit axes: JAX's rules read
    both). A primitive without one drops reduced axes, as JAX's do inside shard_map
    (the result is replicated there, as its operand), and refuses unreduced ones
    (where JAX drops them too, typing one device's part of a sum as the whole)."""
    if not any(a.manual_unreduced or a.manual_reduced for a in avals):
        return [((), ())] * n_out
    rule = unreduced_rules.get(prim)
    if rule is None:
        if any(a.manual_unreduced for a in avals):
            raise NotImplementedError(
                f"unreduced rule for {prim.name} is not implemented: it cannot take an "
                f"operand unreduced over manual mesh axes (got "
                f"{', '.join(a.str_short() for a in avals)}). Sum it first (psum).")
        return [((), ())] * n_out
    axes = rule(*avals, **params)
    return list(zip(*axes)) if prim.multiple_results else [axes]


def _with_explicit_shardings(prim, avals, params, out):
    rule = sharding_rules.get(prim)
    if rule is TYPED_BY_ABSTRACT_EVAL:
        return out
    if rule is None:
        raise NotImplementedError(
            f"Sharding rule for '{prim.name}' not implemented: it cannot take operands "
            f"sharded over Explicit mesh axes (got {', '.join(a.str_short() for a in avals)}). "
            "Reshard them first (impl.reshard(x, P())) or use a mesh with Auto axes.")
    specs = rule(*avals, **params)
    mesh = common_mesh(avals)
    if isinstance(specs, jax.sharding.NamedSharding) and specs.mesh.empty:
        mesh = specs.mesh   # a result off any mesh (the cotangent of a value off it)
    if prim.multiple_results:
        shardings = [_typed_sharding(s, mesh, o, prim, avals) for o, s in zip(out, specs)]
    else:
        shardings = _typed_sharding(specs, mesh, out, prim, avals)
    if _any_unreduced(avals, params.get("out_sharding")):
        shardings = _with_unreduced(prim, avals, params, out, shardings, mesh)
    if prim.multiple_results:
        return [_typed(o, s, mesh) for o, s in zip(out, shardings)]
    return _typed(out, shardings, mesh)


def _typed(aval, sharding, mesh):
    return aval.update(explicit_sharding=sharding,
                       mesh=None if mesh.empty else mesh)


def _any_unreduced(avals, out_sharding):
    for a in avals:
        s = a.explicit_sharding
        if s is not None and (s.spec.unreduced or s.spec.reduced):
            return True
    spec = getattr(out_sharding, "spec", None)
    return spec is not None and bool(spec.unreduced or spec.reduced)


def _with_unreduced(prim, avals, params, out, shardings, mesh):
    """The results' shardings with the unreduced and reduced axes the primitive's rule
    gives them."""
    rule = unreduced_rules.get(prim)
    if rule is None:
        raise NotImplementedError(
            f"unreduced/reduced rule for {prim.name} is not implemented: it cannot take "
            "operands (or give results) unreduced or reduced over mesh axes (got "
            f"{', '.join(a.str_short() for a in avals)}). Reshard them first "
            "(impl.reshard(x, P(...)) without `unreduced=`/`reduced=`).")
    axes = rule(*avals, **params)
    if not prim.multiple_results:
        return _sharding_with_axes(shardings, mesh, out, *axes)
    return [_sharding_with_axes(s, mesh, o, u, r)
            for s, o, u, r in zip(shardings, out, *axes)]


def _sharding_with_axes(sharding, mesh, aval, unreduced, reduced):
    P = jax.sharding.PartitionSpec
    if sharding is None:
        if not (unreduced or reduced):
            return None
        return jax.sharding.NamedSharding(mesh, P(*[None] * aval.ndim, unreduced=unreduced,
                                                  reduced=reduced))
    return sharding_with_partitions(sharding.update(spec=sharding.spec.update(
        unreduced=frozenset(unreduced), reduced=frozenset(reduced))), sharding.spec.partitions)


def sharded_alike(t1, t2):
    """The sharding part of JAX's typematch: types on two meshes, one of them with
    Explicit axes, must have the same sharding; a type off any mesh matches any."""
    m1, m2 = t1.sharding.mesh, t2.sharding.mesh
    if m1.empty or m2.empty or not (m1._any_axis_explicit or m2._any_axis_explicit):
        return True
    return t1.sharding == t2.sharding


def common_mesh(avals):
    """The abstract mesh of the explicitly sharded operands (they must agree), else the
    mesh in context."""
    mesh = None
    for a in avals:
        s = getattr(a, "explicit_sharding", None)
        if s is not None:
            if mesh is not None and s.mesh != mesh:
                raise ShardingTypeError(f"Mesh for all inputs should be equal. Got one mesh: "
                                        f"{mesh} and another mesh: {s.mesh}")
            mesh = s.mesh
    return jax.sharding.get_abstract_mesh() if mesh is None else mesh


def _typed_sharding(spec, mesh, aval, prim, avals):
    """A rule's answer as the type's sharding: None when no Explicit axis is named."""
    if isinstance(spec, jax.sharding.NamedSharding):
        sharding = explicit_sharding_of(spec, aval.ndim)
    elif spec is None or all(e is None for e in spec):
        return None
    else:
        names = [n for e in spec if e is not None
                 for n in (e if isinstance(e, tuple) else (e,))]
        if len(set(names)) != len(names):   # one mesh axis cannot split two array axes
            result = f"{dtype_short_name(aval.dtype)}[{spec_dims_str(aval.shape, spec)}]"
            raise ShardingTypeError(
                f"{prim.name} operation with inputs: "
                f"{', '.join(a.str_short() for a in avals)} produces an illegally sharded "
                f"result: {result}")
        sharding = explicit_sharding_of(
            jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec)), aval.ndim)
    if sharding is not None:
        check_divisible(sharding, aval.shape)
    return sharding


def check_divisible(sharding, shape):
    mesh_shape = sharding.mesh.shape
    for dim, (entry, size) in enumerate(zip(sharding.spec.partitions, shape)):
        if entry is None:
            continue
        names = entry if isinstance(entry, tuple) else (entry,)
        parts = int(np.prod([mesh_shape[n] for n in names]))
        if size % parts:
            raise ValueError(
                f"Sharding spec {names} implies that array axis {dim} is partitioned "
                f"{parts} times, but does not evenly divide the dimension size {size}. "
                f"Got shape: {tuple(shape)} and sharding {sharding}")


def missing_rule(table_description, prim):
    """The error of a transformation meeting a primitive it has no rule for: JAX's
    NotImplementedError with JAX's words for the same table."""
    if table_description == "Lowering":
        return NotImplementedError(f"MLIR translation rule for primitive '{prim.name}' not "
                                   f"found for platform {jax.default_backend()}")
    return NotImplementedError(_MISSING_RULE_WORDS[table_description].format(prim.name))


_MISSING_RULE_WORDS = {
    "Differentiation": "Differentiation rule for '{}' not implemented",
    "Transpose": "Transpose rule (for reverse-mode differentiation) for '{}' not implemented",
    "Batching": "Batching rule for '{}' not implemented",
    "Evaluation": "Evaluation rule for '{}' not implemented",
    "Abstract evaluation": "Abstract evaluation for '{}' not implemented",
}


# ------------------------------------------------------------------ traces & tracers

class Trace:
    """Interprets primitives applied to its own tracers."""

    __slots__ = ("parent", "alive", "__weakref__")

    def __init__(self, parent):
        self.parent = parent
        self.alive = True

    def process_primitive(self, prim, args, params):
        raise NotImplementedError

    def forwards_to(self, args):
        """The trace to which this one hands a primitive applied to `args` without
        transforming it (None if it transforms or stages it). Custom rules use it to
        find where a call would land, so that they run only what runs there."""
        return None

    def stands_in_for(self, tracer) -> bool:
        """Whether this trace replaces `tracer` by a current value before binding on.

        A custom rule is a Python closure over the values its function saw when it was
        called; when a transformation runs the rule later (for example after the jit
        trace that staged the call has finished) a substituting trace replaces those
        values. Traces nested inside it may then meet them as placeholders."""
        return False

    def check_alive(self, tracer):
        """Refuse a tracer of a finished transformation, unless an enclosing trace
        stands in for it."""
        if tracer._trace.alive:
            return
        trace = self
        while trace is not None:
            if trace.stands_in_for(tracer):
                return
            trace = trace.parent
        raise escaped_tracer_error(tracer)


def escaped_tracer_error(tracer):
    return UnexpectedTracerError(
        f"Encountered an unexpected tracer: {tracer!r} was created by a "
        f"{type(tracer._trace).__name__.replace('Trace', '')} transformation that has already "
        "finished, so the value escaped its transformation (for example through a global "
        "variable, a closure or a side effect). Return the value from the transformed "
        "function instead of storing it.")


class EvalTrace(Trace):
    """The trace with no transformation: primitives run on concrete jax arrays."""

    __slots__ = ()

    def process_primitive(self, prim, args, params):
        for x in args:
            if isinstance(x, Tracer):
                if not x._trace.alive:
                    raise escaped_tracer_error(x)
                raise UnexpectedTracerError(
                    f"A tracer {x!r} reached primitive '{prim.name}' outside of the "
                    "transformation that owns it.")
        rule = impl_rules.get(prim)
        if rule is None:
            raise missing_rule("Evaluation", prim)
        return rule(*args, **params)


eval_trace = EvalTrace(None)


class _TraceState(threading.local):
    def __init__(self):
        self.trace = eval_trace
        self.name_stack = ()   # names of the enclosing `impl.named_scope`s
        self.recording = False   # whether staged equations record their source
        self.source = None       # the source of the equation being replayed
        self.manual_axes = ()    # mesh axes a shard_map body being staged is manual over
        self.vma_axes = ()       # those whose variation types track (check_vma=True)


_state = _TraceState()

# Whether an impl transformation is active in this thread, as a value of JAX's
# configuration that keys jax.jit's C++ dispatch cache: a jitted function's call is that
# dispatch with no Python of impl's in front of it (api.jit), so only this key keeps a
# call made under impl's transformations (its arguments concrete arrays or not) from
# reusing the executable of an eager call, and sends it to impl's staging instead.
transforming = jax_config_ext.Config("impl_transforming", False, include_in_jit_key=True)


def _make_current(trace):
    prev = _state.trace
    _state.trace = trace
    if (prev is eval_trace) is not (trace is eval_trace):
        transforming.set_local(trace is not eval_trace)
    return prev


def current_trace():
    return _state.trace


class set_current_trace:
    """Context manager that makes `trace` current, restoring the previous one after."""

    __slots__ = ("trace", "prev")

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.prev = _make_current(self.trace)
        return self.trace

    def __exit__(self, *exc):
        _make_current(self.prev)
        return False


class new_trace(set_current_trace):
    """Start a transformation: make `trace` current, and mark it dead when leaving."""

    __slots__ = ()

    def __exit__(self, *exc):
        _make_current(self.prev)
        self.trace.alive = False
        return False


class recording_sources:
    """Context manager: equations staged inside remember where in the user's code they
    were staged (what `saved_residuals` reports); replayed ones keep their original."""

    __slots__ = ("prev",)

    def __enter__(self):
        self.prev = _state.recording
        _state.recording = True
        return self

    def __exit__(self, *exc):
        _state.recording = self.prev
        return False


class _replaying_source:
    __slots__ = ("source", "prev")

    def __init__(self, source):
        self.source = source

    def __enter__(self):
        self.prev = _state.source
        _state.source = self.source

    def __exit__(self, *exc):
        _state.source = self.prev
        return False


# Code that is not the user's: impl, JAX and the standard library.
_NOT_USER_CODE = (os.path.dirname(os.path.abspath(__file__)) + os.sep,
                  os.path.dirname(os.path.abspath(jax.__file__)) + os.sep,
                  sysconfig.get_paths()["stdlib"] + os.sep)


def user_frame():
    """(code, instruction offset) of the innermost frame of the user's code, or None."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_NOT_USER_CODE):
        frame = frame.f_back
    return None if frame is None else (frame.f_code, frame.f_lasti)


def summarize_source(source):
    """`file:line:column (function)` of a recorded source, as JAX summarises one."""
    if source is None:
        return "unknown"
    code, offset = source
    line, _, column, _ = list(code.co_positions())[offset // 2]
    name = code.co_qualname
    if line is None:
        return f"{code.co_filename}:{code.co_firstlineno} ({name})"
    if column:
        return f"{code.co_filename}:{line}:{column} ({name})"
    return f"{code.co_filename}:{line} ({name})"


class manual_axes:
    """Context manager: a shard_map body over the manual mesh axes `names` (in mesh order)
    is being staged or transformed; with `check_vma` the types inside track which of them
    each value varies over (`ShapedArray.vma`)."""

    __slots__ = ("names", "check_vma", "prev")

    def __init__(self, names, check_vma):
        self.names = tuple(names)
        self.check_vma = bool(check_vma)

    def __enter__(self):
        self.prev = (_state.manual_axes, _state.vma_axes)
        outer = _state.manual_axes
        _state.manual_axes = outer + tuple(n for n in self.names if n not in outer)
        if self.check_vma:
            _state.vma_axes = _state.vma_axes + tuple(n for n in self.names
                                                      if n not in _state.vma_axes)
        return self

    def __exit__(self, *exc):
        _state.manual_axes, _state.vma_axes = self.prev
        return False


def current_manual_axes() -> tuple:
    return _state.manual_axes


def tracked_vma_axes() -> tuple:
    """The manual mesh axes whose variation the types track here (empty outside the
    bodies of shard_maps with check_vma=True)."""
    return _state.vma_axes


def ordered_vma(names) -> tuple:
    """`names` (an iterable of axis names) as a vma: manual mesh axes in mesh order,
    any other names (vmap axes) after them in the order given."""
    names = tuple(dict.fromkeys(names))
    order = _state.manual_axes
    return (tuple(n for n in order if n in names)
            + tuple(n for n in names if n not in order))


def current_name_stack() -> tuple:
    return _state.name_stack


class set_name_stack:
    """Context manager: equations staged inside carry the scope names `names`."""

    __slots__ = ("names", "prev")

    def __init__(self, names):
        self.names = tuple(names)

    def __enter__(self):
        self.prev = _state.name_stack
        _state.name_stack = self.names
        return self

    def __exit__(self, *exc):
        _state.name_stack = self.prev
        return False


# Methods for tracers that the array API fills in (impl.numpy registers them), so that
# core never imports the numpy layer.
tracer_methods: dict[str, Callable] = {}


class Tracer:
    """A value being traced by some transformation; behaves like an array."""

    __slots__ = ("_trace", "__weakref__")
    __array_priority__ = 1000

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d traced array)")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    def concrete_value(self):
        """The concrete value behind the tracer, if the transformation knows one."""
        return None

    def _concrete(self, what, error=ConcretizationTypeError, detail=""):
        """The concrete value, or `error` whose first lines are JAX's: `what` (JAX's
        words, naming the traced array by `{}`) and `detail`."""
        val = self.concrete_value()
        if val is None:
            aval = self.aval
            traced = (f"traced array with shape {np.dtype(aval.dtype).name}"
                      f"[{','.join(str(d) for d in aval.shape)}]")
            raise error(
                what.format(traced) + (f"\n{detail}" if detail else "") +
                "\nA concrete value is needed, but the value is only known abstractly inside "
                "this transformation: use impl.numpy.where or lax.select instead of Python "
                "control flow, or mark the argument static in jit "
                "(static_argnums/static_argnames).\n"
                f"See https://docs.jax.dev/en/latest/errors.html#jax.errors.{error.__name__}")
        return val

    def __bool__(self):
        return bool(self._concrete("Attempted boolean conversion of {}.",
                                   TracerBoolConversionError))

    def _number(self, kind):
        return self._concrete(
            "Abstract tracer value encountered where concrete value is expected: {}",
            detail=f"The problem arose with the `{kind}` function. If trying to convert the "
                   f"data type of a value, try using `x.astype({kind})` or "
                   f"`jnp.array(x, {kind})` instead.")

    def __float__(self):
        return float(self._number("float"))

    def item(self, *args):
        return np.asarray(self._concrete(
            "Abstract tracer value encountered where concrete value is expected: {}",
            detail="This occurred in the item() method of jax.Array")).item(*args)

    def tolist(self):
        return np.asarray(self._concrete(
            "Abstract tracer value encountered where concrete value is expected: {}",
            detail="The tolist() method was called on a traced array.")).tolist()

    def __int__(self):
        return int(self._number("int"))

    def __index__(self):
        return int(self._concrete("The __index__() method was called on {}",
                                  TracerIntegerConversionError))

    def __complex__(self):
        return complex(self._number("complex"))

    def __array__(self, dtype=None, copy=None):
        val = np.asarray(self._concrete("The numpy.ndarray conversion method __array__() was "
                                        "called on {}", TracerArrayConversionError))
        return val.astype(dtype) if dtype is not None else val

    __hash__ = None   # arrays are unhashable; Python's TypeError names the tracer's type

    def __repr__(self):   # each transformation's tracer prints as JAX's counterpart
        return f"{type(self).__name__}<{self.aval}>"

    def __getattr__(self, name):
        method = tracer_methods.get(name)
        if method is None:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return method.__get__(self)


def _forward_to_array_api(name):
    def method(self, *args, **kwargs):
        try:
            fn = tracer_methods[name]
        except KeyError:
            raise TypeError(f"operator {name} is not supported on traced arrays") from None
        return fn(self, *args, **kwargs)
    method.__name__ = name
    return method


for _name in ["__neg__", "__pos__", "__abs__", "__invert__", "__add__", "__radd__", "__sub__",
              "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
              "__matmul__", "__rmatmul__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__",
              "__ne__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
              "__getitem__", "__divmod__", "__rdivmod__", "__lshift__", "__rshift__"]:
    setattr(Tracer, _name, _forward_to_array_api(_name))
del _name


# ------------------------------------------------------------------- interpretation

def eval_jaxpr(jaxpr: Jaxpr, consts, *args):
    """Interpret `jaxpr` by binding each equation on the current trace."""
    env = {}

    def read(v):
        return v.val if type(v) is Literal else env[v.id]

    for v, x in zip(jaxpr.constvars, consts):
        env[v.id] = x
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"program expects {len(jaxpr.invars)} arguments, got {len(args)}")
    for v, x in zip(jaxpr.invars, args):
        env[v.id] = x
    for eqn in jaxpr.eqns:
        if eqn.name_stack:   # replayed equations keep their scope names
            with set_name_stack(eqn.name_stack):
                outs = eqn.primitive.bind(*[read(v) for v in eqn.invars], **eqn.params)
        elif eqn.source is not None and _state.recording:   # ... and their source
            with _replaying_source(eqn.source):
                outs = eqn.primitive.bind(*[read(v) for v in eqn.invars], **eqn.params)
        else:
            outs = eqn.primitive.bind(*[read(v) for v in eqn.invars], **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = (outs,)
        for v, x in zip(eqn.outvars, outs):
            env[v.id] = x
    return [read(v) for v in jaxpr.outvars]


def programs_in(value):
    """The programs a primitive parameter holds (a jit body, a tuple of branches)."""
    if isinstance(value, ClosedJaxpr):
        yield value.jaxpr
    elif isinstance(value, Jaxpr):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from programs_in(v)


def bools_per(flags, n):
    """`flags` (one bool for all, or a sequence of n bools) as a tuple of n bools."""
    if isinstance(flags, (bool, np.bool_)):
        return (bool(flags),) * n
    flags = tuple(bool(f) for f in flags)
    if len(flags) != n:
        raise ValueError(f"expected {n} flags, got {len(flags)}")
    return flags


def jaxpr_as_fun(closed: ClosedJaxpr):
    def fun(*args):
        return eval_jaxpr(closed.jaxpr, closed.consts, *args)
    return fun


# A namespace the primitive modules fill with the few structural operations that the
# interpreters need (zeros, broadcasting, moving axes, summing), so that interpreters
# do not import primitives.
class _Ops:
    pass


ops: Any = _Ops()
