"""nbgrader (issue 13, Deliver 5): the cell metadata the notebooks carry, the course directory,
and a round trip through REAL nbgrader (generate_assignment, autograde).

generate_assignment runs on two whole chapters, read from book/ (chapters 05 and 06 carry their
labels, metadata and a predict-then-measure exercise); autograde on the exercises-only
assignments of 05, 11 and 12. Set ROUND_TRIP_FROM_BOOK = False to run it on
copies labelled here instead (with the toy predict-then-measure exercise appended to 05).
"""

import ast
import copy
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from toy_chapter import toy_chapter

from course_lib.exercises import REGISTRY, Check
from coursekit.release.__main__ import main
from coursekit.release.markers import BEGIN, END, RAISES_TAG, ReleaseError
from coursekit.release.metadata import apply_metadata, exercises_only, expected_metadata, stale_metadata
from coursekit.release.nbgrader import assignment_name, chapter_notebook, write_course
from coursekit.release.outline import read_exercises
from coursekit.release.student import release_notebook

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "book").glob("[0-9][0-9]_*.ipynb"))
ROUND_TRIP_FROM_BOOK = True
ROUND_TRIP_CHAPTERS = ["05", "06"]
# autograded: chapter 5, the tokens chapter (issue 25) and the modern decoder (issue 37)
ROUND_TRIP_EXERCISES = ["05", "11", "12"]


def meta(grade_id, solution=False, grade=False, locked=False, points=None):
    out = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    return out if points is None else {**out, "points": points}


# ---- the metadata tool ---------------------------------------------------------------------
def test_metadata_of_every_kind_of_cell():
    nb = toy_chapter()
    assert apply_metadata(nb, "toy") == 7
    got = {i: c.metadata["nbgrader"] for i, c in enumerate(nb.cells) if "nbgrader" in c.metadata}
    assert got == {
        5: meta("ex-causal-statement", locked=True),
        6: meta("ex-causal-solution", solution=True),
        7: meta("ex-causal-check", grade=True, locked=True, points=1),
        9: meta("ex-saturation-statement", locked=True),
        10: meta("ex-saturation-solution", solution=True),
        11: meta("ex-saturation-given", locked=True),
        12: meta("ex-saturation-check", grade=True, locked=True, points=2),
    }


def test_metadata_is_deterministic_and_replaces_any_other():
    nb = toy_chapter()
    nb.cells[3].metadata["nbgrader"] = meta("stray", locked=True)
    nb.cells[7].metadata["nbgrader"] = meta("old-name", grade=True, points=9)
    assert stale_metadata(nb, "toy")
    apply_metadata(nb, "toy")
    once = nbformat.writes(nb)
    apply_metadata(nb, "toy")
    assert nbformat.writes(nb) == once and stale_metadata(nb, "toy") == []
    assert "nbgrader" not in nb.cells[3].metadata


@pytest.mark.slow  # importing nbgrader takes seconds
def test_metadata_validates_under_nbgrader():
    pytest.importorskip("nbgrader")
    from nbgrader.nbgraderformat import MetadataValidator

    nb = toy_chapter()
    apply_metadata(nb, "toy")
    MetadataValidator().validate_nb(nb)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda nb: nb.cells[5].update(source=nb.cells[5].source.replace(":label: ex-causal\n", "")),
            "needs a :label:",
        ),
        (
            lambda nb: nb.cells[5].update(source=nb.cells[5].source.replace(" · ★ · core · 10 min", "")),
            "the stars are its points",
        ),
        (
            lambda nb: nb.cells.insert(
                3, nbformat.v4.new_code_cell(f"def f():\n    {BEGIN}\n    pass\n    {END}")
            ),
            "a solution or a check outside any exercise",
        ),
        (
            lambda nb: nb.cells.insert(3, nbformat.v4.new_code_cell("check_causal_mask(f)")),
            "a solution or a check outside any exercise",
        ),
        (
            lambda nb: nb.cells.insert(3, nbformat.v4.new_markdown_cell("Put it between BEGIN SOLUTION and")),
            "write the marker alone on its line",
        ),
    ],
)
def test_what_stands_in_the_way_is_named(change, message):
    nb = toy_chapter()
    change(nb)
    with pytest.raises(ReleaseError, match=re.escape(message)):
        expected_metadata(nb, "toy")


def test_cli_writes_and_checks(tmp_path):
    path = tmp_path / "toy.ipynb"
    nbformat.write(toy_chapter(), path)
    assert main(["metadata", "--check", str(path)]) == 1
    assert main(["metadata", str(path)]) == 0
    assert main(["metadata", "--check", str(path)]) == 0
    assert nbformat.read(path, as_version=4).cells[7].metadata["nbgrader"]["points"] == 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name[:2] for p in NOTEBOOKS])
def test_book_notebooks_carry_the_metadata_the_tool_writes(path):
    """Run `python -m coursekit.release metadata book/NN_*.ipynb` after editing exercises."""
    try:
        stale = stale_metadata(nbformat.read(path, as_version=4), path.name)
    except ReleaseError as exc:
        pytest.fail(str(exc), pytrace=False)
    assert not stale, "\n".join(stale[:5]) + f"\n({len(stale)} cells)"


def cells_as_seen(nb):
    return [(c.cell_type, c.source, RAISES_TAG in c.metadata.get("tags", [])) for c in nb.cells]


@pytest.mark.slow  # importing nbgrader's preprocessors takes seconds
def test_nbgrader_preprocessors_give_our_student_edition():
    """The fast version of the round trip's comparison: nbgrader's own preprocessors, as
    nbgrader_config.py sets them up, on the toy chapter."""
    pytest.importorskip("nbgrader")
    from nbgrader.preprocessors import ClearOutput, ClearSolutions, LockCells

    from coursekit.release.markers import STUB
    from coursekit.release.nbgrader_preprocessor import StudentEdition

    nb = toy_chapter()
    apply_metadata(nb, "toy")
    theirs, resources = copy.deepcopy(nb), {"unique_key": "toy"}
    for step in (
        StudentEdition(),
        LockCells(),
        ClearOutput(),
        ClearSolutions(
            code_stub={"python": STUB}, begin_solution_delimeter=BEGIN, end_solution_delimeter=END
        ),
    ):
        theirs, resources = step.preprocess(theirs, resources)
    ours = copy.deepcopy(nb)
    release_notebook(ours, "toy")
    assert cells_as_seen(theirs) == cells_as_seen(ours)
    assert "predicted_dk = None" in theirs.cells[9].source and STUB in theirs.cells[9].source


# ---- exercises only -----------------------------------------------------------------------------
def test_exercises_only_keeps_the_section_and_the_setup_it_needs():
    nb = toy_chapter()
    apply_metadata(nb, "toy")
    out = exercises_only(nb, "toy")
    sources = [c.source for c in out.cells]
    assert sources[0].startswith("# Exercises: A toy chapter")
    assert sources[1:4] == [nb.cells[i].source for i in (1, 2, 4)]  # the tagged, torch, n_keys
    assert sources[4] == nb.cells[5].source and sources[-1] == nb.cells[13].source
    assert not any("Check your understanding" in s or "demo" in s for s in sources)
    assert [c.metadata.get("nbgrader", {}).get("grade_id") for c in out.cells[4:]] == [
        "ex-causal-statement",
        "ex-causal-solution",
        "ex-causal-check",
        None,
        "ex-saturation-statement",
        "ex-saturation-solution",
        "ex-saturation-given",
        "ex-saturation-check",
        None,
    ]


def test_exercises_only_cuts_cells_at_the_section_headings():
    nb = toy_chapter()
    nb.cells[5].source = "Prose of the chapter.\n\n" + nb.cells[5].source
    nb.cells[13].source += "\n\n## Check your understanding\n\n1. Why?"
    del nb.cells[14]
    out = exercises_only(nb, "toy")
    assert out.cells[4].source.startswith("## Exercises") and "Why?" not in out.cells[-1].source
    assert out.cells[-1].source.startswith("```{solution} ex-saturation")


def test_exercises_only_needs_the_section():
    nb = toy_chapter()
    nb.cells[5].source = nb.cells[5].source.replace("## Exercises", "## Practice")
    with pytest.raises(ReleaseError, match="no '## Exercises' section"):
        exercises_only(nb, "toy")


def toy_book(root: Path) -> Path:
    (root / "book").mkdir(parents=True)
    (root / "_config.yml").write_text("title: toy\n")
    nbformat.write(toy_chapter(), root / "book" / "01_toy.ipynb")
    return root


@pytest.mark.parametrize("only", [False, True])
def test_course_directory(tmp_path, only, capsys):
    src = toy_book(tmp_path / "src")
    args = ["nbgrader", str(tmp_path / "course"), "--src", str(src), "--chapters", "01"]
    assert main(args + (["--exercises-only"] if only else [])) == 0
    name = assignment_name("01", only)
    notebook = tmp_path / "course" / "source" / name / "01_toy.ipynb"
    assert notebook.is_file() and (tmp_path / "course" / "nbgrader_config.py").is_file()
    assert stale_metadata(nbformat.read(notebook, as_version=4), "toy") == []
    assert f"nbgrader generate_assignment {name}" in capsys.readouterr().out
    assert main(args) == 1  # not empty: refuses without --force
    assert main(args + ["--force"]) == 0


def test_a_chapter_of_two_pages_is_named_by_page(tmp_path):
    src = toy_book(tmp_path / "src")
    nbformat.write(toy_chapter(), src / "book" / "01_toy_more.ipynb")
    with pytest.raises(ReleaseError, match="found 2 .01_toy, 01_toy_more.; name a page"):
        chapter_notebook(src, "01")
    assert chapter_notebook(src, "01_toy_more").name == "01_toy_more.ipynb"
    assert chapter_notebook(src, "01_toy").name == "01_toy.ipynb"


# ---- the round trip through real nbgrader (slow) -------------------------------------------------
def nbgrader_command(course: Path, *args: str, timeout=900) -> str:
    """Run the nbgrader of this environment in the course directory; return its log."""
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    run = subprocess.run(
        [str(bin_dir / "nbgrader"), *args],
        cwd=course,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0 and "ERROR" not in log, log[-4000:]
    return log


def labelled_copy(path: Path, dest: Path) -> None:
    """A copy of a chapter with labels in its exercise titles (★★, so 2 points each) and its
    nbgrader metadata; chapter 05 also gets the toy's predict-then-measure exercise."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = re.sub(
                r"^([ \t]*(?:`{3,}|:{3,})\{exercise\}[ \t]+.+?)[ \t]*$",
                r"\1 · ★★ · core · 15 min",
                cell.source,
                flags=re.MULTILINE,
            )
    if path.name.startswith("05"):
        end = next(
            i
            for i, c in enumerate(nb.cells)
            if c.cell_type == "markdown" and "## Check your understanding" in c.source
        )
        nb.cells[end:end] = [copy.deepcopy(c) for c in toy_chapter().cells[9:14]]
        nb.cells[end + 2].source = nb.cells[end + 2].source.replace("{n_keys}", "16")
    apply_metadata(nb, path.name)
    nbformat.write(nb, dest / "book" / path.name)


@pytest.fixture(scope="module")
def book_root(tmp_path_factory):
    if ROUND_TRIP_FROM_BOOK:
        return REPO
    root = tmp_path_factory.mktemp("book")
    (root / "book").mkdir()
    shutil.copy(REPO / "_config.yml", root)
    for chapter in ROUND_TRIP_CHAPTERS:
        labelled_copy(next((REPO / "book").glob(f"{chapter}_*.ipynb")), root)
    return root


def with_a_typical_mistake(nb):
    """The instructor's notebook with the solution of the first function exercise's checked
    function (the one whose arguments are the check's parameters) replaced by the first typical
    mistake of its check record; returns (notebook, the check's grade_id)."""
    for ex in read_exercises(nb):
        record = REGISTRY.get(ex.check_names[0]) if ex.check_names else None
        if not isinstance(record, Check):
            continue
        for index in ex.solutions:
            cell = nb.cells[index]
            lines = cell.source.split("\n")
            begins = [n for n, line in enumerate(lines) if line.strip() == BEGIN]
            for begin in begins:
                end = next(n for n in range(begin, len(lines)) if lines[n].strip() == END)
                fn = next(
                    (
                        node
                        for node in ast.walk(ast.parse(cell.source))
                        if isinstance(node, ast.FunctionDef) and node.lineno <= begin < node.end_lineno
                    ),
                    None,
                )
                if fn is None or [a.arg for a in fn.args.args] != list(record.params):
                    continue
                indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
                args = ", ".join(a.arg for a in fn.args.args)
                lines[begin : end + 1] = [
                    f"{indent}from coursekit.grading import REFERENCES",
                    f"{indent}return REFERENCES[{record.name!r}].mistakes[0]({args})",
                ]
                cell.source = "\n".join(lines)
                return nb, nb.cells[ex.checks[0]].metadata["nbgrader"]["grade_id"]
    raise AssertionError("no function exercise to make a mistake in")


def scores(course: Path, assignment: str, student: str) -> tuple[float, float, dict]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sub = gb.find_submission(assignment, student)
        grades = {g.name: g.score for nb in sub.notebooks for g in nb.grades}
        return sub.score, sub.max_score, grades


@pytest.mark.slow
def test_generate_assignment_gives_our_student_edition_of_whole_chapters(book_root, tmp_path):
    """nbgrader's generate_assignment on whole chapters writes our student edition: the same
    cells, stubs, checks and tags. (Nothing is executed: the autograde round trip below runs
    on the exercises-only assignment, so that `make test` executes no chapter a third time.)"""
    pytest.importorskip("nbgrader")
    course = tmp_path / "course"
    for source in write_course(book_root, course, ROUND_TRIP_CHAPTERS, exercises_only_=False):
        assignment = source.parent.name
        nbgrader_command(course, "generate_assignment", assignment)
        theirs = nbformat.read(course / "release" / assignment / source.name, as_version=4)
        ours = nbformat.read(source, as_version=4)
        release_notebook(ours, source.name)
        assert cells_as_seen(theirs) == cells_as_seen(ours)
        print(f"{assignment}: {len(theirs.cells)} cells, the same as our student edition")


@pytest.mark.slow
def test_round_trip_through_nbgrader(book_root, tmp_path):
    """Seconds to minutes: the exercises-only assignments of chapters 5, 11 and 12 (their exercises
    and the set-up they need), submitted three times (the solutions, untouched, a typical mistake) and
    autograded. (Autograding the whole chapters passed the same asserts until it was cut for
    time: it executed chapters 05 and 06 three more times per `make test`.)"""
    pytest.importorskip("nbgrader")
    course = tmp_path / "course"
    sources = write_course(book_root, course, ROUND_TRIP_EXERCISES, exercises_only_=True)
    for source in sources:
        assignment = source.parent.name
        nbgrader_command(course, "generate_assignment", assignment)
        release = course / "release" / assignment / source.name
        instructor = nbformat.read(source, as_version=4)

        # nbgrader's student version is our student edition: same cells, stubs, checks, tags
        ours = copy.deepcopy(instructor)
        release_notebook(ours, source.name)
        theirs = nbformat.read(release, as_version=4)
        assert cells_as_seen(theirs) == cells_as_seen(ours)

        mistaken, mistaken_check = with_a_typical_mistake(copy.deepcopy(instructor))
        for student, nb in [("instructor", instructor), ("untouched", theirs), ("mistake", mistaken)]:
            (course / "submitted" / student / assignment).mkdir(parents=True)
            nbformat.write(nb, course / "submitted" / student / assignment / source.name)
        started = time.perf_counter()
        nbgrader_command(course, "autograde", assignment)
        seconds = time.perf_counter() - started

        full, maximum, _ = scores(course, assignment, "instructor")
        untouched, _, _ = scores(course, assignment, "untouched")
        partial, _, grades = scores(course, assignment, "mistake")
        print(
            f"{assignment}: instructor {full}/{maximum}, untouched {untouched}, "
            f"typical mistake {partial}; autograde of the 3 submissions {seconds:.0f} s"
        )
        # written answers (markdown answer cells) are graded by hand: autograde leaves them at 0
        by_hand = sum(
            c.metadata["nbgrader"].get("points", 0)
            for c in instructor.cells
            if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("grade")
        )
        print(f"{assignment}: {by_hand} point(s) graded by hand")
        points = sum(
            c.metadata["nbgrader"].get("points", 0)
            for c in instructor.cells
            if c.metadata.get("nbgrader", {}).get("grade")
        )
        print(f"{assignment}: {points} point(s) in the graded cells' metadata, {maximum} in the gradebook")
        # every graded cell counted (chapter 11: 2 + 2 + 1 points; chapter 12: 2 + 1)
        assert maximum == points >= 3 and full == maximum - by_hand and untouched == 0
        assert 0 < partial < full and grades[mistaken_check] == 0
