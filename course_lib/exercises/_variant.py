"""Which variant of the exercises is in use: the published one, or an instructor's private one.

An instructor writes a course in which the exercises' data, held-out sets, number answers and
hidden tests are drawn from a secret (``python -m coursekit.release nbgrader OUT --variant
SECRET``). Each assignment folder of that course then holds ``exercise_data/``: the checks' data
drawn for the variant and ``variant.json``, whose ``seed`` is the variant's public data seed
(derived from the secret by a one-way hash: the secret itself, and with it the hidden tests'
cases, cannot be recovered from it). A notebook run in that folder uses them by itself:

    variant_seed()     # 0 in the published edition; the variant's data seed otherwise
    data_dir()         # the folder whose data the checks read first (None: the package's)

The folder is found in the working directory (Jupyter and nbgrader run a notebook in its own
folder), or named by the environment variable ``COURSE_EXERCISE_DATA``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["ENV", "FOLDER", "Variant", "active", "data_dir", "goal_seed", "variant_seed"]

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
