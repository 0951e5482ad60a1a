"""A Dask worker preload for the sweeps: pins kernels.env before torch starts in the worker and
puts the checkout on sys.path, so that a task can import the sweep's module (benchmarks/bench_*.py)
and course_lib.

    dask worker tcp://HOST:8786 --nthreads 1 --preload benchmarks/sweep_worker.py

benchmarks/sweep.py's own LocalCluster loads it in every worker. The workers must see this
checkout at the same path as the process that runs sweep.py (a shared file system).
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for folder in (ROOT, ROOT / "benchmarks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import kernels  # noqa: E402 (benchmarks/, after the sys.path lines)

kernels.pin()  # raises if torch already started in this worker on other kernels


def dask_setup(worker):
    """Dask calls this when the worker starts; the pinning above already ran at import."""
