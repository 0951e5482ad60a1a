"""The answer key: what an instructor keeps private, written apart from the student material.

    python -m coursekit.release answer-key OUT [--variant SECRET] [--force]

OUT then holds:

* ``assignments/``: each assignment as nbgrader's source (solutions, model written answers and
  hidden tests in place), and ``book/``: each chapter's exercises-only notebook with its
  solutions, also with hidden tests;
* ``grading/``: a copy of ``coursekit/grading`` (the reference solutions, the typical mistakes'
  code, the hidden tests), which nbgrader's autograde needs on its path;
* ``kit/``: the rubrics with model answers, the assessment bank, the exam paper with its
  marking scheme, the TA calibration samples and the integrity policy (``instructor/``);
* ``README.md``: what is here and how to keep it in a private repository;
* with ``--variant``: ``variant.json`` (the variant's public label and visible seed) and the
  secret in ``SECRET.txt``.

The student material is written elsewhere (``nbgrader`` for a course directory, ``student``
for the student edition); nothing here belongs in it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat

from .markers import ReleaseError
from .metadata import apply_metadata, exercises_only
from .nbgrader import add_hidden_tests, plain_assignment

README = """# Answer key (private)

Written by `python -m coursekit.release answer-key` from the course's repository at {commit}.
Keep this folder out of anything students can read: a private repository is the usual place.

    cd {name}
    git init && git add . && git commit -m "Answer key"
    git remote add origin git@YOUR-HOST:YOUR-ORG/course-answer-key.git   # a PRIVATE repository
    git push -u origin main

What is here:

* `assignments/`: the assignments with their solutions, model written answers and hidden tests
  (nbgrader's source version);
* `book/`: each chapter's exercises with solutions and hidden tests;
* `grading/`: the reference solutions, typical mistakes and hidden tests (coursekit.grading);
* `kit/`: rubrics with model answers, the assessment bank, the exam paper and its marking scheme,
  the TA calibration samples, the integrity policy.
{variant}
What a private key does and does not protect: the course's repository is public, and so are
its published solutions. A variant (`--variant SECRET`) redraws the data, number answers,
held-out sets and hidden tests, so copied numbers fail; the code a part asks for is the same
task in every variant, so a copied solution that computes still passes. Grade the written
parts and the oral or exam questions (`kit/exam_paper.md`) for understanding.
"""


def write_answer_key(src: Path, out: Path, variant: str | None = None, force: bool = False) -> list[Path]:
    """Write the answer key into ``out``; returns the notebooks written."""
    import subprocess

    src, out = Path(src), Path(out)
    if out.exists() and any(out.iterdir()):
        if not force:
            raise ReleaseError(f"{out} exists and is not empty (use --force to replace it).")
        shutil.rmtree(out)
    written = []
    for path in sorted((src / "assignments").glob("*.ipynb")):
        nb = plain_assignment(_with_metadata(path), path.name)
        add_hidden_tests(nb)
        written.append(_write(nb, out / "assignments" / path.name))
    for path in sorted((src / "book").glob("[0-9]*.ipynb")):
        nb = _with_metadata(path)
        try:
            nb = exercises_only(nb, path.name)
        except ReleaseError:
            continue  # a page without exercises
        if variant is not None:
            from coursekit.grading.variants import vary_statements

            vary_statements(nb, variant)  # the statements state the variant's numbers
        add_hidden_tests(nb)
        written.append(_write(nb, out / "book" / path.name))
    shutil.copytree(
        src / "coursekit" / "grading", out / "grading", ignore=shutil.ignore_patterns("__pycache__")
    )
    (out / "kit").mkdir(parents=True)
    for doc in sorted((src / "instructor").glob("*.md")):
        shutil.copy(doc, out / "kit" / doc.name)
    calibration = src / "instructor" / "calibration"
    if calibration.is_dir():
        shutil.copytree(calibration, out / "kit" / "calibration")
    variant_text = ""
    if variant is not None:
        from coursekit.grading.variants import label, visible_seed

        info = {"name": label(variant), "seed": visible_seed(variant)}
        (out / "variant.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        (out / "SECRET.txt").write_text(variant + "\n", encoding="utf-8")
        variant_text = (
            f"\nVariant {info['name']}: its secret is in `SECRET.txt`; write the "
            "students' course with `python -m coursekit.release nbgrader COURSE "
            '--assignments ... --variant "$(cat SECRET.txt)"`.\n'
        )
    try:
        commit = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "an unknown commit"
    (out / "README.md").write_text(
        README.format(commit=commit, name=out.name, variant=variant_text), encoding="utf-8"
    )
    return written


def _with_metadata(path: Path):
    nb = nbformat.read(path, as_version=4)
    apply_metadata(nb, path.name)
    return nb


def _write(nb, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)
    return dest
