"""The explorers of the chapter "Attention in seq2seq", in the built site, with no kernel:
moving a control switches to the right precomputed frame and its numbers change as they should.
Fixtures `server` and `browser` come from conftest.py (skipped without a built site)."""

from __future__ import annotations

import json

import pytest

from site_browser import explorer_on_page, explorer_stat

pytestmark = pytest.mark.site

PAGE = "book/04_attention_in_seq2seq.html"


def _values(root, panel):
    return root.locator(f"[data-panel='{panel}']").get_attribute("data-values")


def test_score_explorer_reacts_without_a_kernel(browser, server):
    with explorer_on_page(browser, server, PAGE, "scores", "max_weight") as (page, root):
        select = root.locator("[data-control='score'] select")
        angle = root.locator("[data-control='angle'] input[type=range]")
        length = root.locator("[data-control='length'] input[type=range]")
        assert root.get_attribute("data-frame") == "0|0|1"  # dot, angle 0, length 1

        # dot score, query (4, 0): the long key (3, 0), key 1, takes almost all the weight
        length.focus()
        page.keyboard.press("End")
        assert root.get_attribute("data-frame") == "0|0|3"
        assert explorer_stat(page, "scores", "argmax_key") == 1
        assert explorer_stat(page, "scores", "max_weight") > 0.9

        # cosine: keys 0 and 1 point the same way, so they tie, whatever the query's length
        select.select_option("2")
        assert root.get_attribute("data-frame") == "2|0|3"
        cos_long = [float(v) for v in _values(root, "weights").split(",")]
        assert cos_long[0] == pytest.approx(cos_long[1], abs=1e-6)
        page.keyboard.press("Tab")  # leave the select; drive the length slider again
        length.focus()
        page.keyboard.press("Home")
        assert root.get_attribute("data-frame") == "2|0|0"
        assert [float(v) for v in _values(root, "weights").split(",")] == pytest.approx(cos_long, abs=1e-6)

        # turning the query to 90 degrees (three steps of 30) moves the weight to the key (0, 1)
        angle.focus()
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        assert root.get_attribute("data-frame") == "2|3|0"
        assert explorer_stat(page, "scores", "argmax_key") == 2


def test_alignment_explorer_switches_models_and_examples(browser, server):
    with explorer_on_page(browser, server, PAGE, "alignment", "exact_match") as (page, root):
        model = root.locator("[data-control='model'] select")
        example = root.locator("[data-control='example'] select")
        options = model.locator("option").all_text_contents()
        best, weak = "Bahdanau, bidirectional (300 steps)", "Luong scaled dot (100 steps)"
        assert options[0] == best and weak in options, options

        # the long-trained bidirectional model: right, confident alignments, rows that sum to 1
        assert explorer_stat(page, "alignment", "exact_match") >= 0.995
        assert explorer_stat(page, "alignment", "correct") == 1
        matrix = json.loads(_values(root, "alignment"))
        assert all(abs(sum(row) - 1) < 0.01 for row in matrix)
        sharp = explorer_stat(page, "alignment", "max_weight")

        # the scaled-dot model trained for 100 steps, on the same date: another heatmap, blurrier,
        # and the worse held-out score the chapter printed for it
        model.select_option(str(options.index(weak)))
        assert root.get_attribute("data-frame") == f"{options.index(weak)}|0"
        assert explorer_stat(page, "alignment", "max_weight") < sharp
        assert explorer_stat(page, "alignment", "exact_match") < 0.5
        assert json.loads(_values(root, "alignment")) != matrix

        # another held-out example: another heatmap
        example.select_option("3")
        assert root.get_attribute("data-frame") == f"{options.index(weak)}|3"
        assert json.loads(_values(root, "alignment")) != matrix
