"""Editions of the book, written from the instructor edition (the repository itself).

    python -m coursekit.release student OUTDIR [--src REPO_ROOT] [--force]
    python -m coursekit.release learner OUTDIR [--student] [--src REPO_ROOT] [--force]
    python -m coursekit.release nbgrader OUTDIR --chapters 05 06 [--exercises-only]
    python -m coursekit.release nbgrader OUTDIR --assignments NAME... [--variant SECRET]
    python -m coursekit.release answer-key OUTDIR [--variant SECRET]  # what stays private
    python -m coursekit.release metadata NOTEBOOK... [--check]     # nbgrader cell metadata
    python -m coursekit.release exercises NOTEBOOK...              # labels, hints, leaks

Modules: `markers` (solution regions and directives), `files` (what an edition copies, the
toc), `student` (the student edition), `learner` (the learner edition: plain Markdown),
`outline` (the exercises of a notebook), `nbgrader`
(the cell metadata and the nbgrader course directory; `nbgrader_preprocessor` is imported by
nbgrader's configuration only), `answer_key` (the instructor's private material). The
student edition is described below.

The instructor edition is the repository itself. The student edition is a copy of the book
sources (``_config.yml``, ``_toc.yml``, ``book/``, every ``*.bib`` at the root and every path
named in ``_config.yml`` that exists, except under ``exclude_patterns``; never ``.git``,
``.venv``, ``node_modules`` folders, ``_build`` or ``.ipynb_checkpoints``) in which:

* in code cells, each region between a ``### BEGIN SOLUTION`` line and a ``### END SOLUTION``
  line (markers included) becomes ``raise NotImplementedError(...)`` at the indentation of the
  BEGIN line; those cells lose their outputs and execution count, and their ``hide-input`` tag
  (the instructor site folds the solution away; the student must see the stub);
* code cells tagged ``solution`` are dropped;
* sphinx-exercise solutions are dropped from markdown: ``{solution}`` directives (backtick or
  colon fences) with their content, and everything from a ``{solution-start}`` directive to
  the matching ``{solution-end}`` directive, including whole cells in between; a markdown cell
  left empty is dropped;
* check cells (code calling ``check_...(``) are kept, with outputs cleared;
* check cells, and cells whose stub runs at the top level, get the ``raises-exception`` tag:
  until the student writes the code they raise ``ExerciseNotAttempted`` /
  ``NotImplementedError``, and the tag tells Jupyter tools that this error is expected:
  nbclient and so Jupyter Book's execution (the student site is built with the book's
  ``allow_errors: false`` and ``-W``, so any *other* error still fails the build), nbval, and
  the notebook front ends, whose "Run All" is meant to go on past such a cell (the classic
  Notebook and JupyterLab >= 1.0 read the tag). ``execute.allow_errors: true`` in the student
  ``_config.yml`` would also have let the build pass, but it hides real errors;
* ``.md`` pages under ``book/`` get the same treatment as markdown cells (and solution regions);
* instructor-only pages, ``book/instructor_*`` (e.g. the instructor guide), are left out, and
  ``_toc.yml`` loses their entries (a part left empty is removed).

See CONTRIBUTING.md for the author conventions.
"""

from .files import book_files, find_root, is_instructor_only, release_toc
from .markers import (
    BEGIN,
    END,
    HIDE_INPUT_TAG,
    RAISES_TAG,
    SOLUTION_TAG,
    STUB,
    ReleaseError,
    strip_solution_directives,
    stub_solutions,
)
from .student import Stats, release_notebook, release_page, release_student

__all__ = [
    "BEGIN",
    "END",
    "HIDE_INPUT_TAG",
    "RAISES_TAG",
    "SOLUTION_TAG",
    "STUB",
    "ReleaseError",
    "Stats",
    "book_files",
    "find_root",
    "is_instructor_only",
    "release_notebook",
    "release_page",
    "release_student",
    "release_toc",
    "strip_solution_directives",
    "stub_solutions",
]
