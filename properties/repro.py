"""Scripts that reproduce a finding: ready to paste into a bug report.

:func:`standalone_script` writes a failure of a law on a case as a script that imports
only the backend (as ``jax``: ``import impl as jax``) and NumPy.  It defines the minimal
program (the case's own ``text()``), the case's data as the law reads it (a *view* per
case type, :data:`VIEWS`), and the law's own code with what it calls
(:mod:`properties.inline`; the harness helpers that need the harness replaced by those of
:mod:`properties.script_parts`); it prints the versions, what the law expects and what the
backend does, and exits 1 while the bug is present, 0 once it is fixed.  A differential
law's script runs the backend's side of the law against the reference's results, recorded
in the script when it is written (computed by the reference backend then).

A law whose code or case cannot be printed that way (it needs 8 devices, a NumPy
reference of the harness, ...) gets :func:`harness_script` instead: the same output, but
the script loads the case and the law from the harness, and says so in its header.

``python -m properties.repro SCRIPT [--backend NAME]`` runs a script on a backend of the
harness -- the broken backends of ``properties/broken.py`` exist only there -- by handing
the script that backend where it imports its own.
"""
from __future__ import annotations

import argparse
import ast
import base64
import builtins
import contextlib
import io
import os
import pickle
import sys
import textwrap
from types import SimpleNamespace

import numpy as np

from strategies import ControlFlowCase, CustomWrapperCase, PRNGCase, RematCase, StackCase

from . import cases, script_parts
from .inline import Definitions, NotStandalone, Source
from .laws import get

_PROGRAM = Source("SimpleNamespace(build=lambda backend: functools.partial(program, backend))",
                  ("functools",))


def _bound(name):
    """``lambda backend: functools.partial(<name>, backend)``: a function of the case's
    text with the backend as its first argument (what ``Case.function`` returns)."""
    return Source(f"lambda backend: functools.partial({name}, backend)", ("functools",))


def _with_numpy(name):
    """A function of the case's text with the backend's numpy as its first argument."""
    return Source(f"lambda np_: functools.partial({name}, np_)", ("functools",))


def _data(case, *names):
    return {name: getattr(case, name) for name in names}


def _program_view(case, literal, *data):
    return {"program": _PROGRAM, "args": case.args, **_data(case, *data)}


def _vmap_view(case, literal, *data):
    """A nest of vmaps (one level: a plain vmap)."""
    return dict(
        _program_view(case, literal, "in_axes", "out_axes", "axis_sizes", "depth",
                      "unbatched_args", *data),
        fun=Source("lambda backend: lambda *trees: program(backend, "
                   "*jax.tree_util.tree_leaves(trees))"),
        vmapped=Source("lambda backend: functools.reduce(lambda f, axes: backend.vmap("
                       "f, in_axes=axes[0], out_axes=axes[1]), reversed(list(zip(case.in_axes, "
                       "case.out_axes))), case.fun(backend))", ("functools",)))


def _custom_view(case, literal):
    custom = getattr(case, "custom", case)
    return {"primal": _with_numpy("primal"), "dh": _with_numpy("dh"),
            "jvp_rule": _with_numpy("jvp_rule"), "fwd": _with_numpy("fwd"),
            "bwd": _with_numpy("bwd"),
            **_data(custom, "w", "x", "batch", "rule", "claims_true", "bad_fwd", "optimize_remat")}


def _calls(expr, names):
    """``expr`` (source of the harness' tables, evaluated there with ``names`` bound) as
    a call of a lambda of those names."""
    return f"(lambda {', '.join(names)}: {expr})"


def _custom_differentiation_view(case, literal):
    expr = cases.DIFFERENTIATIONS[case.differentiation]
    return dict(_custom_view(case, literal), kind=case.kind,
                differentiation=case.differentiation,
                differentiate=Source(
                    "lambda backend, f: " + _calls(expr, ("jax", "jnp", "w", "x", "batch", "scalar"))
                    + "(backend, backend.numpy, case.w, case.x, case.batch, "
                    "lambda *a: backend.numpy.sum(f(*a)))"))


def _behaviour_view(case, literal):
    stacked = case.batch(SimpleNamespace(numpy=np))
    batch = ", ".join(f"backend.numpy.broadcast_to({a!r}, {(case.size,)!r})" if weak
                      else literal(b) for a, b, weak in zip(case.call_args, stacked, case.weak))
    expr = cases.TRANSFORMATIONS[case.transformation]
    examples = tuple(case.example_args(i) for i in range(case.size))
    return {"user_function": _bound("user_function"), "call_args": case.call_args,
            "other_values": Source(f"lambda: {literal(case.other_values())}"),
            "retyped_args": Source(f"lambda: {literal(case.retyped_args())}"),
            "tangents": Source(f"lambda: {literal(case.tangents())}"),
            "batch": Source(f"lambda backend: ({batch},)"),
            "example_args": Source(f"lambda i: {literal(examples)}[i]"),
            "transform": Source(
                "lambda backend, f: " + _calls(expr, ("jax", "jnp", "args", "argnums", "tangents",
                                                      "batch"))
                + "(backend, backend.numpy, case.call_args, case.float_argnums, case.tangents(), "
                "case.batch(backend))"),
            **_data(case, "weak", "size", "transformation", "float_argnums")}


#: per case type, the case as the laws read it: ``view(case, literal) -> {attribute: value
#: or Source}``, ``literal`` printing values inside a Source (the functions come from the
#: case's text, defined above the case in the script)
VIEWS = {
    cases.ProgramCase: _program_view,
    cases.ChunkedVmapCase: lambda case, literal: _vmap_view(case, literal, "chunk_size"),
    cases.VmapCase: _vmap_view,
    ControlFlowCase: lambda case, literal: {
        "build": _bound("program"), "reference": _bound("reference"),
        **_data(case, "args", "float_argnums", "batch", "batch_size", "kind")},
    StackCase: lambda case, literal: {
        "build": Source("lambda backend, **kw: functools.partial(meaning if kw.get('meaning') "
                        "else stack, backend)", ("functools",)),
        "events": Source(f"lambda: {case.events()!r}"), **_data(case, "args", "shape")},
    RematCase: lambda case, literal: {
        "build": Source("lambda backend, remat=True: make(backend, remat)"), "args": case.args},
    PRNGCase: lambda case, literal: {
        "program": _bound("program"), "keys": Source("lambda backend: keys(backend)"),
        **_data(case, "x", "num_keys")},
    CustomWrapperCase: lambda case, literal: {
        "make": Source("lambda backend, seen=None: make(backend, [] if seen is None else seen)"),
        **_data(case, "args", "kind", "rule", "weights", "claims_true", "perturbed")},
    cases.LinearCase: lambda case, literal: {
        "linear": Source("SimpleNamespace(fun=lambda backend: functools.partial(fun, backend), "
                         "transpose=lambda backend: functools.partial(fun_transpose, backend))",
                         ("functools",)),
        **_data(case, "residuals", "x")},
    cases.CustomCase: _custom_view,
    cases.CustomDifferentiationCase: _custom_differentiation_view,
    cases.BehaviourCase: _behaviour_view,
    cases.MisuseCase: lambda case, literal: {
        "run": Source("lambda backend, misuse: " + _calls(
            "{" + ", ".join(f"{m!r}: lambda: {cases.MISUSES[m]}" for m in case.misuses)
            + "}[misuse]()", ("jax", "jnp", "lax", "x"))
            + "(backend, backend.numpy, backend.lax, case.x)"),
        **_data(case, "x", "misuses")},
}


def _view(case, literal):
    for cls in type(case).__mro__:
        if cls in VIEWS:
            view = VIEWS[cls](case, literal)
            dtype = getattr(case, "dtype", None)
            if dtype is not None:
                view["dtype"] = dtype
            view["describe"] = Source(f"lambda: {case.describe()!r}")
            return view
    raise NotStandalone(f"no standalone view of a {type(case).__name__}")


def _promise(law):
    """What the law says, its docstring's first paragraph as one line."""
    return " ".join((law.fn.__doc__ or law.name).strip().split("\n\n")[0].split())


def _backend_import(backend):
    """The script's import of ``backend`` (a module name, or one with breaks)."""
    module = backend.split("+")[0]
    return "import jax" if module == "jax" else f"import {module} as jax"


def _case_text(case, defs):
    """The case's text with its imports of the harness replaced by the definitions."""
    text = case.text()
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    for node in reversed(tree.body):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        top = (getattr(node, "module", None) or node.names[0].name).split(".")[0]
        replaced = []
        if top in ("properties", "strategies"):   # the harness' definitions, copied
            module = __import__(node.module, fromlist=["_"])
            for alias in node.names:
                defs.add(getattr(module, alias.name), alias.asname or alias.name)
        elif top == "jax":   # JAX's modules are the backend's
            for alias in node.names:
                path = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                replaced.append(f"{alias.asname or alias.name.split('.')[0]} = {path}\n")
        else:
            continue
        lines[node.lineno - 1:node.end_lineno] = replaced
    text = "".join(lines).strip("\n") + "\n"
    defined = {n.name for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    clash = defined & set(defs.blocks)
    if clash:
        raise NotStandalone(f"the case's text defines {sorted(clash)}, as the law's code does")
    return text


def _docstring(law, backend, e, standalone):
    cause = e.get("cause") or {}
    reference, whose = e.get("reference"), e.get("whose", "own")
    title = (e.get("message") or f"law {law.name} fails").splitlines()[0][:200]
    lines = [title, "", *textwrap.wrap(f"Law {law.name}: {_promise(law)}", 88, break_on_hyphens=False),
             f"Backend {backend}: " + ("a failure the reference shares (inherited)"
                                       if whose == "inherited" else "the backend's own failure")
             + (f"; the same case on {reference}: {e.get('reference_result') or 'the law holds'}."
                if reference else "."),
             f"Cause: check {cause.get('check') or '?'}, {cause.get('exception', '?')}, primitives "
             f"{', '.join(cause.get('primitives') or []) or '-'}.",
             "Found by `python -m properties --hunt`; the case is hypothesis' smallest.", ""]
    if not standalone:
        return "\n".join(lines)
    lines += ["Standalone: imports only the backend and NumPy.  Prints the versions, what the",
              "law expects and what the backend does; exits 1 while the bug is present, 0 once",
              "it is fixed."]
    if "+" in backend:
        lines += ["", f"The backend is {backend.split('+')[0]} with the breaks "
                  f"{', '.join(backend.split('+')[1:])} of properties/broken.py, which exist only",
                  "in the harness: `python -m properties.repro THIS_SCRIPT` runs it there.  Run",
                  "plainly, it checks the unbroken backend."]
    return "\n".join(lines)


def _quoted(text):
    """``text`` as it reads inside a triple-quoted docstring."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def standalone_script(law, case, backend, e=None, reference=None):
    """A standalone script reproducing failure entry ``e`` (:func:`properties.findings.entry`)
    of ``law`` on ``case`` with ``backend`` (a name); ``reference``: the loaded reference
    backend, needed by the differential laws (their expected results are its).
    Raises NotStandalone when the law or the case cannot be printed."""
    e = e or {}
    defs = Definitions(provided=script_parts.SCRIPT_NAMES, overrides=script_parts.OVERRIDES)
    header = [f"LAW = {law.name!r}", f"BACKEND = {backend!r}"]
    differential = getattr(law.fn, "differential_parts", None)
    view = _view(case, defs.literal)
    if differential is not None:
        if reference is None:
            raise NotStandalone(f"{law.name} compares with a reference backend: none given")
        try:
            want = differential.side(reference, case)
        except Exception as exc:  # the script would have nothing to compare with
            raise NotStandalone(f"{reference.name} raised {type(exc).__name__} computing "
                                f"its results: {exc}") from exc
        defs.add(differential.side)
        defs.add(differential.compare)
        defs.add(script_parts.compared_with_recorded)
        checks = [f"SIDE, COMPARE = {differential.side.__name__}, {differential.compare.__name__}",
                  "CHECK = compared_with_recorded"]
        header += [f"WHAT = {f'{backend} vs {reference.name} {differential.what}'!r}",
                   f"#: the results of {reference.name} on the same case, when the script was written",
                   f"WANT = {defs.literal(want)}",
                   f"EXPECTED = {f'{_promise(law)} ({reference.name} results recorded in WANT)'!r}"]
    else:
        defs.add(law.fn)
        header.append(f"EXPECTED = {_promise(law)!r}")
        checks = [f"CHECK = {law.fn.__name__}"]
    defs.add(script_parts.main)
    text = _case_text(case, defs)
    fields = ",\n".join(f"    {k}={defs.literal(v)}" for k, v in view.items())
    defs.imports["from types import SimpleNamespace"] = None
    return _assemble(
        _docstring(law, backend, e, True), defs,
        [f"{_backend_import(backend)}  # the backend under test", "",
         'jax.config.update("jax_enable_x64", True)  # as the harness runs the laws'],
        header + ["", "", "# ---- the minimal program, as drawn and shrunk", "", text],
        "the law's code and what it calls, as the harness has them (properties/laws, "
        "properties/tolerances; properties/script_parts.py: main and the helpers that need "
        "the harness there)",
        ["# ---- the case, as the law reads it, and the check",
         f"case = SimpleNamespace(\n{fields})", *checks, "", "",
         'if __name__ == "__main__":', "    sys.exit(main())"])


def _assemble(docstring, defs, backend_lines, header, code, tail):
    """A script: its docstring, the imports (the standard library's, NumPy's, then
    ``backend_lines``), ``header``, the definitions (``code`` says what they are), ``tail``."""
    imports, blocks = defs.source()
    numpy = [line for line in imports if line.split()[1].split(".")[0] == "numpy"]
    std = [line for line in imports if line not in numpy]
    return "\n".join(['#!/usr/bin/env python', f'"""{_quoted(docstring)}\n"""',
                      "from __future__ import annotations", "", *std, "", *numpy, *backend_lines,
                      "", *header, "",
                      *textwrap.wrap(f"---- {code}", 88, initial_indent="# ", subsequent_indent="# "),
                      "", "\n\n".join(blocks), "", *tail, ""])


def harness_script(law, backend, e, why):
    """A script that replays entry ``e`` through the harness (``why``: why it is not
    standalone): it loads the case and the law from the repository."""
    defs = Definitions(provided=script_parts.SCRIPT_NAMES + ("CaseFiltered", "MissingFeature"))
    defs.add(script_parts.main)
    defs.imports.update({"import base64": None, "import pickle": None})
    program = "\n".join("    " + ln if ln else "" for ln in e["program"].splitlines())
    docstring = "\n".join([_docstring(law, backend, e, False), *textwrap.wrap(
        f"NOT STANDALONE ({why}): this script loads the case and the law from the harness, so "
        "it needs the repository on PYTHONPATH (`PYTHONPATH=REPO python THIS_SCRIPT`).  It "
        "prints the versions, what the law expects and what the backend does, and exits 1 "
        "while the bug is present, 0 once it is fixed.  The program, as it ran (`jax` is the "
        "backend):", 88, break_on_hyphens=False), "", program])
    return _assemble(
        docstring, defs,
        ["from properties.broken import load  # the harness",
         "from properties.features import MissingFeature", "from properties.laws import CaseFiltered, get"],
        [f"LAW = {law.name!r}", f"BACKEND = {backend!r}", f"EXPECTED = {_promise(law)!r}",
         f"CASE = {e['case_pickle']!r}"],
        "checking the law once (properties/script_parts.py)",
        ['if __name__ == "__main__":',
         "    jax, case, CHECK = load(BACKEND), pickle.loads(base64.b64decode(CASE)), get(LAW)",
         "    sys.exit(main())"])


def repro_script(e, backend, reference=None):
    """``(script, standalone)`` reproducing failure entry ``e`` on ``backend``: standalone
    where the law and the case can be printed, else through the harness."""
    law = get(e["cause"]["law"])
    try:
        case = pickle.loads(base64.b64decode(e["case_pickle"]))
    except Exception as exc:  # the harness script says the same when it runs
        return harness_script(law, backend, e, f"the case does not load: {exc!r}"), False
    try:
        return standalone_script(law, case, backend, e, reference), True
    except NotStandalone as exc:
        return harness_script(law, backend, e, str(exc)), False


def write_repro(directory, key, e, backend, reference=None):
    """Write ``repro/<key>.py`` for entry ``e`` under ``directory``: ``(path, standalone)``,
    ``(None, False)`` when the case could not be saved."""
    if not e.get("case_pickle"):
        return None, False
    text, standalone = repro_script(e, backend, reference)
    folder = os.path.join(directory, "repro")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, key + ".py")
    with open(path, "w") as fh:
        fh.write(text)
    return path, standalone


# ---------------------------------------------------------------------------
# running a script on a backend of the harness


def backend_module(text):
    """The module a script imports as ``jax`` (its backend)."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.asname or alias.name) == "jax":
                    return alias.name
    raise ValueError("the script imports no backend as `jax`")


def run_script(text, backend, filename="<repro>"):
    """Run script ``text`` with ``backend`` (a loaded Backend) in place of the module it
    imports as ``jax``: ``(exit status, output)``."""
    module = backend_module(text)
    real_import = builtins.__import__

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name == module:
            return backend
        return real_import(name, globals, locals, fromlist, level)
    scope = {"__name__": "__main__", "__file__": filename,
             "__builtins__": dict(vars(builtins), __import__=import_)}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(text, filename, "exec"), scope)
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return status, out.getvalue()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m properties.repro",
                                description="run a repro script on a backend of the harness")
    p.add_argument("script")
    p.add_argument("--backend", default=None,
                   help="a backend properties.broken.load takes (default: the script's BACKEND)")
    args = p.parse_args(argv)
    from .broken import load
    with open(args.script) as fh:
        text = fh.read()
    name = args.backend
    if name is None:
        tree = ast.parse(text)
        name = next((n.value.value for n in tree.body if isinstance(n, ast.Assign)
                     and any(getattr(t, "id", None) == "BACKEND" for t in n.targets)), None)
        if name is None:
            p.error("the script sets no BACKEND: name one with --backend")
    status, output = run_script(text, load(name), args.script)
    sys.stdout.write(output)
    return status


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["VIEWS", "harness_script", "repro_script", "run_script", "standalone_script",
           "write_repro"]
