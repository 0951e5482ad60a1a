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
"""

from __future__ import annotations

import hashlib
import os

from course_lib.exercises._variant import GOAL_OFFSET, active

__all__ = ["SECRET_ENV", "derive", "goal_hidden_seed", "hidden_offset", "label", "visible_seed"]

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
