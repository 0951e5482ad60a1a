"""pytest hooks for the whole repository (the fixtures of tests/ are in tests/conftest.py).

nbval runs the student edition of every notebook (`make test` writes it to _student/ first;
pyproject.toml's testpaths). There, the cells tagged `raises-exception` by coursekit.release
are the ones that must fail until the learner writes the code. nbval accepts any error from
such a cell, and no error at all. This hook is stricter, as the old student-notebook test was:

* a check cell (it calls `check_...(`) must raise ExerciseNotAttempted: the check saw the stub.
  An ExerciseFailure would mean the check misjudges an unattempted exercise;
* a cell whose stub runs at the top level must raise the stub's NotImplementedError;
* nothing else: a NameError (a later cell using a name that only a solution defines), no error.

Every other cell must run without error (nbval's own rule), and the cells marked
`# NBVAL_CHECK_OUTPUT` must print what the committed notebook shows.
"""

from __future__ import annotations

import pytest

RAISES_TAG = "raises-exception"


def _expected_error(item) -> str | None:
    """The error a student-edition cell must raise, or None for cells this hook leaves alone."""
    cell = getattr(item, "cell", None)
    if cell is None or RAISES_TAG not in cell.get("metadata", {}).get("tags", []):
        return None
    from coursekit.release.markers import _CHECK_CALL, STUB

    if _CHECK_CALL.search(cell.source):
        return "ExerciseNotAttempted"
    if STUB in cell.source.split("\n"):  # at the top level (no indentation)
        return "NotImplementedError"
    return None  # tagged by an author (e.g. a cell that shows an error message): nbval's rule


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    expected = _expected_error(item)
    if expected is not None:
        errors = [
            out.get("ename")
            for out in getattr(item, "test_outputs", None) or []
            if out.get("output_type") == "error"
        ]
        if errors != [expected]:
            raise AssertionError(
                f"this student-edition cell must raise {expected} until the "
                f"exercise is solved; it raised {errors or 'nothing'}:\n"
                f"{item.cell.source}"
            )
    return result
