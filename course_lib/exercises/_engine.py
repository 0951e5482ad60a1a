"""The engine behind every check: the three kinds of record, running them, the messages.

A record is declared once, in the topic module, and *is* the public check (it is callable):

* :class:`Check`: the learner writes a function; it is run on the record's cases and compared
  with the reference (``check_x(my_function)``);
* :class:`Answer`: the learner computes or measures a number (``check_x(my_number)``);
* :class:`Prediction`: the learner predicts a number, then an experiment measures it
  (``check_x(predicted, measured)``); the check compares them and explains.

Each record lists typical :class:`Mistake` s, each a small wrong implementation (or wrong number)
with the message that names it: when the learner's result equals a mistake's, the failure
says "Likely cause: <message>". Hints come in steps; each failure shows the next step.
"""

from __future__ import annotations

import copy
import importlib
import traceback
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ._compare import Tolerance, as_number, compare, describe, named

__all__ = ["Answer", "Case", "Check", "CheckResult", "ExerciseFailure", "ExerciseNotAttempted",
           "Mistake", "Prediction", "REGISTRY", "WrongResult", "lib", "load", "no_grad", "randn"]

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
    """What a passing check returns: truthy, silent when displayed (the check printed already)."""

    name: str
    text: str

    def __bool__(self) -> bool:
        return True

    def __str__(self) -> str:
        return self.text

    def _ipython_display_(self) -> None:
        pass


class Case:
    """One input of a :class:`Check`: ``fn(*args, **kwargs)``, and what it exercises."""

    def __init__(self, description: str, *args: Any, **kwargs: Any):
        self.description, self.args, self.kwargs = description, args, kwargs


@dataclass(frozen=True)
class Mistake:
    """A typical mistake: ``fn`` makes it (same signature as the learner's function; for an
    :class:`Answer` it takes no argument and returns the wrong number; for a :class:`Prediction`
    it maps the measurement to the typical wrong prediction), ``message`` names it."""

    message: str
    fn: Callable


class Examples(NamedTuple):
    """Arguments that make a record pass, give ExerciseNotAttempted, and make each mistake."""

    right: tuple
    stub: tuple
    mistakes: list  # [(Mistake, args)]


REGISTRY: dict[str, _Record] = {}


def _stub(*args, **kwargs):
    raise NotImplementedError("Exercise: write your solution here")


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
            raise TypeError(f"{self.name}: mistakes is a list of Mistake(message, fn)")
        REGISTRY[self.name] = self
        self.__name__ = self.__qualname__ = self.name
        self.__doc__ = self.doc
        self._failures = 0

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
            text.append(f"  Likely cause: {cause}")
        if why:
            text.append(f"  Why: {why}")
        hint = self._hint()
        self._failures += 1
        if hint:
            text.append(f"  {hint}")
        return ExerciseFailure("\n".join(text))

    def _passed(self, text: str) -> CheckResult:
        print(text)
        return CheckResult(self.name, text)


# --------------------------------------------------------------------------------------
# Check: the learner writes a function
# --------------------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class Check(_Record):
    """``check(fn)``: run ``fn`` and ``reference`` on every case; fail on the first mismatch.

    name: the public name, ``check_...``; doc: what ``fn`` must do, with shapes;
    params: names of ``fn``'s positional parameters (for the messages);
    reference: the right implementation (a course_lib function via :func:`lib`, or one defined
    next to the record); cases: ``cases(g) -> [Case, ...]`` from a seeded generator ``g``
    (the global torch seed is also set to ``seed``, and restored afterwards);
    mistakes: >= 2 typical mistakes; hints: the steps, none giving the full answer.
    Optional: ``call(fn, *args, **kwargs)`` says how a function is run and its result observed
    (default ``fn(*args, **kwargs)``; e.g. run under ``torch.no_grad()``, or return the state a
    function modified); ``compare(got, expected) -> None | str`` (default: tensors, tuples,
    numbers, see ``_compare``); ``outputs``: names of the parts of a tuple result;
    ``diagnose(case, got, expected) -> None | str`` for a pattern no single mistake captures.
    """

    name: str
    doc: str
    _: KW_ONLY
    params: Sequence[str]
    reference: Callable
    cases: Callable[[torch.Generator], list]
    mistakes: Sequence[Mistake]
    hints: Sequence[str]
    seed: int = 0
    call: Callable | None = None
    compare: Callable | None = None
    outputs: Sequence[str] = ()
    diagnose: Callable | None = None
    kind = "function"

    def __post_init__(self):
        self._register()

    def __call__(self, fn: Callable) -> CheckResult:
        if not callable(fn):
            raise self._failure(f"expects a function, got {type(fn).__name__}: pass the function "
                                f"itself, e.g. {self.name}(my_function), without calling it.")
        cases = self.make_cases()
        for i, case in enumerate(cases, 1):
            where = f"case {i} of {len(cases)} ({case.description}; inputs: {self._inputs(case)})"
            expected = self.run(self.reference, case)
            try:
                got = self.run(fn, case)
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
            problem = self._compare(got, expected)
            if problem is not None:
                raise self._failure(f"{where} failed.", problem,
                                    cause=self._diagnose(case, got, expected))
        return self._passed(f"✓ {self.name}: all {len(cases)} cases passed")

    def make_cases(self) -> list:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            return self.cases(torch.Generator().manual_seed(self.seed))

    def run(self, fn: Callable, case: Case) -> Any:
        """``fn`` on a fresh copy of the case's inputs (nobody sees another's changes)."""
        args, kwargs = copy.deepcopy(case.args), copy.deepcopy(case.kwargs)
        if self.call is None:
            return fn(*args, **kwargs)
        return self.call(fn, *args, **kwargs)

    def examples(self) -> Examples:
        return Examples((self.reference,), (_stub,), [(m, (m.fn,)) for m in self.mistakes])

    def _compare(self, got: Any, expected: Any) -> str | None:
        if self.compare is not None:
            return self.compare(got, expected)
        return named(*self.outputs)(got, expected) if self.outputs else compare(got, expected)

    def _diagnose(self, case: Case, got: Any, expected: Any) -> str | None:
        """The first mistake whose result equals the learner's, else ``diagnose``'s verdict."""
        match = self.compare or compare
        for mistake in self.mistakes:
            try:
                if match(got, self.run(mistake.fn, case)) is None:
                    return mistake.message
            except Exception:
                continue
        return self.diagnose(case, got, expected) if self.diagnose else None

    def _diagnose_error(self, case: Case, error: Exception) -> str | None:
        """The mistake that raises the same error on this case, if any."""
        for mistake in self.mistakes:
            try:
                self.run(mistake.fn, case)
            except Exception as exc:
                if type(exc) is type(error) and str(exc) == str(error):
                    return mistake.message
        return None

    def _inputs(self, case: Case) -> str:
        names = list(self.params) + [f"arg{i}" for i in range(len(self.params), len(case.args))]
        parts = [f"{n}={describe(a)}" for n, a in zip(names, case.args)]
        return ", ".join(parts + [f"{k}={describe(v)}" for k, v in case.kwargs.items()])


# --------------------------------------------------------------------------------------
# Answer: the learner computes or measures a number
# --------------------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class Answer(_Record):
    """``check(number)``: the learner's number against ``reference()`` (computed when the check
    runs, e.g. by the experiment done right), within ``tolerance`` (:func:`within`).

    quantity: what the number is, e.g. "the d_k at which ...". Mistakes: ``fn()`` returns the
    number a typical mistake gives. The right value is shown only once the answer is right.
    """

    name: str
    doc: str
    _: KW_ONLY
    quantity: str
    reference: Callable[[], float]
    tolerance: Tolerance
    mistakes: Sequence[Mistake]
    hints: Sequence[str]
    kind = "answer"

    def __post_init__(self):
        self._register()

    def __call__(self, answer: Any) -> CheckResult:
        if answer is None or answer is Ellipsis:
            raise ExerciseNotAttempted(f"{self.name}: no answer yet: replace None by the number "
                                       f"({self.quantity}), then run this check again.")
        value = as_number(answer)
        if value is None:
            raise self._failure(f"expected a number ({self.quantity}), got {describe(answer)}.")
        expected = self.reference()
        if self.tolerance.accepts(value, expected):
            return self._passed(f"✓ {self.name}: {value:g} is {self.tolerance} of {expected:g}, "
                                f"{self.quantity}.")
        side = "too high" if value > expected else "too low"
        raise self._failure(f"{value:g} is not {self.tolerance} of {self.quantity} (it is {side}).",
                            cause=self._diagnose(value))

    def _diagnose(self, value: float) -> str | None:
        for mistake in self.mistakes:
            if self.tolerance.accepts(value, mistake.fn()):
                return mistake.message
        return None

    def examples(self) -> Examples:
        return Examples((self.reference(),), (None,), [(m, (m.fn(),)) for m in self.mistakes])


# --------------------------------------------------------------------------------------
# Prediction: predict, then measure
# --------------------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class Prediction(_Record):
    """``check(predicted, measured)``: is the prediction ``tolerance`` of the measurement? Either
    way, the check prints ``explanation`` (kept here, not on the page, so that reading the
    check cell does not give the answer away).

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
        self._register()

    def __call__(self, predicted: Any, measured: Any) -> CheckResult:
        if predicted is None or predicted is Ellipsis:
            raise ExerciseNotAttempted(
                f"{self.name}: no prediction yet: replace None by your prediction of "
                f"{self.quantity} BEFORE you run the experiment, then run this check again.")
        p, m = as_number(predicted), as_number(measured)
        if p is None:
            raise self._failure(f"the prediction must be a number, got {describe(predicted)}.")
        if m is None:
            raise self._failure(f"the measurement must be a number, got {describe(measured)}: "
                                "run the experiment's cell first.")
        verdict = f"you predicted {p:g}; the experiment measured {m:g}"
        if self.tolerance.accepts(p, m):
            return self._passed(f"✓ {self.name}: {verdict}, {self.tolerance}.\n"
                                f"  Why: {self.explanation}")
        side = "too high" if p > m else "too low"
        raise self._failure(f"{verdict}: the prediction is {side} (not {self.tolerance}).",
                            cause=self._diagnose(p, m), why=self.explanation)

    def _diagnose(self, p: float, m: float) -> str | None:
        for mistake in self.mistakes:
            if self.tolerance.accepts(p, mistake.fn(m)):
                return mistake.message
        return None

    def examples(self) -> Examples:
        e = self.example
        return Examples((e, e), (None, e), [(m, (m.fn(e), e)) for m in self.mistakes])


# --------------------------------------------------------------------------------------
# Helpers for writing records
# --------------------------------------------------------------------------------------
def load(*paths: str) -> Any:
    """A course_lib object by dotted path, e.g. ``load("attention.causal_mask")``. Several paths:
    the first that imports (for names that moved between modules); the last one's error is
    raised if none does."""
    for n, path in enumerate(paths, 1):
        module, _, name = path.rpartition(".")
        try:
            return getattr(importlib.import_module(f"course_lib.{module}"), name)
        except (ImportError, AttributeError):
            if n == len(paths):
                raise


def lib(*paths: str) -> Callable:
    """A course_lib function, imported when first called (see :func:`load`): the checks are
    declared without importing the library modules they compare against."""
    def call(*args, **kwargs):
        return load(*paths)(*args, **kwargs)

    call.__name__ = call.__qualname__ = paths[0]
    call.paths = paths
    return call


def randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * scale


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
