"""The engine behind every check: the kinds of record, and a Check run case by case.

A record is declared once, in the topic module, and *is* the public check (it is callable):

* :class:`Check` (here): the learner writes a function; it runs on the check's cases and its
  results are compared with the expected outputs (``check_x(my_function)``);
* :class:`Answer`, :class:`Prediction` and :class:`Goal` (``_measured.py``): the learner hands in
  a number, a prediction with its reasoning, or a trained model.

What every record shares (the outcomes, :class:`Mistake`, the registry, the base class that
names, hints and reports) is in ``_record.py``; this module gathers the public names.

The cases and expected outputs of a Check (and the number of an Answer) are data
(``_data.py``), written by the reference solutions, which stay with the grader: the learner's
package holds no solution. Each record lists typical :class:`Mistake` s by their messages; the
data holds what each mistake gives on each case, so when the learner's result equals one, the
failure says "Likely cause: <message>". Hints come in steps; each failure shows the next step.
A Check also lists what is off limits (:class:`Forbidden`): calling it fails the check with a
message that says the exercise asks the learner to write it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from ._compare import compare, describe, named
from ._data import decode, read
from ._forbid import Forbidden, guard
from ._measured import Answer, Goal, Prediction
from ._record import (REGISTRY, CheckResult, ExerciseFailure, ExerciseNotAttempted, Mistake,
                      RunCase, WrongResult, _learner_frame, _Record, case_source, no_grad,
                      require_passed, set_case_source)

__all__ = ["Answer", "Check", "CheckResult", "ExerciseFailure", "ExerciseNotAttempted",
           "Forbidden", "Goal", "Mistake", "Prediction", "REGISTRY", "RunCase", "WrongResult",
           "no_grad", "require_passed", "set_case_source"]


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
        label = "hidden case" if case_source() is not None else "case"
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
        source = case_source()
        if source is not None:
            return source(self)
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
