"""Every module a reader may open is at most 450 lines (issue 40; the limit CONTRIBUTING.md and
pyproject.toml declare): course_lib, coursekit, benchmarks and tools. A module that grows past it
is split where its parts separate (a model and its trainer, records and the harness they run),
not squeezed."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("course_lib", "coursekit", "benchmarks", "tools")
LIMIT = 450


def module_lengths() -> dict[str, int]:
    """Lines of every .py file under FOLDERS, by path relative to the repository."""
    return {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
    }


def test_every_module_is_at_most_450_lines():
    lengths = module_lengths()
    assert len(lengths) > 100, f"found only {len(lengths)} modules under {FOLDERS}"
    largest = sorted(lengths.items(), key=lambda item: -item[1])
    print("largest modules:", ", ".join(f"{path} {n}" for path, n in largest[:8]))
    over = [f"{path} ({n} lines)" for path, n in largest if n > LIMIT]
    assert not over, f"{len(over)} module(s) over {LIMIT} lines: " + ", ".join(over)
