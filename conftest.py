"""pytest hooks for the whole repository (the fixtures of tests/ are in tests/conftest.py).

nbval runs the student edition of every notebook (`make test` writes it to _student/ first;
pyproject.toml's testpaths). There, the cells tagged `raises-exception` by course_lib.release
are the ones that must fail until the learner writes the code. nbval accepts any error from
such a cell, and no error at all. This hook is stricter, as the old student-notebook test was:

* a check cell (it calls `check_...(`) must raise ExerciseNotAttempted: the check saw the stub.
  An ExerciseFailure would mean the check misjudges an unattempted exercise;
* a cell whose stub runs at the top level must raise the stub's NotImplementedError;
* nothing else: a NameError (a later cell using a name that only a solution defines), no error.

Every other cell must run without error (nbval's own rule), and the cells marked
`# NBVAL_CHECK_OUTPUT` must print what the committed notebook shows.

A second hook orders the work for pytest-xdist (`make test`: `--dist loadscope
--no-loadscope-reorder`, so each notebook or test module goes to one worker, in the order
given here): the longest first, so that no worker ends the run alone with a long notebook.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RAISES_TAG = "raises-exception"


def _expected_error(item) -> str | None:
    """The error a student-edition cell must raise, or None for cells this hook leaves alone."""
    cell = getattr(item, "cell", None)
    if cell is None or RAISES_TAG not in cell.get("metadata", {}).get("tags", []):
        return None
    from course_lib.release.markers import _CHECK_CALL, STUB

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


# ---- the order of the work: longest first --------------------------------------------------------
ROOT = Path(__file__).parent
# Seconds per notebook or test module: measured by the last full run here (written below), else
# the committed measurement (a full `make test` on the course's 2-core machine; refresh it by
# copying _build/test_durations.json over it after a run).
MEASURED = ROOT / "_build" / "test_durations.json"
COMMITTED = ROOT / "tests" / "durations.json"
# A file that neither lists (a new one): seconds per test marked slow (a fresh venv, a command
# line, nbgrader), per test that opens the site in Chromium, per other test or notebook cell.
SECONDS = {"slow": 30.0, "site": 8.0, "other": 0.5}
_durations: dict[str, float] = {}


def _path(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _estimated_seconds(items, known) -> float:
    if _path(items[0].nodeid) in known:
        return known[_path(items[0].nodeid)]
    marks = ("slow", "site")
    return sum(SECONDS[next((m for m in marks if item.get_closest_marker(m)), "other")] for item in items)


@pytest.hookimpl(trylast=True)  # after tests/conftest.py has marked the slow tests
def pytest_collection_modifyitems(config, items):
    """The longest notebook or test module first (the order within each is kept)."""
    source = MEASURED if MEASURED.exists() else COMMITTED
    known = json.loads(source.read_text()) if source.exists() else {}
    by_file: dict[str, list] = {}
    for item in items:
        by_file.setdefault(_path(item.nodeid), []).append(item)
    order = sorted(by_file.values(), key=lambda group: -_estimated_seconds(group, known))
    items[:] = [item for group in order for item in group]


def pytest_runtest_logreport(report):
    _durations[_path(report.nodeid)] = _durations.get(_path(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session):
    """After a run of the whole suite (no paths, -m or -k given), the measured seconds of each
    file, in the main process (pytest-xdist's workers report to it)."""
    config = session.config
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    whole = whole and not config.option.markexpr and not config.option.keyword
    if hasattr(config, "workerinput") or not whole or not _durations or not MEASURED.parent.exists():
        return
    known = json.loads(MEASURED.read_text()) if MEASURED.exists() else {}
    known.update({path: round(seconds, 1) for path, seconds in _durations.items()})
    MEASURED.write_text(json.dumps(dict(sorted(known.items())), indent=1) + "\n")
