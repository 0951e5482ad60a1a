"""The tokens explorer of chapter 11 in the built site, with no kernel: the slider and the select
switch to the right precomputed frame, and the page shows the tokens and numbers of that frame.
Fixtures `server` and `browser` come from conftest.py (skipped without a built site)."""

from __future__ import annotations

import json

import pytest

from course_lib.widgets import MERGE_OPTIONS, SENTENCES
from site_browser import explorer_on_page, explorer_stat

pytestmark = pytest.mark.site

PAGE = "book/11_tokens.html"


def _tokens(root):
    panel = root.locator("[data-panel='tokens']")
    tokens = json.loads(panel.get_attribute("data-values"))
    assert len(tokens) == int(panel.get_attribute("data-count")) == panel.locator(".cl-token").count()
    return tokens


def test_tokens_explorer_follows_the_merges_without_a_kernel(browser, server):
    with explorer_on_page(browser, server, PAGE, "tokens", "num_tokens") as (page, root):
        slider = root.locator("[data-control='merges'] input[type=range]")
        # the chapter starts it at 256 merges, on the first sentence: its tokens spell it
        assert root.get_attribute("data-frame") == f"{MERGE_OPTIONS.index(256)}|0"
        at_256 = _tokens(root)
        assert "".join(at_256) == SENTENCES[0] and len(at_256) < len(SENTENCES[0]) / 2
        assert explorer_stat(page, "tokens", "vocab_size") == 512

        # no merges: one token per byte
        slider.focus()
        page.keyboard.press("Home")
        assert root.get_attribute("data-frame") == "0|0"
        assert len(_tokens(root)) == len(SENTENCES[0].encode()) == explorer_stat(page, "tokens", "num_tokens")
        assert explorer_stat(page, "tokens", "vocab_size") == 256

        # the most merges: fewer tokens, a larger vocabulary, the held-out text compressed most
        page.keyboard.press("End")
        assert root.get_attribute("data-frame") == f"{len(MERGE_OPTIONS) - 1}|0"
        assert len(_tokens(root)) < len(at_256)
        assert explorer_stat(page, "tokens", "vocab_size") == 256 + MERGE_OPTIONS[-1]
        bars = root.locator("[data-panel='compression']")
        curve = [float(v) for v in bars.get_attribute("data-values").split(",")]
        assert curve == sorted(curve) and curve[-1] == pytest.approx(
            explorer_stat(page, "tokens", "heldout_chars_per_token"), abs=1e-3
        )

        # the sentence with an emoji: its bytes are tokens of their own, shown in hex
        root.locator("[data-control='sentence'] select").select_option(value="2")
        assert root.get_attribute("data-frame") == f"{len(MERGE_OPTIONS) - 1}|2"
        assert "<f0>" in _tokens(root)
