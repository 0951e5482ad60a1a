"""The explorers of the chapters on multi-head attention and positional encodings, in the
built site, with no kernel: moving a control switches to the right precomputed frame.
Fixtures `server` and `browser` come from conftest.py (skipped without a built site)."""

from __future__ import annotations

import json

import pytest

from site_browser import explorer_on_page, explorer_stat

pytestmark = pytest.mark.site

MASKS_PAGE = "book/07_multihead_attention_and_masks.html"
POSITIONS_PAGE = "book/08_positional_encodings.html"


def _matrix(root, panel):
    return json.loads(root.locator(f"[data-panel='{panel}']").get_attribute("data-values"))


def test_heads_explorer_shows_one_map_per_head(browser, server):
    maps_drawn = "[data-panel='maps'][data-count]"
    with explorer_on_page(browser, server, MASKS_PAGE, "heads", maps_drawn) as (page, root):
        panel = root.locator("[data-panel='maps']")
        slider = root.locator("[data-control='heads'] input[type=range]")
        assert panel.get_attribute("data-count") == "2"  # starts at h = 2
        seen = {}
        slider.focus()
        page.keyboard.press("Home")  # h = 1, then up with the keyboard
        for index, h in enumerate([1, 2, 4, 8]):
            if index:
                page.keyboard.press("ArrowRight")
            assert root.get_attribute("data-frame").startswith(f"{index}|")
            maps = json.loads(panel.get_attribute("data-values"))
            assert panel.get_attribute("data-count") == str(h) and len(maps) == h
            for matrix in maps:  # every row is a distribution
                assert all(abs(sum(row) - 1) < 0.02 for row in matrix)
            assert int(explorer_stat(page, "heads", "num_maps")) == h
            seen[h] = explorer_stat(page, "heads", "next")
        assert seen[1] < 0.85 < 0.95 < min(seen[2], seen[4], seen[8])  # the chapter's result
        before = panel.get_attribute("data-values")
        root.locator("[data-control='example'] select").select_option(value="2")
        assert panel.get_attribute("data-values") != before


def test_masks_explorer_toggles_padding_and_causal(browser, server):
    with explorer_on_page(browser, server, MASKS_PAGE, "masks", "future_weight") as (page, root):
        padding = root.locator("[data-control='padding'] input[type=checkbox]")
        causal = root.locator("[data-control='causal'] input[type=checkbox]")
        root.locator("[data-control='sequence'] select").select_option(value="1")  # "dogs bark" + 4 pads
        if padding.is_checked():
            padding.uncheck()
        assert root.get_attribute("data-frame") == "1|0|0"
        w = _matrix(root, "weights")
        assert sum(row[j] for row in w[:2] for j in range(2, 6)) > 0.1  # real words read pads
        assert explorer_stat(page, "masks", "future_weight") > 0.1

        padding.check()  # pads vanish
        assert root.get_attribute("data-frame") == "1|1|0"
        w = _matrix(root, "weights")
        assert all(row[j] == 0 for row in w for j in range(2, 6))
        assert explorer_stat(page, "masks", "pad_weight") == 0

        causal.check()  # and the future
        assert root.get_attribute("data-frame") == "1|1|1"
        w = _matrix(root, "weights")
        assert all(w[i][j] == 0 for i in range(6) for j in range(i + 1, 6))
        assert explorer_stat(page, "masks", "future_weight") == 0
        assert abs(explorer_stat(page, "masks", "row_sum_min") - 1) < 1e-3
        allowed, blocked = _matrix(root, "allowed"), _matrix(root, "blocked")
        assert all(a + b == 1 for ra, rb in zip(allowed, blocked) for a, b in zip(ra, rb))

        padding.uncheck()  # causal alone
        assert root.get_attribute("data-frame") == "1|0|1"
        w = _matrix(root, "weights")
        assert all(w[i][j] == 0 for i in range(6) for j in range(i + 1, 6))


def test_positions_explorer_reacts(browser, server):
    with explorer_on_page(browser, server, POSITIONS_PAGE, "positions", "curve_spread") as (page, root):
        assert root.get_attribute("data-frame") == "2|1"  # d = 64, base 10000
        assert len(_matrix(root, "table")[0]) == 64
        assert explorer_stat(page, "positions", "curve_spread") < 1e-6
        paper = explorer_stat(page, "positions", "similarity_10")

        root.locator("[data-control='d_model'] input[type=range]").focus()
        page.keyboard.press("End")  # d = 128
        assert len(_matrix(root, "table")[0]) == 128
        root.locator("[data-control='base'] select").select_option(value="0")  # base 100
        assert root.get_attribute("data-frame") == "3|0"
        assert explorer_stat(page, "positions", "similarity_10") < paper - 0.2
        curves = _matrix(root, "similarity")
        assert len(curves) == 3 and all(abs(a - b) < 1e-6 for a, b in zip(curves[0], curves[2]))
