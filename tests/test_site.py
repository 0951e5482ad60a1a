"""The built site (`make book` -> _build/html) in headless Chromium.

Every page is served from localhost with every other request blocked and
recorded: no page may log a console error or ask for anything outside the site,
maths must be typeset, and each explorer's numbers must change when its
controls move. Uses Debian's chromium driven by Playwright.

Outside CI, on a machine without Chromium or a built site, these tests skip
with the reason; with CI=true they must run.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync",
                 "--disable-quic", "--disable-dev-shm-usage"]
SKIP_PAGES = {"genindex.html"}

pytestmark = pytest.mark.site


def _missing():
    if not (SITE / "index.html").exists():
        return f"the site is not built ({SITE}): run `make book`"
    if not Path(CHROMIUM).exists():
        return "Debian's chromium is not installed (apt-get install chromium)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


@pytest.fixture(scope="module")
def server():
    reason = _missing()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the site test cannot run: {reason}")
        pytest.skip(reason)
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class PageVisit:
    """Opens one page, blocking and recording every request outside the site."""

    def __init__(self, browser, base, path):
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.external, self.errors = [], []
        self.context.route("**/*", self._route(base))
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("response", lambda r: r.status >= 400 and self.errors.append(f"{r.status} {r.url}"))
        self.page.goto(f"{base}/{path}", wait_until="load")
        self.page.wait_for_load_state("networkidle")

    def _route(self, base):
        def handle(route):
            url = route.request.url
            if url.startswith(base) or url.startswith("data:") or url.startswith("blob:"):
                route.continue_()
            else:
                self.external.append(url)
                route.abort()
        return handle

    def close(self):
        self.context.close()


def _pages():
    if not SITE.exists():
        return []
    return sorted(str(p.relative_to(SITE)) for p in SITE.rglob("*.html")
                  if "_static" not in p.parts and "_sources" not in p.parts
                  and p.name not in SKIP_PAGES)


@pytest.mark.parametrize("path", _pages() or ["index.html"])
def test_page_is_offline_and_error_free(browser, server, path):
    visit = PageVisit(browser, server, path)
    try:
        visit.page.wait_for_timeout(300)
        assert visit.external == [], f"{path} requested outside the site: {visit.external}"
        assert visit.errors == [], f"{path} logged console errors: {visit.errors}"
        # maths typeset: every .math element holds a MathJax container (hidden ones too)
        visit.page.wait_for_function(
            "[...document.querySelectorAll('.math')].every(e => e.querySelector('mjx-container'))",
            timeout=15000)
        widgets = visit.page.locator("script[type='application/vnd.jupyter.widget-view+json']")
        if widgets.count():
            # every widget placeholder has been replaced by a rendered widget
            visit.page.wait_for_selector(".cl-explorer, .widget-container, .jupyter-widgets",
                                         timeout=15000)
    finally:
        visit.close()


def test_search_finds_a_chapter(browser, server):
    visit = PageVisit(browser, server, "search.html?q=softmax")
    try:
        visit.page.wait_for_selector("#search-results li", timeout=15000)
        assert visit.page.locator("#search-results li").count() >= 1
        assert visit.errors == [] and visit.external == []
    finally:
        visit.close()


# --- the explorers ---------------------------------------------------------

def _stat(page, explorer, name):
    cell = page.locator(f"[data-explorer='{explorer}'] [data-stat='{name}']").first
    return float(cell.get_attribute("data-value"))


def test_dk_explorer_reacts_without_a_kernel(browser, server):
    visit = PageVisit(browser, server, "book/05_scaled_dot_product_attention.html")
    page = visit.page
    try:
        page.wait_for_selector("[data-explorer='dk'] [data-stat='variance']", timeout=20000)
        root = page.locator("[data-explorer='dk']").first
        slider = root.locator("[data-control='d_k'] input[type=range]")
        toggle = root.locator("[data-control='scaled'] input[type=checkbox]")

        # start unscaled at d_k = 64: the variance of the scores is about d_k
        assert not toggle.is_checked()
        assert 40 < _stat(page, "dk", "variance") < 90
        weights_before = root.locator("[data-panel='weights']").get_attribute("data-values")

        # d_k to the top (1024) with the keyboard: variance and saturation grow
        slider.focus()
        for _ in range(4):
            page.keyboard.press("ArrowRight")
        assert root.get_attribute("data-frame") == "10|0"
        assert 800 < _stat(page, "dk", "variance") < 1300
        assert _stat(page, "dk", "max_weight") > 0.9
        assert root.locator("[data-panel='weights']").get_attribute("data-values") != weights_before
        grad_unscaled = _stat(page, "dk", "grad_norm")

        # scale by 1/sqrt(d_k): variance back to about 1, softmax no longer saturated
        toggle.check()
        assert root.get_attribute("data-frame") == "10|1"
        assert 0.7 < _stat(page, "dk", "variance") < 1.3
        assert _stat(page, "dk", "max_weight") < 0.6
        assert _stat(page, "dk", "grad_norm") > 3 * grad_unscaled

        # down to d_k = 1 with the keyboard: scaled and unscaled agree there
        slider.focus()
        page.keyboard.press("Home")
        assert root.get_attribute("data-frame") == "0|1"
        assert visit.errors == [] and visit.external == []
    finally:
        visit.close()


def test_launch_buttons_open_this_notebook_in_colab_and_binder(server):
    """Every chapter page links to its own .ipynb on the repository set in _config.yml."""
    import yaml

    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    slug = repo["url"].removeprefix("https://github.com/")
    notebooks = sorted((ROOT / "book").glob("*.ipynb"))
    assert notebooks
    for nb in notebooks:
        html = (SITE / "book" / f"{nb.stem}.html").read_text()
        path = f"book/{nb.name}"
        assert (f"https://colab.research.google.com/github/{slug}/blob/{repo['branch']}/{path}"
                in html), f"no Colab button for {path}"
        assert f"https://mybinder.org/v2/gh/{slug}/{repo['branch']}?urlpath=lab/tree/{path}" in html, \
            f"no Binder button for {path}"
