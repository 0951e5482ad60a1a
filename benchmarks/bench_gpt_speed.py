"""Chapter 10's speeds: the milliseconds a training step of the GPT, the course's LSTM and torch's
fused LSTM take (sweep lm_step_time: the step times behind the race's equal-time comparison,
bench_gpt.py), and the KV cache's speed-up of the GPT's generation (benchmarks/run.py).

    nice -n 10 python benchmarks/sweep.py lm_step_time --jobs 1       # ms per step, interleaved
    python benchmarks/run.py --only kv_cache                          # the KV cache's speed-up

The models are bench_gpt.build's, one torch thread a run.
"""

import time

import torch
from bench_gpt import build
from common import SweepSpec, record

from course_lib import data, train
from course_lib.gpt import GPT, GPTConfig

# ---------------------------------------------------------------------------
# Step times: the GPT, the course's LSTM and torch's fused LSTM, interleaved in one process
# ---------------------------------------------------------------------------


def step_time_run(point, seed, config):
    """Milliseconds per training step (forward, backward, AdamW) of the three models at the
    point's context, 768 characters a step: `rounds` rounds, each timing `steps` steps of every
    model in turn (the order rotates), after `warmup` untimed steps each; the median round."""
    corpus = data.char_corpus()
    context = point["context"]
    models = {}
    for name in ("gpt", "lstm_course", "lstm"):
        torch.manual_seed(seed)
        models[name] = build(name, len(corpus.vocab), context)
    B = config["tokens_per_step"] // context
    g = torch.Generator().manual_seed(seed)
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-3) for name, m in models.items()}

    def steps(name, n):
        for _ in range(n):
            loss = train.lm_loss(models[name], data.lm_batch(corpus.train, B, context, g))
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()

    times = {name: [] for name in models}
    for name in models:
        steps(name, config["warmup"])
    for r in range(config["rounds"]):
        names = list(models)[r % 3 :] + list(models)[: r % 3]
        for name in names:
            t0 = time.process_time()  # CPU time: robust to a busy machine
            steps(name, config["steps"])
            times[name].append((time.process_time() - t0) / config["steps"] * 1000)
    return {f"{name}_ms": sorted(t)[len(t) // 2] for name, t in times.items()}


SWEEPS = {
    "lm_step_time": SweepSpec(
        title="Milliseconds per training step: the GPT, the course's LSTM and torch's fused LSTM",
        run=step_time_run,
        points=[{"context": 64}, {"context": 256}],
        config={"tokens_per_step": 768, "warmup": 5, "rounds": 5, "steps": 10},
        smoke={"rounds": 1},
        metrics={
            f"{m}_ms": {"unit": "ms", "higher_is_better": False} for m in ("gpt", "lstm_course", "lstm")
        },
        description="CPU milliseconds (time.process_time) per step on one torch thread, 768 characters "
        "a step (12 windows of 64 or 3 of 256), AdamW; the "
        "three models interleaved in one process (5 rounds of 10 steps each, the order rotating; the "
        "median round). A seed is a repeat. Timings: no reproduction compares them.",
    ),
}


# ---------------------------------------------------------------------------
# The KV cache's speed-up (a benchmark of benchmarks/run.py)
# ---------------------------------------------------------------------------


def kv_cache_generate_speedup(args, tokens=500, repeats=3):
    """Generation of 500 tokens (one prompt character, batch 1) by a GPT of the capstone's shape
    with a context of 512, without and with the KV cache: median seconds of 3, interleaved; the
    value is uncached / cached. The weights are untrained: the time does not depend on them."""
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(104, block_size=tokens + 12)).eval()
    prompt = torch.zeros(1, 1, dtype=torch.long)
    times = {True: [], False: []}
    for i in range(repeats):
        for use_cache in (True, False) if i % 2 == 0 else (False, True):
            start = time.perf_counter()
            gpt.generate(prompt, tokens, use_cache=use_cache, generator=torch.Generator().manual_seed(i))
            times[use_cache].append(time.perf_counter() - start)
    cached, uncached = (sorted(times[c])[repeats // 2] for c in (True, False))
    return [
        record(
            "kv_cache_generate_speedup",
            uncached / cached,
            "x",
            tokens=tokens,
            cached_s=cached,
            uncached_s=uncached,
            threads=torch.get_num_threads(),
        ),
    ]


BENCHMARKS = [
    ("GPT: generation of 500 tokens with and without the KV cache", kv_cache_generate_speedup),
]
