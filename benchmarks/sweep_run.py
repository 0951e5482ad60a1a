"""The machinery behind ``benchmarks/sweep.py`` (its docstring says what a sweep is): the
registered sweeps, the smoke run that records what a sweep executes and its canary, staleness,
running a sweep on the engine and writing its file. Re-blessing and verifying a committed sweep
are in ``sweep_rebless.py``; the command line in ``sweep.py``.
"""

import concurrent.futures
import datetime
import functools
import importlib
import json
import multiprocessing
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # course_lib importable from a plain clone
sys.path.insert(0, str(ROOT / "benchmarks"))

import kernels  # noqa: E402 (after the sys.path lines)

# Before torch starts. Imported after torch (a test module), it keeps the kernels torch started
# with: kernel_set() records them.
if "torch" not in sys.modules:
    kernels.pin()  # before torch starts

import engine  # noqa: E402
import provenance  # noqa: E402
import torch  # noqa: E402

from course_lib.pages.sweeps import SCHEMA, Sweep, kernel_set  # noqa: E402

SWEEP_DIR = ROOT / "course_lib" / "sweeps"
RUNS_DIR = ROOT / "benchmarks" / ".runs"  # the records of finished runs (engine.RunStore), ignored by git
TIMING_UNITS = {"s", "ms"}
SPEC_FIELDS = ["config", "points", "metrics", "margins", "version"]  # recorded as they were


def registered_sweeps():
    """{name: SweepSpec} from every benchmarks/bench_*.py that defines SWEEPS."""
    found = {}
    for path in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        for name, spec in getattr(importlib.import_module(path.stem), "SWEEPS", {}).items():
            if name in found:
                raise ValueError(f"sweep {name!r} is registered twice (second in {path.name})")
            found[name] = spec
    return found


def planned_sweeps():
    """{name: SweepSpec} of the sweeps designed but not run yet (PLANNED in bench_*.py)."""
    found = {}
    for path in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        found |= getattr(importlib.import_module(path.stem), "PLANNED", {})
    return found


def _json(value):
    return json.loads(json.dumps(value))  # exactly what a file holds


def exact_metrics(metrics):
    """The metrics a reproduction compares: all but timings."""
    return [m for m, info in metrics.items() if info.get("unit") not in TIMING_UNITS]


# ---------------------------------------------------------------------------
# The smoke run: what the sweep executes, and its canary
# ---------------------------------------------------------------------------


def smoke_inputs(spec, point):
    """(point, config) of the smoke run of `point`: the spec's smoke overrides applied."""
    point, config = _json(point), _json(spec.config)
    for key, value in spec.smoke.items():
        if key in point:
            point[key] = value
        elif key in config:
            config[key] = value
        else:
            raise KeyError(f"smoke override {key!r} is neither a point key {sorted(point)} nor a config key")
    return point, config


def smoke(spec):
    """Trace a smoke run of every point (first seed, one thread) -> the provenance record."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    definitions, data, canary = {}, {}, []
    try:
        for point in spec.points:
            small_point, small_config = smoke_inputs(spec, point)
            ran = provenance.trace_run(spec.run, small_point, spec.seeds[0], small_config)
            definitions.update(ran.definitions)
            data.update(ran.data)
            results = {k: float(v) for k, v in ran.result.items() if k in exact_metrics(spec.metrics)}
            canary.append(
                {"point": _json(point), "seed": spec.seeds[0], "losses": ran.losses, "results": results}
            )
    finally:
        torch.set_num_threads(threads)
    return {"smoke": _json(spec.smoke), "definitions": definitions, "data": data, "canary": _json(canary)}


def _smoke_registered(name):
    return smoke({**planned_sweeps(), **registered_sweeps()}[name])


def smoke_fresh(name, spec):
    """smoke(spec) in a fresh process when `name` is registered: a cache filled by an earlier run
    in this process (a corpus loaded once) would hide the code behind it from the trace."""
    if spec.run.__module__ not in {p.stem for p in (ROOT / "benchmarks").glob("bench_*.py")}:
        return smoke(spec)  # not a registered sweep (a test's): in this process
    if {**planned_sweeps(), **registered_sweeps()}.get(name) is not spec:
        return smoke(spec)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(_smoke_registered, name).result()


# ---------------------------------------------------------------------------
# Staleness
# ---------------------------------------------------------------------------


def problems(name, spec, sweep_dir=SWEEP_DIR):
    """What makes the committed sweep `name` stale (an empty list if it is fresh), each naming
    the cause: a spec field that changed, a recorded definition whose code changed or that is
    gone, data that changed. `spec` None means the file has no registered SweepSpec."""
    path = sweep_dir / f"{name}.json"
    rerun = f"re-run: python benchmarks/sweep.py {name}"
    if not path.exists():
        return [f"{name}: registered but no committed data ({rerun})"]
    raw = json.loads(path.read_text())
    if raw.get("schema") != SCHEMA:
        return [f"{name}: schema {raw.get('schema')!r}, not {SCHEMA} ({rerun}, or --verify it)"]
    sweep = Sweep(raw)
    if spec is None:
        return [f"{name}: committed but no SWEEPS entry in benchmarks/bench_*.py can re-run it"]
    found = []
    for key in SPEC_FIELDS:
        if _json(getattr(spec, key)) != getattr(sweep, key):
            found.append(f"{name}: its spec's {key} changed since the sweep ran ({rerun})")
    if _json(spec.smoke) != sweep.provenance["smoke"]:
        found.append(f"{name}: its spec's smoke overrides changed (re-trace: --rebless {name})")
    code = provenance.changed(sweep.provenance["definitions"])
    if code:
        found.append(
            f"{name}: code it ran changed: {', '.join(code)} "
            f"(a refactor that changes no number: --rebless {name}, or, if the sweep was made on another "
            f"CPU vendor, --rebless {name} --against a commit where it is fresh; else {rerun})"
        )
    data_now = provenance.data_digests(sweep.provenance["definitions"])
    for key, digest in sweep.provenance["data"].items():
        if data_now.get(key) != digest:
            found.append(f"{name}: the data {key} changed ({rerun})")
    return found


def all_problems(sweep_dir=SWEEP_DIR):
    """problems() of every registered sweep and of every committed file without a spec."""
    sweeps = registered_sweeps()
    found = [p for name, spec in sweeps.items() for p in problems(name, spec, sweep_dir)]
    orphans = [path.stem for path in sorted(sweep_dir.glob("*.json")) if path.stem not in sweeps]
    return found + [p for name in orphans for p in problems(name, None, sweep_dir)]


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


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


def run_threads(config):
    """The torch threads of each run of a sweep: its config's "threads", else 1."""
    return config.get("threads", 1)


def run_grid(name, spec, grid, config, jobs=1, show=True, engine_address="serial"):
    """Run every (point, seed) of `grid` -> [(results, seconds)], in grid order; raises
    engine.SweepFailed naming the runs that raised, after the others finished. engine_address:
    as run_records."""
    records, failures, _ = run_records(name, spec, grid, config, jobs, engine_address, show=show)
    if failures:
        raise engine.SweepFailed(name, failures)
    return [(r["results"], r["seconds"]) for r in records]


def run_records(name, spec, grid, config, jobs=1, engine_address="serial", **options):
    """engine.run_all -> (records, failures, runs side by side), on the engine `engine_address`
    names: "serial" (one run after the other in this process; with jobs > 1, as "local"), "local"
    (a LocalCluster of `jobs` worker processes) or a scheduler's address (tcp://HOST:8786).
    options: engine.run_all's (store, expect, this_session, show)."""
    run_all = functools.partial(engine.run_all, name, spec.run, grid, config, spec.metrics, **options)
    if engine_address == "serial" and jobs == 1:
        return (*run_all(), 1)
    scheduler = None if engine_address in ("serial", "local") else engine_address
    with engine.connect(scheduler, jobs) as client:
        threads = sum(client.nthreads().values())
        if options.get("show", True):
            where = f"the scheduler {scheduler}" if scheduler else "a LocalCluster"
            print(f"  {len(client.nthreads())} Dask worker(s), {threads} thread(s), on {where}", flush=True)
            print(f"  dashboard: {engine.dashboard(client)}", flush=True)
        expect = options.get("expect")
        if expect is not None:
            other = [
                (w, k)
                for w, k in engine.worker_kernels(client).items()
                if dict(k, threads=expect["threads"]) != expect
            ]
            if other:
                why = [
                    ("every point", "every seed", f"worker {w} computes with {k}, not {expect}")
                    for w, k in other
                ]
                raise engine.SweepFailed(name, why)
        return (*run_all(client=client), threads)


def machine(jobs, threads=1):
    return {
        "cpu_count": os.cpu_count(),
        "cpu": _cpu_model(),
        "torch_threads": threads,
        "runs_side_by_side": jobs,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def the_kernels(threads=1):
    """kernel_set() of a sweep's runs (`threads` torch threads each; the smoke runs use one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return kernel_set()
    finally:
        torch.set_num_threads(before)


def write(data, out_dir=SWEEP_DIR):
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{data['name']}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)
    return path


# The fields of a sweep's file that describe its execution (when, where, how long), not its numbers:
# a sweep resumed after an interruption, or run on another engine, differs from an uninterrupted
# one in these only. runs[i]["seconds"] is each run's own measured time (from its record).
EXECUTION = ("wall_seconds", "machine", "date", "git_commit")


def comparable(data):
    """The sweep file `data` without EXECUTION and the runs' seconds: what must be bit-identical."""
    kept = {k: v for k, v in data.items() if k not in EXECUTION}
    kept["runs"] = [{k: v for k, v in run.items() if k != "seconds"} for run in data["runs"]]
    return json.dumps(kept, indent=1)


def run_key(name, spec, record, kernels_used):
    """The key of a sweep's run records: a hash of what its numbers depend on besides (point,
    seed): the code the smoke runs executed, the data they read, their canary, the config,
    metrics and version, and the kernels. A record under another key is run again."""
    what = {k: _json(getattr(spec, k)) for k in ("config", "metrics", "version")}
    return engine.digest({"sweep": name, **what, "provenance": record, "kernels": kernels_used})


def run_sweep(name, spec, seeds, out_dir=SWEEP_DIR, jobs=1, engine_address="serial", runs_dir=None):
    """Trace the smoke runs, run every (point, seed) of `spec` that runs_dir holds no record of
    under this code, then write out_dir/NAME.json from the records.

    engine_address: as run_grid ("serial", "local" or tcp://HOST:8786). runs_dir: the records'
    folder (default RUNS_DIR for the committed sweeps, else out_dir/.runs); each finished run is
    written to runs_dir/NAME/ at once. Raises engine.SweepFailed (no file written) if runs raised."""
    this_session = engine.session()
    print(f"  smoke runs of {len(spec.points)} point(s), traced ...", flush=True)
    record = smoke_fresh(name, spec)
    config, points = _json(spec.config), _json(spec.points)
    kernels_used = the_kernels(run_threads(config))
    runs_dir = runs_dir or (RUNS_DIR if out_dir == SWEEP_DIR else out_dir / ".runs")
    store = engine.RunStore(runs_dir / name, run_key(name, spec, record, kernels_used))
    grid = [(point, seed) for point in points for seed in seeds]
    records, failures, side_by_side = run_records(
        name,
        spec,
        grid,
        config,
        jobs,
        engine_address,
        store=store,
        expect=kernels_used,
        this_session=this_session,
    )
    if failures:
        raise engine.SweepFailed(name, failures)
    runs = [
        {"point": p, "seed": s, "results": r["results"], "seconds": r["seconds"]}
        for (p, s), r in zip(grid, records)
    ]
    seed_args = "" if list(seeds) == list(spec.seeds) else " --seeds " + " ".join(map(str, seeds))
    data = {
        "schema": SCHEMA,
        "name": name,
        "title": spec.title,
        "description": spec.description,
        "config": config,
        "points": points,
        "seeds": list(seeds),
        "metrics": _json(spec.metrics),
        "margins": _json(spec.margins),
        "version": spec.version,
        "runs": runs,
        "kernels": kernels_used,
        "provenance": record,
        "command": f"python benchmarks/sweep.py {name}{seed_args}",
        "wall_seconds": engine.wall_seconds(records, this_session),
        "machine": dict(machine(side_by_side, run_threads(config)), cpu=_cpus(records)),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
    }
    path = write(data, out_dir)
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    print(f"wrote {shown} ({len(runs)} runs, {data['wall_seconds'] / 60:.1f} min)")
    return Sweep(data)


def _cpus(records):
    """The CPU model of the runs' workers (joined with ' + ' if they differ)."""
    return " + ".join(sorted({r["cpu"] for r in records}))
