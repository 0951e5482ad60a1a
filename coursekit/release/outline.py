"""The exercises of a chapter notebook, read from the conventions of CONTRIBUTING.md.

An exercise is a sphinx-exercise ``{exercise}`` directive in a markdown cell (the statement),
followed by its cells up to the next statement or the next ``## `` section: solution cells
(code with ``### BEGIN SOLUTION`` regions), check cells (code calling ``check_...(``), given
cells (any other code, e.g. the experiment of a predict-then-measure exercise) and answer cells
(markdown starting with ``**Your answer:**``, a written answer graded by hand with a rubric).

The statement's title ends with its labels in a fixed form, and its hints are numbered dropdowns:

    ````{exercise} Scaled scores · ★★ · core · 15 min
    :label: ex-scaled-score
    ...
    ```{admonition} Hint 1
    :class: dropdown
    ...
    ```
    ````

How much of each exercise's solution its own page already shows is measured in ``leaks.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .markers import _CHECK_CALL, _FENCE, ANSWER, BEGIN, END, _fence_end

IMPORTANCE = ("core", "optional", "challenge")
LABELS = re.compile(
    r"^(?P<name>.+?) · (?P<stars>★{1,3}) · (?P<importance>"
    + "|".join(IMPORTANCE)
    + r") · (?P<minutes>[1-9]\d{0,2}) min$"
)
_EXERCISE = re.compile(r"^\{exercise\}[ \t]*(?P<title>.*?)[ \t]*$")
_HINT = re.compile(r"^\{admonition\}[ \t]+Hint (?P<step>\d+)[ \t]*$")
_OPTION = re.compile(r"^[ \t]*:(?P<key>[\w-]+):[ \t]*(?P<value>.*?)[ \t]*$")
_SECTION = re.compile(r"^## ", re.MULTILINE)
_MARKER_TEXT = re.compile(r"(BEGIN|END) SOLUTION")
_CHECK_NAME = re.compile(r"\b(check_(?!live\b)\w+)\s*\(")
_SOLUTION_DIRECTIVE = re.compile(r"^[ \t]*(`{3,}|:{3,})\{solution", re.MULTILINE)


@dataclass
class Exercise:
    """One exercise: where its cells are (indices into ``nb.cells``) and its labels."""

    label: str | None
    title: str
    statement: int
    name: str = ""
    stars: int | None = None
    importance: str | None = None
    minutes: int | None = None
    hints: list = field(default_factory=list)  # (step, dropdown?) in the order written
    solutions: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    given: list = field(default_factory=list)
    check_names: list = field(default_factory=list)
    answers: list = field(default_factory=list)
    shares_cell_with_solution: bool = False  # a {solution} directive in the statement's cell

    @property
    def cells(self) -> list[int]:
        return sorted(self.solutions + self.checks + self.given + self.answers)

    def problems(self) -> list[str]:
        """What this exercise lacks under the conventions (empty when it is complete)."""
        out = []
        if not self.label:
            out.append("no :label:")
        if self.stars is None:
            out.append(
                f"the title {self.title!r} does not end with ' · ★★ · core · 15 min': "
                f"1-3 stars, one of {', '.join(IMPORTANCE)}, minutes"
            )
        steps = [s for s, _ in self.hints]
        if len(steps) < 2 or steps != list(range(1, len(steps) + 1)):
            out.append(f"hints must be dropdowns 'Hint 1', 'Hint 2', ... (at least 2), got {steps}")
        if not all(dropdown for _, dropdown in self.hints):
            out.append("every hint needs ':class: dropdown'")
        if self.shares_cell_with_solution:
            out.append(
                "the statement's cell also holds a {solution} directive: give the "
                "explanation its own markdown cell (nbgrader locks the statement's cell)"
            )
        if self.answers:  # a written answer, graded by hand: no code needed
            return out
        if not self.solutions:
            out.append("no solution cell (### BEGIN SOLUTION ... ### END SOLUTION)")
        if not self.checks:
            out.append("no check cell (a cell calling check_...(...))")
        return out


def read_exercises(nb) -> list[Exercise]:
    """The exercises of ``nb`` in order (see the module docstring)."""
    exercises: list[Exercise] = []
    current: Exercise | None = None
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            found = _statements(cell.source, index)
            if found:
                exercises += found
                current = found[-1]
            elif _SECTION.search(cell.source):
                current = None  # a new section ends the exercise
            elif current is not None and cell.source.startswith(ANSWER):
                current.answers.append(index)
            continue
        if current is None:
            continue
        if BEGIN in cell.source:
            current.solutions.append(index)
        elif _CHECK_CALL.search(cell.source):
            current.checks.append(index)
            current.check_names += _CHECK_NAME.findall(cell.source)
        else:
            current.given.append(index)
    return exercises


def _statements(text: str, index: int) -> list[Exercise]:
    """The exercise directives of one markdown cell, with their options and hints."""
    lines, found, i = text.split("\n"), [], 0
    with_solution = bool(_SOLUTION_DIRECTIVE.search(text))
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        head = _EXERCISE.match(fence["info"]) if fence else None
        if not head:
            i += 1
            continue
        end = _fence_end(lines, i)
        ex = Exercise(
            label=None, title=head["title"], statement=index, shares_cell_with_solution=with_solution
        )
        for line in lines[i + 1 : end]:
            option = _OPTION.match(line)
            if not option:
                break
            if option["key"] == "label":
                ex.label = option["value"]
        _read_title(ex)
        ex.hints = _hints(lines[i + 1 : end])
        found.append(ex)
        i = end
    return found


def _read_title(ex: Exercise) -> None:
    m = LABELS.match(ex.title)
    ex.name = m["name"] if m else ex.title
    if m:
        ex.stars, ex.importance, ex.minutes = len(m["stars"]), m["importance"], int(m["minutes"])


def _hints(lines: list[str]) -> list[tuple[int, bool]]:
    hints, i = [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        hint = _HINT.match(fence["info"]) if fence else None
        if hint:
            end = _fence_end(lines, i)
            options = [_OPTION.match(ln) for ln in lines[i + 1 : end]]
            dropdown = any(o and o["key"] == "class" and "dropdown" in o["value"].split() for o in options)
            hints.append((int(hint["step"]), dropdown))
            i = end
        else:
            i += 1
    return hints


def stray_markers(nb) -> list[str]:
    """Cells where nbgrader would see a solution marker that our tools do not: nbgrader looks
    for the text "BEGIN SOLUTION" anywhere in any cell, we for the marker on a line of its own
    in a code cell."""
    problems = []
    for index, cell in enumerate(nb.cells):
        for n, line in enumerate(cell.source.split("\n"), 1):
            if _MARKER_TEXT.search(line) and (cell.cell_type != "code" or line.strip() not in (BEGIN, END)):
                problems.append(
                    f"cell {index}, line {n}: {line.strip()!r} (write the marker "
                    "alone on its line, in a code cell, and nowhere else)"
                )
    return problems
