"""Run a registered sweep and commit its results as data: course_lib/sweeps/NAME.json.

    python benchmarks/sweep.py --list                   # the registered sweeps, and which are stale
    python benchmarks/sweep.py --check                  # exit 1 if a committed sweep is stale, naming why
    python benchmarks/sweep.py NAME                     # run it with its default seeds
    python benchmarks/sweep.py NAME --seeds 0 1 2 3 4   # other seeds
    python benchmarks/sweep.py NAME --jobs 2            # two runs side by side (one per core)
    python benchmarks/sweep.py NAME --scheduler tcp://HOST:8786   # on an existing Dask cluster
    python benchmarks/sweep.py NAME --serial            # one run after the other, in this process
    python benchmarks/sweep.py NAME --out DIR           # write DIR/NAME.json (a trial; records in DIR/.runs)
    python benchmarks/sweep.py --rebless [NAME ...]     # stale by code only: re-trace, compare the canary
    python benchmarks/sweep.py --rebless NAME --against REF  # made on another CPU vendor: compare
                                                        # the smoke runs of commit REF and of now, here
    python benchmarks/sweep.py --canary [NAME ...]      # re-run the smoke runs: same canary? (no writes)
    python benchmarks/sweep.py --verify NAME [--jobs 2] # re-run one seed per point, compare exactly

A sweep is registered in a topic module, benchmarks/bench_<topic>.py, as
SWEEPS = {name: common.SweepSpec(...)}; every registered sweep has committed data. A sweep
designed but not run yet is listed in the same module's PLANNED = {name: SweepSpec(...)}:
`--list` shows it, `sweep.py NAME` runs it, and once its file is committed it moves to SWEEPS
(a committed file whose spec is still in PLANNED is reported). Every run uses the pinned CPU
kernels (kernels.env, set below before torch starts) and one torch thread, or the number its config
names as "threads" (a sweep whose page runs on two cores); the file records that kernel set.

Before the full runs, a smoke run of every point (the spec's `smoke` overrides: a few steps)
runs under a profile hook (provenance.py): the file records a hash of every definition of
course_lib/ and benchmarks/ it executed, a hash of the data it read, and its canary (the smoke
runs' losses and results). The sweep is stale when a recorded definition or the data changed
(`--check` names them), or when its spec changed (config, points, metrics, margins, smoke,
version). After a refactor, `--rebless` re-runs the smoke: an identical canary records the new
hashes with a note of what changed (seconds); a different canary means: re-run the sweep. A sweep
made on another CPU vendor's kernels cannot have its canary re-run here: `--rebless NAME --against
REF` compares instead the smoke runs of the code at commit REF (where the sweep is fresh) and of
the code now, both here; identical, it records the new hashes and keeps the sweep's canary.

The runs are tasks of a dask.distributed cluster (benchmarks/engine.py): a LocalCluster of --jobs
worker processes (one thread each), or the cluster of an existing scheduler (--scheduler; its
workers load the preload benchmarks/sweep_worker.py, which pins the kernels). Each finished run is
written at once to benchmarks/.runs/NAME/ (one JSON per run, never committed), keyed by a hash of
the smoke runs' provenance and canary, the spec and the kernels: the same command, run again after
an interruption, runs only the runs missing under this code and writes the same file (all but the
fields that describe the execution: EXECUTION). A run that raises is named with its point and
seed; the others go on, and the sweep exits 1 without writing the file. benchmarks/ENGINE.md.
"""

import argparse
import os
import sys
from pathlib import Path

# isort: off
from sweep_run import (  # first: it puts course_lib on the path and pins the kernels before torch starts
    SWEEP_DIR,
    all_problems,
    planned_sweeps,
    problems,
    registered_sweeps,
    run_sweep,
    run_threads,
    the_kernels,
)
import engine
from sweep_rebless import canary_problems, rebless, rebless_against, verify
from course_lib.pages.sweeps import read_sweep
# isort: on


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="the sweep(s)")
    parser.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the sweep's own, >= 3)")
    parser.add_argument("--list", action="store_true", help="list the registered sweeps and their status")
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs side by side (processes, each on the sweep's threads)"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a committed sweep is stale or missing"
    )
    parser.add_argument(
        "--rebless", action="store_true", help="re-trace sweeps stale by code; keep equal canaries"
    )
    parser.add_argument(
        "--against", metavar="REF", help="with --rebless: compare with the code of commit REF on this machine"
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on the Dask cluster of this scheduler (tcp://HOST:8786, or its scheduler file)",
    )
    parser.add_argument(
        "--serial", action="store_true", help="no cluster: one run after the other, in this process"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        help="write NAME.json here, not to course_lib/sweeps (records in DIR/.runs)",
    )
    parser.add_argument(
        "--runs",
        metavar="DIR",
        type=Path,
        default=os.environ.get("SWEEP_RUNS_DIR") or None,
        help="keep the finished runs' records in DIR/NAME/ (default: $SWEEP_RUNS_DIR, else "
        "benchmarks/.runs, or DIR/.runs with --out): a folder outside the work tree survives a "
        "fresh checkout, so a long sweep resumes across sessions",
    )
    parser.add_argument("--verify", action="store_true", help="re-run one seed per point; compare exactly")
    parser.add_argument("--canary", action="store_true", help="re-run the smoke runs; compare the canary")
    args = parser.parse_args(argv)
    sweeps, planned = registered_sweeps(), planned_sweeps()
    unknown = [n for n in args.names if n not in sweeps and n not in planned]
    if unknown:
        parser.error(f"unknown sweep(s) {unknown}; registered: {', '.join(sweeps) or 'none'}")
    if args.list:
        for name, spec in planned.items():
            print(f"{name:32s} planned {len(spec.points)} points × {len(spec.seeds)} seeds  {spec.title}")
    if args.list or args.check:
        for name, spec in sweeps.items():
            state = "stale" if problems(name, spec) else "fresh"
            path = SWEEP_DIR / f"{name}.json"
            took = f", {read_sweep(path).wall_seconds / 60:.1f} min" if state == "fresh" else ""
            print(
                f"{name:32s} {state:6s} {len(spec.points)} points × {len(spec.seeds)} seeds{took}  "
                f"{spec.title}"
            )
        found = all_problems()
        print("\n".join(found) if found else "every committed sweep is fresh")
        return 1 if args.check and found else 0
    if args.rebless:
        names = args.names or [n for n, s in sweeps.items() if problems(n, s)]
        ok = True
        for name in names:
            if args.against:
                kept, why = rebless_against(name, sweeps[name], args.against)
            else:
                kept, why = rebless(name, sweeps[name])
            ok &= kept
            print(f"{name}: {'re-blessed (' + why + ')' if kept else 'NOT re-blessed: ' + why}")
        return 0 if ok else 1
    if args.canary:
        names = args.names or [n for n in sweeps if (SWEEP_DIR / f"{n}.json").exists()]
        found = [p for name in names for p in canary_problems(name, sweeps[name])]
        print("\n".join(found) if found else f"identical canaries: {', '.join(names)}")
        return 1 if found else 0
    if not args.names:
        parser.error("name a sweep (or --list, --check, --rebless, --canary)")
    if args.serial and (args.scheduler or args.jobs != 1):
        parser.error("--serial runs in this process: no --scheduler, no --jobs")
    engine_address = "serial" if args.serial else args.scheduler or "local"
    if args.verify:
        ok = True
        for name in args.names:
            equal, lines = verify(name, sweeps[name], jobs=args.jobs, engine_address=engine_address)
            ok &= equal
            print(f"{name}: {'reproduced' if equal else 'NOT reproduced'}\n" + "\n".join(lines), flush=True)
        return 0 if ok else 1
    sweeps = {**planned, **sweeps}  # a planned sweep runs like a registered one
    for name in args.names:
        seeds = args.seeds or sweeps[name].seeds
        if len(set(seeds)) != len(seeds):
            parser.error(f"--seeds has duplicates: {seeds}")
        if len(seeds) < 3:
            print(f"warning: {len(seeds)} seed(s); the evidence protocol needs >= 3 for a comparison")
        kernels_used = the_kernels(run_threads(sweeps[name].config))
        print(f"sweep {name}: {len(sweeps[name].points)} points × {len(seeds)} seeds, kernels {kernels_used}")
        try:
            run_sweep(
                name,
                sweeps[name],
                seeds,
                args.out or SWEEP_DIR,
                args.jobs,
                engine_address,
                Path(args.runs) if args.runs else None,
            )
        except engine.SweepFailed as failed:
            print(failed, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
