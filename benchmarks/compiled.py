"""Compare the programs XLA compiles for impl and for JAX, benchmark by benchmark.

    python -m benchmarks.compiled                 # the compiled-ratio targets
    python -m benchmarks.compiled -k ScanLoop -v  # one family, every op kind

Timing two backends on a shared machine moves a ratio by more than 5 % from one
run to the next; the optimized HLO does not move.  When impl and JAX hand XLA
programs with the same costly operations (the dots, convolutions, loops,
branches, window reductions, scatters and transcendental functions), the
compiled time differs only by impl's per-call dispatch, which ``Dispatch``
measures on its own.  This tool counts the operations of both optimized
modules (fused computations included) and lists where they differ.
"""

import argparse
import collections
import re
import sys

from benchmarks._harness import iter_cases

# Benchmarks whose timed body calls ``self.fn(*self.args)`` on a jitted function.
COMPILED_TARGETS = ("PerExampleGrads.time_compiled", "ConvLayerForward.time_compiled",
                    "ConvLayerGrad.time_compiled", "ScanLoop.time_jit", "CondHeavy.time_jit")

# Operations whose count decides the run time; the rest (copies, bitcasts, tuples,
# cheap elementwise ops inside fusions) are allowed to differ a little.
COSTLY_OPS = frozenset({
    "dot", "convolution", "while", "conditional", "call", "reduce-window",
    "select-and-scatter", "scatter", "gather", "sort", "custom-call", "fft",
    "tanh", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
    "sine", "cosine", "tan", "power", "sqrt", "rsqrt", "cbrt", "atan2", "erf",
})

# Control flow counted by kind only: its result is the loop state or the branch
# results, and the work inside is counted instruction by instruction.
_CONTROL = frozenset({"while", "conditional", "call"})
_OP = re.compile(r"^\s*(?:ROOT )?%?[\w.\-]+ = ([^=]*?)\s([a-z][a-z\-]*)\(")


def op_counts(hlo_text):
    """How many instructions of each opcode an HLO module's text holds; costly
    operations are counted with their result shape and layout, e.g.
    ``dot f32[8,32]{1,0}``, so a transposed or larger dot counts as different."""
    counts = collections.Counter()
    for line in hlo_text.splitlines():
        m = _OP.match(line)
        if m:
            shape, op = m.groups()
            keyed = op in COSTLY_OPS and op not in _CONTROL
            counts[f"{op} {shape}" if keyed else op] += 1
    return counts


def _kind(key):
    return key.split(" ", 1)[0]


def differences(impl_counts, jax_counts, slack=0.10):
    """What disagrees: {op: (impl, jax)} for every costly op whose counts differ,
    plus "other ops" when the remaining instructions differ by more than `slack`
    of JAX's total."""
    out = {}
    for key in sorted(set(impl_counts) | set(jax_counts)):
        if _kind(key) in COSTLY_OPS and impl_counts[key] != jax_counts[key]:
            out[key] = (impl_counts[key], jax_counts[key])
    rest_impl = sum(n for k, n in impl_counts.items() if _kind(k) not in COSTLY_OPS)
    rest_jax = sum(n for k, n in jax_counts.items() if _kind(k) not in COSTLY_OPS)
    if abs(rest_impl - rest_jax) > slack * max(sum(jax_counts.values()), 1):
        out["other ops"] = (rest_impl, rest_jax)
    return out


def compiled_text(case, backend):
    """The optimized HLO of one benchmark case's jitted function for `backend`."""
    case = case.with_param("backend", backend)
    obj = case.instance()
    try:
        return obj.fn.lower(*obj.args).compile().as_text()
    finally:
        case.teardown(obj)


def target_cases(device="cpu", only=None):
    for case in iter_cases(prefixes=("time_",)):
        if (case.name in COMPILED_TARGETS and case.param("backend") == "jax"
                and case.param("device") == device and (not only or only in case.id)):
            yield case


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="only", help="only benchmarks whose id contains this")
    parser.add_argument("-v", "--verbose", action="store_true", help="every op kind")
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    args = parser.parse_args(argv)
    status = 0
    for case in target_cases(args.device, args.only):
        counts = {b: op_counts(compiled_text(case, b)) for b in ("impl", "jax")}
        diff = differences(counts["impl"], counts["jax"])
        label = case.id.replace("[jax-", "[")
        total = {b: sum(c.values()) for b, c in counts.items()}
        print(f"{label}: {total['impl']} instructions (impl) / {total['jax']} (jax): "
              + ("same costly operations" if not diff else f"DIFFERENT {diff}"))
        if args.verbose:
            for key in sorted(set(counts["impl"]) | set(counts["jax"])):
                mark = "*" if _kind(key) in COSTLY_OPS else " "
                print(f"   {mark} {key:40s} {counts['impl'][key]:5d} {counts['jax'][key]:5d}")
        status |= bool(diff)
    return status


if __name__ == "__main__":
    sys.exit(main())
