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

Refusal is by class, not by name (issue 36):

* a **module** target (``Forbidden("course_lib.transformer")``) refuses every function of the
  module and every method of every class defined in it, and a **class** target refuses all of
  the class's own methods, construction included: a subclass or a wrapper of a course class
  runs one of them, so it is refused too; a library outside torch and course_lib named as a
  module (``Forbidden("tokenizers")``) also has its compiled objects' methods refused;
* an **aten** target (``Forbidden(aten=("nll_loss_forward", "nll_loss_nd", ...))``) refuses an
  operator however it is reached: any torch C function of that name (``torch.gru_cell``,
  ``torch._VF.gru_cell``, ``torch.ops.aten.gru_cell``, ``torch._C._nn.nll_loss_nd``) and, through
  a ``TorchDispatchMode``, the operator itself when a library function reaches it from C++
  (``F.cross_entropy`` reaches ``aten::nll_loss_forward``);
* :data:`AUTOGRAD` refuses every route to automatic differentiation: reverse mode through the
  engine itself (``backward()``, ``autograd.grad``, ``torch.autograd.functional``, a direct call
  of the engine), forward mode (dual numbers, ``torch.func.jvp``/``jacfwd``) and torch.func's
  transforms (``grad``, ``vjp``, ``jacrev``). Finite differences are not automatic
  differentiation and are not refused (a check that needs exact gradients compares to 1e-4).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
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

    target: dotted path of a function, a method (``"torch.nn.MultiheadAttention.forward"``), a C
    function (``"torch.nn.functional.scaled_dot_product_attention"``), a class (all its own
    methods) or a module (all its functions and classes). aten: names of torch operators (see
    the module's docstring). label: how the message names it (default: the target). when: for
    Python functions, a test of the call's arguments (a dict, as the function sees them); for
    aten operators, of the operator's positional arguments as dispatch sees them (a tuple), and
    then only dispatch refuses them; the call is refused only if it returns True.
    outside_torch: for C functions, refuse only calls made from code outside torch's own
    package (torch calls some of them itself, e.g. ``torch.no_grad()`` restores grad mode when
    it exits; ``torch.ops.aten.X`` counts as outside).
    """

    target: str = ""
    label: str | None = None
    when: Callable[[dict], bool] | None = None
    outside_torch: bool = False
    aten: tuple[str, ...] | str = ()

    def __post_init__(self):
        if isinstance(self.aten, str):
            object.__setattr__(self, "aten", (self.aten,))
        if not self.target and not self.aten:
            raise ValueError("Forbidden needs a target (a dotted path) or aten operator names")

    @property
    def name(self) -> str:
        return self.label or self.target or "torch's " + " / ".join(f"aten::{n}" for n in self.aten)


# Autograd in every form: what a "by hand" exercise cannot use. Turning grad mode OFF stays
# allowed (the checks run such functions under torch.no_grad()).
AUTOGRAD = (
    # every reverse-mode route ends in the engine's run_backward; forward mode makes dual numbers;
    # torch.func's transforms enter their own nesting levels: refused by the C functions' names.
    Forbidden(label="automatic differentiation (the autograd engine, forward mode, torch.func)",
              aten=("run_backward", "_make_dual", "_enter_dual_level", "_grad_increment_nesting",
                    "_jvp_increment_nesting")),
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
    Forbidden("torch.func.jacfwd"),
    Forbidden("torch.func.jvp"),
    Forbidden("torch.autograd.forward_ad.make_dual", label="forward-mode autograd (make_dual)"),
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
    """The code objects to watch for ``obj``: for a function (maybe wrapped), the one that runs
    its own body, the innermost; for a class, those of all its own methods (construction
    included); for a module, those of its functions and of its classes' methods. A decorator's
    wrapper is left out: its code is shared by every function it decorates (torch.no_grad's
    wrapper runs for GPT.generate and decoding.decode alike), so watching it would refuse, and
    name, the wrong function."""
    if isinstance(obj, types.ModuleType):
        return [code for value in vars(obj).values()
                if getattr(value, "__module__", None) == obj.__name__
                for code in _codes_of_member(value)]
    if isinstance(obj, type):
        return _class_codes(obj)
    return _function_code(obj)


def _codes_of_member(value: Any) -> list:
    if isinstance(value, type):
        return _class_codes(value)
    if callable(value):
        return _function_code(value)
    return []


def _class_codes(cls: type) -> list:
    codes = []
    for member in vars(cls).values():
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        elif isinstance(member, property):
            member = member.fget
        if callable(member) and not isinstance(member, type):
            codes += _function_code(member)
    return codes


def _function_code(obj: Any) -> list:
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
    names: dict = field(default_factory=dict)  # name of a torch C function / aten op -> Forbidden
    owners: dict = field(default_factory=dict)  # a forbidden module's name -> Forbidden (its C parts)
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
            if self.owners:
                owner = _owner_module(arg)
                for prefix, spec in self.owners.items():
                    if owner == prefix or owner.startswith(prefix + "."):
                        self._refuse(spec)
            spec = self.names.get(getattr(arg, "__name__", None))
            if (
                spec is not None
                and spec.when is None  # a test of the arguments is made where they are seen: dispatch
                and _is_torch_builtin(arg)
                and not (spec.outside_torch and _in_torch(frame.f_code.co_filename)
                         and not frame.f_code.co_filename.endswith("_ops.py"))
            ):
                self._refuse(spec)

    def _refuse(self, spec: Forbidden):
        self.seen.append(spec)
        raise ForbiddenCall(f"{spec.name} is off limits in this exercise")


def _owner_module(fn) -> str:
    """The module a C function, or the class of the object a C method is bound to, belongs to
    (the methods of a Rust or C++ extension's objects, e.g. tokenizers.Tokenizer.encode)."""
    module = getattr(fn, "__module__", None) or type(getattr(fn, "__self__", None)).__module__
    return module if isinstance(module, str) else ""


def _is_torch_builtin(fn) -> bool:
    """Whether a C function belongs to torch (a function of torch's C modules, or a method of
    one of its C classes such as the autograd engine)."""
    module = getattr(fn, "__module__", None) or type(getattr(fn, "__self__", None)).__module__
    return isinstance(module, str) and module.startswith("torch")


def _aten_mode(watch: _Watch):
    """A TorchDispatchMode that refuses the watched aten operators when they reach dispatch (from
    Python or from C++: F.cross_entropy reaches aten::nll_loss_forward inside torch)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class AtenWatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            spec = watch.names.get(func.overloadpacket.__name__)
            if spec is not None and (spec.when is None or _aten_applies(spec, args)):
                watch._refuse(spec)
            return func(*args, **(kwargs or {}))

    return AtenWatch()


def _aten_applies(spec: Forbidden, args: tuple) -> bool:
    try:
        return bool(spec.when(args))
    except Exception:
        return False


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
        watch.names.update((name, spec) for name in spec.aten)
        if not spec.target:
            continue
        obj = resolve(spec.target)
        codes = _codes(obj)
        if isinstance(obj, types.ModuleType) and not obj.__name__.startswith(("torch", "course_lib")):
            watch.owners[obj.__name__] = spec  # an extension's compiled objects: their C methods
        if codes:
            watch.codes.update((code, spec) for code in codes)
        elif not isinstance(obj, (type, types.ModuleType)):
            watch.builtins[id(obj)] = (spec, obj)
    if not watch.codes and not watch.builtins and not watch.names and not watch.owners:
        yield watch.seen
        return
    previous = sys.getprofile()
    mode = _aten_mode(watch) if watch.names else contextlib.nullcontext()
    sys.setprofile(watch.hook)
    try:
        with mode:
            yield watch.seen
    finally:
        sys.setprofile(previous)
