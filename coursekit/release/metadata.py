"""The nbgrader cell metadata the book's notebooks carry (the course directory that uses it is
written by ``nbgrader.py``).

    python -m coursekit.release metadata book/*.ipynb [--check]

The metadata follows from the exercise conventions (``outline.py``), so it is written by
``apply_metadata``, never by hand, and ``tests/test_release_nbgrader.py`` checks that every
book notebook carries exactly what it would write. Per exercise labelled ``ex-x`` with n stars:

* the statement cell (markdown): read-only, ``grade_id`` ``ex-x-statement``;
* each solution cell: ``solution: true``, ``grade_id`` ``ex-x-solution`` (``-solution-2``...);
* each check cell: autograded tests, ``locked``, ``points`` n, ``grade_id`` ``ex-x-check``;
* each given cell (e.g. the experiment of a predict-then-measure exercise): read-only,
  ``ex-x-given``, so that autograding runs the instructor's experiment, not an edited one;
* each answer cell (markdown starting with ``**Your answer:**``): a manually graded answer,
  ``ex-x-answer``, n points (the rubric says how to give them).

nbgrader reads ``### BEGIN SOLUTION`` / ``### END SOLUTION`` (its own markers) only in cells
marked ``solution: true``; in any other cell it refuses the notebook with "Solution region
detected in a non-solution cell". That is why the book's notebooks were refused: they carried
no nbgrader metadata at all.
"""

from __future__ import annotations

import copy
import re
import symtable
from pathlib import Path

import nbformat

from .markers import BEGIN, ReleaseError
from .outline import read_exercises, stray_markers

SCHEMA_VERSION = 3
_GRADE_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_SECTION = re.compile(r"^## ", re.MULTILINE)
_EXERCISES = re.compile(r"^## Exercises\b", re.MULTILINE)
SETUP_TAGS = ("colab-setup", "exercise-setup")


# --------------------------------------------------------------------------------------
# The metadata of the book's notebooks
# --------------------------------------------------------------------------------------
def _meta(grade_id: str, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": SCHEMA_VERSION,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    return meta


def _numbered(label: str, kind: str, n: int) -> str:
    return f"{label}-{kind}" + (f"-{n}" if n > 1 else "")


def expected_metadata(nb, name: str) -> dict[int, dict]:
    """{cell index: nbgrader metadata} for ``nb`` under the conventions; a ReleaseError names
    what stands in the way (a missing label, a solution outside an exercise, ...)."""
    stray = stray_markers(nb)
    if stray:
        raise ReleaseError(f"{name}: {stray[0]}")
    metadata: dict[int, dict] = {}
    for ex in read_exercises(nb):
        where = f"{name}: the exercise {ex.title!r} (cell {ex.statement})"
        if not ex.label or not _GRADE_ID.match(ex.label):
            raise ReleaseError(f"{where} needs a :label: of letters, digits, '-' and '_'.")
        if ex.stars is None:
            raise ReleaseError(
                f"{where}: its title must end with ' · ★★ · core · 15 min'; the stars are its points."
            )
        metadata.setdefault(ex.statement, _meta(f"{ex.label}-statement", locked=True))
        for n, i in enumerate(ex.solutions, 1):
            metadata[i] = _meta(_numbered(ex.label, "solution", n), solution=True)
        for n, i in enumerate(ex.checks, 1):
            metadata[i] = _meta(_numbered(ex.label, "check", n), grade=True, locked=True, points=ex.stars)
        for n, i in enumerate(ex.given, 1):
            metadata[i] = _meta(_numbered(ex.label, "given", n), locked=True)
        for n, i in enumerate(ex.answers, 1):  # written, graded by hand (a manually graded answer)
            metadata[i] = _meta(_numbered(ex.label, "answer", n), solution=True, grade=True, points=ex.stars)
    for index, cell in enumerate(nb.cells):
        if (
            cell.cell_type == "code"
            and index not in metadata
            and (BEGIN in cell.source or re.search(r"\bcheck_(?!live\b)\w+\s*\(", cell.source))
        ):
            raise ReleaseError(
                f"{name}, cell {index}: a solution or a check outside any "
                "exercise: put it after its {exercise} statement."
            )
    return metadata


def apply_metadata(nb, name: str) -> int:
    """Write the nbgrader metadata into ``nb`` (in place), removing any other; return the number
    of cells marked. Deterministic: applying it twice changes nothing."""
    metadata = expected_metadata(nb, name)
    for index, cell in enumerate(nb.cells):
        cell.metadata.pop("nbgrader", None)
        if index in metadata:
            cell.metadata["nbgrader"] = metadata[index]
    return len(metadata)


def stale_metadata(nb, name: str) -> list[str]:
    """The cells whose nbgrader metadata differs from what ``apply_metadata`` writes."""
    metadata = expected_metadata(nb, name)
    return [
        f"{name}, cell {i}: has {cell.metadata.get('nbgrader')}, expected {metadata.get(i)}"
        for i, cell in enumerate(nb.cells)
        if cell.metadata.get("nbgrader") != metadata.get(i)
    ]


def write_metadata(paths: list[Path], check: bool = False) -> list[str]:
    """Apply the metadata to each notebook file (or, with ``check``, only report stale ones)."""
    problems = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        stale = stale_metadata(nb, str(path))
        if check:
            problems += stale
        elif stale:
            apply_metadata(nb, str(path))
            nbformat.write(nb, path)
    return problems


# --------------------------------------------------------------------------------------
# "Exercises only": the Exercises section and the set-up cells it needs
# --------------------------------------------------------------------------------------
def exercises_only(nb, name: str):
    """A notebook with the chapter's ``## Exercises`` section and, before it, the earlier code
    cells that define the names it uses (found by reading the code, transitively), the cells
    tagged ``colab-setup`` or ``exercise-setup``, and a markdown cell saying so."""
    start = next(
        (i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and _EXERCISES.search(c.source)), None
    )
    if start is None:
        raise ReleaseError(f"{name}: no '## Exercises' section for an exercises-only assignment.")
    section = [copy.deepcopy(nb.cells[start])]
    section[0].source = section[0].source[_EXERCISES.search(section[0].source).start() :]
    for cell in nb.cells[start + 1 :]:
        heading = _SECTION.search(cell.source) if cell.cell_type == "markdown" else None
        if heading:
            if cell.source[: heading.start()].strip():  # e.g. the last solution, then "## ..."
                section.append(copy.deepcopy(cell))
                section[-1].source = cell.source[: heading.start()].rstrip()
            break
        section.append(copy.deepcopy(cell))
    setup = _setup_cells(nb.cells[:start], [c for c in section if c.cell_type == "code"])
    out = copy.deepcopy(nb)
    title = next((c.source.split("\n")[0].lstrip("# ") for c in nb.cells if c.cell_type == "markdown"), name)
    intro = nbformat.v4.new_markdown_cell(
        f"# Exercises: {title}\n\nThe exercises of the chapter, after the {len(setup)} set-up "
        "cells of the chapter they use. Read the chapter first."
    )
    out.cells = [intro] + [copy.deepcopy(nb.cells[i]) for i in setup] + section
    return out


def _setup_cells(before: list, needing: list) -> list[int]:
    """Indices of the cells of ``before`` that define (transitively) what ``needing`` uses."""
    needed: set[str] = set()
    section_defines: set[str] = set()
    for cell in needing:
        defined, used = _names(cell.source)
        needed |= used
        section_defines |= defined
    needed -= section_defines
    chosen = []
    for index in range(len(before) - 1, -1, -1):
        cell = before[index]
        if cell.cell_type != "code":
            continue
        defined, used = _names(cell.source)
        tagged = set(SETUP_TAGS) & set(cell.metadata.get("tags", []))
        if tagged or defined & needed:
            chosen.append(index)
            needed = (needed - defined) | used
    return sorted(chosen)


def _names(source: str) -> tuple[set, set]:
    """(names a cell defines at the top level, global names it uses), magics allowed."""
    import builtins

    from IPython.core.inputtransformer2 import TransformerManager

    try:
        table = symtable.symtable(TransformerManager().transform_cell(source), "<cell>", "exec")
    except SyntaxError:
        return set(), set()
    defined = {
        s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()
    }
    used = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    stack = list(table.get_children())
    while stack:
        child = stack.pop()
        used |= {s.get_name() for s in child.get_symbols() if s.is_global() and s.is_referenced()}
        stack += child.get_children()
    return defined, used - set(dir(builtins))


__all__ = [
    "SCHEMA_VERSION",
    "apply_metadata",
    "exercises_only",
    "expected_metadata",
    "stale_metadata",
    "write_metadata",
]
