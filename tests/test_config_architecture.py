"""ARCHITECTURE.md's chapter table agrees with the notebooks.

For each chapter of _toc.yml the table names its files: the library modules it imports
(course_lib/, ground floor and pages/), the exercises' modules that define the checks it imports
(course_lib/exercises/), the explorers' modules (course_lib/widgets/), the sweeps it loads
(course_lib/sweeps/), the tests that cover it (tests/) and its benchmarks (benchmarks/). The
notebooks are read for their `from course_lib... import ...` statements and `load_sweep("...")`
calls; each column must name exactly what the notebook uses (library, exercises, widgets,
sweeps), every file named must exist, and the benchmarks must include every file that registers
one of the chapter's sweeps.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ("chapter", "library", "exercises", "widgets", "sweeps", "tests", "benchmarks")
FOLDER = {  # where the files of each column are, as the table names them
    "library": ROOT / "course_lib",
    "exercises": ROOT / "course_lib" / "exercises",
    "widgets": ROOT / "course_lib" / "widgets",
    "tests": ROOT / "tests",
    "benchmarks": ROOT / "benchmarks",
}
IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+course_lib[\w.]*[ \t]+import[ \t]+(?:\([^)]*\)|[^\n]*)"
    r"|import[ \t]+course_lib[^\n]*)",
    re.M,
)
LOAD_SWEEP = re.compile(r"load_sweep\(\s*[\"'](\w+)[\"']")


def toc_chapters() -> list[str]:
    """The notebooks of _toc.yml, as book/NN_<slug>.ipynb."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    return [f"{f}.ipynb" for f in files if (ROOT / f"{f}.ipynb").exists()]


def chapter_table(text: str) -> dict[str, dict[str, set[str]]]:
    """The rows of the markdown table whose header starts with "chapter": {notebook: {column: names}}."""
    rows, header = {}, None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = [re.sub(r"\W.*", "", c.strip("` ").lower()) for c in cells]
            continue
        if header[: len(COLUMNS)] != list(COLUMNS) or set(cells[0]) <= set("-: "):
            continue
        names = [set(re.findall(r"`([^`]+)`", c)) for c in cells]
        (chapter,) = names[0]
        rows[chapter] = dict(zip(COLUMNS[1:], names[1:], strict=True))
    return rows


@cache
def defined_in(package: str) -> dict[str, tuple[str, str]]:
    """{name: (column, file)} for what course_lib/<package>/*.py offers: its top-level definitions
    (def, class, assignment), and the names it takes from the ground floor (`from ..rnn_gradients
    import jacobian_norms` -> ("library", "rnn_gradients.py"))."""
    found, taken = {}, {}
    for path in sorted((ROOT / "course_lib" / package).glob("*.py")):
        if path.name == "__init__.py":  # it gathers the names of the package's modules
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                found[node.name] = (package, path.name)
            elif isinstance(node, ast.Assign):
                found |= {t.id: (package, path.name) for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.ImportFrom) and node.level == 2 and node.module:
                file = node.module.replace(".", "/") + ".py"
                taken |= {alias.asname or alias.name: ("library", file) for alias in node.names}
    return taken | found


def module_file(dotted: str) -> str | None:
    """course_lib.pages.viz -> "pages/viz.py" (relative to course_lib/), None if not a module."""
    parts = dotted.split(".")[1:]
    path = ROOT.joinpath("course_lib", *parts)
    if path.with_suffix(".py").is_file():
        return "/".join(parts) + ".py"
    return None


def uses(notebook: Path) -> dict[str, set[str]]:
    """What the notebook's code cells take from course_lib: {column: file names}, and its sweeps."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    used = {column: set() for column in COLUMNS[1:5]}
    used["sweeps"] = set(LOAD_SWEEP.findall(code))
    for statement in IMPORT.findall(code):
        for node in ast.parse(statement.strip()).body:
            for module, name in _imported(node):
                _place(used, module, name)
    return used


def _imported(node):
    """(module, name) pairs of an import statement: name is None for `import course_lib.x`."""
    if isinstance(node, ast.Import):
        return [(alias.name, None) for alias in node.names]
    return [(node.module, alias.name) for alias in node.names]


def _place(used, module, name):
    """Put what `from module import name` brings in the column it belongs to."""
    package = module.split(".")[1] if "." in module else None
    if package in ("widgets", "exercises") and module.count(".") == 1:
        where = defined_in(package).get(name)
        assert where, f"{module}.{name}: defined in no module of course_lib/{package}/"
        used[where[0]].add(where[1])
    elif package in ("widgets", "exercises"):
        used[package].add(module.split(".")[2] + ".py")
    elif name is not None and module_file(f"{module}.{name}"):
        used["library"].add(module_file(f"{module}.{name}"))  # from course_lib(.pages) import rnn
    elif module_file(module):
        used["library"].add(module_file(module))
    else:
        raise AssertionError(f"from {module} import {name}: not a course_lib module")


@cache
def table() -> dict[str, dict[str, set[str]]]:
    return chapter_table((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))


@cache
def registered_in() -> dict[str, str]:
    """{sweep: the benchmarks/bench_*.py file whose SWEEPS registers it}."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return {
            name: path.name
            for path in sorted((ROOT / "benchmarks").glob("bench_*.py"))
            for name in getattr(importlib.import_module(path.stem), "SWEEPS", {})
        }
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_the_table_has_one_row_per_chapter_of_the_toc():
    assert sorted(table()) == sorted(toc_chapters()), (sorted(table()), toc_chapters())


@pytest.mark.parametrize("chapter", toc_chapters())
def test_the_row_names_what_the_notebook_imports_and_loads(chapter):
    row, used = table()[chapter], uses(ROOT / chapter)
    for column in ("library", "exercises", "widgets", "sweeps"):
        print(f"{chapter} {column}: the notebook uses {sorted(used[column])}, the row {sorted(row[column])}")
        assert row[column] == used[column], (chapter, column, sorted(row[column] ^ used[column]))


@pytest.mark.parametrize("chapter", toc_chapters())
def test_every_file_the_row_names_exists(chapter):
    row = table()[chapter]
    missing = [
        f"{column}: {name}"
        for column, folder in FOLDER.items()
        for name in sorted(row[column])
        if not (folder / name).is_file()
    ]
    missing += [
        f"sweeps: {name}"
        for name in sorted(row["sweeps"])
        if not (ROOT / "course_lib" / "sweeps" / f"{name}.json").is_file()
    ]
    assert not missing, (chapter, missing)
    assert row["tests"], f"{chapter}: no test named"


@pytest.mark.parametrize("chapter", toc_chapters())
def test_the_benchmarks_include_every_file_that_registers_a_sweep_of_the_chapter(chapter):
    row, where = table()[chapter], registered_in()
    needed = {where[name] for name in row["sweeps"]}
    assert needed <= row["benchmarks"], (chapter, sorted(needed - row["benchmarks"]))


def test_the_reading_of_a_notebook_sees_each_kind_of_import(tmp_path):
    """A planted notebook: the library (ground floor, pages, aliases), a check, an explorer and a sweep."""
    source = (
        "from course_lib import data, train\nfrom course_lib.pages import alignment as L\n"
        "from course_lib.pages.evidence import (glue,\n    summarize)\nfrom course_lib.gpt import GPT\n"
        "import course_lib.pages.sweeps\nfrom course_lib.exercises import check_reach_bias\n"
        "from course_lib.exercises.debugging import suspect_lstm_step\n"
        "from course_lib.widgets import ForgetBiasExplorer\nsweep = load_sweep('charlm_segmenter')\n"
    )
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(json.dumps({"cells": [{"cell_type": "code", "source": source}]}))
    used = uses(notebook)
    assert used["library"] == {
        "data.py",
        "train.py",
        "pages/alignment.py",
        "pages/evidence.py",
        "gpt.py",
        "pages/sweeps.py",
    }, used
    assert used["exercises"] == {"lstm.py", "debugging.py"}, used
    assert used["widgets"] == {"rnn.py"}, used
    assert used["sweeps"] == {"charlm_segmenter"}, used


def test_the_table_reader_reads_a_row():
    text = (
        "| chapter | library (`course_lib/`) | exercises | widgets | sweeps | tests | benchmarks |\n"
        "|---|---|---|---|---|---|---|\n"
        "| `book/01_x.ipynb` | `rnn.py`, `pages/viz.py` | `rnn.py` | | `adding_rnn` | `test_unit_rnn.py` "
        "| |\n"
    )
    row = chapter_table(text)["book/01_x.ipynb"]
    assert row["library"] == {"rnn.py", "pages/viz.py"} and row["widgets"] == set(), row
    assert row["sweeps"] == {"adding_rnn"} and row["tests"] == {"test_unit_rnn.py"}, row
