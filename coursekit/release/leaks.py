"""Does the page answer its own exercise? ``solution_leaks`` measures how much of each
exercise's solution its page already shows: the student version of the notebook (from
``student.release_notebook``), every cell's source and every output.

Apart from ``outline.py`` (reading the exercises) because it needs the student edition, which
itself reads the exercises: ``leaks`` -> ``student`` -> ``outline``, no circle.
"""

from __future__ import annotations

import copy
import html
import io
import re
import tokenize
from dataclasses import dataclass

from .markers import _MARKER, BEGIN
from .outline import read_exercises
from .student import release_notebook

__all__ = ["Leak", "solution_leaks"]


@dataclass
class Leak:
    label: str | None
    lines: list  # the substantial solution lines (normalised)
    found: list  # those that appear elsewhere on the page

    @property
    def fraction(self) -> float:
        return len(self.found) / len(self.lines) if self.lines else 0.0


def solution_leaks(nb, min_chars: int = 20) -> list[Leak]:
    """For every exercise, which substantial lines of its solution regions appear elsewhere on
    the page. A line is normalised (comments dropped, whitespace removed, lower case, without
    its ``return`` or assignment target) and substantial when >= ``min_chars`` characters are
    left. The page is what the learner sees: the student version of the notebook (solutions stubbed, solution
    directives removed), every cell's source and every output (text, HTML without its tags:
    ``show_source`` listings included)."""
    student = copy.deepcopy(nb)
    release_notebook(student, "page")
    page = _squash("\n".join(_cell_text(cell) for cell in student.cells))
    leaks = []
    for ex in read_exercises(nb):
        lines = [ln for i in ex.solutions for ln in _solution_lines(nb.cells[i].source)]
        lines = [ln for ln in lines if len(ln) >= min_chars]
        leaks.append(Leak(ex.label, lines, [ln for ln in lines if ln in page]))
    return leaks


def _solution_lines(source: str) -> list[str]:
    """The normalised lines inside the solution regions of a cell."""
    region, inside = [], False
    for line in source.split("\n"):
        marker = _MARKER.match(line)
        if marker:
            inside = marker["marker"] == BEGIN
        elif inside:
            region.append(line)
    code = _drop_comments("\n".join(region)).split("\n")
    return [s for s in (_expression(_squash(ln)) for ln in code) if s]


def _drop_comments(code: str) -> str:
    """``code`` without its comments (tokenize knows a # inside a string from a comment)."""
    lines = code.split("\n")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return "\n".join(re.sub(r"#.*$", "", ln) for ln in lines)
    for tok in reversed(tokens):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col]
    return "\n".join(lines)


def _squash(text: str) -> str:
    """Lower case, no whitespace: `S = Q @ K.T` and `s=q@k.T` read the same."""
    return re.sub(r"\s+", "", text).lower()


_TARGET = re.compile(r"^(return|yield|[\w.\[\],()*]+=(?!=))")


def _expression(line: str) -> str:
    """A squashed line without its `return` or assignment target: the expression is the answer."""
    return _TARGET.sub("", line, count=1)


def _cell_text(cell) -> str:
    parts = [cell.source]
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append(out["text"] if isinstance(out["text"], str) else "".join(out["text"]))
        for mime, value in out.get("data", {}).items():
            value = value if isinstance(value, str) else "".join(value) if isinstance(value, list) else ""
            if mime == "text/html":
                parts.append(html.unescape(re.sub(r"<[^>]+>", "", value)))
            elif mime.startswith("text/"):
                parts.append(value)
        parts += out.get("traceback", [])
    return "\n".join(parts)
