"""impl's public signatures against JAX's: no parameter accepted and ignored.

For every public function impl shares with JAX (top level, numpy, lax, nn), each
parameter impl accepts must (a) exist in JAX's signature (a JAX positional-only parameter
may have another name; a JAX `**kwargs` accepts anything), (b) not be a `**kwargs`
catch-all JAX lacks, and (c) be read somewhere in impl's function (its body or a nested
function): a parameter never read has no effect. Parameters that deliberately break a
rule are listed in DELIBERATE with the reason.
"""
from __future__ import annotations

import dis
import inspect
import types

import jax
import jax.numpy as jjnp
import pytest
from jax import lax as jlax

import impl
import impl.numpy as inp
from impl import lax as ilax

MODULES = {"impl": (impl, jax), "impl.numpy": (inp, jjnp), "impl.lax": (ilax, jlax),
           "impl.nn": (impl.nn, jax.nn), "impl.numpy.fft": (inp.fft, jjnp.fft)}
MODULES["impl.nn.initializers"] = (impl.nn.initializers, jax.nn.initializers)
MODULES["impl.scipy.linalg"] = (impl.scipy.linalg, __import__("jax.scipy.linalg").scipy.linalg)

# (module, function, parameter) -> why the rule does not apply.
DELIBERATE = {
    ("impl", "vmap", "chunk_size"):
        "impl goes beyond JAX here: chunked vmap bounds peak memory (tested with vmap)",
    ("impl.numpy", "meshgrid", "copy"):
        "the grids are immutable arrays, so a copy cannot be observed (JAX also returns "
        "equal arrays whatever copy says: the flag only controls buffer reuse)",
}

# SciPy's flags that jax.scipy.linalg itself accepts and deletes unread (its source says
# so: nothing is overwritten in place, compiled code cannot check values); impl does the
# same so that SciPy-style calls run unchanged.
for _fn, _params in {"cho_factor": "overwrite_a check_finite",
                     "cho_solve": "overwrite_b check_finite",
                     "cholesky": "overwrite_a check_finite", "det": "overwrite_a check_finite",
                     "eigh": "overwrite_a overwrite_b turbo check_finite",
                     "inv": "overwrite_a check_finite", "lu": "overwrite_a check_finite",
                     "lu_factor": "overwrite_a check_finite",
                     "lu_solve": "overwrite_b check_finite",
                     "qr": "overwrite_a lwork check_finite",
                     "solve": "overwrite_a overwrite_b debug check_finite",
                     "solve_triangular": "overwrite_b debug check_finite",
                     "svd": "overwrite_a check_finite lapack_driver"}.items():
    for _param in _params.split():
        DELIBERATE[("impl.scipy.linalg", _fn, _param)] = "unused by JAX too (deleted unread)"
for _fn in ("zeros", "ones"):
    DELIBERATE[("impl.nn.initializers", _fn, "key")] = (
        "a constant initializer has the signature of the random ones; JAX ignores key too")

_LOADS = {"LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_FAST_CHECK",
          "LOAD_FAST_AND_CLEAR", "LOAD_FAST_LOAD_FAST"}


def _reads(code: types.CodeType, name: str) -> bool:
    for ins in dis.get_instructions(code):
        if ins.opname in _LOADS and (ins.argval == name or
                                     (isinstance(ins.argval, tuple) and name in ins.argval)):
            return True
    return any(_reads(c, name) for c in code.co_consts if isinstance(c, types.CodeType))


def _shared_functions():
    for label, (mod_i, mod_j) in MODULES.items():
        for name in sorted(dir(mod_i)):
            fi, fj = getattr(mod_i, name), getattr(mod_j, name, None)
            if (name.startswith("_") or fj is None or isinstance(fi, (type, types.ModuleType))
                    or not callable(fi) or not callable(fj)):
                continue
            try:
                si, sj = inspect.signature(fi), inspect.signature(fj)
            except (TypeError, ValueError):   # builtins and ufunc objects without one
                continue
            yield label, name, fi, si, sj


def _positional_in_jax(k, jax_params):
    """JAX takes the k-th argument positionally only (by a positional-only parameter or
    its `*args`), so impl's name for it cannot matter."""
    for j, q in enumerate(jax_params):
        if q.kind is q.VAR_POSITIONAL:
            return True
        if j == k:
            return q.kind is q.POSITIONAL_ONLY
    return False


def _violations(label, name, fi, si, sj):
    jax_params = list(sj.parameters.values())
    jax_names = {p.name for p in jax_params}
    jax_var_kw = any(p.kind is p.VAR_KEYWORD for p in jax_params)
    code = getattr(inspect.unwrap(fi), "__code__", None)
    out = []
    for k, p in enumerate(si.parameters.values()):
        if (label, name, p.name) in DELIBERATE:
            continue
        if p.kind is p.VAR_KEYWORD:
            if not jax_var_kw:
                out.append(f"{label}.{name}(**{p.name}): a catch-all JAX does not have")
            continue
        if p.kind is p.VAR_POSITIONAL:
            continue
        if p.name not in jax_names and not jax_var_kw and not _positional_in_jax(k, jax_params):
            out.append(f"{label}.{name}({p.name}=): JAX has no parameter {p.name!r} "
                       f"(JAX: {sj})")
        if code is not None and not _reads(code, p.name):
            out.append(f"{label}.{name}({p.name}=): accepted but never read")
    return out


SHARED = list(_shared_functions())


@pytest.mark.parametrize("label, name", [(s[0], s[1]) for s in SHARED])
def test_parameters_exist_in_jax_and_have_an_effect(label, name):
    (fi, si, sj), = [s[2:] for s in SHARED if s[:2] == (label, name)]
    assert not _violations(label, name, fi, si, sj)


def test_deliberate_exceptions_are_still_needed():
    """Every listed exception names a real parameter that would otherwise be reported."""
    by_key = {(s[0], s[1]): s for s in SHARED}
    for label, name, param in list(DELIBERATE):
        label_, name_, fi, si, sj = by_key[(label, name)]
        assert param in si.parameters, (label, name, param)
        saved = DELIBERATE.pop((label, name, param))
        try:
            assert _violations(label, name, fi, si, sj), (label, name, param)
        finally:
            DELIBERATE[(label, name, param)] = saved


def test_the_checker_catches_an_ignored_and_an_unknown_parameter():
    """Negative test: a function with an ignored parameter and a made-up one is caught."""
    def reshape(a, shape, order="C", *, sloppy=False, **unused):
        return jjnp.reshape(a, shape)

    found = _violations("impl.numpy", "reshape", reshape, inspect.signature(reshape),
                        inspect.signature(jjnp.reshape))
    assert any("order=): accepted but never read" in v for v in found)
    assert any("no parameter 'sloppy'" in v for v in found)
    assert any("**unused" in v for v in found)
