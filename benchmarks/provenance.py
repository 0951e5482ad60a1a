"""What a sweep's run executed: the definitions it ran, the data it read, and a canary.

A committed sweep records, for every definition of `course_lib/` and `benchmarks/` that a short
smoke run of it executed, a hash of that definition's code, and a hash of the data it read. It
is stale when one of those hashes changes (the message names the definition), and only then:
adding an unused helper or rewording a docstring changes no recorded hash.

    smoke = trace_run(fn)            # fn() under a profile hook and a loss recorder
    smoke.definitions                # {"course_lib/attention.py:masked_softmax": "3f2a...", ...}
    smoke.data                       # {"pydoc_data.topics": "9c1e..."}
    smoke.losses                     # every scalar loss that .backward() was called on
    changed(recorded_definitions)    # the recorded definitions whose code differs now

A definition is a module-level function, a method, a class's header (its bases, decorators and
class-level statements, recorded whenever one of its methods or its generated __init__ runs), or
a module-level constant that a recorded definition names (followed through imports and through
other constants). Its hash is taken from the source on disk, parsed with `ast`: comments,
formatting, docstrings and the annotations of arguments and return values do not count.
Nested functions, lambdas and comprehensions count as part of the definition around them.

The canary is the smoke run's losses and results. A refactor that changes no number leaves it
identical; `benchmarks/sweep.py --rebless` then records the new hashes in seconds, with a note
of what changed. A different canary means the numbers changed: the sweep must run again.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import sys
import threading
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACKED = ("course_lib", "benchmarks")  # folders of ROOT whose definitions are recorded
TOOLING = {"benchmarks/provenance.py", "benchmarks/sweep.py", "benchmarks/kernels.py", "benchmarks/run.py"}


def _rel(filename: str) -> str | None:
    """'course_lib/attention.py' for a file under a tracked folder, else None."""
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except (ValueError, OSError):
        return None
    path = rel.as_posix()
    return (
        path
        if rel.parts and rel.parts[0] in TRACKED and rel.suffix == ".py" and path not in TOOLING
        else None
    )


def _strip_docstrings(node):
    """A copy of `node` without docstrings (an emptied body gets `pass`)."""
    node = copy.deepcopy(node)
    for part in ast.walk(node):
        body = getattr(part, "body", None)
        if (
            isinstance(part, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            part.body = body[1:] or [ast.Pass()]
    return node


def _strip_signature_annotations(node):
    """`node` (a copy) without the annotations of its functions' arguments and return values:
    with `from __future__ import annotations` they are never evaluated, so they change no number
    (modernising `Optional[int]` to `int | None` leaves every hash as it was)."""
    for part in ast.walk(node):
        if isinstance(part, ast.arg):
            part.annotation = None
        elif isinstance(part, FUNCTIONS):
            part.returns = None
    return node


def _digest(node) -> str:
    code = _strip_signature_annotations(_strip_docstrings(node))
    return hashlib.sha256(ast.unparse(code).encode()).hexdigest()[:16]


def _first_line(node) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decorators])


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass
class Module:
    """The definitions of one source file, by name, with what each names."""

    path: str  # relative to ROOT, e.g. "course_lib/attention.py"
    nodes: dict = field(default_factory=dict)  # qualname -> AST node (functions, methods, classes)
    spans: list = field(default_factory=list)  # (first line, last line, qualname) of functions
    constants: dict = field(default_factory=dict)  # NAME -> the module-level assignment
    modules: dict = field(default_factory=dict)  # local alias -> module path ("course_lib/data.py")
    imported: dict = field(default_factory=dict)  # local name -> (module path, name there)

    def header(self, qualname):
        """A class without its methods and nested classes: bases, decorators, class attributes."""
        node = copy.copy(self.nodes[qualname])
        node.body = [s for s in node.body if not isinstance(s, FUNCTIONS + (ast.ClassDef,))] or [ast.Pass()]
        return node

    def digest(self, name):
        """The hash of definition `name`: 'f', 'C.m', 'C' (its header) or a constant's name."""
        if name in self.constants:
            return _digest(self.constants[name])
        if name not in self.nodes:
            return None
        node = self.nodes[name]
        return _digest(self.header(name) if isinstance(node, ast.ClassDef) else node)

    def definition_at(self, line):
        """The function or method whose source holds `line` (outermost function), or None."""
        found = [(first, last, q) for first, last, q in self.spans if first <= line <= last]
        return min(found, key=lambda s: s[0])[2] if found else None


def _module_path(dotted: str) -> str | None:
    """'course_lib.data' -> 'course_lib/data.py' (or its package's __init__.py), if tracked."""
    parts = dotted.split(".")
    for candidate in (ROOT.joinpath(*parts).with_suffix(".py"), ROOT.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return _rel(str(candidate))
    if len(parts) == 1 and (ROOT / "benchmarks" / f"{dotted}.py").is_file():  # benchmarks on sys.path
        return f"benchmarks/{dotted}.py"
    return None


def _package_of(path: str) -> str:
    return ".".join(Path(path).with_suffix("").parts[:-1])


@cache
def _parse(path: str, _file: str, _stamp: float) -> Module:
    tree = ast.parse(Path(_file).read_text(encoding="utf-8"))
    mod = Module(path)

    def visit(body, prefix, in_class):
        for node in body:
            if isinstance(node, FUNCTIONS + (ast.ClassDef,)):
                qualname = prefix + node.name
                mod.nodes[qualname] = node
                if isinstance(node, ast.ClassDef):
                    visit(node.body, qualname + ".", True)
                else:
                    mod.spans.append((_first_line(node), node.end_lineno, qualname))
            elif not in_class and isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            mod.constants[name.id] = node

    visit(tree.body, "", False)
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _module_path(alias.name)
                if target:
                    mod.modules[alias.asname or alias.name.split(".")[0]] = target
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(path).split(".")
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            for alias in node.names:
                local = alias.asname or alias.name
                as_module = _module_path(f"{base}.{alias.name}" if base else alias.name)
                if as_module:
                    mod.modules[local] = as_module
                elif _module_path(base):
                    mod.imported[local] = (_module_path(base), alias.name)
    return mod


def module(path: str) -> Module:
    """The parsed module at `path` (relative to ROOT); re-parsed when the file changes."""
    file = ROOT / path
    return _parse(path, str(file), file.stat().st_mtime_ns)


def _named(mod: Module, node) -> set[str]:
    """The definitions ('path:name') of tracked modules that `node`'s code names: constants,
    functions and classes, through `import` and `from ... import` aliases."""
    found = set()
    for part in ast.walk(node):
        if isinstance(part, ast.Name):
            found |= _resolve(mod, part.id, None)
        elif isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name):
            found |= _resolve(mod, part.value.id, part.attr)
    return found


def _resolve(mod: Module, name: str, attr: str | None) -> set[str]:
    if name in mod.modules and attr is not None:
        target = module(mod.modules[name])
        if attr in target.constants or attr in target.nodes:
            return {f"{target.path}:{attr}"}
        return set()
    if name in mod.imported:
        path, there = mod.imported[name]
        target = module(path)
        if there in target.imported:  # re-exported
            return _resolve(target, there, attr)
        if there in target.constants or there in target.nodes:
            return {f"{path}:{there}"}
        return set()
    if name in mod.constants or name in mod.nodes:
        return {f"{mod.path}:{name}"}
    return set()


def constants_named(definitions) -> set[str]:
    """The module-level constants that `definitions` name, directly or through other constants,
    and the functions and classes those constants name (they run at import time, untraced)."""
    todo, seen = list(definitions), set()
    while todo:
        key = todo.pop()
        path, name = key.split(":", 1)
        mod = module(path)
        node = mod.constants.get(name) or mod.nodes.get(name)
        if node is None:
            continue
        from_constant = name in mod.constants or key in seen
        if isinstance(node, ast.ClassDef):
            node = mod.header(name)
        for ref in _named(mod, node):
            ref_path, ref_name = ref.split(":", 1)
            is_constant = ref_name in module(ref_path).constants
            if ref not in seen and (is_constant or from_constant):
                seen.add(ref)
                todo.append(ref)
    return seen


def digests(definitions) -> dict[str, str | None]:
    """{'path:name': hash of its code now (None if it no longer exists)}."""
    out = {}
    for key in sorted(definitions):
        path, name = key.split(":", 1)
        out[key] = module(path).digest(name) if (ROOT / path).is_file() else None
    return out


def changed(recorded: dict[str, str]) -> list[str]:
    """The recorded definitions whose code differs now, each with what happened to it."""
    now = digests(recorded)
    return [
        f"{key} ({'removed' if now[key] is None else 'changed'})"
        for key in sorted(recorded)
        if now[key] != recorded[key]
    ]


# ---------------------------------------------------------------------------
# Data read by a run: a hash per source, for the definitions that read data from outside
# ---------------------------------------------------------------------------


def _pydoc_text():
    from course_lib.data import load_text

    return load_text()


# A definition that reads data from outside the repository -> (name of the data, loader).
DATA_SOURCES = {"course_lib/data.py:load_text": ("pydoc_data.topics", _pydoc_text)}


def data_digests(definitions) -> dict[str, str]:
    """{data name: hash of its content now} for the data that `definitions` read."""
    out = {}
    for key, (name, load) in DATA_SOURCES.items():
        if key in definitions:
            out[name] = hashlib.sha256(load().encode("utf-8")).hexdigest()[:16]
    return out


# ---------------------------------------------------------------------------
# The traced run
# ---------------------------------------------------------------------------


@dataclass
class Smoke:
    """What a traced run executed and measured."""

    result: object
    definitions: dict  # 'path:name' -> hash
    data: dict  # data name -> hash
    losses: list  # the scalar losses .backward() was called on, in order


def trace_run(fn, *args, **kwargs) -> Smoke:
    """Run fn(*args, **kwargs) recording every tracked definition that runs, and the losses.

    Python functions are seen by a profile hook (sys.setprofile, also for new threads). A
    dataclass's generated __init__ lives in no file: the class of its `self` is recorded.
    Losses: torch.Tensor.backward is wrapped for the duration of the run.
    """
    import torch

    code_seen, classes_seen = set(), set()
    tracing = [True]  # threads started during the run keep the hook: it stops recording after

    def hook(frame, event, arg):
        if event != "call" or not tracing[0]:
            return
        code = frame.f_code
        code_seen.add((code.co_filename, code.co_firstlineno))
        if code.co_filename.startswith("<") and "self" in frame.f_locals:
            cls = type(frame.f_locals["self"])
            classes_seen.add(
                (getattr(sys.modules.get(cls.__module__), "__file__", "") or "", cls.__qualname__)
            )

    losses = []
    backward = torch.Tensor.backward

    def recording_backward(self, *a, **k):
        if self.numel() == 1:
            losses.append(float(self.detach()))
        return backward(self, *a, **k)

    torch.Tensor.backward = recording_backward
    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        result = fn(*args, **kwargs)
    finally:
        tracing[0] = False
        sys.setprofile(None)
        threading.setprofile(None)
        torch.Tensor.backward = backward

    ran = set()
    for filename, line in code_seen:
        path = _rel(filename)
        if path is None:
            continue
        mod = module(path)
        qualname = mod.definition_at(line)
        if qualname is None:
            continue  # module-level code (import time)
        ran.add(f"{path}:{qualname}")
        parts = qualname.split(".")
        for i in range(1, len(parts)):  # the classes around a method
            if isinstance(mod.nodes.get(".".join(parts[:i])), ast.ClassDef):
                ran.add(f"{path}:{'.'.join(parts[:i])}")
    for filename, qualname in classes_seen:
        path = _rel(filename)
        if path and qualname in module(path).nodes:
            ran.add(f"{path}:{qualname}")
    ran |= constants_named(ran)
    return Smoke(result, digests(ran), data_digests(ran), losses)


# ---------------------------------------------------------------------------
# Static reach: what a run function's code names, followed through the tracked modules
# ---------------------------------------------------------------------------

ENTRY_METHODS = ("__init__", "__post_init__", "forward", "__call__")


def _outside_raise(node):
    """The parts of `node` outside `raise` statements (an error path's helpers never run) and
    outside the classes of a type test (`isinstance(x, C)` runs none of C's code)."""
    if isinstance(node, ast.Raise):
        return
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("isinstance", "issubclass")
        and node.args
    ):
        yield node
        yield from _outside_raise(node.args[0])
        return
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _outside_raise(child)


def reachable(key: str) -> set[str]:
    """The definitions ('path:name') that the code of definition `key` names, followed through
    functions, the entry methods of classes (__init__, forward, ...) and `self.method` calls,
    skipping `raise` statements and the classes named by type tests. A static
    over-approximation of what a run can execute; the test compares it with what the smoke
    runs executed."""
    todo, seen = [key], set()
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        path, name = key.split(":", 1)
        mod = module(path)
        node = mod.nodes.get(name) or mod.constants.get(name)
        if node is None:
            continue
        found = set()
        if isinstance(node, ast.ClassDef):
            found |= {f"{path}:{name}.{m}" for m in ENTRY_METHODS if f"{name}.{m}" in mod.nodes}
            node = mod.header(name)
        for part in _outside_raise(node):
            if isinstance(part, ast.Name):
                found |= _resolve(mod, part.id, None)
            elif isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name):
                if part.value.id == "self" and "." in name:
                    owner = name.rsplit(".", 1)[0]
                    if f"{owner}.{part.attr}" in mod.nodes:
                        found.add(f"{path}:{owner}.{part.attr}")
                else:
                    found |= _resolve(mod, part.value.id, part.attr)
        todo.extend(k for k in found if k.split(":", 1)[0] not in TOOLING)
    return seen
