"""The Colab set-up cell (the first cell of every notebook, tag `colab-setup`), without Colab
and without the network.

The cell installs course_lib with `%pip install "course_lib @ git+<url>@<branch>"` (the URL
and branch of _config.yml; tests/test_config_book.py checks that they agree) when
`google.colab` has been imported, which Colab's kernel does at start-up, and does nothing
elsewhere.

* Outside Colab (fast): the cell, run by IPython, calls no pip and defines nothing but `sys`.
  As a control, the same run with a stand-in `google.colab` module does call `%pip` once,
  with the configured URL.
* Simulated Colab (slow): a fresh venv in a temporary folder with only torch and IPython; a
  stand-in `google/colab/__init__.py` package on PYTHONPATH, imported first as on Colab; the
  cell's `git+<url>@<branch>` replaced by `git+file://<a clone of this repository>@<branch>`.
  IPython runs the cell (so `%pip` is the real magic), then, in the same session, the
  chapter's first code cells up to the `scaled_dot_product_attention` parity check.

Needs git and the ability to create a venv; without them the slow test skips and says why,
except under CI=true, where it fails. The clone is of the committed HEAD: uncommitted changes
are not part of what Colab would install, so they are not tested here either.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
URL, BRANCH = CONFIG["repository"]["url"], CONFIG["repository"]["branch"]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
CHAPTER = ROOT / "book" / "05_scaled_dot_product_attention.ipynb"
PARITY_CALL = "F.scaled_dot_product_attention("  # the cell that checks course_lib == torch


def setup_cell(path: Path) -> str:
    first = nbformat.read(path, as_version=4).cells[0]
    assert first.cell_type == "code" and "colab-setup" in first.metadata.get("tags", [])
    return first.source


# ---- outside Colab --------------------------------------------------------------------------
# Runs in a fresh interpreter: an IPython shell whose %pip / %conda magics and shell escapes
# only record their arguments.
RECORDING_SHELL = r"""
import json, sys, types
from IPython.core.interactiveshell import InteractiveShell

cell = sys.stdin.read()
shell = InteractiveShell.instance()
calls = []
for magic in ("pip", "conda", "mamba", "uv"):
    shell.register_magic_function(lambda line, m=magic: calls.append(f"%{m} {line}"), "line", magic)
shell.system = lambda cmd: calls.append(f"!{cmd}")
shell.getoutput = lambda cmd, *a, **k: calls.append(f"!{cmd}")

def run():
    del calls[:]
    before = set(shell.user_ns)
    result = shell.run_cell(cell)
    new = {n for n in set(shell.user_ns) - before if not n.startswith("_")}  # not _i1, _ ...
    return {"success": result.success, "calls": list(calls), "new_names": sorted(new)}

assert "google.colab" not in sys.modules
elsewhere = run()
sys.modules["google"] = types.ModuleType("google")
sys.modules["google.colab"] = types.ModuleType("google.colab")
on_colab = run()
print(json.dumps({"elsewhere": elsewhere, "on_colab": on_colab}))
"""


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_need_only_what_the_setup_cell_installs(path):
    """Colab and the learner route install course_lib and its dependencies, not the book's build
    tools: a chapter glues through course_lib.pages.evidence.glue, which works without myst-nb."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            found = re.findall(r"^\s*(?:from|import)\s+(myst_nb|jupyter_book|sphinx)\b", cell.source, re.M)
            assert not found, f"{path.name} cell {i} imports {found}: use course_lib.pages.evidence.glue"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_does_nothing_outside_colab(path):
    run = subprocess.run(
        [sys.executable, "-c", RECORDING_SHELL],
        input=setup_cell(path),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    elsewhere, on_colab = result["elsewhere"], result["on_colab"]
    assert elsewhere["success"] and elsewhere["calls"] == [], elsewhere
    assert set(elsewhere["new_names"]) <= {"sys"}, elsewhere
    # control: the recorder does see the install when google.colab is imported
    assert on_colab["success"] and len(on_colab["calls"]) == 1, on_colab
    assert on_colab["calls"][0].startswith("%pip install")
    assert f"git+{URL}@{BRANCH}" in on_colab["calls"][0]


# ---- simulated Colab ------------------------------------------------------------------------
COLAB_SESSION = r'''
"""Run in the fresh venv: one IPython session, as a Colab kernel."""
import json, sys
import google.colab  # the stand-in; Colab's kernel imports the real one at start-up
from IPython.core.interactiveshell import InteractiveShell

cells = json.load(open(sys.argv[1]))
shell = InteractiveShell.instance()
shell.run_cell("import matplotlib; matplotlib.use('Agg')")
report = {"cells": []}
for i, source in enumerate(cells):
    print(f"@@ cell {i}", flush=True)
    result = shell.run_cell(source)
    report["cells"].append(result.success)
    if not result.success:
        break
    if i == 0:  # after the set-up cell: where does course_lib come from?
        import importlib.metadata as md
        import course_lib
        report["course_lib_file"] = course_lib.__file__
        report["direct_url"] = json.loads(md.distribution("course_lib").read_text("direct_url.json"))
print("@@ report " + json.dumps(report), flush=True)
'''


def _missing_or_fail(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but the simulated Colab test cannot run: {reason}")
    pytest.skip(reason)


def _run(cmd, **kwargs):
    kwargs.setdefault("timeout", 600)
    run = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert run.returncode == 0, f"{cmd} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


def chapter_cells_through_parity_check(path: Path) -> list[str]:
    """The code cells after the set-up cell, up to the parity check with torch included (they
    need only course_lib, torch and matplotlib)."""
    cells = [c.source for c in nbformat.read(path, as_version=4).cells[1:] if c.cell_type == "code"]
    end = next((i for i, source in enumerate(cells) if PARITY_CALL in source), None)
    assert end is not None, f"{path.name}: no cell calls {PARITY_CALL}"
    return cells[: end + 1]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A clone of the repository's HEAD in which the configured branch exists (a fresh CI
    checkout may be on a detached HEAD or another branch): pip clones it by URL as Colab would
    clone GitHub."""
    if not shutil.which("git"):
        _missing_or_fail("git is not installed")
    if not (ROOT / ".git").exists():
        _missing_or_fail(f"{ROOT} is not a git repository")
    dest = tmp_path_factory.mktemp("colab") / "course"
    _run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(dest)])
    _run(["git", "-C", str(dest), "checkout", "--quiet", "-B", BRANCH, "HEAD"])
    return dest


@pytest.mark.slow
def test_setup_cell_installs_course_lib_on_simulated_colab(tmp_path, clone):
    # 1. A fresh venv with only torch (the pinned CPU build: a local wheel on the course's
    #    machines) and IPython. pip is upgraded first, as Colab's is recent: the pip that
    #    Python 3.11 bundles (23.2) rejects a PEP 508 "name @ git+file:///..." requirement.
    #    Versions come from the root lock (PIP_CONSTRAINT), which also lets pip reuse its cache.
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        _missing_or_fail(f"cannot create a venv: {made.stderr.strip()[-300:]}")
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_CONSTRAINT=str(ROOT / "requirements.txt"),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        MPLBACKEND="Agg",
    )
    _run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], env=env)
    _run([python, "-m", "pip", "install", "--quiet", "torch==2.13.0", "ipython"], env=env)

    # 2. The stand-in google.colab package, on PYTHONPATH only.
    fake = tmp_path / "fake_colab"
    (fake / "google" / "colab").mkdir(parents=True)
    (fake / "google" / "__init__.py").write_text("")
    (fake / "google" / "colab" / "__init__.py").write_text('"""Stand-in for Colab\'s module."""\n')
    env["PYTHONPATH"] = str(fake)

    # 3. The notebook's set-up cell, installing from the local clone instead of GitHub.
    #    git+file:// keeps pip's git code path (clone, checkout of the branch, build).
    cell = setup_cell(CHAPTER)
    spec = f"git+{URL}@{BRANCH}"
    assert cell.count(spec) == 1, f"the set-up cell does not install from {spec}"
    local_spec = f"git+{clone.as_uri()}@{BRANCH}"
    cells = [cell.replace(spec, local_spec)] + chapter_cells_through_parity_check(CHAPTER)
    (tmp_path / "cells.json").write_text(json.dumps(cells))
    (tmp_path / "session.py").write_text(COLAB_SESSION)

    # 4. One IPython session in the venv, started outside the repository (so `import
    #    course_lib` cannot find the working tree).
    workdir = tmp_path / "content"  # Colab's working directory is /content
    workdir.mkdir()
    run = _run([python, str(tmp_path / "session.py"), str(tmp_path / "cells.json")], cwd=workdir, env=env)
    out = run.stdout
    report = json.loads(re.search(r"^@@ report (.*)$", out, re.M).group(1))
    assert report["cells"] == [True] * len(cells), f"a cell failed:\n{out[-4000:]}"
    assert Path(report["course_lib_file"]).is_relative_to(venv), report["course_lib_file"]
    direct = report["direct_url"]
    assert direct["url"].rstrip("/") == clone.as_uri() and direct["vcs_info"]["vcs"] == "git"
    assert direct["vcs_info"]["requested_revision"] == BRANCH
    head = _run(["git", "-C", str(clone), "rev-parse", "HEAD"]).stdout.strip()
    assert direct["vcs_info"]["commit_id"] == head
    assert "largest difference, course_lib vs torch:" in out  # the parity cell ran and printed
