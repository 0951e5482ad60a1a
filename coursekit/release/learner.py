"""The learner edition: the book's notebooks in plain Markdown, for JupyterLab, Colab and VS Code.

    python -m coursekit.release learner OUTDIR [--student] [--src REPO_ROOT] [--force]

The book is written in MyST (directives, roles, labels) for Jupyter Book; a notebook front end
shows that syntax raw. The learner edition keeps every cell and output and rewrites the
Markdown of ``book/`` (notebook cells and ``.md`` pages) so that nothing of MyST is left:

* ``{exercise}`` -> a heading "Exercise N: Title (★★, core, 15 min)" and its statement;
* ``{solution}`` and dropdown admonitions (hints, answers) -> ``<details><summary>``, folded;
* other admonitions (``{admonition}``, ``{note}``, ``{tip}``, ...) -> a quoted block with a bold
  title; ``{figure}`` -> an image with its caption; ``{math}`` -> ``$$ ... $$``;
* ``{glue:text}`name:.3f``` -> the number the notebook's own run stored under ``name``
  (read from the committed outputs), formatted as the role says;
* ``{ref}``/``{doc}``/``{numref}`` roles -> their text; ``(label)=`` targets and ``%`` comments go;
* a code cell tagged ``hide-output`` or ``hide-input`` (the evidence, folded on the site) is
  folded in JupyterLab too (``metadata.jupyter.outputs_hidden`` / ``source_hidden``).

With ``--student`` the notebooks first get the student edition's treatment (solutions stubbed,
solution directives dropped; see the package docstring). Instructor-only pages are left out.
"""

from __future__ import annotations

import ast
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .files import book_files, prepare_out
from .markers import ReleaseError
from .student import release_notebook, release_page

OPENING = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>.*?)\s*$")
CODE_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?!.*\{)")
OPTION = re.compile(r"^:(?P<key>[\w-]+):[ \t]*(?P<value>.*)$")
ROLE = re.compile(r"\{(?P<role>[\w:-]+)\}`(?P<content>[^`]*)`")
LABEL_LINE = re.compile(r"^\([\w.:-]+\)=\s*$")
EXERCISE_TITLE = re.compile(r"^(?P<title>.*?) · (?P<stars>★{1,3}) · (?P<kind>\w+) · (?P<time>\d+ min)$")
ADMONITIONS = {
    "admonition",
    "note",
    "tip",
    "hint",
    "important",
    "warning",
    "caution",
    "attention",
    "danger",
    "error",
    "seealso",
    "dropdown",
}


@dataclass
class Page:
    """What a page's conversion needs: its glued values, its exercise numbers."""

    name: str
    glued: dict = field(default_factory=dict)  # glue name -> value
    exercises: dict = field(default_factory=dict)  # exercise label -> number


# --------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------
def convert_markdown(text: str, page: Page) -> str:
    """``text`` with every MyST directive, role, label and comment made plain Markdown."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        opening, code = OPENING.match(line.strip()), CODE_FENCE.match(line.strip())
        if opening or code:
            fence = (opening or code)["fence"]
            end = _closing(lines, i + 1, fence)
            if code:  # a plain code block: copied as it is
                out += lines[i : end + 1]
            else:
                body, options = _options(lines[i + 1 : end])
                out.append(
                    _directive(
                        opening["name"],
                        opening["arg"],
                        options,
                        convert_markdown("\n".join(body), page),
                        page,
                    )
                )
            i = end + 1
        elif LABEL_LINE.match(line) or line.startswith("% ") or line.strip() in ("%", "+++"):
            i += 1
        else:
            out.append(ROLE.sub(lambda m: _role(m["role"], m["content"], page), line))
            i += 1
    return "\n".join(out)


def _closing(lines: list[str], start: int, fence: str) -> int:
    """Index of the line closing ``fence`` (same character, at least as long)."""
    close = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    for j in range(start, len(lines)):
        if close.match(lines[j]):
            return j
    raise ReleaseError(f"a '{fence}' fence has no closing line")


def _options(body: list[str]) -> tuple[list[str], dict]:
    """Split a directive's ``:key: value`` option lines off its body."""
    options = {}
    while body and OPTION.match(body[0].strip()):  # .strip(): a directive indented in a list item
        m = OPTION.match(body[0].strip())
        options[m["key"]] = m["value"]
        body = body[1:]
    return body, options


def _details(summary: str, body: str) -> str:
    return f"<details>\n<summary><b>{summary}</b></summary>\n\n{body.strip()}\n\n</details>\n"


def _directive(name: str, arg: str, options: dict, body: str, page: Page) -> str:
    if name == "exercise":
        number = len(page.exercises) + 1
        page.exercises[options.get("label", f"#{number}")] = number
        m = EXERCISE_TITLE.match(arg)
        title = f"{m['title']} ({m['stars']}, {m['kind']}, {m['time']})" if m else arg
        return f"### Exercise {number}: {title}\n\n{body.strip()}\n"
    if name == "solution":
        number = page.exercises.get(arg.strip())
        return _details(f"Solution to exercise {number}" if number else "Solution", body)
    if name in ADMONITIONS:
        title = arg or name.capitalize()
        if name == "dropdown" or "dropdown" in options.get("class", "").split():
            return _details(title, body)
        quoted = "\n".join(f"> {line}".rstrip() for line in body.strip().split("\n"))
        return f"> **{title}**\n>\n{quoted}\n"
    if name == "figure":
        return f"![{body.strip()}]({arg})\n\n*{body.strip()}*\n"
    if name == "math":
        return f"$$\n{body.strip()}\n$$\n"
    if name in ("code", "code-block", "code-cell"):
        return f"```{arg}\n{body.strip()}\n```\n"
    return f"**{arg or name.capitalize()}**\n\n{body.strip()}\n"


def _role(role: str, content: str, page: Page) -> str:
    if role.startswith("glue"):
        key, _, spec = content.partition(":")
        if key not in page.glued:
            raise ReleaseError(
                f"{page.name}: {{{role}}}`{content}` names no value glued by the "
                f"notebook's stored outputs (execute and commit it)"
            )
        return format(page.glued[key], spec)
    if role == "math":
        return f"${content}$"
    if role == "eq":
        return f"({content})"
    if role in ("sub", "sup"):
        return f"<{role}>{content}</{role}>"
    text = re.match(r"^(?P<text>.*?)\s*<[^<>]+>$", content, re.S)  # "text <target>" -> text
    return text["text"] if text else content


def glued_values(nb: nbformat.NotebookNode) -> dict:
    """{name: value} of every ``glue`` in the notebook's stored outputs (myst-nb's records)."""
    values = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            record = output.get("metadata", {}).get("scrapbook")
            if not record:
                continue
            text = output.get("data", {}).get(record["mime_prefix"] + "text/plain")
            try:
                values[record["name"]] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                values[record["name"]] = text
    return values


# --------------------------------------------------------------------------------------
# Notebooks, pages, the edition
# --------------------------------------------------------------------------------------
def learner_notebook(nb: nbformat.NotebookNode, name: str, student: bool = False) -> None:
    """Turn ``nb`` (in place) into its learner version (``student``: stubbed solutions too)."""
    page = Page(name, glued_values(nb))
    if student:
        release_notebook(nb, name)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = convert_markdown(cell.source, page)
        elif cell.cell_type == "code":
            fold(cell)


def fold(cell: nbformat.NotebookNode) -> None:
    """A code cell tagged hide-output / hide-input (folded on the site) is folded in JupyterLab
    too: its outputs / its source collapsed (``metadata.jupyter``), one click to open. A cell
    tagged remove-cell (absent from the site: e.g. the glue that hands numbers to the prose) is
    folded whole."""
    tags = set(cell.metadata.get("tags", []))
    removed = "remove-cell" in tags
    hidden = {
        "outputs_hidden": removed or "hide-output" in tags,
        "source_hidden": removed or "hide-input" in tags,
    }
    if any(hidden.values()):
        cell.metadata.setdefault("jupyter", {}).update({k: v for k, v in hidden.items() if v})


def release_learner(src: Path, out: Path, student: bool = False, force: bool = False) -> int:
    """Write the learner edition of ``src/book`` to ``out/book``; return the pages written."""
    src, out = prepare_out(src, out, "learner edition", force)
    pages = 0
    for rel in (f for f in book_files(src) if f.parts[0] == "book"):
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if rel.suffix == ".ipynb":
            nb = nbformat.read(src / rel, as_version=4)
            learner_notebook(nb, str(rel), student)
            nbformat.write(nb, dest)
        elif rel.suffix == ".md":
            text = (src / rel).read_text(encoding="utf-8")
            if student:
                text, _ = release_page(text, str(rel))
            dest.write_text(convert_markdown(text, Page(str(rel))), encoding="utf-8")
        else:
            shutil.copy2(src / rel, dest)
            continue
        pages += 1
    return pages
