"""The data the learner's checks compare with, made by the references.

    python -m coursekit.grading data            # write course_lib/exercises/data/*.pt
    python -m coursekit.grading data --check    # compare the committed data with a fresh run

For a Check, each case holds its inputs, the reference's output (observed through the record's
``call``) and what each typical mistake gives: its output, or the error it raises. For an
Answer, the expected number and the numbers of the mistakes.
"""

from __future__ import annotations

import copy
from typing import Any

from course_lib.exercises import REGISTRY, Answer, Check
from course_lib.exercises._compare import compare, digest
from course_lib.exercises._data import _read_file, decode, encode, read, write
from course_lib.exercises._variant import variant_seed

from .references import REFERENCES, make_cases

__all__ = ["check_data", "make_data", "outcome", "write_data"]


def outcome(record: Check, fn, case) -> tuple:
    """("result", output) or ("error", type name, message) of ``fn`` on a copy of ``case``."""
    args, kwargs = copy.deepcopy(case.args), copy.deepcopy(case.kwargs)
    try:
        return ("result", record.run(fn, args, kwargs))
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))


def make_data(name: str) -> dict:
    """The data of the check ``name`` (encoded, ready to store)."""
    record, ref = REGISTRY[name], REFERENCES[name]
    if isinstance(record, Answer):  # salted hashes of the numbers' cells, never the numbers
        salt = f"{name}|{variant_seed()}"
        hashes = lambda v: [digest(salt, c) for c in record.tolerance.cells(float(v))]  # noqa: E731
        return {
            "kind": "answer",
            "salt": salt,
            "expected": hashes(ref.value()),
            "mistakes": [hashes(fn()) for fn in ref.mistakes],
        }
    if not isinstance(record, Check):
        raise TypeError(f"{name} is a {type(record).__name__}: it has no data")
    if len(ref.mistakes) != len(record.mistakes):
        raise ValueError(
            f"{name}: the record names {len(record.mistakes)} mistakes, the "
            f"reference implements {len(ref.mistakes)}"
        )
    cases = []
    for case in make_cases(name):
        expected = outcome(record, ref.solution, case)
        if expected[0] != "result":
            raise RuntimeError(f"{name}: the reference raised on {case.description!r}: {expected}")
        mistakes = [outcome(record, fn, case) for fn in ref.mistakes]
        cases.append(
            {
                "description": case.description,
                "args": encode(case.args),
                "kwargs": encode(case.kwargs),
                "expected": encode(expected[1]),
                "mistakes": [("result", encode(o[1])) if o[0] == "result" else o for o in mistakes],
            }
        )
    return {"kind": "function", "cases": cases}


def data_names() -> list[str]:
    return sorted(n for n, r in REGISTRY.items() if isinstance(r, (Check, Answer)))


def write_data(names: list[str] | None = None, folder=None) -> list[str]:
    """Write the data of the checks ``names`` (default: every Check and Answer) into the
    package (or ``folder``, a variant's)."""
    written = []
    for name in names or data_names():
        write(name, make_data(name), folder)
        written.append(name)
    _read_file.cache_clear()
    return written


def check_data(name: str) -> list[str]:
    """How the committed data of ``name`` differs from a fresh run (empty if it does not)."""
    fresh, stored = make_data(name), read(name)
    problems = []
    if stored.get("kind") != fresh["kind"]:
        return [f"{name}: stored kind {stored.get('kind')}, fresh {fresh['kind']}"]
    if fresh["kind"] == "answer":  # the same cell, or a neighbour (float rounding across CPUs)
        for label, a, b in [
            ("expected", stored["expected"], fresh["expected"]),
            *((f"mistake {i}", x, y) for i, (x, y) in enumerate(zip(stored["mistakes"], fresh["mistakes"]))),
        ]:
            if len(set(a) & set(b)) < 2:
                problems.append(f"{name}: {label}: the stored cells are not the fresh ones")
        if len(stored["mistakes"]) != len(fresh["mistakes"]):
            problems.append(
                f"{name}: {len(stored['mistakes'])} stored mistakes, {len(fresh['mistakes'])} fresh"
            )
        return problems
    if len(stored["cases"]) != len(fresh["cases"]):
        return [f"{name}: {len(stored['cases'])} stored cases, {len(fresh['cases'])} fresh"]
    for i, (s, f) in enumerate(zip(stored["cases"], fresh["cases"]), 1):
        where = f"{name}, case {i} ({f['description']})"
        if s["description"] != f["description"]:
            problems.append(f"{where}: stored description {s['description']!r}")
        for part in ("args", "kwargs", "expected"):
            problem = _differ(decode(s[part]), decode(f[part]))
            if problem:
                problems.append(f"{where}, {part}: {problem}")
        if len(s["mistakes"]) != len(f["mistakes"]):
            problems.append(f"{where}: {len(s['mistakes'])} stored mistakes, {len(f['mistakes'])} fresh")
            continue
        for j, (a, b) in enumerate(zip(s["mistakes"], f["mistakes"])):
            if a[0] != b[0]:
                problems.append(f"{where}, mistake {j}: stored {a[0]}, fresh {b[0]}")
            elif a[0] == "error" and tuple(a) != tuple(b):
                problems.append(f"{where}, mistake {j}: stored error {a[1:]}, fresh {b[1:]}")
            elif a[0] == "result" and not _near(decode(a[1]), decode(b[1])):
                problems.append(f"{where}, mistake {j}: {_differ(decode(a[1]), decode(b[1]))}")
    return problems


def _near(a: Any, b: Any, rtol: float = 1e-2) -> bool:
    """A mistake's stored result against a fresh one: it only names the mistake, and a wrong
    formula can amplify float rounding that differs between CPUs (measured: 4e-4 relative on
    check_bptt_jacobian between an AMD and an Intel processor), so 1 % relative is the same."""
    import torch

    if _differ(a, b) is None:
        return True
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
        return bool(torch.allclose(a.double(), b.double(), rtol=rtol, atol=1e-6, equal_nan=True))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
        return all(_near(x, y, rtol) for x, y in zip(a, b))
    return False


def _differ(a: Any, b: Any) -> str | None:
    """None if two decoded values agree (tensors within the checks' tolerance)."""
    import torch

    if isinstance(a, torch.nn.Module) or isinstance(b, torch.nn.Module):
        if type(a) is not type(b):
            return f"{type(a).__name__} against {type(b).__name__}"
        return compare(dict(a.state_dict()), dict(b.state_dict()))
    if isinstance(a, torch.Generator) or isinstance(b, torch.Generator):
        return None if torch.equal(a.get_state(), b.get_state()) else "generator states differ"
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        if len(a) != len(b):
            return f"lengths {len(a)} and {len(b)}"
        for x, y in zip(a, b):
            problem = _differ(x, y)
            if problem:
                return problem
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"keys {sorted(a)} and {sorted(b)}"
        for k in a:
            problem = _differ(a[k], b[k])
            if problem:
                return f"[{k!r}] {problem}"
        return None
    if hasattr(a, "__dict__") and type(a) is type(b) and not isinstance(a, torch.Tensor):
        return _differ(vars(a), vars(b))
    return compare(a, b)
