"""Sweeps of a few seconds for the engine's tests (tests/test_sweep_engine.py): not registered
(benchmarks/sweep.py reads SWEEPS from bench_*.py only), and their results are never committed.

A small MLP fitted by SGD to a random linear map; error = its final training MSE, to every bit,
which depends on the order of the floating-point sums of the matrix products and reductions, so a
run on other kernels, or one that is not a pure function of (point, seed), shows.

Three hooks for the tests, inert in a normal run (none changes a number):
  point {"raise_on_seed": s}     the run with seed s raises (a failing run)
  SWEEP_TOY_SLEEP=SECONDS        every full run sleeps that long first (a sweep to interrupt)
  SWEEP_TOY_KILL=DIR:STEPS:SEED  the first attempt of that run writes DIR/<pid>.pid and waits to
                                 be killed; a later attempt sees the file and runs normally
"""

import os
import time
from pathlib import Path

import torch
from common import SweepSpec


def fit(steps, width, lr, seed):
    """A 8 -> width -> 1 tanh MLP fitted by full-batch SGD to y = x w* (256 samples); final MSE."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 8, generator=g)  # (256, 8)
    y = x @ torch.randn(8, 1, generator=g)  # (256, 1)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.Tanh(), torch.nn.Linear(width, 1))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def _wait_to_be_killed(point, seed):
    """The SWEEP_TOY_KILL hook: on the first attempt of the named run, wait to be killed."""
    folder, steps, target = os.environ.get("SWEEP_TOY_KILL", "::").split(":")
    if not folder or (point["steps"], seed) != (int(steps), int(target)):
        return
    if any(Path(folder).glob("*.pid")):
        return  # an earlier attempt was killed: run
    tmp = Path(folder) / f"{os.getpid()}.tmp"
    tmp.write_text(str(os.getpid()))
    os.replace(tmp, tmp.with_suffix(".pid"))
    time.sleep(120)
    raise RuntimeError("SWEEP_TOY_KILL: this worker was not killed within 120 s")


def run(point, seed, config):
    if point.get("raise_on_seed") == seed:
        raise ValueError(f"toy failure for {point}, seed {seed}")
    _wait_to_be_killed(point, seed)
    time.sleep(float(os.environ.get("SWEEP_TOY_SLEEP", 0)) if point["steps"] > 10 else 0)
    return {"error": fit(point["steps"], config["width"], config["lr"], seed)}


def spec(points=({"steps": 40}, {"steps": 80}), seeds=(0, 1, 2)):
    return SweepSpec(
        title="Toy: an MLP fitted to a linear map",
        run=run,
        points=[dict(p) for p in points],
        config={"width": 32, "lr": 0.05},
        metrics={"error": {"unit": "MSE", "higher_is_better": False}},
        smoke={"steps": 3},
        margins={"error": 0.01},
        seeds=list(seeds),
    )


SWEEPS = {
    "toy_engine": spec(),
    "toy_engine_fails": spec(points=({"steps": 40}, {"steps": 40, "raise_on_seed": 1})),
}
