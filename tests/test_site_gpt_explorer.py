"""Chapter 10's GPT explorer in headless Chromium with the network cut: the page runs the capstone
GPT with onnxruntime-web (WebAssembly) and its numbers are torch's.

* The logits of every position and the attention weights of every layer and head, for fixed
  prompts, equal torch's (course_lib.gpt.GPT on the committed weights) within 1e-4.
* Greedy generation (temperature 0) through the page's own controls writes torch's greedy
  continuation, token for token.
* axe-core finds no violation in the explorer, in light and dark mode.
* Without WebAssembly the explorer says so in plain words, and the static figure follows it.

The page is the built site's chapter 10 when the site is built (`make book`; CI); otherwise a
one-page book built the same way (tools/gpt_explorer_page.py: the repository's _config.yml and
_ext/, the explorer's cell executed with its widget state). Every request outside the page's
server is blocked and recorded (site_browser.PageVisit), and must not happen.
Time to first token and tokens per second: benchmarks/bench_gpt_browser.py (not a timed test).
"""

from __future__ import annotations

import functools
import http.server
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from site_browser import CHROMIUM, SITE, PageVisit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from export_gpt_onnx import AttentionGPT, load_gpt  # noqa: E402

pytestmark = [pytest.mark.site, pytest.mark.slow]

CHAPTER = "book/10_capstone_lstm_to_gpt.html"
PROMPTS = ["The return value of ", "T", "def f(x):\n    return x.", "class A:\n    " * 4 + "abcdefgh"]
READY = "[data-explorer='gpt'][data-state='ready']"
FORWARD = """async (ids) => {
    const r = await document.querySelector("[data-explorer='gpt']").courseForward(ids);
    return {T: r.T, logits: Array.from(r.logits), attention: Array.from(r.attention)};
}"""


def _serve(folder):
    handler = functools.partial(_Quiet, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def gpt_page(tmp_path_factory):
    """(base URL, path of the page with the explorer)."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    if (SITE / CHAPTER).exists():
        folder, path = SITE, CHAPTER
    else:
        from gpt_explorer_page import PAGE, build_page

        folder, path = build_page(tmp_path_factory.mktemp("gpt_page")), PAGE
    httpd = _serve(folder)
    yield f"http://127.0.0.1:{httpd.server_address[1]}", path
    httpd.shutdown()


@pytest.fixture(scope="module")
def chromium():
    from site_browser import launch_browser

    yield from launch_browser()


@pytest.fixture(scope="module")
def capstone():
    torch.set_num_threads(1)
    return load_gpt()


def _visit(chromium, gpt_page, mode=None):
    base, path = gpt_page
    visit = PageVisit(chromium, base, path, mode=mode)
    visit.page.wait_for_selector(READY, timeout=90000)
    return visit


def _ids(vocab, text):
    stoi = {ch: i for i, ch in enumerate(vocab)}
    return [stoi.get(ch, 0) for ch in text]


def test_the_browser_computes_torchs_logits_and_attention(chromium, gpt_page, capstone):
    model, vocab, _ = capstone
    visit = _visit(chromium, gpt_page)
    try:
        root = visit.page.locator("[data-explorer='gpt']")
        assert root.get_attribute("data-backend") == "wasm"
        worst = {"logits": 0.0, "attention": 0.0}
        for text in PROMPTS:
            ids = _ids(vocab, text)
            got = visit.page.evaluate(FORWARD, ids)
            with torch.no_grad():
                logits, attention = AttentionGPT(model)(torch.tensor([ids]))
            T = len(ids)
            assert got["T"] == T
            browser_logits = np.array(got["logits"]).reshape(T, len(vocab))
            browser_attention = np.array(got["attention"]).reshape(4, 4, T, T)
            worst["logits"] = max(worst["logits"], np.abs(browser_logits - logits[0].numpy()).max())
            gap = np.abs(browser_attention - attention[:, 0].numpy()).max()
            worst["attention"] = max(worst["attention"], gap)
        print(f"largest difference, browser - torch: {worst}")
        assert worst["logits"] <= 1e-4 and worst["attention"] <= 1e-4, worst
        assert visit.errors == [] and visit.external == [], (visit.errors, visit.external)
    finally:
        visit.close()


@pytest.mark.parametrize("prompt", ["The return value of ", "def "])
def test_greedy_generation_in_the_page_is_torchs(chromium, gpt_page, capstone, prompt):
    model, vocab, _ = capstone
    visit = _visit(chromium, gpt_page)
    page = visit.page
    try:
        root = page.locator("[data-explorer='gpt']")
        root.locator("[data-control='prompt'] textarea").fill(prompt)
        root.locator("[data-control='temperature'] input").fill("0")
        root.locator("[data-control='num_tokens'] input").fill("30")
        root.locator("button.cl-gpt-generate").focus()
        page.keyboard.press("Enter")  # keyboard-operable
        page.wait_for_function(
            "() => { const r = document.querySelector(\"[data-explorer='gpt']\");"
            " return r.dataset.state === 'ready' && r.dataset.tokensPerSecond; }",
            timeout=90000,
        )
        written = [int(i) for i in root.get_attribute("data-ids").strip("[]").split(",")]
        with torch.no_grad():
            want = model.generate(torch.tensor([_ids(vocab, prompt)]), 30, temperature=0)[0].tolist()
        assert written == want, ("".join(vocab[i] for i in written), "".join(vocab[i] for i in want))
        # the chosen position's panels: the last position, every layer and head, its top-10 table
        attention = page.locator("[data-panel='attention']")
        assert int(attention.get_attribute("data-position")) == len(want) - 1
        assert root.locator("[data-panel='next'] tbody tr").count() == 10
        slider = root.locator("[data-control='position'] input")
        slider.focus()
        page.keyboard.press("Home")
        assert attention.get_attribute("data-position") == "0"
        assert visit.errors == [] and visit.external == [], (visit.errors, visit.external)
    finally:
        visit.close()


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_axe_finds_no_violation_in_the_explorer(chromium, gpt_page, mode):
    from test_site_accessibility import AXE

    visit = _visit(chromium, gpt_page, mode=mode)
    try:
        visit.page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
        found = visit.page.evaluate(
            """async () => {
                const r = await axe.run("[data-explorer='gpt']", {resultTypes: ['violations']});
                return r.violations.flatMap(v => v.nodes.map(n => `${v.id}: ${n.target.join(' ')}`));
            }"""
        )
        assert found == [], f"{mode} mode: {found}"
    finally:
        visit.close()


def test_without_webassembly_the_page_says_so(chromium, gpt_page):
    base, path = gpt_page
    context = chromium.new_context()
    context.add_init_script("delete window.WebAssembly")
    page = context.new_page()
    try:
        page.goto(f"{base}/{path}")
        page.wait_for_selector("[data-explorer='gpt'][data-state='no-wasm']", timeout=30000)
        status = page.locator("[data-explorer='gpt'] [role='status']").inner_text()
        assert "does not run WebAssembly" in status
    finally:
        context.close()


def test_print_shows_the_static_figure_not_the_widget(chromium, gpt_page):
    """The PDF (tools/book_pdf.py prints the pages with the print style): the live explorer is
    left out and the static figure that follows it is printed."""
    visit = _visit(chromium, gpt_page)
    page = visit.page
    try:
        page.emulate_media(media="print")
        shown = page.evaluate(
            """() => {
                const out = document.querySelector("[data-explorer='gpt']").closest('.cell_output');
                const cell = out.closest('.cell');
                const next = cell.nextElementSibling.closest('.cell') ? cell.nextElementSibling : null;
                const img = next && next.querySelector('.cell_output img');
                return {widget: getComputedStyle(out).display,
                        figure: img ? img.getBoundingClientRect().height : 0};
            }"""
        )
        assert shown["widget"] == "none" and shown["figure"] > 100, shown
    finally:
        visit.close()


def _lab_notebook(dest):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from course_lib.widgets import GPTExplorer\n\nGPTExplorer()")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, dest)
    return 0


@pytest.fixture(scope="module")
def gpt_lab(tmp_path_factory):
    from test_site_jupyterlab import run_lab

    yield from run_lab(tmp_path_factory, _lab_notebook)


def test_in_jupyterlab_the_kernel_runs_the_model(gpt_lab, chromium, capstone):
    """In JupyterLab (no site scripts on the page) the front end asks the kernel, which runs the
    model with torch: the same numbers, and greedy generation writes torch's continuation."""
    from test_site_jupyterlab import open_and_run

    model, vocab, _ = capstone
    pages = open_and_run(gpt_lab, chromium, READY)
    page = next(pages)
    try:
        root = page.locator("[data-explorer='gpt']")
        assert root.get_attribute("data-backend") == "kernel"
        ids = _ids(vocab, PROMPTS[2])
        got = page.evaluate(FORWARD, ids)
        with torch.no_grad():
            logits, attention = AttentionGPT(model)(torch.tensor([ids]))
        # torch in the kernel (its own thread count) and here: the same function, summed in other orders
        assert np.abs(np.array(got["logits"]) - logits[0].flatten().numpy()).max() <= 1e-5
        assert np.abs(np.array(got["attention"]) - attention[:, 0].flatten().numpy()).max() <= 1e-5
        root.locator("[data-control='temperature'] input").fill("0")
        root.locator("[data-control='num_tokens'] input").fill("12")
        root.locator("button.cl-gpt-generate").click()
        page.wait_for_function(
            "() => document.querySelector(\"[data-explorer='gpt']\").dataset.tokensPerSecond", timeout=90000
        )
        written = [int(i) for i in root.get_attribute("data-ids").strip("[]").split(",")]
        prompt = torch.tensor([_ids(vocab, "The return value of ")])
        with torch.no_grad():
            assert written == model.generate(prompt, 12, temperature=0)[0].tolist()
        assert page.external == [], page.external
    finally:
        pages.close()
