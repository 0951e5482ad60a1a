"""The engine behind every check: the three kinds of record, running them, the messages.

A record is declared once, in the topic module, and *is* the public check (it is callable):

* :class:`Check`: the learner writes a function; it runs on the check's cases and its results
  are compared with the expected outputs (``check_x(my_function)``);
* :class:`Answer`: the learner computes or measures a number (``check_x(my_number)``);
* :class:`Prediction`: the learner predicts a number and says why, then an experiment measures
  it (``check_x(predicted, measured, reasoning)``); the check compares and explains the gap, and
  an honest miss is not a failure.

The cases and expected outputs of a Check (and the number of an Answer) are data
(``_data.py``), written by the reference solutions, which stay with the grader: the learner's
package holds no solution. Each record lists typical :class:`Mistake` s by their messages; the
data holds what each mistake gives on each case, so when the learner's result equals one, the
failure says "Likely cause: <message>". Hints come in steps; each failure shows the next step.
A Check also lists what is off limits (:class:`Forbidden`): calling it fails the check with a
message that says the exercise asks the learner to write it.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

import torch

from ._compare import Tolerance, as_number, compare, describe, digest, named
from ._data import decode, read
from ._forbid import Forbidden, guard
from ._variant import goal_seed

__all__ = ["Answer", "Check", "CheckResult", "ExerciseFailure", "ExerciseNotAttempted",
           "Forbidden", "Goal", "Mistake", "Prediction", "REGISTRY", "RunCase", "WrongResult",
           "no_grad", "require_passed", "set_case_source"]

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


# --------------------------------------------------------------------------------------
# Check: the learner writes a function
# --------------------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class Check(_Record):
    """``check(fn)``: run ``fn`` on every case; fail on the first result that differs from the
    expected one.

    name: the public name, ``check_...``; doc: what ``fn`` must do, with shapes;
    params: names of ``fn``'s positional parameters (for the messages);
    mistakes: >= 2 typical mistakes (their results are in the data); hints: the steps, none
    giving the full answer; forbidden: what ``fn`` may not call (see ``_forbid.py``);
    no_shortcut: when nothing is forbidden, why (no library function or torch built-in does it).
    Optional: ``call(fn, *args, **kwargs)`` says how a function is run and its result observed
    (default ``fn(*args, **kwargs)``; e.g. run under ``torch.no_grad()``, or return the state a
    function modified); ``compare(got, expected) -> None | str`` (default: tensors, tuples,
    numbers, see ``_compare``); ``outputs``: names of the parts of a tuple result;
    ``diagnose(args, kwargs, got, expected) -> None | str`` for a pattern no single mistake
    captures; ``cause_label``: how the matched mistake or the diagnosis is introduced ("Likely
    cause"; a debugging exercise, whose messages report a measurement and never the bug, says
    "Measured").
    """

    name: str
    doc: str
    _: KW_ONLY
    params: Sequence[str]
    mistakes: Sequence[Mistake]
    hints: Sequence[str]
    forbidden: Sequence[Forbidden] = ()
    no_shortcut: str = ""
    call: Callable | None = None
    compare: Callable | None = None
    outputs: Sequence[str] = ()
    diagnose: Callable | None = None
    cause_label: str = "Likely cause"
    kind = "function"

    def __post_init__(self):
        if not self.forbidden and not self.no_shortcut:
            raise ValueError(f"{self.name}: list what is off limits (forbidden=...), or say why "
                             "nothing is (no_shortcut=...)")
        self._register()

    def __call__(self, fn: Callable) -> CheckResult:
        self._start()
        if not callable(fn):
            raise self._failure(f"expects a function, got {type(fn).__name__}: pass the function "
                                f"itself, e.g. {self.name}(my_function), without calling it.")
        cases = self.cases()
        label = "hidden case" if _SOURCE is not None else "case"
        for i, case in enumerate(cases, 1):
            args, kwargs = case.make()
            where = (f"{label} {i} of {len(cases)} ({case.description}; inputs: "
                     f"{self._inputs(args, kwargs)})")
            try:
                got = self.run_learner(fn, case)
            except _Refused as refused:
                raise self._refused(refused.spec) from None
            except WrongResult as exc:
                raise self._failure(f"{where} failed.", str(exc)) from None
            except NotImplementedError as exc:
                raise ExerciseNotAttempted(
                    f"{self.name}: not implemented yet: replace the `raise NotImplementedError` "
                    f"line with your code, run that cell, then run this check again.") from exc
            except Exception as exc:
                raise self._failure(f"your function raised {type(exc).__name__}: {exc}",
                                    f"on {where}{_learner_frame(exc)}",
                                    cause=self._diagnose_error(case, exc)) from exc
            problem = self._compare(got, case.expected)
            if problem is not None:
                raise self._failure(f"{where} failed.", problem,
                                    cause=self._diagnose(case, got))
        return self._passed(f"✓ {self.name}: all {len(cases)} {label}s passed")

    def cases(self) -> list[RunCase]:
        """The cases to run: the stored data, or the grader's hidden cases."""
        if _SOURCE is not None:
            return _SOURCE(self)
        return [_stored_case(c) for c in read(self.name)["cases"]]

    def run(self, fn: Callable, args: tuple, kwargs: dict) -> Any:
        """``fn`` on the inputs, observed through ``call`` if the record has one."""
        if self.call is None:
            return fn(*args, **kwargs)
        return self.call(fn, *args, **kwargs)

    def run_learner(self, fn: Callable, case: RunCase) -> Any:
        """Run the learner's ``fn`` on fresh inputs of ``case``, with ``forbidden`` refused."""
        args, kwargs = case.make()
        with guard(self.forbidden) as refused:
            try:
                got, error = self.run(fn, args, kwargs), None
            except Exception as exc:
                got, error = None, exc
        if refused:  # even if the learner's code caught the error
            raise _Refused(refused[0])
        if error is not None:
            raise error
        return got

    def _refused(self, spec: Forbidden) -> ExerciseFailure:
        return self._failure(
            f"your function called {spec.name}, which this exercise puts off limits.",
            "The exercise asks you to write it yourself, so the check does not accept it here: "
            "write the computation from tensor operations (what is off limits: "
            f"{', '.join(dict.fromkeys(f.name for f in self.forbidden))}).")

    def _compare(self, got: Any, expected: Any) -> str | None:
        if self.compare is not None:
            return self.compare(got, expected)
        return named(*self.outputs)(got, expected) if self.outputs else compare(got, expected)

    def _diagnose(self, case: RunCase, got: Any) -> str | None:
        """The first mistake whose result equals the learner's, else ``diagnose``'s verdict."""
        match = self.compare or compare
        for i, mistake in enumerate(self.mistakes):
            outcome = case.outcome(i)
            if outcome and outcome[0] == "result":
                try:
                    if match(got, outcome[1]) is None:
                        return mistake.message
                except Exception:
                    continue
        if self.diagnose is None:
            return None
        args, kwargs = case.make()
        return self.diagnose(args, kwargs, got, case.expected)

    def _diagnose_error(self, case: RunCase, error: Exception) -> str | None:
        """The mistake that raises the same error on this case, if any."""
        for i, mistake in enumerate(self.mistakes):
            outcome = case.outcome(i)
            if outcome and outcome[0] == "error" and outcome[1:] == (type(error).__name__,
                                                                     str(error)):
                return mistake.message
        return None

    def _inputs(self, args: tuple, kwargs: dict) -> str:
        names = list(self.params) + [f"arg{i}" for i in range(len(self.params), len(args))]
        parts = [f"{n}={describe(a)}" for n, a in zip(names, args)]
        return ", ".join(parts + [f"{k}={describe(v)}" for k, v in kwargs.items()])


class _Refused(Exception):
    def __init__(self, spec: Forbidden):
        self.spec = spec


def _stored_case(data: dict) -> RunCase:
    outcomes = [tuple(o) if o else None for o in data["mistakes"]]
    return RunCase(description=data["description"],
                   make=lambda: (decode(data["args"]), decode(data["kwargs"])),
                   expected=decode(data["expected"]),
                   outcome=lambda i: _decoded(outcomes[i]) if i < len(outcomes) else None)


def _decoded(outcome: tuple | None) -> tuple | None:
    if outcome is None or outcome[0] != "result":
        return outcome
    return ("result", decode(outcome[1]))


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
        if _SOURCE is not None:  # the grader's hidden test: the reference's numbers, live
            expected, wrong = _SOURCE(self)
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
        if _SOURCE is None:
            raise RuntimeError(f"{self.name}: the expected number is the grader's; the data "
                               "holds only salted hashes of it")
        return _SOURCE(self)


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
        verdict = f"you predicted {p:g}; the experiment measured {m:g}"
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
        hidden = _SOURCE is not None
        seed = _SOURCE(self) if hidden else goal_seed()
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

