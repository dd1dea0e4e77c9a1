"""Transformation stacks: up to four transformations, in any order, with drawn parameters.

A :class:`StackCase` is a drawn smooth program, an optional dtype or shape corner joined
to its output (:mod:`strategies.corners`), and :class:`Layer` s applied one over another:
``jit``, ``grad``, ``value_and_grad``, ``vmap``, ``jvp``, ``vjp``, ``linearize``,
``checkpoint``/``remat``, ``custom_jvp``, ``custom_vjp``, ``jacfwd``, ``jacrev``,
``hessian`` and ``ensure_compile_time_eval``.  Every layer keeps the calling convention:
a function of the case's arguments returning a pytree of arrays, so any layer goes over
any other.  The parameters each layer passes are drawn from the table of
:mod:`strategies.parameters` (``static_argnums`` in any order and negative,
``static_argnames``, donation, ``argnums`` tuples, ``has_aux``, ``allow_int``, ``in_axes``
and pytree ``out_axes`` with ``None``, ``axis_name`` with a collective, ``axis_size``,
``nondiff_argnums``/``nondiff_argnames``, ``symbolic_zeros``, ``optimize_remat``,
checkpoint policies, ...).

A layer knows the abstract type of what it returns (:class:`~strategies.corners.Leaf`
trees), so every stack is valid by construction: JAX's documented restrictions
(no forward mode over ``custom_vjp``, real inputs and outputs for the Jacobians, integer
arguments only with ``allow_int``) are never drawn.

``case.text()`` prints two functions: ``stack(backend, *args)``, the stack itself, and
``meaning(backend, *args)``, the same computation with ``jit``, ``checkpoint`` and the
custom rules replaced by plain calls of the functions they wrap, and ``vmap`` by a Python
loop over the batch (its collective by a mean over the loop's results).  The derivative
layers are the backend's own in both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from .corners import KINDS as CORNER_KINDS, Corner, Leaf, corners, leaves, literal, np_dtype
from .programs import Program, program_args, random_programs
from .remat import POLICIES
from .source import Case, array_literal

KINDS = ("jit", "grad", "value_and_grad", "vmap", "jvp", "vjp", "linearize", "checkpoint",
         "custom_jvp", "custom_vjp", "jacfwd", "jacrev", "hessian", "compile_time_eval")
#: forward mode: JAX refuses it over a custom_vjp function
FORWARD = frozenset({"jvp", "linearize", "jacfwd", "hessian"})
#: layers that differentiate what is below them
DIFFERENTIATING = frozenset({"grad", "value_and_grad", "jvp", "vjp", "linearize", "custom_jvp",
                             "custom_vjp", "jacfwd", "jacrev", "hessian"})
JACOBIANS = frozenset({"jacfwd", "jacrev", "hessian"})
#: largest number of elements of a layer's output (Jacobians multiply sizes)
MAX_ELEMENTS = 400
STATIC_VALUES = (0.5, 1.5, 2.0)
#: checkpoint policies under which JAX's grad fails on complex values (laws.jax_bugs)
COMPLEX_FAILING_POLICIES = ("everything_saveable", "save_anything_except_these_names")


@dataclass(frozen=True)
class Static:
    """A static argument (a Python float) a jit/checkpoint/custom layer inserts at
    ``position`` of its function's arguments; ``by_name``: declared by name and passed
    by keyword."""
    position: int
    value: float
    by_name: bool
    name: str


@dataclass(frozen=True)
class Layer:
    """One transformation: ``kind``, the keyword parameters it passes (``params``:
    ``(name, source)`` pairs, printed as ``name=source``), its static arguments, and for
    ``vmap`` the batch axis of each argument and the batch size; ``out``: the abstract
    type of what it returns."""
    kind: str
    params: tuple = ()
    statics: tuple = ()
    axes: tuple = ()
    size: int = 0
    out_axes: object = 0
    axis_name: str | None = None
    has_aux: bool = False
    variant: str = ""       # checkpoint: "checkpoint" or "remat"
    out: object = None

    @property
    def parameters(self):
        """``transformation.parameter`` of the parameters this layer passes (the table's keys)."""
        name = {"compile_time_eval": "ensure_compile_time_eval"}.get(self.kind, self.kind)
        if self.kind == "checkpoint":
            name = self.variant
        names = [f"{name}.{p}" for p, _ in self.params]
        if self.kind in ("custom_jvp", "custom_vjp"):
            rule = "defjvp" if self.kind == "custom_jvp" else "defvjp"
            names = [f"{self.kind}.{p}" if p.startswith("nondiff") else f"{self.kind}.{rule}.{p}"
                     for p, _ in self.params]
        return names


# ---------------------------------------------------------------- abstract types


def _map(tree, f):
    return f(tree) if isinstance(tree, Leaf) else tuple(_map(t, f) for t in tree)


def _tangent(leaf):
    return Leaf(leaf.shape, "float0" if leaf.kind in ("int", "float0") else leaf.dtype)


def _size(tree):
    return sum(leaf.size for leaf in leaves(tree))


def _grad_type(arg_types, argnums):
    if isinstance(argnums, tuple):
        return tuple(_tangent(arg_types[a % len(arg_types)]) for a in argnums)
    return _tangent(arg_types[argnums % len(arg_types)])


def _jacobian_type(out, arg_types, argnums, extra=()):
    def per_leaf(o):
        def jac(a):
            return Leaf(o.shape + tuple(extra) + arg_types[a % len(arg_types)].shape, o.dtype)
        return tuple(jac(a) for a in argnums) if isinstance(argnums, tuple) else jac(argnums)
    return _map(out, per_leaf)


# ---------------------------------------------------------------- the case


HELPERS = '''\
    tree_map, tree_leaves = backend.tree_util.tree_map, backend.tree_util.tree_leaves
    float0 = backend.dtypes.float0

    def inexact(o):
        return jnp.issubdtype(o.dtype, jnp.inexact)

    def scale(tree, s, k=None):
        # o * s (and + k o, k a closed-over constant) for every inexact leaf
        def one(o):
            if not inexact(o):
                return o
            return o * s if k is None else o * s + k.astype(o.dtype) * o
        return tree_map(one, tree)

    def total(tree):
        # a real scalar: the real parts of every inexact leaf, weighted, summed in {acc}
        parts = [jnp.sum(jnp.real(o).astype(jnp.{acc})
                         * jnp.cos(jnp.arange(o.size, dtype=jnp.{acc})).reshape(o.shape))
                 for o in tree_leaves(tree) if inexact(o)]
        return sum(parts, jnp.zeros((), jnp.{acc}))

    def tangent(x):
        # a tangent or cotangent like x: float0 zeros for integers, bools and float0
        return jnp.cos(x) * 0.5 + 0.25 if inexact(x) else np.zeros(np.shape(x), float0)

    def vary(x, k):
        # batch element k made from x, so derivatives flow through the batch
        if x.dtype == jnp.bool_:
            return jnp.logical_xor(x, k % 2 == 1)
        return x * (1.0 + 0.25 * k) if inexact(x) else x + k

    def batch(x, n, axis):
        return jnp.stack([vary(x, k) for k in range(n)], axis=axis)

    def symbolic(t):
        return type(t).__name__ == "SymbolicZero"

    def instantiate(t, p):
        # a symbolic zero tangent (symbolic_zeros=True) as an array like the primal p
        if not symbolic(t):
            return t
        return jnp.zeros(np.shape(p), p.dtype) if inexact(p) else np.zeros(np.shape(p), float0)

    def mean_of(trees):
        n = len(trees)
        return tree_map(lambda *os: (sum(os[1:], os[0]) / n).astype(os[0].dtype)
                        if inexact(os[0]) else os[0], *trees)

    def stack_leaf(os, axis):
        if axis is None:
            return os[0]
        if not inexact(os[0]) and np.dtype(os[0].dtype) == np.dtype(float0):
            shape = list(np.shape(os[0]))
            shape.insert(axis % (len(shape) + 1), len(os))
            return np.zeros(shape, float0)
        return jnp.stack(os, axis=axis)

    def stack_out(outs, axes):
        # the loop's results stacked along vmap's out_axes (an int, None or a tree of them)
        if not isinstance(axes, tuple):
            return tree_map(lambda *os: stack_leaf(os, axes), *outs)
        return tuple(stack_out([o[j] for o in outs], axes[j]) for j in range(len(axes)))
'''


def _static_name(i, k):
    return f"s{i}_{k}"


@dataclass(frozen=True, repr=False)
class StackCase(Case):
    """A drawn program, an optional corner, and the layers over it (innermost first)."""
    program: Program
    corner: Corner | None
    layers: tuple
    args: tuple

    label = "stack"
    imports = "import ml_dtypes\nimport numpy as np\nimport jax  # or: import impl as jax\n"

    # ---- what was drawn
    @property
    def arg_names(self):
        return [f"x{i}" for i in range(self.program.num_inputs)] + (["c"] if self.corner else [])

    @property
    def arg_types(self):
        types = [Leaf(tuple(s), d) for s, d in self.program.input_types]
        return types + ([self.corner.arg_type] if self.corner else [])

    @property
    def base_type(self):
        return self.corner.out if self.corner else Leaf(*self.program.output_type)

    @property
    def out(self):
        return self.layers[-1].out if self.layers else self.base_type

    @property
    def shape(self):
        """The stack as a call, outermost first: ``grad(vmap(jit(f)))``."""
        text = "f"
        for layer in self.layers:
            text = f"{layer.variant or layer.kind}({text})"
        return text

    @property
    def dtype(self):
        """The least precise real dtype among the arguments and results (the tolerance's)."""
        real = {"complex64": "float32", "complex128": "float64"}
        names = {real.get(leaf.dtype, leaf.dtype) for leaf in self.arg_types + leaves(self.out)
                 if leaf.kind in ("float", "complex")}
        for name in ("bfloat16", "float16", "float32", "float64"):
            if name in names:
                return np_dtype(name)
        return np.dtype("float64")

    def events(self):
        """What the case reaches, for hypothesis events (the laws add the "reach: " prefix)."""
        out = [f"stack {self.shape}", f"depth {len(self.layers)}"]
        out += [f"kind {layer.variant or layer.kind}" for layer in self.layers]
        out += [f"param {p}" for layer in self.layers for p in layer.parameters]
        if self.corner:
            out += list(self.corner.events)
        return list(dict.fromkeys(out))

    def describe(self):
        corner = f", corner {self.corner.name}" if self.corner else ""
        return f"{self.shape} of program {self.program.ops}{corner}"

    # ---- printing and building
    def text(self):
        return self._function("stack", meaning=False) + "\n" + self._function("meaning", meaning=True)

    def _function(self, name, meaning):
        names = self.arg_names
        A = ", ".join(names)
        acc = "float64" if self.program.dtype == "float64" else "float32"
        lines = [f"def {name}(backend, {A}):", "    import numpy as np",
                 "    jnp, lax = backend.numpy, backend.lax"]
        lines += HELPERS.format(acc=acc).rstrip("\n").split("\n")
        lines += [""] + [f"    def program({', '.join(names[:self.program.num_inputs])}):"]
        lines += ["    " + ln for ln in self.program.body_lines()]
        lines += ["", f"    def f0({A}):",
                  f"        y = program({', '.join(names[:self.program.num_inputs])})",
                  f"        return {self.corner.expr if self.corner else 'y'}"]
        for i, layer in enumerate(self.layers, start=1):
            lines += [""] + _layer_lines(layer, i, names, meaning)
        lines += ["", f"    return f{len(self.layers)}({A})"]
        return "\n".join(lines) + "\n"

    def build(self, backend, meaning=False):
        """The stack (or its meaning) as a function of the case's arguments."""
        return self.function(backend, "meaning" if meaning else "stack")

    def example(self):
        args = ", ".join(literal(a) if self.corner and j == len(self.args) - 1 else array_literal(a)
                         for j, a in enumerate(self.args))
        return f"args = ({args},)\nprint(stack(jax, *args))\nprint(meaning(jax, *args))\n"


# ---------------------------------------------------------------- printing layers


def _extended(layer, names):
    """The layer function's parameters: the arguments with the statics inserted."""
    ext = list(names)
    for s in sorted(layer.statics, key=lambda s: s.position):
        ext.insert(s.position, s.name)
    return ext


def _call(layer, names):
    """The call of the layer's function from the arguments: statics as literals, by keyword
    from the first static declared by name on."""
    ext = _extended(layer, names)
    values = {s.name: repr(s.value) for s in layer.statics}
    keyword = False
    parts = []
    for p in ext:
        static = next((s for s in layer.statics if s.name == p), None)
        keyword = keyword or (static is not None and static.by_name)
        value = values.get(p, p)
        parts.append(f"{p}={value}" if keyword else value)
    return ", ".join(parts)


def _scale_factor(layer):
    return " * ".join(s.name for s in layer.statics) or "1.0"


def _params(layer):
    return "".join(f", {p}={v}" for p, v in layer.params)


def _layer_lines(layer, i, names, meaning):
    A = ", ".join(names)
    prev = f"f{i - 1}"
    kind = layer.kind
    if kind in ("jit", "checkpoint", "custom_jvp", "custom_vjp"):
        ext = ", ".join(_extended(layer, names))
        closed = kind in ("jit", "checkpoint")
        lines = []
        if closed:
            lines.append(f"    f{i}_k = jnp.asarray(0.125)  # a closed-over constant")
        lines += [f"    def f{i}_fun({ext}):",
                  f"        return scale({prev}({A}), {_scale_factor(layer)}{f', f{i}_k' if closed else ''})"]
        if meaning:
            lines.append(f"    f{i}_t = f{i}_fun  # {layer.variant or kind} stands for the function it wraps")
        elif kind in ("jit", "checkpoint"):
            lines.append(f"    f{i}_t = backend.{layer.variant or kind}(f{i}_fun{_params(layer)})")
        else:
            lines += _custom_lines(layer, i, names)
        lines += [f"    def f{i}({A}):", f"        return f{i}_t({_call(layer, names)})"]
        return lines
    if kind == "compile_time_eval":
        return [f"    def f{i}({A}):", "        with backend.ensure_compile_time_eval():",
                "            k = float(jnp.sin(jnp.asarray(0.5)) + 1.0)  # concrete under any trace",
                f"        return scale({prev}({A}), k)"]
    if kind == "vmap":
        return _vmap_lines(layer, i, names, meaning)
    aux = layer.has_aux
    lines = []
    target = prev
    if aux:
        target = f"f{i}_aux"
        lines += [f"    def f{i}_aux({A}):", f"        out = {prev}({A})", "        return out, total(out)"]
    if kind in ("grad", "value_and_grad"):
        lines += [f"    def f{i}_objective({A}):", f"        out = {prev}({A})",
                  "        return (total(out), out)" if aux else "        return total(out)",
                  f"    def f{i}({A}):",
                  f"        return backend.{kind}(f{i}_objective{_params(layer)})({A})"]
    elif kind == "jvp":
        lines += [f"    def f{i}({A}):", f"        primals = ({A},)",
                  f"        return backend.jvp({target}, primals, tuple(tangent(x) for x in primals)"
                  f"{_params(layer)})"]
    elif kind == "vjp":
        got = "out, pull, aux" if aux else "out, pull"
        lines += [f"    def f{i}({A}):", f"        {got} = backend.vjp({target}, {A}{_params(layer)})",
                  f"        return out, pull(tree_map(tangent, out)){', aux' if aux else ''}"]
    elif kind == "linearize":
        got = "out, lin, aux" if aux else "out, lin"
        lines += [f"    def f{i}({A}):", f"        {got} = backend.linearize({target}, {A}{_params(layer)})",
                  f"        return out, lin(*[tangent(x) for x in ({A},)]){', aux' if aux else ''}"]
    else:  # jacfwd, jacrev, hessian
        lines += [f"    def f{i}({A}):", f"        return backend.{kind}({target}{_params(layer)})({A})"]
    return lines


def _custom_lines(layer, i, names):
    A = ", ".join(names)
    ext = ", ".join(_extended(layer, names))
    statics = [s.name for s in sorted(layer.statics, key=lambda s: s.position)]
    lead = "".join(f"{s}, " for s in statics)
    nondiff = [(p, v) for p, v in layer.params if p.startswith("nondiff")]
    rule = [(p, v) for p, v in layer.params if not p.startswith("nondiff")]
    rule_kw = "".join(f", {p}={v}" for p, v in rule)
    if layer.kind == "custom_jvp":
        return [f"    f{i}_t = backend.custom_jvp(f{i}_fun{''.join(f', {p}={v}' for p, v in nondiff)})",
                f"    def f{i}_rule({lead}primals, tangents):",
                "        tangents = tuple(instantiate(t, p) for t, p in zip(tangents, primals))",
                f"        return backend.jvp(lambda {A}: f{i}_fun({ext}), primals, tangents)",
                f"    f{i}_t.defjvp(f{i}_rule{rule_kw})"]
    symbolic = dict(rule).get("symbolic_zeros") == "True"
    unwrap = [f"        {A}, = ({', '.join(f'{n}.value' for n in names)},)  # CustomVJPPrimal"] if symbolic else []
    return [f"    f{i}_t = backend.custom_vjp(f{i}_fun{''.join(f', {p}={v}' for p, v in nondiff)})",
            f"    def f{i}_fwd({ext}):", *unwrap,
            f"        out = f{i}_fun({ext})",
            f"        return out, (({A},), out)",
            f"    def f{i}_bwd({lead}residuals, g):",
            "        xs, out = residuals",
            "        g = tree_map(instantiate, g, out, is_leaf=symbolic)",
            f"        _, pull = backend.vjp(lambda {A}: f{i}_fun({ext}), *xs)",
            "        return pull(g)",
            f"    f{i}_t.defvjp(f{i}_fwd, f{i}_bwd{rule_kw})"]


def _vmap_lines(layer, i, names, meaning):
    A = ", ".join(names)
    n = layer.size
    batched = ", ".join(n_ if ax is None else f"batch({n_}, {n}, {ax})" for n_, ax in zip(names, layer.axes))
    body = [f"    def f{i}_body({A}):", f"        out = f{i - 1}({A})"]
    name = layer.axis_name
    if name and not meaning:
        body.append(f"        return tree_map(lambda o: o + 0.5 * lax.pmean(o, {name!r}) if inexact(o) "
                    "else o, out)")
    else:
        body.append("        return out")
    if not meaning:
        return body + [f"    def f{i}({A}):",
                       f"        return backend.vmap(f{i}_body{_params(layer)})({batched},)"]
    sliced = ", ".join(n_ if ax is None else f"jnp.take({n_}, k, axis={ax})" for n_, ax in zip(names, layer.axes))
    lines = body + [f"    def f{i}({A}):", f"        {A}, = ({batched},)",
                    f"        outs = [f{i}_body({sliced}) for k in range({n})]"]
    if name:
        lines += ["        mean = mean_of(outs)  # the collective: pmean over the batch",
                  "        outs = [tree_map(lambda o, m: o + 0.5 * m if inexact(o) else o, out, mean) "
                  "for out in outs]"]
    lines.append(f"        return stack_out(outs, {layer.out_axes!r})")
    return lines


# ---------------------------------------------------------------- drawing


def _allowed(kind, inner, arg_types, below):
    """Whether layer ``kind`` may go over a function returning ``inner`` whose layers
    are ``below`` (kinds), by JAX's documented rules and the size limit."""
    inner_leaves = leaves(inner)
    size = _size(inner)
    if kind in DIFFERENTIATING and any(leaf.kind == "float0" for leaf in inner_leaves):
        return False
    if kind in FORWARD and "custom_vjp" in below:
        return False
    real_args = sum(a.size for a in arg_types if a.kind == "float")
    if kind in JACOBIANS:
        if not all(leaf.kind == "float" for leaf in inner_leaves) or not real_args:
            return False
        if kind == "hessian":
            return size * real_args * real_args <= MAX_ELEMENTS
        return size * sum(a.size for a in arg_types) <= MAX_ELEMENTS
    if kind == "vmap":
        return size * 3 <= MAX_ELEMENTS
    if kind in ("jvp", "linearize", "vjp", "grad", "value_and_grad"):
        return 2 * size + sum(a.size for a in arg_types) <= MAX_ELEMENTS
    return True


def _draw_statics(draw, i, n_args, max_statics, by_name_ok=True):
    """Static arguments at drawn positions; those declared by name come after those
    declared by number (the call passes them by keyword, and every argument after them:
    JAX reads static_argnums from the positional arguments only)."""
    k = draw(st.integers(0, max_statics))
    total = n_args + k
    positions = sorted(draw(st.lists(st.integers(0, total - 1), min_size=k, max_size=k, unique=True)))
    first_by_name = draw(st.integers(0, k)) if by_name_ok else k
    return tuple(Static(p, STATIC_VALUES[j], j >= first_by_name, _static_name(i, j))
                 for j, p in enumerate(positions))


def _nums_text(draw, positions, total, negative_ok=True):
    """``positions`` as drawn: any order, some negative, a bare int for one."""
    order = draw(st.permutations(positions))
    nums = [p - total if negative_ok and draw(st.booleans()) else p for p in order]
    if len(nums) == 1 and draw(st.booleans()):
        return repr(nums[0])
    return repr(tuple(nums))


def _names_text(draw, names):
    if len(names) == 1 and draw(st.booleans()):
        return repr(names[0])
    return repr(tuple(draw(st.permutations(names))))


def _positional(statics, total):
    """How many arguments the call passes by position: those before the first static
    declared by name (the rest go by keyword).  Negative indices count from there."""
    return min([s.position for s in statics if s.by_name], default=total)


def _static_params(draw, statics, total, nums_param, names_param, negative_ok=True):
    total = _positional(statics, total)
    params = []
    by_num = [s.position for s in statics if not s.by_name]
    by_name = [s.name for s in statics if s.by_name]
    if by_num:
        text = _nums_text(draw, by_num, total, negative_ok)
        if nums_param.startswith("nondiff") and not text.startswith("("):
            text = f"({text},)"   # custom_jvp/custom_vjp take a sequence only
        params.append((nums_param, text))
    if by_name:
        params.append((names_param, _names_text(draw, by_name)))
    return params


def _draw_argnums(draw, candidates, n):
    """An int (maybe negative) or a tuple in any order of distinct argument indices."""
    chosen = draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=len(candidates), unique=True))
    nums = tuple(c - n if draw(st.booleans()) else c for c in chosen)
    if len(nums) == 1 and draw(st.booleans()):
        return nums[0]
    return nums


def _out_axes_tree(draw, tree, batched):
    """vmap's out_axes: one int for every leaf, or a tree of per-leaf ints (None where
    nothing is batched)."""
    ranks = [leaf.rank for leaf in leaves(tree)]
    if not batched:
        return None if draw(st.booleans()) else draw(st.integers(-(min(ranks) + 1), min(ranks)))
    if isinstance(tree, Leaf) or draw(st.booleans()):
        return draw(st.integers(-(min(ranks) + 1), min(ranks)))
    return _map_draw(draw, tree)


def _map_draw(draw, tree):
    if isinstance(tree, Leaf):
        return draw(st.integers(-(tree.rank + 1), tree.rank))
    return tuple(_map_draw(draw, t) for t in tree)


def _batched_type(tree, axes):
    if isinstance(axes, tuple):
        return tuple(_batched_type(t, a) for t, a in zip(tree, axes))
    return _map(tree, lambda leaf: leaf if axes is None else
                Leaf(leaf.shape[:axes % (leaf.rank + 1)] + (SIZE_MARK,) + leaf.shape[axes % (leaf.rank + 1):],
                     leaf.dtype))


SIZE_MARK = -1   # replaced by the batch size (types are drawn before the size is used)


def _with_size(tree, size):
    return _map(tree, lambda leaf: Leaf(tuple(size if d == SIZE_MARK else d for d in leaf.shape), leaf.dtype))


def _map_jacobian_dtypes(jac, inner, arg_types, argnums):
    """jacrev's Jacobians: the dtype of an integer argument where it is one."""
    n = len(arg_types)

    def fix(leaf_jac):
        if isinstance(argnums, tuple):
            return tuple(Leaf(j.shape, arg_types[a % n].dtype) if arg_types[a % n].kind == "int" else j
                         for j, a in zip(leaf_jac, argnums))
        a = arg_types[argnums % n]
        return Leaf(leaf_jac.shape, a.dtype) if a.kind == "int" else leaf_jac
    if isinstance(inner, Leaf):
        return fix(jac)
    return tuple(_map_jacobian_dtypes(j, o, arg_types, argnums) for j, o in zip(jac, inner))


@st.composite
def _layer(draw, kind, i, inner, arg_types, acc, outermost, names):
    n = len(arg_types)
    if kind in ("jit", "checkpoint"):
        variant = kind if kind == "jit" else draw(st.sampled_from(("checkpoint", "remat")))
        statics = _draw_statics(draw, i, n, 2, by_name_ok=variant != "remat")
        total = n + len(statics)
        params = _static_params(draw, statics, total, "static_argnums", "static_argnames",
                                negative_ok=kind == "jit")
        if kind == "jit":
            static_positions = {s.position for s in statics}
            arrays = [p for p in range(total) if p not in static_positions]
            # donation only where the caller's arguments are the stack's own: inside a
            # transformation JAX may still need a donated primal (a deleted-array error)
            donated = draw(st.lists(st.sampled_from(arrays), max_size=2, unique=True)) if outermost else []
            ext = _extended(Layer(kind, statics=statics), names)
            positional = _positional(statics, total)
            by_name = draw(st.lists(st.sampled_from(donated), unique=True)) if donated else []
            by_name += [p for p in donated if p >= positional and p not in by_name]
            by_num = [p for p in donated if p not in by_name]
            if by_num:
                params.append(("donate_argnums", _nums_text(draw, by_num, positional)))
            if by_name:
                params.append(("donate_argnames", _names_text(draw, [ext[p] for p in by_name])))
            for flag in ("keep_unused", "inline"):
                if draw(st.booleans()):
                    params.append((flag, "True"))
        else:
            if draw(st.booleans()):
                params.append(("prevent_cse", repr(draw(st.booleans()))))
            # JAX's saveable policies fail on complex values (laws.jax_bugs): not drawn there
            complex_values = any(leaf.kind == "complex" for leaf in leaves(inner) + list(arg_types))
            policy = draw(st.sampled_from([p for p in POLICIES if not (
                complex_values and p in COMPLEX_FAILING_POLICIES)]))
            if policy in ("save_only_these_names", "save_anything_except_these_names"):
                params.append(("policy", f"backend.checkpoint_policies.{policy}('a')"))
            elif policy is not None:
                params.append(("policy", f"backend.checkpoint_policies.{policy}"))
        return Layer(kind, tuple(params), statics, variant=variant if kind == "checkpoint" else "",
                     out=inner)
    if kind in ("custom_jvp", "custom_vjp"):
        statics = _draw_statics(draw, i, n, 1)
        params = _static_params(draw, statics, n + len(statics), "nondiff_argnums", "nondiff_argnames",
                                negative_ok=False)
        symbolic = draw(st.booleans())
        if symbolic:
            params.append(("symbolic_zeros", "True"))
        # JAX documents optimize_remat without symbolic zeros (NotImplementedError)
        if kind == "custom_vjp" and not symbolic and draw(st.booleans()):
            params.append(("optimize_remat", "True"))
        return Layer(kind, tuple(params), statics, out=inner)
    if kind == "compile_time_eval":
        return Layer(kind, out=inner)
    if kind == "vmap":
        size = draw(st.integers(1, 3))
        ranks = [a.rank for a in arg_types]
        if draw(st.booleans()):   # one int for every argument
            ax = draw(st.integers(-(min(ranks) + 1), min(ranks)))
            axes, in_axes = (ax,) * n, repr(ax)
        else:
            axes = tuple(draw(st.one_of(st.none(), st.integers(-(r + 1), r))) for r in ranks)
            in_axes = repr(axes)
        batched = any(a is not None for a in axes)
        params = [("in_axes", in_axes)]
        out_axes = _out_axes_tree(draw, inner, batched)
        if out_axes != 0 or draw(st.booleans()):
            params.append(("out_axes", repr(out_axes)))
        if not batched or draw(st.booleans()):
            params.append(("axis_size", repr(size)))
        name = f"a{i}" if draw(st.booleans()) else None
        if name:
            params.append(("axis_name", repr(name)))
        out = _with_size(_batched_type(inner, out_axes), size)
        return Layer(kind, tuple(params), axes=axes, size=size, out_axes=out_axes, axis_name=name,
                     out=out)
    has_aux = draw(st.booleans())
    params = [("has_aux", "True")] if has_aux else []
    aux = Leaf((), acc)
    if kind in ("grad", "value_and_grad"):
        ints = [j for j, a in enumerate(arg_types) if a.kind == "int"]
        allow_int = bool(ints) and draw(st.booleans())
        candidates = [j for j, a in enumerate(arg_types) if a.kind != "int" or allow_int]
        argnums = _draw_argnums(draw, candidates, n)
        if argnums != 0 or draw(st.booleans()):
            params.insert(0, ("argnums", repr(argnums)))
        if allow_int or draw(st.integers(0, 3)) == 0:
            params.append(("allow_int", repr(allow_int)))
        g = _grad_type(arg_types, argnums)
        value = (Leaf((), acc), inner) if has_aux else Leaf((), acc)
        if kind == "grad":
            out = (g, inner) if has_aux else g
        else:
            out = (value, g)
        return Layer(kind, tuple(params), has_aux=has_aux, out=out)
    if kind in ("jvp", "linearize"):
        out = (inner, _map(inner, _tangent)) + ((aux,) if has_aux else ())
        return Layer(kind, tuple(params), has_aux=has_aux, out=out)
    if kind == "vjp":
        out = (inner, tuple(_tangent(a) for a in arg_types)) + ((aux,) if has_aux else ())
        return Layer(kind, tuple(params), has_aux=has_aux, out=out)
    # jacobians: real floating arguments (jacrev: integers too, with allow_int)
    # JAX's jacrev raises TypeError for a bool argument with allow_int (laws.jax_bugs):
    # integer ones only
    ints = [j for j, a in enumerate(arg_types) if a.kind == "int" and a.dtype != "bool"]
    allow_int = kind == "jacrev" and bool(ints) and draw(st.booleans())
    candidates = [j for j, a in enumerate(arg_types) if a.kind == "float" or (allow_int and j in ints)]
    argnums = _draw_argnums(draw, candidates, n)
    if argnums != 0 or draw(st.booleans()):
        params.insert(0, ("argnums", repr(argnums)))
    if allow_int:
        params.append(("allow_int", "True"))
    if kind == "hessian":
        def per_leaf(o):
            def h(a, b):
                return Leaf(o.shape + arg_types[a % n].shape + arg_types[b % n].shape, o.dtype)
            if isinstance(argnums, tuple):
                return tuple(tuple(h(a, b) for b in argnums) for a in argnums)
            return h(argnums, argnums)
        jac = _map(inner, per_leaf)
    else:
        # jacrev's Jacobian in an integer argument has the argument's dtype in JAX (zeros)
        jac = _jacobian_type(inner, arg_types, argnums)
        if kind == "jacrev" and allow_int:
            jac = _map_jacobian_dtypes(jac, inner, arg_types, argnums)
    return Layer(kind, tuple(params), has_aux=has_aux, out=(jac, aux) if has_aux else jac)


@st.composite
def _input_types(draw, dtype):
    n = draw(st.integers(1, 2))
    dt = dtype or draw(st.sampled_from(("float32", "float64")))
    return tuple((tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2)))), dt)
                 for _ in range(n))


@st.composite
def _stack_case(draw, max_depth, kinds, corner_kinds, dtype, program_options):
    input_types = draw(_input_types(dtype))
    program = draw(random_programs(smooth=True, input_types=input_types, min_ops=1, max_ops=3,
                                   **program_options))
    args = tuple(draw(program_args(program)))
    corner = draw(corners(Leaf(*program.output_type), corner_kinds)) if corner_kinds and draw(
        st.integers(0, 2)) else None
    if corner is not None:
        args += (corner.arg,)
    case = StackCase(program, corner, (), args)
    arg_types = case.arg_types
    acc = "float64" if program.dtype == "float64" else "float32"
    inner, layers = case.base_type, []
    depth = draw(st.integers(1, max_depth))
    for i in range(1, depth + 1):
        below = [layer.kind for layer in layers]
        usable = [k for k in kinds if _allowed(k, inner, arg_types, below)]
        if not usable:
            break
        layer = draw(_layer(draw(st.sampled_from(usable)), i, inner, arg_types, acc, i == depth,
                            case.arg_names))
        layers.append(layer)
        inner = layer.out
    return StackCase(program, corner, tuple(layers), args)


def transformation_stacks(*, max_depth=4, kinds=KINDS, corner_kinds=CORNER_KINDS, dtype=None,
                          **program_options):
    """Draw a :class:`StackCase`: 1 to ``max_depth`` layers of ``kinds`` over a small smooth
    program (1 or 2 inputs of rank 0 to 2, sides 1 to 3), two cases in three with a dtype
    or shape corner of ``corner_kinds``; ``program_options``: options of
    ``random_programs`` (``ops=...``)."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown layer kinds {unknown}; choose from {KINDS}")
    bad = [k for k in corner_kinds if k not in CORNER_KINDS]
    if bad:
        raise ValueError(f"unknown corner kinds {bad}; choose from {CORNER_KINDS}")
    if not isinstance(max_depth, int) or not 1 <= max_depth <= 4:
        raise ValueError(f"max_depth must be an int from 1 to 4, got {max_depth!r}")
    return _stack_case(max_depth, tuple(kinds), tuple(corner_kinds), dtype, program_options)
