"""Helpers shared by the benchmark modules: records, interleaved timing, tables, sweeps."""

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch


def record(name, value, unit, baseline=None, **extra):
    """A results.json record {"name", "value", "unit", "baseline", "ratio"} (+ optional fields)."""
    ratio = value / baseline if baseline else None
    return {"name": name, "value": value, "unit": unit, "baseline": baseline, "ratio": ratio, **extra}


@dataclass
class SweepSpec:
    """A sweep registered in a topic's SWEEPS = {name: SweepSpec(...)} (run by benchmarks/sweep.py).

    run(point, seed, config) -> {metric: value} trains and evaluates one configuration with one
    seed. points: the grid, a list of dicts of JSON values (each passed to run). config: the
    settings shared by all points (JSON). metrics: {metric: {"unit": ..., "higher_is_better":
    bool}}; a metric in seconds ("s", "ms") is a timing, which no reproduction compares.
    margins: {name: value}, the margins the chapter's claims on this sweep use, declared here
    before the sweep runs (a changed margin makes the sweep stale). smoke: overrides of point or
    config keys that make a run short (e.g. {"steps": 8}); the traced smoke run records which
    code the sweep executes and its canary. version: raise it to make the sweep stale on purpose.
    records: [(metric, name format)] for results.json, e.g. [("bpc", "charlm_heldout_bpc/{kind}")].
    selection_for: "" for a sweep that supports claims (>= 3 seeds); for a selection-only sweep,
    the name of the sweep whose points it chooses (e.g. a one-seed grid that picks each model's
    learning rate on validation). Such a sweep may run fewer seeds; its file supports no claim: no
    chapter loads it, it has no records, and the sweep it names reports with >= 3 seeds
    (tests/test_evidence_sweeps.py).
    """

    title: str
    run: Callable
    points: list
    config: dict
    metrics: dict
    smoke: dict
    margins: dict = field(default_factory=dict)
    seeds: list = field(default_factory=lambda: [0, 1, 2])
    records: list = field(default_factory=list)
    description: str = ""
    version: int = 1
    selection_for: str = ""


def sweep_records(spec, sweep):
    """results.json records of a committed sweep: value = mean over seeds, with its spread
    (std, min, max, n) and the sweep's name; one record per (point, records entry)."""
    out = []
    for metric, name_format in spec.records:
        for point in sweep.points:
            s = sweep.summary(metric, **point)
            out.append(
                record(
                    name_format.format(**point),
                    s.mean,
                    sweep.metrics[metric].get("unit", ""),
                    std=s.std,
                    min=s.min,
                    max=s.max,
                    n=s.n,
                    sweep=sweep.name,
                )
            )
    return out


def fwd_bwd_ms(attention, q, k, v, grad_out):
    """Milliseconds for one forward and backward pass of `attention(q, k, v)`."""
    start = time.perf_counter()
    out = attention(q, k, v)
    out = out[0] if isinstance(out, tuple) else out  # ours also returns the weights
    torch.autograd.grad(out, (q, k, v), grad_out)
    return (time.perf_counter() - start) * 1e3


def compare_ms(ours, theirs, inputs, repeats, warmup=2):
    """Median ms of `ours` and `theirs`, timed alternately on the same inputs."""
    times = {ours: [], theirs: []}
    for i in range(warmup + repeats):
        order = (ours, theirs) if i % 2 == 0 else (theirs, ours)
        for fn in order:
            ms = fwd_bwd_ms(fn, *inputs)
            if i >= warmup:
                times[fn].append(ms)
    return statistics.median(times[ours]), statistics.median(times[theirs])


def markdown_table(records):
    """One Markdown table; a spread column (± std, [min, max], n seeds) when a record has one."""

    def fmt(x):
        if x is None:
            return ""
        return f"{x:.1f}" if abs(x) >= 100 else f"{x:.3g}"

    spread = any("n" in r for r in records)
    head = "| name | value | unit | baseline | ratio |" + (" spread over seeds |" if spread else "")
    lines = [head, "|---|---:|---|---:|---:|" + ("---|" if spread else "")]
    for r in records:
        line = f"| {r['name']} | {fmt(r['value'])} | {r['unit']} | {fmt(r['baseline'])} | {fmt(r['ratio'])} |"
        if spread and "n" in r:
            line += f" ± {fmt(r['std'])} [{fmt(r['min'])}, {fmt(r['max'])}], n={r['n']} |"
        elif spread:
            line += " |"
        lines.append(line)
    return "\n".join(lines)
