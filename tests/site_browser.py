"""Shared by the browser tests (test_site*.py): the built site served on localhost,
Debian's Chromium driven by Playwright, and a page visit that blocks and records
every request outside the site. The fixtures `server` and `browser` are in conftest.py.
"""

from __future__ import annotations

import atexit
import functools
import http.server
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from book_pdf import CHROMIUM, CHROMIUM_ARGS  # noqa: E402 (one Chromium set-up for the PDF and the tests)

SITE = ROOT / "_build" / "html"
SKIP_PAGES = {"genindex.html"}


def site_pages() -> list[str]:
    """The built site's pages (paths relative to SITE), without its static files and SKIP_PAGES;
    empty when the site is not built."""
    if not SITE.exists():
        return []
    return sorted(
        str(p.relative_to(SITE))
        for p in SITE.rglob("*.html")
        if "_static" not in p.parts and "_sources" not in p.parts and p.name not in SKIP_PAGES
    )


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


def serve_site():
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


_PLAYWRIGHT = []  # one Playwright per process: a second sync_playwright() in the same process
# (a pytest worker running both the site tests and the JupyterLab test) fails with "Sync API
# inside the asyncio loop"


def launch_browser():
    """A new headless Chromium, from the process's one Playwright (started on first use)."""
    if not _PLAYWRIGHT:
        from playwright.sync_api import sync_playwright

        _PLAYWRIGHT.append(sync_playwright().start())
        atexit.register(_PLAYWRIGHT[0].stop)
    browser = _PLAYWRIGHT[0].chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield browser
    finally:
        browser.close()


class PageVisit:
    """Opens one page, blocking and recording every request outside the site (in the given
    colour mode, else the site's default)."""

    def __init__(self, browser, base, path, mode=None):
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.external, self.errors = [], []
        self.context.route("**/*", self._route(base))
        if mode:  # the site's colour mode ("light", "dark"), as its colour-mode button stores it
            self.context.add_init_script(f"localStorage.setItem('mode', {mode!r})")
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("response", lambda r: r.status >= 400 and self.errors.append(f"{r.status} {r.url}"))
        self.page.goto(f"{base}/{path}", wait_until="load")
        self.page.wait_for_load_state("networkidle")

    def _route(self, base):
        def handle(route):
            url = route.request.url
            if url.startswith((base, "data:", "blob:")):
                route.continue_()
            else:
                self.external.append(url)
                route.abort()

        return handle

    def close(self):
        self.context.close()


def explorer_stat(page, explorer, name):
    """The number an explorer shows for one statistic (its data-value attribute)."""
    cell = page.locator(f"[data-explorer='{explorer}'] [data-stat='{name}']").first
    return float(cell.get_attribute("data-value"))


@contextmanager
def explorer_on_page(browser, server, path, explorer, ready):
    """The built page `path` opened until `explorer` is drawn (`ready`: a CSS selector inside it,
    or the name of one of its data-stat values); yields (page, the explorer's root element). On
    leaving, asserts that the page logged no error and asked for nothing outside the site."""
    assert (SITE / path).exists(), f"the built site has no {path}: rebuild it (make book)"
    visit = PageVisit(browser, server, path)
    inside = ready if ready.startswith("[") else f"[data-stat='{ready}']"
    try:
        visit.page.wait_for_selector(f"[data-explorer='{explorer}'] {inside}", timeout=20000)
        yield visit.page, visit.page.locator(f"[data-explorer='{explorer}']").first
        assert visit.errors == [] and visit.external == [], (visit.errors, visit.external)
    finally:
        visit.close()
