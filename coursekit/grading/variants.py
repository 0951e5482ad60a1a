"""Variants: the exercises' data, held-out sets, number answers and hidden tests drawn from an
instructor's secret (issue 36).

    python -m coursekit.release nbgrader OUT --assignments ... --variant SECRET

From the secret, two seeds by one-way hashes: the **visible** seed, written into each
assignment's ``exercise_data/variant.json`` (the learner's data and the checks' stored cases are
drawn from it), and the **hidden** seed, never written where students can read it: the course's
``nbgrader_config.py`` passes the secret to the grading kernels (``COURSE_VARIANT_SECRET``), and
the hidden tests draw their cases and held-out sets from it. Knowing the visible seed does not
give the hidden one. The published edition is the variant without a secret: visible seed 0,
hidden offset ``HIDDEN_SEED_OFFSET``.

The book's Answer exercises whose number follows from their statement (``ex-adding-1997``,
``ex-reach-bias``) take their parameters from the visible seed
(``course_lib.exercises._variant.variant_params``): :func:`vary_statements` writes the variant's
numbers into their statements when the course is written (``STATEMENTS`` holds each statement's
sentence as a template; filled with the published parameters it is the book's sentence, word
for word), and the references (``checks/rnn.py``, ``checks/lstm.py``) compute the answer from
the same parameters.
"""

from __future__ import annotations

import hashlib
import os
import re

from course_lib.exercises._variant import GOAL_OFFSET, PUBLISHED_PARAMS, active, params_for

__all__ = [
    "SECRET_ENV",
    "STATEMENTS",
    "derive",
    "goal_hidden_seed",
    "hidden_offset",
    "label",
    "statement_text",
    "vary_statements",
    "visible_seed",
]

SECRET_ENV = "COURSE_VARIANT_SECRET"
HIDDEN_SEED_OFFSET = 1000


def derive(secret: str, purpose: str) -> int:
    """A positive 31-bit seed from the secret, one per purpose ("visible", "hidden")."""
    if not str(secret).strip():
        raise ValueError("a variant's secret must not be empty")
    digest = hashlib.sha256(f"{purpose}|{secret}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF or 1


def visible_seed(secret: str) -> int:
    return derive(secret, "visible")


def label(secret: str) -> str:
    """A short public name of the variant (for the instructor's records; reveals nothing)."""
    return "v-" + hashlib.sha256(f"label|{secret}".encode()).hexdigest()[:8]


def hidden_offset() -> int:
    """The seed offset of the hidden tests' cases: the published one, or the variant's secret
    one (the secret comes from the environment nbgrader's configuration sets)."""
    variant = active()
    if variant.data is None:
        return HIDDEN_SEED_OFFSET
    secret = os.environ.get(SECRET_ENV)
    if not secret:
        raise RuntimeError(
            f"the hidden tests of variant {variant.name} need its secret in {SECRET_ENV}: autograde "
            "from the course directory written with --variant (its nbgrader_config.py sets it)"
        )
    if visible_seed(secret) != variant.seed:
        raise RuntimeError(
            f"{SECRET_ENV} is not the secret of variant {variant.name} (its visible seed differs)"
        )
    return derive(secret, "hidden")


def goal_hidden_seed() -> int:
    """The seed of a goal's hidden held-out set."""
    return GOAL_OFFSET + hidden_offset()


# --------------------------------------------------------------------------------------
# The statements of the Answer exercises with parameters
# --------------------------------------------------------------------------------------
def _number(x: float) -> str:
    """-1.0 -> "-1", 0.5 -> "0.5"."""
    return f"{x:g}"


def _power_of_ten(x: float) -> str:
    """LaTeX of a threshold: 0.01 -> "10^{-2}", 0.003 -> "3 \\cdot 10^{-3}"."""
    mantissa, exponent = f"{x:.0e}".split("e")
    power = f"10^{{{int(exponent)}}}"
    return power if mantissa == "1" else f"{mantissa} \\cdot {power}"


def _adding(p, published: bool) -> str:
    which = (
        "Hochreiter & Schmidhuber's original adding problem (1997)"
        if published
        else "this course's version of Hochreiter & Schmidhuber's adding problem (1997)"
    )
    offset = f"{_number(p.offset)} + " if p.offset else ""
    return (
        f"In {which} the values are drawn from $\\mathcal U[{_number(p.lo)}, {_number(p.hi)}]$ and "
        f"the target is ${offset}(X_1 + X_2)/{p.divisor}$."
    )


def _reach_title(p, published: bool) -> str:
    return f"The forget bias that reaches {p.steps} steps"


def _reach(p, published: bool) -> str:
    return (
        f'Use `gradient_reach("lstm", forget_bias=b, steps={p.steps})` (the measurement of this '
        f"chapter, on sequences of {p.steps} steps) to find the **smallest** forget bias $b$ on the "
        "grid $0, 0.25, 0.5, \\dots, 4$ at which the gradient that reaches all the way back, "
        f"$k = {p.steps}$, exceeds ${_power_of_ten(p.threshold)}$."
    )


# per exercise, the sentences of its statement (title included) that hold its numbers
STATEMENTS = {"ex-adding-1997": [_adding], "ex-reach-bias": [_reach_title, _reach]}


def statement_text(exercise: str, params=None) -> list[str]:
    """The sentences of ``exercise``'s statement that hold its numbers: the book's (``params``
    None) or the ones for ``params``."""
    published = params is None or params == PUBLISHED_PARAMS[exercise]
    params = PUBLISHED_PARAMS[exercise] if params is None else params
    return [sentence(params, published) for sentence in STATEMENTS[exercise]]


def _loose(text: str) -> re.Pattern:
    """``text`` as a pattern in which any run of white space matches any other (line breaks)."""
    return re.compile(r"\s+".join(re.escape(word) for word in text.split()))


def vary_statements(nb, secret: str) -> list[str]:
    """Write the numbers of the variant of ``secret`` into the statements of the exercises of
    ``STATEMENTS`` that the notebook ``nb`` holds (in place); returns their labels. A statement
    whose sentence is not the book's raises ValueError (the template and the page drifted)."""
    seed, changed = visible_seed(secret), []
    for exercise in STATEMENTS:
        label_line = re.compile(rf"^:label:\s*{exercise}\s*$", re.MULTILINE)
        for cell in nb.cells:
            if cell.cell_type == "markdown" and label_line.search(cell.source):
                cell.source = _vary(cell.source, exercise, params_for(exercise, seed))
                changed.append(exercise)
    return changed


def _vary(source: str, exercise: str, params) -> str:
    """``source`` with the published sentences of ``exercise`` replaced by those for ``params``."""
    for book, mine in zip(statement_text(exercise), statement_text(exercise, params)):
        source, found = _loose(book).subn(lambda _, mine=mine: mine, source)
        if found != 1:
            raise ValueError(
                f"{exercise}: its statement holds the book's sentence {found} times, expected once: {book!r}"
            )
    return source
