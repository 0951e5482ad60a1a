"""Reading the exercises of a notebook: labels, stepped hints, cells, and the leak detector
(the tests of tests/test_book_exercises.py rest on these)."""

import copy

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output
from toy_chapter import toy_chapter

from coursekit.release.leaks import solution_leaks
from coursekit.release.outline import LABELS, read_exercises, stray_markers


def test_the_toy_chapter_is_complete():
    causal, saturation = read_exercises(toy_chapter())
    assert (causal.label, causal.name, causal.stars, causal.importance, causal.minutes) == (
        "ex-causal",
        "The causal mask",
        1,
        "core",
        10,
    )
    assert (causal.statement, causal.solutions, causal.checks, causal.given) == (5, [6], [7], [])
    assert causal.hints == [(1, True), (2, True)] and causal.check_names == ["check_causal_mask"]
    assert (saturation.statement, saturation.solutions, saturation.checks, saturation.given) == (
        9,
        [10],
        [12],
        [11],
    )
    assert saturation.stars == 2 and saturation.check_names == ["check_saturation_prediction"]
    assert causal.problems() == [] and saturation.problems() == []


@pytest.mark.parametrize(
    "title, fields",
    [
        ("Scaled scores · ★★ · core · 15 min", ("Scaled scores", "★★", "core", "15")),
        ("A (b) c · ★★★ · challenge · 120 min", ("A (b) c", "★★★", "challenge", "120")),
        ("Predict · ★ · optional · 5 min", ("Predict", "★", "optional", "5")),
    ],
)
def test_labels_in_the_title(title, fields):
    m = LABELS.match(title)
    assert m and (m["name"], m["stars"], m["importance"], m["minutes"]) == fields


@pytest.mark.parametrize(
    "title",
    [
        "Scaled scores",
        "S · ★★★★ · core · 15 min",
        "S · ★★ · vital · 15 min",
        "S · ★★ · core · 15 mins",
        "S · 2 stars · core · 15 min",
        "S · ★★ · core · 0 min",
        "S ·★★· core · 15 min",
        "S (★★, core, 15 min)",
        "S · ★★ · core",
    ],
)
def test_malformed_labels_are_refused(title):
    assert not LABELS.match(title)


def test_problems_are_named():
    nb = toy_chapter()
    nb.cells[5].source = (
        nb.cells[5]
        .source.replace(" · ★ · core · 10 min", "")
        .replace(":label: ex-causal\n", "")
        .replace("Hint 2", "Hint 3")
        .replace(":class: dropdown\ntorch", "torch")
    )
    nb.cells[9].source = "```{solution} ex-causal\n```\n\n" + nb.cells[9].source
    del nb.cells[7]
    causal, saturation = read_exercises(nb)
    problems = " | ".join(causal.problems())
    for phrase in [
        "no :label:",
        "does not end with ' · ★★ · core · 15 min'",
        "got [1, 3]",
        "':class: dropdown'",
        "no check cell",
    ]:
        assert phrase in problems, problems
    assert "also holds a {solution} directive" in " ".join(saturation.problems())


def test_a_new_section_ends_an_exercise():
    nb = toy_chapter()
    nb.cells.append(new_code_cell("print('after the exercises')"))
    assert read_exercises(nb)[-1].given == [11]


def leak_of(nb, label):
    return next(leak for leak in solution_leaks(nb) if leak.label == label)


def test_the_toy_chapter_does_not_answer_its_exercises():
    leak = leak_of(toy_chapter(), "ex-causal")
    # comments dropped, whitespace removed, lower case, the target and `return` dropped:
    assert leak.lines == ["torch.ones(t,t,dtype=torch.bool)"] and leak.found == []


@pytest.mark.parametrize("where", ["source", "stream", "html", "plain"])
def test_a_solution_printed_elsewhere_is_found(where):
    nb = toy_chapter()
    code = "MASK = torch.ones(T, T,  dtype=torch.bool)   # shown in the text"
    if where == "source":
        cell = new_code_cell(code)
    else:
        cell = new_code_cell("show_source(f)")
        html = '<span class="n">MASK</span> <span class="o">=</span> torch.ones(T, T, dtype=torch.bool)'
        cell.outputs = [
            {
                "stream": new_output("stream", name="stdout", text=code),
                "html": new_output("display_data", data={"text/html": html}),
                "plain": new_output("execute_result", data={"text/plain": code}, execution_count=1),
            }[where]
        ]
    nb.cells.insert(3, cell)
    leak = leak_of(nb, "ex-causal")
    assert leak.found == ["torch.ones(t,t,dtype=torch.bool)"] and leak.fraction == 1.0


def test_what_the_student_does_not_see_does_not_count():
    nb = toy_chapter()
    solution = "torch.ones(T, T, dtype=torch.bool)"
    nb.cells[8].source = f"```{{solution}} ex-causal\n:class: dropdown\n\n`{solution}`\n```"
    nb.cells.insert(3, new_code_cell(f"x = {solution}", metadata={"tags": ["solution"]}))
    other = copy.deepcopy(nb.cells[7])
    other.source = f"def f():\n    ### BEGIN SOLUTION\n    return {solution}\n    ### END SOLUTION"
    nb.cells.insert(12, other)
    assert leak_of(nb, "ex-causal").found == []


def test_stray_markers():
    nb = toy_chapter()
    assert stray_markers(nb) == []
    nb.cells.append(new_markdown_cell("Write between `### BEGIN SOLUTION` and the end."))
    nb.cells.append(new_code_cell("x = 1  ### END SOLUTION"))
    found = stray_markers(nb)
    assert len(found) == 2 and "cell 15, line 1" in found[0] and "cell 16" in found[1]


@pytest.mark.slow
def test_the_conventions_build_under_W(tmp_path):
    """The labels in the title, the nested hint dropdowns and the explanation in its own cell:
    a tiny Jupyter Book with the toy chapter builds with warnings as errors (sphinx-exercise
    1.2 refuses unknown directive options, which is why the labels are in the title)."""
    import subprocess
    import sys
    from pathlib import Path

    import nbformat

    (tmp_path / "_config.yml").write_text(
        "title: toy\nexecute:\n  execute_notebooks: 'off'\nparse:\n  myst_enable_extensions: "
        "[colon_fence, dollarmath]\nsphinx:\n  extra_extensions: [sphinx_exercise]\n"
    )
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: toy\n")
    (tmp_path / "intro.md").write_text("# Intro\n\nSee {ref}`ex-causal`.\n")
    nbformat.write(toy_chapter(), tmp_path / "toy.ipynb")
    jb = Path(sys.executable).parent / "jupyter-book"
    run = subprocess.run(
        [str(jb), "build", "-W", "--keep-going", str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    page = (tmp_path / "_build" / "html" / "toy.html").read_text(encoding="utf-8")
    assert "The causal mask · ★ · core · 10 min" in page
    assert page.count("Hint 1") == 2 and page.count("Hint 2") == 2  # one per exercise
    assert "toggle-hidden" in page or "dropdown" in page
