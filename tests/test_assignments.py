"""The multi-part assignments (assignments/*.ipynb, issue 24): their conventions, and a round trip
through real nbgrader with hidden tests.

For each assignment nbgrader generates the students' version, then autogrades four submissions:
the instructor's (every autograded point), the untouched students' version (zero), one with a
typical mistake in its first part (partial) and one whose first part looks its answers up in the
checks' stored data (it passes the visible check, fails the hidden tests: partial). Written
answers are graded by hand (a rubric in the instructor kit), so only autograded points count.
"""

import copy
import re
import resource
import time
from pathlib import Path

import nbformat
import pytest
from test_release_nbgrader import cells_as_seen, nbgrader_command

from course_lib.exercises import REGISTRY, Check
from coursekit.release.markers import BEGIN, END, HIDDEN_BEGIN
from coursekit.release.nbgrader import apply_metadata, write_course
from coursekit.release.outline import read_exercises
from coursekit.release.student import release_notebook

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.stem for p in (REPO / "assignments").glob("*.ipynb"))


def test_there_are_three_assignments():
    assert ASSIGNMENTS == ["a1_seq2seq_attention", "a2_transformer_decoder", "a3_gpt_kv_cache"]


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_part_follows_the_conventions(name):
    nb = nbformat.read(REPO / "assignments" / f"{name}.ipynb", as_version=4)
    exercises = read_exercises(nb)
    assert len(exercises) >= 7
    for ex in exercises:
        assert ex.problems() == [], (ex.label, ex.problems())
        assert all(n in REGISTRY for n in ex.check_names), ex.check_names
    assert sum(ex.stars for ex in exercises if ex.checks) >= 12
    assert any(ex.answers for ex in exercises), "a written answer graded by hand"
    minutes = sum(ex.minutes for ex in exercises)
    assert 120 <= minutes <= 240, f"{name}: {minutes} minutes; an assignment takes 2 to 4 hours"
    apply_metadata(nb, name)  # no ReleaseError


def first_function_part(name: str):
    """(label, check record) of the assignment's first part checked by a Check record."""
    nb = nbformat.read(REPO / "assignments" / f"{name}.ipynb", as_version=4)
    for ex in read_exercises(nb):
        record = REGISTRY.get(ex.check_names[0]) if ex.check_names else None
        if isinstance(record, Check):
            return ex.label, record
    raise AssertionError("no function part")


def replace_solution(nb, label: str, body) -> str:
    """Replace the solution region of the part `label` (found by its nbgrader grade id) by
    body(indent, parameter names); return the grade id of the part's check."""
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == f"{label}-solution")
    lines = cell.source.split("\n")
    begin = next(n for n, line in enumerate(lines) if line.strip() == BEGIN)
    end = next(n for n, line in enumerate(lines) if line.strip() == END)
    params = re.search(r"def \w+\((.*?)\):", cell.source).group(1)
    names = [p.split("=")[0].strip() for p in params.split(",")]
    indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
    lines[begin : end + 1] = [indent + line for line in body(names)]
    cell.source = "\n".join(lines)
    return f"{label}-check"


def mistake_submission(nb, name):
    """The instructor's notebook with its first function part making its first typical mistake."""
    label, record = first_function_part(name)
    body = lambda names: [  # noqa: E731
        "from coursekit.grading import REFERENCES",
        f"return REFERENCES[{record.name!r}].mistakes[0]({', '.join(names)})",
    ]
    return nb, replace_solution(nb, label, body)


def lookup_submission(nb, name):
    """The instructor's notebook with its first function part looking its answers up in the
    check's stored data (inputs -> expected output): it passes the visible check only."""
    label, record = first_function_part(name)
    body = lambda names: [  # noqa: E731
        "from course_lib.exercises._data import decode, read",
        f"given = ({', '.join(names)},)",
        f"for case in read({record.name!r})['cases']:",
        "    stored = decode(case['args'])",
        "    if all(a.shape == b.shape and bool((a == b).all()) for a, b in zip(stored, given)):",
        "        return decode(case['expected'])",
        "raise ValueError('an input the data does not hold')",
    ]
    return nb, replace_solution(nb, label, body)


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


@pytest.mark.slow
def test_round_trip_through_nbgrader(tmp_path):
    pytest.importorskip("nbgrader")
    course = tmp_path / "course"
    started, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    sources = write_course(REPO, course, assignments=ASSIGNMENTS)
    report = []
    for source in sources:
        assignment = source.parent.name
        instructor = nbformat.read(source, as_version=4)
        assert any(HIDDEN_BEGIN in c.source for c in instructor.cells), "hidden tests in the source"
        nbgrader_command(course, "generate_assignment", assignment)
        release = nbformat.read(course / "release" / assignment / source.name, as_version=4)
        assert not any(HIDDEN_BEGIN in c.source for c in release.cells), "hidden tests reach students"
        ours = copy.deepcopy(instructor)
        release_notebook(ours, source.name)
        assert cells_as_seen(release) == cells_as_seen(ours)

        mistaken, mistaken_check = mistake_submission(copy.deepcopy(instructor), assignment)
        looked_up, lookup_check = lookup_submission(copy.deepcopy(instructor), assignment)
        submissions = [
            ("instructor", instructor),
            ("untouched", release),
            ("mistake", mistaken),
            ("lookup", looked_up),
        ]
        for student, nb in submissions:
            (course / "submitted" / student / assignment).mkdir(parents=True)
            nbformat.write(nb, course / "submitted" / student / assignment / source.name)
        nbgrader_command(course, "autograde", assignment)

        full, maximum, _ = autograded(course, assignment, "instructor")
        untouched, _, _ = autograded(course, assignment, "untouched")
        partial, _, grades = autograded(course, assignment, "mistake")
        cheat, _, cheat_grades = autograded(course, assignment, "lookup")
        report.append(
            f"{assignment}: instructor {full:g}/{maximum:g}, untouched {untouched:g}, "
            f"typical mistake {partial:g}, lookup of the stored data {cheat:g}"
        )
        assert maximum >= 12 and full == maximum and untouched == 0
        assert 0 < partial < maximum and grades[mistaken_check] == 0
        assert 0 < cheat < maximum and cheat_grades[lookup_check] == 0  # the hidden tests caught it
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    print("\n".join(report))
    print(
        f"the round trip of the {len(sources)} assignments: {time.perf_counter() - started:.0f} s, "
        f"{cpu:.0f} s of CPU (nbgrader and its kernels)"
    )
