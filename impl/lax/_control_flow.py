"""Structured control flow with JAX's API: cond, switch, while_loop, fori_loop, scan, map
and associative_scan.

The user's functions are staged into sub-programs and bound to the primitives of
`impl.primitives.control_flow`; this module does the pytree handling, the type checks
and the errors JAX gives for bad input (same exception types, same information).
"""
from __future__ import annotations

import inspect
from collections.abc import Sequence

import jax
import numpy as np
from jax import tree_util
from jax._src.config import disable_jit as _disable_jit

from impl import core
from impl.api import vmap
from impl.core import ShapedArray, get_aval
from impl.interpreters import partial_eval as pe
from impl.primitives import indexing, shape
from impl.primitives.control_flow import cond_p, example_aval, scan_p, while_p
from impl.primitives.elementwise import add_p, clamp_p, convert_element_type, ne_p

tree_flatten, tree_unflatten = tree_util.tree_flatten, tree_util.tree_unflatten

_no_operand = object()


# ------------------------------------------------------------------------ tracing

def _check_leaf(x, what):
    if not core.valid_jaxtype(x):
        raise TypeError(f"{what} must be arrays or scalars, but got a value of type "
                        f"{type(x).__name__}: {x!r}")


def _trace(fun, in_tree, avals, what, check_out=None):
    """Stage `fun` (called on the pytree `in_tree` of values of types `avals`) as a
    program whose constants are leading inputs. Returns (program, consts, outs), outs
    being the function's raw output (tracers), or whatever `check_out` makes of it."""
    box = {}

    def flat(*leaves):
        out = fun(*tree_unflatten(in_tree, leaves))
        if check_out is not None:
            check_out(out)
        out_leaves, box["tree"] = tree_flatten(out)
        for x in out_leaves:
            _check_leaf(x, f"The outputs of {what}")
        return out_leaves

    closed, _ = pe.trace_to_jaxpr(flat, avals)
    program, consts = pe.convert_constvars_to_invars(closed)
    return program, consts, box["tree"]


def _as_array(x):
    """An operand returned without passing through a primitive, as an array (tracers
    and arrays stay as they are)."""
    return x if isinstance(x, (core.Tracer, jax.Array)) else jax.numpy.asarray(x)


def _sourceinfo(fun):
    fun = inspect.unwrap(getattr(fun, "func", fun))
    try:
        return (f"{fun.__name__} at {fun.__code__.co_filename}:"
                f"{fun.__code__.co_firstlineno}")
    except AttributeError:
        return getattr(fun, "__name__", "<unknown>")


class _AvalForMessage:
    """Prints an abstract value inside a pytree as JAX's messages do."""

    def __init__(self, aval):
        self.aval = aval

    def __str__(self):
        return self.aval.str_long()

    def __repr__(self):
        return repr(self.aval)


def _tree_differences(t1, t2, path=()):
    """(path, what t1 has, what t2 has, why they differ) for each place where two
    pytree structures disagree."""
    d1, d2 = t1.node_data(), t2.node_data()
    if d1 is None and d2 is None:
        return
    kind1 = "pytree leaf" if d1 is None else str(d1[0])
    kind2 = "pytree leaf" if d2 is None else str(d2[0])
    if d1 is None or d2 is None or d1[0] is not d2[0]:
        yield path, kind1, kind2, "their Python types differ"
        return
    kids1, kids2 = t1.children(), t2.children()
    if d1[0] in (list, tuple) and len(kids1) != len(kids2):
        yield (path, f"{d1[0].__name__} of length {len(kids1)}",
               f"{d2[0].__name__} of length {len(kids2)}", "the lengths do not match")
        return
    if len(kids1) != len(kids2):
        plural = lambda n: "ren" if n > 1 else ""  # noqa: E731
        yield (path, f"{kind1} with {len(kids1)} child{plural(len(kids1))}",
               f"{kind2} with {len(kids2)} child{plural(len(kids2))}",
               "the numbers of children do not match")
        return
    if d1[1] != d2[1]:
        meta = lambda d: tuple(d) if isinstance(d, list) else d  # noqa: E731  (JAX's print)
        yield (path, f"{kind1} with pytree metadata {meta(d1[1])}",
               f"{kind2} with pytree metadata {meta(d2[1])}",
               "the pytree node metadata does not match")
        return
    if d1[0] is dict:
        keys = [tree_util.DictKey(k) for k in d1[1]]
    elif d1[0] in (list, tuple):
        keys = [tree_util.SequenceKey(i) for i in range(len(kids1))]
    elif hasattr(d1[0], "_fields"):
        keys = [tree_util.GetAttrKey(f) for f in d1[0]._fields]
    else:
        keys = [tree_util.FlattenedIndexKey(i) for i in range(len(kids1))]
    for key, k1, k2 in zip(keys, kids1, kids2):
        yield from _tree_differences(k1, k2, path + (key,))


def _mismatch(a, b):
    why = []
    if a.dtype != b.dtype:
        why.append("the dtypes do not match")
    if a.shape != b.shape:
        why.append("the shapes do not match")
    if a.vma != b.vma:
        why.append("the manual axis types do not match")
    if not why:
        return ""
    return ", so " + (why[0] if len(why) == 1 else ", ".join(why[:-1]) + ", and " + why[-1])


def _typematch(a, b):
    return (a.shape == b.shape and a.dtype == b.dtype
            and a.explicit_sharding == b.explicit_sharding and a.vma == b.vma)


def _pcast_hint(fixes):
    """JAX's advice for values that must vary over more manual axes: `fixes` holds
    (axes, where) pairs."""
    if not fixes:
        return ""
    items = [f"applying `jax.lax.pcast(..., {axes}, to='varying')`{where}"
             for axes, where in fixes]
    hint = (f"This might be fixed by {items[0]}.\n" if len(items) == 1 else
            "This might be fixed by:\n" + _listing(items, capitalize=False))
    return hint + ("See https://docs.jax.dev/en/latest/notebooks/shard_map.html#scan-vma "
                   "for more information.\n\n")


def _listing(diffs, capitalize=True, item_end="\n"):
    """Differences laid out as JAX's messages do (one sentence, or a bulleted list)."""
    if len(diffs) == 1:
        d = diffs[0]
        return (d[0].upper() + d[1:] if capitalize else d) + ".\n"
    return ("\n".join(f"  * {d};{item_end}" for d in diffs[:-1])
            + ("" if item_end else "\n") + f"  * {diffs[-1]}.\n")


def _leaf_paths(tree):
    proxy = tree_unflatten(tree, [0] * tree.num_leaves)
    return [p for p, _ in tree_util.tree_flatten_with_path(proxy)[0]]


def _promote_weak_carry(init, in_avals, out_avals):
    """A weakly typed initial carry (a Python scalar) whose loop makes it another dtype
    starts as that dtype, as in JAX. Returns the new init values, or None if none moved."""
    changed, new = False, []
    for x, a, b in zip(init, in_avals, out_avals):
        if a.weak_type and not _typematch(a, b):
            # a Python scalar of the carry's kind stands for its weak type (which strict
            # promotion lets combine with any dtype of that kind)
            weak = {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}.get(a.dtype.kind, 0.0)
            dtype = jax.numpy.result_type(weak, b.dtype)
            x, changed = convert_element_type(x, dtype), True
        new.append(x)
    return new if changed else None


def _check_carry(name, fun, in_tree, in_avals, out_tree, out_avals):
    try:
        carry_name = list(inspect.signature(fun).parameters)[0]
    except (ValueError, TypeError, IndexError):
        carry_name = None

    def component(path):
        key = tree_util.keystr(tuple(path))
        if carry_name:
            return (f"the input carry component {carry_name}{key}" if path
                    else f"the input carry {carry_name}")
        return f"the input carry at path {key}" if path else "the input carry"

    if in_tree != out_tree:
        diffs = [f"{component(p)} is a {k1} but the corresponding component of the carry "
                 f"output is a {k2}, so {why}"
                 for p, k1, k2, why in _tree_differences(in_tree, out_tree)]
        raise TypeError(
            f"{name} function carry input and carry output must have the same pytree "
            f"structure, but they differ:\n\n{_listing(diffs)}\nRevise the function so that "
            "the carry output has the same pytree structure as the carry input.")
    paths = _leaf_paths(in_tree)
    diffs = [f"{component(p)} has type {a.str_long()} but the corresponding output carry "
             f"component has type {b.str_long()}{_mismatch(a, b)}"
             for p, a, b in zip(paths, in_avals, out_avals) if not _typematch(a, b)]
    fixes = [(tuple(n for n in b.vma if n not in a.vma),
              f", to the initial carry value corresponding to {component(p)}")
             for p, a, b in zip(paths, in_avals, out_avals) if set(b.vma) - set(a.vma)]
    if diffs:
        raise TypeError(
            f"{name} function carry input and carry output must have equal types, but they "
            f"differ:\n\n{_listing(diffs)}\n{_pcast_hint(fixes)}Revise the function so that "
            "all output types match the corresponding input types.")


# ------------------------------------------------------------------ cond / switch

def _check_branch_outputs(api, names, funs, trees, avals):
    for name, fun, tree, out in zip(names[1:], funs[1:], trees[1:], avals[1:]):
        header = (f"{names[0]} is {_sourceinfo(funs[0])}\n{name} is {_sourceinfo(fun)}\n\n")
        if tree != trees[0]:
            diffs = [f"{names[0]} output{_at(p)} is a {k1} but {name} output{_at(p)} is a "
                     f"{k2}, so {why}" for p, k1, k2, why in _tree_differences(trees[0], tree)]
            raise TypeError(
                f"{api} branch outputs must have the same pytree structure, but they "
                f"differ:\n\n{header}{_listing(diffs, capitalize=False)}\nRevise {names[0]} and/or {name} so that they "
                "have the same pytree structure.")
        paths = _leaf_paths(tree)
        diffs = [f"the output of {names[0]}{_at(p)} has type {a.str_long()} but the "
                 f"corresponding output of {name} has type {b.str_long()}{_mismatch(a, b)}"
                 for p, a, b in zip(paths, avals[0], out) if not _typematch(a, b)]
        # (JAX 0.10.2 names the varying branch and an empty tuple here; this names the
        # branch to cast and the axes.)
        fixes = [(tuple(n for n in other.vma if n not in mine.vma),
                  f" to the output of {who}{_at(p)}")
                 for p, a, b in zip(paths, avals[0], out)
                 for who, mine, other in ((names[0], a, b), (name, b, a))
                 if set(other.vma) - set(mine.vma)]
        if diffs:
            raise TypeError(
                f"{api} branches must have equal output types but they differ.\n\n{header}"
                f"{_listing(diffs, item_end='')}\n{_pcast_hint(fixes)}Revise {names[0]} and/or "
                f"{name} so that all output types match.")


def _at(path):
    return f" at path {tree_util.keystr(tuple(path))}" if path else ""


def _bind_branches(api, index, funs, names, operands, report_order=None):
    """Stage each branch on `operands` and bind one cond over them. Type errors compare
    the branches in `report_order`."""
    ops, in_tree = tree_flatten(tuple(operands))
    for x in ops:
        _check_leaf(x, f"{api} operands")
    avals = [get_aval(x) for x in ops]
    traced = [_trace(f, in_tree, avals, f"{api} branches") for f in funs]
    order = report_order or range(len(funs))
    _check_branch_outputs(api, [names[i] for i in order], [funs[i] for i in order],
                          [traced[i][2] for i in order], [traced[i][0].out_avals for i in order])
    # One operand per distinct constant (branches often close over the same values).
    consts, slots = [], {}
    for _, cs, _ in traced:
        for c in cs:
            if id(c) not in slots:
                slots[id(c)] = len(consts)
                consts.append(c)
    # Each branch keeps its outputs' weak types; the cond's are the first branch's, as
    # in JAX.
    programs = tuple(_branch_program(p, cs, slots, consts) for p, cs, _ in traced)
    # An output that every branch returns unchanged from the same operand is that
    # operand, not an output of the cond: under vmap it keeps its own batching (as in
    # JAX, whose cond forwards it so).
    inputs = consts + ops
    fwd = [f[0] if len(set(f)) == 1 else None
           for f in zip(*[pe.forwarded_inputs(p) for p in programs])]
    if any(f is not None for f in fwd):
        kept = [i for i, f in enumerate(fwd) if f is None]
        programs = tuple(pe.reorder_jaxpr(p, out_order=kept) for p in programs)
    outs = iter(cond_p.bind(index, *inputs, branches=programs))
    outs = [next(outs) if f is None else _as_array(inputs[f]) for f in fwd]
    return tree_unflatten(traced[0][2], outs)


def _branch_program(program, own_consts, slots, all_consts):
    """`program` (own constants, operands) -> (all branches' constants, operands)."""
    j = program.jaxpr
    n = len(own_consts)
    const_vars = [core.Var(get_aval(c)) for c in all_consts]
    for c, v in zip(own_consts, j.invars[:n]):
        const_vars[slots[id(c)]] = v
    return core.ClosedJaxpr(core.Jaxpr(j.constvars, const_vars + j.invars[n:], j.outvars,
                                       j.eqns), program.consts)


def _operands(operands, operand):
    """The branch operands, given positionally or (old style) as `operand=`."""
    if operand is _no_operand:
        return operands
    if operands:
        raise TypeError("if 'operand' keyword is passed then no positional operands can "
                        f"be passed, got operand={operand!r} and positional operands "
                        f"{operands}")
    return (operand,)


def cond(pred, true_fun, false_fun, *operands, operand=_no_operand):
    """`true_fun(*operands)` if `pred` else `false_fun(*operands)`, both staged."""
    if not (callable(true_fun) and callable(false_fun)):
        # The old five-argument form: cond(pred, true_operand, true_fun, false_operand,
        # false_fun).
        if callable(false_fun) and len(operands) == 2 and callable(operands[1]):
            x_true, f_true, x_false, f_false = true_fun, false_fun, *operands
            return cond(pred, lambda x, _: f_true(x), lambda _, x: f_false(x), x_true,
                        x_false)
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _operands(operands, operand)
    if pred is None:
        raise TypeError("cond predicate is None")
    if isinstance(pred, Sequence) or np.ndim(pred) != 0:
        raise TypeError(f"Pred must be a scalar, got {pred} of "
                        + (f"type {type(pred)}" if isinstance(pred, Sequence)
                           else f"shape {np.shape(pred)}."))
    try:
        dtype = get_aval(pred).dtype
    except TypeError as err:
        raise TypeError(f"Pred type must be either boolean or number, got {pred}.") from err
    if dtype.kind != "b":
        if dtype.kind not in "iuf":
            raise TypeError(f"Pred type must be either boolean or number, got {dtype}.")
        pred = ne_p.bind(pred, np.zeros((), dtype))
    index = convert_element_type(pred, np.int32)
    # Branch 0 runs when the predicate is false; errors name true_fun first, as JAX's.
    return _bind_branches("cond", index, [false_fun, true_fun], ["false_fun", "true_fun"],
                          operands, report_order=[1, 0])


def switch(index, branches, *operands, operand=_no_operand):
    """`branches[index](*operands)`, the index clamped into range."""
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _operands(operands, operand)
    if np.ndim(index) != 0:
        raise TypeError(f"Branch index must be scalar, got {index} of shape "
                        f"{np.shape(index)}.")
    try:
        dtype = get_aval(index).dtype
    except TypeError as err:
        raise TypeError(f"Index type must be an integer, got {index}.") from err
    if dtype.kind not in "iu":
        raise TypeError(f"Index type must be an integer, got {index} as {dtype}")
    branches = tuple(branches)
    if not branches:
        raise ValueError("Empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    index = clamp_p.bind(np.int32(0), convert_element_type(index, np.int32),
                         np.int32(len(branches) - 1))
    names = ["branch 0"] + [f"branch{i}" for i in range(1, len(branches))]   # as JAX
    return _bind_branches("switch", index, branches, names, operands)


# ---------------------------------------------------------------------- while_loop

def while_loop(cond_fun, body_fun, init_val):
    """Repeat `body_fun` on the carry while `cond_fun` holds; a staged while loop."""
    if not (callable(body_fun) and callable(cond_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    init, in_tree = tree_flatten(init_val)
    for x in init:
        _check_leaf(x, "while_loop init_val")
    carry_tree = tree_util.tree_structure((init_val,))

    def stage(init):
        avals = [get_aval(x) for x in init]
        cond_prog, cond_consts, cond_tree = _trace(cond_fun, carry_tree, avals, "cond_fun")
        if not tree_util.treedef_is_leaf(cond_tree) or len(cond_prog.out_avals) != 1:
            raise TypeError(f"cond_fun must return a boolean scalar, but got pytree "
                            f"{cond_tree}.")
        pred = cond_prog.out_avals[0]
        if pred.shape != () or pred.dtype != np.bool_:
            raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) "
                            f"[{_AvalForMessage(pred)!r}].")
        body_prog, body_consts, out_tree = _trace(body_fun, carry_tree, avals, "body_fun")
        return cond_prog, cond_consts, body_prog, body_consts, out_tree

    cond_prog, cond_consts, body_prog, body_consts, out_tree = stage(init)
    in_avals = [get_aval(x) for x in init]
    carry_out = body_prog.out_avals
    if out_tree == in_tree:
        promoted = _promote_weak_carry(init, in_avals, carry_out)
        if promoted is not None:
            init = promoted
            in_avals = [get_aval(x) for x in init]
            cond_prog, cond_consts, body_prog, body_consts, out_tree = stage(init)
    _check_carry("while_loop body", body_fun, in_tree, in_avals, out_tree,
                 body_prog.out_avals)
    # A carry the body returns unchanged and the condition does not read is a const of
    # the body, returned as it went in: under vmap it stays unbatched even where a
    # batched condition batches every carry (as in JAX, whose while_loop moves it so).
    nb = len(body_consts)
    cond_reads = pe.dce_closed_jaxpr(cond_prog, [True])[1][len(cond_consts):]
    moved = [f == nb + i and not r for i, (f, r) in
             enumerate(zip(pe.forwarded_inputs(body_prog), cond_reads))]
    if any(moved):
        stays = [not m for m in moved]
        cond_prog, _ = pe.dce_closed_jaxpr(cond_prog, [True],
                                           [True] * len(cond_consts) + stays)
        body_prog = pe.reorder_jaxpr(
            body_prog, in_order=[*_positions(moved, nb), *range(nb), *_positions(stays, nb)],
            out_order=_positions(stays))
    kept = [x for x, m in zip(init, moved) if not m]
    new_consts = [x for x, m in zip(init, moved) if m]
    outs = iter(while_p.bind(*cond_consts, *new_consts, *body_consts, *kept,
                             cond_jaxpr=cond_prog, body_jaxpr=body_prog,
                             cond_nconsts=len(cond_consts),
                             body_nconsts=len(new_consts) + nb))
    return tree_unflatten(in_tree, [x if m else next(outs) for x, m in zip(init, moved)])


def _positions(flags, offset=0):
    """The indices (plus `offset`) of the set flags."""
    return [offset + i for i, f in enumerate(flags) if f]


def _plus_one(i):
    """i + 1 with a one of i's own type (weak if i is), so float bounds stay float."""
    aval = get_aval(i)
    return add_p.bind(i, convert_element_type(1, aval.dtype, weak_type=aval.weak_type))


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """`body_fun(i, val)` for i in [lower, upper). With static bounds it is a scan (so
    reverse-mode differentiable), otherwise a while loop, as in JAX."""
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    la, ua = get_aval(lower), get_aval(upper)
    dtype = la.dtype if la.dtype == ua.dtype else None
    if dtype is None and all(np.issubdtype(a.dtype, np.signedinteger) for a in (la, ua)):
        if la.weak_type and not ua.weak_type:
            dtype = ua.dtype
        elif ua.weak_type and not la.weak_type:
            dtype = la.dtype
    if dtype is None:
        raise TypeError("lower and upper arguments to fori_loop must have equal types, got "
                        f"{la.dtype.name} and {ua.dtype.name}")
    try:
        lo, hi = int(lower), int(upper)
        static = True
    except (TypeError, core.ConcretizationTypeError):
        static = False
    if static:
        def scan_body(loop_carry, _):  # the name JAX's messages give the carry
            i, x = loop_carry
            return (i + 1, body_fun(i, x)), None
        length = max(hi - lo, 0)
        if length == 0 and _disable_jit.value:
            return init_val   # (a scan of length 0 raises there)
        (_, result), _ = scan(scan_body, (lo, init_val), None, length=length,
                              unroll=False if unroll is None else unroll)
        return result
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")
    lower = convert_element_type(lower, dtype) if la.dtype != dtype else lower
    upper = convert_element_type(upper, dtype) if ua.dtype != dtype else upper

    def body(carry):
        i, hi, x = carry
        return _plus_one(i), hi, body_fun(i, x)

    _, _, result = while_loop(lambda c: c[0] < c[1], body, (lower, upper, init_val))
    return result


# --------------------------------------------------------------------------- scan

def _scan_length(xs, length):
    shapes = []
    for x in xs:
        s = get_aval(x).shape
        if not s:
            # JAX raises ValueError for a Python scalar and IndexError for a 0-d array.
            error = ValueError if not hasattr(x, "shape") else IndexError
            raise error(f"scan got value with no leading axis to scan over: {x}.")
        shapes.append(s[0])
    if length is not None:
        try:
            length = int(length)
        except core.ConcretizationTypeError:
            raise core.ConcretizationTypeError(
                "The `length` argument to `scan` expects a concrete `int` value. For "
                "scan-like iteration with a dynamic length, use `while_loop` or "
                "`fori_loop`.") from None
        if not all(length == n for n in shapes):
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {shapes}.")
        return length
    if len(set(shapes)) > 1:
        raise ValueError("scan got values with different leading axis sizes: "
                         f"{', '.join(str(n) for n in shapes)}.")
    if not shapes:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    return shapes[0]


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """Loop `f(carry, x) -> (carry, y)` over the leading axis of `xs`, stacking the ys.
    `_split_transpose=True` makes the scan's transpose (reverse-mode differentiation) two
    loops: the carry recurrence, then the cotangents of what the body closes over, whose
    steps do not depend on each other (same values, more memory: the carry cotangents of
    every step are stored)."""
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    init_flat, init_tree = tree_flatten(init)
    xs_flat, xs_tree = tree_flatten(xs)
    for x in init_flat + xs_flat:
        _check_leaf(x, "scan init and xs")
    length = _scan_length(xs_flat, length)
    if length == 0 and _disable_jit.value:
        raise ValueError("zero-length scan is not supported in disable_jit() mode because "
                         "the output type is unknown.")
    if isinstance(unroll, (bool, np.bool_)):
        unroll = max(length, 1) if unroll else 1
    try:
        unroll = int(unroll)
    except (TypeError, core.ConcretizationTypeError):
        raise core.ConcretizationTypeError(
            "The `unroll` argument to `scan` expects a concrete `int` or `bool` value.") \
            from None
    if unroll < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    x_avals = [example_aval(get_aval(x)) for x in xs_flat]

    def check_pair(out):
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            shapes = tree_util.tree_map(
                lambda x: _AvalForMessage(get_aval(x)) if core.valid_jaxtype(x) else x, out)
            raise TypeError(f"scan body output must be a pair, got {shapes}.")

    def stage(init_flat):
        avals = [get_aval(x) for x in init_flat] + x_avals
        in_tree = tree_util.tree_structure((tree_unflatten(init_tree, init_flat),
                                            tree_unflatten(xs_tree, xs_flat)))
        body, consts, out_tree = _trace(lambda c, x: f(c, x), in_tree, avals, "scan body",
                                        check_out=check_pair)
        carry_tree, ys_tree = out_tree.children()
        return body, consts, carry_tree, ys_tree

    body, consts, carry_tree, ys_tree = stage(init_flat)
    in_avals = [get_aval(x) for x in init_flat]
    if carry_tree == init_tree:
        promoted = _promote_weak_carry(init_flat, in_avals,
                                       body.out_avals[:len(init_flat)])
        if promoted is not None:
            init_flat = promoted
            in_avals = [get_aval(x) for x in init_flat]
            body, consts, carry_tree, ys_tree = stage(init_flat)
    n = len(init_flat)
    _check_carry("scan body", f, init_tree, in_avals, carry_tree, body.out_avals[:n])
    # A carry the body returns unchanged is a const, returned as it went in, and a
    # scanned-over operand the body returns as a stacked output is returned directly:
    # under vmap both keep their own batching (as in JAX, whose scan forwards them so).
    nc, nx = len(consts), len(xs_flat)
    fwd = pe.forwarded_inputs(body)
    moved = [f == nc + i for i, f in enumerate(fwd[:n])]
    xs_fwd = [f - nc - n if f is not None and f >= nc + n else None for f in fwd[n:]]
    if any(moved) or any(f is not None for f in xs_fwd):
        stays = [not m for m in moved]
        body = pe.reorder_jaxpr(
            body, in_order=[*_positions(moved, nc), *range(nc), *_positions(stays, nc),
                            *range(nc + n, nc + n + nx)],
            out_order=_positions(stays) + _positions([f is None for f in xs_fwd], n))
    new_consts = [x for x, m in zip(init_flat, moved) if m]
    kept = [x for x, m in zip(init_flat, moved) if not m]
    outs = scan_p.bind(*new_consts, *consts, *kept, *xs_flat, jaxpr=body, length=length,
                       reverse=bool(reverse), unroll=unroll,
                       num_consts=len(new_consts) + nc, num_carry=len(kept),
                       _split_transpose=bool(_split_transpose))
    carry_out, ys = iter(outs[:len(kept)]), iter(outs[len(kept):])
    carry = [x if m else next(carry_out) for x, m in zip(init_flat, moved)]
    ys = [next(ys) if f is None else _as_array(xs_flat[f]) for f in xs_fwd]
    return tree_unflatten(carry_tree, carry), tree_unflatten(ys_tree, ys)


def map(f, xs, *, batch_size=None):  # noqa: A001
    """`f` applied to each slice of `xs` along the leading axis, as a scan; with
    `batch_size`, `batch_size` slices at a time under vmap (and the remainder after)."""
    if batch_size is None:
        return scan(lambda _, x: ((), f(x)), (), xs)[1]
    leaves, tree = tree_flatten(xs)
    if not leaves:
        return scan(lambda _, x: ((), f(x)), (), xs)[1]
    n = get_aval(leaves[0]).shape[0]
    batch_size = int(batch_size)
    num_batches = 0 if batch_size == 0 else n // batch_size
    split = num_batches * batch_size
    parts = []
    if num_batches:
        batched = tree_unflatten(tree, [
            shape.reshape(indexing.slice_in_dim(x, 0, split),
                          (num_batches, batch_size) + get_aval(x).shape[1:]) for x in leaves])
        ys = scan(lambda _, x: ((), vmap(f)(x)), (), batched)[1]
        parts.append(tree_util.tree_map(
            lambda y: shape.reshape(y, (split,) + get_aval(y).shape[2:]), ys))
    if split < n:
        rest = tree_unflatten(tree, [indexing.slice_in_dim(x, split, n) for x in leaves])
        parts.append(vmap(f)(rest))
    if len(parts) == 1:
        return parts[0]
    return tree_util.tree_map(lambda a, b: indexing.concatenate([a, b], 0), *parts)


# --------------------------------------------------------------- associative_scan

def associative_scan(fn, elems, reverse=False, axis=0):
    """All prefix combinations `fn(fn(e0, e1), e2), ...` along `axis`, in O(log n) depth
    of `fn` calls (a parallel prefix scan); `fn` must be associative and work on
    whole slices."""
    if not callable(fn):
        raise TypeError("lax.associative_scan: fn argument should be callable.")
    flat, tree = tree_flatten(elems)
    ndim = get_aval(flat[0]).ndim
    if not -ndim <= axis < ndim:
        raise ValueError(f"associative_scan: axis {axis} is out of bounds for arrays of rank "
                         f"{ndim}")
    axis = axis % ndim
    n = get_aval(flat[0]).shape[axis]
    if not all(get_aval(x).shape[axis] == n for x in flat[1:]):
        raise ValueError("Array inputs to associative_scan must have the same first "
                         f"dimension. (saw: {[get_aval(x).shape for x in flat]})")
    if reverse:
        flat = [indexing.rev(x, (axis,)) for x in flat]

    def combine(a, b):
        out, out_tree = tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))
        if out_tree != tree:
            raise TypeError(f"associative_scan: fn must return the structure of its inputs "
                            f"{tree}, got {out_tree}")
        return out

    def every_other(xs, start, stop=None):
        return [indexing.slice_in_dim(x, start, stop, 2, axis) for x in xs]

    def prefix(xs):
        m = get_aval(xs[0]).shape[axis]
        if m < 2:
            return xs
        # Combining neighbours halves the problem; its prefixes are the odd positions.
        odd = prefix(combine(every_other(xs, 0, m - 1), every_other(xs, 1)))
        # Each even position (after the first) adds its own element to the odd one
        # before it.
        head = odd if m % 2 else [indexing.slice_in_dim(o, 0, -1, 1, axis) for o in odd]
        even = combine(head, every_other(xs, 2))
        even = [indexing.concatenate([indexing.slice_in_dim(x, 0, 1, 1, axis), e], axis)
                for x, e in zip(xs, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    out = prefix(flat)
    if reverse:
        out = [indexing.rev(x, (axis,)) for x in out]
    return tree_unflatten(tree, out)


def _interleave(a, b, axis):
    """[a0, b0, a1, b1, ...] along `axis`; `a` has as many slices as `b` or one more."""
    nb = get_aval(b).shape[axis]
    pairs = indexing.concatenate(
        [shape.expand_dims(indexing.slice_in_dim(a, 0, nb, 1, axis), (axis + 1,)),
         shape.expand_dims(b, (axis + 1,))], axis + 1)
    s = get_aval(pairs).shape
    merged = shape.reshape(pairs, s[:axis] + (2 * nb,) + s[axis + 2:])
    if get_aval(a).shape[axis] == nb:
        return merged
    return indexing.concatenate([merged, indexing.slice_in_dim(a, nb, None, 1, axis)], axis)


# ------------------------------------------------------------ platform_dependent

_PLATFORM_ALIASES = {"gpu": ("cuda", "rocm")}


def platform_dependent(*args, default=None, **per_platform):
    """`per_platform[p](*args)` for the platform p that impl compiles for (JAX's default
    backend), else `default(*args)`. impl lowers every program for that one platform, so
    the branch is chosen when tracing and the others are never traced, as JAX's
    lowering drops them."""
    platform = jax.default_backend()
    for name, branch in per_platform.items():
        if platform == name or platform in _PLATFORM_ALIASES.get(name, ()):
            return branch(*args)
    if default is not None:
        return default(*args)
    raise NotImplementedError(
        f"MLIR translation rule for primitive 'platform_index(platforms="
        f"{tuple((p,) for p in per_platform)})' not found for platform {platform}")
