"""Explorer of the chapter "The modern decoder": grouped-query attention and what it buys.

    GQAExplorer   key/value heads (4, 2, 1), context (64, 1024 tokens) -> which key/value head
                  each query head reads, the key/value cache's bytes per token, and the measured
                  milliseconds per generated token (sweep modern_gqa_cache)

The chapter's Llama (`llama.LlamaConfig(vocab_size=2048)`: 4 blocks, 4 query heads of d_k = 32,
width 128, float32) with n_kv_head key/value heads. Query head i reads key/value head

    g(i) = i // (n_head / n_kv_head)                  (llama.Attention, Hugging Face's repeat_kv)

and the cache keeps, for every token and every block, one key and one value per key/value head:

    bytes per token = 2 (k and v) * n_layer * n_kv_head * d_k * bytes per number

The grouping and the bytes are exact and computed here; the times are measured, read from the
committed sweep (the mean of its 3 repeats, its seeds, at each point), so every frame is known when
the explorer is built and the page switches between them with no kernel. The sweep's
``ms_per_token_kv{n}`` is the time of one generation step, which generates a token for each of the
point's ``batch`` sequences; divided here by the batch, it is the time per generated token.
"""

from __future__ import annotations

import math
import statistics

import torch
import traitlets

from ..llama import LlamaConfig
from ..pages.sweeps import Sweep, load_sweep
from .base import Explorer, _stat

__all__ = ["KV_HEAD_OPTIONS", "CONTEXT_OPTIONS", "GQA_SWEEP", "GQAExplorer", "chapter_config",
           "kv_head_of", "cache_bytes_per_token", "measured_ms_per_token", "gqa_frame"]

KV_HEAD_OPTIONS = [4, 2, 1]   # full multi-head, grouped (Llama's two groups), multi-query
CONTEXT_OPTIONS = [64, 1024]  # the sweep's points: 64 tokens of 1 sequence, 1024 of 8
GQA_SWEEP = "modern_gqa_cache"
SHORT = {4: "MHA", 2: "GQA", 1: "MQA"}


def chapter_config(n_kv_head: int) -> LlamaConfig:
    """The chapter's Llama (the sweep's model: vocabulary 2048, the other sizes LlamaConfig's
    defaults) with n_kv_head key/value heads."""
    return LlamaConfig(vocab_size=2048, n_kv_head=n_kv_head)


def kv_head_of(n_head: int, n_kv_head: int) -> list[int]:
    """g(i) = i // (n_head / n_kv_head) for each query head i: consecutive query heads share."""
    group = n_head // n_kv_head                                   # query heads per key/value head
    return [i // group for i in range(n_head)]


def cache_bytes_per_token(config: LlamaConfig, dtype=torch.float32) -> int:
    """2 (k and v) * n_layer * n_kv_head * d_k * bytes per number: what one more token adds to
    the key/value caches of all the blocks."""
    d_k = config.n_embd // config.n_head
    return 2 * config.n_layer * config.n_kv_head * d_k * torch.empty((), dtype=dtype).element_size()


def measured_ms_per_token(sweep: Sweep) -> dict[int, dict]:
    """{context: {"batch": B, "seeds": n, "ms": {n_kv_head: [ms per generated token, one per seed]}}},
    read from a modern_gqa_cache sweep; refused (naming `sweep`) if a point or value is missing.

    The sweep records the CPU ms of a generation step, one token for each of the point's B
    sequences: ms per generated token = step ms / B."""
    if not isinstance(sweep, Sweep):
        raise TypeError(f"sweep must be a course_lib.pages.sweeps.Sweep (load_sweep({GQA_SWEEP!r})), "
                        f"got {type(sweep).__name__}")
    metrics = [f"ms_per_token_kv{kv}" for kv in KV_HEAD_OPTIONS]
    missing = [m for m in metrics if m not in sweep.metrics]
    if missing:
        raise ValueError(f"sweep {sweep.name!r} has no metric {missing}: the explorer reads "
                         f"{GQA_SWEEP!r}'s {metrics}")
    measured = {}
    for context in CONTEXT_OPTIONS:
        points = sweep.select(context=context)
        if len(points) != 1 or "batch" not in points[0]:
            raise ValueError(f"sweep {sweep.name!r}: need one point of context={context} with a batch, "
                             f"found {points}")
        ms = {kv: sweep.values(m, context=context) for kv, m in zip(KV_HEAD_OPTIONS, metrics)}
        for kv, values in ms.items():
            if not values or not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0
                                     for v in values):
                raise ValueError(f"sweep {sweep.name!r}: ms_per_token_kv{kv} at context={context} must "
                                 f"be positive numbers, one per seed, got {values}")
        batch = points[0]["batch"]
        per_token = {kv: [v / batch for v in values] for kv, values in ms.items()}
        measured[context] = {"batch": batch, "seeds": len(ms[KV_HEAD_OPTIONS[0]]), "ms": per_token}
    return measured


def gqa_frame(n_kv_head: int, context: int, batch: int, ms: dict[int, list[float]]) -> dict:
    """One frame: the grouping of the chapter's Llama with n_kv_head key/value heads, the cache's
    bytes per token for every option (this one marked), and the mean measured ms per token at
    this context (`ms`: {n_kv_head: per-seed values}) for every option."""
    config = chapter_config(n_kv_head)
    groups = kv_head_of(config.n_head, n_kv_head)
    k = KV_HEAD_OPTIONS.index(n_kv_head)
    labels = [f"{kv} {SHORT[kv]}" for kv in KV_HEAD_OPTIONS]
    per_token = [cache_bytes_per_token(chapter_config(kv)) for kv in KV_HEAD_OPTIONS]
    mean = [statistics.fmean(ms[kv]) for kv in KV_HEAD_OPTIONS]
    return {
        "groups": {"matrix": [[int(g == j) for j in range(n_kv_head)] for g in groups],
                   "rows": [f"query {i}" for i in range(config.n_head)],
                   "cols": [f"kv {j}" for j in range(n_kv_head)]},
        "cache": {"values": per_token, "highlight": k, "labels": labels},
        "time": {"values": [round(v, 4) for v in mean], "highlight": k, "labels": labels},
        "stats": [
            _stat("n_kv_head", "key/value heads", n_kv_head, 0),
            _stat("group_size", "query heads per key/value head", config.n_head // n_kv_head, 0),
            _stat("cache_bytes_per_token", "cache bytes per token (all blocks)", per_token[k], 0),
            _stat("cache_kib", f"cache of {batch} × {context} tokens, KiB",
                  per_token[k] * batch * context / 2**10, 0),
            _stat("ms_per_token", f"ms per generated token, mean of {len(ms[n_kv_head])} repeats",
                  mean[k], 2),
            _stat("ms_per_token_spread", "spread of the repeats (max − min), ms",
                  max(ms[n_kv_head]) - min(ms[n_kv_head]), 2),
            _stat("speedup", "speed-up over 4 kv heads, ratio of means", mean[0] / mean[k], 2),
        ],
    }


class GQAExplorer(Explorer):
    """Move the number of key/value heads (and the context); see who shares a key/value head,
    what the cache holds per token, and how long a generated token takes.

    sweep: the committed sweep modern_gqa_cache (`load_sweep("modern_gqa_cache")`; loaded when
    None). Traits set by the controls: ``n_kv_head`` (4, 2, 1) and ``context`` (64, 1024).
    """

    n_kv_head = traitlets.Int(2).tag(sync=True)
    context = traitlets.Int(1024).tag(sync=True)

    def __init__(self, sweep=None, n_kv_head=2, context=1024, **kwargs):
        for name, value, options in (("n_kv_head", n_kv_head, KV_HEAD_OPTIONS),
                                     ("context", context, CONTEXT_OPTIONS)):
            if isinstance(value, bool) or value not in options:
                raise ValueError(f"{name}={value!r} is not one of the explorer's options {options}")
        measured = measured_ms_per_token(load_sweep(GQA_SWEEP) if sweep is None else sweep)
        controls = [
            {"name": "n_kv_head", "label": "key/value heads", "kind": "slider", "options": KV_HEAD_OPTIONS,
             "labels": [f"{kv} ({SHORT[kv]})" for kv in KV_HEAD_OPTIONS]},
            {"name": "context", "label": "context", "kind": "select", "options": CONTEXT_OPTIONS,
             "labels": [f"{c} tokens, {measured[c]['batch']} sequence{'s' * (measured[c]['batch'] > 1)}"
                        for c in CONTEXT_OPTIONS]},
        ]
        seeds = measured[CONTEXT_OPTIONS[-1]]["seeds"]
        panels = [
            {"kind": "heatmap", "key": "groups", "title": "the key/value head (columns) each query "
             "head (rows) reads: i // (n_head / n_kv_head)", "vmin": 0.0, "vmax": 1.0},
            {"kind": "bars", "key": "cache", "title": "key/value cache, bytes per token, against "
             "the key/value heads", "ymin": 0.0},
            {"kind": "bars", "key": "time", "title": f"ms per generated token at this context, mean "
             f"of {seeds} repeats (sweep {GQA_SWEEP}), against the key/value heads", "ymin": 0.0},
            {"kind": "stats", "key": "stats", "title": "this setting"},
        ]

        def frame(n_kv_head, context):
            return gqa_frame(n_kv_head, context, measured[context]["batch"], measured[context]["ms"])

        spec = self.build_spec(
            "gqa", "Grouped-query attention: 4 query heads share fewer key/value heads", controls,
            panels, frame,
            caption="The chapter's Llama (4 blocks, 4 query heads of 32 numbers, float32). 4 key/value "
                    "heads is full multi-head attention, 1 is multi-query attention. Times: CPU, one "
                    "thread, cached greedy generation, measured by the sweep, not on this page.")
        super().__init__(spec=spec, n_kv_head=n_kv_head, context=context, **kwargs)
