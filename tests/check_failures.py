"""What an exercise check says when it fails: the one way the exercise tests read it."""

from __future__ import annotations

import pytest

from course_lib.exercises import ExerciseFailure, ExerciseNotAttempted


def failure(check, *args) -> str:
    """The message of the ExerciseFailure that `check(*args)` raises for a wrong answer (not
    ExerciseNotAttempted, which would mean the check took the answer for a stub)."""
    with pytest.raises(ExerciseFailure) as info:
        check(*args)
    assert not isinstance(info.value, ExerciseNotAttempted), f"a wrong answer taken for a stub: {info.value}"
    return str(info.value)


def fails_with(check, answer, *phrases) -> str:
    """`failure(check, answer)`, which says every one of `phrases`."""
    message = failure(check, answer)
    for phrase in phrases:
        assert phrase in message, f"{phrase!r} is not in:\n{message}"
    return message
