"""The trees of the editions' branches (`make editions`, tools/editions.py), which the Colab and
Binder buttons open: each holds every notebook of the book at the path the buttons use, and what
Binder and pip need to run it; the student edition's holds no solution.

Needs _build/editions; without it the tests skip and say why, except under CI=true, where they
fail (`make test` writes it).
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
EDITIONS = ROOT / "_build" / "editions"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
BRANCHES = CONFIG["sphinx"]["config"]["course_launch_branches"]
NOTEBOOKS = sorted(p.relative_to(ROOT) for p in (ROOT / "book").glob("*.ipynb"))

pytestmark = pytest.mark.site


@pytest.fixture(scope="module")
def editions():
    missing = [b for b in BRANCHES.values() if not (EDITIONS / b).is_dir()]
    if missing:
        reason = f"{[str(EDITIONS / b) for b in missing]} missing: run `make editions`"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    return EDITIONS


@pytest.mark.parametrize("edition", sorted(BRANCHES))
def test_each_branch_tree_runs_on_colab_and_binder(editions, edition):
    tree = editions / BRANCHES[edition]
    for rel in NOTEBOOKS:
        nb = nbformat.read(tree / rel, as_version=4)  # the path the launch buttons open
        first = nb.cells[0]
        assert "colab-setup" in first.metadata.get("tags", []), f"{rel}: no Colab set-up cell first"
    for needed in [
        "course_lib/__init__.py",
        "pyproject.toml",
        "binder/requirements.txt",
        "binder/runtime.txt",
        "LICENSE",
    ]:
        assert (tree / needed).is_file(), f"{BRANCHES[edition]} lacks {needed}"
    readme = (tree / "README.md").read_text()
    assert BRANCHES[edition] in readme and CONFIG["repository"]["url"] in readme


def test_the_student_branch_holds_no_solution(editions):
    from test_release_student_site import looked_for, site_texts

    texts = site_texts(editions / BRANCHES["student"] / "book")
    keys = looked_for()
    assert keys
    leaks = [(name, line) for name, text in texts.items() for key, line in keys.items() if key in text]
    assert not leaks, f"solution lines on {BRANCHES['student']}: {leaks[:10]}"
