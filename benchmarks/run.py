"""The book's headline numbers, reproducible outside the notebooks.

    python benchmarks/run.py                  # everything
    python benchmarks/run.py --quick          # fewer timing repeats
    python benchmarks/run.py --skip-notebooks # do not execute book/**/*.ipynb
    python benchmarks/run.py --only lstm      # only benchmarks whose function name contains "lstm"
    python benchmarks/run.py --tables-only    # rewrite benchmarks/RESULTS.md from results.json

Prints one Markdown table per section and writes benchmarks/results.json, a list
of records {"name", "value", "unit", "baseline", "ratio"}; baseline and ratio
(value / baseline) are set where a comparison exists, measured in the same run.
With --only, the new records replace those of the same name and the others are kept.
Each record also notes its table ("section"). Every run rewrites benchmarks/RESULTS.md, the
tables, generated (never edit it by hand).

Each topic has a module `benchmarks/bench_<topic>.py` with a list
BENCHMARKS = [(title, function)], where `function(args) -> list of records`
(helpers in common.py). This file adds the notebook timings and page sizes.

Sweeps (SWEEPS = {name: SweepSpec} in the same modules) are not re-run here: they take long
and are committed as data by benchmarks/sweep.py. For each committed sweep this file records
its summary, one record per point: value = the mean over seeds, plus "std", "min", "max", "n"
and "sweep" (the table gets a spread column). A stale sweep (code it ran or its spec
changed since) is reported and makes the exit status 1. Everything here runs on the pinned CPU
kernels of kernels.env (set before torch starts), like the sweeps.
"""

import argparse
import importlib
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # course_lib importable from a plain clone
sys.path.insert(0, str(ROOT / "benchmarks"))

import kernels  # noqa: E402

# Before torch starts. Imported after torch (a test module), it keeps the kernels torch started
# with: kernel_set() records them.
if "torch" not in sys.modules:
    kernels.pin()  # before torch starts: the pinned CPU kernels of kernels.env, as the sweeps

import torch  # noqa: E402
from common import markdown_table, record, sweep_records  # noqa: E402
from sweep_run import problems  # noqa: E402

from course_lib.pages.sweeps import read_sweep  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results.json"
TABLES = ROOT / "benchmarks" / "RESULTS.md"
SWEEP_DIR = ROOT / "course_lib" / "sweeps"


# ---------------------------------------------------------------------------
# Notebooks: wall time of a full run, top to bottom
# ---------------------------------------------------------------------------


def notebook_seconds(args):
    notebooks = sorted((ROOT / "book").glob("**/*.ipynb"))
    notebooks = [nb for nb in notebooks if ".ipynb_checkpoints" not in nb.parts]
    if args.skip_notebooks or not notebooks:
        print("(notebooks skipped)" if args.skip_notebooks else "(no notebooks in book/ yet)")
        return []
    import nbformat
    from nbclient import NotebookClient

    records = []
    for path in notebooks:
        start = time.perf_counter()
        try:
            nb = nbformat.read(path, as_version=4)
            NotebookClient(
                nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
            ).execute()
        except Exception as error:  # report and go on with the others
            message = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # drop the traceback's colours
            print(f"FAILED {path.relative_to(ROOT)}: {type(error).__name__}: {message}"[:2000])
            args.failed = True
            continue
        records.append(record(f"notebook_seconds/{path.name}", time.perf_counter() - start, "s"))
    return records


# ---------------------------------------------------------------------------
# The built site: how heavy is each page?
# ---------------------------------------------------------------------------


def page_sizes(args):
    site = ROOT / "_build" / "html"
    if not site.is_dir():
        print(f"(no site at {site.relative_to(ROOT)}: run `make book` first to measure page sizes)")
        return []
    records = []
    for page in sorted(site.glob("**/*.html")):
        rel = page.relative_to(site)
        if rel.name in ("genindex.html", "search.html") or "_static" in rel.parts:
            continue
        records.append(record(f"page_kb/{rel.as_posix()}", page.stat().st_size / 1e3, "KB"))
    total = sum(f.stat().st_size for f in site.glob("**/*") if f.is_file())
    records.append(record("site_total_mb", total / 1e6, "MB"))
    return records


# ---------------------------------------------------------------------------
# Committed sweeps: their summaries (mean and spread over seeds), read from course_lib/sweeps/
# ---------------------------------------------------------------------------


def committed_sweep(name, spec):
    """A benchmark function that reads the committed sweep `name` and returns its records."""

    def summarize_sweep(args):
        path = SWEEP_DIR / f"{name}.json"
        if not path.exists():
            print(f"(sweep {name} not committed yet: python benchmarks/sweep.py {name})")
            return []
        sweep = read_sweep(path)
        for problem in problems(name, spec):
            print(f"STALE {problem}")
            args.failed = True
        print(
            f"(committed sweep {name}: {len(sweep.seeds)} seeds, {sweep.date[:10]}, "
            f"{sweep.wall_seconds / 60:.1f} min to re-run with `{sweep.command}`)"
        )
        return sweep_records(spec, sweep)

    summarize_sweep.__name__ = f"sweep_{name}"
    return summarize_sweep


def all_benchmarks():
    """The topic modules' benchmarks and committed sweeps in file-name order, then notebooks and the site."""
    found = []
    for path in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        module = importlib.import_module(path.stem)
        found += getattr(module, "BENCHMARKS", [])
        found += [
            (f"{spec.title} (sweep {name}: mean over seeds and spread)", committed_sweep(name, spec))
            for name, spec in getattr(module, "SWEEPS", {}).items()
            if spec.records
        ]
    return found + [
        ("Notebooks: seconds to run top to bottom", notebook_seconds),
        ("Built site: page sizes", page_sizes),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timing repeats")
    parser.add_argument("--skip-notebooks", action="store_true", help="do not execute the notebooks")
    parser.add_argument("--only", help="run only benchmarks whose function name contains this")
    parser.add_argument(
        "--tables-only",
        action="store_true",
        help="measure nothing; rewrite benchmarks/RESULTS.md from results.json",
    )
    args = parser.parse_args(argv)
    args.failed = False
    if args.tables_only:
        write_tables(json.loads(RESULTS.read_text()))
        return 0

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {sys.platform}\n")
    results = []
    for title, benchmark in all_benchmarks():
        if args.only and args.only not in benchmark.__name__:
            continue
        print(f"### {title}\n")
        records = benchmark(args)
        for r in records:
            r["section"] = title
        if records:
            print(markdown_table(records))
        print()
        results += records

    if args.only and RESULTS.exists():  # keep the records this run did not measure
        new = {r["name"] for r in results}
        results = [r for r in json.loads(RESULTS.read_text()) if r["name"] not in new] + results
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(tmp, RESULTS)
    print(f"wrote {len(results)} records to {RESULTS.relative_to(ROOT)}")
    write_tables(results)
    return 1 if args.failed else 0


def write_tables(results):
    """Write benchmarks/RESULTS.md: one table per section of `results`, in the order of the topics."""
    order = [title for title, _ in all_benchmarks()]
    sections = sorted(
        {r.get("section", "Other") for r in results},
        key=lambda t: order.index(t) if t in order else len(order),
    )
    tables = [
        f"## {title}\n\n" + markdown_table([r for r in results if r.get("section", "Other") == title])
        for title in sections
    ]
    header = (
        "# Benchmark results\n\n"
        "Generated by `python benchmarks/run.py` from `benchmarks/results.json` (do not edit by hand). "
        "Timings are medians on the development machine (2 cores, shared with other jobs): treat "
        "ratios as rough. A row with a spread column summarises a committed sweep "
        "(`course_lib/sweeps/`): the mean over seeds, ± the standard deviation, [min, max] and n.\n\n"
    )
    TABLES.write_text(header + "\n\n".join(tables) + "\n")
    print(f"wrote {TABLES.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
