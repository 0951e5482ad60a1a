"""The sweep engine's overhead: dask.distributed (benchmarks/engine.py) against the process pool
that benchmarks/sweep.py used before (concurrent.futures.ProcessPoolExecutor, spawn), 2 workers.

    python benchmarks/engine_overhead.py [--tasks 200] [--repeats 3]

start-up   from nothing to 2 worker processes that have imported torch and course_lib
           (pool: 2 tasks that import them; Dask: a LocalCluster as sweep.py starts it, with its
           preload, then the same import on every worker)
per task   the mean wall time of a task through the engine, on the warm workers, minus nothing:
           `noop` (a function that returns None) and `toy` (one run of benchmarks/toy_sweep.py's
           toy_engine sweep, 40 steps, through engine.run_task, as a sweep runs it); the toy
           run's own time in this process is printed above, and the median of the runs' own
           times (engine.run_task's "seconds", measured in the worker) in the last column
The median of --repeats. Printed as a Markdown table (benchmarks/ENGINE.md holds the numbers).
"""

import argparse
import concurrent.futures
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import kernels

if __name__ == "__main__":
    kernels.pin()  # before torch starts

import engine

POINT, CONFIG = {"steps": 40}, {"width": 32, "lr": 0.05}


def warm():
    """What a sweep's worker imports before its first run: torch, course_lib, the toy sweep."""
    import toy_sweep  # noqa: F401 (imports torch and common)

    import course_lib.pages.sweeps  # noqa: F401

    return os.getpid()


def noop():
    return None


def toy(seed):
    import toy_sweep

    return engine.run_task(toy_sweep.run, "toy_engine", POINT, seed, CONFIG, {"error": {}})


def pool_times(tasks):
    t0 = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        for f in [pool.submit(warm) for _ in range(2)]:
            f.result()
        start = time.perf_counter() - t0
        t1 = time.perf_counter()
        for f in [pool.submit(noop) for _ in range(tasks)]:
            f.result()
        t2 = time.perf_counter()
        runs = [f.result()["seconds"] for f in [pool.submit(toy, i) for i in range(tasks)]]
        t3 = time.perf_counter()
    return start, (t2 - t1) / tasks, (t3 - t2) / tasks, statistics.median(runs)


def dask_times(tasks):
    t0 = time.perf_counter()
    with engine.connect(jobs=2) as client:
        client.run(warm)
        start = time.perf_counter() - t0
        t1 = time.perf_counter()
        client.gather([client.submit(noop, pure=False) for _ in range(tasks)])
        t2 = time.perf_counter()
        runs = [
            r["seconds"] for r in client.gather([client.submit(toy, i, pure=False) for i in range(tasks)])
        ]
        t3 = time.perf_counter()
    return start, (t2 - t1) / tasks, (t3 - t2) / tasks, statistics.median(runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    warm()
    t0 = time.perf_counter()
    for i in range(args.tasks):
        toy(i)
    serial_toy = (time.perf_counter() - t0) / args.tasks
    rows = {"process pool (before)": [], "Dask LocalCluster (now)": []}
    for _ in range(args.repeats):  # alternated, so that the load of the machine falls on both
        rows["process pool (before)"].append(pool_times(args.tasks))
        rows["Dask LocalCluster (now)"].append(dask_times(args.tasks))
    print(f"2 workers, {args.tasks} tasks per kind, median of {args.repeats}; load {os.getloadavg()}")
    print(f"one toy run in this process: {serial_toy * 1e3:.1f} ms\n")
    print(
        "| engine | start-up (s) | per task, noop (ms) | per task, toy run (ms) | toy run's own time (ms) |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, times in rows.items():
        start, noop_s, toy_s, own = (statistics.median(t[i] for t in times) for i in range(4))
        print(f"| {name} | {start:.2f} | {noop_s * 1e3:.2f} | {toy_s * 1e3:.2f} | {own * 1e3:.1f} |")


if __name__ == "__main__":
    main()
