"""A Dask preload for the sweeps (scheduler and workers): puts the checkout on sys.path, so that a
task can import benchmarks/engine.py, the sweep's module (benchmarks/bench_*.py) and course_lib,
and pins kernels.env before torch starts in the process.

    cd CHECKOUT
    dask scheduler --scheduler-file ~/sweeps.json --preload benchmarks/sweep_worker.py
    dask worker --scheduler-file ~/sweeps.json --nthreads 1 --preload benchmarks/sweep_worker.py

Dask imports a preload given as a file from a copy in the worker's scratch directory, so the
checkout is found from where the file lies if that is one, else from the current directory (start
the processes in the checkout). benchmarks/sweep.py's LocalCluster loads it by module name. The
workers must see the checkout at the same path as the process that runs sweep.py (a shared file
system) and run on the same CPU vendor.
"""

import sys
from pathlib import Path


def _checkout():
    """The folder holding kernels.env and benchmarks/sweep.py: this file's, else the current one
    or a folder above it."""
    for folder in (Path(__file__).resolve().parent.parent, Path.cwd(), *Path.cwd().parents):
        if (folder / "kernels.env").is_file() and (folder / "benchmarks" / "sweep.py").is_file():
            return folder
    raise RuntimeError(
        f"benchmarks/sweep_worker.py: no checkout of the course at {Path(__file__).parent} or at "
        f"{Path.cwd()} and above: start the Dask scheduler and workers in the checkout"
    )


ROOT = _checkout()
for folder in (ROOT, ROOT / "benchmarks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import kernels  # noqa: E402 (benchmarks/, after the sys.path lines)

kernels.pin()  # raises if torch already started in this process on other kernels


def dask_setup(server):
    """Dask calls this when the scheduler or worker starts; the work above ran at import."""
