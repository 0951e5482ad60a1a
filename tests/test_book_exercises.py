"""The exercises of every chapter follow the conventions of CONTRIBUTING.md (issue 13):

* every exercise states its difficulty, importance and time budget in its title, and gives
  hints in steps (numbered dropdowns);
* no exercise is answered by its own page: fewer than 30 % of the substantial lines of its
  solution appear elsewhere on the page the learner sees (sources and outputs, ``show_source``
  listings and HTML included);
* every chapter has at least 3 exercises, at least one of them "predict, then measure";
* every check a chapter calls is a record of ``course_lib.exercises``, and no solution marker
  stands where nbgrader would misread it.

One test per notebook and rule, so that the report says which chapter breaks which rule.
"""

from pathlib import Path

import nbformat
import pytest

from course_lib.exercises import REGISTRY
from coursekit.release.leaks import solution_leaks
from coursekit.release.outline import read_exercises, stray_markers

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "book").glob("[0-9][0-9]_*.ipynb"))
IDS = [p.name[:2] for p in NOTEBOOKS]
LEAK_LIMIT = 0.3


def read(path):
    return nbformat.read(path, as_version=4)


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 10


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_exercise_is_labelled_with_stepped_hints(path):
    problems = {
        f"{ex.label or ex.title} (cell {ex.statement})": ex.problems() for ex in read_exercises(read(path))
    }
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, "\n".join(f"{k}: {'; '.join(v)}" for k, v in problems.items())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_exercise_is_answered_by_its_page(path):
    leaks = [leak for leak in solution_leaks(read(path)) if leak.fraction >= LEAK_LIMIT]
    assert not leaks, "\n".join(
        f"{leak.label}: {len(leak.found)} of {len(leak.lines)} substantial solution lines appear "
        f"elsewhere on the page: {leak.found}"
        for leak in leaks
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_three_exercises_and_a_prediction_per_chapter(path):
    exercises = read_exercises(read(path))
    kinds = {REGISTRY[name].kind for ex in exercises for name in ex.check_names if name in REGISTRY}
    assert len(exercises) >= 3 and "prediction" in kinds, (
        f"{len(exercises)} exercises (at least 3), check kinds {sorted(kinds)} (one must be a "
        "prediction: a Prediction record)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_check_called_is_a_record(path):
    called = {name for ex in read_exercises(read(path)) for name in ex.check_names}
    assert called and called <= set(REGISTRY), sorted(called - set(REGISTRY))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_stray_solution_markers(path):
    assert not stray_markers(read(path))
