"""Which variant of the exercises is in use: the published one, or an instructor's private one.

An instructor writes a course in which the exercises' data, held-out sets, number answers and
hidden tests are drawn from a secret (``python -m coursekit.release nbgrader OUT --variant
SECRET``). Each assignment folder of that course then holds ``exercise_data/``: the checks' data
drawn for the variant and ``variant.json``, whose ``seed`` is the variant's public data seed
(derived from the secret by a one-way hash: the secret itself, and with it the hidden tests'
cases, cannot be recovered from it). A notebook run in that folder uses them by itself:

    variant_seed()     # 0 in the published edition; the variant's data seed otherwise
    data_dir()         # the folder whose data the checks read first (None: the package's)
    variant_params("ex-reach-bias")   # the numbers an Answer exercise's statement gives

An Answer exercise whose number follows from its statement (the book's ``ex-adding-1997`` and
``ex-reach-bias``) has parameters: the published edition's (the book's page) and, for a variant,
one of ``CHOICES[label]`` picked by the variant's seed. The course written for the variant shows
them in the statement, the exercise's code cell reads them with ``variant_params``, and the
grader computes the variant's answer from them, so a number copied from the published book is
refused. The choices hold parameters only, never answers; the tests check that each choice's
answer differs from the published one.

The folder is found in the working directory (Jupyter and nbgrader run a notebook in its own
folder), or named by the environment variable ``COURSE_EXERCISE_DATA``.
"""

from __future__ import annotations

import json
import os
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple

__all__ = ["CHOICES", "ENV", "FOLDER", "PUBLISHED_PARAMS", "AddingParams", "ReachParams",
           "Variant", "active", "data_dir", "goal_seed", "params_for", "variant_params",
           "variant_seed"]

ENV = "COURSE_EXERCISE_DATA"
FOLDER = "exercise_data"
GOAL_OFFSET = 10_000_019  # a goal's visible held-out set: apart from any training data's seed


@dataclass(frozen=True)
class Variant:
    """name: "published", or the variant's public label; seed: its public data seed (0 for the
    published one); data: the folder of its checks' data (None: the package's)."""

    name: str
    seed: int
    data: Path | None


PUBLISHED = Variant("published", 0, None)


def _folder() -> Path | None:
    named = os.environ.get(ENV)
    if named:
        return Path(named).resolve()
    here = Path.cwd() / FOLDER
    return here.resolve() if (here / "variant.json").is_file() else None


@cache
def _read(folder: Path) -> Variant:
    meta = folder / "variant.json"
    if not meta.is_file():
        raise FileNotFoundError(
            f"{meta} is missing: {ENV}={folder} must name a folder written by "
            "`python -m coursekit.release nbgrader ... --variant SECRET`"
        )
    info = json.loads(meta.read_text(encoding="utf-8"))
    seed = info.get("seed")
    if not isinstance(seed, int) or seed <= 0:
        raise ValueError(f"{meta}: 'seed' must be a positive integer, got {seed!r}")
    return Variant(str(info.get("name", "variant")), seed, folder)


def active() -> Variant:
    """The variant in use here (see the module's docstring)."""
    folder = _folder()
    return PUBLISHED if folder is None else _read(folder)


def variant_seed() -> int:
    """0 in the published edition, the variant's public data seed in an instructor's variant:
    every random draw of a notebook's data starts from it."""
    return active().seed


def data_dir() -> Path | None:
    return active().data


def goal_seed() -> int:
    """The seed of a goal's visible held-out set (the hidden tests use a secret one)."""
    return GOAL_OFFSET + variant_seed()


# --------------------------------------------------------------------------------------
# The parameters of the Answer exercises whose number follows from their statement
# --------------------------------------------------------------------------------------
class AddingParams(NamedTuple):
    """ex-adding-1997: the values X ~ U[lo, hi], the target offset + (X_1 + X_2) / divisor."""

    lo: float
    hi: float
    offset: float
    divisor: int


class ReachParams(NamedTuple):
    """ex-reach-bias: sequences of ``steps`` steps, the gradient at k = steps above ``threshold``."""

    steps: int
    threshold: float


PUBLISHED_PARAMS = {
    "ex-adding-1997": AddingParams(-1, 1, 0.5, 4),  # Hochreiter & Schmidhuber (1997)
    "ex-reach-bias": ReachParams(50, 1e-2),
}

# What a variant picks from (parameters only; the tests check each one's answer against the
# published answer, the typical mistakes, and, for the reach, its distance from the threshold).
CHOICES = {
    "ex-adding-1997": [
        AddingParams(-1, 1, 0.5, 3), AddingParams(-1, 1, 0, 5), AddingParams(-2, 1, 0.5, 5),
        AddingParams(-2, 2, 1, 3), AddingParams(-2, 2, 0, 5), AddingParams(-3, 1, 0.5, 7),
        AddingParams(-1, 2, 1, 7), AddingParams(-3, 2, 0.5, 3), AddingParams(-2, 3, 1, 7),
        AddingParams(-3, 3, 0, 5),
    ],
    "ex-reach-bias": [
        ReachParams(20, 1e-2), ReachParams(20, 3e-3), ReachParams(20, 1e-3),
        ReachParams(25, 1e-3), ReachParams(30, 3e-3), ReachParams(30, 1e-3),
        ReachParams(40, 1e-1), ReachParams(60, 1e-1), ReachParams(75, 1e-1),
        ReachParams(100, 1e-1), ReachParams(100, 3e-2),
    ],
}


def params_for(exercise: str, seed: int) -> NamedTuple:
    """The parameters of ``exercise`` (a label of CHOICES) under the variant whose data seed is
    ``seed``: the published ones for seed 0, else ``CHOICES[exercise][i]`` with i from a hash of
    the label and the seed."""
    if exercise not in CHOICES:
        raise ValueError(f"exercise must be one of {sorted(CHOICES)}, got {exercise!r}")
    if seed == 0:
        return PUBLISHED_PARAMS[exercise]
    choices = CHOICES[exercise]
    digest = hashlib.sha256(f"params|{exercise}|{seed}".encode()).digest()
    return choices[int.from_bytes(digest[:4], "big") % len(choices)]


def variant_params(exercise: str) -> NamedTuple:
    """The numbers the statement of ``exercise`` gives in the variant in use: the book's in the
    published edition (e.g. ``variant_params("ex-reach-bias")`` is ``ReachParams(steps=50,
    threshold=0.01)``), the course's own in an instructor's variant."""
    return params_for(exercise, variant_seed())
