"""Run test classes of JAX's own test suite against impl.

    python tools/jax_suite.py FOLDER MODULE:CLASS[.PREFIX] ... [-k TEXT] [--reference] [-v]

FOLDER holds JAX test files (for example custom_api_test.py from JAX's tests/); each
selection names a module of it, a test class and optionally a test-name prefix
(`custom_api_test:CustomTransposeTest.test_linear_call`; `-k TEXT` keeps the tests whose
name contains TEXT). The tests run with
`import jax`, `jax.numpy`, `jax.lax`, `jax._src.api`, ... resolving to impl's modules,
while JAX's test utilities (`jax._src.test_util`: JaxTestCase, its strict dtype
promotion, its tolerances) stay JAX's. A name impl lacks is taken from JAX and
reported ("fallbacks"), so that a missing name is visible rather than silently
tested on JAX. `--reference` runs the same selection on JAX itself. Prints passed /
failed / skipped per class and the failures with their first error line. Needs
absl-py (JAX's test dependency) and no network.
"""
from __future__ import annotations

import argparse
import ast
import collections
import importlib
import os
import sys
import types
import unittest

def _internal_parallel():
    """JAX-internal `pargmax`/`pargmin` (the batching tests call them), composed of impl's
    public collectives: the lowest index along the axis holding the extreme value."""
    import numpy as np
    import impl.lax as lax
    import impl.numpy as jnp

    def arg_of(x, best, axis_name):
        unset = np.iinfo(np.int32).max
        return lax.pmin(jnp.where(x == best, lax.axis_index(axis_name), unset), axis_name)

    def pargmax(x, axis_name):
        return arg_of(x, lax.pmax(x, axis_name), axis_name)

    def pargmin(x, axis_name):
        return arg_of(x, lax.pmin(x, axis_name), axis_name)

    mod = types.ModuleType("impl_internal_parallel")
    mod.pargmax, mod.pargmin = pargmax, pargmin
    return mod


# JAX module -> impl module that stands in for it (None: a package of proxies only; a
# function: builds the module).
STAND_INS = {
    "jax": "impl",
    "jax.numpy": "impl.numpy",
    "jax.lax": "impl.lax",
    "jax.nn": "impl.nn",
    "jax.random": "impl.random",
    "jax.scipy": "impl.scipy",
    "jax.tree_util": "impl.tree_util",
    "jax.tree": "impl.tree",
    "jax.custom_derivatives": "impl.custom_derivatives",
    "jax.custom_batching": "impl.custom_batching",
    "jax.errors": "impl.errors",
    "jax.ad_checkpoint": "impl.ad_checkpoint",
    "jax.debug": "impl.debug",
    "jax.test_util": "impl.test_util",
    "jax._src": None,
    "jax._src.api": "impl.api",
    "jax._src.core": "impl.core",
    "jax._src.custom_derivatives": "impl.custom_derivatives",
    "jax._src.interpreters": None,
    "jax._src.interpreters.ad": "impl.interpreters.ad",
    "jax._src.interpreters.batching": "impl.interpreters.batching",
    "jax._src.interpreters.partial_eval": "impl.interpreters.partial_eval",
    "jax._src.lax": None,
    "jax._src.lax.parallel": _internal_parallel,
    "jax.interpreters": None,
    "jax.interpreters.ad": "impl.interpreters.ad",
    "jax.interpreters.batching": "impl.interpreters.batching",
    "jax.interpreters.partial_eval": "impl.interpreters.partial_eval",
}

# Names that stay JAX's although their module stands in: a test file defining its own
# primitive registers it in JAX's internal tables (mlir lowerings, batchers), which only
# JAX's Primitive fits; impl's primitives are not registered that way.
KEPT_JAX = {"jax._src.core.Primitive"}

fallbacks: collections.Counter = collections.Counter()


class StandIn(types.ModuleType):
    """A module that answers with impl's attribute, else with JAX's (counted)."""

    def __init__(self, name, impl_mod, jax_mod):
        super().__init__(name)
        self.__dict__["_impl"], self.__dict__["_jax"] = impl_mod, jax_mod
        if hasattr(jax_mod, "__path__"):   # submodules of JAX that impl lacks still import
            self.__dict__["__path__"] = jax_mod.__path__

    def __getattr__(self, attr):
        jax_mod = self.__dict__["_jax"]
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.split(".")[0] in ("jax", "impl"):
            # JAX's and impl's own lazy imports (`from jax import lax` in a function)
            # must keep meaning JAX.
            return getattr(jax_mod, attr)
        if f"{self.__name__}.{attr}" in KEPT_JAX:
            return getattr(jax_mod, attr)
        child = STAND_INS_LOADED.get(f"{self.__name__}.{attr}")
        if child is not None:
            return child
        impl_mod = self.__dict__["_impl"]
        if impl_mod is not None and hasattr(impl_mod, attr):
            return getattr(impl_mod, attr)
        value = getattr(jax_mod, attr)
        if impl_mod is not None and not isinstance(value, types.ModuleType):
            fallbacks[f"{self.__name__}.{attr}"] += 1
        return value


STAND_INS_LOADED: dict = {}


def jax_imports(path):
    """The jax modules a test file imports (to load the real ones before standing in)."""
    names = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.split(".")[0] == "jax")
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] == "jax":
            names.add(node.module)
            for a in node.names:
                names.add(f"{node.module}.{a.name}")
    return names


missing_modules: list = []


def load_jax_modules(test_files):
    """Import the jax modules the test files import, while `jax` is JAX. A module the
    installed JAX lacks (the test file may be newer) becomes an empty placeholder, so
    that only the tests using it fail; it is reported."""
    import jax  # noqa: F401  (JAX first: its test utilities keep the real modules)
    import jax._src.test_util  # noqa: F401
    for path in test_files:
        for name in sorted(jax_imports(path)):
            parent, _, attr = name.rpartition(".")
            try:
                importlib.import_module(name)
            except ImportError:
                if parent and hasattr(importlib.import_module(parent), attr):
                    continue   # an attribute, not a module
                placeholder = types.ModuleType(name)
                sys.modules[name] = placeholder
                setattr(importlib.import_module(parent), attr, placeholder)
                missing_modules.append(name)


def install_stand_ins():
    import jax
    os.environ.setdefault("IMPL_TRACEBACK_FILTERING", "off")   # the error, not a footer
    import impl
    # check_grads of JAX's test utilities would differentiate with JAX, not impl
    import impl.test_util
    jax._src.test_util.check_grads = impl.test_util.check_grads
    for name in sorted(STAND_INS, key=lambda n: n.count(".")):
        impl_name = STAND_INS[name]
        impl_mod = (impl_name() if callable(impl_name) else
                    importlib.import_module(impl_name) if impl_name else None)
        STAND_INS_LOADED[name] = StandIn(name, impl_mod, importlib.import_module(name))
    sys.modules.update(STAND_INS_LOADED)


class Tally(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = []

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.append(test)


def select(module, spec, contains=""):
    cls_name, _, prefix = spec.partition(".")
    cls = getattr(module, cls_name)
    loader = unittest.TestLoader()
    names = [n for n in loader.getTestCaseNames(cls)
             if n.startswith(prefix or "test") and contains in n]
    return cls_name + (f".{prefix}" if prefix else ""), \
        unittest.TestSuite(cls(n) for n in names)


def first_line(err_text):
    lines = [ln for ln in err_text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("selections", nargs="+", help="MODULE:CLASS[.PREFIX]")
    parser.add_argument("--reference", action="store_true", help="run on JAX itself")
    parser.add_argument("-k", dest="contains", default="",
                        help="only the tests whose name contains this text")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--tracebacks", action="store_true",
                        help="print each failure's whole traceback")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.abspath(args.folder))
    files = {s.split(":")[0] for s in args.selections}
    load_jax_modules([os.path.join(args.folder, f + ".py") for f in files])
    if not args.reference:
        install_stand_ins()
    sys.argv = sys.argv[:1]   # absl parses the command line when a test module imports
    totals = [0, 0, 0]
    for spec in args.selections:
        mod_name, _, cls_spec = spec.partition(":")
        module = importlib.import_module(mod_name)
        label, suite = select(module, cls_spec, args.contains)
        stream = open(os.devnull, "w") if not args.verbose else sys.stderr
        result = unittest.TextTestRunner(stream=stream, resultclass=Tally,
                                         verbosity=2 if args.verbose else 0).run(suite)
        failed = result.failures + result.errors
        counts = (len(result.passed), len(failed), len(result.skipped))
        totals = [t + c for t, c in zip(totals, counts)]
        ran = counts[0] + counts[1]
        rate = f"{100 * counts[0] / ran:.1f}%" if ran else "-"
        print(f"{label}: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped "
              f"({rate} of those run)")
        for test, err in sorted(failed, key=lambda f: f[0].id()):
            print(f"  FAIL {test.id().split('.', 1)[1]}: {first_line(err)}")
            if args.tracebacks:
                print("    " + err.replace("\n", "\n    "))
    ran = totals[0] + totals[1]
    print(f"TOTAL: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped "
          f"({100 * totals[0] / max(ran, 1):.1f}% of those run)")
    if missing_modules:
        print("modules the installed JAX lacks (empty placeholders): "
              + ", ".join(missing_modules))
    if fallbacks:
        print("names impl lacks, taken from JAX: " +
              ", ".join(f"{k} ({v})" for k, v in sorted(fallbacks.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
