"""Execute the book's notebooks once, in parallel, into a staging copy of the book.

    python tools/execute_book.py [--out _build/executed] [--jobs 2] [--force]

The staging tree mirrors the book's sources: ``_config.yml`` (with execution turned off,
since its notebooks are already executed), ``_toc.yml``, ``_ext/`` and ``book/``, whose
notebooks are replaced by freshly executed copies. Jupyter Book then builds the site from it
(``make book``) without executing anything, and the student edition and its site are derived
from it too (``make student-book``), so one ``make test`` executes each notebook here once
and once more under nbval.

Execution follows the book's conventions: kernel ``python3``, working directory the
notebook's folder (in the staging tree, so nothing is written into ``book/``), the cell
timeout of ``_config.yml``'s ``execute.timeout``, errors fail (cells tagged
``raises-exception`` excepted, as in Jupyter Book's own execution), and the widget state is
saved in the notebook (``store_widget_state=True``), which the static site needs.

The chapters run torch on one thread (``torch.set_num_threads(1)``), so ``--jobs 2`` runs
two notebooks side by side on two cores; the longest notebooks (by the last run's timings,
kept in ``timings.json``) start first. A notebook that asks for more threads
(``train.set_threads(2)``: the capstone) runs alone, after the others, so that its
threads have the cores to themselves and its measured times are those of its budget.

A notebook is executed again only when its staged copy is missing or older than the notebook
or than anything it may read (``course_lib/``, ``benchmarks/``, the other files in ``book/``,
``pyproject.toml``, ``requirements.txt``, ``kernels.env``); ``--force`` executes them all.

The notebooks run on the CPU kernels that the environment selects; ``make book`` and ``make
test`` export the pinned ones of ``kernels.env`` (the sweeps' kernels), so that each page's live
run reproduces its sweep exactly.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
# What else a notebook may read: a change there makes every staged notebook stale.
INPUTS = ["course_lib", "benchmarks", "book", "pyproject.toml", "requirements.txt", "kernels.env"]
# Copied into the staging tree as they are (with book/, whose notebooks are executed).
COPIED = ["_toc.yml", "_ext"]
# Never read by a notebook: the sweeps' records of finished runs (a sweep running in the background
# writes them, and must not make every staged notebook stale).
SKIP = {".ipynb_checkpoints", "__pycache__", "_build", ".runs", "runs_in_progress"}


def toc_notebooks(src: Path) -> list[Path]:
    """The notebooks of ``_toc.yml``, in reading order (relative to ``src``)."""
    toc = yaml.safe_load((src / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]
    stack = [toc]
    while stack:
        node = stack.pop(0)
        for key in ("parts", "chapters", "sections"):
            for entry in node.get(key, []) or []:
                if isinstance(entry, dict):
                    if "file" in entry:
                        files.append(entry["file"])
                    stack.append(entry)
    return [Path(f).with_suffix(".ipynb") for f in files if (src / f"{f}.ipynb").is_file()]


def _files(path: Path):
    if path.is_file():
        yield path
    elif path.is_dir():
        for p in path.rglob("*"):
            if p.is_file() and not SKIP & set(p.parts):
                yield p


def newest_input(src: Path) -> float:
    return max(
        (p.stat().st_mtime for name in INPUTS for p in _files(src / name) if p.suffix != ".ipynb"),
        default=0.0,
    )


def staged_config(src: Path) -> str:
    config = yaml.safe_load((src / "_config.yml").read_text(encoding="utf-8"))
    config.setdefault("execute", {})["execute_notebooks"] = "off"
    header = (
        "# Written by tools/execute_book.py from the book's _config.yml: the notebooks\n"
        "# here are already executed, so Jupyter Book does not execute them again.\n"
    )
    return header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


def mirror(src: Path, out: Path) -> None:
    """Copy everything but the notebooks, replacing what was there."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "_config.yml").write_text(staged_config(src), encoding="utf-8")
    for name in COPIED + ["book"]:
        for path in _files(src / name):
            if path.suffix == ".ipynb":
                continue
            dest = out / path.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
    for bib in src.glob("*.bib"):
        shutil.copy2(bib, out / bib.name)


def execute_one(src_nb: str, dest_nb: str, timeout: int) -> tuple[str, float, float, str | None]:
    """Run one notebook; write it to ``dest_nb``. Returns (name, wall seconds, kernel CPU
    seconds, error or None)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    dest = Path(dest_nb)
    nb = nbformat.read(src_nb, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=False,
        store_widget_state=True,
        resources={"metadata": {"path": str(dest.parent)}},
    )
    cpu = {"seconds": 0.0}

    def kernel_cpu(**_):  # CPU seconds of the kernel so far (robust to a loaded machine)
        try:
            times = psutil.Process(client.km.provisioner.pid).cpu_times()
            cpu["seconds"] = times.user + times.system + times.children_user + times.children_system
        except (psutil.Error, AttributeError):
            pass

    client.on_cell_executed = kernel_cpu
    start = time.perf_counter()
    error = None
    try:
        client.execute()
    except CellExecutionError as exc:
        error = str(exc)
    except Exception as exc:  # a dead kernel, a timeout: name it, go on with the others
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - start
    if error is None:
        tmp = dest.with_suffix(".ipynb.tmp")
        nbformat.write(nb, tmp)
        tmp.replace(dest)
    elif dest.exists():
        dest.unlink()  # never leave a stale copy that looks up to date
    return src_nb, seconds, cpu["seconds"], error


def threads_wanted(path: Path) -> int:
    """The most threads a notebook asks for with ``set_threads(n)`` (1 if it never does)."""
    cells = nbformat.read(path, as_version=4).cells
    found = [
        int(n) for c in cells if c.cell_type == "code" for n in re.findall(r"set_threads\((\d+)\)", c.source)
    ]
    return max(found, default=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT, help="the book's root (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "executed")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="notebooks run side by side")
    parser.add_argument("--force", action="store_true", help="execute every notebook")
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="only these (default: every notebook of _toc.yml)"
    )
    args = parser.parse_args(argv)
    src, out = args.src.resolve(), args.out.resolve()

    notebooks = [p.resolve().relative_to(src) for p in args.notebooks] or toc_notebooks(src)
    mirror(src, out)
    timings_file = out / "timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
    inputs = newest_input(src)
    stale = [
        nb
        for nb in notebooks
        if args.force
        or not (out / nb).exists()
        or (out / nb).stat().st_mtime < max((src / nb).stat().st_mtime, inputs)
    ]
    print(
        f"{len(notebooks) - len(stale)} of {len(notebooks)} notebooks up to date in {out}; "
        f"executing {len(stale)} with {args.jobs} job(s)",
        flush=True,
    )
    stale.sort(key=lambda nb: -timings.get(str(nb), float("inf")))  # longest (or new) first

    timeout = int(
        (yaml.safe_load((src / "_config.yml").read_text()).get("execute") or {}).get("timeout", 300)
    )
    alone = [nb for nb in stale if threads_wanted(src / nb) > 1]  # after the others, one at a time
    failures, start = [], time.perf_counter()
    for batch, workers in [([nb for nb in stale if nb not in alone], args.jobs), (alone, 1)]:
        with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
            jobs = [pool.submit(execute_one, str(src / nb), str(out / nb), timeout) for nb in batch]
            for job in concurrent.futures.as_completed(jobs):
                name, seconds, cpu, error = job.result()
                rel = str(Path(name).relative_to(src))
                timings[rel] = round(seconds, 1)
                print(
                    f"  {seconds:7.1f} s wall {cpu:7.1f} s CPU  {rel}{'  FAILED' if error else ''}",
                    flush=True,
                )
                if error:
                    failures.append((rel, error))
    timings_file.write_text(json.dumps(dict(sorted(timings.items())), indent=1) + "\n")
    if stale:
        print(
            f"executed {len(stale)} notebooks in {time.perf_counter() - start:.1f} s wall "
            f"({sum(timings[str(nb)] for nb in stale):.1f} s of notebook time)"
        )
    for rel, error in failures:
        print(f"\n{rel} failed:\n{error[-4000:]}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
