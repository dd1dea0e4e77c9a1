"""Random well-typed programs as plain data, and the strategies that draw them.

A :class:`Program` is a straight-line list of :class:`~strategies.ops.Node`
over its inputs. It is built for a backend by compiling its own
``source()``, so what you read in a failure report is exactly what ran.

The draw is a loop of steps, each one ``draw`` of its own: pick an operand
(most recent value first), then an op that accepts it, then the op's
parameters. Hypothesis shrinks such a draw by deleting whole steps and by
moving choices towards the first option, so failing programs shrink to a
few ops over scalar inputs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

from hypothesis import strategies as st

from . import array_strategies as _arrays
from .backends import check_backend
from .source import compile_text
from .ops import CUSTOM_KINDS, PREAMBLES, Context, Node
from .vocabulary import VOCABULARY
from .types import FLOAT_DTYPES, INPUT_BOUND, POSITIVE_RANGE, ValueType

MAX_OPS_LIMIT = 64


@dataclass(frozen=True, repr=False)
class Program:
    """A random program: inputs, a list of nodes, one array output.

    ``source()`` is a function ``def program(backend, x0, x1, ...)``;
    ``build(backend)`` returns ``lambda *args: program(backend, *args)``.
    """

    input_types: tuple[tuple[tuple[int, ...], str], ...]
    nodes: tuple[Node, ...]
    output: int  # value id of the result: the last node (the last input if no nodes)
    input_bounds: tuple[tuple[float, float], ...] = ()  # per input; () means all [-2, 2]
    smooth: bool = False
    linear: bool = False
    _cache: dict = field(default_factory=dict, compare=False, hash=False)

    # ---- introspection
    @property
    def ops(self) -> tuple[str, ...]:
        """One op name per node, in program order (``set(p.ops)`` for distinct)."""
        return tuple(n.op for n in self.nodes)

    @property
    def num_inputs(self) -> int:
        return len(self.input_types)

    @property
    def dtype(self) -> str:
        return self.input_types[0][1]

    @property
    def output_type(self) -> tuple[tuple[int, ...], str]:
        """``(shape, dtype)`` of the single array the program returns."""
        t = self._value_type(self.output)
        return t.shape, t.dtype

    @property
    def output_bounds(self) -> tuple[float, float]:
        """Proven bounds on the output elements (interval arithmetic)."""
        t = self._value_type(self.output)
        return t.lo, t.hi

    @property
    def input_dependencies(self) -> frozenset:
        """Indices of the inputs the output depends on."""
        return self._value_type(self.output).deps

    @property
    def custom_ops(self) -> tuple[str, ...]:
        """Names of the custom-rule nodes (custom_jvp, custom_vjp, linear_call)."""
        return tuple(n.op for n in self.nodes if n.op in CUSTOM_KINDS)

    @property
    def wrong_rule(self) -> str | None:
        """The op name of the node with a deliberately wrong rule, if any."""
        return next((n.op for n in self.nodes if n.wrong), None)

    def bounds_of_input(self, i: int) -> tuple[float, float]:
        """The range input ``i`` is drawn from (some inputs are kept positive)."""
        return self.input_bounds[i] if self.input_bounds else (-INPUT_BOUND, INPUT_BOUND)

    def _value_type(self, i: int) -> ValueType:
        n = len(self.input_types)
        if i < n:
            shape, dtype = self.input_types[i]
            lo, hi = self.bounds_of_input(i)
            return ValueType(shape, dtype, lo, hi, frozenset({i}))
        return self.nodes[i - n].type

    def _name(self, i: int) -> str:
        n = len(self.input_types)
        return f"x{i}" if i < n else f"v{i - n}"

    # ---- source and building
    def source(self) -> str:
        """The program as a runnable Python function of ``(backend, x0, ...)``."""
        if "source" not in self._cache:
            params = ", ".join(["backend"] + [f"x{i}" for i in range(self.num_inputs)])
            lines = [f"def program({params}):", "    jnp, lax = backend.numpy, backend.lax"] + self.body_lines()
            self._cache["source"] = "\n".join(lines) + "\n"
        return self._cache["source"]

    def body_lines(self, tags=()) -> list[str]:
        """The function's lines after its ``jnp, lax`` line: the helpers its nodes need,
        one line per node, the return. ``tags``: ``(node, tag)`` pairs whose values are
        wrapped in ``checkpoint_name(value, tag)``."""
        lines, seen = [], []
        for node in self.nodes:
            seen.extend(k for k in node.needs if k not in seen)
        for key in seen:
            lines.append("")
            lines.extend(PREAMBLES[key].rstrip("\n").split("\n"))
        if seen:
            lines.append("")
        tagged = dict(tags)
        for j, node in enumerate(self.nodes):
            expr = f"checkpoint_name({node.expr}, {tagged[j]!r})" if j in tagged else node.expr
            lines.append(f"    v{j} = {expr}")
        lines.append(f"    return {self._name(self.output)}")
        return lines

    def build(self, backend):
        """A callable taking the inputs positionally, evaluated with ``backend``.

        ``backend`` is any module with JAX's API (``jax`` or ``impl``). Nothing
        is traced here; the first call does that.
        """
        check_backend(backend)
        fn = compile_text(self.source(), "program")["program"]

        @functools.wraps(fn)
        def program(*args):
            return fn(backend, *args)

        return program

    def __repr__(self) -> str:
        return f"Program(ops={self.ops!r}, input_types={self.input_types!r}):\n{self.source()}"

    def __hash__(self):
        return hash((self.input_types, self.nodes, self.output))

    def __eq__(self, other):
        if not isinstance(other, Program):
            return NotImplemented
        return (self.input_types, self.nodes, self.output) == (other.input_types, other.nodes, other.output)


# ------------------------------------------------------------------ options


@dataclass(frozen=True)
class _Options:
    smooth: bool
    linear: bool
    custom_kinds: tuple[str, ...]
    wrong_rules: bool
    dtype: str | None
    min_ops: int
    max_ops: int
    num_inputs: int | None
    op_names: tuple[str, ...]  # ordinary ops allowed in the body
    dense: bool = False  # end with a "mix" node: dense, non-square, non-symmetric Jacobian


def _check_bool(name, v):
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be a bool, got {v!r}")


def _check_int(name, v, lo, hi):
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"{name} must be an int, got {v!r}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {v}")


def _options(smooth, linear, custom_rules, wrong_rules, dtype, min_ops, max_ops, num_inputs, ops=None,
             dense=False, forward_only_ops=False) -> _Options:
    for name, v in (("smooth", smooth), ("linear", linear), ("wrong_rules", wrong_rules), ("dense", dense),
                    ("forward_only_ops", forward_only_ops)):
        _check_bool(name, v)
    if dense and wrong_rules:
        raise ValueError("dense=True ends a program with a 'mix' node; wrong_rules=True ends it with "
                         "the wrong custom node: choose one")
    if isinstance(custom_rules, bool):
        kinds = CUSTOM_KINDS if (custom_rules or wrong_rules) else ()
    elif isinstance(custom_rules, Iterable) and not isinstance(custom_rules, str):
        kinds = tuple(custom_rules)
        bad = [k for k in kinds if k not in CUSTOM_KINDS]
        if bad:
            raise ValueError(f"unknown custom rule kinds {bad}; choose from {CUSTOM_KINDS}")
        if wrong_rules and not kinds:
            raise ValueError("wrong_rules=True needs at least one custom rule kind")
    else:
        raise TypeError(f"custom_rules must be a bool or a collection of {CUSTOM_KINDS}, got {custom_rules!r}")
    if linear:
        kinds = tuple(k for k in kinds if VOCABULARY[k].linear)
        if (custom_rules is not False or wrong_rules) and not kinds:
            raise ValueError("linear=True allows only the 'linear_call' custom rule kind")
    if dtype is not None:
        dtype = _arrays._check_dtype(dtype).name
        if dtype not in FLOAT_DTYPES:
            raise ValueError(f"programs take float inputs; dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    _check_int("max_ops", max_ops, 0, MAX_OPS_LIMIT)
    _check_int("min_ops", min_ops, 0, max_ops)
    if dense and max_ops < 1 + bool(kinds):
        raise ValueError("dense=True needs room for the final 'mix' node (max_ops >= 1, 2 with custom rules)")
    if kinds and max_ops < 1:
        raise ValueError("custom rules need max_ops >= 1 (a custom node is always present)")
    if num_inputs is not None:
        _check_int("num_inputs", num_inputs, 1, 8)
    names = [n for n, op in VOCABULARY.items() if n not in CUSTOM_KINDS]
    if ops is not None:
        if isinstance(ops, str) or not isinstance(ops, Iterable):
            raise TypeError(f"ops must be a collection of op names, got {ops!r}")
        ops = tuple(ops)
        unknown = [o for o in ops if o not in VOCABULARY or o in CUSTOM_KINDS]
        if unknown:
            raise ValueError(f"unknown ops {unknown}; see strategies.OP_NAMES (custom ones via custom_rules)")
        names = [n for n in names if n in ops]
    if linear:
        names = [n for n in names if VOCABULARY[n].linear]
    if smooth:
        names = [n for n in names if VOCABULARY[n].smooth]
    if not forward_only_ops:
        names = [n for n in names if VOCABULARY[n].reverse]
    return _Options(smooth, linear, kinds, wrong_rules, dtype, min_ops, max_ops, num_inputs, tuple(names) + kinds,
                    dense)


# ----------------------------------------------------------------- drawing


@st.composite
def _input_types(draw, dtype, num_inputs, max_rank=3, max_side=5):
    """Input types and ranges: shapes that mostly broadcast together (so
    binary ops find partners); some inputs positive (so log/sqrt/div apply)."""
    n = num_inputs if num_inputs is not None else draw(st.integers(1, 3))
    base = tuple(draw(st.integers(1, max_side)) for _ in range(draw(st.integers(0, max_rank))))
    types, bounds = [], []
    for _ in range(n):
        how = draw(st.integers(0, 2))
        if how == 0:
            shape = base
        elif how == 1:  # a trailing part of the base shape, some sides set to 1
            tail = base[draw(st.integers(0, len(base))):]
            shape = tuple(1 if draw(st.booleans()) else d for d in tail)
        else:
            shape = draw(_arrays.shapes(max_dims=max_rank, max_side=max_side))
        types.append((tuple(shape), dtype))
        bounds.append(POSITIVE_RANGE if draw(st.booleans()) else (-INPUT_BOUND, INPUT_BOUND))
    return tuple(types), tuple(bounds)


@st.composite
def _step(draw, ctx: Context, op_names):
    """One node: an op, an operand it accepts (recent first), its params.

    Drawing the op first keeps every op about equally likely, however rare
    the operands it needs (transpose needs rank >= 2, log positive values).
    """
    op = VOCABULARY[ctx.pick(draw, op_names)]
    operands = [a for a in ctx.recent() if op.accepts(ctx.values[a], ctx)]
    if not operands:  # nothing fits this op: choose among the ops that fit
        usable = [n for n in op_names if any(VOCABULARY[n].accepts(t, ctx) for t in ctx.values)]
        if not usable:  # only with a restricted ``ops=``; the program ends here
            return None
        op = VOCABULARY[ctx.pick(draw, usable)]
        operands = [a for a in ctx.recent() if op.accepts(ctx.values[a], ctx)]
    return op.make(draw, ctx, ctx.pick(draw, operands))


_KEEP_GOING = st.integers(0, 5)


def _keep_going(draw):
    # An integer, not a boolean, so a long program is likely; zero ends it,
    # and zero is where shrinking goes.
    return draw(_KEEP_GOING) != 0


@st.composite
def _program(draw, opts: _Options, input_types=None):
    if input_types is None:
        dtype = opts.dtype or draw(st.sampled_from(FLOAT_DTYPES))
        input_types, input_bounds = draw(_input_types(dtype, opts.num_inputs))
    else:
        input_bounds = ((-INPUT_BOUND, INPUT_BOUND),) * len(input_types)
    ctx = Context(len(input_types), smooth=opts.smooth, linear=opts.linear)
    ctx.values = [
        ValueType(shape, dtype, lo, hi, frozenset({i}))
        for i, ((shape, dtype), (lo, hi)) in enumerate(zip(input_types, input_bounds))
    ]
    reserve = (1 if opts.custom_kinds else 0) + (1 if opts.dense else 0)
    body_max = opts.max_ops - reserve
    body_min = max(0, opts.min_ops - reserve)
    body_ops = tuple(n for n in opts.op_names if not (opts.wrong_rules and n in opts.custom_kinds))
    nodes = []
    while len(nodes) < body_max and (len(nodes) < body_min or _keep_going(draw)):
        node = draw(_step(ctx, body_ops))
        if node is None:
            break
        nodes.append(node)
        ctx.values.append(node.type)
    has_custom = any(n.op in opts.custom_kinds for n in nodes)
    if opts.wrong_rules or (opts.custom_kinds and not has_custom):
        # The program ends in a custom node, so its rule reaches the output.
        a = len(ctx.values) - 1
        op = VOCABULARY[ctx.pick(draw, list(opts.custom_kinds))]
        nodes.append(op.make(draw, ctx, a, wrong=opts.wrong_rules))
        ctx.values.append(nodes[-1].type)
    if opts.dense:
        nodes.append(VOCABULARY["mix"].make(draw, ctx, len(ctx.values) - 1))
        ctx.values.append(nodes[-1].type)
    return Program(tuple(input_types), tuple(nodes), len(ctx.values) - 1, tuple(input_bounds),
                   opts.smooth, opts.linear)


def _check_input_types(input_types):
    if isinstance(input_types, str) or not isinstance(input_types, Iterable):
        raise TypeError(f"input_types must be a sequence of (shape, dtype), got {input_types!r}")
    out = []
    for item in input_types:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"each input type must be a (shape, dtype) pair, got {item!r}")
        shape = _arrays._check_shape(item[0])
        dtype = _arrays._check_dtype(item[1]).name
        if dtype not in FLOAT_DTYPES:
            raise ValueError(f"program inputs must be float32 or float64, got {dtype!r}")
        out.append((shape, dtype))
    if not out:
        raise ValueError("a program needs at least one input")
    if len({d for _, d in out}) != 1:
        raise ValueError(f"all program inputs must share one dtype, got {sorted({d for _, d in out})}")
    return tuple(out)


def random_programs(*, smooth=False, linear=False, custom_rules=False, wrong_rules=False, dtype=None,
                    min_ops=1, max_ops=8, num_inputs=None, input_types=None, ops=None,
                    dense=False, forward_only_ops=False) -> st.SearchStrategy[Program]:
    """Random well-typed :class:`Program` objects (see :func:`program_cases`).

    ``input_types`` fixes the inputs as ``((shape, dtype), ...)``; ``ops``
    restricts the ordinary vocabulary to the named ops (a program ends early,
    below ``min_ops``, if none of them accepts any value); ``dense=True`` ends
    the program with a ``mix`` node (a constant non-symmetric matrix on the
    flattened value), so its Jacobian is dense, non-square and non-symmetric;
    ``forward_only_ops=True`` also draws the ops JAX differentiates in forward mode only
    (``Op.reverse`` false: ``custom_vmap``), for laws that never take reverse mode.

    >>> p = random_programs(max_ops=3).example()
    >>> print(p.source())            # doctest: +SKIP
    """
    opts = _options(smooth, linear, custom_rules, wrong_rules, dtype, min_ops, max_ops, num_inputs, ops, dense,
                    forward_only_ops)
    if input_types is not None:
        input_types = _check_input_types(input_types)
        if opts.dtype is not None and input_types[0][1] != opts.dtype:
            raise ValueError(f"dtype={opts.dtype!r} disagrees with input_types {input_types!r}")
    return _program(opts, input_types)


def program_args(program: Program) -> st.SearchStrategy[tuple]:
    """Arguments for ``program``: numpy arrays of its input types and ranges."""
    if not isinstance(program, Program):
        raise TypeError(f"expected a Program, got {type(program).__name__}")
    return st.tuples(*(
        _arrays.arrays(dtype, shape, elements=_arrays.elements(dtype, min_value=lo, max_value=hi))
        for i, (shape, dtype) in enumerate(program.input_types)
        for lo, hi in [program.bounds_of_input(i)]
    ))


def program_cases(*, smooth=False, linear=False, custom_rules=False, wrong_rules=False, dtype=None,
                  min_ops=1, max_ops=8, num_inputs=None, input_types=None, ops=None, dense=False,
                  forward_only_ops=False):
    """Draw ``(program, args)``: a random program and numpy arguments for it.

    Options: ``smooth`` (differentiable at the drawn args: no floor, max,
    comparisons; abs/log/sqrt/div only away from kinks and poles),
    ``linear`` (every op linear in the inputs, no constant offsets),
    ``custom_rules`` (True, or a subset of ``("custom_jvp", "custom_vjp",
    "linear_call")``; the program contains at least one such node),
    ``wrong_rules`` (the final node's rule is deliberately wrong, so
    autodiff through it differs from the true derivative), ``dtype``
    (float32/float64; default both), ``min_ops``/``max_ops`` (node count),
    ``num_inputs`` (default 1 to 3), ``dense`` (end with a ``mix`` node: a
    dense, non-square, non-symmetric Jacobian), ``forward_only_ops`` (also the ops JAX
    differentiates in forward mode only: for laws without reverse mode).

    Note JAX itself cannot apply forward mode to custom_vjp nodes nor vmap
    linear_call; pick ``custom_rules`` kinds to suit the law.

    >>> from hypothesis import given
    >>> @given(program_cases(smooth=True, dtype="float64"))
    ... def test_jit(case):
    ...     program, args = case
    ...     f = program.build(jax)
    ...     np.testing.assert_allclose(jax.jit(f)(*args), f(*args), rtol=1e-6)
    """
    progs = random_programs(smooth=smooth, linear=linear, custom_rules=custom_rules, wrong_rules=wrong_rules,
                     dtype=dtype, min_ops=min_ops, max_ops=max_ops, num_inputs=num_inputs,
                     input_types=input_types, ops=ops, dense=dense, forward_only_ops=forward_only_ops)
    return progs.flatmap(lambda p: program_args(p).map(lambda args: (p, args)))
