"""The exercise conventions in the sources, read and rewritten: solution regions in code
(``### BEGIN SOLUTION`` ... ``### END SOLUTION``) and sphinx-exercise solution directives in
MyST markdown. Shared by every edition (student, learner, nbgrader)."""

from __future__ import annotations

import re

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB = 'raise NotImplementedError("Exercise: write your solution here")'
SOLUTION_TAG = "solution"
ANSWER = "**Your answer:**"  # a markdown cell starting so is a written answer, graded by hand
ANSWER_STUB = ANSWER + "\n\nYOUR ANSWER HERE"  # what the student edition (and nbgrader) leaves of it
RAISES_TAG = "raises-exception"  # nbclient / Jupyter Book / nbval / JupyterLab: error expected
HIDE_INPUT_TAG = "hide-input"
INSTRUCTOR_ONLY = "instructor_"  # book/instructor_*: pages for instructors only

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"  # nbgrader's
_HIDDEN = re.compile(rf"\n?{HIDDEN_BEGIN}\n.*?{HIDDEN_END}", re.S)


def strip_hidden_tests(source: str) -> str:
    """``source`` without its hidden-test regions (as nbgrader's student version has it)."""
    return _HIDDEN.sub("", source)


_MARKER = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>### (?:BEGIN|END) SOLUTION)[ \t]*$")
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})[ \t]*(?P<info>.*)$")
_SOLUTION = re.compile(r"^\{solution(?P<kind>-start|-end)?\}")
_CHECK_CALL = re.compile(r"\bcheck_(?!live\b)\w+\s*\(")  # an exercise check (evidence.check_live is not one)


class ReleaseError(ValueError):
    """A notebook or page breaks the exercise conventions (e.g. BEGIN without END)."""


# --------------------------------------------------------------------------------------
# Code: ### BEGIN SOLUTION ... ### END SOLUTION  ->  raise NotImplementedError(...)
# --------------------------------------------------------------------------------------
def stub_solutions(source: str, where: str) -> tuple[str, int]:
    """Replace each solution region of ``source`` by a stub; return (new source, regions)."""
    out: list[str] = []
    begin_line = None  # line number of the open region's BEGIN, if any
    regions = 0
    for n, line in enumerate(source.split("\n"), 1):
        m = _MARKER.match(line)
        marker = m["marker"] if m else None
        if marker == BEGIN:
            if begin_line is not None:
                raise ReleaseError(
                    f"{where}: nested '{BEGIN}' on line {n} (the region opened "
                    f"on line {begin_line} has no '{END}' before it)."
                )
            begin_line = n
            out.append(m["indent"] + STUB)
        elif marker == END:
            if begin_line is None:
                raise ReleaseError(f"{where}: '{END}' on line {n} without a '{BEGIN}' before it.")
            begin_line, regions = None, regions + 1
        elif begin_line is None:
            out.append(line)
    if begin_line is not None:
        raise ReleaseError(f"{where}: '{BEGIN}' on line {begin_line} has no matching '{END}'.")
    return "\n".join(out), regions


# --------------------------------------------------------------------------------------
# Markdown: sphinx-exercise solution directives
# --------------------------------------------------------------------------------------
def strip_solution_directives(text: str, in_gate: bool = False) -> tuple[str, int, bool]:
    """Remove solution directives from MyST markdown.

    ``in_gate`` says whether the text starts inside a ``{solution-start}`` ... ``{solution-end}``
    gate (gates may span notebook cells). Returns (new text, directives removed, in_gate at the
    end). Fenced code blocks (```` ```python ````, ...) are copied verbatim.
    """
    lines = text.split("\n")
    out: list[str] = []
    removed, i = 0, 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        kind = _directive_kind(fence)
        if in_gate:
            if kind == "-end":
                in_gate = False
            i = _fence_end(lines, i) if kind == "-end" else i + 1
        elif kind == "":  # {solution}: drop the whole directive
            removed, i = removed + 1, _fence_end(lines, i)
        elif kind == "-start":
            removed, in_gate, i = removed + 1, True, _fence_end(lines, i)
        elif fence and fence["info"] and not fence["info"].startswith("{"):  # a code block
            end = _fence_end(lines, i)
            out.extend(lines[i:end])
            i = end
        else:  # prose, or another directive whose content may hold a nested solution
            out.append(lines[i])
            i += 1
    return "\n".join(out), removed, in_gate


def _directive_kind(fence: re.Match | None) -> str | None:
    """'' for {solution}, '-start'/'-end' for the gated form, None for anything else."""
    m = _SOLUTION.match(fence["info"]) if fence else None
    return (m["kind"] or "") if m else None


def _fence_end(lines: list[str], start: int) -> int:
    """Index just past the line closing the fence opened on ``lines[start]`` (CommonMark rule:
    the same character, at least as long, nothing else on the line)."""
    fence = _FENCE.match(lines[start])["fence"]
    closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    for j in range(start + 1, len(lines)):
        if closing.match(lines[j]):
            return j + 1
    return len(lines)  # unclosed: the directive runs to the end, as in MyST
