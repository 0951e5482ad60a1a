"""The book as one PDF (`make pdf`, tools/book_pdf.py): every page of _toc.yml in reading order,
its maths typeset by MathJax, the explorers' static figures in place of the live widgets.

Needs _build/pdf/book.pdf; without it the tests skip and say why, except under CI=true,
where they fail (`make test` writes it).
"""

from __future__ import annotations

import html as html_lib
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PDF = ROOT / "_build" / "pdf" / "book.pdf"
SITE = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "tools"))
from book_pdf import toc_pages  # noqa: E402

pytestmark = pytest.mark.site


@pytest.fixture(scope="module")
def book():
    if not PDF.exists():
        reason = f"{PDF} is missing: run `make pdf`"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    from pypdf import PdfReader

    reader = PdfReader(PDF)
    outline = [(item.title, reader.get_destination_page_number(item)) for item in reader.outline]
    return reader, outline


def _mathjax_fonts(page) -> set[str]:
    fonts = page.get("/Resources", {}).get("/Font", {})
    families = set()
    for ref in fonts.values():
        descriptor = ref.get_object().get("/FontDescriptor")
        family = descriptor.get_object().get("/FontFamily") if descriptor else None
        if family and str(family).startswith("MathJax_"):
            families.add(str(family))
    return families


def test_every_page_of_the_book_in_reading_order(book):
    reader, outline = book
    pages = toc_pages(ROOT)
    assert len(outline) == len(pages), [t for t, _ in outline]
    starts = [start for _, start in outline]
    assert starts == sorted(starts) and starts[0] == 0 and len(set(starts)) == len(starts)
    for (title, start), name in zip(outline, pages):
        html = (SITE / f"{name}.html").read_text()
        # the page's own h1 is the one with a heading link (the theme may print another h1 first)
        heading = next(h for h in re.findall(r"<h1>(.*?)</h1>", html, re.S) if 'class="headerlink"' in h)
        heading = heading.split('<a class="headerlink"')[0]
        assert " ".join(title.split()) == re.sub(r"<[^>]+>", "", heading).strip(), name
        first_page = " ".join(reader.pages[start].extract_text().split())  # a title may wrap
        assert title.split(":")[0] in first_page, f"{name}: its title is not on its first page"


def test_maths_is_typeset(book):
    """Each page with maths prints MathJax's fonts, and no TeX source reaches the text."""
    reader, outline = book
    bounds = [start for _, start in outline] + [len(reader.pages)]
    for i, name in enumerate(toc_pages(ROOT)):
        html = (SITE / f"{name}.html").read_text()
        if 'class="math' not in html:
            continue
        fonts = set().union(*(_mathjax_fonts(reader.pages[p]) for p in range(bounds[i], bounds[i + 1])))
        assert {"MathJax_Main", "MathJax_Math"} & fonts, f"{name}: no MathJax font in its pages"
    text = "\n".join(page.extract_text() for page in reader.pages)
    # TeX may appear where the pages show code (e.g. a matplotlib label), nowhere else
    code = "\n".join(
        html_lib.unescape(re.sub(r"<[^>]+>", "", block))
        for name in toc_pages(ROOT)
        for block in re.findall(r"<pre[^>]*>(.*?)</pre>", (SITE / f"{name}.html").read_text(), re.S)
    )
    for tex in ["\\frac", "\\sqrt", "\\mathrm", "\\begin{", "$$"]:
        assert text.count(tex) <= code.count(tex), (
            f"raw TeX {tex!r} in the PDF: {text.count(tex)} times, {code.count(tex)} of them in code"
        )


def test_explorers_print_as_their_static_figures(browser, server):
    """In print, every rendered explorer is hidden and every figure shown: the chapters follow
    each explorer with its static figure (what tools/book_pdf.py prints)."""
    from site_browser import PageVisit

    visit = PageVisit(browser, server, "book/05_scaled_dot_product_attention.html")
    page = visit.page
    try:
        page.wait_for_selector(".cl-explorer", timeout=20000)
        assert page.locator(".cl-explorer:visible").count() >= 1
        page.emulate_media(media="print")
        assert page.locator(".cl-explorer").count() >= 1
        assert page.locator(".cl-explorer:visible").count() == 0
        assert page.locator(".cell_output img:visible").count() >= 1
        assert page.locator(".bd-sidebar-primary:visible, .bd-header:visible").count() == 0
    finally:
        visit.close()
