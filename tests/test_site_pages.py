"""The built site (`make book` -> _build/html) in headless Chromium.

Every page is served from localhost with every other request blocked and
recorded: no page may log a console error or ask for anything outside the site,
maths must be typeset, and each explorer's numbers must change when its
controls move. Uses Debian's chromium driven by Playwright.

Outside CI, on a machine without Chromium or a built site, these tests skip
with the reason; with CI=true they must run. Each chapter's explorers have their
own module, test_site_<topic>.py, using the same fixtures (conftest.py).
"""

from __future__ import annotations

import pytest

from site_browser import ROOT, SITE, PageVisit, explorer_stat, site_pages

pytestmark = pytest.mark.site


@pytest.mark.parametrize("path", site_pages() or ["index.html"])
def test_page_is_offline_and_error_free(browser, server, path):
    visit = PageVisit(browser, server, path)
    try:
        visit.page.wait_for_timeout(300)
        assert visit.external == [], f"{path} requested outside the site: {visit.external}"
        assert visit.errors == [], f"{path} logged console errors: {visit.errors}"
        # maths typeset: every .math element holds a MathJax container (hidden ones too)
        visit.page.wait_for_function(
            "[...document.querySelectorAll('.math')].every(e => e.querySelector('mjx-container'))",
            timeout=15000,
        )
        widgets = visit.page.locator("script[type='application/vnd.jupyter.widget-view+json']")
        if widgets.count():
            # the widget placeholders have been rendered (attached: a training progress bar in a
            # folded output is rendered but hidden; the explorers' own tests check them visible)
            visit.page.wait_for_selector(
                ".cl-explorer, .widget-container, .jupyter-widgets", state="attached", timeout=15000
            )
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
        assert 40 < explorer_stat(page, "dk", "variance") < 90
        weights_before = root.locator("[data-panel='weights']").get_attribute("data-values")

        # d_k to the top (1024) with the keyboard: variance and saturation grow
        slider.focus()
        for _ in range(4):
            page.keyboard.press("ArrowRight")
        assert root.get_attribute("data-frame") == "10|0"
        assert 800 < explorer_stat(page, "dk", "variance") < 1300
        assert explorer_stat(page, "dk", "max_weight") > 0.9
        assert root.locator("[data-panel='weights']").get_attribute("data-values") != weights_before
        grad_unscaled = explorer_stat(page, "dk", "grad_norm")

        # scale by 1/sqrt(d_k): variance back to about 1, softmax no longer saturated
        toggle.check()
        assert root.get_attribute("data-frame") == "10|1"
        assert 0.7 < explorer_stat(page, "dk", "variance") < 1.3
        assert explorer_stat(page, "dk", "max_weight") < 0.6
        assert explorer_stat(page, "dk", "grad_norm") > 3 * grad_unscaled

        # down to d_k = 1 with the keyboard: scaled and unscaled agree there
        slider.focus()
        page.keyboard.press("Home")
        assert root.get_attribute("data-frame") == "0|1"
        assert visit.errors == [] and visit.external == []
    finally:
        visit.close()


def test_launch_buttons_open_this_notebook_of_the_learner_edition(server):
    """Every chapter page's Colab and Binder buttons open its own .ipynb on the learner
    edition's branch (course_launch_branches) of the repository set in _config.yml, not the
    instructor notebook of the repository's branch."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = config["repository"]
    branch = config["sphinx"]["config"]["course_launch_branches"]["instructor"]
    assert branch != repo["branch"]
    slug = repo["url"].removeprefix("https://github.com/")
    notebooks = sorted((ROOT / "book").glob("*.ipynb"))
    assert notebooks
    for nb in notebooks:
        html = (SITE / "book" / f"{nb.stem}.html").read_text()
        path = f"book/{nb.name}"
        assert f"https://colab.research.google.com/github/{slug}/blob/{branch}/{path}" in html, (
            f"no Colab button for {path} on {branch}"
        )
        assert f"https://mybinder.org/v2/gh/{slug}/{branch}?urlpath=lab/tree/{path}" in html, (
            f"no Binder button for {path} on {branch}"
        )
        assert f"/{repo['branch']}/{path}" not in html and f"/{repo['branch']}?urlpath" not in html


def test_colab_setup_cell_is_left_out_of_the_pages_and_kept_in_the_download(server):
    """The first cell of every notebook (tag colab-setup) installs course_lib on Colab: it is
    not shown on the site (nor indexed for search), and the downloadable .ipynb keeps it first."""
    import nbformat

    notebooks = sorted((ROOT / "book").glob("*.ipynb"))
    index = (SITE / "searchindex.js").read_text()
    for nb in notebooks:
        setup = nbformat.read(nb, as_version=4).cells[0]
        assert "colab-setup" in setup.metadata.get("tags", [])
        marker = 'if "google.colab" in sys.modules'
        assert marker in setup.source
        html = (SITE / "book" / f"{nb.stem}.html").read_text()
        assert "tag_colab-setup" not in html and "google.colab" not in html, nb.name
        download = nbformat.read(SITE / "_sources" / "book" / nb.name, as_version=4)
        assert download.cells[0].source == setup.source, f"{nb.name}: the download lost its set-up cell"
    assert "google.colab" not in index
