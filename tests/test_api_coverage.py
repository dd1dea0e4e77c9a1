"""Public names impl shares with JAX: prints the coverage per module and checks
that every shared name is the same kind of thing (module, class, callable) as in JAX."""
from __future__ import annotations

import inspect
import types

import jax
import jax.numpy as jjnp
import jax.scipy.special  # noqa: F401
import jax.scipy.stats  # noqa: F401
from jax import lax as jlax

import impl
import impl.numpy as inp
from impl import lax as ilax

PAIRS = {"impl": (impl, jax), "impl.numpy": (inp, jjnp), "impl.lax": (ilax, jlax),
         "impl.numpy.fft": (inp.fft, jjnp.fft), "impl.numpy.linalg": (inp.linalg, jjnp.linalg)}
PAIRS.update({"impl.scipy.special": (impl.scipy.special, jax.scipy.special),
              "impl.scipy.stats": (impl.scipy.stats, jax.scipy.stats)})
PAIRS["impl.nn"] = (impl.nn, jax.nn)
PAIRS["impl.nn.initializers"] = (impl.nn.initializers, jax.nn.initializers)
PAIRS["impl.scipy.linalg"] = (impl.scipy.linalg, __import__("jax.scipy.linalg").scipy.linalg)


def _public(module):
    return {n for n in dir(module) if not n.startswith("_")}


def coverage():
    """{module: (shared names, JAX's public names, missing names)}"""
    out = {}
    for label, (mine, theirs) in PAIRS.items():
        jax_names = _public(theirs)
        shared = jax_names & _public(mine)
        out[label] = (shared, jax_names, sorted(jax_names - shared))
    return out


def _kind(obj):
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "class"
    return "callable" if callable(obj) else "value"


def test_print_coverage():
    for label, (shared, jax_names, missing) in coverage().items():
        print(f"{label}: {len(shared)} of {len(jax_names)} JAX names "
              f"({100 * len(shared) / len(jax_names):.0f}%); missing: {' '.join(missing)}")
    assert all(shared for shared, _, _ in coverage().values())


def test_shared_names_are_the_same_kind_as_in_jax():
    wrong = []
    for label, (mine, theirs) in PAIRS.items():
        for name in sorted(_public(theirs) & _public(mine)):
            a, b = _kind(getattr(mine, name)), _kind(getattr(theirs, name))
            # a JAX function object may be a class instance with __call__ (ufuncs)
            if a != b and {a, b} != {"callable", "class"}:
                wrong.append(f"{label}.{name}: impl has a {a}, JAX a {b}")
    assert not wrong, wrong


def test_impl_submodules_are_impl_modules():
    import importlib
    for name in ("impl.tree_util", "impl.tree", "impl.numpy", "impl.lax", "impl.errors"):
        module = importlib.import_module(name)
        assert module.__name__ == name and module.__file__.startswith(
            impl.__file__.rsplit("/", 1)[0])


def test_numpy_all_exports_only_jax_names():
    for mine, theirs in ((inp, jjnp), (inp.fft, jjnp.fft)):
        exported = set(mine.__all__)
        assert exported <= _public(theirs), sorted(exported - _public(theirs))
        assert all(hasattr(mine, n) for n in exported)
        # and everything impl shares with JAX is exported
        assert exported == _public(mine) & _public(theirs), sorted(
            (_public(mine) & _public(theirs)) - exported)
