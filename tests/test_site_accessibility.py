"""axe-core on every page of the built site, in light and in dark mode.

axe-core (npm, a devDependency in package.json, so node_modules/axe-core after `npm ci`) is
injected into each page after it loaded and its widgets rendered, and runs its default rule
set (WCAG 2.0-2.2 A and AA, and axe's best practices). No violation may remain, except on
the theme's own header, which we do not template (pydata-sphinx-theme / sphinx-book-theme):

* `label-content-name-mismatch` (WCAG 2.5.3, label in name) on the header's search button
  (visible text "Search Ctrl+K", accessible name "Search") and colour-mode button
  (accessible name "Color mode", visible text the icon's hidden label);
* `region` (best practice: content inside landmarks) on the site title at the top of the
  primary sidebar (`.navbar-brand`), which the theme puts outside the sidebar's <nav>.

Each exclusion is one rule on nodes matched by one selector, checked in the browser; any
other node failing these rules, and every other rule, fails the test. The dark mode is the
site's own (the colour-mode button stores `mode` in localStorage; set before the page loads).
"""

from __future__ import annotations

import pytest

from site_browser import ROOT, PageVisit, site_pages

pytestmark = pytest.mark.site

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"

# rule id -> CSS selector of the theme's header elements that may fail it (see the docstring)
THEME_HEADER = {
    "label-content-name-mismatch": ".bd-header .search-button__button, "
    ".bd-sidebar-primary .search-button__button, "
    ".theme-switch-button",
    "region": ".sidebar-primary-item:has(> .navbar-brand)",
}

WIDGETS_RENDERED = """() => [...document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')].every(s => {
        const area = s.parentElement.querySelector('.widget-subarea');
        return area && area.textContent.trim().length > 0; })"""

RUN_AXE = """async (excluded) => {
    const result = await axe.run(document, {resultTypes: ['violations']});
    const found = [];
    for (const v of result.violations) {
        for (const node of v.nodes) {
            const selector = excluded[v.id];
            const el = document.querySelector(node.target[0]);
            if (selector && el && el.matches(selector)) continue;
            found.push(`${v.id} (${v.impact}): ${node.target.join(' ')}: ${node.html.slice(0, 160)}`);
        }
    }
    return found;
}"""


@pytest.fixture(scope="module")
def axe_source():
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: run `npm ci` (or `make`), axe-core is in package.json")
    return AXE.read_text(encoding="utf-8")


@pytest.mark.parametrize("mode", ["light", "dark"])
@pytest.mark.parametrize("path", site_pages() or ["index.html"])
def test_page_has_no_accessibility_violation(browser, server, axe_source, path, mode):
    visit = PageVisit(browser, server, path, mode=mode)
    page = visit.page
    try:
        assert page.evaluate("document.documentElement.dataset.theme") == mode
        page.wait_for_function(WIDGETS_RENDERED, timeout=20000)
        page.wait_for_function(
            "[...document.querySelectorAll('.math')].every(e => e.querySelector('mjx-container'))",
            timeout=15000,
        )
        page.add_script_tag(content=axe_source)
        violations = page.evaluate(RUN_AXE, THEME_HEADER)
        assert violations == [], f"{path} in {mode} mode:\n" + "\n".join(violations)
    finally:
        visit.close()


def test_the_exclusions_match_the_theme_header_only(browser, server, axe_source):
    """The excluded selectors match the theme's header elements on a chapter page, and
    nothing in the article itself."""
    visit = PageVisit(browser, server, "book/05_scaled_dot_product_attention.html")
    try:
        for rule, selector in THEME_HEADER.items():
            matched = visit.page.locator(selector)
            assert matched.count() >= 1, f"{rule}: {selector} matches nothing: drop it"
            in_article = visit.page.locator(f"article :is({selector})")
            assert in_article.count() == 0, f"{rule}: {selector} matches the article"
    finally:
        visit.close()
