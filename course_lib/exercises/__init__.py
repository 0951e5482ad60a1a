"""Auto-checks for the exercises, one declarative record per check.

A check is a record, declared once in its topic module (``attention.py``, ``rnn.py``, ...) and
callable under its public name::

    from course_lib.exercises import check_scaled_dot_score
    check_scaled_dot_score(my_scaled_dot_score)

Four kinds (see ``_engine.py``): :class:`Check` (the learner writes a function, run on the
check's cases), :class:`Answer` (the learner computes or measures a number; the package holds
only salted hashes of it), :class:`Prediction` (the learner predicts a number and says why, an
experiment measures it, the check compares and explains) and :class:`Goal` (the check measures
the learner's trained model on held-out data against a bar). ``variant_seed()`` says which
variant of the data is in use and ``variant_params(label)`` the numbers of an Answer
exercise's statement in it (``_variant.py``). Every Check and Answer lists typical
mistakes by their messages, and hints in steps; every Check lists what it puts off limits (the
library function or torch built-in that the exercise asks the learner to write), refused while
the learner's code runs.

The cases and expected outputs are data (``data/<check>.pt``): the reference solutions that
wrote them stay with the grader (``coursekit/grading`` in the course's repository) and are not
part of this package.

Outcomes: a right answer prints ``✓ check_x: ...`` and returns a :class:`CheckResult` (silent
when displayed); a stub (``raise NotImplementedError``, or an answer still None) raises
:class:`ExerciseNotAttempted`; a wrong answer raises :class:`ExerciseFailure` (an
``AssertionError``) naming the failing case, what differs, the likely mistake and the next hint
step. A prediction never fails for being off: it prints how far off, and why.

One module per chapter holds that chapter's records (``CHAPTERS``); ``REGISTRY`` maps every
check's name to its record (the tests iterate over it).
"""

from . import (
                      a1,
                      a2,
                      a3,
                      attention,
                      debugging,
                      gpt,
                      lstm,
                      modern,
                      multihead,
                      positional,
                      rnn,
                      self_attention,
                      seq2seq,
                      seq2seq_attention,
                      tokens,
                      transformer,
)
from ._compare import within
from ._engine import (
                      REGISTRY,
                      Answer,
                      Check,
                      CheckResult,
                      ExerciseFailure,
                      ExerciseNotAttempted,
                      Goal,
                      Mistake,
                      Prediction,
                      require_passed,
)
from ._forbid import AUTOGRAD, Forbidden
from ._variant import variant_params, variant_seed

CHAPTERS = {"01": rnn, "02": lstm, "03": seq2seq, "04": seq2seq_attention, "05": attention,
            "06": self_attention, "07": multihead, "08": positional, "09": transformer, "10": gpt,
            "11": tokens, "12": modern, "a1": a1, "a2": a2, "a3": a3,
            "debugging": debugging}

globals().update(REGISTRY)  # every check under its public name: check_scaled_dot_score, ...
__all__ = ["AUTOGRAD", "CHAPTERS", "REGISTRY", "Answer", "Check", "CheckResult", "ExerciseFailure",
           "ExerciseNotAttempted", "Forbidden", "Goal", "Mistake", "Prediction", "require_passed",
           "variant_params", "variant_seed", "within", *REGISTRY]
