"""No import circle inside course_lib, nor inside coursekit (issue 40): every import counts, those
inside a function included (a lazy import is how a circle hides), relative imports resolved.

A circle means two modules that cannot be read, tested or moved one without the other; the
usual cure is to move the piece both need into a third module that both import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_config_structure import find_circle  # the circle finder, tested there

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("course_lib", "coursekit")


def module_name(path: Path) -> str:
    """``course_lib/exercises/a2.py`` -> ``course_lib.exercises.a2`` (a package: its folder)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports, anywhere in its code (a function's body
    included). ``from .a import b`` in package ``p`` imports ``p.a.b`` if that is a module, else
    ``p.a``; so ``from . import b`` is an import of ``p.b``, not of the package ``p``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return (found & modules) - {name}


def import_graph(package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports."""
    paths = {module_name(p): p for p in (ROOT / package).rglob("*.py")}
    return {name: imported_modules(path, set(paths)) for name, path in paths.items()}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(package):
    graph = import_graph(package)
    print(f"{package}: {len(graph)} modules, {sum(map(len, graph.values()))} imports between them")
    assert len(graph) > 10, f"{package}: found only {len(graph)} modules"
    circle = find_circle(graph)
    assert circle is None, f"{package} has an import circle: {' -> '.join(circle)}"


def test_a_lazy_import_counts_and_closes_a_circle(tmp_path, monkeypatch):
    """The outline <-> student circle this test was written against: one side imported the other
    inside a function. ``from . import files`` is an import of the module files, not of the
    package."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .student import release\n")
    (pkg / "outline.py").write_text("def leaks():\n    from .student import release\n    return release\n")
    (pkg / "student.py").write_text("from .outline import leaks\nfrom . import files\n")
    (pkg / "files.py").write_text("import os\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    graph = import_graph("pkg")
    assert graph == {
        "pkg": {"pkg.student"},
        "pkg.outline": {"pkg.student"},
        "pkg.student": {"pkg.outline", "pkg.files"},
        "pkg.files": set(),
    }
    circle = find_circle(graph)
    assert circle[0] == circle[-1] and sorted(circle[1:]) == ["pkg.outline", "pkg.student"]
    (pkg / "outline.py").write_text("def leaks():\n    return None\n")
    assert find_circle(import_graph("pkg")) is None
