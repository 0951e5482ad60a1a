"""Write the trees of the editions' branches, which the Colab and Binder buttons open.

    python tools/editions.py [--out _build/editions]

For each edition of ``course_launch_branches`` in ``_config.yml`` but the instructor's own
(the repository), one folder ``OUT/<branch>``:

* ``learner-edition``: ``python -m coursekit.release learner`` (the book in plain Markdown,
  answers folded in ``<details>``, glued numbers substituted), read by the site's buttons;
* ``student-edition``: ``python -m coursekit.release learner --student`` (the same, with the
  solutions replaced by stubs), read by the student site's buttons;

each beside what Binder and ``pip`` need to run it: ``course_lib/``, ``pyproject.toml``,
``binder/`` and ``LICENSE`` as committed, and a short ``README.md`` saying where the branch
comes from. The publishing workflow commits each folder to its branch with
``tools/publish_branch.py`` and pushes it. Notebooks keep their paths (``book/NN_....ipynb``),
so a button's URL differs from the instructor notebook's only in the branch.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FILES = ["course_lib", "pyproject.toml", "binder", "LICENSE"]
RELEASE_ARGS = {"instructor": [], "student": ["--student"]}  # edition -> `release learner` flags

README = """# {title}: the {edition} edition

This branch is written by the publishing workflow (`.github/workflows/publish.yml`, `make
editions`) from `{branch}` at {commit}; do not edit it, edit the book on `{branch}`.

It holds the notebooks of the course in `book/` as {what}, so that they read cleanly in
JupyterLab, Colab and VS Code, and what Binder needs to run them (`binder/`, `course_lib/`).
The course's site and its sources: {url}.
"""

WHAT = {
    "instructor": "the learner edition (plain Markdown, answers folded)",
    "student": "the student edition (plain Markdown, solutions replaced by stubs to write)",
}


def git_commit() -> str:
    run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return run.stdout.strip() if run.returncode == 0 else "an unknown commit"


def committed_files(name: str) -> list[Path]:
    """The files of ``name`` (a file or folder of the repository) that git tracks, else all."""
    run = subprocess.run(["git", "ls-files", "-z", "--", name], cwd=ROOT, capture_output=True)
    if run.returncode == 0 and run.stdout:
        return [Path(p) for p in run.stdout.decode().split("\0") if p]
    path = ROOT / name
    if path.is_file():
        return [Path(name)]
    return [p.relative_to(ROOT) for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts]


def write_edition(edition: str, branch: str, dest: Path, config: dict) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    cmd = [sys.executable, "-m", "coursekit.release", "learner", str(dest), *RELEASE_ARGS[edition]]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{run.stdout}\n{run.stderr}")
    print(run.stdout.strip())
    for name in PACKAGE_FILES:
        for rel in committed_files(name):
            target = dest / rel
            if not target.exists():  # the edition's own files win
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel, target)
    repo = config["repository"]
    (dest / "README.md").write_text(
        README.format(
            title=config.get("title", "The course"),
            edition=branch,
            branch=repo["branch"],
            commit=git_commit(),
            what=WHAT[edition],
            url=repo["url"],
        ),
        encoding="utf-8",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "editions")
    args = parser.parse_args(argv)
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    branches = config["sphinx"]["config"]["course_launch_branches"]
    for edition, branch in branches.items():
        if edition not in RELEASE_ARGS:
            raise SystemExit(
                f"course_launch_branches: no edition {edition!r} (known: {sorted(RELEASE_ARGS)})"
            )
        write_edition(edition, branch, args.out / branch, config)
        print(f"{edition} site -> branch {branch}: {args.out / branch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
