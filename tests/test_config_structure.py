"""The shape of the code: course_lib (what the chapters teach, what a learner installs) has no
import circle, does not reach into the machinery that builds and publishes the book, and its
ground floor (the models and their training, course_lib/*.py) imports nothing from the page
layer (course_lib.pages, course_lib.widgets, course_lib.exercises; ARCHITECTURE.md)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MACHINERY = ("coursekit", "benchmarks", "tools", "nbformat", "nbgrader", "yaml", "sphinx", "myst_parser")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The modules `path` imports, anywhere in its code, relative imports resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found |= {f"{base}.{alias.name}" for alias in node.names} | {base}
    return found


def find_circle(graph):
    """One import circle as a list of modules, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_the_circle_finder_finds_one():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


def test_course_lib_does_not_reach_into_the_publishing_machinery():
    """What builds, tests and publishes the book (coursekit, benchmarks, tools, nbformat, nbgrader,
    Sphinx) is not imported by anything a learner installs."""
    reached = {
        module_name(p): sorted(m for m in imports(p) if m.split(".")[0] in MACHINERY)
        for p in (ROOT / "course_lib").rglob("*.py")
    }
    reached = {k: v for k, v in reached.items() if v}
    assert not reached, reached


PAGE_LAYER = ("course_lib.pages", "course_lib.widgets", "course_lib.exercises")


def page_layer_imports(path: Path) -> list[str]:
    """What `path` imports from the page layer (top-level and function-local imports alike)."""
    return sorted(m for m in imports(path) if any(m == p or m.startswith(p + ".") for p in PAGE_LAYER))


def ground_floor() -> list[Path]:
    return sorted((ROOT / "course_lib").glob("*.py"))


def test_the_ground_floor_imports_nothing_from_the_page_layer():
    """The models, their losses, training, data and decoding (course_lib/*.py) stand on their own:
    the pages, the explorers and the exercises' checks import them, never the reverse."""
    floor = ground_floor()
    print(f"{len(floor)} ground-floor modules:", " ".join(p.stem for p in floor))
    reached = {module_name(p): page_layer_imports(p) for p in floor}
    reached = {k: v for k, v in reached.items() if v}
    assert not reached, reached


def test_every_subpackage_of_course_lib_is_a_page_layer_one():
    """A new subpackage must be placed: the ground floor is course_lib/*.py, the rest page layer."""
    on_disk = {module_name(p.parent) for p in (ROOT / "course_lib").rglob("__init__.py")} - {"course_lib"}
    assert on_disk == set(PAGE_LAYER), sorted(on_disk)


def test_the_layer_check_sees_a_page_import_even_inside_a_function(tmp_path, monkeypatch):
    """The check parses imports, local ones too, with relative imports resolved."""
    package = tmp_path / "course_lib"
    package.mkdir()
    (package / "model.py").write_text(
        "import torch\nfrom . import data\n\n\ndef figure():\n    from .pages.viz import BLUE\n"
        "    from .widgets import base\n    return BLUE, base\n"
    )
    (package / "clean.py").write_text("from .train import fit\nfrom . import attention as A\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)  # module_name() reads paths from tmp_path
    assert page_layer_imports(package / "model.py") == [
        "course_lib.pages.viz",
        "course_lib.pages.viz.BLUE",
        "course_lib.widgets",
        "course_lib.widgets.base",
    ]
    assert page_layer_imports(package / "clean.py") == []


def test_the_learner_package_is_course_lib_alone():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = config["tool"]["setuptools"]["packages"]
    assert all(p == "course_lib" or p.startswith("course_lib.") for p in packages), packages
    on_disk = {module_name(p.parent) for p in (ROOT / "course_lib").rglob("__init__.py")}
    assert set(packages) == on_disk, f"packaged {sorted(packages)}, on disk {sorted(on_disk)}"


def _trace_gpt_training_step():
    """One step of chapter 10's GPT training call on a tiny GPT: for every call of the attention
    (CausalSelfAttention.forward), the course_lib functions on the stack; and every course_lib
    function called, with its count."""
    import dataclasses
    import sys

    import torch

    from course_lib import data, train
    from course_lib.gpt import GPT, GPTConfig

    corpus = data.CharCorpus(
        vocab=None, train=torch.arange(400) % 20, val=torch.arange(200) % 20, test=torch.arange(200) % 20
    )
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=16))
    stacks, calls = [], {}

    def profile(frame, event, arg):
        if event != "call" or "/course_lib/" not in frame.f_code.co_filename:
            return
        name = frame.f_code.co_qualname
        calls[name] = calls.get(name, 0) + 1
        if name == "CausalSelfAttention.forward":
            stack, f = [], frame
            while f is not None:
                if "/course_lib/" in f.f_code.co_filename:
                    stack.append(f.f_code.co_qualname)
                f = f.f_back
            stacks.append(stack[::-1])

    sys.setprofile(profile)
    try:
        recipe = dataclasses.replace(train.GPT_RECIPE, batch_size=2, seq_len=16)
        train.train_lm(model, corpus, 1, recipe, progress=False, eval_fn=lambda m: 0.0)
    finally:
        sys.setprofile(None)
    return stacks, calls


def test_the_gpt_forward_path_is_short_and_checks_its_input_once():
    """Issue 26: from chapter 10's training call to the attention weights at most 8 course_lib
    names (the review counted about 22 in 6 files before), and the input checked once per
    forward pass, where the user calls in (GPT.forward), not again in every layer."""
    stacks, calls = _trace_gpt_training_step()
    path = stacks[0]
    print("training call -> attention:", " -> ".join(path))
    assert path[0] == "train_lm" and path[-1] == "CausalSelfAttention.forward", path
    assert len(path) <= 8, path
    checks = {name: n for name, n in calls.items() if name.startswith("check_")}
    print("input checks in one training step:", checks, "; GPT.forward calls:", calls["GPT.forward"])
    # train_lm checks its own arguments (steps, optimizer, schedule); the model only its input
    assert set(checks) <= {"check_int", "check_choice", "check_ids"}, checks
    assert checks.get("check_ids") == calls["GPT.forward"] == 1, (checks, calls)
