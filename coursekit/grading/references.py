"""The reference of every check: what the learner's package does not carry.

For a :class:`~course_lib.exercises.Check` (the learner writes a function), a :class:`Reference`:

* ``cases(g)``: the inputs, a list of :class:`Case` made from a seeded generator ``g`` (the
  global torch seed is also set, so that modules made with ``build`` are seeded too);
* ``solution``: the right implementation (a private one, or the chapter's own code through
  :func:`lib` when the exercise asks the learner to rewrite it);
* ``written``: when ``solution`` calls what the record forbids, a solution written from tensor
  operations as a learner would (the tests' right answer: it must pass);
* ``mistakes``: one wrong implementation per typical mistake of the record, in its order;
* ``shortcuts``: right answers that call what the record forbids (each must be refused);
* ``hidden(g)``: the cases of the hidden tests, when ``cases`` ignores ``g`` (fixed inputs).

For an :class:`~course_lib.exercises.Answer` (the learner computes a number), an
:class:`AnswerReference`: ``value()`` and one ``mistakes`` function per typical mistake, each
returning the number that mistake gives.

The modules in ``checks/`` declare them, one per chapter module of ``course_lib.exercises``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from course_lib.exercises import REGISTRY, Answer, Check, Goal, Prediction
from course_lib.exercises._variant import variant_seed

from .variants import HIDDEN_SEED_OFFSET, hidden_offset

__all__ = [
    "HIDDEN_SEED_OFFSET",
    "REFERENCES",
    "AnswerReference",
    "Case",
    "GoalReference",
    "Reference",
    "examples",
    "lib",
    "load",
    "make_cases",
    "randn",
    "stub",
]


class Case:
    """One input of a check: ``fn(*args, **kwargs)``, and what it exercises."""

    def __init__(self, description: str, *args: Any, **kwargs: Any):
        self.description, self.args, self.kwargs = description, args, kwargs


@dataclass
class Reference:
    cases: Callable[[torch.Generator], list]
    solution: Callable
    mistakes: Sequence[Callable]
    shortcuts: Sequence[Callable] = ()
    seed: int = 0
    hidden: Callable[[torch.Generator], list] | None = None
    written: Callable | None = None


@dataclass
class AnswerReference:
    value: Callable[[], float]
    mistakes: Sequence[Callable[[], float]] = field(default_factory=list)


@dataclass
class GoalReference:
    """For a :class:`~course_lib.exercises.Goal`: ``passing()`` builds an object a correct
    build hands in (e.g. the reference model, trained), ``missing()`` one that misses the bar
    (e.g. the same model untrained). The tests measure both."""

    passing: Callable[[], Any]
    missing: Callable[[], Any]


REFERENCES: dict[str, Reference | AnswerReference | GoalReference] = {}


def register(name: str, reference: Reference | AnswerReference | GoalReference) -> None:
    if name in REFERENCES:
        raise ValueError(f"two references for {name}")
    REFERENCES[name] = reference


def make_cases(name: str, hidden: bool = False) -> list[Case]:
    """The cases of check ``name`` (its hidden ones with ``hidden``), seeded, without touching
    the global random state. The seed moves with the variant (``variants.py``): the visible
    cases with its public seed, the hidden ones with its secret one."""
    ref = REFERENCES[name]
    seed = ref.seed + (hidden_offset() if hidden else variant_seed())
    make = ref.hidden if hidden and ref.hidden is not None else ref.cases
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make(torch.Generator().manual_seed(seed))


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: write your solution here")


def examples(name: str) -> dict:
    """Arguments for the record ``name``: ``right`` (passes), ``stub`` (not attempted),
    ``mistakes`` [(Mistake, args)] (each fails naming its mistake), ``shortcuts`` [args]
    (each is refused)."""
    record, ref = REGISTRY[name], REFERENCES.get(name)
    if isinstance(record, Check):
        return {
            "right": (ref.written or ref.solution,),
            "stub": (stub,),
            "mistakes": [(m, (fn,)) for m, fn in zip(record.mistakes, ref.mistakes)],
            "shortcuts": [(fn,) for fn in ref.shortcuts],
        }
    if isinstance(record, Answer):
        return {
            "right": (ref.value(),),
            "stub": (None,),
            "mistakes": [(m, (fn(),)) for m, fn in zip(record.mistakes, ref.mistakes)],
            "shortcuts": [],
        }
    if isinstance(record, Goal):
        bar = record.at_least if record.at_least is not None else record.at_most
        return {
            "right": (ref.passing(),),
            "stub": (None,),
            "mistakes": [],
            "shortcuts": [],
            "missed": (ref.missing(),),
            "typed": (bar * 1.5 if record.at_least else bar / 2,),
        }
    if isinstance(record, Prediction):
        e = record.example
        return {
            "right": (e, e),
            "stub": (None, e),
            "mistakes": [(m, (m.fn(e), e)) for m in record.mistakes],
            "shortcuts": [],
        }
    raise TypeError(name)


# --------------------------------------------------------------------------------------
# Helpers for writing references
# --------------------------------------------------------------------------------------
def load(*paths: str) -> Any:
    """A course_lib object by dotted path, e.g. ``load("attention.causal_mask")``. Several
    paths: the first that imports."""
    for n, path in enumerate(paths, 1):
        module, _, name = path.rpartition(".")
        try:
            return getattr(importlib.import_module(f"course_lib.{module}"), name)
        except (ImportError, AttributeError):
            if n == len(paths):
                raise


def lib(*paths: str) -> Callable:
    """A course_lib function, imported when first called (see :func:`load`)."""

    def call(*args, **kwargs):
        return load(*paths)(*args, **kwargs)

    call.__name__ = call.__qualname__ = paths[0]
    call.paths = paths
    return call


def randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * scale


def _load_checks() -> None:
    """Import every module of ``checks/``: each registers its references."""
    import pkgutil

    from . import checks

    for info in pkgutil.iter_modules(checks.__path__):
        importlib.import_module(f"{checks.__name__}.{info.name}")
