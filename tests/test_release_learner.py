"""The learner edition (python -m coursekit.release learner): the book's notebooks in plain
Markdown, with no MyST syntax left, glued numbers substituted, answers folded."""

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from coursekit.release import ReleaseError
from coursekit.release.learner import Page, convert_markdown, fold, glued_values, release_learner
from coursekit.release.markers import strip_solution_directives

ROOT = Path(__file__).resolve().parent.parent
MYST = re.compile(
    r"^\s*(`{3,}|:{3,})\{|^:(class|label|name|open|dropdown):|\{[\w:-]+\}`|"
    r"^\([\w.:-]+\)=\s*$|^% ",
    re.M,
)

SAMPLE = """(sec-intro)=
# A page

% a MyST comment
The loss is {glue:text}`loss:.2f` nats; see {ref}`the intro <sec-intro>` and {math}`x^2`.

````{exercise} Mask the pads · ★★ · core · 15 min
:label: ex-mask

Write `mask(lengths)`.

```{admonition} Hint 1
:class: dropdown
Compare positions with lengths.
```
````

```{solution} ex-mask
:class: dropdown
Broadcast a row against a column.
```

```{note}
A plain note.
```

```python
d = {"key": 1}  # code with braces is left as it is: {ref}`not a role here`
```
"""


def test_a_page_loses_every_myst_construct():
    page = Page("sample", glued={"loss": 1.23456})
    text = convert_markdown(SAMPLE, page)
    print(text)
    assert "### Exercise 1: Mask the pads (★★, core, 15 min)" in text
    assert "<summary><b>Hint 1</b></summary>" in text
    assert "<summary><b>Solution to exercise 1</b></summary>" in text
    assert "The loss is 1.23 nats; see the intro and $x^2$." in text
    assert "> **Note**\n>\n> A plain note." in text
    assert 'd = {"key": 1}  # code with braces is left as it is: {ref}`not a role here`' in text
    outside_code = text.split("```python")[0]
    assert not MYST.findall(outside_code), MYST.findall(outside_code)


def test_evidence_folded_on_the_site_is_folded_in_jupyterlab():
    cells = [
        nbformat.v4.new_code_cell("print(1)", metadata={"tags": tags})
        for tags in (["hide-output"], ["hide-input", "hide-output"], ["remove-cell"], [])
    ]
    for cell in cells:
        fold(cell)
    assert cells[0].metadata["jupyter"] == {"outputs_hidden": True}
    assert cells[1].metadata["jupyter"] == {"outputs_hidden": True, "source_hidden": True}
    assert cells[2].metadata["jupyter"] == {"outputs_hidden": True, "source_hidden": True}  # glue cells
    assert "jupyter" not in cells[3].metadata


def test_a_glue_the_notebook_did_not_store_is_an_error_naming_the_page():
    with pytest.raises(ReleaseError, match=r"book/x.ipynb: \{glue:text\}`missing:.3f` names no value"):
        convert_markdown("{glue:text}`missing:.3f`", Page("book/x.ipynb"))


def test_an_unclosed_fence_is_an_error():
    with pytest.raises(ReleaseError, match="has no closing line"):
        convert_markdown("```{note}\nnever closed", Page("p"))


@pytest.fixture(scope="module", params=[False, True], ids=["learner", "student"])
def edition(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("learner")
    pages = release_learner(ROOT, out, student=request.param, force=True)
    return request.param, out, pages


def _markdown(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def test_every_page_of_the_edition_is_plain_markdown(edition):
    _, out, pages = edition
    notebooks = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    assert pages == len(notebooks) + 1  # the chapters and intro.md; no instructor page
    assert not (out / "book" / "instructor_guide.md").exists()
    for path in notebooks:
        learner = nbformat.read(out / "book" / path.name, as_version=4)
        found = MYST.findall(re.sub(r"```.*?```", "", _markdown(learner), flags=re.S))
        assert not found, f"{path.name}: MyST left in the learner edition: {found[:5]}"
        nbformat.validate(learner)
    intro = (out / "book" / "intro.md").read_text()
    assert not MYST.findall(re.sub(r"```.*?```", "", intro, flags=re.S))


def _kept_markdown(book, student) -> str:
    """The book's markdown that the edition keeps: the student edition drops written answers
    (nbgrader solution cells) and solution directives, and the numbers glued in them."""
    if not student:
        return _markdown(book)
    kept = [
        c.source
        for c in book.cells
        if c.cell_type == "markdown" and not c.get("metadata", {}).get("nbgrader", {}).get("solution")
    ]
    return strip_solution_directives("\n".join(kept))[0]


def test_glued_numbers_are_the_ones_the_run_stored(edition):
    student, out, _ = edition
    checked = 0
    for path in sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")):
        book = nbformat.read(path, as_version=4)
        values = glued_values(book)
        learner = _markdown(nbformat.read(out / "book" / path.name, as_version=4))
        for key, spec in re.findall(r"\{glue:text\}`([\w.-]+):?([^`]*)`", _kept_markdown(book, student)):
            assert format(values[key], spec) in learner, (path.name, key, spec)
            checked += 1
    print(f"{checked} glued numbers found in the learner edition")
    assert checked >= 20


def test_code_cells_are_kept_and_solutions_folded_or_stubbed(edition):
    student, out, _ = edition
    path = ROOT / "book" / "05_scaled_dot_product_attention.ipynb"
    book = nbformat.read(path, as_version=4)
    learner = nbformat.read(out / "book" / path.name, as_version=4)
    text = _markdown(learner)
    assert "### Exercise 1: " in text and "<summary><b>Hint 1</b></summary>" in text
    codes = [c.source for c in learner.cells if c.cell_type == "code"]
    if student:
        assert "Solution to exercise" not in text
        assert any("raise NotImplementedError" in c for c in codes)
        assert not any("### BEGIN SOLUTION" in c for c in codes)
    else:
        assert "<summary><b>Solution to exercise 1</b></summary>" in text
        assert codes == [c.source for c in book.cells if c.cell_type == "code"]


@pytest.mark.slow  # runs the command line in subprocesses (seconds each)
def test_the_command_line_refuses_to_write_into_the_sources():
    run = subprocess.run(
        [sys.executable, "-m", "coursekit.release", "learner", str(ROOT / "book" / "x")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "refusing to write the learner edition" in run.stderr, run.stderr
