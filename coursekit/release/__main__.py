"""python -m coursekit.release COMMAND: the command line (see the package docstring)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .files import find_root
from .markers import ReleaseError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coursekit.release", description="Write editions of the book."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    student = sub.add_parser("student", help="the student edition: solutions replaced by stubs")
    student.add_argument("outdir", type=Path, help="where to write it")
    _src_and_force(student)
    learner = sub.add_parser(
        "learner",
        help="the learner edition: book/ in plain Markdown for "
        "JupyterLab, Colab and VS Code (no MyST syntax)",
    )
    learner.add_argument("outdir", type=Path, help="where to write it")
    learner.add_argument(
        "--student",
        action="store_true",
        help="also replace the solutions by stubs, as the student edition does",
    )
    _src_and_force(learner)
    grader = sub.add_parser(
        "nbgrader",
        help="an nbgrader course directory (source/<assignment>/ and nbgrader_config.py) for some chapters",
    )
    grader.add_argument("outdir", type=Path, help="the course directory to write")
    grader.add_argument(
        "--chapters",
        nargs="+",
        default=[],
        metavar="NN",
        help="chapter numbers, e.g. 05 06, or pages, e.g. 09_transformer",
    )
    grader.add_argument(
        "--assignments",
        nargs="+",
        default=[],
        metavar="NAME",
        help="multi-part assignments (assignments/NAME.ipynb), e.g. a1_seq2seq_attention",
    )
    grader.add_argument(
        "--no-hidden", action="store_true", help="leave out the hidden tests (they need the repository)"
    )
    grader.add_argument(
        "--variant",
        metavar="SECRET",
        default=None,
        help="draw the checks' data, number answers, held-out sets and hidden tests from SECRET (a "
        "private phrase: two cohorts with two secrets get different numbers)",
    )
    grader.add_argument(
        "--exercises-only",
        action="store_true",
        help="one assignment per chapter with only its Exercises section and the "
        "set-up cells it needs (fast to autograde)",
    )
    _src_and_force(grader)
    key = sub.add_parser(
        "answer-key",
        help="what an instructor keeps private: solutions, hidden tests, rubrics with model "
        "answers, the exam paper, calibration samples (apart from the student material)",
    )
    key.add_argument("outdir", type=Path, help="where to write it")
    key.add_argument("--variant", metavar="SECRET", default=None, help="the variant's secret")
    _src_and_force(key)
    meta = sub.add_parser(
        "metadata", help="write the nbgrader cell metadata of notebooks from the exercise conventions"
    )
    meta.add_argument("notebooks", type=Path, nargs="+")
    meta.add_argument(
        "--check",
        action="store_true",
        help="only report notebooks whose metadata is not what would be written",
    )
    outline = sub.add_parser(
        "exercises",
        help="list the exercises of notebooks: labels, hints, "
        "checks, and how much of each solution the page shows",
    )
    outline.add_argument("notebooks", type=Path, nargs="+")
    args = parser.parse_args(argv)
    try:
        return {
            "student": _student,
            "learner": _learner,
            "nbgrader": _nbgrader,
            "answer-key": _answer_key,
            "metadata": _metadata,
            "exercises": _exercises,
        }[args.command](args)
    except ReleaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _src_and_force(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--src",
        type=Path,
        default=None,
        help="the book's root, the folder holding _config.yml (default: the repository "
        "this package lives in)",
    )
    p.add_argument("--force", action="store_true", help="replace OUTDIR if not empty")


def _student(args) -> int:
    from .student import release_student

    stats = release_student(args.src or find_root(), args.outdir, force=args.force)
    print(f"Student edition written to {args.outdir}")
    print(stats.summary())
    return 0


def _learner(args) -> int:
    from .learner import release_learner

    pages = release_learner(args.src or find_root(), args.outdir, student=args.student, force=args.force)
    kind = "student variant of the learner edition" if args.student else "learner edition"
    print(f"The {kind} written to {args.outdir}: {pages} pages of book/ in plain Markdown.")
    return 0


def _nbgrader(args) -> int:
    from .nbgrader import write_course

    written = write_course(
        args.src or find_root(),
        args.outdir,
        args.chapters,
        args.exercises_only,
        force=args.force,
        assignments=args.assignments,
        hidden=not args.no_hidden,
        variant=args.variant,
    )
    print(f"nbgrader course directory written to {args.outdir}:")
    for path in written:
        print(f"  {path.relative_to(args.outdir)}")
    print(f"Next: cd {args.outdir} && nbgrader generate_assignment {written[0].parent.name}")
    return 0


def _answer_key(args) -> int:
    from .answer_key import write_answer_key

    written = write_answer_key(args.src or find_root(), args.outdir, args.variant, force=args.force)
    print(
        f"Answer key written to {args.outdir}: {len(written)} notebooks with solutions and hidden "
        "tests, the grading references and the instructor kit. Keep it private (its README says how)."
    )
    return 0


def _metadata(args) -> int:
    from .metadata import write_metadata

    stale = write_metadata(args.notebooks, check=args.check)
    for line in stale:
        print(line)
    if args.check:
        print(f"{len(stale)} cells with stale nbgrader metadata" if stale else "metadata current")
    return 1 if stale else 0


def _exercises(args) -> int:
    import nbformat

    from .leaks import solution_leaks
    from .outline import read_exercises

    for path in args.notebooks:
        nb = nbformat.read(path, as_version=4)
        leaks = {leak.label: leak for leak in solution_leaks(nb)}
        print(path)
        for ex in read_exercises(nb):
            leak = leaks.get(ex.label)
            shown = f"{len(leak.found)}/{len(leak.lines)}" if leak else "?"
            print(f"  {ex.label}: {ex.title!r}; checks {ex.check_names}; solution lines on the page {shown}")
            for problem in ex.problems():
                print(f"    - {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
