"""What every kind of check shares: the outcomes (a failure, a result), a typical
:class:`Mistake`, the registry of records by public name, where cases come from (the stored
data, or the grader's hidden source) and the base class that names, hints and reports.

The kinds themselves: :class:`~course_lib.exercises._engine.Check` (``_engine.py``) and
:class:`~course_lib.exercises._measured.Answer`, ``Prediction`` and ``Goal`` (``_measured.py``).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = ["CheckResult", "ExerciseFailure", "ExerciseNotAttempted", "Mistake", "REGISTRY",
           "RunCase", "WrongResult", "case_source", "no_grad", "require_passed",
           "set_case_source"]

_HERE = str(Path(__file__).resolve().parent)


# --------------------------------------------------------------------------------------
# Outcomes
# --------------------------------------------------------------------------------------
class ExerciseFailure(AssertionError):
    """The learner's answer is wrong (or their code raised). The message says why."""

    def _render_traceback_(self):
        # IPython shows this instead of a long traceback through the checking machinery.
        return [f"\x1b[31m{type(self).__name__}\x1b[39m: {self}"]


class ExerciseNotAttempted(ExerciseFailure, NotImplementedError):
    """The learner's function still raises ``NotImplementedError``, or the answer is still None."""


class WrongResult(Exception):
    """Raised by a record's ``call`` when the learner's result has the wrong form (the message
    says what is wrong); the engine reports it like a failed comparison."""


@dataclass
class CheckResult:
    """What a check returns when it does not fail: silent when displayed (the check printed
    already). For a prediction, ``hit`` says whether it was within the tolerance."""

    name: str
    text: str
    hit: bool | None = None

    def __str__(self) -> str:
        return self.text

    def _ipython_display_(self) -> None:
        pass


@dataclass(frozen=True)
class Mistake:
    """A typical mistake: the message that names it. (What the mistake gives on each case is in
    the check's data; a :class:`Prediction`'s mistake also has ``fn``, mapping the measurement
    to the prediction the misconception gives.)"""

    message: str
    fn: Callable | None = None


@dataclass
class RunCase:
    """A case as a check runs it: fresh inputs from ``make()``, the expected output, and
    ``outcome(i)``, what mistake i gives (``("result", value)``, ``("error", type name,
    message)`` or None)."""

    description: str
    make: Callable[[], tuple[tuple, dict]]
    expected: Any
    outcome: Callable[[int], tuple | None]


REGISTRY: dict[str, _Record] = {}

# Where cases come from: None = the stored data. coursekit.grading.hidden_cases() sets a
# function record -> cases (or an Answer's (value, mistake values)) made by the references.
_SOURCE: Callable | None = None


def set_case_source(source: Callable | None) -> Callable | None:
    """Make the checks take their cases from ``source`` (None: the stored data); returns the
    previous source. Used by the grader's hidden tests."""
    global _SOURCE
    previous, _SOURCE = _SOURCE, source
    return previous


def case_source() -> Callable | None:
    """The source that :func:`set_case_source` set (None: the stored data)."""
    return _SOURCE


# --------------------------------------------------------------------------------------
# What every record shares: the name, hints in steps, mistakes, messages
# --------------------------------------------------------------------------------------
class _Record:
    kind = ""

    def _register(self) -> None:
        if not (self.name.startswith("check_") and self.name.isidentifier()):
            raise ValueError(f"a check's name starts with 'check_', got {self.name!r}")
        if self.name in REGISTRY:
            raise ValueError(f"two checks are named {self.name}")
        if isinstance(self.hints, str) or not all(isinstance(h, str) for h in self.hints):
            raise TypeError(f"{self.name}: hints is a list of steps (strings)")
        if not all(isinstance(m, Mistake) for m in self.mistakes):
            raise TypeError(f"{self.name}: mistakes is a list of Mistake(message)")
        REGISTRY[self.name] = self
        self.__name__ = self.__qualname__ = self.name
        self.__doc__ = self.doc
        self._failures = 0
        self.passed = False  # whether the last call passed (see require_passed)

    def reset_hints(self) -> None:
        """Start the hints again from step 1 (as for a learner who opens the notebook afresh)."""
        self._failures = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}: {self.doc}>"

    def _hint(self) -> str | None:
        """The next step of the hints (each failure shows one step further)."""
        if not self.hints:
            return None
        step = min(self._failures, len(self.hints) - 1)
        return f"Hint ({step + 1} of {len(self.hints)}): {self.hints[step]}"

    def _failure(self, *lines: str | None, cause: str | None = None,
                 why: str | None = None) -> ExerciseFailure:
        text = [f"{self.name}: {lines[0]}", *(f"  {line}" for line in lines[1:] if line)]
        if cause:
            text.append(f"  {getattr(self, 'cause_label', 'Likely cause')}: {cause}")
        if why:
            text.append(f"  Why: {why}")
        hint = self._hint()
        self._failures += 1
        if hint:
            text.append(f"  {hint}")
        return ExerciseFailure("\n".join(text))

    def _passed(self, text: str, hit: bool | None = None) -> CheckResult:
        print(text)
        self.passed = True
        return CheckResult(self.name, text, hit)

    def _start(self) -> None:
        self.passed = False


def require_passed(*records: _Record) -> None:
    """Raise :class:`ExerciseNotAttempted` unless the last call of every record passed: a cell
    that assembles a model from the learner's parts runs only once each part is right."""
    missing = [r.name for r in records if not r.passed]
    if missing:
        raise ExerciseNotAttempted(
            "this cell builds on your earlier parts; first make these checks pass (run their "
            f"cells again if you changed the code): {', '.join(missing)}")


# --------------------------------------------------------------------------------------
# Helpers for writing records
# --------------------------------------------------------------------------------------
def no_grad(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` under ``torch.no_grad()``: a ``call`` for checks of modules."""
    with torch.no_grad():
        return fn(*args, **kwargs)


def _learner_frame(exc: BaseException) -> str:
    """' raised in f, line N: `code`' for the innermost frame of the learner's code, if any."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(_HERE)
              and not {"site-packages", "dist-packages"} & set(Path(f.filename).parts)]
    if not frames:
        return ""
    f = frames[-1]
    code = f" `{f.line.strip()}`" if f.line else ""
    return f"\n  raised in {f.name}, line {f.lineno}:{code}"

