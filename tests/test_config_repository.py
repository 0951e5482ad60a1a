"""Repository habits: ruff clean (lint and format), the pre-commit configuration, the licence,
the changelog, and every dependency of course_lib declared."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
RUFF = Path(sys.executable).parent / "ruff"


def _pins() -> dict[str, str]:
    return dict(
        line.split("==", 1) for line in (ROOT / "requirements.txt").read_text().split() if "==" in line
    )


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]], ids=["check", "format"])
def test_ruff_is_clean(command):
    assert RUFF.exists(), f"{RUFF} is missing: ruff is pinned in requirements.txt"
    run = subprocess.run([str(RUFF), *command], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, f"ruff {' '.join(command)}:\n{run.stdout[-6000:]}{run.stderr}"


def test_pre_commit_runs_the_pinned_ruff():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    ruff = [r for r in config["repos"] if r["repo"].endswith("/ruff-pre-commit")]
    assert ruff and ruff[0]["rev"] == f"v{_pins()['ruff']}"
    assert {h["id"] for h in ruff[0]["hooks"]} == {"ruff-check", "ruff-format"}


def test_licence_is_mit_as_the_readme_and_pyproject_say():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Permission is hereby granted, free of charge" in text
    assert PYPROJECT["project"]["license"] == {"text": "MIT"}
    assert re.search(r"^## Licence\s+MIT", (ROOT / "README.md").read_text(), re.M)


def test_changelog_keeps_a_changelog():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog") and "keepachangelog.com" in text
    assert "## [Unreleased]" in text
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", text, re.M)
    assert PYPROJECT["project"]["version"] in releases


def _third_party_imports() -> dict[str, list[str]]:
    """{top-level module: [files importing it]} of course_lib, outside the standard library."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "course_lib").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("course_lib", "__future__"):
                    found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_import_of_course_lib_is_a_declared_dependency():
    """A dependency or an extra's (myst-nb is the book build's, under extra "book"; nbgrader the
    instructors', under "grading"; course_lib works without either)."""
    extras = PYPROJECT["project"].get("optional-dependencies", {})
    declared = {
        _canon(re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0])
        for dep in [*PYPROJECT["project"]["dependencies"], *(dep for deps in extras.values() for dep in deps)]
    }
    distributions = importlib.metadata.packages_distributions()
    imports = _third_party_imports()
    assert {"torch", "numpy"} <= set(imports)
    missing = {}
    for module, files in imports.items():
        dists = {_canon(d) for d in distributions.get(module, [module])}
        if not dists & declared:
            missing[module] = (sorted(dists), files[:3])
    assert not missing, f"imported by course_lib but not in pyproject's dependencies: {missing}"
