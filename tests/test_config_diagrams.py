"""The architecture diagrams: the committed SVGs are what tools/diagrams.py writes, and every
figure a chapter places exists, has alt text and a caption, and carries the class that gives it
its light card in dark mode (_ext/static/course_site.css)."""

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "book" / "figures"
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
FIGURE = re.compile(
    r"^(`{3,}|:{3,})\{figure\}[ \t]*(?P<path>\S+)[ \t]*\n(?P<body>.*?)^\1[ \t]*$", re.M | re.S
)


def _figures():
    """(chapter, path, options, caption) of every {figure} directive in the chapters' markdown."""
    found = []
    for nb in CHAPTERS:
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for m in FIGURE.finditer("".join(cell["source"])):
                options = dict(re.findall(r"^:([\w-]+):[ \t]*(.*)$", m["body"], re.M))
                caption = re.sub(r"^:[\w-]+:.*$", "", m["body"], flags=re.M).strip()
                found.append((nb.name, m["path"], options, caption))
    return found


def test_the_committed_diagrams_are_what_the_script_writes(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "diagrams.py"), "--check"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_check_finds_a_stale_diagram(tmp_path):
    out = tmp_path / "figures"
    subprocess.run([sys.executable, str(ROOT / "tools" / "diagrams.py"), "--out", str(out)], check=True)
    first = sorted(out.glob("*.svg"))[0]
    first.write_text(first.read_text(encoding="utf-8").replace("#FFFFFF", "#000000"), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "diagrams.py"), "--check", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and first.name in run.stdout


@pytest.mark.parametrize("svg", sorted(FIGURES.glob("*.svg")), ids=lambda p: p.name)
def test_each_diagram_is_well_formed_with_a_title_and_its_own_white_background(svg):
    root = ET.parse(svg).getroot()
    ns = {"s": "http://www.w3.org/2000/svg"}
    assert root.find("s:title", ns) is not None and root.find("s:title", ns).text.strip()
    background = root.find("s:rect", ns)  # the first rectangle, under everything else
    assert background.get("fill") == "#FFFFFF"
    assert (background.get("width"), background.get("height")) == (root.get("width"), root.get("height"))


def test_every_placed_figure_exists_and_has_alt_text_a_caption_and_the_dark_mode_class():
    figures = _figures()
    placed = {Path(path).name for _, path, _, _ in figures}
    assert {"rnn_unrolled_bptt.svg", "seq2seq_bottleneck.svg", "gpt_block.svg"} <= placed, placed
    for chapter, path, options, caption in figures:
        assert (ROOT / "book" / path).is_file(), f"{chapter}: {path} (relative to the notebook) is missing"
        assert len(options.get("alt", "").split()) >= 10, f"{chapter}: {path} needs alt text"
        assert caption, f"{chapter}: {path} has no caption"
        if Path(path).parent.name == "figures":
            assert "course-diagram" in options.get("class", "").split(), f"{chapter}: {path}"
