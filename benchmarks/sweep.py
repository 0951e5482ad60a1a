"""Run a registered sweep and commit its results as data: course_lib/sweeps/NAME.json.

    python benchmarks/sweep.py --list                   # the registered sweeps, and which are stale
    python benchmarks/sweep.py NAME                     # run it with its default seeds
    python benchmarks/sweep.py NAME --seeds 0 1 2 3 4   # other seeds
    python benchmarks/sweep.py NAME --jobs 2            # two runs side by side (one per core)
    python benchmarks/sweep.py --check                  # exit 1 if a committed sweep is stale

A sweep is registered in a topic module, benchmarks/bench_<topic>.py, as
SWEEPS = {name: common.SweepSpec(...)}. Each (point, seed) runs with one torch thread (so that
runs do not compete for the cores and timings are comparable); run long sweeps with `nice`.
The file records the configuration, the seeds, per-seed results and seconds, the fingerprint
of the code that produced them (course_lib.evidence.fingerprint), the command that re-runs it,
the wall time, the machine and the date. `benchmarks/run.py` copies each committed sweep's
summary (mean and spread per point) into results.json and the README's tables.
"""

import argparse
import concurrent.futures
import datetime
import importlib
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # course_lib importable from a plain clone
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402 (after the sys.path lines)

from course_lib.evidence import SCHEMA, Sweep, fingerprint, read_sweep  # noqa: E402

SWEEP_DIR = ROOT / "course_lib" / "sweeps"


def registered_sweeps():
    """{name: SweepSpec} from every benchmarks/bench_*.py that defines SWEEPS."""
    found = {}
    for path in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        for name, spec in getattr(importlib.import_module(path.stem), "SWEEPS", {}).items():
            if name in found:
                raise ValueError(f"sweep {name!r} is registered twice (second in {path.name})")
            found[name] = spec
    return found


def recipe_of(spec):
    """The fingerprinted functions: the spec's recipe plus its run function."""
    run = f"{spec.run.__module__}:{spec.run.__qualname__}"
    return sorted(set(spec.recipe) | {run})


def spec_fingerprint(spec):
    """The fingerprint a fresh run of `spec` would record, computed from the code on disk now."""
    config, points = json.loads(json.dumps(spec.config)), json.loads(json.dumps(spec.points))
    return fingerprint(recipe_of(spec), spec.modules, {"config": config, "points": points})


def problems(name, spec, sweep_dir=SWEEP_DIR):
    """What is wrong with the committed file of sweep `name` (an empty list if it is fresh).

    Fresh means: the file exists; its recorded fingerprint equals the one recomputed from the
    fields it records (recipe, modules, config, points: no hand-edited data); and equals the
    one of the registered spec as it is now (its code, config and grid have not changed since
    the sweep ran). `spec` None means the file has no registered SweepSpec.
    """
    path = sweep_dir / f"{name}.json"
    rerun = f"re-run: python benchmarks/sweep.py {name}"
    if not path.exists():
        return [f"{name}: registered but no committed data ({rerun})"]
    sweep = read_sweep(path)
    found = []
    if spec is None:
        found.append(f"{name}: committed but no SWEEPS entry in benchmarks/bench_*.py can re-run it")
    if sweep.expected_fingerprint() != sweep.fingerprint:
        found.append(
            f"{name}: recorded fingerprint {sweep.fingerprint} != {sweep.expected_fingerprint()} "
            f"recomputed from its own recipe, modules, config and points: the code changed "
            f"since the sweep ran, or the file was edited ({rerun})"
        )
    elif spec is not None and spec_fingerprint(spec) != sweep.fingerprint:
        found.append(
            f"{name}: the registered spec (recipe, modules, config or points) changed since the "
            f"sweep ran: {sweep.fingerprint} != {spec_fingerprint(spec)} ({rerun})"
        )
    return found


def all_problems(sweep_dir=SWEEP_DIR):
    """problems() of every registered sweep and of every committed file without a spec."""
    sweeps = registered_sweeps()
    found = [p for name, spec in sweeps.items() for p in problems(name, spec, sweep_dir)]
    orphans = [path.stem for path in sorted(sweep_dir.glob("*.json")) if path.stem not in sweeps]
    return found + [p for name in orphans for p in problems(name, None, sweep_dir)]


def git_commit():
    """HEAD's commit, with '+dirty' when the work tree has changes; None outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def _run_registered(name, point, seed, config):
    """_run_one for the registered sweep `name` (what a --jobs worker process runs)."""
    return _run_one(name, registered_sweeps()[name], point, seed, config)


def _run_one(name, spec, point, seed, config):
    """One (point, seed) of `spec`, on one torch thread -> (results, seconds)."""
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    results = {k: float(v) for k, v in spec.run(dict(point), seed, config).items()}
    missing = set(spec.metrics) - set(results)
    if missing:
        raise ValueError(f"{name}: run() returned no {sorted(missing)} for {point}, seed {seed}")
    return results, round(time.perf_counter() - t0, 3)


def run_sweep(name, spec, seeds, out_dir=SWEEP_DIR, jobs=1):
    """Run every (point, seed) of `spec` (`jobs` worker processes side by side, one thread each),
    then write out_dir/NAME.json; returns the Sweep."""
    config = json.loads(json.dumps(spec.config))  # exactly what the file will hold
    points = json.loads(json.dumps(spec.points))
    recipe = recipe_of(spec)
    fp = spec_fingerprint(spec)
    threads = torch.get_num_threads()
    grid = [(point, seed) for point in points for seed in seeds]
    runs, start = [None] * len(grid), time.perf_counter()

    def done(i, results, seconds):
        point, seed = grid[i]
        runs[i] = {"point": point, "seed": seed, "results": results, "seconds": seconds}
        shown = ", ".join(f"{k} {v:.4g}" for k, v in results.items())
        print(f"  {point} seed {seed}: {shown}  ({seconds:.1f} s)", flush=True)

    try:
        if jobs == 1:
            for i, (point, seed) in enumerate(grid):
                done(i, *_run_one(name, spec, point, seed, config))
        else:
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
                futures = {
                    pool.submit(_run_registered, name, p, s, config): i for i, (p, s) in enumerate(grid)
                }
                for future in concurrent.futures.as_completed(futures):
                    done(futures[future], *future.result())
    finally:
        torch.set_num_threads(threads)
    seed_args = "" if list(seeds) == list(spec.seeds) else " --seeds " + " ".join(map(str, seeds))
    data = {
        "schema": SCHEMA,
        "name": name,
        "title": spec.title,
        "description": spec.description,
        "recipe": recipe,
        "modules": sorted(spec.modules),
        "config": config,
        "points": points,
        "seeds": list(seeds),
        "metrics": spec.metrics,
        "runs": runs,
        "fingerprint": fp,
        "command": f"python benchmarks/sweep.py {name}{seed_args}",
        "wall_seconds": round(time.perf_counter() - start, 1),
        "machine": {
            "cpu_count": os.cpu_count(),
            "torch_threads": 1,
            "runs_side_by_side": jobs,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)
    print(
        f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
        f"({len(runs)} runs, {data['wall_seconds'] / 60:.1f} min)"
    )
    return Sweep(data)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", help="the sweep to run")
    parser.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the sweep's own, >= 3)")
    parser.add_argument("--list", action="store_true", help="list the registered sweeps and their status")
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs side by side (worker processes, one thread each)"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a committed sweep is stale or missing"
    )
    args = parser.parse_args(argv)
    sweeps = registered_sweeps()
    if args.list or args.check:
        for name, spec in sweeps.items():
            state = "stale" if problems(name, spec) else "fresh"
            path = SWEEP_DIR / f"{name}.json"
            took = f", {read_sweep(path).wall_seconds / 60:.1f} min" if path.exists() else ""
            size = f"{len(spec.points)} points × {len(spec.seeds)} seeds{took}"
            print(f"{name:32s} {state:6s} {size}  {spec.title}")
        found = all_problems()
        if not sweeps and not list(SWEEP_DIR.glob("*.json")):
            print("no sweep is registered or committed yet")
        print("\n".join(found) if found else "every committed sweep is fresh")
        return 1 if args.check and found else 0
    if args.name not in sweeps:
        parser.error(f"unknown sweep {args.name!r}; registered: {', '.join(sweeps) or 'none'}")
    seeds = args.seeds or sweeps[args.name].seeds
    if len(set(seeds)) != len(seeds):
        parser.error(f"--seeds has duplicates: {seeds}")
    if len(seeds) < 3:
        print(f"warning: {len(seeds)} seed(s); the evidence protocol needs >= 3 for a comparison")
    print(
        f"sweep {args.name}: {len(sweeps[args.name].points)} points × {len(seeds)} seeds, "
        f"torch {torch.__version__}, 1 thread"
    )
    run_sweep(args.name, sweeps[args.name], seeds, jobs=args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
