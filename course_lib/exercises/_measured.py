"""The kinds of check that take a number or a trained model, not a function:

* :class:`Answer`: the learner computes or measures a number (``check_x(my_number)``); the
  package holds only salted hashes of it;
* :class:`Prediction`: the learner predicts a number and says why, then an experiment measures
  it (``check_x(predicted, measured, reasoning)``); the check compares and explains the gap, and
  an honest miss is not a failure;
* :class:`Goal`: the check measures the learner's trained model on held-out data against a bar
  (``check_x(model)``).

What they share with :class:`~course_lib.exercises._engine.Check` is in ``_record.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from ._compare import Tolerance, as_number, describe, digest
from ._data import read
from ._forbid import Forbidden, guard
from ._record import (CheckResult, ExerciseNotAttempted, Mistake, WrongResult, _learner_frame,
                      _Record, case_source)
from ._variant import goal_seed

__all__ = ["Answer", "Goal", "MIN_REASONING_WORDS", "Prediction"]


# --------------------------------------------------------------------------------------
# Answer: the learner computes or measures a number
# --------------------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class Answer(_Record):
    """``check(number)``: the learner's number against the expected one (in the data, written by
    the reference experiment), within ``tolerance`` (:func:`within`).

    quantity: what the number is, e.g. "the d_k at which ...". Mistakes: the numbers typical
    mistakes give are in the data. The right value is shown only once the answer is right.
    """

    name: str
    doc: str
    _: KW_ONLY
    quantity: str
    tolerance: Tolerance
    mistakes: Sequence[Mistake]
    hints: Sequence[str]
    kind = "answer"

    def __post_init__(self):
        self._register()

    def __call__(self, answer: Any) -> CheckResult:
        self._start()
        if answer is None or answer is Ellipsis:
            raise ExerciseNotAttempted(f"{self.name}: no answer yet: replace None by the number "
                                       f"({self.quantity}), then run this check again.")
        value = as_number(answer)
        if value is None:
            raise self._failure(f"expected a number ({self.quantity}), got {describe(answer)}.")
        source = case_source()
        if source is not None:  # the grader's hidden test: the reference's numbers, live
            expected, wrong = source(self)
            right = self.tolerance.accepts(value, expected)
            cause = next((m.message for m, w in zip(self.mistakes, wrong)
                          if self.tolerance.accepts(value, w)), None)
        else:  # the learner's package holds salted hashes of the numbers, never the numbers
            data = read(self.name)
            mine = digest(data["salt"], self.tolerance.cell(value))
            right = mine in data["expected"]
            cause = next((m.message for m, w in zip(self.mistakes, data["mistakes"]) if mine in w),
                         None)
        if right:
            return self._passed(f"✓ {self.name}: {value:g} is right ({self.tolerance} of "
                                f"{self.quantity}).")
        raise self._failure(f"{value:g} is not {self.tolerance} of {self.quantity}.", cause=cause)

    def values(self) -> tuple[float, list[float]]:
        """(the expected number, the numbers of the mistakes): the grader's hidden source only
        (the learner's data holds hashes)."""
        source = case_source()
        if source is None:
            raise RuntimeError(f"{self.name}: the expected number is the grader's; the data "
                               "holds only salted hashes of it")
        return source(self)


# --------------------------------------------------------------------------------------
# Prediction: predict, then measure, then compare
# --------------------------------------------------------------------------------------
_NOT_ASKED = object()
MIN_REASONING_WORDS = 5


@dataclass(eq=False, repr=False)
class Prediction(_Record):
    """``check(predicted, measured, reasoning)``: the learner predicted a number and said why,
    BEFORE the experiment measured it. The check says how far off the prediction is and
    explains the measurement (``explanation``, kept here, not on the page); a miss prints
    "✗" and the misconception it suggests, and is not an error: a prediction counts for being
    made and reasoned, not for being right. Only a missing prediction or reasoning raises
    (:class:`ExerciseNotAttempted`).

    quantity: what is predicted; example: a typical measurement (for the tests and the docs);
    mistakes: ``fn(measured)`` returns the prediction a typical misconception gives.
    """

    name: str
    doc: str
    _: KW_ONLY
    quantity: str
    tolerance: Tolerance
    explanation: str
    example: float
    mistakes: Sequence[Mistake]
    hints: Sequence[str] = ()
    kind = "prediction"

    def __post_init__(self):
        if not all(callable(m.fn) for m in self.mistakes):
            raise TypeError(f"{self.name}: a prediction's mistakes map the measurement to the "
                            "prediction the misconception gives: Mistake(message, fn)")
        self._register()

    def __call__(self, predicted: Any, measured: Any, reasoning: Any = _NOT_ASKED) -> CheckResult:
        self._start()
        if predicted is None or predicted is Ellipsis:
            raise ExerciseNotAttempted(
                f"{self.name}: no prediction yet: replace None by your prediction of "
                f"{self.quantity} BEFORE you run the experiment, then run this check again.")
        if reasoning is not _NOT_ASKED and len(str(reasoning or "").split()) < MIN_REASONING_WORDS:
            raise ExerciseNotAttempted(
                f"{self.name}: say in one sentence (at least {MIN_REASONING_WORDS} words) why you "
                "expect your number, in the prediction cell, then run this check again.")
        p, m = as_number(predicted), as_number(measured)
        if p is None:
            raise self._failure(f"the prediction must be a number, got {describe(predicted)}.")
        if m is None:
            raise self._failure(f"the measurement must be a number, got {describe(measured)}: "
                                "run the experiment's cell first.")
        verdict = f"you predicted {p:g}; the experiment measured {_shown(m)}"
        if self.tolerance.accepts(p, m):
            return self._passed(f"✓ {self.name}: {verdict}: {self.tolerance}.\n"
                                f"  Why: {self.explanation}", hit=True)
        lines = [f"✗ {self.name}: {verdict}: {_gap(p, m, self.tolerance)}.",
                 "  A miss is part of the exercise: compare your reasoning with the explanation."]
        cause = self._diagnose(p, m)
        if cause:
            lines.append(f"  Likely misconception: {cause}")
        lines.append(f"  Why: {self.explanation}")
        return self._passed("\n".join(lines), hit=False)

    def _diagnose(self, p: float, m: float) -> str | None:
        for mistake in self.mistakes:
            if self.tolerance.accepts(p, mistake.fn(m)):
                return mistake.message
        return None


def _shown(m: float) -> str:
    """A measurement as the learner reads it: three significant digits (a noisy mean or timing
    has no more), whole numbers with thousands separators from 1000 on."""
    return f"{m:,.0f}" if abs(m) >= 1000 else f"{m:.3g}"


def _gap(p: float, m: float, tolerance: Tolerance) -> str:
    """How far the prediction is from the measurement, in the tolerance's own terms."""
    side = "too high" if p > m else "too low"
    if tolerance.factor is not None and p > 0 and m > 0:
        size = f"a factor of {max(p / m, m / p):.3g}"
    elif tolerance.rel is not None and m != 0:
        size = f"{abs(p - m) / abs(m):.0%}"
    else:
        size = f"{abs(p - m):.3g}"
    return f"{side} by {size} (the check counts {tolerance} as close)"


# --------------------------------------------------------------------------------------
# Goal: a result of the learner's model must reach a bar
# --------------------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class Goal(_Record):
    """``check(obj)``: the check measures what the learner built (a held-out accuracy, bits per
    character) and compares it with a bar: ``at_least`` (or ``at_most``). The learner hands in
    the object measured (``expects`` says what: a trained model, a decoding function), never a
    number: a typed number earns nothing (issue 36).

    measure: ``measure(obj, seed) -> float``, public code that draws the held-out set from
    ``seed`` (the variant's visible goal seed in the learner's notebook, a secret one under the
    grader's hidden tests), runs the learner's model on it and returns the metric; it raises
    :class:`WrongResult` when ``obj`` has the wrong form. forbidden: refused while the
    learner's code runs inside the measurement. The bar is set well below what a correct build
    reaches in the same budget on every seed tried (the record's ``doc`` says how far), so that
    a correct build passes on any CPU. mistakes: messages for typical reasons a build misses
    the bar (shown all together on a miss: no single number tells them apart).
    """

    name: str
    doc: str
    _: KW_ONLY
    quantity: str
    hints: Sequence[str]
    measure: Callable[[Any, int], float]
    expects: str
    at_least: float | None = None
    at_most: float | None = None
    mistakes: Sequence[Mistake] = ()
    forbidden: Sequence[Forbidden] = ()
    kind = "goal"

    def __post_init__(self):
        if (self.at_least is None) == (self.at_most is None):
            raise ValueError(f"{self.name}: give exactly one of at_least and at_most")
        if not callable(self.measure) or not self.expects:
            raise ValueError(f"{self.name}: a goal measures the learner's object itself: give "
                             "measure(obj, seed) and say what obj is (expects=...)")
        self._register()

    def __call__(self, obj: Any) -> CheckResult:
        self._start()
        if obj is None or obj is Ellipsis:
            raise ExerciseNotAttempted(f"{self.name}: nothing to measure yet: pass {self.expects} "
                                       "(run the cells above that build and train it first).")
        if as_number(obj) is not None or isinstance(obj, (str, bool)):
            raise self._failure(
                f"got the number {describe(obj)}: this check measures {self.quantity} itself, on "
                f"held-out data, from {self.expects}; pass that, not a number.")
        source = case_source()
        hidden = source is not None
        seed = source(self) if hidden else goal_seed()
        with guard(self.forbidden) as refused:
            try:
                value, error = self.measure(obj, seed), None
            except Exception as exc:
                value, error = None, exc
        if refused:
            names = ", ".join(dict.fromkeys(f.name for f in self.forbidden))
            raise self._failure(f"your model called {refused[0].name}, which this assignment puts "
                                "off limits.", f"It asks you to write it yourself (off limits: "
                                f"{names}).")
        if isinstance(error, NotImplementedError):
            raise ExerciseNotAttempted(f"{self.name}: part of your model is not implemented yet: "
                                       "finish the parts above first.") from error
        if isinstance(error, WrongResult):
            raise self._failure(str(error)) from None
        if error is not None:
            raise self._failure(f"measuring {self.expects} raised {type(error).__name__}: {error}"
                                f"{_learner_frame(error)}") from error
        v = as_number(value)
        if v is None:
            raise self._failure(f"the measurement gave {describe(value)}, not a number.")
        bar = self.at_least if self.at_least is not None else self.at_most
        reached = v >= bar if self.at_least is not None else v <= bar
        side = "at least" if self.at_least is not None else "at most"
        where = "the grader's hidden held-out set" if hidden else "the held-out set"
        if reached:
            return self._passed(f"✓ {self.name}: {self.quantity} {v:.4g} on {where}, the goal is "
                                f"{side} {bar:g}.")
        causes = "; ".join(m.message for m in self.mistakes) or None
        raise self._failure(f"{self.quantity} is {v:.4g} on {where}; the goal is {side} {bar:g}.",
                            cause=causes)
