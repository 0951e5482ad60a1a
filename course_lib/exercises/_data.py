"""The data a check compares with: its cases, their expected outputs and what each typical
mistake gives, one file per check in ``course_lib/exercises/data/<check name>.pt``.

The files are written by the references, which stay with the grader (``python -m
coursekit.grading data`` in the repository); a test regenerates them and compares. They are
read with ``torch.load(weights_only=True)``, so they hold only tensors, numbers, strings and
containers. Anything else a case needs is encoded here:

* a module of course_lib, as the dotted path of its class, its constructor's arguments, its
  state dict and its training flag (built by the grader with ``build``);
* a ``torch.Generator``, as its state;
* another object of course_lib (a toy decoder, a GPTConfig), as its class and its attributes.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path
from typing import Any

import torch

from ._variant import data_dir as _variant_data_dir

__all__ = ["DATA_DIR", "FORMAT", "build", "decode", "encode", "read", "write"]

DATA_DIR = Path(__file__).resolve().parent / "data"
FORMAT = 1
_SPEC = "_exercise_spec"


def build(path: str, *args: Any, **kwargs: Any) -> torch.nn.Module:
    """``course_lib.<path>(*args, **kwargs)``, remembering how it was made (so that it can be
    stored as data), e.g. ``build("rnn.LSTM", 3, 4, num_layers=2)``."""
    module = _class(path)(*args, **kwargs)
    object.__setattr__(module, _SPEC, (path, args, kwargs))
    return module


@cache
def _class(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(f"course_lib.{module}"), name)


def encode(x: Any) -> Any:
    """``x`` as tensors, numbers, strings and containers."""
    if isinstance(x, torch.Tensor):
        return x.detach()  # views are stored as views (an expanded row stays one row)
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, tuple):
        return tuple(encode(v) for v in x)
    if isinstance(x, list):
        return [encode(v) for v in x]
    if isinstance(x, dict):
        return {"__dict__": [(k, encode(v)) for k, v in x.items()]}
    if isinstance(x, torch.Generator):
        return {"__generator__": x.get_state()}
    if isinstance(x, torch.nn.Module):
        spec = getattr(x, _SPEC, None)
        if spec is None:
            raise TypeError(f"a {type(x).__name__} in a case must be made with build(...)")
        path, args, kwargs = spec
        return {"__module__": path, "args": encode(args), "kwargs": encode(kwargs),
                "state": encode(dict(x.state_dict())), "training": x.training}
    cls = type(x)
    if cls.__module__.startswith("course_lib.") and hasattr(x, "__dict__"):
        return {"__object__": f"{cls.__module__}.{cls.__qualname__}", "attrs": encode(vars(x))}
    raise TypeError(f"cannot store a {cls.__name__} in an exercise's data")


def decode(x: Any) -> Any:
    """The inverse of :func:`encode` (fresh objects every call)."""
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, tuple):
        return tuple(decode(v) for v in x)
    if isinstance(x, list):
        return [decode(v) for v in x]
    if not isinstance(x, dict):
        return x
    if "__dict__" in x:
        return {k: decode(v) for k, v in x["__dict__"]}
    if "__generator__" in x:
        g = torch.Generator()
        g.set_state(x["__generator__"])
        return g
    if "__module__" in x:
        module = build(x["__module__"], *decode(x["args"]), **decode(x["kwargs"]))
        module.load_state_dict(decode(x["state"]))
        return module.train(x["training"])
    if "__object__" in x:
        module, _, name = x["__object__"].rpartition(".")
        obj = object.__new__(getattr(importlib.import_module(module), name))
        vars(obj).update(decode(x["attrs"]))
        return obj
    raise ValueError(f"unknown entry in an exercise's data: {sorted(x)}")


def path_of(name: str) -> Path:
    """Where the data of ``name`` is read from: the active variant's folder when it holds it
    (``_variant.py``), else the package's."""
    folder = _variant_data_dir()
    if folder is not None and (folder / f"{name}.pt").is_file():
        return folder / f"{name}.pt"
    return DATA_DIR / f"{name}.pt"


def write(name: str, data: dict, folder: Path | None = None) -> Path:
    """Store ``data`` (already encoded) as the data of the check ``name`` (in ``folder``, a
    variant's, or the package's)."""
    folder = Path(folder) if folder is not None else DATA_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.pt"
    torch.save({"format": FORMAT, "name": name, **data}, path)
    return path


def read(name: str) -> dict:
    """The stored data of the check ``name`` (each file read once per session)."""
    return _read_file(path_of(name), name)


@cache
def _read_file(path: Path, name: str) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the expected outputs of {name} are written by "
                                "`python -m coursekit.grading data` in the course's repository.")
    data = torch.load(path, weights_only=True)
    if data.get("format") != FORMAT or data.get("name") != name:
        raise ValueError(f"{path} is not format {FORMAT} data of {name}")
    return data
