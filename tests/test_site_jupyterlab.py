"""An explorer in a real JupyterLab 4, with a kernel, driven by Playwright.

The learner edition of chapter 5 (``coursekit.release.learner``, plain Markdown) is opened in
``jupyter lab`` (a temporary root, settings and workspace; a random port and token), with its
code cells cut down to the d_k explorer's cell so that the run stays short. After "Run All":

* no MyST syntax is left in the rendered Markdown (no ```{exercise}, :label:, {glue:text});
* the arrow keys move the explorer's slider, and the focus stays on it: JupyterLab's
  command-mode shortcuts, which also see those keys, must not take them (explorer.js);
* a mouse click moves it too, and the toggle answers the space bar;
* after each move, the kernel reads the new value of the trait (``explorer.d_k``).

Chapter 11's learner edition is run whole the same way (issue 25): every cell runs without a
traceback, no MyST is left, and its tokens explorer's slider reaches the kernel.

Debian's Chromium as in the site tests (site_browser.py); no request leaves localhost.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from site_browser import CHROMIUM, ROOT, launch_browser

pytestmark = [pytest.mark.site, pytest.mark.slow]

CHAPTER = "book/05_scaled_dot_product_attention.ipynb"
EXPLORER_CELL = "DkExplorer("  # the chapter's explorer cell: `explorer = DkExplorer(...)`
D_K_OPTIONS = [2**i for i in range(11)]
SLIDER = "[data-explorer='dk'] [data-control='d_k'] input[type='range']"
READOUT = "[data-explorer='dk'] [data-control='d_k'] output"
TOGGLE = "[data-explorer='dk'] [data-control='scaled'] input[type='checkbox']"

# MyST that must not reach a notebook front end: directive fences (marked renders ```{name}
# as a code block of language "{name}"), option lines, roles and label targets.
RAW_MYST = re.compile(
    r"```\{|:::\{|^:label:|^:class:|\{glue:text\}|\{(exercise|solution|ref|numref|doc)\}", re.M
)

APP = "window.jupyterapp"
NOTEBOOK = f"{APP}.shell.currentWidget"
KERNEL_IDLE = f"""() => {{
    const w = {APP} && {NOTEBOOK};
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!k && k.status === 'idle' && w.sessionContext.kernelDisplayStatus === 'idle';
}}"""
ALL_RUN = """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
    .every(p => /\\[\\d+\\]/.test(p.textContent))"""
READ_IN_KERNEL = f"""async (code) => {{
    const kernel = {NOTEBOOK}.sessionContext.session.kernel;
    let text = '';
    const future = kernel.requestExecute({{code, store_history: false}});
    future.onIOPub = (msg) => {{
        if (msg.header.msg_type === 'stream') text += msg.content.text;
        if (msg.header.msg_type === 'error') text += 'ERROR ' + msg.content.ename + ': ' + msg.content.evalue;
    }};
    await future.done;
    return text.trim();
}}"""


def _missing():
    if not Path(CHROMIUM).exists():
        return "Debian's chromium is not installed (apt-get install chromium)"
    for module in ("playwright", "jupyterlab", "anywidget"):
        try:
            __import__(module)
        except ImportError:
            return f"the {module} package is not installed"
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def learner_chapter(
    dest: Path, chapter: str = CHAPTER, keep=lambda cell: EXPLORER_CELL in cell.source
) -> int:
    """Write the learner edition of `chapter` to dest, its code cells cut down to those `keep`
    selects (every Markdown cell kept; default: chapter 5's explorer cell); return its number of
    Markdown cells."""
    from coursekit.release.learner import learner_notebook

    nb = nbformat.read(ROOT / chapter, as_version=4)
    learner_notebook(nb, chapter)
    nb.cells = [c for c in nb.cells if c.cell_type == "markdown" or keep(c)]
    if chapter == CHAPTER:
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert len(code) == 1, f"{CHAPTER} should have one cell making the explorer ({EXPLORER_CELL})"
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, dest)
    return sum(c.cell_type == "markdown" for c in nb.cells)


def run_lab(tmp_path_factory, write_chapter):
    """`jupyter lab` on a temporary root holding the chapter that write_chapter(path) writes:
    yields (base URL, token, notebook name, Markdown cells)."""
    reason = _missing()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the JupyterLab test cannot run: {reason}")
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("lab")
    (tmp / "root").mkdir()
    markdown_cells = write_chapter(tmp / "root" / "chapter.ipynb")
    port, token = _free_port(), "course-lab-test"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    log = open(tmp / "lab.log", "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp / 'root'}",
         "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         f"--LabApp.workspaces_dir={tmp / 'workspaces'}", f"--LabApp.user_settings_dir={tmp / 'settings'}"],
        cwd=tmp / "root", env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"jupyter lab exited ({proc.returncode}):\n{(tmp / 'lab.log').read_text()[-3000:]}"
                )
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("jupyter lab did not answer in 90 s")
                time.sleep(0.25)
        yield base, token, "chapter.ipynb", markdown_cells
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Chapter 5's learner edition, cut down to its explorer's cell, in `jupyter lab`."""
    yield from run_lab(tmp_path_factory, learner_chapter)


@pytest.fixture(scope="module")
def lab_browser(lab):
    yield from launch_browser()


def open_and_run(lab, lab_browser, ready, timeout=90000):
    """The lab's chapter open in JupyterLab, every cell run (`ready`: a selector that shows once
    the cells ran): yields the Playwright page, with `page.external` the requests refused."""
    base, token, name, _ = lab
    context = lab_browser.new_context(viewport={"width": 1280, "height": 1000})
    external = []

    def route(r):
        if r.request.url.startswith((base, "data:", "blob:")):
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.set_default_timeout(60000)
    page.goto(f"{base}/lab/tree/{name}?reset&token={token}")
    page.wait_for_function(f"() => !!({APP} && {NOTEBOOK} && {NOTEBOOK}.sessionContext)", timeout=90000)
    page.wait_for_function(KERNEL_IDLE, timeout=90000)
    page.evaluate(f"{APP}.commands.execute('notebook:run-all-cells')")
    page.wait_for_selector(ready, timeout=timeout)
    page.wait_for_function(ALL_RUN, timeout=timeout)
    page.wait_for_function(KERNEL_IDLE, timeout=timeout)
    page.external = external
    yield page
    context.close()


@pytest.fixture(scope="module")
def notebook(lab, lab_browser):
    """Chapter 5 open in JupyterLab, every cell run: the Playwright page."""
    yield from open_and_run(lab, lab_browser, SLIDER)


def kernel_value(page, expression, expected, timeout=15.0):
    """What the kernel prints for `expression`, polled until it is `expected` (the comm
    message of a move may land just after the read)."""
    deadline = time.monotonic() + timeout
    while True:
        got = page.evaluate(READ_IN_KERNEL, f"print(repr({expression}))")
        if got == repr(expected) or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def slider_state(page):
    return int(page.locator(SLIDER).input_value()), page.locator(READOUT).text_content()


def focused(page):
    return page.evaluate("document.activeElement && document.activeElement.outerHTML.slice(0, 120)")


def test_the_learner_notebook_shows_no_myst(notebook, lab):
    markdown_cells = lab[3]
    notebook.wait_for_function(
        f"() => document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown').length >= {markdown_cells}"
    )
    texts = notebook.locator(".jp-MarkdownCell .jp-RenderedMarkdown").all_inner_texts()
    raw = [m.group(0) for text in texts for m in RAW_MYST.finditer(text)]
    assert raw == [], f"raw MyST in the rendered notebook: {raw[:10]}"
    fenced = notebook.locator(".jp-RenderedMarkdown code[class*='{']").count()
    assert fenced == 0, "a MyST directive is rendered as a code block"


def test_arrow_keys_move_the_slider_and_the_trait(notebook):
    i, shown = slider_state(notebook)
    assert shown == str(D_K_OPTIONS[i])
    assert kernel_value(notebook, "explorer.d_k", D_K_OPTIONS[i]) == repr(D_K_OPTIONS[i])
    notebook.locator(SLIDER).focus()
    notebook.keyboard.press("ArrowRight")
    assert slider_state(notebook) == (i + 1, str(D_K_OPTIONS[i + 1])), (
        f"ArrowRight did not move the slider; the focus is on {focused(notebook)}"
    )
    notebook.keyboard.press("ArrowRight")
    notebook.keyboard.press("ArrowLeft")
    assert slider_state(notebook) == (i + 1, str(D_K_OPTIONS[i + 1]))
    assert notebook.evaluate(f'document.activeElement === document.querySelector("{SLIDER}")'), (
        f"the slider lost the focus to {focused(notebook)}"
    )
    assert kernel_value(notebook, "explorer.d_k", D_K_OPTIONS[i + 1]) == repr(D_K_OPTIONS[i + 1])
    notebook.keyboard.press("End")
    assert kernel_value(notebook, "explorer.d_k", 1024) == "1024"


def test_a_click_moves_the_slider_and_the_trait(notebook):
    slider = notebook.locator(SLIDER)
    box = slider.bounding_box()
    slider.click(position={"x": 1, "y": box["height"] / 2})  # the left end: the first option
    assert slider_state(notebook) == (0, "1")
    assert kernel_value(notebook, "explorer.d_k", 1) == "1"
    notebook.keyboard.press("ArrowRight")  # after a click, the keys go on working
    assert slider_state(notebook) == (1, "2"), f"the focus is on {focused(notebook)}"
    assert kernel_value(notebook, "explorer.d_k", 2) == "2"


def test_the_space_bar_flips_the_toggle_and_the_trait(notebook):
    toggle = notebook.locator(TOGGLE)
    before = toggle.is_checked()
    toggle.focus()
    notebook.keyboard.press(" ")
    assert toggle.is_checked() is (not before), f"the focus is on {focused(notebook)}"
    assert kernel_value(notebook, "explorer.scaled", not before) == repr(not before)


def test_no_request_left_localhost(notebook):
    assert notebook.external == [], f"requests outside localhost: {notebook.external[:5]}"


# --------------------------------------------------------------------------------------
# Chapter 11 whole (issue 25: the tokens chapter runs in JupyterLab from the learner edition)
# --------------------------------------------------------------------------------------
TOKENS_CHAPTER = "book/11_tokens.ipynb"
TOKENS_SLIDER = "[data-explorer='tokens'] [data-control='merges'] input[type='range']"


@pytest.fixture(scope="module")
def tokens_lab(tmp_path_factory):
    """Chapter 11's learner edition, every cell, in `jupyter lab`."""
    yield from run_lab(
        tmp_path_factory, lambda dest: learner_chapter(dest, TOKENS_CHAPTER, keep=lambda c: True)
    )


@pytest.fixture(scope="module")
def tokens_notebook(tokens_lab, lab_browser):
    """Chapter 11 open in JupyterLab, Run All done (it stops at the first error: every cell must
    show an execution count)."""
    yield from open_and_run(tokens_lab, lab_browser, TOKENS_SLIDER, timeout=300000)


def test_chapter_11_runs_in_jupyterlab_from_the_learner_edition(tokens_notebook, tokens_lab):
    cells = tokens_notebook.locator(".jp-CodeCell").count()
    outputs = tokens_notebook.locator(".jp-OutputArea-output").all_inner_texts()
    tracebacks = [text[:200] for text in outputs if "Traceback" in text]
    print(f"chapter 11 in JupyterLab: {cells} code cells run, {len(outputs)} outputs, no traceback")
    assert cells > 20 and tracebacks == [], tracebacks
    texts = tokens_notebook.locator(".jp-MarkdownCell .jp-RenderedMarkdown").all_inner_texts()
    raw = [m.group(0) for text in texts for m in RAW_MYST.finditer(text)]
    assert raw == [], f"raw MyST in the rendered notebook: {raw[:10]}"


def test_chapter_11_explorer_moves_the_kernel_trait(tokens_notebook):
    slider = tokens_notebook.locator(TOKENS_SLIDER)
    slider.focus()
    tokens_notebook.keyboard.press("Home")
    assert kernel_value(tokens_notebook, "tokens_explorer.merges", 0) == "0"
    tokens_notebook.keyboard.press("ArrowRight")
    moved = kernel_value(tokens_notebook, "tokens_explorer.merges > 0", True)
    assert moved == "True", f"ArrowRight did not reach the kernel; the focus is on {focused(tokens_notebook)}"
    assert tokens_notebook.external == [], f"requests outside localhost: {tokens_notebook.external[:5]}"


# --------------------------------------------------------------------------------------
# Chapter 12 (the modern decoder) in JupyterLab from the learner edition, its one training run
# left out (it takes minutes on one thread; nbval and the book execute it), and the GQA explorer's
# context menu reaching the kernel
# --------------------------------------------------------------------------------------
MODERN_CHAPTER = "book/12_modern_decoder.ipynb"
CONTEXT_OPTIONS = [
    64,
    1024,
]  # course_lib.widgets.gqa.CONTEXT_OPTIONS (not imported: no torch in this process)
MODERN_SELECT = "[data-explorer='gqa'] [data-control='context'] select"
TRAINING = ("train.train_lm(", "history", "live_test", "model.generate")  # the live run and what reads it


def without_training(cell):
    return not any(name in cell.source for name in TRAINING)


@pytest.fixture(scope="module")
def modern_lab(tmp_path_factory):
    """Chapter 12's learner edition, every cell but its training run, in `jupyter lab`."""
    yield from run_lab(
        tmp_path_factory, lambda dest: learner_chapter(dest, MODERN_CHAPTER, keep=without_training)
    )


@pytest.fixture(scope="module")
def modern_notebook(modern_lab, lab_browser):
    yield from open_and_run(modern_lab, lab_browser, MODERN_SELECT, timeout=300000)


def test_chapter_12_runs_in_jupyterlab_from_the_learner_edition(modern_notebook):
    nb = nbformat.read(ROOT / MODERN_CHAPTER, as_version=4)
    left_out = [c for c in nb.cells if c.cell_type == "code" and not without_training(c)]
    assert 1 <= len(left_out) <= 5, (
        f"{len(left_out)} cells left out: the filter should catch the training run only"
    )
    cells = modern_notebook.locator(".jp-CodeCell").count()
    outputs = modern_notebook.locator(".jp-OutputArea-output").all_inner_texts()
    tracebacks = [text[:200] for text in outputs if "Traceback" in text]
    print(f"chapter 12 in JupyterLab: {cells} code cells run ({len(left_out)} of the training run left out)")
    assert cells > 15 and tracebacks == [], tracebacks
    texts = modern_notebook.locator(".jp-MarkdownCell .jp-RenderedMarkdown").all_inner_texts()
    raw = [m.group(0) for text in texts for m in RAW_MYST.finditer(text)]
    assert raw == [], f"raw MyST in the rendered notebook: {raw[:10]}"
    assert modern_notebook.external == [], f"requests outside localhost: {modern_notebook.external[:5]}"


def test_chapter_12_explorer_moves_the_kernel_trait(modern_notebook):
    assert kernel_value(modern_notebook, "gqa_explorer.context", 1024) == "1024"
    from course_lib.widgets.gqa import CONTEXT_OPTIONS

    short = CONTEXT_OPTIONS.index(64)  # an option's value is its position (explorer.js)
    modern_notebook.locator(MODERN_SELECT).select_option(value=str(short))
    assert kernel_value(modern_notebook, "gqa_explorer.context", 64) == "64"
