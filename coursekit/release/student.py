"""The student edition: solution regions become stubs, solution directives go, checks stay.

See the package docstring for every rule.
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass, fields
from pathlib import Path

import nbformat

from .files import book_files, prepare_out, release_toc
from .markers import (
    _CHECK_CALL,
    ANSWER_STUB,
    HIDE_INPUT_TAG,
    RAISES_TAG,
    SOLUTION_TAG,
    STUB,
    ReleaseError,
    strip_hidden_tests,
    strip_solution_directives,
    stub_solutions,
)
from .outline import read_exercises


@dataclass
class Stats:
    notebooks: int = 0
    pages: int = 0
    regions: int = 0
    directives: int = 0
    cells_dropped: int = 0
    checks_cleared: int = 0
    given_cleared: int = 0

    def __iadd__(self, other: Stats) -> Stats:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    def summary(self) -> str:
        return (
            f"{self.notebooks} notebooks and {self.pages} markdown pages processed: "
            f"{self.regions} solution regions stubbed, {self.directives} solution directives "
            f"removed, {self.cells_dropped} solution cells dropped, "
            f"{self.checks_cleared} check cells cleared, {self.given_cleared} given cells of "
            "exercises cleared."
        )


# --------------------------------------------------------------------------------------
# Notebooks and pages
# --------------------------------------------------------------------------------------
def release_notebook(nb: nbformat.NotebookNode, name: str, stub: bool = True) -> Stats:
    """Turn ``nb`` (in place) into its student version. ``stub=False`` does everything but
    replace the solution regions (nbgrader's ClearSolutions does that, see ``nbgrader.py``).

    The given cells of an exercise (e.g. the experiment of a predict-then-measure exercise)
    lose their outputs: the learner predicts before the page shows the measurement."""
    stats, kept, in_gate = Stats(notebooks=1), [], False
    given, answers = _given_and_answers(nb)
    for index, cell in enumerate(nb.cells):
        if (
            index in given
            and cell.cell_type == "code"
            and (cell.get("outputs") or cell.get("execution_count"))
        ):
            cell.outputs, cell.execution_count = [], None
            stats.given_cleared += 1
        if index in answers:
            cell.source = ANSWER_STUB  # the written answer goes; the student writes theirs
        if cell.cell_type == "markdown":
            was_in_gate = in_gate
            cell.source, removed, in_gate = strip_solution_directives(cell.source, in_gate)
            stats.directives += removed
            drop = bool(removed or was_in_gate) and not cell.source.strip()
        else:
            drop = in_gate
        if drop or SOLUTION_TAG in cell.get("metadata", {}).get("tags", []):
            stats.cells_dropped += 1
            continue
        if cell.cell_type == "code":
            _release_code_cell(cell, f"{name}, cell {index} (id {cell.get('id', '?')})", stats, stub)
        kept.append(cell)
    if in_gate:
        raise ReleaseError(f"{name}: a '{{solution-start}}' has no matching '{{solution-end}}'.")
    nb.cells = kept
    return stats


def _given_and_answers(nb) -> tuple[set, set]:
    """The given cells and the answer cells of the exercises: read from the conventions, or from
    the nbgrader metadata once the markdown is plain (an assignment as nbgrader gets it)."""
    exercises = read_exercises(nb)
    given = {i for ex in exercises for i in ex.given}
    answers = {i for ex in exercises for i in ex.answers}
    for i, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if "-given" in meta.get("grade_id", ""):
            given.add(i)
        if cell.cell_type == "markdown" and meta.get("solution") and meta.get("grade"):
            answers.add(i)
    return given, answers


def _runs_top_level_code(source: str) -> bool:
    """True when the cell does more than define and import: its top-level code may call one of
    the functions whose body was replaced by a stub (which raises until solved)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    return any(not isinstance(node, definitions) for node in body)


def _release_code_cell(cell: nbformat.NotebookNode, where: str, stats: Stats, stub: bool = True) -> None:
    stubbed, regions = stub_solutions(strip_hidden_tests(cell.source), where)
    if stub:
        cell.source = stubbed
    stats.regions += regions
    is_check = bool(_CHECK_CALL.search(stubbed))
    if regions or is_check:
        cell.outputs, cell.execution_count = [], None
        stats.checks_cleared += is_check
    old_tags = list(cell.get("metadata", {}).get("tags", []))
    tags = [t for t in old_tags if t != HIDE_INPUT_TAG] if regions else list(old_tags)
    calls_a_stub = regions and _runs_top_level_code(stubbed)  # e.g. print(stubbed_function())
    if (is_check or calls_a_stub or STUB in stubbed.split("\n")) and RAISES_TAG not in tags:
        tags.append(RAISES_TAG)  # a check, or a stub that runs: raises until solved
    if tags != old_tags:
        cell.setdefault("metadata", {})["tags"] = tags


def release_page(text: str, name: str) -> tuple[str, Stats]:
    """The student version of a MyST markdown page."""
    text, removed, in_gate = strip_solution_directives(text)
    if in_gate:
        raise ReleaseError(f"{name}: a '{{solution-start}}' has no matching '{{solution-end}}'.")
    text, regions = stub_solutions(text, name)
    return text, Stats(pages=1, directives=removed, regions=regions)


def release_student(src: Path, out: Path, force: bool = False) -> Stats:
    """Write the student edition of the book in ``src`` to ``out``; return what was done."""
    src, out = prepare_out(src, out, "student edition", force)
    stats = Stats()
    for rel in book_files(src):
        stats += _release_file(src / rel, out / rel, rel)
    return stats


def _release_file(path: Path, dest: Path, rel: Path) -> Stats:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if rel == Path("_toc.yml"):
        dest.write_text(release_toc(path.read_text(encoding="utf-8")), encoding="utf-8")
        return Stats()
    if rel.parts[0] == "book" and path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        stats = release_notebook(nb, str(rel))
        nbformat.write(nb, dest)
        return stats
    if rel.parts[0] == "book" and path.suffix == ".md":
        text, stats = release_page(path.read_text(encoding="utf-8"), str(rel))
        dest.write_text(text, encoding="utf-8")
        return stats
    shutil.copy2(path, dest)
    return Stats()
