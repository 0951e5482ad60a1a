"""The multi-part assignments (assignments/*.ipynb, issue 36): their size and conventions, and a
round trip through real nbgrader with hidden tests and two variants.

Published course: nbgrader generates the students' version, then autogrades the instructor's
notebook (every autograded point), the untouched students' version (zero), one with a typical
mistake in its first part (that part zero), and one whose first part looks its answers up in
the checks' stored data (it passes the visible check; the hidden tests score it zero) and whose
goal is a typed number instead of the trained model (zero for the goal).
A private variant (``--variant SECRET``): the instructor's notebook earns every point, and a
submission whose first part copies the published numbers scores zero on it. Written answers are
graded by hand (rubrics in the instructor kit), so only autograded points count.
"""

import copy
import csv
import json
import re
import resource
import time
from pathlib import Path

import nbformat
import pytest
from test_release_nbgrader import cells_as_seen, nbgrader_command

from course_lib.exercises import REGISTRY, Check, Goal
from coursekit.release.markers import BEGIN, END, HIDDEN_BEGIN
from coursekit.release.metadata import apply_metadata
from coursekit.release.nbgrader import write_course
from coursekit.release.outline import read_exercises
from coursekit.release.student import release_notebook

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.stem for p in (REPO / "assignments").glob("*.ipynb"))
SECRET = "a private phrase for the test cohort"
TRIVIAL = re.compile(r"^(return|pass|else:|\)|\]|\}|return \w+|[\w.]+ = \w+)$")


def read(name):
    return nbformat.read(REPO / "assignments" / f"{name}.ipynb", as_version=4)


def test_there_are_three_assignments():
    assert len(ASSIGNMENTS) == 3 and [a[:3] for a in ASSIGNMENTS] == ["a1_", "a2_", "a3_"]


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_part_follows_the_conventions_and_the_header_states_the_time(name):
    nb = read(name)
    exercises = read_exercises(nb)
    assert len(exercises) >= 6
    for ex in exercises:
        assert ex.problems() == [], (ex.label, ex.problems())
        assert all(n in REGISTRY for n in ex.check_names), ex.check_names
    assert any(ex.answers for ex in exercises), "a written answer graded by hand"
    kinds = {type(REGISTRY[n]).__name__ for ex in exercises for n in ex.check_names}
    assert {"Check", "Goal", "Prediction"} <= kinds, kinds
    minutes = sum(ex.minutes for ex in exercises)
    assert 240 <= minutes <= 480, f"{name}: the parts add up to {minutes} minutes; 4 to 8 hours"
    header = nb.cells[0].source
    stated = re.search(r"\*\*Time\b[^\n]*?((?:\d+(?:\.\d+)?\s*(?:to|–|-)\s*)?\d+(?:\.\d+)?)\s+hours", header)
    assert stated, header[:600]
    hours = [float(h) for h in re.findall(r"\d+(?:\.\d+)?", stated.group(1))]
    assert all(4 <= h <= 8 for h in hours), f"{name}: the header states {stated.group(1)} hours"
    assert "estimated" in header.lower(), "the header says how the time was estimated"
    apply_metadata(nb, name)  # no ReleaseError


def _norm(line):
    return re.sub(r"\s+", " ", line.split("#", 1)[0].strip())


def _printed_elsewhere():
    """Every line of course_lib and coursekit (the grader's checks excepted) and of the book's
    code cells outside solution regions."""
    lines = set()
    for path in [*(REPO / "course_lib").rglob("*.py"), *(REPO / "coursekit").rglob("*.py")]:
        if not ("grading" in path.parts and "checks" in path.parts):
            lines |= {_norm(line) for line in path.read_text(errors="replace").splitlines()}
    for path in (REPO / "book").glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                shown = re.sub(rf"{BEGIN}.*?{END}", "", cell.source, flags=re.S)
                lines |= {_norm(line) for line in shown.splitlines()}
    return lines - {""}


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_each_assignment_is_real_new_work(name):
    """Issue 36: >= 100 non-trivial solution lines, >= 80 % of them printed nowhere else."""
    solution = []
    for cell in read(name).cells:
        if cell.cell_type == "code":
            for block in re.findall(rf"{BEGIN}(.*?){END}", cell.source, flags=re.S):
                solution += [_norm(line) for line in block.splitlines()]
    solution = [line for line in solution if line and not TRIVIAL.match(line)]
    elsewhere = _printed_elsewhere()
    new = [line for line in solution if line not in elsewhere]
    print(f"{name}: {len(solution)} solution lines, {len(new)} new ({len(new) / len(solution):.0%})")
    assert len(solution) >= 100 and len(new) >= 0.8 * len(solution)


# --------------------------------------------------------------------------------------
# Submissions
# --------------------------------------------------------------------------------------
def first_function_part(nb):
    """(label, check record) of the assignment's first part checked by a Check record (read
    from the grade ids of an nbgrader source notebook, whose directives are plain markdown)."""
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if cell.cell_type == "code" and grade_id.endswith("-check"):
            names = re.findall(r"\b(check_\w+)\s*\(", cell.source)
            if names and isinstance(REGISTRY.get(names[0]), Check):
                return grade_id[: -len("-check")], REGISTRY[names[0]]
    for ex in read_exercises(nb):
        record = REGISTRY.get(ex.check_names[0]) if ex.check_names else None
        if isinstance(record, Check):
            return ex.label, record
    raise AssertionError("no function part")


def replace_solution(nb, label: str, body) -> str:
    """Replace the solution region of the part `label` (found by its nbgrader grade id) by
    body(parameter names); return the grade id of the part's check."""
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == f"{label}-solution")
    lines = cell.source.split("\n")
    begin = next(n for n, line in enumerate(lines) if line.strip() == BEGIN)
    end = next(n for n, line in enumerate(lines) if line.strip() == END)
    params = re.search(r"def \w+\((.*?)\):", cell.source, flags=re.S).group(1)
    names = [p.split("=")[0].split(":")[0].strip() for p in params.split(",") if p.strip()]
    indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
    lines[begin : end + 1] = [indent + line for line in body(names)]
    cell.source = "\n".join(lines)
    return f"{label}-check"


def with_mistake(nb):
    """The first function part makes its first typical mistake."""
    label, record = first_function_part(nb)
    return replace_solution(
        nb,
        label,
        lambda names: [
            "from coursekit.grading import REFERENCES",
            f"return REFERENCES[{record.name!r}].mistakes[0]({', '.join(names)})",
        ],
    )


def with_lookup(nb, data_dir: str | None = None):
    """The first function part looks its answers up in a check's stored data (the package's,
    or another variant's folder): inputs -> expected output."""
    label, record = first_function_part(nb)
    source = (
        "read"
        if data_dir is None
        else f"lambda n: torch.load({data_dir!r} + '/' + n + '.pt', weights_only=True)"
    )
    return replace_solution(
        nb,
        label,
        lambda names: [
            "import torch",
            "from course_lib.exercises._data import decode, read",
            f"given = ({', '.join(names)},)",
            f"for case in ({source})({record.name!r})['cases']:",
            "    stored = decode(case['args'])",
            "    same = lambda a, b: (a == b if not hasattr(a, 'shape')",
            "                         else a.shape == b.shape and bool((a == b).all()))",
            "    if len(stored) == len(given) and all(same(a, b) for a, b in zip(stored, given)):",
            "        return decode(case['expected'])",
            "raise ValueError('an input the data does not hold')",
        ],
    )


def with_typed_goal(nb) -> str:
    """The object the goal measures is replaced by the number the goal asks for."""
    for index, cell in enumerate(nb.cells):
        grade = cell.metadata.get("nbgrader", {})
        calls = re.findall(r"\b(check_\w+)\s*\(\s*(\w+)\s*\)", cell.source)
        goal = [(n, arg) for n, arg in calls if isinstance(REGISTRY.get(n), Goal)]
        if grade.get("grade") and goal:
            name, arg = goal[0]
            record = REGISTRY[name]
            number = record.at_least if record.at_least is not None else record.at_most
            nb.cells.insert(index, nbformat.v4.new_code_cell(f"{arg} = {number!r}   # typed, not measured"))
            return grade["grade_id"]
    raise AssertionError("no goal check")


def autograded(course: Path, assignment: str, student: str) -> tuple[float, float, dict]:
    """(score, max score, {grade id: score}) over the autograded cells only."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sub = gb.find_submission(assignment, student)
        grades = [g for nb in sub.notebooks for g in nb.grades if g.auto_score is not None]
        return (
            sum(g.score for g in grades),
            sum(g.max_score for g in grades),
            {g.name: g.score for g in grades},
        )


def submit(course: Path, assignment: str, notebook: str, submissions: list) -> None:
    for student, nb in submissions:
        (course / "submitted" / student / assignment).mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / student / assignment / notebook)
    nbgrader_command(course, "autograde", assignment)


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.slow
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_round_trip_through_nbgrader(name, tmp_path):
    pytest.importorskip("nbgrader")
    course = tmp_path / "course"
    started, cpu0 = time.perf_counter(), cpu_children()
    (source,) = write_course(REPO, course, assignments=[name])
    instructor = nbformat.read(source, as_version=4)
    assert any(HIDDEN_BEGIN in c.source for c in instructor.cells), "hidden tests in the source"
    nbgrader_command(course, "generate_assignment", name)
    release = nbformat.read(course / "release" / name / source.name, as_version=4)
    assert not any(HIDDEN_BEGIN in c.source for c in release.cells), "hidden tests reach students"
    ours = copy.deepcopy(instructor)
    release_notebook(ours, source.name)
    assert cells_as_seen(release) == cells_as_seen(ours)

    mistaken = copy.deepcopy(instructor)
    mistake_check = with_mistake(mistaken)
    cheat = copy.deepcopy(instructor)
    lookup_check, goal_check = with_lookup(cheat), with_typed_goal(cheat)
    submit(
        course,
        name,
        source.name,
        [("instructor", instructor), ("untouched", release), ("mistake", mistaken), ("cheat", cheat)],
    )
    full, maximum, _ = autograded(course, name, "instructor")
    untouched, _, _ = autograded(course, name, "untouched")
    partial, _, grades = autograded(course, name, "mistake")
    cheated, _, cheat_grades = autograded(course, name, "cheat")
    print(
        f"{name}: instructor {full:g}/{maximum:g}, untouched {untouched:g}, typical mistake {partial:g}, "
        f"lookup of the stored data and a typed goal {cheated:g}; "
        f"{time.perf_counter() - started:.0f} s, {cpu_children() - cpu0:.0f} s of CPU"
    )
    assert maximum >= 12 and full == maximum and untouched == 0
    assert 0 < partial < maximum and grades[mistake_check] == 0
    assert 0 < cheated < maximum and cheat_grades[lookup_check] == 0 and cheat_grades[goal_check] == 0

    # The grades in the form an LMS imports: nbgrader's CSV exporter (written answers not yet
    # graded by hand count 0 until a grader enters them with formgrader).
    nbgrader_command(course, "export", "--to", "grades.csv")
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert set(rows) == {"instructor", "untouched", "mistake", "cheat"}
    assert float(rows["instructor"]["score"]) == full and float(rows["untouched"]["score"]) == 0
    assert all(r["assignment"] == name and float(r["max_score"]) > maximum for r in rows.values())


@pytest.mark.slow
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_a_private_variant_differs_grades_the_solution_fully_and_refuses_copied_numbers(name, tmp_path):
    pytest.importorskip("nbgrader")
    published, private = tmp_path / "published", tmp_path / "private"
    write_course(REPO, published, assignments=[name], variant="another cohort's secret")
    (source,) = write_course(REPO, private, assignments=[name], variant=SECRET)
    mine, theirs = source.parent / "exercise_data", published / "source" / name / "exercise_data"
    info = json.loads((mine / "variant.json").read_text())
    assert info["seed"] != json.loads((theirs / "variant.json").read_text())["seed"]
    assert SECRET not in json.dumps(info) and SECRET in (private / "nbgrader_config.py").read_text()
    _, record = first_function_part(nbformat.read(source, as_version=4))
    import torch

    ours = torch.load(mine / f"{record.name}.pt", weights_only=True)
    other = torch.load(theirs / f"{record.name}.pt", weights_only=True)
    assert repr(ours["cases"][0]["expected"]) != repr(other["cases"][0]["expected"]), "variants differ"

    nbgrader_command(private, "generate_assignment", name)
    assert (private / "release" / name / "exercise_data" / "variant.json").is_file(), "students get the data"
    instructor = nbformat.read(source, as_version=4)
    copied = copy.deepcopy(instructor)
    copied_check = with_lookup(copied, str(theirs))
    submit(private, name, source.name, [("instructor", instructor), ("copied", copied)])
    full, maximum, _ = autograded(private, name, "instructor")
    got, _, grades = autograded(private, name, "copied")
    print(f"{name}, variant: instructor {full:g}/{maximum:g}; the other variant's numbers copied {got:g}")
    assert full == maximum and grades[copied_check] == 0
