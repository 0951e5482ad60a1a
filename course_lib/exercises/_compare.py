"""Comparing a learner's result with the expected one, and describing inputs, for the messages.

``compare(got, expected, label)`` returns None when they agree, else one sentence saying how
they differ. It walks tuples, lists and dicts (the parts are named in the message) and compares
tensors (floats within tolerance, bools and integers exactly), numbers and anything else by ==.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

ATOL = 1e-5
RTOL = 1e-4


def compare(got: Any, expected: Any, label: str = "result") -> str | None:
    """None if ``got`` matches ``expected``, else what differs (naming the part, ``label``)."""
    if isinstance(expected, (tuple, list)):
        return _compare_sequence(got, expected, label)
    if isinstance(expected, dict):
        return _compare_dict(got, expected, label)
    if isinstance(expected, torch.Tensor):
        if isinstance(got, torch.Tensor) and got.numel() == expected.numel() == 1:
            got = got.reshape(expected.shape)  # a (1,) loss for a 0-dim one is fine
        return _compare_tensor(got, expected, label)
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return _compare_number(got, expected, label)
    if isinstance(got, torch.Tensor) or got != expected:
        return f"{label}: expected {expected!r}, got {_kind(got)}."
    return None


def same(a: Any, b: Any) -> bool:
    """True if two results agree (tensors within tolerance, NaNs equal)."""
    return compare(a, b) is None


def named(*names: str):
    """A comparison for tuples whose parts have names, e.g. named("out", "weights")."""
    def compare_named(got: Any, expected: tuple) -> str | None:
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"expected a tuple ({', '.join(names)}), got {_kind(got)}."
        for g, e, name in zip(got, expected, names):
            problem = compare(g, e, name)
            if problem:
                return problem
        return None
    return compare_named


def _kind(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    return type(x).__name__


def _compare_sequence(got: Any, expected, label: str) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != len(expected):
        return f"{label}: expected a tuple of {len(expected)} values, got {_kind(got)}."
    for j, (g, e) in enumerate(zip(got, expected)):
        problem = compare(g, e, f"{label}[{j}]")
        if problem:
            return problem
    return None


def _compare_dict(got: Any, expected: dict, label: str) -> str | None:
    if not isinstance(got, dict) or set(got) != set(expected):
        return f"{label}: expected the keys {sorted(expected)}, got {_kind(got)}."
    for key in expected:
        problem = compare(got[key], expected[key], key)
        if problem:
            return problem
    return None


def _compare_number(got: Any, expected: float, label: str) -> str | None:
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return f"{label}: expected a number, got {_kind(got)}."
    if isinstance(expected, int) and isinstance(got, int):
        return None if got == expected else f"{label}: expected {expected}, got {got}."
    if math.isclose(got, expected, rel_tol=RTOL, abs_tol=ATOL):
        return None
    return f"{label}: expected {expected:.6g}, got {got:.6g}."


def _compare_tensor(got: Any, expected: torch.Tensor, label: str) -> str | None:
    if not isinstance(got, torch.Tensor):
        return f"{label}: expected a torch.Tensor of shape {tuple(expected.shape)}, got {_kind(got)}."
    if got.shape != expected.shape:
        return f"{label}: expected shape {tuple(expected.shape)}, got shape {tuple(got.shape)}."
    if expected.dtype == torch.bool:
        if got.dtype != torch.bool:
            return f"{label}: expected dtype torch.bool, got {got.dtype}."
        return _compare_exact(got, expected, label)
    if not expected.is_floating_point():
        if got.is_floating_point() or got.dtype == torch.bool:
            return f"{label}: expected integer ids (torch.long), got dtype {got.dtype}."
        return _compare_exact(got, expected, label)
    if not got.is_floating_point():
        return f"{label}: expected a floating-point tensor, got dtype {got.dtype}."
    g, e = got.detach().double(), expected.detach().double()
    close = torch.isclose(g, e, rtol=RTOL, atol=ATOL, equal_nan=True)
    if bool(close.all()):
        return None
    idx = tuple(int(i) for i in (~close).nonzero()[0])
    nans = int((torch.isnan(g) & ~torch.isnan(e)).sum())
    err = (g - e).abs().nan_to_num(nan=0.0).max().item()
    size = f"{nans} unexpected NaN values" if nans else f"max abs error {err:.3g}"
    return (f"{label}: values differ ({size}); first difference at index {list(idx)}: "
            f"expected {e[idx].item():.6g}, got {g[idx].item():.6g}.")


def _compare_exact(got: torch.Tensor, expected: torch.Tensor, label: str) -> str | None:
    wrong = got.detach() != expected
    if not bool(wrong.any()):
        return None
    idx = tuple(int(i) for i in wrong.nonzero()[0])
    shown = (f" Expected {expected.tolist()}, got {got.tolist()}."
             if expected.numel() <= 24 else "")
    return (f"{label}: {int(wrong.sum())} of {wrong.numel()} entries differ; first at index "
            f"{list(idx)}: expected {expected[idx].tolist()}, got {got[idx].tolist()}.{shown}")


# --------------------------------------------------------------------------------------
# Tolerances for numbers the learner computes, measures or predicts
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tolerance:
    """How close a number must be: ``within(rel=0.1)``, ``within(abs=2)`` or ``within(factor=2)``
    (a factor suits quantities that vary over orders of magnitude)."""

    rel: float | None = None
    abs: float | None = None
    factor: float | None = None

    def __post_init__(self):
        given = [v for v in (self.rel, self.abs, self.factor) if v is not None]
        if len(given) != 1 or given[0] <= 0 or (self.factor is not None and self.factor <= 1):
            raise ValueError("give exactly one of rel > 0, abs > 0 or factor > 1, got "
                             f"rel={self.rel}, abs={self.abs}, factor={self.factor}")

    def accepts(self, value: float, target: float) -> bool:
        if self.rel is not None:
            return abs(value - target) <= self.rel * abs(target)
        if self.abs is not None:
            return abs(value - target) <= self.abs
        return value > 0 and target > 0 and max(value / target, target / value) <= self.factor

    # An Answer's data stores salted hashes of the grid cells that the accepted interval around
    # the expected value touches, never the value (issue 36). Cells are an eighth of the
    # tolerance wide (on a log scale for rel and factor), so a number is accepted when it is
    # within the tolerance, and refused when it is more than 1.125 tolerances away.
    CELLS = 8

    def _scale(self, value: float) -> tuple[str, float, float]:
        """(sign, position on the cells' axis, cell width) of ``value``."""
        if self.abs is not None:
            return "", value, self.abs / self.CELLS
        if value == 0 or (self.factor is not None and value < 0):
            return ("zero" if value == 0 else "negative"), 0.0, 1.0
        width = (math.log1p(self.rel) if self.rel is not None else math.log(self.factor)) / self.CELLS
        return ("-" if value < 0 else "+"), math.log(abs(value)), width

    def cell(self, value: float) -> str:
        """The grid cell of ``value``."""
        sign, x, width = self._scale(value)
        return f"{sign}{math.floor(x / width)}"

    def cells(self, value: float) -> list[str]:
        """The cells that the numbers within the tolerance of ``value`` fall in."""
        sign, x, width = self._scale(value)
        if sign in ("zero", "negative"):
            return [sign]
        if self.rel is not None:
            low, high = x + math.log1p(-min(self.rel, 0.999)), x + math.log1p(self.rel)
        else:
            low, high = x - width * self.CELLS, x + width * self.CELLS
        return [f"{sign}{k}" for k in range(math.floor(low / width), math.floor(high / width) + 1)]

    def __str__(self) -> str:
        if self.rel is not None:
            return f"within {self.rel:.0%}"
        if self.abs is not None:
            return f"within ±{self.abs:g}"
        return f"within a factor of {self.factor:g}"


def digest(salt: str, cell: str) -> str:
    """A salted hash of a grid cell (see :meth:`Tolerance.cell`)."""
    import hashlib

    return hashlib.sha256(f"{salt}|{cell}".encode()).hexdigest()[:20]


def within(rel: float | None = None, abs: float | None = None,
           factor: float | None = None) -> Tolerance:
    return Tolerance(rel, abs, factor)


def as_number(x: Any) -> float | None:
    """A Python number from an int, a float or a one-element tensor; None for anything else."""
    if isinstance(x, torch.Tensor) and x.numel() == 1:
        x = x.item()
    if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x):
        return None
    return x


# --------------------------------------------------------------------------------------
# Describing inputs
# --------------------------------------------------------------------------------------
def describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"{tuple(x.shape)} {str(x.dtype).replace('torch.', '')}"
    if isinstance(x, torch.nn.Module):
        return type(x).__name__
    if isinstance(x, (tuple, list)) and x and all(isinstance(v, torch.Tensor) for v in x):
        return f"{type(x).__name__} of {len(x)} tensors"
    text = repr(x)
    return text if len(text) <= 40 else type(x).__name__
