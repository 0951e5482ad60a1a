"""nbgrader: a course directory for instructors, from the book's chapters or the assignments.

    python -m coursekit.release nbgrader OUT --chapters 05 06 [--exercises-only] [--src ROOT]
    python -m coursekit.release nbgrader OUT --assignments NAME... [--variant SECRET]

The notebooks carry the cell metadata nbgrader reads (``metadata.py`` writes and checks it); the
course directory holds its configuration, the student edition's preprocessor, hidden tests and,
for a private variant, its data.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat

from .markers import HIDDEN_BEGIN, HIDDEN_END, ReleaseError, strip_solution_directives
from .metadata import apply_metadata, exercises_only

# --------------------------------------------------------------------------------------
# The course directory
# --------------------------------------------------------------------------------------
CONFIG = '''"""nbgrader configuration, written by `python -m coursekit.release nbgrader`.

Run nbgrader from this folder: `nbgrader generate_assignment ch05`, then collect the
submissions into submitted/<student>/<assignment>/ and run `nbgrader autograde ch05`.
"""
import os
import sys

# The course's repository: coursekit (this configuration, the hidden tests) and course_lib.
REPOSITORY = {root!r}
sys.path.insert(0, REPOSITORY)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [REPOSITORY, os.environ.get("PYTHONPATH")]))

from nbgrader.converters.generate_assignment import GenerateAssignment  # noqa: E402

from coursekit.release.markers import ANSWER_STUB, BEGIN, END, STUB  # noqa: E402
from coursekit.release.nbgrader_preprocessor import StudentEdition  # noqa: E402

c = get_config()  # noqa: F821 - defined by traitlets when it loads this file
c.CourseDirectory.course_id = {course_id!r}
# The stubs of our student edition, so that both editions give the learner the same cells.
c.ClearSolutions.code_stub = {{"python": STUB}}
c.ClearSolutions.text_stub = ANSWER_STUB
c.ClearSolutions.begin_solution_delimeter = BEGIN
c.ClearSolutions.end_solution_delimeter = END
# First do what our student edition does and nbgrader does not: remove the sphinx-exercise
# solution directives and the cells tagged `solution`, clear the given cells' outputs, tag the
# cells that raise until solved.
c.GenerateAssignment.preprocessors = [
    StudentEdition, *GenerateAssignment.class_traits()["preprocessors"].default()]
# Chapters train small models: give a cell up to 10 minutes when autograding.
c.Execute.timeout = 600
{variant}'''

VARIANT_CONFIG = """
# This course is a private variant (written with --variant): its hidden tests draw their cases
# and held-out sets from this secret. Keep this file (and the course directory) private: the
# students' folders hold only exercise_data/, drawn from a one-way hash of the secret.
os.environ["COURSE_VARIANT_SECRET"] = {secret!r}
"""


README = """# nbgrader course directory

Written by `python -m coursekit.release nbgrader` from the book's notebooks ({mode}). nbgrader
needs course_lib importable: run it from the course's environment (`pip install` the course
repository, or set PYTHONPATH to it) and from this folder.

    nbgrader generate_assignment {first}     # release/{first}/: the student version
    # hand out release/<assignment>/, collect the notebooks into
    # submitted/<student>/<assignment>/<notebook>.ipynb, then:
    nbgrader autograde {first}               # runs every submission; scores in gradebook.db
    nbgrader generate_feedback {first}       # feedback/<student>/<assignment>/*.html

The student version is the student edition of the book (`python -m coursekit.release
student`): the same stubs and the same checks. Each exercise's check cell is an autograded
test worth the exercise's stars; the solution cells are the student's answer cells; the
statement, and any given code (e.g. a predict-then-measure experiment), are read-only.

Two kinds of assignment, one per chapter:

* `chNN`, the whole chapter: what the student reads and runs in the book. Autograding
  re-executes the whole notebook for every student, training included (some chapters train
  small models for up to a minute or two), so allow about the chapter's run time per student.
* `chNN-exercises` (written with `--exercises-only`): the chapter's Exercises section and
  only the set-up cells it needs (found by reading the code: the cells that define the names
  the exercises use; cells tagged `exercise-setup` are always kept). Autograding runs only
  those cells. Students read the chapter in the book and hand in this notebook.

And the multi-part assignments (`--assignments`, the notebooks of `assignments/` in the
course's repository): each builds and trains a model from parts the student writes; its
written answers are graded by hand (the rubric is in the repository's instructor kit).

Hidden tests: each check cell of the source version also runs its checks again on fresh
cases, compared with the reference solutions (between `### BEGIN HIDDEN TESTS` and `### END
HIDDEN TESTS`). nbgrader removes them from the students' version and runs them when it
autogrades, so a function that looks its answers up in the checks' stored data scores 0.
They need the course's repository (coursekit/), which nbgrader_config.py puts on the path.

Variants: a course written with `--variant SECRET` draws the checks' data, the number
answers, the assignments' training and held-out data and the hidden tests from the secret
(each assignment folder carries `exercise_data/`, which the students' release keeps; the
secret itself stays in `nbgrader_config.py`). Keep this directory private.

Autograding runs the students' code: do it in a container or a throw-away account.
"""


def chapter_notebook(src: Path, chapter: str) -> Path:
    """book/NN_*.ipynb for a chapter number NN, or book/PAGE.ipynb for a page's name (a chapter
    of two pages, such as 09, is named by page: 09_transformer, 09_transformer_choices)."""
    page = Path(src) / "book" / f"{chapter}.ipynb"
    found = [page] if page.is_file() else sorted((Path(src) / "book").glob(f"{chapter}_*.ipynb"))
    if len(found) != 1:
        names = ", ".join(p.stem for p in found) or "none"
        raise ReleaseError(
            f"chapter {chapter!r}: expected one book/{chapter}_*.ipynb in {src}, found {len(found)} "
            f"({names}); name a page instead"
        )
    return found[0]


def assignment_name(chapter: str, exercises_only_: bool) -> str:
    return f"ch{chapter}" + ("-exercises" if exercises_only_ else "")


def assignment_notebook(src: Path, name: str) -> Path:
    path = Path(src) / "assignments" / f"{name}.ipynb"
    if not path.is_file():
        known = sorted(p.stem for p in (Path(src) / "assignments").glob("*.ipynb"))
        raise ReleaseError(f"no assignment {name!r} in {src}/assignments (known: {known})")
    return path


def plain_assignment(nb, name: str):
    """An assignment as students open it in Jupyter: its solution directives (explanations for
    self-learners) removed, its MyST markdown rewritten as plain Markdown (the learner edition's
    rules). The solution regions stay: nbgrader's own student version stubs them."""
    from .learner import Page, convert_markdown

    page = Page(name, {})
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = convert_markdown(strip_solution_directives(cell.source)[0], page)
    nb.cells = [c for c in nb.cells if c.cell_type != "markdown" or c.source.strip()]
    return nb


def add_hidden_tests(nb) -> int:
    """Append to each check cell of a Check, an Answer or a Goal the same calls again on the grader's
    fresh cases (coursekit.grading.hidden_cases), between nbgrader's hidden-test markers:
    nbgrader removes them from the students' version and restores them when it autogrades.
    Returns the number of cells changed."""
    from course_lib.exercises import REGISTRY, Answer, Check, Goal

    changed = 0
    for cell in nb.cells:
        if not cell.metadata.get("nbgrader", {}).get("grade") or cell.cell_type != "code":
            continue
        names = set(re.findall(r"\b(check_\w+)\s*\(", cell.source))
        if not names or not any(isinstance(REGISTRY.get(n), (Check, Answer, Goal)) for n in names):
            continue
        body = "\n".join("    " + line if line.strip() else "" for line in cell.source.split("\n"))
        cell.source += (
            f"\n{HIDDEN_BEGIN}\nfrom coursekit.grading import hidden_cases\n\n"
            f"with hidden_cases():\n{body}\n{HIDDEN_END}"
        )
        changed += 1
    return changed


def checks_used(nb) -> list[str]:
    """The names of the Checks and Answers a notebook calls (their data is what a variant
    redraws)."""
    from course_lib.exercises import REGISTRY, Answer, Check

    names = {
        n for c in nb.cells if c.cell_type == "code" for n in re.findall(r"\b(check_\w+)\s*\(", c.source)
    }
    return sorted(n for n in names if isinstance(REGISTRY.get(n), (Check, Answer)))


def write_variant_data(folder: Path, secret: str, names: list[str]) -> dict:
    """Write a variant's ``exercise_data/`` into ``folder``: ``variant.json`` (its public label
    and visible seed) and the data of the checks ``names`` drawn from it. Returns the json."""
    import json
    import os

    from course_lib.exercises import _variant
    from course_lib.exercises._data import _read_file
    from coursekit.grading.data import write_data
    from coursekit.grading.variants import label, visible_seed

    folder.mkdir(parents=True, exist_ok=True)
    info = {"name": label(secret), "seed": visible_seed(secret)}
    (folder / "variant.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    previous = os.environ.get(_variant.ENV)
    os.environ[_variant.ENV] = str(folder)
    try:
        write_data(names, folder)
    finally:
        if previous is None:
            os.environ.pop(_variant.ENV, None)
        else:
            os.environ[_variant.ENV] = previous
        _read_file.cache_clear()
    return info


def write_course(
    src: Path,
    out: Path,
    chapters: list[str] = (),
    exercises_only_: bool = False,
    force: bool = False,
    course_id: str = "rnns-to-transformers",
    assignments: list[str] = (),
    hidden: bool = True,
    variant: str | None = None,
) -> list[Path]:
    """Write an nbgrader course directory: ``nbgrader_config.py`` and, per chapter or
    assignment (a notebook of ``assignments/``), ``source/<assignment>/<notebook>.ipynb`` with
    its metadata applied and (``hidden``) hidden tests in its check cells. Returns the
    notebooks.

    ``variant``: a secret; each assignment folder then gets ``exercise_data/`` (the checks'
    data drawn from it, and ``variant.json``), which the students' release carries, and the
    configuration passes the secret to the grading kernels for the hidden tests
    (``coursekit/grading/variants.py``)."""
    out = Path(out)
    if not chapters and not assignments:
        raise ReleaseError("name at least one chapter (--chapters) or assignment (--assignments)")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise ReleaseError(f"{out} exists and is not empty (use --force to replace it).")
        shutil.rmtree(out)
    sources = [(chapter_notebook(src, c), assignment_name(c, exercises_only_)) for c in chapters]
    sources += [(assignment_notebook(src, a), a) for a in assignments]
    written = []
    for path, assignment in sources:
        nb = nbformat.read(path, as_version=4)
        apply_metadata(nb, path.name)
        if path.parent.name == "assignments":
            nb = plain_assignment(nb, path.name)
        elif exercises_only_:
            nb = exercises_only(nb, path.name)
        if hidden:
            add_hidden_tests(nb)
        if variant is not None:  # the variant's numbers in the statements of the Answers that have some
            from coursekit.grading.variants import vary_statements

            vary_statements(nb, variant)
        dest = out / "source" / assignment / path.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dest)
        if variant is not None:
            write_variant_data(dest.parent / "exercise_data", variant, checks_used(nb))
        written.append(dest)
    root = Path(__file__).resolve().parents[2]
    extra = VARIANT_CONFIG.format(secret=variant) if variant is not None else ""
    (out / "nbgrader_config.py").write_text(
        CONFIG.format(course_id=course_id, root=str(root), variant=extra), encoding="utf-8"
    )
    mode = ", ".join(
        filter(
            None,
            [
                ("exercises only" if exercises_only_ else "whole chapters") if chapters else "",
                "assignments" if assignments else "",
            ],
        )
    )
    (out / "README.md").write_text(README.format(mode=mode, first=written[0].parent.name), encoding="utf-8")
    return written


__all__ = [
    "add_hidden_tests",
    "assignment_name",
    "assignment_notebook",
    "chapter_notebook",
    "checks_used",
    "plain_assignment",
    "write_course",
    "write_variant_data",
]
