"""Run asv benchmark classes outside asv (pytest-benchmark, ratios script).

asv discovers classes by method prefix; this module does the same so the
other front-ends reuse the exact benchmark bodies instead of a copy.
"""

import importlib
import inspect
import itertools
import pkgutil
from dataclasses import dataclass

import benchmarks

PREFIXES = ("time_", "peakmem_", "track_")


@dataclass(frozen=True)
class Case:
    """One asv benchmark at one parameter combination."""

    module: str
    cls: type
    method: str
    params: tuple
    param_names: tuple

    @property
    def name(self):
        return f"{self.cls.__name__}.{self.method}"

    @property
    def id(self):
        return f"{self.name}[{'-'.join(map(str, self.params))}]"

    def param(self, name, default=None):
        if name in self.param_names:
            return self.params[self.param_names.index(name)]
        return default

    def with_param(self, name, value):
        """The same case with one parameter replaced (e.g. backend)."""
        params = list(self.params)
        params[self.param_names.index(name)] = value
        return Case(self.module, self.cls, self.method, tuple(params), self.param_names)

    def _args(self, obj):
        # asv passes setup_cache's return value first when a class has one.
        if hasattr(obj, "setup_cache"):
            if not hasattr(obj, "_harness_cache"):
                obj._harness_cache = obj.setup_cache()
            return (obj._harness_cache, *self.params)
        return self.params

    def instance(self):
        """A set-up benchmark object; raises NotImplementedError to skip."""
        obj = self.cls()
        setup = getattr(obj, "setup", None)
        if setup is not None:
            setup(*self._args(obj))
        return obj

    def teardown(self, obj):
        teardown = getattr(obj, "teardown", None)
        if teardown is not None:
            teardown(*self._args(obj))

    def bound(self, obj):
        """A zero-argument callable running the benchmark body once."""
        method = getattr(obj, self.method)
        args = self._args(obj)
        return lambda: method(*args)


def bench_modules():
    """Import every ``benchmarks.bench_*`` module; broken ones are reported."""
    modules, errors = [], {}
    for info in pkgutil.iter_modules(benchmarks.__path__):
        if not info.name.startswith("bench_"):
            continue
        name = f"benchmarks.{info.name}"
        try:
            modules.append(importlib.import_module(name))
        except Exception as exc:  # someone else's module mid-edit
            errors[name] = exc
    return modules, errors


def iter_cases(prefixes=PREFIXES):
    """Every (class, method, parameter combination) asv would run."""
    modules, _ = bench_modules()
    for module in modules:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or cls.__name__.startswith("_"):
                continue
            methods = [m for m in dir(cls) if m.startswith(prefixes)]
            if not methods:
                continue
            params = getattr(cls, "params", [])
            names = tuple(getattr(cls, "param_names", []))
            if params and not isinstance(params[0], (list, tuple)):
                params = [params]  # asv's single-parameter shorthand
            combos = list(itertools.product(*params)) if params else [()]
            for method in sorted(methods):
                for combo in combos:
                    yield Case(module.__name__, cls, method, tuple(combo), names)
