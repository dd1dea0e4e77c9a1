"""impl's layers import only downward: the core, the interpreters, the primitives and the
transformations (api) never import the array libraries built on them (numpy, lax, nn,
scipy, random), and random does not import nn (nn's initializers draw from random).
Imports inside functions count: they are dependencies all the same."""
from __future__ import annotations

import ast
import pathlib

import pytest

import impl

ROOT = pathlib.Path(impl.__file__).parent
ARRAY_LIBRARIES = ("impl.numpy", "impl.lax", "impl.nn", "impl.scipy", "impl.random")
BELOW_THE_ARRAY_API = ["core.py", "api.py", "interpreters", "primitives"]


def _module_name(path, root):
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path, root=ROOT):
    """Every module `path` (a file of the package at `root`) imports, anywhere in the
    file, as absolute dotted names."""
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def _files(entries):
    for entry in entries:
        path = ROOT / entry
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _reaches(names, packages):
    return sorted(n for n in names if any(n == p or n.startswith(p + ".") for p in packages))


@pytest.mark.parametrize("path", list(_files(BELOW_THE_ARRAY_API)),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_transformations_never_import_the_array_libraries(path):
    assert _reaches(imported_modules(path), ARRAY_LIBRARIES) == []


def test_random_does_not_import_nn():
    assert _reaches(imported_modules(ROOT / "random.py"), ("impl.nn",)) == []


def test_the_check_sees_imports_inside_functions(tmp_path):
    package = tmp_path / "impl" / "fake"
    package.mkdir(parents=True)
    (package / "mod.py").write_text("def f():\n    from impl.numpy import _core\n"
                                    "    from ..lax import scan\n")
    found = _reaches(imported_modules(package / "mod.py", tmp_path / "impl"), ARRAY_LIBRARIES)
    assert found == ["impl.lax", "impl.lax.scan", "impl.numpy", "impl.numpy._core"]
