"""Self-attention against recurrent layers: time per forward pass, and where the times cross.

The chapter "Self-attention" shows the same measurement as an illustration (glued numbers, no
asserts on time); this module keeps the numbers of one run, with more repeats, in results.json.
One CPU thread, batch 1, width d = 64, forward pass under no_grad, the fastest of `repeats` runs
after a warm-up run (the minimum is the run least disturbed by other programs). The whole
measurement runs in ROUNDS rounds, one after the other: the times per length are the fastest over
the rounds, and the crossing of attention and the RNN is recorded per round (its median, with
min and max), because it moves from one round to the next (chapter 6 shows why).
"""

import math
import statistics
import time
import warnings

import torch
import torch.nn as nn
from common import record

from course_lib.multihead import MultiHeadAttention

LENGTHS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
D = 64
ROUNDS = 3


def fastest_ms(f, repeats):
    """Milliseconds of the fastest of `repeats` calls, after one warm-up call."""
    f()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def attention_madds(n, d):
    """W^Q, W^K, W^V, W^O (4 n d^2) + scores and weighted sum (2 n^2 d)."""
    return 4 * n * d * d + 2 * n * n * d


def crossing(ns, a, b):
    """The n at which time a overtakes time b, interpolated log-log between measured lengths."""
    for n0, n1, a0, a1, b0, b1 in zip(ns, ns[1:], a, a[1:], b, b[1:]):
        r0, r1 = math.log(a0 / b0), math.log(a1 / b1)
        if r0 < 0 <= r1:
            return math.exp(math.log(n0) + r0 / (r0 - r1) * (math.log(n1) - math.log(n0)))
    return float("nan")


def attention_vs_rnn(args):
    """Forward times of one self-attention layer (with W^O), nn.RNN and nn.LSTM, d = 64, 1 thread."""
    repeats = 3 if args.quick else 15
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = {
        "attention": MultiHeadAttention(D, num_heads=1).eval(),
        "rnn": nn.RNN(D, D, batch_first=True).eval(),
        "lstm": nn.LSTM(D, D, batch_first=True).eval(),
    }
    rounds = [{name: [] for name in layers} for _ in range(ROUNDS)]
    try:
        with torch.no_grad():
            for times in rounds:
                for n in LENGTHS:
                    x = torch.randn(1, n, D)
                    times["attention"].append(fastest_ms(lambda x=x: layers["attention"](x, x, x), repeats))
                    times["rnn"].append(fastest_ms(lambda x=x: layers["rnn"](x), repeats))
                    times["lstm"].append(fastest_ms(lambda x=x: layers["lstm"](x), repeats))
            x, w = torch.randn(4096, D), torch.randn(D, D)
            madds_per_s = 4096 * D * D / (fastest_ms(lambda: x @ w, repeats) / 1e3)
            x = torch.randn(1, 1024, D)
            fused = fastest_ms(lambda x=x: layers["lstm"](x), repeats)
            with warnings.catch_warnings(), torch.backends.mkldnn.flags(enabled=False):
                warnings.simplefilter("ignore")
                stepwise = fastest_ms(lambda x=x: layers["lstm"](x), repeats)
    finally:
        torch.set_num_threads(threads)
    best = {name: [min(r[name][i] for r in rounds) for i in range(len(LENGTHS))] for name in layers}
    records = []
    for i, n in enumerate(LENGTHS):
        records.append(
            record(f"self_attention_forward_ms/n{n}", best["attention"][i], "ms", baseline=best["rnn"][i])
        )
        records.append(record(f"lstm_forward_ms/n{n}", best["lstm"][i], "ms", baseline=best["rnn"][i]))
    step_us = 1e3 * best["rnn"][-1] / LENGTHS[-1]
    attention_per_s = attention_madds(LENGTHS[-1], D) / (best["attention"][-1] / 1e3)
    predicted = (step_us * 1e-6 * attention_per_s - 4 * D * D) / (2 * D)
    measured = [crossing(LENGTHS, r["attention"], r["rnn"]) for r in rounds]
    found = sorted(c for c in measured if not math.isnan(c))
    records += [
        record("rnn_step_us", step_us, "µs", baseline=1e6 * 2 * D * D / madds_per_s),
        record("matmul_gmadds_per_s", madds_per_s / 1e9, "G multiply-adds/s"),
        record("self_attention_gmadds_per_s/n4096", attention_per_s / 1e9, "G multiply-adds/s"),
        record("attention_rnn_crossing_n/predicted", predicted, "tokens"),
        record(
            "attention_rnn_crossing_n/measured",
            statistics.median(found) if found else float("nan"),
            "tokens",
            std=statistics.stdev(found) if len(found) > 1 else None,
            min=found[0] if found else None,
            max=found[-1] if found else None,
            n=len(found),
            rounds=measured,
        ),
        record("lstm_forward_ms/n1024_stepwise", stepwise, "ms", baseline=fused),
    ]
    return records


BENCHMARKS = [
    (
        "Self-attention vs RNN and LSTM: forward ms (baseline: nn.RNN), crossing per round, per-step "
        "overhead (CPU, 1 thread, d = 64, min over repeats and rounds)",
        attention_vs_rnn,
    ),
]
