"""A one-page Jupyter Book holding chapter 10's GPT explorer, built the way the site is built.

    python tools/gpt_explorer_page.py OUT        # OUT/_build/html/book/gpt.html

The browser test (tests/test_site_gpt_explorer.py) and the timing benchmark
(benchmarks/bench_gpt_browser.py) use the built site's chapter 10 when it exists; this page is
for when it does not (building the whole site executes every chapter): the repository's
_config.yml and _ext/ (so the same widget manager, the same vendored scripts, onnxruntime-web and
the ONNX file copied by _ext/course_site.py), one notebook that shows
`GPTExplorer()` and its static figure as chapter 10 does, executed with its widget state saved
(tools/execute_book.py's way), then `jupyter-book build -W`. Needs node_modules (npm ci) and
the ONNX file (make gpt-onnx).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from export_gpt_onnx import ONNX_OUT  # noqa: E402

CELLS = [
    "from course_lib.widgets import GPTExplorer\n\ngpt_explorer = GPTExplorer()\ngpt_explorer",
    "import matplotlib.pyplot as plt\n\n"
    'fig = gpt_explorer.figure("The return value of ", position=19)\nplt.show()',
]
PAGE = "book/gpt.html"


def build_page(out: Path) -> Path:
    """Write and build the one-page book in `out`; -> the folder of the built HTML."""
    if not ONNX_OUT.exists():
        raise FileNotFoundError(f"{ONNX_OUT} is missing: run `make gpt-onnx`")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(
        ROOT / "_ext", out / "_ext", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    config = (ROOT / "_config.yml").read_text()
    config = config.replace("execute_notebooks: force", "execute_notebooks: 'off'")
    (out / "_config.yml").write_text(config)
    (out / "_toc.yml").write_text("format: jb-book\nroot: book/gpt\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# The GPT explorer")]
    nb.cells += [nbformat.v4.new_code_cell(cell) for cell in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (out / "book").mkdir(exist_ok=True)
    _execute(nb, out / "book")
    nbformat.write(nb, out / "book" / "gpt.ipynb")
    env = {**os.environ, "COURSE_NODE_MODULES": str(ROOT / "node_modules"), "COURSE_GPT_ONNX": str(ONNX_OUT)}
    subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", "-W", "--keep-going", str(out)],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    )
    return out / "_build" / "html"


def _execute(nb, folder):
    from nbclient import NotebookClient

    NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(folder)}},
    ).execute()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    print(build_page(args.out) / PAGE)


if __name__ == "__main__":
    main()
