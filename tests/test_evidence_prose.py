"""Numbers in the chapters' prose come from the run (myst-nb glue) or carry their source: a check
that flags measured-looking numbers typed into markdown cells (rules: tests/evidence_scan.py)."""

import pytest
from evidence_scan import (
    CHAPTERS,
    ROOT,
    cells,
    notebook_typed_numbers,
    prose,
    sentences,
    source,
    typed_numbers,
)


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_typed_numbers_in_the_prose(notebook):
    hits = notebook_typed_numbers(notebook)
    assert not hits, (
        f"{len(hits)} measured-looking number(s) typed in {notebook.name}: glue them "
        f"({{glue:text}}`key:.2f`), write exact values as math, cite the source in the same "
        f"sentence, or list deliberate ones in <!-- not measured: ... --> (CONTRIBUTING.md, "
        f"'The evidence protocol'):\n" + "\n".join(map(str, hits))
    )


def kinds(markdown):
    return [(h.kind, h.token) for h in typed_numbers(markdown)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The LSTM reaches 2.13 bits per character.", [("unit", "2.13")]),
        ("A loss stuck at 0.167 means no memory.", [("decimal", "0.167")]),
        ("Exact match falls from 100 % to 72 %.", [("percent", "100"), ("percent", "72")]),
        ("It is 3.2× faster, and 4x cheaper.", [("factor", "3.2"), ("factor", "4")]),
        ("This is about twice as fast as the loop.", [("factor", "twice as")]),
        ("It runs three times faster.", [("factor", "three times faster")]),
        ("The loss falls by two orders of magnitude.", [("factor", "two orders of magnitude")]),
        ("From about 8 characters on, copies vanish.", [("about", "8")]),
        ("The weight is ≈ 1 on the diagonal.", [("about", "1")]),
        ("Each model trains for 4 s; a step takes 27 ms.", [("unit", "4"), ("unit", "27")]),
        ("Both have 84.6 K and 99.7 K parameters.", [("unit", "84.6"), ("unit", "99.7")]),
        ("It holds 19 bits.", [("unit", "19")]),
        ("We use PyTorch 2.13.0 here.", [("decimal", "2.13.0")]),
        ("A learning rate of 1e-3 works.", [("decimal", "1e-3")]),
        ("It did not change in any of our runs.", [("unshown", "our runs")]),
        (
            "The same held in five seeds while preparing this chapter.",
            [("unshown", "while preparing this chapter")],
        ),
        (
            "Its time grows by roughly $16\\times$ where the others grow by about $4\\times$.",
            [("factor", "16"), ("factor", "4")],
        ),
        ("It explodes (about $10^{11}$ after 100 steps).", [("about", "10")]),
        ("| model | bpc |\n|---|---|\n| LSTM | 2.34 |", [("decimal", "2.34")]),
        ("```{note}\nThe note says 0.5.\n```", [("decimal", "0.5")]),  # directive content is prose
        ("- first item 0.25\n- second item", [("decimal", "0.25")]),
    ],
)
def test_measured_looking_numbers_are_flagged(text, expected):
    assert kinds(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "We train for 600 steps of 64 sequences on 2000 test sequences with 10 input formats.",
        "Chapter 5 shows it; see cell 12 and layer 2, position 4, 3 heads, seeds 0, 1 and 2.",
        "The variance is $\\tfrac16 \\approx 0.167$ and $0.9^{100} \\approx 3\\cdot10^{-5}$.",
        "$$\nh_t = 0.5 \\tanh(x)\n$$",
        "Call `torch.manual_seed(0.5)` or read {glue:text}`bpc:.2f` bits, {numref}`fig-3.2`.",
        "```python\nlr = 0.01\n```",
        "```{code-cell} python\nx = 2.5\n```",
        "## Results at 2.5 bpc\n(sec-2.5)=",
        "```{exercise} Scaled scores\n:label: ex-2.5\n\nWrite it.\n```",
        "**Time**: 15 min · **Difficulty**: 2.5 stars",
        "Transformers reach 28.4 BLEU (Vaswani et al., 2017).",
        "RoPE barely extrapolates without interpolation (Press et al. 2022; Chen et al., 2023): 0.5 at best.",
        "Hochreiter & Schmidhuber, 1997, used values in [-1, 1] and a target 0.5 + (X1+X2)/4.",
        "The matrix is 64×64, or n×n, or 4 × d, or 3 × $d$.",
        "A head that attends uniformly puts about 1/S on the previous token.",
        "Dates like 2045-02-20 and 01/06/28, models like GPT-2 and T5, float32 and W1.",
        "<img src='fig.png' width='0.5'> and [a link](https://example.org/v1.5/page).",
        "Gain 0.9 falls fast. <!-- not measured: 0.9 (the gain set in the code) -->",
        "It is twice as fast. <!-- not measured: twice as (a property of the algorithm: two loops, one) -->",
    ],
)
def test_definitions_maths_code_and_cited_numbers_are_not_flagged(text):
    assert kinds(text) == []


def test_a_marker_exempts_only_what_it_lists_and_must_not_go_stale():
    text = "Gains 0.9 and 1.5; the loss is 0.167. <!-- not measured: 0.9, 1.5, 0.25 (gains set in code) -->"
    assert kinds(text) == [("decimal", "0.167"), ("stale-marker", "0.25")]


def test_a_citation_exempts_its_own_sentence_only():
    text = "Vaswani et al. (2017) report 28.4 BLEU. Ours reaches 27.1 BLEU."
    assert kinds(text) == [("decimal", "27.1")]
    assert kinds("In 2017 our model reached 0.93.") == [("decimal", "0.93")]  # a year alone is no citation


def test_prose_keeps_directive_content_and_drops_code_and_maths():
    text = "````{exercise} Title 2.5\n:label: ex\n\nBody 1.5\n```python\nx = 3.5\n```\n````\n$y = 4.5$ end"
    assert prose(text).split() == ["Body", "1.5", "§", "end"]


def test_sentences_do_not_split_at_et_al_or_decimals():
    text = "Press et al. 2022 found 0.5 here. Next one.\n\n- item one\n- item two"
    assert sentences(prose(text)) == [
        "Press et al. 2022 found 0.5 here. ",
        "Next one.",
        "- item one",
        "- item two",
    ]


def test_the_code_the_pages_show_from_course_lib_is_current():
    """Every stored output of show_source(...) is, verbatim, code in course_lib as it is now: a
    change to the library makes the page that shows it stale until the page is re-executed (chapter
    3 once showed an older RNNDecoder docstring)."""
    library = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "course_lib").rglob("*.py")))
    stale, shown = [], 0
    for path in CHAPTERS:
        for k, c in enumerate(cells(path)):
            if c["cell_type"] != "code" or "show_source(" not in source(c):
                continue
            for out in c.get("outputs", []):
                text = out.get("data", {}).get("text/plain")
                if text is None:
                    continue
                text = "".join(text) if isinstance(text, list) else text
                shown += 1
                if text.strip() not in library:
                    stale.append(f"{path.name} cell {k}: {text.splitlines()[0][:70]}")
    print(f"{shown} shown sources checked")
    assert shown >= 30, shown
    assert not stale, "shown source differs from course_lib's (re-execute the page):\n" + "\n".join(stale)
