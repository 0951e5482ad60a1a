"""The engine behind every check: cases, comparisons, messages (see the package docstring)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

__all__ = ["ExerciseFailure", "ExerciseNotAttempted", "CheckResult", "Case"]

ATOL = 1e-5
RTOL = 1e-4


# --------------------------------------------------------------------------------------
# Outcomes
# --------------------------------------------------------------------------------------
class ExerciseFailure(AssertionError):
    """The learner's function gave a wrong result (or raised). The message says why."""

    def _render_traceback_(self):
        # IPython shows this instead of a long traceback through the checking machinery.
        return [f"\x1b[31m{type(self).__name__}\x1b[39m: {self}"]


class ExerciseNotAttempted(ExerciseFailure, NotImplementedError):
    """The learner's function still raises ``NotImplementedError`` (the student stub)."""


@dataclass
class CheckResult:
    """What a passing check returns: truthy, silent when displayed (the check already printed)."""

    name: str
    passed: int

    def __bool__(self) -> bool:
        return True

    def __str__(self) -> str:
        return f"✓ {self.name}: all {self.passed} cases passed"

    def _ipython_display_(self) -> None:  # the check printed its verdict already
        pass


@dataclass
class Case:
    """One input to try: ``fn(*args, **kwargs)``; ``description`` says what it exercises."""

    description: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    names: tuple = ()  # argument names, for the message (defaults to arg0, arg1, ...)


# --------------------------------------------------------------------------------------
# The generic engine
# --------------------------------------------------------------------------------------
def _run_cases(
    name: str,
    fn: Callable,
    reference: Callable,
    cases: list[Case],
    hint: str,
    compare: Optional[Callable[[Any, Any], Optional[str]]] = None,
    diagnose: Optional[Callable[[Case, Any, Any], Optional[str]]] = None,
) -> CheckResult:
    """Run ``fn`` and ``reference`` on every case; raise ExerciseFailure on the first mismatch.

    ``compare(got, expected)`` returns None when they agree, else a description of the
    difference. ``diagnose(case, got, expected)`` may name a common mistake.
    """
    if not callable(fn):
        raise ExerciseFailure(f"{name} expects a function, got {type(fn).__name__}: pass the "
                              f"function itself, e.g. {name}(my_function), without calling it.")
    compare = compare or _compare
    for i, case in enumerate(cases, 1):
        where = f"case {i} of {len(cases)} ({case.description}; inputs: {_describe_inputs(case)})"
        expected = reference(*_clone(case.args), **_clone(case.kwargs))
        got = _call_learner(name, fn, case, where, hint)
        problem = compare(got, expected)
        if problem is None:
            continue
        cause = diagnose(case, got, expected) if diagnose else None
        lines = [f"{name}: {where} failed.", f"  {problem}"]
        if cause:
            lines.append(f"  Likely cause: {cause}")
        lines.append(f"  Hint: {hint}")
        raise ExerciseFailure("\n".join(lines))
    result = CheckResult(name, len(cases))
    print(result)
    return result


def _call_learner(name: str, fn: Callable, case: Case, where: str, hint: str) -> Any:
    try:
        return fn(*_clone(case.args), **_clone(case.kwargs))
    except NotImplementedError as exc:
        raise ExerciseNotAttempted(
            f"{name}: not implemented yet: replace the `raise NotImplementedError` line with "
            f"your code, run that cell, then run this check again."
        ) from exc
    except Exception as exc:  # noqa: BLE001 - any error of the learner's code is feedback
        raise ExerciseFailure(
            f"{name}: your function raised {type(exc).__name__}: {exc}\n"
            f"  on {where}{_learner_frame(exc)}\n  Hint: {hint}"
        ) from exc


def _learner_frame(exc: BaseException) -> str:
    """' at line N of f: `code`' for the innermost frame outside this module, if any."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
    if not frames:
        return ""
    f = frames[-1]
    code = f" `{f.line.strip()}`" if f.line else ""
    return f"\n  raised in {f.name}, line {f.lineno}:{code}"


def _clone(x: Any) -> Any:
    """Copies of the inputs, so that neither side can modify what the other sees."""
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, tuple):
        return tuple(_clone(v) for v in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"{tuple(x.shape)} {str(x.dtype).replace('torch.', '')}"
    return repr(x)


def _describe_inputs(case: Case) -> str:
    names = case.names or tuple(f"arg{i}" for i in range(len(case.args)))
    parts = [f"{n}={_describe(a)}" for n, a in zip(names, case.args)]
    parts += [f"{k}={_describe(v)}" for k, v in case.kwargs.items()]
    return ", ".join(parts)


# --------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------
def _compare(got: Any, expected: Any, label: str = "result") -> Optional[str]:
    """None if ``got`` matches ``expected`` (tensors or tuples of tensors), else why not."""
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return (f"expected a tuple of {len(expected)} values, got {_type_name(got)}"
                    f"{f' of length {len(got)}' if isinstance(got, (tuple, list)) else ''}.")
        for j, (g, e) in enumerate(zip(got, expected)):
            problem = _compare(g, e, f"{label}[{j}]")
            if problem:
                return problem
        return None
    return _compare_tensor(got, expected, label)


def _type_name(x: Any) -> str:
    return type(x).__name__


def _compare_tensor(got: Any, expected: torch.Tensor, label: str) -> Optional[str]:
    if not isinstance(got, torch.Tensor):
        return f"{label}: expected a torch.Tensor, got {_type_name(got)}."
    if got.shape != expected.shape:
        return (f"{label}: expected shape {tuple(expected.shape)}, got shape {tuple(got.shape)}.")
    if expected.dtype == torch.bool:
        return _compare_bool(got, expected, label)
    if got.dtype == torch.bool or not (got.is_floating_point() or got.is_complex()):
        return f"{label}: expected a floating-point tensor, got dtype {got.dtype}."
    g, e = got.detach().double(), expected.detach().double()
    close = torch.isclose(g, e, rtol=RTOL, atol=ATOL, equal_nan=True)
    if bool(close.all()):
        return None
    idx = tuple(int(i) for i in (~close).nonzero()[0])
    nans = int((torch.isnan(g) & ~torch.isnan(e)).sum())
    err = (g - e).abs().nan_to_num(nan=0.0).max().item()
    size = f"{nans} unexpected NaN values" if nans else f"max abs error {err:.3g}"
    return (f"{label}: values differ ({size}); first difference at index "
            f"{list(idx)}: expected {e[idx].item():.6g}, got {g[idx].item():.6g}.")


def _compare_bool(got: torch.Tensor, expected: torch.Tensor, label: str) -> Optional[str]:
    if got.dtype != torch.bool:
        return f"{label}: expected dtype torch.bool, got {got.dtype}."
    wrong = got != expected
    if not bool(wrong.any()):
        return None
    idx = tuple(int(i) for i in wrong.nonzero()[0])
    return (f"{label}: {int(wrong.sum())} of {wrong.numel()} entries differ; first at index "
            f"{list(idx)}: expected {bool(expected[idx])}, got {bool(got[idx])}.")


def _same(a: Any, b: Any) -> bool:
    """True if two results agree (tensors or tuples of tensors), NaNs equal."""
    return _compare(a, b) is None


def _randn(gen: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=gen) * scale
