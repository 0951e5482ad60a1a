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
5. Points the Colab and Binder launch buttons at the branch of this edition of the
   site (`course_launch_branches` in _config.yml; the edition is `instructor` unless
   the environment variable COURSE_EDITION names another, as `make student-book`
   does), never at the instructor notebooks of the repository's own branch.
6. Names myst-nb's "Show code cell source" toggles by their visible text (WCAG 2.5.3).
7. Leaves the Colab set-up cell (the first cell of every notebook, tagged
   `colab-setup`) out of the pages, as myst-nb's `remove-cell` tag would, without
   editing the notebooks: the downloadable .ipynb keeps it first.
8. Serves `_ext/static/course_site.css`: in dark mode, figures (matplotlib outputs, the
   explorers' static fallbacks) sit on a light card, since they are drawn for a white
   background; in print (and so in `make pdf`), the live widgets are hidden (each
   explorer is followed by its static figure) and the page chrome is left out.

9. Serves chapter 10's GPT explorer (course_lib.widgets.GPTExplorer): onnxruntime-web's
   WebAssembly build (ort.wasm.min.mjs, the .mjs/.wasm pair it loads) in
   `vendor/onnxruntime-web/`, and the capstone GPT's ONNX file, which `make gpt-onnx`
   writes to `_build/gpt/gpt_capstone.onnx` from the committed weights, in `_static/course-gpt/`
   (looked up like node_modules, or named by the environment variable COURSE_GPT_ONNX).

node_modules is looked up as Node does: next to the book, then in each parent
folder (so the student edition in `_student/` uses the repository's), unless
the environment variable COURSE_NODE_MODULES names it (a book built elsewhere,
e.g. the student edition written to a temporary folder by the tests).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from docutils import nodes
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
    # onnxruntime-web, WebAssembly backend only (course_lib/static/gpt_explorer.js imports it)
    ("onnxruntime-web/dist/ort.wasm.min.mjs", "onnxruntime-web/ort.wasm.min.mjs"),
    ("onnxruntime-web/dist/ort-wasm-simd-threaded.mjs", "onnxruntime-web/ort-wasm-simd-threaded.mjs"),
    ("onnxruntime-web/dist/ort-wasm-simd-threaded.wasm", "onnxruntime-web/ort-wasm-simd-threaded.wasm"),
]
GPT_ONNX = Path("_build") / "gpt" / "gpt_capstone.onnx"
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


def _find_gpt_onnx() -> Path:
    if os.environ.get("COURSE_GPT_ONNX"):
        return Path(os.environ["COURSE_GPT_ONNX"]).resolve()
    for folder in (ROOT, *ROOT.parents):
        if (folder / GPT_ONNX).is_file():
            return folder / GPT_ONNX
    return ROOT / GPT_ONNX  # missing: check_node_modules says what to run


def check_node_modules(app):
    missing = [src for src, _ in VENDORED if not (NODE_MODULES / src).exists()]
    if missing:
        raise ExtensionError(
            f"JavaScript assets missing from {NODE_MODULES}: {missing}. "
            "Run `make book` (it runs `npm ci`) or `npm ci` in the repository root."
        )
    if not _find_gpt_onnx().is_file():
        raise ExtensionError(
            f"chapter 10's GPT explorer needs {_find_gpt_onnx()}: run `make gpt-onnx` "
            "(tools/export_gpt_onnx.py, from the committed weights)."
        )


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
    gpt = Path(app.outdir) / "_static" / "course-gpt"
    gpt.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_find_gpt_onnx(), gpt / GPT_ONNX.name)


# myst-nb's toggle of a hidden cell input names itself "Toggle hidden content" while it shows
# "Show code cell source": its accessible name must contain its visible text (WCAG 2.5.3),
# which it does once the aria-label is gone (the name then comes from that text).
TOGGLE_SUMMARY = '<summary aria-label="Toggle hidden content">'


def name_toggles_by_their_text(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = context["body"].replace(TOGGLE_SUMMARY, "<summary>")


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
MATHJAX_BUNDLES = [
    "tex-chtml.js",
    "tex-chtml-full.js",
    "tex-chtml-full-speech.js",
    "tex-mml-chtml.js",
    "tex-mml-svg.js",
    "tex-svg.js",
    "tex-svg-full.js",
    "mml-chtml.js",
    "mml-svg.js",
    "node-main.js",
]
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


def set_launch_branch(app, config):
    """The launch buttons of sphinx-book-theme open `repository_branch`: make it the branch
    of this edition."""
    branches = config.course_launch_branches
    if not branches:
        return  # not configured: the theme's default (the repository's branch)
    edition = os.environ.get("COURSE_EDITION", "instructor")
    if edition not in branches:
        raise ExtensionError(
            f"COURSE_EDITION={edition!r}: course_launch_branches in "
            f"_config.yml names the editions {sorted(branches)}"
        )
    config.html_theme_options = {**config.html_theme_options, "repository_branch": branches[edition]}


SETUP_CELL_TAG = "colab-setup"


def remove_setup_cells(app, doctree):
    """Drop the cells tagged `colab-setup` from the page (and so from the search index)."""
    for node in list(doctree.findall(nodes.container)):
        if f"tag_{SETUP_CELL_TAG}" in node.get("classes", []):
            node.parent.remove(node)


STATIC = Path(__file__).resolve().parent / "static"


def add_static(app):
    app.config.html_static_path.append(str(STATIC))
    app.add_css_file("course_site.css")


def setup(app):
    app.add_config_value("course_launch_branches", {}, "html", types=[dict])
    app.connect("config-inited", set_launch_branch)
    app.connect("builder-inited", add_static)
    app.connect("doctree-read", remove_setup_cells)
    app.connect("builder-inited", check_node_modules)
    app.connect("html-page-context", drop_duplicate_inline_scripts, priority=100)
    app.connect("html-page-context", name_toggles_by_their_text)
    app.connect("build-finished", copy_vendor)
    app.connect("build-finished", prune_mathjax, priority=900)  # after sphinx-mathjax-offline copies it
    return {"parallel_read_safe": True, "parallel_write_safe": True}
