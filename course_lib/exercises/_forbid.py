"""What an exercise puts off limits, and the guard that refuses it while the learner's code runs.

An exercise that asks the learner to write ``padding_mask`` cannot be passed by calling
``course_lib.attention.padding_mask``; one that asks for a gradient by hand cannot be passed by
autograd. A check record lists what is off limits::

    forbidden=[Forbidden("course_lib.attention.padding_mask")]
    forbidden=AUTOGRAD                       # backward(), autograd.grad, enabling grad mode
    forbidden=[Forbidden("torch.nn.functional.cross_entropy", label="F.cross_entropy("
                         "label_smoothing=...)", when=lambda args: args["label_smoothing"] > 0)]

While the learner's function runs, :func:`guard` watches every call (``sys.setprofile``): a
Python function is recognised by its code object, so a name bound before the check (``from
course_lib.attention import padding_mask``), an alias or a call from inside another library
function are all caught; a C function (``F.scaled_dot_product_attention``) by its identity. The
call raises :class:`ForbiddenCall`, and the guard also remembers it, so that a learner's
``try: ... except Exception`` cannot hide it. The check then fails with a message that says the
exercise asks the learner to write it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["AUTOGRAD", "Forbidden", "ForbiddenCall", "guard", "resolve"]


class ForbiddenCall(RuntimeError):
    """Raised inside the learner's code when it calls what the exercise puts off limits."""


@dataclass(frozen=True)
class Forbidden:
    """One thing off limits while the learner's function runs.

    target: dotted path of a function, a method (``"torch.nn.MultiheadAttention.forward"``) or a
    C function (``"torch.nn.functional.scaled_dot_product_attention"``); a class means its
    ``forward``. label: how the message names it (default: the target). when: for Python
    functions, a test of the call's arguments (a dict, as the function sees them); the call is
    refused only if it returns True. outside_torch: for C functions, refuse only calls made from
    outside_torch: refuse only calls made from code outside torch's own package (torch calls
    some of them itself, e.g. ``torch.no_grad()`` restores grad mode when it exits).
    """

    target: str
    label: str | None = None
    when: Callable[[dict], bool] | None = None
    outside_torch: bool = False

    @property
    def name(self) -> str:
        return self.label or self.target


# Autograd in every form: what a "by hand" exercise cannot use. Turning grad mode OFF stays
# allowed (the checks run such functions under torch.no_grad()).
AUTOGRAD = (
    Forbidden("torch.autograd.grad"),
    Forbidden("torch.autograd.backward"),
    Forbidden("torch.Tensor.backward", label="Tensor.backward()"),
    Forbidden("torch.autograd.grad_mode.enable_grad.__enter__", label="torch.enable_grad()"),
    Forbidden(
        "torch.autograd.grad_mode.set_grad_enabled.__init__",
        label="torch.set_grad_enabled(True)",
        when=lambda args: bool(args.get("mode")),
        outside_torch=True,
    ),
    Forbidden("torch._C._set_grad_enabled", label="torch._C._set_grad_enabled", outside_torch=True),
    Forbidden("torch.func.grad"),
    Forbidden("torch.func.vjp"),
    Forbidden("torch.func.jacrev"),
)


def resolve(target: str) -> Any:
    """The object at a dotted path: the longest importable module, then attributes."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"cannot import {target!r}")


def _codes(obj: Any) -> list:
    """The code object that runs ``obj``'s own body (a function, maybe wrapped): the innermost
    one. A decorator's wrapper is left out: its code is shared by every function it decorates
    (torch.no_grad's wrapper runs for GPT.generate and decoding.decode alike), so watching it
    would refuse, and name, the wrong function."""
    if isinstance(obj, type):
        if not hasattr(obj, "forward"):
            raise ValueError(f"{obj.__name__} has no forward: name the method to forbid")
        obj = obj.forward
    codes = []
    while obj is not None:
        fn = getattr(obj, "__func__", obj)
        if hasattr(fn, "__code__"):
            codes.append(fn.__code__)
        obj = getattr(fn, "__wrapped__", None)
    return codes[-1:]


@dataclass
class _Watch:
    codes: dict = field(default_factory=dict)  # code object -> Forbidden
    builtins: dict = field(default_factory=dict)  # id(C function) -> (Forbidden, the function)
    seen: list = field(default_factory=list)  # the Forbidden entries that were called

    def hook(self, frame, event, arg):
        if event == "call":
            spec = self.codes.get(frame.f_code)
            if (
                spec is not None
                and _applies(spec, frame)
                and not (
                    spec.outside_torch
                    and frame.f_back is not None
                    and _in_torch(frame.f_back.f_code.co_filename)
                )
            ):
                self._refuse(spec)
        elif event == "c_call":
            entry = self.builtins.get(id(arg))
            if entry is not None and entry[1] is arg:
                spec = entry[0]
                if not (spec.outside_torch and _in_torch(frame.f_code.co_filename)):
                    self._refuse(spec)

    def _refuse(self, spec: Forbidden):
        self.seen.append(spec)
        raise ForbiddenCall(f"{spec.name} is off limits in this exercise")


def _applies(spec: Forbidden, frame) -> bool:
    if spec.when is None:
        return True
    try:
        return bool(spec.when(dict(frame.f_locals)))
    except Exception:  # a test that cannot read the arguments refuses nothing
        return False


_TORCH_DIR: str | None = None


def _in_torch(filename: str) -> bool:
    global _TORCH_DIR
    if _TORCH_DIR is None:
        import torch

        _TORCH_DIR = str(Path(torch.__file__).resolve().parent)
    return filename.startswith(_TORCH_DIR)


@contextmanager
def guard(forbidden: Sequence[Forbidden]) -> Iterator[list]:
    """Watch the calls made inside the block; yields the list of Forbidden entries that were
    called (empty if none). Nothing is watched when ``forbidden`` is empty."""
    watch = _Watch()
    for spec in forbidden:
        obj = resolve(spec.target)
        codes = _codes(obj)
        if codes:
            watch.codes.update((code, spec) for code in codes)
        else:
            watch.builtins[id(obj)] = (spec, obj)
    if not watch.codes and not watch.builtins:
        yield watch.seen
        return
    previous = sys.getprofile()
    sys.setprofile(watch.hook)
    try:
        yield watch.seen
    finally:
        sys.setprofile(previous)
