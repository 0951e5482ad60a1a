"""The grouped-query attention explorer of chapter 12 in the built site, with no kernel: the
slider and the select switch to the right precomputed frame, and the page shows that frame's
grouping, cache bytes and measured times (the committed sweep's means).
Fixtures `server` and `browser` come from conftest.py (skipped without a built site)."""

from __future__ import annotations

import json
import statistics

import pytest

from course_lib.pages.sweeps import load_sweep
from course_lib.widgets import CONTEXT_OPTIONS, KV_HEAD_OPTIONS
from site_browser import explorer_on_page, explorer_stat

pytestmark = pytest.mark.site

PAGE = "book/12_modern_decoder.html"


def _groups(root):
    return json.loads(root.locator("[data-panel='groups']").get_attribute("data-values"))


def _bars(root, key):
    return [float(v) for v in root.locator(f"[data-panel='{key}']").get_attribute("data-values").split(",")]


def _means(context):
    """ms per generated token: the sweep's time of a step (a token for each sequence) / the sequences"""
    sweep = load_sweep("modern_gqa_cache")
    (point,) = sweep.select(context=context)
    return [
        statistics.fmean(sweep.values(f"ms_per_token_kv{kv}", context=context)) / point["batch"]
        for kv in KV_HEAD_OPTIONS
    ]


def test_gqa_explorer_follows_the_key_value_heads_and_the_context_without_a_kernel(browser, server):
    with explorer_on_page(browser, server, PAGE, "gqa", "ms_per_token") as (page, root):
        slider = root.locator("[data-control='n_kv_head'] input[type=range]")
        long, short = CONTEXT_OPTIONS.index(1024), CONTEXT_OPTIONS.index(64)
        # the chapter starts it at Llama's grouping, 2 key/value heads, at 1024 tokens
        assert root.get_attribute("data-frame") == f"{KV_HEAD_OPTIONS.index(2)}|{long}"
        assert _groups(root) == [[1, 0], [1, 0], [0, 1], [0, 1]]
        assert explorer_stat(page, "gqa", "cache_bytes_per_token") == 2048
        assert _bars(root, "cache") == [4096, 2048, 1024]
        assert _bars(root, "time") == pytest.approx(_means(1024), abs=1e-3)
        grouped = explorer_stat(page, "gqa", "ms_per_token")

        # full multi-head attention: each query head its own key/value head, twice the bytes
        slider.focus()
        page.keyboard.press("Home")
        assert root.get_attribute("data-frame") == f"0|{long}"
        assert _groups(root) == [[int(i == j) for j in range(4)] for i in range(4)]
        assert explorer_stat(page, "gqa", "cache_bytes_per_token") == 4096
        assert explorer_stat(page, "gqa", "ms_per_token") == pytest.approx(_means(1024)[0], abs=1e-3)
        assert explorer_stat(page, "gqa", "speedup") == pytest.approx(1, abs=1e-6)

        # multi-query attention: one key/value head read by all four query heads
        page.keyboard.press("End")
        assert root.get_attribute("data-frame") == f"{len(KV_HEAD_OPTIONS) - 1}|{long}"
        assert _groups(root) == [[1]] * 4
        assert explorer_stat(page, "gqa", "cache_bytes_per_token") == 1024
        assert explorer_stat(page, "gqa", "group_size") == 4
        assert explorer_stat(page, "gqa", "ms_per_token") != grouped

        # the short context: the same bytes per token, a far smaller cache, other times
        long_kib = explorer_stat(page, "gqa", "cache_kib")
        root.locator("[data-control='context'] select").select_option(value=str(short))
        assert root.get_attribute("data-frame") == f"{len(KV_HEAD_OPTIONS) - 1}|{short}"
        assert explorer_stat(page, "gqa", "cache_bytes_per_token") == 1024
        short_kib = explorer_stat(page, "gqa", "cache_kib")
        assert short_kib == 1024 * 64 / 2**10  # 64 KiB: whole numbers at both contexts
        assert long_kib == 1024 * 1024 * 8 / 2**10
        assert _bars(root, "time") == pytest.approx(_means(64), abs=1e-3)
