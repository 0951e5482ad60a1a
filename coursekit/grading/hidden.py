"""Hidden tests: the learner's checks run on fresh cases, compared with the references live.

    with hidden_cases():
        check_padding_mask(my_padding_mask)   # "all 3 hidden cases passed", or a failure

The stored data (what the learner's package compares with) holds the inputs and the expected
outputs of each case; a function could look its answers up there. The hidden cases are drawn
with another seed (or, for a check on fixed inputs, from the reference's ``hidden`` cases), so
only a function that computes its answers passes them. nbgrader's autograde runs them: the
course directory written by ``python -m coursekit.release nbgrader`` puts this block in each
check cell between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``, which nbgrader
removes from the students' version and restores when it grades.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

from course_lib.exercises import Answer, Check, Goal
from course_lib.exercises._engine import RunCase, set_case_source

from .data import outcome
from .references import REFERENCES, make_cases
from .variants import goal_hidden_seed

__all__ = ["hidden_cases"]


def _source(record):
    if isinstance(record, Goal):  # the seed of the hidden held-out set
        return goal_hidden_seed()
    ref = REFERENCES[record.name]
    if isinstance(record, Answer):
        return float(ref.value()), [float(fn()) for fn in ref.mistakes]
    if not isinstance(record, Check):
        raise TypeError(record.name)
    return [_run_case(record, ref, case) for case in make_cases(record.name, hidden=True)]


def _run_case(record: Check, ref, case) -> RunCase:
    expected = outcome(record, ref.solution, case)
    if expected[0] != "result":
        raise RuntimeError(f"{record.name}: the reference raised on {case.description!r}")
    outcomes: dict[int, tuple] = {}

    def mistake_outcome(i: int):
        if i not in outcomes and i < len(ref.mistakes):
            outcomes[i] = outcome(record, ref.mistakes[i], case)
        return outcomes.get(i)

    return RunCase(
        description=case.description,
        make=lambda: (copy.deepcopy(case.args), copy.deepcopy(case.kwargs)),
        expected=expected[1],
        outcome=mistake_outcome,
    )


@contextmanager
def hidden_cases() -> Iterator[None]:
    """Inside the block, every check runs on the grader's hidden cases."""
    previous = set_case_source(_source)
    try:
        yield
    finally:
        set_case_source(previous)
