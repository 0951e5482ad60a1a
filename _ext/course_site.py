"""Local Sphinx extension: make the built site work with the network off.

1. Copies the JavaScript the widgets need from node_modules (installed from
   package.json / package-lock.json by `make`) into `_build/html/_static/vendor/`:
   require.js, the Jupyter widget manager (html-manager) with its fonts, and
   anywidget's front end. `_config.yml` points myst-nb's `nb_ipywidgets_js` at
   these copies. They are copied at build-finished, not put on
   html_static_path, because Jupyter Book injects every .js/.css found there
   into every page.
2. Writes `vendor/course-widgets-loader.js`, which tells require.js where
   anywidget's front end lives on this site (and points the widget manager's
   CDN fallback at this site too, so a missing module is a local 404, never a
   request to the internet).
3. Prunes the MathJax 3 distribution that sphinx-mathjax-offline copies (24 MB):
   the combined bundles this site does not load (tex-svg.js, mml-chtml.js, ...)
   and the SVG output go; the bundle in use, its lazily loaded TeX extensions,
   CHTML fonts, the menu and the accessibility tools (a11y, sre) stay.
4. Removes the second `const THEBE_JS_URL` declaration that Jupyter Book 1
   emits in every page (a console SyntaxError: redeclaration of a const).

node_modules is looked up as Node does: next to the book, then in each parent
folder (so the student edition in `_student/` uses the repository's), unless
the environment variable COURSE_NODE_MODULES names it (a book built elsewhere,
e.g. the student edition written to a temporary folder by the tests).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sphinx.errors import ExtensionError

ROOT = Path(__file__).resolve().parent.parent


def _find_node_modules() -> Path:
    if os.environ.get("COURSE_NODE_MODULES"):
        return Path(os.environ["COURSE_NODE_MODULES"]).resolve()
    for folder in (ROOT, *ROOT.parents):
        if (folder / "node_modules").is_dir():
            return folder / "node_modules"
    return ROOT / "node_modules"  # missing: check_node_modules says what to run


NODE_MODULES = _find_node_modules()

# (source under node_modules, destination under _static/vendor)
VENDORED = [
    ("requirejs/require.js", "require.js"),
    ("@jupyter-widgets/html-manager/dist/embed-amd.js", "html-manager/embed-amd.js"),
    ("anywidget/dist/index.js", "anywidget/index.js"),
]
FONT_SUFFIXES = {".woff", ".woff2", ".ttf", ".eot", ".svg"}

LOADER_JS = """\
// Written by _ext/course_site.py. Points require.js at the widget front ends
// served by this site, so viewing a page fetches nothing from the internet.
(function () {
  var me = document.currentScript;
  var vendor = me.src.slice(0, me.src.lastIndexOf("/") + 1);
  require.config({ paths: {
    anywidget: vendor + "anywidget/index",
    // The widget manager finds its fonts next to its module's URL.
    "@jupyter-widgets/html-manager/dist": vendor + "html-manager",
  } });
  me.setAttribute("data-jupyter-widgets-cdn", vendor + "cdn/");
})();
"""


def check_node_modules(app):
    missing = [src for src, _ in VENDORED if not (NODE_MODULES / src).exists()]
    if missing:
        raise ExtensionError(
            f"JavaScript assets missing from {NODE_MODULES}: {missing}. "
            "Run `make book` (it runs `npm ci`) or `npm ci` in the repository root.")


def copy_vendor(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    vendor = Path(app.outdir) / "_static" / "vendor"
    for src, dest in VENDORED:
        (vendor / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(NODE_MODULES / src, vendor / dest)
    fonts = NODE_MODULES / "@jupyter-widgets/html-manager/dist"
    for font in fonts.iterdir():
        if font.suffix in FONT_SUFFIXES:
            shutil.copyfile(font, vendor / "html-manager" / font.name)
    (vendor / "course-widgets-loader.js").write_text(LOADER_JS)


def drop_duplicate_inline_scripts(app, pagename, templatename, context, doctree):
    """Keep one copy of each inline script: Jupyter Book 1 emits the
    `const THEBE_JS_URL = ...` script twice, and the second is a SyntaxError."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen = set()
    for script in list(scripts):
        body = getattr(script, "attributes", {}).get("body")
        if body and body in seen:
            scripts.remove(script)
        elif body:
            seen.add(body)


# Top-level MathJax bundles: each is a complete entry point; a page loads one.
MATHJAX_BUNDLES = ["tex-chtml.js", "tex-chtml-full.js", "tex-chtml-full-speech.js", "tex-mml-chtml.js",
                   "tex-mml-svg.js", "tex-svg.js", "tex-svg-full.js", "mml-chtml.js", "mml-svg.js",
                   "node-main.js"]
MATHJAX_SVG_OUTPUT = ["output/svg", "output/svg.js"]


def prune_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    mathjax = Path(app.outdir) / "_static" / "mathjax"
    in_use = Path(str(app.config.mathjax_path).split("?")[0]).name
    if not mathjax.is_dir() or in_use not in MATHJAX_BUNDLES:
        return  # not the offline MathJax, or a bundle we do not know: leave it alone
    unused = [b for b in MATHJAX_BUNDLES if b != in_use]
    if "svg" not in in_use:
        unused += MATHJAX_SVG_OUTPUT
    for rel in unused:
        path = mathjax / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def setup(app):
    app.connect("builder-inited", check_node_modules)
    app.connect("html-page-context", drop_duplicate_inline_scripts, priority=100)
    app.connect("build-finished", copy_vendor)
    app.connect("build-finished", prune_mathjax, priority=900)  # after sphinx-mathjax-offline copies it
    return {"parallel_read_safe": True, "parallel_write_safe": True}
