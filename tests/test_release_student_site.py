"""The student site (`make student-book`, in _build/student/_build/html) shows no solution.

`make student-book` writes the student edition of the executed book (_build/executed, see
tools/execute_book.py) and builds it like the book (`jupyter-book build --all -W
--keep-going`, nothing executed again: the stubbed cells and the check cells have their
outputs cleared by coursekit.release). Then no line of a solution region and no line of a
solution directive of the instructor sources may appear in any page, `_sources` file,
downloadable notebook or search index of the built site.

The secrets are found here by a parser of their own, not by coursekit.release. Text is
compared with everything but letters and digits removed, so a line is found whatever the
markup around it (HTML tags and entities, syntax highlighting, JSON escapes, Markdown
rendered as HTML, maths). A secret line that also appears in public material (the instructor
sources outside solutions, or course_lib itself, which students get and the chapters display)
is no secret and is not looked for.

Needs the built student site; without it the tests skip and say why, except under CI=true,
where they fail.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import nbformat
import pytest

from coursekit.release import STUB
from coursekit.release.markers import _CHECK_CALL  # an exercise check (evidence.check_live is not one)

ROOT = Path(__file__).resolve().parent.parent
STUDENT_SITE = ROOT / "_build" / "student" / "_build" / "html"
MIN_SECRET = 12  # letters and digits; shorter lines (`else:`) say nothing

pytestmark = pytest.mark.site

_BEGIN, _END = "### BEGIN SOLUTION", "### END SOLUTION"
_OPEN = re.compile(r"^\s*(?P<fence>`{3,}|:{3,})\s*\{solution(?:-start|-end)?\}")
_GATE_START = re.compile(r"^\s*(`{3,}|:{3,})\s*\{solution-start\}")
_GATE_END = re.compile(r"^\s*(`{3,}|:{3,})\s*\{solution-end\}")


def squash(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z]+", "", text)


def _split_code(source: str) -> tuple[list[str], list[str]]:
    """(lines inside solution regions, lines outside)."""
    secret, public, inside = [], [], False
    for line in source.splitlines():
        if line.strip() in (_BEGIN, _END):
            inside = line.strip() == _BEGIN
        else:
            (secret if inside else public).append(line)
    return secret, public


def _split_markdown(text: str, in_gate: bool) -> tuple[list[str], list[str], bool]:
    """(lines of solution directives, other lines, still inside a solution-start gate)."""
    secret, public, fence = [], [], None
    for line in text.splitlines():
        if in_gate:
            secret.append(line)
            if _GATE_END.match(line):
                in_gate = False
                fence = _GATE_END.match(line).group(1)  # its own closing fence follows
            continue
        if fence:
            secret.append(line)
            if re.fullmatch(rf"\s*{re.escape(fence[0])}{{{len(fence)},}}\s*", line):
                fence = None
            continue
        m = _OPEN.match(line)
        if m:
            secret.append(line)
            fence = m["fence"]
            in_gate = bool(_GATE_START.match(line))
            if in_gate:  # the gate's own directive closes at once; the gate runs to -end
                fence = None
            continue
        public.append(line)
    return secret, public, in_gate


def secrets_and_public():
    """Solution lines of the instructor book, and the public text (squashed)."""
    secret, public = [], []
    for path in sorted((ROOT / "book").rglob("*")):
        if path.name.startswith("instructor_") or ".ipynb_checkpoints" in path.parts:
            continue  # instructor pages are not in the student edition at all
        if path.suffix == ".ipynb":
            in_gate = False
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type == "code":
                    s, p = _split_code(cell.source)
                    if in_gate or "solution" in cell.metadata.get("tags", []):
                        s, p = s + p, []
                else:
                    s, p, in_gate = _split_markdown(cell.source, in_gate)
                secret += s
                public += p
        elif path.suffix == ".md":
            s, p, _ = _split_markdown(path.read_text(encoding="utf-8"), False)
            s2, p = _split_code("\n".join(p))
            secret += s + s2
            public += p
    public_text = squash("\n".join(public))
    public_text += "".join(squash(p.read_text()) for p in (ROOT / "course_lib").rglob("*.py"))
    return secret, public_text


def site_texts(site: Path) -> dict[str, str]:
    """Squashed text of every page, source, notebook and index file of a built site (not the
    theme's and vendored scripts in _static)."""
    texts = {}
    for path in sorted(site.rglob("*")):
        rel = path.relative_to(site)
        if not path.is_file() or rel.parts[0] == "_static":
            continue
        if path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            text = "\n".join(
                c.source + "\n" + json.dumps(c.get("outputs", []), ensure_ascii=False).replace("\\n", "\n")
                for c in nb.cells
            )
        elif path.suffix in (".html", ".js", ".md", ".txt", ".json"):
            text = path.read_text(encoding="utf-8", errors="replace")
            if path.suffix == ".html":
                text = html.unescape(re.sub(r"<[^>]*>", "", text))
        else:
            continue
        texts[str(rel)] = squash(text)
    return texts


@pytest.fixture(scope="module")
def student_site():
    if not (STUDENT_SITE / "index.html").exists():
        reason = f"the student site is not built ({STUDENT_SITE}): run `make student-book`"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    return STUDENT_SITE


def test_student_site_shows_the_exercises_unsolved(student_site):
    """Every chapter with solutions shows the stubs and the checks, with no output under
    them, and its download is the student notebook."""
    import yaml

    pages = sorted(str(p.relative_to(student_site)) for p in (student_site / "book").glob("*.html"))
    chapters = [p for p in pages if Path(p).stem[:2].isdigit()]
    assert chapters, pages
    assert not [p for p in pages if Path(p).name.startswith("instructor_")]
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    slug = config["repository"]["url"].removeprefix("https://github.com/")
    branch = config["sphinx"]["config"]["course_launch_branches"]["student"]
    for page in chapters:
        text = (student_site / page).read_text()
        stem = Path(page).stem
        download = student_site / "_sources" / "book" / f"{stem}.ipynb"
        assert download.exists()
        assert f"https://colab.research.google.com/github/{slug}/blob/{branch}/book/{stem}.ipynb" in text, (
            f"{page}: the Colab button does not open the student edition ({branch})"
        )
        instructor = nbformat.read(ROOT / "book" / f"{stem}.ipynb", as_version=4)
        if not any(_BEGIN in c.source for c in instructor.cells):
            continue
        assert "NotImplementedError" in html.unescape(re.sub(r"<[^>]*>", "", text)), page
        student = nbformat.read(download, as_version=4)
        stubbed = [c for c in student.cells if c.cell_type == "code" and STUB in c.source]
        checks = [c for c in student.cells if c.cell_type == "code" and _CHECK_CALL.search(c.source)]
        assert stubbed and checks, f"{stem}: no stub or no check in the student notebook"
        assert all(c.outputs == [] for c in stubbed + checks), f"{stem}: outputs under a stub"


def looked_for() -> dict[str, str]:
    """{squashed: line} of the solution lines worth looking for (long enough, not public)."""
    secret, public = secrets_and_public()
    return {squash(s): s.strip() for s in secret if len(squash(s)) >= MIN_SECRET and squash(s) not in public}


def find_leaks(site: Path) -> list[tuple[str, str]]:
    texts = site_texts(site)
    return [(name, line) for name, text in texts.items() for key, line in looked_for().items() if key in text]


def test_student_site_leaks_no_solution(student_site):
    secret, _ = secrets_and_public()
    assert secret, "the instructor book has no solution to hide: nothing tested"
    assert len(looked_for()) >= len({squash(s) for s in secret if squash(s)}) // 2, (
        "most solution lines are also public: the test would prove little"
    )
    texts = site_texts(student_site)
    assert any(name.endswith(".ipynb") for name in texts) and "searchindex.js" in texts
    leaks = find_leaks(student_site)
    assert not leaks, f"solution text in the student site: {leaks[:10]}"
    for name in texts:
        if name.endswith(".html"):
            raw = (student_site / name).read_text()
            assert not re.search(r'class="[^"]*\bsolution\b', raw), f"{name}: a solution block"
        if name.startswith("_sources") or name.endswith(".ipynb"):
            assert "{solution" not in (student_site / name).read_text(), name


def test_the_detector_sees_solutions_in_every_form():
    """Every line looked for is found by the same detector in the instructor notebooks, and
    in the forms the site would show it in: code highlighted by Pygments (as Sphinx does) and
    prose rendered from Markdown to HTML."""
    from markdown_it import MarkdownIt
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    def seen_in_html(fragment: str, key: str) -> bool:
        return key in squash(html.unescape(re.sub(r"<[^>]*>", "", fragment)))

    keys = looked_for()
    sources = "".join(site_texts(ROOT / "book").values())
    assert keys and all(key in sources for key in keys)
    md = MarkdownIt("commonmark")
    for key, line in keys.items():
        assert seen_in_html(highlight(line, PythonLexer(), HtmlFormatter()), key), line
        if not _OPEN.match(line):  # a directive's own line is checked in the raw sources
            assert seen_in_html(md.render(line), key), line
