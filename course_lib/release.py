"""Write the student edition of the book: solutions stripped, checks kept.

    python -m course_lib.release student OUTDIR [--src REPO_ROOT] [--force]

The instructor edition is the repository itself. The student edition is a copy of the book
sources (``_config.yml``, ``_toc.yml``, ``book/``, every ``*.bib`` at the root and every path
named in ``_config.yml`` that exists, except under ``exclude_patterns``; never ``.git``,
``.venv``, ``node_modules`` folders, ``_build`` or ``.ipynb_checkpoints``) in which:

* in code cells, each region between a ``### BEGIN SOLUTION`` line and a ``### END SOLUTION``
  line (markers included) becomes ``raise NotImplementedError(...)`` at the indentation of the
  BEGIN line; those cells lose their outputs and execution count, and their ``hide-input`` tag
  (the instructor site folds the solution away; the student must see the stub);
* code cells tagged ``solution`` are dropped;
* sphinx-exercise solutions are dropped from markdown: ``{solution}`` directives (backtick or
  colon fences) with their content, and everything from a ``{solution-start}`` directive to
  the matching ``{solution-end}`` directive, including whole cells in between; a markdown cell
  left empty is dropped;
* check cells (code calling ``check_...(``) are kept, with outputs cleared;
* check cells, and cells whose stub runs at the top level, get the ``raises-exception`` tag:
  until the student writes the code they raise ``ExerciseNotAttempted`` /
  ``NotImplementedError``, and the tag tells Jupyter tools that this error is expected:
  nbclient and so Jupyter Book's execution (the student site is built with the book's
  ``allow_errors: false`` and ``-W``, so any *other* error still fails the build), nbval, and
  the notebook front ends, whose "Run All" is meant to go on past such a cell (the classic
  Notebook and JupyterLab >= 1.0 read the tag). ``execute.allow_errors: true`` in the student
  ``_config.yml`` would also have let the build pass, but it hides real errors;
* ``.md`` pages under ``book/`` get the same treatment as markdown cells (and solution regions);
* instructor-only pages, ``book/instructor_*`` (e.g. the instructor guide), are left out, and
  ``_toc.yml`` loses their entries (a part left empty is removed).

See CONTRIBUTING.md for the author conventions.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import nbformat

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB = 'raise NotImplementedError("Exercise: write your solution here")'
SOLUTION_TAG = "solution"
RAISES_TAG = "raises-exception"  # nbclient / Jupyter Book / nbval / JupyterLab: error expected
HIDE_INPUT_TAG = "hide-input"
INSTRUCTOR_ONLY = "instructor_"  # book/instructor_*: pages for instructors only

_MARKER = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>### (?:BEGIN|END) SOLUTION)[ \t]*$")
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})[ \t]*(?P<info>.*)$")
_SOLUTION = re.compile(r"^\{solution(?P<kind>-start|-end)?\}")
_CHECK_CALL = re.compile(r"\bcheck_\w+\s*\(")
_SKIP_DIRS = {".git", ".venv", "node_modules", "_build", ".ipynb_checkpoints", "__pycache__",
              ".jupyter_cache", ".pytest_cache"}


class ReleaseError(ValueError):
    """A notebook or page breaks the exercise conventions (e.g. BEGIN without END)."""


@dataclass
class Stats:
    notebooks: int = 0
    pages: int = 0
    regions: int = 0
    directives: int = 0
    cells_dropped: int = 0
    checks_cleared: int = 0

    def __iadd__(self, other: "Stats") -> "Stats":
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    def summary(self) -> str:
        return (f"{self.notebooks} notebooks and {self.pages} markdown pages processed: "
                f"{self.regions} solution regions stubbed, {self.directives} solution directives "
                f"removed, {self.cells_dropped} solution cells dropped, "
                f"{self.checks_cleared} check cells cleared.")


# --------------------------------------------------------------------------------------
# Code: ### BEGIN SOLUTION ... ### END SOLUTION  ->  raise NotImplementedError(...)
# --------------------------------------------------------------------------------------
def stub_solutions(source: str, where: str) -> tuple[str, int]:
    """Replace each solution region of ``source`` by a stub; return (new source, regions)."""
    out: list[str] = []
    begin_line = None  # line number of the open region's BEGIN, if any
    regions = 0
    for n, line in enumerate(source.split("\n"), 1):
        m = _MARKER.match(line)
        marker = m["marker"] if m else None
        if marker == BEGIN:
            if begin_line is not None:
                raise ReleaseError(f"{where}: nested '{BEGIN}' on line {n} (the region opened "
                                   f"on line {begin_line} has no '{END}' before it).")
            begin_line = n
            out.append(m["indent"] + STUB)
        elif marker == END:
            if begin_line is None:
                raise ReleaseError(f"{where}: '{END}' on line {n} without a '{BEGIN}' before it.")
            begin_line, regions = None, regions + 1
        elif begin_line is None:
            out.append(line)
    if begin_line is not None:
        raise ReleaseError(f"{where}: '{BEGIN}' on line {begin_line} has no matching '{END}'.")
    return "\n".join(out), regions


# --------------------------------------------------------------------------------------
# Markdown: sphinx-exercise solution directives
# --------------------------------------------------------------------------------------
def strip_solution_directives(text: str, in_gate: bool = False) -> tuple[str, int, bool]:
    """Remove solution directives from MyST markdown.

    ``in_gate`` says whether the text starts inside a ``{solution-start}`` ... ``{solution-end}``
    gate (gates may span notebook cells). Returns (new text, directives removed, in_gate at the
    end). Fenced code blocks (```` ```python ````, ...) are copied verbatim.
    """
    lines = text.split("\n")
    out: list[str] = []
    removed, i = 0, 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        kind = _directive_kind(fence)
        if in_gate:
            if kind == "-end":
                in_gate = False
            i = _fence_end(lines, i) if kind == "-end" else i + 1
        elif kind == "":  # {solution}: drop the whole directive
            removed, i = removed + 1, _fence_end(lines, i)
        elif kind == "-start":
            removed, in_gate, i = removed + 1, True, _fence_end(lines, i)
        elif fence and fence["info"] and not fence["info"].startswith("{"):  # a code block
            end = _fence_end(lines, i)
            out.extend(lines[i:end])
            i = end
        else:  # prose, or another directive whose content may hold a nested solution
            out.append(lines[i])
            i += 1
    return "\n".join(out), removed, in_gate


def _directive_kind(fence: re.Match | None) -> str | None:
    """'' for {solution}, '-start'/'-end' for the gated form, None for anything else."""
    m = _SOLUTION.match(fence["info"]) if fence else None
    return (m["kind"] or "") if m else None


def _fence_end(lines: list[str], start: int) -> int:
    """Index just past the line closing the fence opened on ``lines[start]`` (CommonMark rule:
    the same character, at least as long, nothing else on the line)."""
    fence = _FENCE.match(lines[start])["fence"]
    closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    for j in range(start + 1, len(lines)):
        if closing.match(lines[j]):
            return j + 1
    return len(lines)  # unclosed: the directive runs to the end, as in MyST


# --------------------------------------------------------------------------------------
# Notebooks and pages
# --------------------------------------------------------------------------------------
def release_notebook(nb: nbformat.NotebookNode, name: str) -> Stats:
    """Turn ``nb`` (in place) into its student version."""
    stats, kept, in_gate = Stats(notebooks=1), [], False
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            was_in_gate = in_gate
            cell.source, removed, in_gate = strip_solution_directives(cell.source, in_gate)
            stats.directives += removed
            drop = bool(removed or was_in_gate) and not cell.source.strip()
        else:
            drop = in_gate
        if drop or SOLUTION_TAG in cell.get("metadata", {}).get("tags", []):
            stats.cells_dropped += 1
            continue
        if cell.cell_type == "code":
            _release_code_cell(cell, f"{name}, cell {index} (id {cell.get('id', '?')})", stats)
        kept.append(cell)
    if in_gate:
        raise ReleaseError(f"{name}: a '{{solution-start}}' has no matching '{{solution-end}}'.")
    nb.cells = kept
    return stats


def _release_code_cell(cell: nbformat.NotebookNode, where: str, stats: Stats) -> None:
    cell.source, regions = stub_solutions(cell.source, where)
    stats.regions += regions
    is_check = bool(_CHECK_CALL.search(cell.source))
    if regions or is_check:
        cell.outputs, cell.execution_count = [], None
        stats.checks_cleared += is_check
    old_tags = list(cell.get("metadata", {}).get("tags", []))
    tags = [t for t in old_tags if t != HIDE_INPUT_TAG] if regions else list(old_tags)
    if (is_check or STUB in cell.source.split("\n")) and RAISES_TAG not in tags:
        tags.append(RAISES_TAG)  # a check, or a stub at the top level: raises until solved
    if tags != old_tags:
        cell.setdefault("metadata", {})["tags"] = tags


def release_page(text: str, name: str) -> tuple[str, Stats]:
    """The student version of a MyST markdown page."""
    text, removed, in_gate = strip_solution_directives(text)
    if in_gate:
        raise ReleaseError(f"{name}: a '{{solution-start}}' has no matching '{{solution-end}}'.")
    text, regions = stub_solutions(text, name)
    return text, Stats(pages=1, directives=removed, regions=regions)


def release_toc(text: str) -> str:
    """``_toc.yml`` without the instructor-only pages (the text unchanged if it has none)."""
    import yaml

    toc = yaml.safe_load(text) or {}
    removed = _drop_instructor_entries(toc)
    if not removed:
        return text
    header = ("# Student edition, written by `python -m course_lib.release student`: the "
              "instructor-only pages\n# (" + ", ".join(removed) + ") are left out.\n")
    return header + yaml.safe_dump(toc, sort_keys=False, allow_unicode=True)


def _drop_instructor_entries(node) -> list[str]:
    """Remove (in place) the toc entries whose ``file`` is instructor-only, and the parts and
    entry lists left empty; return the files removed."""
    removed: list[str] = []
    if not isinstance(node, dict):
        return removed
    for key in ("parts", "chapters", "sections"):
        entries = node.get(key)
        if not isinstance(entries, list):
            continue
        kept = []
        for entry in entries:
            file = entry.get("file") if isinstance(entry, dict) else None
            if file and is_instructor_only(Path(file)):
                removed.append(file)
                continue
            removed += _drop_instructor_entries(entry)
            if key == "parts" and isinstance(entry, dict) and not entry.get("chapters"):
                continue  # a part with no chapter left
            kept.append(entry)
        if kept:
            node[key] = kept
        else:
            del node[key]
    return removed


# --------------------------------------------------------------------------------------
# The whole book
# --------------------------------------------------------------------------------------
def find_root(start: Path | None = None) -> Path:
    """The folder holding ``_config.yml``: the package's parent, else the cwd or a parent."""
    candidates = [Path(__file__).resolve().parent.parent]
    here = (start or Path.cwd()).resolve()
    candidates += [here, *here.parents]
    for c in candidates:
        if (c / "_config.yml").is_file():
            return c
    raise ReleaseError("no _config.yml found: pass --src, the folder holding the book.")


def is_instructor_only(rel: Path) -> bool:
    """``book/instructor_*`` pages (``.md``, ``.ipynb``, or a toc entry without suffix): for
    instructors, left out of the student edition."""
    return (len(rel.parts) > 1 and rel.parts[0] == "book" and rel.name.startswith(INSTRUCTOR_ONLY)
            and rel.suffix in ("", ".md", ".ipynb"))


def book_files(src: Path) -> list[Path]:
    """Paths (relative to ``src``) of everything the student edition copies."""
    chosen = {Path("_config.yml"), Path("_toc.yml"), Path("book")}
    chosen |= {p.relative_to(src) for p in src.glob("*.bib")}
    chosen |= _paths_named_in_config(src)
    files: set[Path] = set()
    for rel in chosen:
        path = src / rel
        if path.is_file():
            files.add(rel)
        elif path.is_dir():
            files |= {p.relative_to(src) for p in path.rglob("*") if p.is_file()
                      and not _SKIP_DIRS & set(p.relative_to(src).parts)}
    return sorted(f for f in files if not is_instructor_only(f))


def _paths_named_in_config(src: Path) -> set[Path]:
    """Relative paths in _config.yml's string values that exist under ``src`` (logo, bib, ...)."""
    import yaml

    config = yaml.safe_load((src / "_config.yml").read_text(encoding="utf-8")) or {}
    found = set()
    for value in _strings(config):
        rel = Path(value.strip())
        if not rel.parts or rel.is_absolute() or ".." in rel.parts:
            continue
        if _SKIP_DIRS & set(rel.parts) and (src / rel).is_dir():
            continue  # never copy a whole venv / node_modules; single files are fine
        try:
            if (src / rel).exists():
                found.add(rel)
        except (OSError, ValueError):  # e.g. a long text value that is no path
            continue
    return found


def _strings(node):
    """Every string value in a parsed YAML tree, except under ``*exclude*`` keys."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            if "exclude" not in str(k):  # exclude_patterns name what the book must NOT get
                yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


def release_student(src: Path, out: Path, force: bool = False) -> Stats:
    """Write the student edition of the book in ``src`` to ``out``; return what was done."""
    src, out = Path(src).resolve(), Path(out).resolve()
    if not (src / "_config.yml").is_file():
        raise ReleaseError(f"{src} has no _config.yml: is it the book's root?")
    if out == src or out in src.parents or src / "book" in (out, *out.parents):
        raise ReleaseError(f"refusing to write the student edition to {out}: it would overwrite "
                           f"or be copied into the sources in {src}.")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise ReleaseError(f"{out} exists and is not empty (use --force to replace it).")
        shutil.rmtree(out)
    stats = Stats()
    for rel in book_files(src):
        stats += _release_file(src / rel, out / rel, rel)
    return stats


def _release_file(path: Path, dest: Path, rel: Path) -> Stats:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if rel == Path("_toc.yml"):
        dest.write_text(release_toc(path.read_text(encoding="utf-8")), encoding="utf-8")
        return Stats()
    if rel.parts[0] == "book" and path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        stats = release_notebook(nb, str(rel))
        nbformat.write(nb, dest)
        return stats
    if rel.parts[0] == "book" and path.suffix == ".md":
        text, stats = release_page(path.read_text(encoding="utf-8"), str(rel))
        dest.write_text(text, encoding="utf-8")
        return stats
    shutil.copy2(path, dest)
    return Stats()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.release",
                                     description="Write editions of the book.")
    sub = parser.add_subparsers(dest="command", required=True)
    student = sub.add_parser("student", help="the student edition: solutions replaced by stubs")
    student.add_argument("outdir", type=Path, help="where to write it")
    student.add_argument("--src", type=Path, default=None,
                         help="the book's root, the folder holding _config.yml "
                              "(default: the repository this package lives in)")
    student.add_argument("--force", action="store_true", help="replace OUTDIR if not empty")
    args = parser.parse_args(argv)
    try:
        src = args.src or find_root()
        stats = release_student(src, args.outdir, force=args.force)
    except ReleaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Student edition written to {args.outdir}")
    print(stats.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
