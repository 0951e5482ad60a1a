"""Which files of the book an edition copies, and the table of contents without the
instructor-only pages."""

from __future__ import annotations

import shutil
from pathlib import Path

from .markers import INSTRUCTOR_ONLY, ReleaseError

_SKIP_DIRS = {
    ".git",
    ".venv",
    "node_modules",
    "_build",
    ".ipynb_checkpoints",
    "__pycache__",
    ".jupyter_cache",
    ".pytest_cache",
}


def release_toc(text: str) -> str:
    """``_toc.yml`` without the instructor-only pages (the text unchanged if it has none)."""
    import yaml

    toc = yaml.safe_load(text) or {}
    removed = _drop_instructor_entries(toc)
    if not removed:
        return text
    header = (
        "# Student edition, written by `python -m coursekit.release student`: the "
        "instructor-only pages\n# (" + ", ".join(removed) + ") are left out.\n"
    )
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


def prepare_out(src: Path, out: Path, edition: str, force: bool = False) -> tuple[Path, Path]:
    """(src, out) resolved, once ``src`` is the book's root and ``out`` may hold the ``edition``
    ("student edition", ...): not inside the sources nor containing them, and empty unless
    ``force`` (then it is removed)."""
    src, out = Path(src).resolve(), Path(out).resolve()
    if not (src / "_config.yml").is_file():
        raise ReleaseError(f"{src} has no _config.yml: is it the book's root?")
    if out == src or out in src.parents or src / "book" in (out, *out.parents):
        raise ReleaseError(
            f"refusing to write the {edition} to {out}: it would overwrite "
            f"or be copied into the sources in {src}."
        )
    if out.exists() and any(out.iterdir()):
        if not force:
            raise ReleaseError(f"{out} exists and is not empty (use --force to replace it).")
        shutil.rmtree(out)
    return src, out


def find_root(start: Path | None = None) -> Path:
    """The folder holding ``_config.yml``: the package's parent, else the cwd or a parent."""
    candidates = [Path(__file__).resolve().parents[2]]
    here = (start or Path.cwd()).resolve()
    candidates += [here, *here.parents]
    for c in candidates:
        if (c / "_config.yml").is_file():
            return c
    raise ReleaseError("no _config.yml found: pass --src, the folder holding the book.")


def is_instructor_only(rel: Path) -> bool:
    """``book/instructor_*`` pages (``.md``, ``.ipynb``, or a toc entry without suffix): for
    instructors, left out of the student edition."""
    return (
        len(rel.parts) > 1
        and rel.parts[0] == "book"
        and rel.name.startswith(INSTRUCTOR_ONLY)
        and rel.suffix in ("", ".md", ".ipynb")
    )


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
            files |= {
                p.relative_to(src)
                for p in path.rglob("*")
                if p.is_file() and not _SKIP_DIRS & set(p.relative_to(src).parts)
            }
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
