"""The grader's side of the exercises: the reference solutions, the cases they are run on, what
each typical mistake and each forbidden shortcut looks like, and the hidden tests.

None of this is installed for learners. The checks they run (``course_lib.exercises``) compare
with data that these references write (``python -m coursekit.grading data``); a test
regenerates the data and compares. Autograding with nbgrader adds hidden tests: the same checks
on fresh cases, compared with the references run live (:func:`hidden_cases`), so that a
function that looks its answers up in the stored data fails.

    REFERENCES["check_padding_mask"]     # a Reference: cases, solution, mistakes, shortcuts
    examples("check_padding_mask")       # arguments that pass, are "not attempted", make each mistake
    make_data("check_padding_mask")      # the data the check compares with
    with hidden_cases(): check_x(fn)     # the check on the grader's fresh cases
"""

from .data import check_data, make_data, write_data
from .hidden import hidden_cases
from .references import (
    REFERENCES,
    AnswerReference,
    Case,
    GoalReference,
    Reference,
    _load_checks,
    examples,
    lib,
    load,
    randn,
)

_load_checks()

__all__ = [
    "REFERENCES",
    "AnswerReference",
    "Case",
    "GoalReference",
    "Reference",
    "check_data",
    "examples",
    "hidden_cases",
    "lib",
    "load",
    "make_data",
    "randn",
    "write_data",
]
