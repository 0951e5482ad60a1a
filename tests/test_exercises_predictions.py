"""Predict, then measure, then compare (issue 24): in the student edition of every chapter the
measurement is not on the page before the prediction, and no prediction check raises for an
honest miss (test_exercises_records.py checks every record's typical misconceptions)."""

import copy
import re
from pathlib import Path

import nbformat
import pytest

from course_lib.exercises import REGISTRY, Prediction
from coursekit.release.outline import read_exercises
from coursekit.release.student import release_notebook

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
NUMBER = re.compile(r"(?<![\w.])\d+\.\d{2,}")  # a measured value as printed (integers there are settings)


def _predictions(nb):
    return [
        ex
        for ex in read_exercises(nb)
        if any(isinstance(REGISTRY.get(n), Prediction) for n in ex.check_names)
    ]


def _text(cell) -> str:
    parts = [cell.source]
    for out in cell.get("outputs", []):
        parts.append(out.get("text", "") if isinstance(out.get("text", ""), str) else "".join(out["text"]))
        for value in out.get("data", {}).values():
            parts.append(
                value if isinstance(value, str) else "".join(value) if isinstance(value, list) else ""
            )
    return "\n".join(parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name[:5] for p in NOTEBOOKS])
def test_the_student_edition_shows_no_measurement_before_its_prediction(path):
    instructor = nbformat.read(path, as_version=4)
    exercises = _predictions(instructor)
    if not exercises:
        pytest.skip(f"{path.name} has no predict-then-measure exercise")
    for ex in exercises:
        # what the experiment prints in the instructor's edition: the numbers to keep off the page
        shown = {
            n
            for i in ex.given
            for out in instructor.cells[i].get("outputs", [])
            for n in NUMBER.findall(_text_of(out))
        }
        student = copy.deepcopy(instructor)
        marker = instructor.cells[ex.checks[0]].source
        release_notebook(student, path.name)
        check = next(i for i, c in enumerate(student.cells) if c.source == marker)
        statement = next(
            i for i, c in enumerate(student.cells) if c.source == instructor.cells[ex.statement].source
        )
        for cell in student.cells[statement : check + 1]:
            assert not cell.get("outputs"), f"{path.name}, {ex.label}: a cell of the exercise shows output"
        before = "\n".join(_text(c) for c in student.cells[:check])
        leaked = sorted(n for n in shown if n in before)
        assert not leaked, (
            f"{path.name}, {ex.label}: the measurement {leaked} is on the page before the check"
        )


def _text_of(out) -> str:
    text = out.get("text", "")
    return text if isinstance(text, str) else "".join(text)
