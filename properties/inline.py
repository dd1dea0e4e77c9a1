"""Python definitions as standalone source: functions and everything they use.

A standalone script (``properties/repro.py``) runs a law's own code outside the harness.
:class:`Definitions` collects that code: given some functions, it adds -- by the global
names their bytecode loads -- each function and class of the harness they use (their
source as written), the constants they read (printed as literals), and the imports of
the modules they use: NumPy and the standard library are imported, JAX is the backend
under test (the script imports the backend under the name ``jax``, so the harness'
``jax.tree_util`` becomes the backend's).  ``overrides`` replace harness functions that
cannot run outside it by script versions of the same name.  Whatever cannot be printed
raises :class:`NotStandalone`, naming it.
"""
from __future__ import annotations

import __future__
import ast
import builtins
import dataclasses
import dis
import inspect
import math
import re
import sys
import textwrap
import types

import numpy as np

#: packages whose code is inlined (their source is copied into the script)
HARNESS = ("properties", "strategies")
#: the module a script imports as its backend
BACKEND_ALIAS = "jax"


class NotStandalone(Exception):
    """Something a script would need cannot be printed without the harness."""


@dataclasses.dataclass(frozen=True)
class Source:
    """Code printed as it is (an expression), needing ``imports`` (module names)."""
    text: str
    imports: tuple = ()


def _top_package(module_name):
    return (module_name or "").split(".")[0]


def _is_stdlib(module_name):
    return _top_package(module_name) in sys.stdlib_module_names


def _loaded_names(code):
    """The global names ``code`` (and the code nested in it) loads, and the modules it
    imports: ``(names, [(module, level)])``."""
    names, imports = [], []
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.append(ins.argval)
        elif ins.opname == "IMPORT_NAME":
            imports.append(ins.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            more, more_imports = _loaded_names(const)
            names += more
            imports += more_imports
    return names, imports


def _defined_names(tree):
    """Top-level names a module's source defines (functions, classes, assignments)."""
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


def _same_value(a, b):
    """Two constants equal as printed (the same module, or equal values)."""
    try:
        return type(a) is type(b) and not callable(a) and bool(a == b)
    except Exception:  # arrays and the like: compared by identity only
        return False


class Definitions:
    """The source a script needs, in an order that runs: imports, then each definition
    after the ones it uses at definition time.

    ``provided``: names the script defines itself (the backend, the case, ...);
    ``overrides``: ``{name: object}`` used in place of the harness' object of that name.
    """

    def __init__(self, provided=(), overrides=None):
        self.provided = set(provided)
        self.overrides = dict(overrides or {})
        self.imports = {}          # import line -> None (ordered set)
        self.blocks = {}           # name -> source text, in emission order
        self._objects = {}         # name -> what it defines

    # ---- imports
    def import_module(self, module, name):
        """``name`` bound to ``module`` in the script."""
        mod = module.__name__
        if _top_package(mod) == BACKEND_ALIAS:
            if mod == BACKEND_ALIAS:
                if name != BACKEND_ALIAS:
                    self._block(name, f"{name} = {BACKEND_ALIAS}\n")
                return
            if any(part.startswith("_") for part in mod.split(".")):
                raise NotStandalone(f"{name!r} is JAX's private module {mod}")
            self._block(name, f"{name} = {mod}\n")   # a JAX submodule: the backend's
            return
        if mod == "numpy":
            self.imports[f"import numpy as {name}" if name != "numpy" else "import numpy"] = None
            return
        if _is_stdlib(mod):
            self.imports[f"import {mod} as {name}" if name != mod.split(".")[-1] or "." in mod
                         else f"import {mod}"] = None
            return
        raise NotStandalone(f"{name!r} is the module {mod}, which a script cannot import "
                            "(only the backend, NumPy and the standard library)")

    # ---- definitions
    def add(self, obj, name=None):
        """Add ``obj`` (a function, class or constant) under ``name`` (its own by default),
        with everything it uses."""
        name = name or obj.__name__
        if name in self.provided:
            return
        if name in self.overrides and obj is not self.overrides[name]:
            obj = self.overrides[name]
        if isinstance(obj, NotStandalone):
            raise obj
        if name in self._objects:
            if self._objects[name] is not obj and not _same_value(self._objects[name], obj):
                raise NotStandalone(f"two different definitions named {name!r}")
            return
        self._objects[name] = obj   # before what it uses: recursion ends here
        if isinstance(obj, types.ModuleType):
            self.import_module(obj, name)
        elif inspect.isfunction(obj) or inspect.isclass(obj):
            self._add_definition(obj, name)
        else:
            self._block(name, f"{name} = {self.literal(obj)}\n")

    def _add_definition(self, obj, name):
        module = getattr(obj, "__module__", "") or ""
        if _is_stdlib(module) or _top_package(module) in ("numpy", BACKEND_ALIAS):
            public = getattr(sys.modules.get(module), obj.__name__, None)
            if public is obj and (_is_stdlib(module) or module == "numpy"):
                self.imports[f"from {module} import {obj.__name__}"
                             + (f" as {name}" if name != obj.__name__ else "")] = None
                return
            raise NotStandalone(f"{name!r} is {module}.{obj.__name__}: no public name to "
                                "import it by")
        if _top_package(module) not in HARNESS:
            raise NotStandalone(f"{name!r} comes from {module!r}, neither the harness, "
                                "NumPy nor the standard library")
        if getattr(obj, "__name__", name) == "<lambda>":
            raise NotStandalone(f"{name!r} is a lambda: no source of its own")
        try:
            text = textwrap.dedent(inspect.getsource(obj))
        except (OSError, TypeError) as exc:
            raise NotStandalone(f"no source for {name!r}: {exc}") from exc
        tree = ast.parse(text)
        # annotations stay strings (the script starts with ``from __future__ import
        # annotations``): the types they name are not needed
        code = compile(tree, f"<{module}.{obj.__name__}>", "exec",
                       flags=__future__.annotations.compiler_flag, dont_inherit=True)
        loaded, imported = _loaded_names(code)
        for mod in imported:
            if _top_package(mod) in HARNESS + (BACKEND_ALIAS,) or mod == "":
                raise NotStandalone(f"{module}.{obj.__name__} imports {mod or 'relatively'} "
                                    "inside its code")
        namespace = vars(sys.modules[module])
        own = _defined_names(tree)
        for used in dict.fromkeys(loaded):
            if used in own or used in self.provided or used.startswith("__"):
                continue
            if used in self.overrides:
                self.add(self.overrides[used], used)
            elif used in namespace:
                self.add(namespace[used], used)
            elif not hasattr(builtins, used):
                raise NotStandalone(f"{module}.{obj.__name__} uses {used!r}, defined nowhere")
        if obj.__name__ != name:
            text += f"\n{name} = {obj.__name__}\n"
        self._block(name, text)

    def _block(self, name, text):
        self.blocks[name] = text

    # ---- literals
    def literal(self, value):
        """Python source evaluating to ``value`` in the script (classes it needs added)."""
        if isinstance(value, Source):
            for mod in value.imports:
                self.import_module(__import__(mod), mod.split(".")[0])
            return value.text
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else f"float({repr(value)!r})"
        if isinstance(value, complex):
            return f"complex({self.literal(value.real)}, {self.literal(value.imag)})"
        if inspect.isclass(value) or inspect.isfunction(value):
            self.add(value)
            return value.__name__
        if isinstance(value, np.dtype):
            self.import_module(np, "np")
            return f"np.dtype({value.name!r})"
        if isinstance(value, np.generic):
            return f"{self.literal(np.asarray(value))}[()]"
        if isinstance(value, np.ndarray):
            return self._array(value)
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            self._namedtuple(type(value))
            return f"{type(value).__name__}({', '.join(self.literal(v) for v in value)})"
        if isinstance(value, tuple):
            inner = ", ".join(self.literal(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, list):
            return "[" + ", ".join(self.literal(v) for v in value) + "]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{self.literal(k)}: {self.literal(v)}"
                                   for k, v in value.items()) + "}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            self.add(type(value))
            fields = ", ".join(f"{f.name}={self.literal(getattr(value, f.name))}"
                               for f in dataclasses.fields(value) if f.init)
            return f"{type(value).__name__}({fields})"
        flatten = getattr(value, "tree_flatten", None)
        if callable(flatten):   # a pytree node class whose children are its arguments
            children, aux = flatten()
            if aux is None:
                self.add(type(value))
                return f"{type(value).__name__}({', '.join(self.literal(c) for c in children)})"
        raise NotStandalone(f"cannot print {type(value).__name__} {value!r:.80} as a literal")

    def _namedtuple(self, cls):
        name = cls.__name__
        if name not in self.blocks:
            self.imports["from collections import namedtuple"] = None
            self._block(name, f"{name} = namedtuple({name!r}, {cls._fields!r})\n")

    def _array(self, a):
        self.import_module(np, "np")
        if a.dtype.kind in "OSUV" and a.dtype.names != ("float0",):
            raise NotStandalone(f"an array of dtype {a.dtype} has no literal")
        if a.dtype.names == ("float0",):   # JAX's tangent type of integers: no values
            return f"np.zeros({a.shape!r}, dtype={BACKEND_ALIAS}.dtypes.float0)"
        values = repr(a.tolist())
        values = re.sub(r"\b(nan|inf)\b", r"np.\1", values)
        text = f"np.array({values}, dtype={a.dtype.name!r})"
        return text + f".reshape({a.shape!r})" if a.size == 0 and a.ndim != 1 else text

    # ---- the result
    def source(self):
        """The import lines and the definitions, ready to print."""
        imports = sorted(self.imports, key=lambda line: (line.startswith("from "), line))
        return imports, list(self.blocks.values())
