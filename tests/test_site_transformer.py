"""The layer x head explorer of chapter 9 in the built site, with no kernel: the selects and
sliders switch to the right precomputed frame, and the numbers follow the masks.
Fixtures `server` and `browser` come from conftest.py (skipped without a built site)."""

from __future__ import annotations

import json

import pytest

from site_browser import explorer_on_page, explorer_stat

pytestmark = pytest.mark.site

PAGE = "book/09_transformer.html"


def _matrix(root):
    return json.loads(root.locator("[data-panel='weights']").get_attribute("data-values"))


def test_layer_head_explorer_reacts_without_a_kernel(browser, server):
    with explorer_on_page(browser, server, PAGE, "layer_head", "entropy") as (page, root):
        kind = root.locator("[data-control='kind'] select")
        example = root.locator("[data-control='example'] select")
        layer = root.locator("[data-control='layer'] input[type=range]")
        head = root.locator("[data-control='head'] input[type=range]")

        # starts on example 0, encoder self-attention, layer 1, head 1: a square map with
        # weight on later tokens (the encoder is not masked); rows sum to 1
        assert root.get_attribute("data-frame") == "0|0|0|0"
        enc = _matrix(root)
        assert len(enc) == len(enc[0])
        assert all(abs(sum(row) - 1) < 0.05 for row in enc)
        assert explorer_stat(page, "layer_head", "future") > 0.05

        # the decoder's masked self-attention: nothing above the diagonal
        kind.select_option("1")
        assert root.get_attribute("data-frame") == "0|1|0|0"
        dec = _matrix(root)
        assert all(v == 0 for i, row in enumerate(dec) for v in row[i + 1 :])
        assert explorer_stat(page, "layer_head", "future") == 0

        # heads and layers with the keyboard: the frame and the numbers change
        head.focus()
        page.keyboard.press("End")
        assert root.get_attribute("data-frame") == "0|1|0|3"
        assert _matrix(root) != dec
        layer.focus()
        page.keyboard.press("ArrowRight")
        assert root.get_attribute("data-frame") == "0|1|1|3"

        # cross-attention: one row per decoder input, one column per source character
        kind.select_option("2")
        cross = _matrix(root)
        assert len(cross) == len(dec) and len(cross[0]) == len(enc)
        assert page.locator("[data-explorer='layer_head'] [data-stat='future']").count() == 0

        # another example: another source length
        example.select_option("1")
        assert root.get_attribute("data-frame") == "1|2|1|3"
        assert len(_matrix(root)[0]) != len(cross[0])
