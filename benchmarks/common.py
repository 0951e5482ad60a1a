"""Helpers shared by the benchmark modules: records, interleaved timing, tables."""

import statistics
import time

import torch


def record(name, value, unit, baseline=None):
    ratio = value / baseline if baseline else None
    return {"name": name, "value": value, "unit": unit, "baseline": baseline, "ratio": ratio}


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
    def fmt(x):
        if x is None:
            return ""
        return f"{x:.1f}" if abs(x) >= 100 else f"{x:.3g}"

    lines = ["| name | value | unit | baseline | ratio |", "|---|---:|---|---:|---:|"]
    for r in records:
        lines.append(f"| {r['name']} | {fmt(r['value'])} | {r['unit']} | "
                     f"{fmt(r['baseline'])} | {fmt(r['ratio'])} |")
    return "\n".join(lines)
