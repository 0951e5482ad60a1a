"""The RNN chapters' explorers on the built site, with no kernel: moving each control switches
to a precomputed frame whose numbers change the way the chapter says they should."""

from __future__ import annotations

import json

import pytest

from site_browser import explorer_on_page, explorer_stat

pytestmark = pytest.mark.site

CHAPTER_1 = "book/01_sequences_and_rnns.html"
CHAPTER_2 = "book/02_lstm_and_gru.html"


def _values(root, panel):
    return root.locator(f"[data-panel='{panel}']").get_attribute("data-values")


def test_gradient_flow_explorer_reacts_without_a_kernel(browser, server):
    with explorer_on_page(browser, server, CHAPTER_1, "gradient_flow", "norm_100") as (page, root):
        slider = root.locator("[data-control='gain'] input[type=range]")
        select = root.locator("[data-control='nonlinearity'] select")

        # start: gain 1, tanh: the gradient vanishes anyway (tanh' < 1)
        assert root.get_attribute("data-frame") == "5|0"
        assert explorer_stat(page, "gradient_flow", "norm_100") < 1e-6
        curve = _values(root, "norms")

        # linear at gain 1: exactly 1 at every step
        select.select_option(label="linear")
        assert root.get_attribute("data-frame") == "5|1"
        assert explorer_stat(page, "gradient_flow", "norm_100") == pytest.approx(1.0, rel=1e-3)
        assert set(json.loads(_values(root, "norms"))[0]) == {1.0}

        # gain up to 2 with the keyboard: explodes like 2^t
        slider.focus()
        page.keyboard.press("End")
        assert root.get_attribute("data-frame") == "10|1"
        assert explorer_stat(page, "gradient_flow", "norm_100") > 1e25
        assert explorer_stat(page, "gradient_flow", "factor") == pytest.approx(2.0, rel=1e-2)

        # and down to 0.5: vanishes like 0.5^t
        page.keyboard.press("Home")
        assert root.get_attribute("data-frame") == "0|1"
        assert explorer_stat(page, "gradient_flow", "norm_100") < 1e-25
        assert _values(root, "norms") != curve


def test_forget_bias_explorer_reacts_without_a_kernel(browser, server):
    with explorer_on_page(browser, server, CHAPTER_2, "forget_bias", "lstm_25") as (page, root):
        slider = root.locator("[data-control='forget_bias'] input[type=range]")

        assert root.get_attribute("data-frame") == "2"  # bias 0
        assert explorer_stat(page, "forget_bias", "forget_mean") == pytest.approx(0.5, abs=0.02)
        reach_0 = explorer_stat(page, "forget_bias", "lstm_25")
        rnn_0 = explorer_stat(page, "forget_bias", "rnn_25")

        slider.focus()
        for _ in range(2):
            page.keyboard.press("ArrowRight")  # 0 -> 0.5 -> 1
        assert root.get_attribute("data-frame") == "4"
        assert explorer_stat(page, "forget_bias", "forget_mean") == pytest.approx(0.73, abs=0.02)
        reach_1 = explorer_stat(page, "forget_bias", "lstm_25")
        assert reach_1 > 100 * reach_0

        page.keyboard.press("End")  # bias 5: the memory is (almost) never forgotten
        assert explorer_stat(page, "forget_bias", "forget_mean") > 0.98
        assert explorer_stat(page, "forget_bias", "lstm_25") > 0.5 > reach_1
        assert explorer_stat(page, "forget_bias", "rnn_25") == rnn_0  # the RNN reference stays


def test_temperature_explorer_reacts_without_a_kernel(browser, server):
    with explorer_on_page(browser, server, CHAPTER_2, "temperature", "entropy") as (page, root):
        slider = root.locator("[data-control='temperature'] input[type=range]")

        assert root.get_attribute("data-frame") == "5"  # temperature 1
        entropy_1 = explorer_stat(page, "temperature", "entropy")
        samples_1 = json.loads(_values(root, "samples"))
        assert len(samples_1) == 3 and all(s.startswith("The ") for s in samples_1)

        slider.focus()
        page.keyboard.press("Home")  # greedy
        assert root.locator("[data-control='temperature'] output").text_content() == "0 (greedy)"
        assert explorer_stat(page, "temperature", "entropy") == 0
        assert explorer_stat(page, "temperature", "top_prob") == 1
        greedy = json.loads(_values(root, "samples"))
        assert greedy[0] == greedy[1] == greedy[2] != samples_1[0]  # no randomness left

        page.keyboard.press("End")  # temperature 2: flatter, less English
        assert explorer_stat(page, "temperature", "entropy") > entropy_1 > 0
        assert explorer_stat(page, "temperature", "top_prob") < 0.5
        assert json.loads(_values(root, "samples")) != samples_1
