"""The engine under benchmarks/sweep.py: every (point, seed) of a sweep is a task of a
dask.distributed cluster, and every finished run is written at once to a record of its own.

    with engine.connect(jobs=2) as client:                  # a LocalCluster: 2 worker processes
    with engine.connect("tcp://HOST:8786") as client:       # an existing scheduler (or its scheduler file)
    store = engine.RunStore(folder, key)                    # folder/<point id>-seed<seed>.json
    records, failures = engine.run_all(name, spec.run, grid, config, metrics, client, store)

A run is a pure function of (point, seed, config): it seeds everything it draws, so it gives the
same numbers on whichever worker it lands, and again when a worker dies in the middle of it and
the scheduler gives its task to another worker. The store keeps one JSON record per finished run,
written to a temporary file and renamed (os.replace), so a record is whole or absent. A record
is reused only under the same `key` (sweep.py hashes the code the smoke runs executed, their
canary, the spec and the kernels into it): a run made under other code runs again.

The workers pin kernels.env before torch starts (benchmarks/sweep_worker.py, a Dask preload, and
the nanny's environment) and each record carries the kernel set and the CPU of its worker.
"""

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import platform
import time
import traceback
import uuid
from pathlib import Path

import kernels


class SweepFailed(RuntimeError):
    """Runs of a sweep raised: `failures` lists (point, seed, error) of each."""

    def __init__(self, name, failures):
        self.failures = failures
        lines = [f"  {point} seed {seed}: {error}" for point, seed, error in failures]
        super().__init__(f"sweep {name}: {len(failures)} run(s) failed:\n" + "\n".join(lines))


# ---------------------------------------------------------------------------
# One run, on a worker (or in this process)
# ---------------------------------------------------------------------------


def cpu_model():
    """The CPU's model name (Linux's cpuinfo), else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def run_task(run, name, point, seed, config, metrics):
    """run(point, seed, config) on config["threads"] torch threads (default 1) -> its record:
    {"results", "seconds", "kernels", "cpu", "host"}. Raises if a metric is missing. `run` may
    be named "module:qualname" (resolved here, on the worker)."""
    import torch

    from course_lib.pages.sweeps import kernel_set

    if isinstance(run, str):
        module, qualname = run.split(":")
        run = functools.reduce(getattr, qualname.split("."), importlib.import_module(module))

    threads = torch.get_num_threads()
    torch.set_num_threads(config.get("threads", 1))
    try:
        t0 = time.perf_counter()
        results = {k: float(v) for k, v in run(dict(point), seed, config).items()}
        seconds = round(time.perf_counter() - t0, 3)
        missing = set(metrics) - set(results)
        if missing:
            raise ValueError(f"{name}: run() returned no {sorted(missing)} for {point}, seed {seed}")
        return {
            "results": results,
            "seconds": seconds,
            "kernels": kernel_set(),
            "cpu": cpu_model(),
            "host": platform.node(),
        }
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------------------
# The records of finished runs
# ---------------------------------------------------------------------------


def digest(value):
    """16 hex digits of the SHA-256 of `value` as canonical JSON."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


class RunStore:
    """One JSON record per finished run, in `folder`, reused only under the same `key`."""

    def __init__(self, folder, key):
        self.folder, self.key = Path(folder), key
        self.stale = 0  # records found under another key (other code), to be run again

    def path(self, point, seed):
        return self.folder / f"{digest(point)}-seed{seed}.json"

    def get(self, point, seed, config):
        """The record of (point, seed) made under this key and config, else None."""
        path = self.path(point, seed)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        same = (record.get("key"), record.get("point"), record.get("seed"), record.get("config"))
        if same != (self.key, point, seed, config):
            self.stale += 1
            return None
        return record

    def put(self, record):
        """Write `record` atomically: a temporary file in the same folder, then os.replace."""
        self.folder.mkdir(parents=True, exist_ok=True)
        ignore = self.folder.parent / ".gitignore"  # the records are never committed
        if not ignore.exists():
            ignore.write_text("# written by benchmarks/engine.py: records of finished runs\n*\n")
        path = self.path(record["point"], record["seed"])
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dict(record, key=self.key), indent=1) + "\n")
        os.replace(tmp, path)
        return path


def session():
    """{"id", "start"} of this invocation: its runs' records carry it (wall time of a resumed sweep)."""
    return {"id": uuid.uuid4().hex[:12], "start": time.time()}


def wall_seconds(records, this_session):
    """The wall time of the sessions that made `records`, each from its start to the last of its
    runs that `records` holds, and of this session from its start to now."""
    spans = {}
    for r in records:
        start, last = spans.get(r["session"], (r["session_start"], r["finished"]))
        spans[r["session"]] = (start, max(last, r["finished"]))
    spans[this_session["id"]] = (this_session["start"], time.time())
    return round(sum(last - start for start, last in spans.values()), 1)


# ---------------------------------------------------------------------------
# The cluster
# ---------------------------------------------------------------------------


def has_dashboard():
    """Dask's dashboard needs bokeh; without it, the cluster runs without one."""
    return importlib.util.find_spec("bokeh") is not None


@contextlib.contextmanager
def connect(scheduler=None, jobs=1):
    """A dask.distributed Client: of the scheduler at `scheduler` (tcp://HOST:8786, or the path of
    its scheduler file), else of a LocalCluster of `jobs` worker processes with one thread each,
    closed on exit. The local workers get kernels.env in their environment before they start and
    run the preload (benchmarks/sweep_worker.py), which pins it again and makes the sweeps
    importable; the workers of an existing scheduler must be started with that preload."""
    import dask
    from distributed import Client, LocalCluster

    if scheduler:
        if Path(scheduler).is_file():  # a scheduler file (dask scheduler --scheduler-file, dask-jobqueue)
            with Client(scheduler_file=scheduler) as client:
                yield client
        else:
            with Client(scheduler) as client:
                yield client
        return
    environ = {"MALLOC_TRIM_THRESHOLD_": 65536, **kernels.pinned()}  # no OMP/MKL threads: run_task sets them
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        cluster = LocalCluster(
            n_workers=jobs,
            threads_per_worker=1,
            processes=True,
            memory_limit=0,  # as the process pool before: no memory-based pausing or restarts
            dashboard_address=":0",  # a free port (a dashboard only with bokeh)
            preload=["sweep_worker"],  # by module name: imported where it lies (on the spawned sys.path)
            silence_logs=logging.ERROR,
        )
    with cluster, Client(cluster) as client:
        yield client


def dashboard(client):
    """The address of the scheduler's dashboard, or why there is none (it needs bokeh where the
    scheduler runs; without it the scheduler serves only its status endpoints)."""
    services = client.scheduler_info().get("services", {})
    if "dashboard" not in services:
        return "none (the scheduler serves none)"
    bokeh_there = lambda: importlib.util.find_spec("bokeh") is not None  # noqa: E731 (sent by value)
    if not client.run_on_scheduler(bokeh_there):
        return "none (Dask's dashboard needs bokeh, which is not installed where the scheduler runs)"
    return client.dashboard_link


def _worker_kernels():
    from course_lib.pages.sweeps import kernel_set

    return kernel_set()


def worker_kernels(client):
    """{worker address: kernel_set() there}."""
    return client.run(_worker_kernels)


# ---------------------------------------------------------------------------
# Running the runs
# ---------------------------------------------------------------------------


HEARTBEAT = 60  # seconds without a finished run before a progress line says how far it is


class Progress:
    """Runs done, running, left, the mean time of a run and the time left, printed as runs end."""

    def __init__(self, total, done, slots, show=True):
        self.total, self.done, self.slots, self.show = total, done, max(1, slots), show
        self.seconds = []  # of the runs finished in this session
        self.start = time.perf_counter()

    def line(self, running):
        left = self.total - self.done
        if not self.seconds:
            return f"[{self.done}/{self.total} done, {running} running, {left} left]"
        mean = sum(self.seconds) / len(self.seconds)
        eta = mean * left / self.slots
        return (
            f"[{self.done}/{self.total} done, {running} running, {left} left; "
            f"{mean:.1f} s per run, about {eta / 60:.1f} min left]"
        )

    def finished(self, point, seed, record, running):
        self.done += 1
        self.seconds.append(record["seconds"])
        if self.show:
            shown = ", ".join(f"{k} {v:.4g}" for k, v in record["results"].items())
            print(
                f"  {point} seed {seed}: {shown}  ({record['seconds']:.1f} s)  {self.line(running)}",
                flush=True,
            )

    def failed(self, point, seed, error):
        self.done += 1
        if self.show:
            print(f"  {point} seed {seed}: FAILED {error}", flush=True)

    def waiting(self, running):
        if self.show:
            elapsed = (time.perf_counter() - self.start) / 60
            print(f"  ... {elapsed:.1f} min {self.line(running)}", flush=True)


def _error(exc):
    return f"{type(exc).__name__}: {exc}".strip()


def _running(client, keys):
    """How many of `keys` the workers hold, at most one per worker thread."""
    threads = client.nthreads()
    return sum(min(len(set(held) & keys), threads.get(w, 1)) for w, held in client.processing().items())


def run_all(
    name, run, grid, config, metrics, client=None, store=None, expect=None, this_session=None, show=True
):
    """Run every (point, seed) of `grid` that `store` holds no record of -> (records, failures).

    Each run is run_task(run, name, point, seed, config, metrics): on `client`'s workers, or one
    after the other in this process when client is None. records[i] is the record of grid[i]
    (None for a failed run); failures: [(point, seed, error)]. expect: the kernel set every run
    must report (a run made on other kernels counts as failed). Each finished run is written to
    `store` at once."""
    this_session = this_session or session()
    records = [store.get(p, s, config) if store else None for p, s in grid]
    todo = [i for i, r in enumerate(records) if r is None]
    if show and store is not None:
        print(
            f"  {len(grid)} runs: {len(grid) - len(todo)} recorded earlier under this code, "
            f"{store.stale} recorded under other code (run again), {len(todo)} to run",
            flush=True,
        )
    slots = sum(client.nthreads().values()) if client else 1
    progress = Progress(len(grid), len(grid) - len(todo), slots, show)
    failures = []

    def fail(point, seed, error):
        failures.append((point, seed, error))
        progress.failed(point, seed, error)

    def finish(i, result, running):
        point, seed = grid[i]
        if expect is not None and result["kernels"] != expect:
            other = f"made on other kernels {result['kernels']} on {result['host']}, not {expect}"
            return fail(point, seed, other)
        record = {"point": point, "seed": seed, "config": config, **result}
        record.update(session=this_session["id"], session_start=this_session["start"], finished=time.time())
        if store is not None:
            store.put(record)
        records[i] = record
        progress.finished(point, seed, record, running)

    if client is None:
        for i in todo:
            point, seed = grid[i]
            try:
                result = run_task(run, name, point, seed, config, metrics)
            except Exception as exc:
                if show:
                    traceback.print_exc()
                fail(point, seed, _error(exc))
                continue
            finish(i, result, int(i != todo[-1]))
        return records, failures

    from distributed import wait

    # The scheduler unpickles each task: it imports this module (its preload puts benchmarks/ on
    # its sys.path) but not the sweep's, named by module and name, which only the workers import.
    run_name = f"{run.__module__}:{run.__qualname__}"
    futures = {}
    for i in todo:
        point, seed = grid[i]
        key = f"run-{name}-{digest(point)}-seed{seed}-{this_session['id']}"
        args = (run_name, name, point, seed, config, metrics)
        futures[client.submit(run_task, *args, key=key, pure=False, retries=0)] = i
    keys = {f.key for f in futures}
    pending = set(futures)
    while pending:
        try:
            done, pending = wait(pending, timeout=HEARTBEAT, return_when="FIRST_COMPLETED")
        except TimeoutError:
            progress.waiting(_running(client, keys))
            continue
        for future in done:
            i = futures[future]
            keys.discard(future.key)
            if future.status == "error":
                fail(*grid[i], _error(future.exception()))
            else:
                finish(i, future.result(), _running(client, keys))
            future.release()
    return records, failures
