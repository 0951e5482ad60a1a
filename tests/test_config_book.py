"""The book's configuration agrees with itself and with the notebooks.

The repository URL and branch live in _config.yml only; every notebook's first
cell (the Colab set-up) must install course_lib from exactly there.
"""

import re
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


def _toc_files():
    files = [TOC["root"]]
    for part in TOC.get("parts", []):
        files += [chapter["file"] for chapter in part["chapters"]]
    return files


def test_every_toc_entry_exists_and_every_notebook_is_in_the_toc():
    for entry in _toc_files():
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".md", ".ipynb")), entry
    listed = {str(Path(f)) for f in _toc_files()}
    for nb in NOTEBOOKS:
        assert str(nb.relative_to(ROOT).with_suffix("")) in listed, f"{nb.name} is not in _toc.yml"


def test_chapters_are_numbered_in_reading_order():
    chapters = [Path(f).name for f in _toc_files()[1:] if Path(f).name[:2].isdigit()]
    assert chapters == sorted(chapters)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_cell_installs_course_lib_on_colab_from_the_configured_repository(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    repo, branch = CONFIG["repository"]["url"], CONFIG["repository"]["branch"]
    assert first.cell_type == "code" and "colab-setup" in first.metadata.get("tags", [])
    assert 'if "google.colab" in sys.modules:' in first.source
    urls = re.findall(r"git\+(\S+?)@(\w[\w.-]*)", first.source)
    assert urls == [(repo, branch)], (
        f"{path.name}: set-up cell installs from {urls}, _config.yml says {repo}@{branch}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_use_the_python3_kernel_and_have_a_title(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    titles = [c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("# ")]
    assert len(titles) == 1


def test_widget_scripts_are_served_by_the_site():
    scripts = CONFIG["sphinx"]["config"]["nb_ipywidgets_js"]
    assert scripts and all("://" not in path for path in scripts)
    assert CONFIG["execute"]["execute_notebooks"] == "force"
    assert CONFIG["sphinx"]["recursive_update"] is True  # or the launch buttons vanish


def test_environment_pins():
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().split() if "==" in line)
    assert pins["torch"] == "2.13.0"
    assert pins["jupyter-book"] == "1.0.4.post1"
    for name in [
        "nbval",
        "ipywidgets",
        "anywidget",
        "playwright",
        "sphinx-exercise",
        "sphinx-mathjax-offline",
        "tqdm",
        "matplotlib",
        "numpy",
        "pytest",
    ]:
        assert name in pins, f"{name} is not pinned in requirements.txt"
    assert pins["ipywidgets"].startswith("8.")
