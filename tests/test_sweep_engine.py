"""The sweep engine (benchmarks/engine.py under benchmarks/sweep.py): runs on a Dask cluster equal
serial runs bit for bit, a worker killed mid-run is replaced, an interrupted sweep resumes to the
same file, a failing run is named, a run recorded under other code runs again.

The cluster tests drive `sweep.py`'s command line in a fresh process, as a user does: it pins
kernels.env before torch starts (pytest itself runs on other kernels), and so do its workers.
The sweeps are benchmarks/toy_sweep.py's (seconds each)."""

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import provenance  # noqa: E402 (benchmarks/, after the sys.path line)
import sweep_run as runner  # noqa: E402
from common import SweepSpec  # noqa: E402

# sweep.py's command line, on the toy sweeps, writing to the folder argv[1] (records in its .runs/).
DRIVER = """
import sys
from pathlib import Path
sys.path[:0] = ["benchmarks"]
import sweep, toy_sweep
sweep.planned_sweeps = lambda: dict(toy_sweep.SWEEPS)
sweep.SWEEP_DIR, sweep.RUNS_DIR = Path(sys.argv[1]), Path(sys.argv[1]) / ".runs"
sys.exit(sweep.main(sys.argv[2:]))
"""


def driver(out, *args, env=None):
    """A Popen of sweep.py NAME ... writing to `out` (stdout and stderr together)."""
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(out), *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc, timeout=120):
    out, _ = proc.communicate(timeout=timeout)
    print(out[-4000:])
    return proc.returncode, out


def wait_for(condition, timeout, proc):
    """Poll `condition()` until true; fail if `proc` ends or `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended first: {finish(proc)[1][-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"not within {timeout} s: {finish(proc)[1][-2000:]}")
        time.sleep(0.1)


def sweep_file(out, name="toy_engine"):
    return json.loads((Path(out) / f"{name}.json").read_text())


@pytest.mark.slow  # a serial sweep, then a LocalCluster of 2 workers, one killed (about 25 s)
def test_a_worker_killed_mid_run_is_replaced_and_the_file_equals_a_serial_sweeps(tmp_path):
    """One run waits to be killed (SWEEP_TOY_KILL); the test SIGKILLs its worker process; Dask
    runs its task again on a worker; the file equals the serial sweep's, bit for bit, but for
    the fields that describe the execution (sweep.EXECUTION, each run's seconds)."""
    code, _ = finish(driver(tmp_path / "serial", "toy_engine", "--serial"))
    assert code == 0
    kill = tmp_path / "kill"
    kill.mkdir()
    proc = driver(tmp_path / "cluster", "toy_engine", "--jobs", "2", env={"SWEEP_TOY_KILL": f"{kill}:80:1"})
    wait_for(lambda: any(kill.glob("*.pid")), 90, proc)
    pid = int(next(kill.glob("*.pid")).read_text())
    worker = psutil.Process(pid)
    assert worker.ppid() == proc.pid, "the waiting run is not in a worker of this sweep's LocalCluster"
    os.kill(pid, signal.SIGKILL)
    code, out = finish(proc)
    assert code == 0 and not worker.is_running()
    assert len(list(kill.glob("*.pid"))) == 1  # the second attempt ran
    serial, cluster = sweep_file(tmp_path / "serial"), sweep_file(tmp_path / "cluster")
    print("errors:", [r["results"]["error"] for r in cluster["runs"]])
    assert runner.comparable(cluster) == runner.comparable(serial)
    assert cluster["machine"]["runs_side_by_side"] == 2 and serial["machine"]["runs_side_by_side"] == 1
    assert "[6/6 done, 0 running, 0 left;" in out and "s per run, about" in out and "dashboard: " in out


@pytest.mark.slow  # an interrupted sweep on a LocalCluster, its resumption, a serial sweep (about 25 s)
def test_an_interrupted_sweep_resumes_to_the_same_file(tmp_path):
    """The sweep's process is SIGKILLed once 2 of its 6 runs are recorded; run again, it runs only
    the missing runs (the records' two-second runs are kept: SWEEP_TOY_SLEEP) and writes the file
    an uninterrupted sweep writes."""
    runs = tmp_path / "resumed" / ".runs" / "toy_engine"
    proc = driver(tmp_path / "resumed", "toy_engine", "--jobs", "1", env={"SWEEP_TOY_SLEEP": "2"})
    wait_for(lambda: len(list(runs.glob("*.json"))) >= 2, 90, proc)
    workers = psutil.Process(proc.pid).children(recursive=True)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    _, alive = psutil.wait_procs(workers, timeout=20)
    for p in alive:  # a worker of the killed sweep that outlived it (reported below)
        p.kill()
    assert not alive, f"workers outlived the killed sweep: {alive}"
    assert not (tmp_path / "resumed" / "toy_engine.json").exists()
    kept = {p.name: json.loads(p.read_text()) for p in runs.glob("*.json")}
    assert 2 <= len(kept) < 6, sorted(kept)
    code, out = finish(driver(tmp_path / "resumed", "toy_engine", "--serial"))
    assert code == 0
    assert f"6 runs: {len(kept)} recorded earlier under this code, 0 recorded under other code" in out
    code, _ = finish(driver(tmp_path / "uninterrupted", "toy_engine", "--serial"))
    assert code == 0
    resumed, uninterrupted = sweep_file(tmp_path / "resumed"), sweep_file(tmp_path / "uninterrupted")
    assert runner.comparable(resumed) == runner.comparable(uninterrupted)
    reused = [r for r in resumed["runs"] if r["seconds"] >= 2.0]  # slept: made before the kill
    assert sorted((json.dumps(r["point"]), r["seed"]) for r in reused) == sorted(
        (json.dumps(r["point"]), r["seed"]) for r in kept.values()
    )
    assert resumed["wall_seconds"] >= sum(r["seconds"] for r in kept.values())


@pytest.mark.slow  # a LocalCluster of 2 workers (about 12 s)
def test_a_failing_run_is_named_the_others_finish_and_the_sweep_exits_1(tmp_path):
    code, out = finish(driver(tmp_path, "toy_engine_fails", "--jobs", "2"))
    failed = "{'steps': 40, 'raise_on_seed': 1} seed 1: ValueError: toy failure"
    assert code == 1 and "sweep toy_engine_fails: 1 run(s) failed:" in out and failed in out
    assert not (tmp_path / "toy_engine_fails.json").exists()
    records = [json.loads(p.read_text()) for p in (tmp_path / ".runs" / "toy_engine_fails").glob("*.json")]
    assert sorted((r["point"].get("raise_on_seed", -1), r["seed"]) for r in records) == [
        (-1, 0),
        (-1, 1),
        (-1, 2),
        (1, 0),
        (1, 2),
    ]
    assert {r["kernels"]["aten"] for r in records} == {"AVX2"}  # kernels.env, in the workers


# --- per-run records, in this process (serial) ---------------------------------------

RECIPE = """
import torch

SCALE = 2.0


def run(point, seed, config):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 3, generator=g)
    y = SCALE * x.sum(1, keepdim=True)
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for _ in range(point["steps"]):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"error": loss.item()}
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A recipe module in tmp_path/benchmarks (a repository of its own for provenance) and its spec."""
    (tmp_path / "benchmarks").mkdir()
    name = f"toy_records_{abs(hash(str(tmp_path))) % 10**8}"
    path = tmp_path / "benchmarks" / f"{name}.py"
    path.write_text(RECIPE)
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "benchmarks"))
    spec = SweepSpec(
        title="Toy",
        run=importlib.import_module(name).run,
        points=[{"steps": 20}, {"steps": 40}],
        config={"lr": 0.1},
        metrics={"error": {"unit": "MSE", "higher_is_better": False}},
        smoke={"steps": 3},
        margins={"error": 0.01},
    )
    yield spec, path, tmp_path / "sweeps"
    sys.modules.pop(name, None)


def test_a_record_is_reused_under_the_same_code_and_run_again_under_other_code(toy, capsys):
    spec, path, out = toy
    first = runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    records = sorted((out / ".runs" / "toy").glob("*.json"))
    assert len(records) == 6 and (out / ".runs" / ".gitignore").read_text().endswith("*\n")
    record = json.loads(records[0].read_text())
    record["results"]["error"] = 123.0  # a planted value: reused, it shows in the file
    records[0].write_text(json.dumps(record))
    assert 123.0 in runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out).values("error", **record["point"])
    assert (
        "6 runs: 6 recorded earlier under this code, 0 recorded under other code" in capsys.readouterr().out
    )
    # a refactor that changes no number is other code for the records: every run runs again
    path.write_text(RECIPE.replace("opt = ", "optimizer = ").replace("opt.", "optimizer."))
    spec.run = importlib.reload(sys.modules[spec.run.__module__]).run
    again = runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    assert (
        "6 runs: 0 recorded earlier under this code, 6 recorded under other code" in capsys.readouterr().out
    )
    assert runner.comparable(again.data) != runner.comparable(first.data)  # the provenance differs
    assert [r["results"] for r in again.runs] == [r["results"] for r in first.runs]
    assert json.loads(records[0].read_text())["results"]["error"] != 123.0


def test_a_record_of_another_config_is_not_reused(toy, capsys):
    spec, _, out = toy
    runner.run_sweep("toy", spec, [0, 1], out_dir=out)
    spec.config = {"lr": 0.05}
    runner.run_sweep("toy", spec, [0, 1], out_dir=out)
    assert (
        "4 runs: 0 recorded earlier under this code, 4 recorded under other code" in capsys.readouterr().out
    )


def test_the_wall_time_of_a_resumed_sweep_adds_its_sessions():
    import engine

    now = time.time()
    records = [
        {"session": "a", "session_start": now - 100, "finished": now - 90},
        {"session": "a", "session_start": now - 100, "finished": now - 80},  # a: 20 s
        {"session": "b", "session_start": now - 10, "finished": now - 5},  # b (this one): to now
    ]
    assert engine.wall_seconds(records, {"id": "b", "start": now - 10}) == pytest.approx(30, abs=0.5)


@pytest.mark.slow  # a scheduler and a worker started from the command line, a sweep on them (about 20 s)
def test_a_sweep_runs_on_an_existing_scheduler_whose_workers_load_the_preload(tmp_path):
    """`dask scheduler` and `dask worker`, both with `--preload benchmarks/sweep_worker.py`, the
    worker started with other kernels in its environment (as on a cluster's nodes): the preload
    pins kernels.env before torch starts, so `sweep.py NAME --scheduler FILE` gives the serial
    sweep's file."""
    dask = Path(sys.executable).parent / "dask"
    other = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}
    address = tmp_path / "scheduler.json"
    started = [
        subprocess.Popen(
            [dask, "scheduler", "--scheduler-file", address, "--port", "0", "--dashboard-address", ":0"]
            + ["--preload", "benchmarks/sweep_worker.py"],
            cwd=ROOT,  # the preload finds the checkout here
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not address.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        started.append(
            subprocess.Popen(
                [dask, "worker", "--scheduler-file", address, "--nthreads", "1", "--nworkers", "1"]
                + ["--preload", "benchmarks/sweep_worker.py"],
                cwd=ROOT,  # the preload finds the checkout here
                env={**os.environ, **other},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        code, out = finish(driver(tmp_path / "remote", "toy_engine", "--scheduler", str(address)))
        assert code == 0 and "1 Dask worker(s), 1 thread(s), on the scheduler" in out
    finally:
        for proc in reversed(started):
            proc.terminate()
            proc.wait(timeout=30)
    code, _ = finish(driver(tmp_path / "serial", "toy_engine", "--serial"))
    assert code == 0
    remote, serial = sweep_file(tmp_path / "remote"), sweep_file(tmp_path / "serial")
    assert runner.comparable(remote) == runner.comparable(serial)
