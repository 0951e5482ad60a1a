"""The student edition: solutions replaced by stubs, solution directives gone, checks kept.

Two parts: a synthetic book that exercises every convention (see CONTRIBUTING.md), and the real
book of this repository (skipped only while it has no notebook).
"""

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from coursekit.release import (
    STUB,
    ReleaseError,
    release_notebook,
    release_student,
    release_toc,
    strip_solution_directives,
    stub_solutions,
)

REPO = Path(__file__).resolve().parent.parent

# ---- a synthetic book ----------------------------------------------------------------------
SCORE_CELL = '''import math

def my_score(q, k):
    """Scaled dot-product scores, (..., T_q, T_k)."""
    # Your code: scale by sqrt(d_k).
    ### BEGIN SOLUTION
    d_k = q.shape[-1]  # solution line A

    return q @ k.transpose(-2, -1) / math.sqrt(d_k)  # solution line B
    ### END SOLUTION
'''

TWO_REGIONS_CELL = '''class Masks:
    def causal(self, T):
        """(T, T) bool, True = allowed."""
        ### BEGIN SOLUTION
        import torch  # solution line C
        return torch.tril(torch.ones(T, T, dtype=torch.bool))  # solution line D
        ### END SOLUTION


def my_causal(T):
    """Top-level function, region at 4 spaces."""
    ### BEGIN SOLUTION
    return Masks().causal(T)  # solution line E
    ### END SOLUTION
'''

TOP_LEVEL_CELL = """### BEGIN SOLUTION
answer_f = 42  # solution line F
### END SOLUTION
print("after the region")
"""

CHECK_CELL = "from course_lib.exercises import check_causal_mask\ncheck_causal_mask(my_causal)"

EXERCISE_MD = """## Exercise

````{exercise}
:label: ex-score
Write `my_score`.
````

````{solution} ex-score
:class: dropdown
Backtick solution prose SECRET_BACKTICK.
```python
secret_backtick_code = 1
```
````

Text after the solution stays.
"""

COLON_MD = """:::{solution} ex-causal
Colon solution prose SECRET_COLON.
:::
"""

GATE_START_MD = """```{solution-start} ex-gated
:label: sol-gated
```
Gated prose SECRET_GATED_PROSE.
"""
GATE_END_MD = "```{solution-end}\n```\nAfter the gate, kept."

SECRETS = [
    "SECRET_BACKTICK",
    "secret_backtick_code",
    "SECRET_COLON",
    "SECRET_GATED_PROSE",
    "SECRET_GATED_CODE",
    "SECRET_TAGGED",
    "{solution",
]


def outputs(text):
    return [new_output("stream", name="stdout", text=text)]


def synthetic_notebook():
    solution_code = new_code_cell(SCORE_CELL, execution_count=3, outputs=outputs("scored\n"))
    tagged = new_code_cell("SECRET_TAGGED = 1", metadata={"tags": ["solution"]})
    cells = [
        new_markdown_cell("# A chapter\n\nSome prose."),
        new_code_cell("import torch", execution_count=1),
        new_markdown_cell(EXERCISE_MD),
        solution_code,
        new_code_cell(TWO_REGIONS_CELL, execution_count=4),
        new_code_cell(TOP_LEVEL_CELL, execution_count=5, outputs=outputs("after the region\n")),
        new_code_cell(CHECK_CELL, execution_count=6, outputs=outputs("✓ check_causal_mask\n")),
        new_markdown_cell(COLON_MD),
        new_markdown_cell(GATE_START_MD),
        new_code_cell('print("SECRET_GATED_CODE")', execution_count=7),
        new_markdown_cell(GATE_END_MD),
        tagged,
        new_markdown_cell("## After the exercises"),
        new_code_cell("print('kept')", execution_count=8, outputs=outputs("kept\n")),
    ]
    return new_notebook(
        cells=cells,
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )


def region_lines(source):
    """Non-blank lines strictly between the markers of every solution region in ``source``."""
    lines, inside = [], False
    for line in source.splitlines():
        marker = line.strip()
        if marker in ("### BEGIN SOLUTION", "### END SOLUTION"):
            inside = marker == "### BEGIN SOLUTION"
        elif inside and marker:
            lines.append(marker)
    return lines


@pytest.fixture
def book(tmp_path):
    src = tmp_path / "src"
    (src / "book" / "images").mkdir(parents=True)
    (src / "_config.yml").write_text(
        "title: Test\nlogo: logo.png\n"
        "bibtex_bibfiles:\n  - references.bib\n"
        "exclude_patterns: [_build, .venv, tests]\n"
    )
    (src / "tests").mkdir()
    (src / "tests" / "test_solutions.py").write_text("SECRET = 1\n")  # excluded: not copied
    (src / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n- file: book/chapter\n")
    (src / "logo.png").write_bytes(b"\x89PNG")
    (src / "references.bib").write_text("@book{x, title={X}}\n")
    (src / "book" / "images" / "fig.svg").write_text("<svg/>")
    (src / "book" / "intro.md").write_text("# Intro\n\n" + COLON_MD + "\nThe end.\n")
    (src / "book" / ".ipynb_checkpoints").mkdir()
    (src / "book" / ".ipynb_checkpoints" / "chapter-checkpoint.ipynb").write_text("SECRET")
    nbformat.write(synthetic_notebook(), src / "book" / "chapter.ipynb")
    return src


def all_text(out):
    """Every file of the edition, raw, plus notebooks' parsed sources and outputs."""
    texts = []
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".ipynb", ".md", ".yml", ".bib", ".svg"):
            texts.append(path.read_text(encoding="utf-8"))
        if path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            texts += [c.source + json.dumps(c.get("outputs", [])) for c in nb.cells]
    return "\n".join(texts)


@pytest.fixture
def student(book, tmp_path, capsys):
    out = tmp_path / "student"
    stats = release_student(book, out)
    return out, stats


# ---- synthetic book: tests -----------------------------------------------------------------
def test_files_copied(student):
    out, stats = student
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == [
        "_config.yml",
        "_toc.yml",
        "book/chapter.ipynb",
        "book/images/fig.svg",
        "book/intro.md",
        "logo.png",
        "references.bib",
    ]
    assert (stats.notebooks, stats.pages) == (1, 1)


def test_no_solution_line_leaks(student):
    out, stats = student
    text = all_text(out)
    solution = [
        ln
        for cell in synthetic_notebook().cells
        if cell.cell_type == "code"
        for ln in region_lines(cell.source)
    ]
    assert len(solution) == 6
    for line in solution:
        assert line not in text
    for secret in SECRETS:
        assert secret not in text
    assert stats.regions == 4


def test_stubs_keep_signature_docstring_and_indentation(student):
    out, _ = student
    nb = nbformat.read(out / "book" / "chapter.ipynb", as_version=4)
    score = nb.cells[3].source
    assert score.splitlines() == [
        "import math",
        "",
        "def my_score(q, k):",
        '    """Scaled dot-product scores, (..., T_q, T_k)."""',
        "    # Your code: scale by sqrt(d_k).",
        "    " + STUB,
    ]
    two = nb.cells[4].source
    assert "        " + STUB in two.splitlines()  # the method body, 8 spaces
    assert "    " + STUB in two.splitlines()  # the function body, 4 spaces
    assert two.count(STUB) == 2 and '"""Top-level function, region at 4 spaces."""' in two
    compile(score + "\n" + two, "student", "exec")  # still valid Python
    assert nb.cells[5].source.splitlines() == [STUB, 'print("after the region")']


def test_solution_cells_lose_outputs_and_checks_are_kept_cleared(student):
    out, stats = student
    nb = nbformat.read(out / "book" / "chapter.ipynb", as_version=4)
    for cell in nb.cells[3:6]:
        assert cell.outputs == [] and cell.execution_count is None
    check = nb.cells[6]
    assert check.source == CHECK_CELL and check.outputs == [] and check.execution_count is None
    assert nb.cells[-1].outputs and nb.cells[-1].execution_count == 8  # others untouched
    assert stats.checks_cleared == 1


def test_the_measurement_of_a_prediction_is_not_shown_before_the_prediction():
    """Issue 24: the given cells of an exercise (a predict-then-measure experiment) lose their
    outputs in the student edition; the cells before the exercise keep theirs."""
    from toy_chapter import toy_chapter

    nb = toy_chapter()
    experiment = nb.cells[11]
    experiment.outputs = outputs("with 16 keys the largest weight reaches 0.9 at d_k = 64\n")
    experiment.execution_count = 9
    nb.cells[3].outputs = outputs("tensor(3.)\n")
    stats = release_notebook(nb, "toy")
    released = {c.source: c for c in nb.cells}
    assert released[experiment.source].outputs == [] and released[experiment.source].execution_count is None
    assert released[nb.cells[3].source].outputs  # chapter content keeps its outputs
    assert stats.given_cleared == 1


def test_directives_and_gated_cells_removed(student):
    out, stats = student
    nb = nbformat.read(out / "book" / "chapter.ipynb", as_version=4)
    sources = [c.source for c in nb.cells]
    exercise = sources[2]
    assert "````{exercise}" in exercise and "Write `my_score`." in exercise
    assert "Text after the solution stays." in exercise and "{solution" not in exercise
    assert "After the gate, kept." in sources
    assert len(nb.cells) == 10  # dropped: colon cell, gate start, gated code, tagged code
    assert stats.directives == 4 and stats.cells_dropped == 4
    page = (out / "book" / "intro.md").read_text()
    assert page.startswith("# Intro") and "The end." in page and "SECRET_COLON" not in page


@pytest.mark.slow  # runs the command line in subprocesses (seconds each)
def test_cli(book, tmp_path):
    out = tmp_path / "cli"
    run = subprocess.run(
        [sys.executable, "-m", "coursekit.release", "student", str(out), "--src", str(book)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stderr
    assert "1 notebooks and 1 markdown pages processed: 4 solution regions stubbed" in run.stdout
    assert "SECRET_BACKTICK" not in all_text(out)
    again = subprocess.run(
        [sys.executable, "-m", "coursekit.release", "student", str(out), "--src", str(book)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert again.returncode == 1 and "not empty (use --force" in again.stderr


def test_refuses_to_overwrite_the_sources(book):
    with pytest.raises(ReleaseError, match="refusing"):
        release_student(book, book)
    with pytest.raises(ReleaseError, match="refusing"):
        release_student(book, book / "book" / "out")


@pytest.mark.parametrize(
    "source, message",
    [
        ("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "'### BEGIN SOLUTION' on line 2 has no"),
        (
            "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n",
            "nested '### BEGIN SOLUTION' on line 2",
        ),
        ("x = 1\n### END SOLUTION\n", "'### END SOLUTION' on line 2 without"),
    ],
)
def test_unbalanced_markers_are_errors(source, message, tmp_path):
    nb = new_notebook(cells=[new_markdown_cell("# T"), new_code_cell(source)])
    with pytest.raises(ReleaseError) as info:
        release_notebook(nb, "book/bad.ipynb")
    assert "book/bad.ipynb, cell 1" in str(info.value) and message in str(info.value)


@pytest.mark.slow  # runs the command line in subprocesses (seconds each)
def test_unbalanced_begin_fails_the_cli(book, tmp_path):
    nb = new_notebook(cells=[new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n")])
    nbformat.write(nb, book / "book" / "broken.ipynb")
    run = subprocess.run(
        [sys.executable, "-m", "coursekit.release", "student", str(tmp_path / "o"), "--src", str(book)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "book/broken.ipynb, cell 0" in run.stderr


def test_unclosed_gate_is_an_error():
    nb = new_notebook(cells=[new_markdown_cell("```{solution-start} ex\n```\nsecret")])
    with pytest.raises(ReleaseError, match="solution-end"):
        release_notebook(nb, "book/gate.ipynb")


def test_literal_code_blocks_are_kept():
    text = "````markdown\n```{solution} ex\nshown as an example\n```\n````\n"
    assert strip_solution_directives(text) == (text, 0, False)


def test_markers_with_trailing_spaces_and_tabs():
    source, n = stub_solutions("def f():\n\t### BEGIN SOLUTION  \n\treturn 1\n\t### END SOLUTION\n", "x")
    assert n == 1 and source == f"def f():\n\t{STUB}\n"


# ---- the real book -------------------------------------------------------------------------
REAL_NOTEBOOKS = sorted(
    p.relative_to(REPO)
    for p in (REPO / "book").rglob("*.ipynb")
    if not {".ipynb_checkpoints", "_build"} & set(p.parts)
)
needs_notebooks = pytest.mark.skipif(
    not REAL_NOTEBOOKS, reason="the repository has no notebook under book/ yet"
)
REAL_PARAMS = [pytest.param(p, id=str(p)) for p in REAL_NOTEBOOKS] or [None]
ALLOWED_ERRORS = {"NotImplementedError", "ExerciseNotAttempted"}


@pytest.fixture(scope="module")
def real_student(tmp_path_factory):
    out = tmp_path_factory.mktemp("real") / "student"
    release_student(REPO, out)
    return out


def line_counts(nb, with_outputs):
    counts = Counter()
    for cell in nb.cells:
        counts.update(ln.strip() for ln in cell.source.splitlines() if ln.strip())
        if with_outputs:
            for line in json.dumps(cell.get("outputs", [])).split("\\n"):
                counts.update([line.strip()])
    return counts


@needs_notebooks
@pytest.mark.parametrize("rel", REAL_PARAMS)
def test_real_book_leaks_no_solution(rel, real_student):
    """Each solution line may appear in the student edition at most as often as it appears in
    the instructor sources outside solution regions (lines like `return out` are common), unless
    it is a line of course_lib itself, which students get and the chapters display."""
    nb = nbformat.read(REPO / rel, as_version=4)
    solution = Counter(ln for c in nb.cells if c.cell_type == "code" for ln in region_lines(c.source))
    public = line_counts(nb, with_outputs=False)
    public.subtract(solution)
    student_nb = nbformat.read(real_student / rel, as_version=4)
    student = line_counts(student_nb, with_outputs=True)
    library = {
        ln.strip() for path in (REPO / "course_lib").rglob("*.py") for ln in path.read_text().splitlines()
    }
    leaked = [ln for ln in solution if student[ln] > max(public[ln], 0) and ln not in library]
    assert not leaked, f"{rel}: solution lines in the student edition: {leaked}"
    for cell in student_nb.cells:
        if cell.cell_type == "markdown":
            assert strip_solution_directives(cell.source)[1] == 0, f"{rel}: a solution directive"


# The student edition of every notebook is run by nbval in `make test` (_student/book is in
# pyproject.toml's testpaths), held by the repository's conftest.py to the errors its cells
# must raise. The two tests below check that this is the edition of the current sources, and
# that the hook does catch a check that misjudges a stub.
STUDENT_DIR = REPO / "_student"


@needs_notebooks
@pytest.mark.parametrize("rel", REAL_PARAMS)
def test_the_student_edition_nbval_runs_is_current(rel, real_student):
    if not (STUDENT_DIR / "book").is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {STUDENT_DIR} is missing: `make test` writes it (make student)")
        pytest.skip(f"{STUDENT_DIR} is not written: run `make student`")
    ours = nbformat.read(STUDENT_DIR / rel, as_version=4)
    fresh = nbformat.read(real_student / rel, as_version=4)
    assert [(c.cell_type, c.source, c.get("outputs")) for c in ours.cells] == [
        (c.cell_type, c.source, c.get("outputs")) for c in fresh.cells
    ], f"{STUDENT_DIR / rel} is stale: run `make student`"


HOOK_CELLS = [
    ("def check_lenient(f):\n    return None  # passes whatever it is given", None),
    ("check_lenient(print)", "it raised nothing"),
    ("check_missing(my_function)", "it raised ['NameError']"),
    (
        "from course_lib.exercises import ExerciseNotAttempted\n\n"
        "def check_strict(f):\n    raise ExerciseNotAttempted('not implemented yet')",
        None,
    ),
    ("check_strict(print)", None),
    (STUB, None),
    ("raise ValueError('an error the chapter shows on purpose')", None),
]


@pytest.mark.slow
def test_nbval_holds_student_cells_to_the_errors_they_must_raise(tmp_path):
    """nbval alone would pass every cell below; the repository's conftest.py fails the check
    that passes on a stub and the one that raises a NameError."""
    tagged = {"tags": ["raises-exception"]}
    cells = [
        new_code_cell(src, metadata={} if i in (0, 3) else dict(tagged))
        for i, (src, _) in enumerate(HOOK_CELLS)
    ]
    nb = new_notebook(
        cells=cells,
        metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
    )
    nbformat.write(nb, tmp_path / "student.ipynb")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(REPO / "pyproject.toml"),
            "-p",
            "conftest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            str(tmp_path / "student.ipynb"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    out = run.stdout
    for i, (_, failure) in enumerate(HOOK_CELLS):
        status = "FAILED" if failure else "PASSED"
        assert re.search(rf"^{status} \S*::Cell {i}\b", out, re.M), f"cell {i}:\n{out[-3000:]}"
        if failure:
            assert f"must raise ExerciseNotAttempted until the exercise is solved; {failure}" in out
    assert "2 failed, 5 passed" in out, out[-2000:]


def execute(path):
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    return nb


def errors_of(nb):
    return [
        (o.ename, o.evalue)
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]


@pytest.mark.slow
def test_synthetic_editions_run(book, student):
    """Instructor edition: the check passes. Student edition: the stubs raise
    NotImplementedError and the check reports ExerciseNotAttempted, nothing else fails."""
    instructor = execute(book / "book" / "chapter.ipynb")
    assert errors_of(instructor) == []
    check_output = "".join(o.get("text", "") for o in instructor.cells[6].outputs)
    assert "✓ check_causal_mask: all 4 cases passed" in check_output
    out, _ = student
    errors = errors_of(execute(out / "book" / "chapter.ipynb"))
    assert [e[0] for e in errors] == ["NotImplementedError", "ExerciseNotAttempted"]
    assert errors[1][1].startswith("check_causal_mask: not implemented yet")


# ---- tags for the tools that run the student edition, instructor-only pages -----------------
def test_cells_that_raise_until_solved_are_tagged_raises_exception(student):
    """Check cells and top-level stubs raise until the student writes the code: the
    `raises-exception` tag lets nbclient (Jupyter Book's execution), nbval and JupyterLab's
    Run All accept that error. Cells that only define functions are not tagged, so a real
    error there still fails a build."""
    out, _ = student
    nb = nbformat.read(out / "book" / "chapter.ipynb", as_version=4)
    tagged = [i for i, c in enumerate(nb.cells) if "raises-exception" in c.metadata.get("tags", [])]
    assert tagged == [5, 6]  # the top-level region's cell and the check cell
    assert nb.cells[5].source.startswith(STUB) and "check_causal_mask(" in nb.cells[6].source


def test_stubbed_cells_are_shown_and_other_tags_kept():
    hidden = new_code_cell(SCORE_CELL, metadata={"tags": ["hide-input", "keep-me"]})
    plain = new_code_cell("print(1)", metadata={"tags": ["hide-input"]})
    nb = new_notebook(cells=[hidden, plain, new_code_cell(CHECK_CELL)])
    release_notebook(nb, "book/tags.ipynb")
    assert nb.cells[0].metadata["tags"] == ["keep-me"]  # the student must see the stub
    assert nb.cells[1].metadata["tags"] == ["hide-input"]  # not an exercise: untouched
    assert nb.cells[2].metadata["tags"] == ["raises-exception"]


def test_instructor_pages_are_left_out(book, tmp_path):
    (book / "book" / "instructor_guide.md").write_text("# For instructors\n\nSECRET_GUIDE\n")
    (book / "book" / "images" / "instructor_photo.svg").write_text("<svg/>")  # not a page
    (book / "_toc.yml").write_text(
        "# a comment\nformat: jb-book\nroot: book/intro\nparts:\n"
        "  - caption: Chapters\n    chapters:\n      - file: book/chapter\n"
        "  - caption: For instructors\n    chapters:\n      - file: book/instructor_guide\n"
    )
    out = tmp_path / "student"
    stats = release_student(book, out)
    assert not (out / "book" / "instructor_guide.md").exists()
    assert (out / "book" / "images" / "instructor_photo.svg").exists()
    assert "SECRET_GUIDE" not in all_text(out) and stats.pages == 1
    toc = yaml.safe_load((out / "_toc.yml").read_text())
    assert toc == {
        "format": "jb-book",
        "root": "book/intro",
        "parts": [{"caption": "Chapters", "chapters": [{"file": "book/chapter"}]}],
    }


def test_toc_without_instructor_pages_is_copied_verbatim():
    text = "# keep this comment\nformat: jb-book\nroot: book/intro\nchapters:\n- file: book/a\n"
    assert release_toc(text) == text
    nested = (
        "format: jb-book\nroot: book/intro\nchapters:\n- file: book/a\n  sections:\n"
        "  - file: book/instructor_notes\n"
    )
    assert yaml.safe_load(release_toc(nested))["chapters"] == [{"file": "book/a"}]
