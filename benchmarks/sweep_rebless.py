"""Re-blessing and verifying a committed sweep (``python benchmarks/sweep.py --rebless``,
``--canary``, ``--verify``): after a refactor, re-run the smoke runs and keep the sweep if its
canary is identical (here, or against the code of another commit for a sweep made on another CPU
vendor's kernels); re-run one seed per point and compare exactly. The machinery it uses is in
``sweep_run.py``.
"""

import concurrent.futures
import datetime
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# isort: off
from sweep_run import (  # first: it puts course_lib on the path and pins the kernels before torch starts
    ROOT,
    SWEEP_DIR,
    _cpu_model,
    _json,
    exact_metrics,
    git_commit,
    problems,
    run_grid,
    run_threads,
    smoke_fresh,
    the_kernels,
    write,
)
import provenance
from course_lib.pages.sweeps import SCHEMA, read_sweep
# isort: on


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
try:
    import sweep_run as sweep  # the machinery, since the command line was split from it
except ImportError:
    import sweep  # a commit before that split
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
