"""The whole book as one PDF, for offline reading and printing.

    python tools/book_pdf.py [--site _build/html] [--out _build/pdf/book.pdf]

Each page of ``_toc.yml``, in reading order, is opened from the built site (served on
localhost; every request outside it is refused) in Debian's Chromium through Playwright,
once its maths is typeset by MathJax and its widgets rendered, and printed to PDF with the
site's print style (``_ext/static/course_site.css``: no navigation, and no live widget, since
each explorer is followed by its static figure). pypdf joins the pages into one file with a
bookmark per page, titled by the page's heading.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import io
import shutil
import sys
import threading
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    "--disable-dev-shm-usage",
]
READY = """() => [...document.querySelectorAll('.math')].every(e => e.querySelector('mjx-container'))
    && [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')]
       .every(s => s.parentElement.querySelector('.widget-subarea'))"""

TITLE = """() => { const h = document.querySelector('article h1').cloneNode(true);
    h.querySelectorAll('.headerlink').forEach(a => a.remove()); return h.textContent; }"""


def toc_pages(root: Path) -> list[str]:
    """The pages of _toc.yml in reading order, as paths without suffix."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(node):
        for key in ("parts", "chapters", "sections"):
            for entry in node.get(key, []) or []:
                if "file" in entry:
                    pages.append(entry["file"])
                walk(entry)

    walk(toc)
    return pages


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def print_book(site: Path, out: Path, root: Path = ROOT) -> list[tuple[str, str, int]]:
    """Write the PDF; return (page, title, number of PDF pages) for each page."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader, PdfWriter

    pages = toc_pages(root)
    missing = [p for p in pages if not (site / f"{p}.html").exists()]
    if missing:
        raise SystemExit(f"the site in {site} lacks {missing}: run `make book` first")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    writer, done = PdfWriter(), []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1100, "height": 1400})
            context.route(
                "**/*",
                lambda route: (
                    route.continue_()
                    if route.request.url.startswith((base, "data:", "blob:"))
                    else route.abort()
                ),
            )
            page = context.new_page()
            for name in pages:
                page.goto(f"{base}/{name}.html", wait_until="load")
                page.wait_for_load_state("networkidle")
                page.wait_for_function(READY, timeout=30000)
                page.emulate_media(media="print")
                title = " ".join(page.evaluate(TITLE).split())
                pdf = page.pdf(
                    format="A4",
                    print_background=True,
                    outline=False,
                    margin={"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
                )
                reader = PdfReader(io.BytesIO(pdf))
                start = len(writer.pages)
                writer.append(reader)
                writer.add_outline_item(title=title, page_number=start)
                done.append((name, title, len(reader.pages)))
                print(f"  {len(reader.pages):3d} pages  {name}: {title}", flush=True)
            browser.close()
    finally:
        httpd.shutdown()
    writer.add_metadata({"/Title": yaml.safe_load((root / "_config.yml").read_text())["title"]})
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        writer.write(f)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf" / "book.pdf")
    args = parser.parse_args(argv)
    done = print_book(args.site, args.out)
    print(f"{args.out}: {sum(n for *_, n in done)} pages from {len(done)} pages of the site")
    return 0


if __name__ == "__main__":
    sys.exit(main())
