"""course_lib.pages.evidence.glue: numbers reach the prose through myst-nb's glue, in a real book build,
and stay invisible where myst-nb is not installed (Colab, a plain Jupyter)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from nbclient import NotebookClient

from course_lib.pages.evidence import glue

ROOT = Path(__file__).resolve().parent.parent
PAPERMILL = "application/papermill.record/text/plain"

GLUE_CELL = """\
import numpy as np, torch
from course_lib.pages.evidence import glue
glue("bpc", np.float64(2.13456))
glue("ratio", torch.tensor(3.2))
glue("steps", 400)
glue("name", "LSTM")
"""
PROSE = (
    "The model reaches {glue:text}`bpc:.2f` bits per character, {glue:text}`ratio:.1f`× faster, "
    "after {glue:text}`steps` steps; the winner is {glue:text}`name`.\n\n"
    "With gain 0.9 <!-- not measured: 0.9 (the gain set in the code) --> it vanishes."
)


def run_notebook(cells, path, block_myst_nb=False):
    """Execute a notebook of (kind, source) cells with the course's kernel; return it."""
    nb = nbformat.v4.new_notebook()
    if block_myst_nb:  # as on Colab: `import myst_nb` fails
        cells = [("code", "import sys\nsys.modules['myst_nb'] = None")] + cells
    nb.cells = [
        nbformat.v4.new_code_cell(src) if kind == "code" else nbformat.v4.new_markdown_cell(src)
        for kind, src in cells
    ]
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path)}}
    ).execute()
    return nb


@pytest.mark.parametrize(
    "value, expected",
    [
        (np.float64(2.5), 2.5),
        (np.int64(3), 3),
        (torch.tensor(1.5), 1.5),
        (np.array(0.25), 0.25),
        (7, 7),
        ("3.2×", "3.2×"),
    ],
)
def test_glue_hands_myst_nb_a_plain_python_value(value, expected, monkeypatch):
    import myst_nb

    seen = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, v, display: seen.append((name, v, display)))
    assert glue("x", value) is None
    assert seen == [("x", expected, False)] and type(seen[0][1]) is type(expected)


@pytest.mark.parametrize(
    "name, value, error, words",
    [
        ("x", True, TypeError, "number or a string, got bool"),
        ("x", [1.0, 2.0], TypeError, "got list"),
        ("x", float("nan"), ValueError, "NaN"),
        ("", 1.0, ValueError, "name"),
        ("x", torch.tensor([1.0, 2.0]), ValueError, r"one number, got shape \(2,\)"),
        ("x", np.zeros((1, 1)), ValueError, r"shape \(1, 1\)"),
    ],
)
def test_glue_rejects_what_the_prose_cannot_show(name, value, error, words):
    with pytest.raises(error, match=words):
        glue(name, value)


@pytest.mark.slow
def test_glue_stores_plain_numbers_with_myst_nb_metadata(tmp_path):
    nb = run_notebook([("code", GLUE_CELL)], tmp_path)
    outputs = nb.cells[0].outputs
    stored = {o.metadata["scrapbook"]["name"]: o.data[PAPERMILL] for o in outputs}
    assert stored == {"bpc": "2.13456", "ratio": "3.200000047683716", "steps": "400", "name": "'LSTM'"}
    assert all(list(o.data) == [PAPERMILL] for o in outputs)  # hidden: no text/plain shown in the page


@pytest.mark.slow
def test_glue_without_myst_nb_shows_and_stores_nothing(tmp_path):
    nb = run_notebook([("code", GLUE_CELL + "print('done')")], tmp_path, block_myst_nb=True)
    assert [o.get("text") for o in nb.cells[1].outputs] == ["done\n"]


@pytest.mark.slow
def test_glue_text_roles_render_the_numbers_in_a_real_book(tmp_path):
    """A tiny Jupyter Book (built with -W, as the course's) whose notebook glues with
    course_lib.pages.evidence.glue and whose prose uses {glue:text} roles with format specs."""
    book = tmp_path / "book"
    book.mkdir()
    (book / "_config.yml").write_text(
        "title: glue test\nexecute:\n  execute_notebooks: force\n"
        "  allow_errors: false\nonly_build_toc_files: true\n"
    )
    (book / "_toc.yml").write_text("format: jb-book\nroot: page\n")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Glue\n"),
        nbformat.v4.new_code_cell(GLUE_CELL),
        nbformat.v4.new_markdown_cell(PROSE),
    ]
    nbformat.write(nb, book / "page.ipynb")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", "-W", str(book)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = (book / "_build" / "html" / "page.html").read_text()
    text = re.sub(r"<[^>]+>", "", html)
    assert (
        "The model reaches 2.13 bits per character, 3.2× faster, after 400 steps; the winner is LSTM."
        in " ".join(text.split())
    )
    assert 'class="cell_output' not in html and "papermill" not in html  # the glue cell itself shows nothing
    visible = re.sub(r"<[^>]+>", "", re.sub(r"<!--.*?-->", "", html, flags=re.DOTALL))
    assert "With gain 0.9 it vanishes." in " ".join(visible.split()) and "not measured" not in visible


def test_glued_keys_of_the_chapters_are_defined():
    """Every {glue:...}`key` in a chapter's markdown is glued by a code cell of that notebook (as
    stored), so the built book finds it."""
    sys.path.insert(0, str(ROOT / "tests"))
    from evidence_scan import CHAPTERS, cells, glue_references, glued_keys, source

    missing = []
    for path in CHAPTERS:
        refs = [r for c in cells(path) if c["cell_type"] == "markdown" for r in glue_references(source(c))]
        for ref in refs:
            doc, _, key = ref.rpartition("::")
            target = (path.parent / doc).with_suffix(".ipynb") if doc else path
            if not target.exists() or key not in glued_keys(target):
                missing.append(f"{path.name}: {{glue}} key {ref!r} is not glued in {target.name}'s outputs")
    assert not missing, "\n".join(missing)


def test_glue_reference_parsing():
    sys.path.insert(0, str(ROOT / "tests"))
    from evidence_scan import glue_references

    text = "a {glue:text}`bpc:.2f` b {glue}`fig` c {glue:text}`other.ipynb::em:.1%` d `code`"
    assert glue_references(text) == ["bpc", "fig", "other.ipynb::em"]
    assert json.dumps(glue_references("no roles")) == "[]"


def test_glue_calls_stay_out_of_the_code_a_reader_studies():
    """A code cell the page shows (no hide-input, remove-input or remove-cell tag) holds no glue
    call: the numbers for the prose are glued in a cell tagged remove-cell next to it, absent from
    the site and folded in JupyterLab. An exercise's solution may glue what it computes."""
    sys.path.insert(0, str(ROOT / "tests"))
    from evidence_scan import CHAPTERS, cells, source

    shown = []
    for path in CHAPTERS:
        for k, c in enumerate(cells(path)):
            tags = set(c.get("metadata", {}).get("tags", []))
            text = source(c)
            if c["cell_type"] != "code" or tags & {"hide-input", "remove-input", "remove-cell"}:
                continue
            if "glue(" in text and "BEGIN SOLUTION" not in text:
                shown.append(f"{path.name} cell {k}: {text.splitlines()[0][:70]}")
    assert not shown, "glue in code the page shows:\n" + "\n".join(shown)
