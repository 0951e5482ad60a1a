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
import tempfile
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

from course_lib.pages.sweeps import SCHEMA, Sweep, kernel_set, read_sweep  # noqa: E402

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


def rebless(name, spec, sweep_dir=SWEEP_DIR):
    """Re-trace a sweep that is stale by its code only; keep it if the canary is identical.

    Returns (True, what changed) after rewriting the file's provenance with a note in
    provenance["reblessed"], or (False, why not)."""
    path = sweep_dir / f"{name}.json"
    sweep = read_sweep(path)
    other = [
        p
        for p in problems(name, spec, sweep_dir)
        if ": code it ran changed" not in p and "smoke overrides changed" not in p
    ]
    if other:
        return False, "stale for another reason: " + "; ".join(other)
    if sweep.kernels != the_kernels(run_threads(sweep.config)):
        return (
            False,
            f"these kernels {the_kernels(run_threads(sweep.config))} are not the sweep's {sweep.kernels}: "
            "the canary cannot be compared",
        )
    record = smoke_fresh(name, spec)
    old = sweep.provenance
    if _json(spec.smoke) == old["smoke"] and record["canary"] != old["canary"]:
        diff = next(
            (
                f"{a['point']}: losses {a['losses'][:3]}... vs {b['losses'][:3]}..., "
                f"results {a['results']} vs {b['results']}"
                for a, b in zip(old["canary"], record["canary"])
                if a != b
            ),
            "a different number of canary points",
        )
        return False, f"the canary changed, so the numbers would: re-run the sweep ({diff})"
    changed = provenance.changed(old["definitions"])
    record["reblessed"] = old.get("reblessed", []) + [
        {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(),
            "changed": changed,
            "canary": "identical"
            if _json(spec.smoke) == old["smoke"]
            else "new smoke overrides, canary recorded anew",
        }
    ]
    data = dict(sweep.data, provenance=record)
    write(data, sweep_dir)
    return True, ", ".join(changed) or "nothing in the code"


# The smoke canary of the sweep at another commit, run in a worktree of that commit (its own
# sweep.py, this machine's kernels): printed as JSON, after checking that the sweep is fresh there.
_CANARY_AT = """
import json, sys
sys.path[:0] = ["benchmarks"]
import sweep
import course_lib
if not course_lib.__file__.startswith(str(sweep.ROOT)):
    sys.exit(f"course_lib imported from {course_lib.__file__}, not from this worktree")
spec = sweep.registered_sweeps()[sys.argv[1]]
stale = sweep.problems(sys.argv[1], spec)
if stale:
    sys.exit("stale at this commit: " + "; ".join(stale))
print(json.dumps({"kernels": sweep.the_kernels(), "canary": sweep.smoke_fresh(sys.argv[1], spec)["canary"]}))
"""


def canary_at(name, ref):
    """{"kernels", "canary"}: the smoke runs of sweep `name` as the code of git commit `ref` runs them
    on this machine (a temporary worktree; the sweep must be fresh at `ref`)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), commit],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            ran = subprocess.run(
                [sys.executable, "-c", _CANARY_AT, name], cwd=tree, env=env, capture_output=True, text=True
            )
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
    if ran.returncode != 0:
        raise RuntimeError(f"{name} at {commit[:10]}: {ran.stderr.strip()[-2000:]}")
    return {"commit": commit, **json.loads(ran.stdout.strip().splitlines()[-1])}


def fresh_kernels():
    """the_kernels() of a fresh process, pinned as the smoke runs of `smoke_fresh` are (this
    process may run on other kernels: the tests run on a second kernel set)."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(the_kernels).result()


def rebless_against(name, spec, ref, sweep_dir=SWEEP_DIR):
    """Re-bless a sweep made on other kernels (another CPU vendor), whose canary this machine cannot
    reproduce: instead of the recorded canary, compare the smoke runs of the code at git commit
    `ref` (where the sweep is fresh) with those of the code now, both on this machine. Identical:
    the refactor changed no number on these kernels; the new definitions are recorded, the sweep's
    own canary kept, and the note names `ref` and the kernels compared on.

    Returns (True, what changed) or (False, why not), like `rebless`."""
    path = sweep_dir / f"{name}.json"
    sweep = read_sweep(path)
    other = [p for p in problems(name, spec, sweep_dir) if ": code it ran changed" not in p]
    if other:
        return False, "stale for another reason: " + "; ".join(other)
    before = canary_at(name, ref)
    here = fresh_kernels()
    if before["kernels"] != here:
        return False, f"the run at {ref} used kernels {before['kernels']}, not {here}"
    record = smoke_fresh(name, spec)
    if record["canary"] != before["canary"]:
        diff = (
            next(
                f"{a['point']}: losses {a['losses'][:3]}... vs {b['losses'][:3]}..."
                for a, b in zip(before["canary"], record["canary"])
                if a != b
            )
            if len(before["canary"]) == len(record["canary"])
            else "a different number of canary points"
        )
        return False, f"the code at {ref} and now give other numbers here: re-run the sweep ({diff})"
    old = sweep.provenance
    changed = provenance.changed(old["definitions"])
    record["canary"] = old["canary"]  # the sweep's own kernels' canary, not this machine's
    record["reblessed"] = old.get("reblessed", []) + [
        {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(),
            "changed": changed,
            "canary": f"kept (recorded on {sweep.kernels.get('cpu')}); compared instead: the smoke runs "
            f"of commit {before['commit'][:10]} and of this code, identical on {the_kernels()}",
        }
    ]
    write(dict(sweep.data, provenance=record), sweep_dir)
    return True, ", ".join(changed) or "nothing in the code"


def canary_problems(name, spec, sweep_dir=SWEEP_DIR):
    """Re-run the smoke runs of the committed sweep `name` and compare their canary with the
    recorded one, exactly (on the sweep's kernels). An empty list when identical."""
    sweep = read_sweep(sweep_dir / f"{name}.json")
    here = the_kernels(run_threads(sweep.config))
    if sweep.kernels != here:
        return [f"{name}: these kernels {here} are not the sweep's {sweep.kernels}"]
    if _json(spec.smoke) != sweep.provenance["smoke"]:
        return [f"{name}: the spec's smoke overrides changed since the canary was recorded"]
    now = smoke_fresh(name, spec)["canary"]
    return [
        f"{name}: {old['point']}: losses {old['losses'][:2]}... now {new['losses'][:2]}..., "
        f"results {old['results']} now {new['results']}"
        for old, new in zip(sweep.provenance["canary"], now)
        if old != new
    ] + (
        [f"{name}: {len(now)} canary points, {len(sweep.provenance['canary'])} recorded"]
        if len(now) != len(sweep.provenance["canary"])
        else []
    )


def verify(name, spec, jobs=1, sweep_dir=SWEEP_DIR, engine_address="serial"):
    """Re-run the first seed of every point at its full budget and compare every result exactly.

    Returns (equal, lines). A schema-1 file that reproduces is upgraded to schema 2 with its runs
    kept: the kernels of this run, and the traced provenance."""
    path = sweep_dir / f"{name}.json"
    raw = json.loads(path.read_text())
    seed = raw["seeds"][0]
    grid = [(p, seed) for p in raw["points"]]
    results = run_grid(name, spec, grid, raw["config"], jobs, False, engine_address)
    exact = exact_metrics(raw["metrics"])
    lines, equal = [], True
    for (point, _), (res, _) in zip(grid, results):
        committed = next(r["results"] for r in raw["runs"] if r["point"] == point and r["seed"] == seed)
        diffs = {m: (committed[m], res[m]) for m in exact if committed[m] != res[m]}
        equal &= not diffs
        lines.append(f"  {point} seed {seed}: " + ("reproduced" if not diffs else f"DIFFERENT {diffs}"))
    if equal and raw.get("schema") != SCHEMA:
        spec_now = {k: _json(getattr(spec, k)) for k in ("config", "points", "metrics")}
        if any(spec_now[k] != raw[k] for k in spec_now):
            return False, lines + ["  reproduced, but the registered spec differs from the file: re-run it"]
        for key in ("recipe", "modules", "fingerprint"):
            raw.pop(key, None)
        raw.update(
            schema=SCHEMA,
            margins=_json(spec.margins),
            version=spec.version,
            kernels=the_kernels(run_threads(raw["config"])),
            provenance=smoke_fresh(name, spec),
        )
        raw["machine"] = dict(raw.get("machine", {}), cpu=_cpu_model())
    if equal:
        raw.setdefault("verified", []).append(
            {
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "git_commit": git_commit(),
                "seed": seed,
                "points": len(grid),
                "kernels": the_kernels(run_threads(raw["config"])),
            }
        )
        write(raw, sweep_dir)
    return equal, lines


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
