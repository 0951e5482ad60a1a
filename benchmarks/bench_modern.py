"""Chapter 12 (the modern decoder): sweeps declared before they run. They are in PLANNED (designed,
no data yet; benchmarks/sweep.py runs them like registered ones) and move to SWEEPS with their
committed files. The race of chapter 10 settled on its own evidence is in bench_race.py, which
reuses this module's run function. The plan, costs, order and commands: benchmarks/PLAN_ch12.md.

modern_ablation: GPT-2's block, then one change at a time (RMSNorm, rotary positions, SwiGLU, no
biases, grouped-query attention), then all together (course_lib.llama.Llama), on chapter 11's
BPE-2048 tokens, each at its learning rate chosen on validation, reported on test.
modern_gqa_cache: what grouped-query attention is for: the bytes of the key/value cache and the
milliseconds per generated token, n_kv_head = 1, 2, 4 (quality: modern_ablation's llama points).

One run function (`decoder_run`) serves all the training sweeps: a model from `decoder` (GPT-2's
block, with one module of llama.py swapped in, or course_lib.llama.Llama: `ablation_run`) or
from bench_race.race_model (the GPT of course_lib.gpt, the Llama, chapter 10's LSTM),
trained by train.train_lm with GPT_RECIPE's AdamW, warm-up and cosine decay to
lr_end_fraction * lr (nanoGPT's min_lr = lr / 10, as chapter 10's annealed race_run),
scored by bpe.bits_per_char on the tokens of bench_tokens.token_corpus.
"""

import dataclasses
import statistics
import time
from pathlib import Path

import torch
import torch.nn as nn
from bench_gpt import buckets, loss_by_position
from bench_tokens import token_corpus
from common import SweepSpec

from course_lib import bpe, llama, train
from course_lib.gpt import GPT, GPTConfig
from course_lib.llama import Llama, LlamaConfig
from course_lib.pages.sweeps import read_sweep

CONTEXT = 64  # tokens a window: chapter 10's and chapter 11's context
N_KV_HEAD = 2  # grouped-query attention: the 4 query heads share 2 key/value heads

# ---------------------------------------------------------------------------
# The models: GPT-2's block with one of llama.py's modules swapped in
# ---------------------------------------------------------------------------


class NoPositions(nn.Module):
    """Stands in for the GPT's learned position table when rotary positions replace it: adds
    nothing to the token embeddings. forward(pos (T,)) -> zeros (T, C)."""

    def __init__(self, n_embd):
        super().__init__()
        self.n_embd = n_embd

    def forward(self, pos):
        return torch.zeros(len(pos), self.n_embd)  # (T, C)


class LearnedPositionAttention(llama.Attention):
    """llama.Attention (grouped key/value heads) without the rotary positions: the GPT's learned
    position table stays in the embeddings, so grouped-query attention is the only change."""

    def qkv(self, x, start=0):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_head, self.d_k).transpose(1, 2)  # (B, h, T, d_k)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.d_k).transpose(1, 2)  # (B, h_kv, T, d_k)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.d_k).transpose(1, 2)
        return q, k, v


def with_biases(module):
    """Give every bias-free nn.Linear in `module` a bias, at zero (GPT-2's initial bias): llama.py's
    modules have none, GPT-2's block has them, and a one-change ablation keeps the rest as it was."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear) and layer.bias is None:
            layer.bias = nn.Parameter(torch.zeros(layer.out_features))
    return module


def gpt_init(module, n_layer):
    """gpt.py's initialisation of a module swapped into a GPT: N(0, 0.02) weights, zero biases, the
    residual projections (llama.py's o_proj and down_proj) at 0.02 / sqrt(2 n_layer)."""
    module.apply(GPT._init_weights)
    for name, p in module.named_parameters():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            nn.init.normal_(p, mean=0.0, std=0.02 / (2 * n_layer) ** 0.5)
    return module


# GPT-2's block (gpt.py with bias=True), then one change at a time, then all of them (llama.py).
ABLATION = {
    "gpt2": "GPT-2's block: LayerNorm, learned positions, GELU MLP of width 4C, biases, full attention",
    "gpt2+rmsnorm": "RMSNorm (llama.RMSNorm) for each LayerNorm",
    "gpt2+rope": "rotary positions on q and k (llama.Attention, n_kv_head = n_head, biases kept), "
    "no position table",
    "gpt2+swiglu": "SwiGLU (llama.MLP, width llama.swiglu_hidden(C) = 341, biases kept) for the GELU MLP",
    "gpt2-bias": "no biases (gpt.py's default, bias=False: chapter 10's capstone GPT)",
    "gpt2+gqa": f"grouped-query attention, {N_KV_HEAD} key/value heads for 4 query heads (biases and "
    "learned positions kept)",
    "llama": f"all together: course_lib.llama.Llama, n_kv_head={N_KV_HEAD}",
    "llama_mha": "all but grouped queries: Llama with n_kv_head = n_head = 4",
    "llama_mqa": "all, multi-query: Llama with n_kv_head = 1",
}
LLAMA_KV_HEADS = {"llama": N_KV_HEAD, "llama_mha": 4, "llama_mqa": 1}


def decoder(variant, vocab_size, context=CONTEXT, dropout=0.0):
    """The decoder `variant` (a key of ABLATION) at the capstone's sizes (4 blocks, 4 heads, width
    128, context 64, tied embeddings), seeded by the caller."""
    if variant not in ABLATION:
        raise ValueError(f"variant must be one of {list(ABLATION)}, got {variant!r}")
    if variant.startswith("llama"):
        kv = LLAMA_KV_HEADS[variant]
        return Llama(LlamaConfig(vocab_size, block_size=context, n_kv_head=kv, dropout=dropout))
    model = GPT(GPTConfig(vocab_size, block_size=context, dropout=dropout, bias=variant != "gpt2-bias"))
    t, L = model.transformer, model.config.n_layer
    modern = LlamaConfig(
        vocab_size,
        block_size=context,
        dropout=dropout,
        n_kv_head=N_KV_HEAD if variant == "gpt2+gqa" else None,
    )
    for block in t.h:
        if variant == "gpt2+rmsnorm":
            block.ln_1, block.ln_2 = (
                llama.RMSNorm(modern.n_embd, modern.norm_eps),
                llama.RMSNorm(modern.n_embd, modern.norm_eps),
            )
        elif variant == "gpt2+rope":
            block.attn = gpt_init(with_biases(llama.Attention(modern)), L)
        elif variant == "gpt2+swiglu":
            block.mlp = gpt_init(with_biases(llama.MLP(modern)), L)
        elif variant == "gpt2+gqa":
            block.attn = gpt_init(with_biases(LearnedPositionAttention(modern)), L)
    if variant == "gpt2+rmsnorm":
        t.ln_f = llama.RMSNorm(modern.n_embd, modern.norm_eps)
    if variant == "gpt2+rope":
        t.wpe = NoPositions(modern.n_embd)
    return model


# ---------------------------------------------------------------------------
# One run: a model trained, annealed, scored in bits per character
# ---------------------------------------------------------------------------

EVALS = 8  # validation at every eighth of the budget (the last is the end)


def decoder_run(point, seed, config, make):
    """One model, make(point["model"], vocab_size, context, dropout), trained point["steps"] steps
    on the point's tokens (windows of config["context"], config["tokens_per_step"] tokens a step)
    with GPT_RECIPE's AdamW, a warm-up of config["warmup"] steps and a cosine decay from point["lr"]
    to config["lr_end_fraction"] of it, dropout point.get("dropout", 0) -> bits per character on
    the validation text at every eighth of the budget (val_bpc_1 .. val_bpc_8 = val_bpc) and on the
    test text at the end, the test text's nats per token by position in the window (fresh
    windows), the parameters, the passes over the training text and the CPU seconds."""
    corpus, vocab_size, chars = token_corpus(point["tokenizer"])
    context, steps = config["context"], point["steps"]
    if steps % EVALS:
        raise ValueError(f"steps={steps} must be a multiple of {EVALS} (validation at every eighth)")
    torch.manual_seed(seed)
    model = make(point["model"], vocab_size, context, point.get("dropout", 0.0))
    recipe = dataclasses.replace(
        train.GPT_RECIPE,
        batch_size=config["tokens_per_step"] // context,
        seq_len=context,
        lr=point["lr"],
        min_lr=point["lr"] * config["lr_end_fraction"],
        warmup=config["warmup"],
    )
    start = time.process_time()  # CPU seconds: other processes do not count
    history = train.train_lm(
        model,
        corpus,
        steps,
        recipe,
        seed=seed,
        eval_every=steps // EVALS,
        eval_fn=lambda m: bpe.bits_per_char(m, corpus.val, chars, context),
        progress=False,
    )
    seconds = time.process_time() - start
    results = {f"val_bpc_{i + 1}": value for i, (_, value) in enumerate(history.evals)}
    results["val_bpc"] = results[f"val_bpc_{EVALS}"]
    model.eval()
    results["test_bpc"] = bpe.bits_per_char(model, corpus.test, chars, context)
    with torch.no_grad():
        by_position = loss_by_position(model, corpus.test, context)  # (context,) nats per token
    for lo, hi in buckets(context):
        results[f"test_nats_pos{lo}"] = by_position[lo:hi].mean().item()
    results["params"] = train.count_parameters(model)
    results["epochs"] = steps * recipe.batch_size * context / len(corpus.train)
    results["cpu_seconds"] = seconds
    return results


def ablation_run(point, seed, config):
    """decoder_run of an ablation variant (`decoder`)."""
    return decoder_run(point, seed, config, decoder)


def run_metrics(context=CONTEXT):
    bits = {"unit": "bits/char", "higher_is_better": False}
    return {
        **{f"val_bpc_{i}": bits for i in range(1, EVALS + 1)},
        "val_bpc": bits,
        "test_bpc": bits,
        **{
            f"test_nats_pos{lo}": {"unit": "nats/token", "higher_is_better": False}
            for lo, _ in buckets(context)
        },
        "params": {"unit": "parameters", "higher_is_better": False},
        "epochs": {"unit": "passes over the training text", "higher_is_better": False},
        "cpu_seconds": {"unit": "s", "higher_is_better": False},
    }


RUN_CONFIG = {"context": CONTEXT, "tokens_per_step": 768, "warmup": 100, "lr_end_fraction": 0.1}

# ---------------------------------------------------------------------------
# modern_ablation (declared 2026-12-07, before its run)
# ---------------------------------------------------------------------------
# Budget: chapter 11's 1350 steps of 12 windows of 64 BPE-2048 tokens (tokens_gpt: 9 passes over
# the 115,765 training tokens), no dropout, annealed to lr / 10. Grid: 0.002, 0.004, 0.008 for every
# variant (tokens_gpt: the capstone GPT's best on BPE-2048 was 0.004, 0.008 worse by 0.30 bits on
# validation, mean of 3 seeds).
# Measured step times (one thread, PLAN_ch12.md): see ABLATION_COST below.
ABLATION_LRS = (2e-3, 4e-3, 8e-3)
ABLATION_STEPS = 1352  # 1350, chapter 11's budget, rounded to a multiple of 8 (validation every eighth)
ABLATION_COST = (
    "Cost, measured before the run (2026-12-07, one torch thread, pinned kernels, CPU time of 200 steps "
    "after 10 untimed, on the 2-core AMD EPYC shared with other jobs at a load average of 6 to 12, so "
    "upper bounds): 87-98 ms a step on BPE-2048 (gpt2-bias and gpt2+gqa 87, gpt2 98, llama_mha 98), "
    "0.3 s a validation pass; 81 runs of about 132 CPU seconds: about 3.0 CPU-hours."
)

PLANNED = {
    "modern_ablation": SweepSpec(
        title="The modern decoder on BPE-2048 tokens: GPT-2's block, one change at a time, all together "
        "(Llama, 2, 4 or 1 key/value heads), 1352 annealed steps, learning rates 0.002, 0.004, 0.008",
        run=ablation_run,
        points=[
            {"model": v, "tokenizer": "bpe-2048", "lr": lr, "steps": ABLATION_STEPS}
            for v in ABLATION
            for lr in ABLATION_LRS
        ],
        config=RUN_CONFIG,
        smoke={"steps": 8},
        margins={"change": 0.02},
        metrics=run_metrics(),
        records=[("test_bpc", "modern_ablation_test_bpc/{model}/lr{lr}")],
        description="Chapter 11's tokens (byte-level BPE with a vocabulary of 2048, learned on the training "
        "split; bench_tokens.token_corpus) and sizes (4 blocks, 4 heads, width 128, context 64 tokens, "
        "tied embeddings). Variants: "
        + "; ".join(f"{k}: {v}" for k, v in ABLATION.items())
        + ". Each single change swaps llama.py's module into gpt.py's GPT with GPT-2's biases added at "
        "zero and gpt.py's initialisation, so that it is the only difference (bench_modern.decoder). "
        "SwiGLU's width 2/3 * 4C keeps the MLP's parameters (llama.swiglu_hidden); grouped-query "
        "attention and the missing position table remove parameters (recorded: params). Trained by "
        "train.train_lm: GPT_RECIPE (AdamW, betas 0.9/0.99, weight decay 0.1 on the matrices, 100 "
        "warm-up steps, clipping 1), batches of 12 windows of 64 tokens, a cosine decay to lr / 10, "
        "1352 steps (chapter 11's 1350 to a multiple of 8), no dropout. Bits per character "
        "(bpe.bits_per_char) on the validation text at every eighth of the run and on the test text "
        "at the end. Declared before the run: each variant at its learning rate chosen on validation "
        "(lowest mean over the seeds), reported on test; a change helps (or hurts) when the worst "
        "seed of one beats the best seed of the other by the margin 'change' (0.02 bits per "
        "character); otherwise no difference beyond the margin, said with "
        "evidence.no_robust_difference and the smallest difference the seeds could detect. A rate "
        "chosen at an edge of the grid is extended by a factor of 2 in a sweep declared then "
        "(as tokens_gpt_lr8) before the chapter claims anything about that variant. 3 seeds. "
        + ABLATION_COST,
    ),
}

# ---------------------------------------------------------------------------
# modern_gqa_cache (declared 2026-12-07, before its run): what grouped-query attention buys
# ---------------------------------------------------------------------------
GQA_KV_HEADS = (4, 2, 1)  # full multi-head, grouped (2 groups), multi-query


def gqa_cache_run(point, seed, config):
    """The Llama of modern_ablation's sizes with n_kv_head = 4, 2, 1 (weights from `seed`,
    untrained: neither the cache nor the time depends on the weights) -> for each: the key/value
    cache's bytes per token once it holds point["context"] tokens of point["batch"] sequences; the
    CPU milliseconds of a training step (AdamW) on point["batch"] random windows of the context; and
    the CPU milliseconds per step of cached greedy generation (Llama.generate) of context - 1
    steps after a one-token prompt: each step generates a token for each of the batch's sequences
    (the metric's name, ms_per_token, says "token" for the step: chapter 12 divides it by the
    batch). The three models interleaved: config["rounds"] rounds, the
    order rotating, each timing config["train_steps"] training steps then one generation of every
    model; the median round."""
    context, batch, V = point["context"], point["batch"], config["vocab_size"]
    models = {}
    for kv in GQA_KV_HEADS:
        torch.manual_seed(seed)
        models[kv] = Llama(LlamaConfig(V, block_size=context, n_kv_head=kv))
    optimizers = {kv: torch.optim.AdamW(m.parameters(), lr=1e-3) for kv, m in models.items()}
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(V, (batch, context + 1), generator=g)  # (B, T + 1) random tokens
    results = {}
    for kv, model in models.items():
        caches = [llama.KVCache() for _ in model.model.layers]
        with torch.no_grad():
            model(ids[:, :context], caches)  # fills the caches: each (B, n_kv_head, context, d_k)
        held = sum(c.k.nbytes + c.v.nbytes for c in caches)
        results[f"cache_bytes_per_token_kv{kv}"] = held / (batch * context)

    def train_steps(kv):
        models[kv].train()
        for _ in range(config["train_steps"]):
            loss = train.lm_loss(models[kv], (ids[:, :-1], ids[:, 1:]))
            optimizers[kv].zero_grad()
            loss.backward()
            optimizers[kv].step()

    prompt = torch.zeros(batch, 1, dtype=torch.long)  # (B, 1)
    train_ms, generate_ms = {kv: [] for kv in models}, {kv: [] for kv in models}
    for r in range(config["rounds"]):
        order = list(models)[r % len(models) :] + list(models)[: r % len(models)]
        for kv in order:
            t0 = time.process_time()
            train_steps(kv)
            t1 = time.process_time()
            models[kv].generate(prompt, context - 1, temperature=0)
            train_ms[kv].append((t1 - t0) / config["train_steps"] * 1000)
            generate_ms[kv].append((time.process_time() - t1) / (context - 1) * 1000)
    for kv in models:
        results[f"train_ms_per_step_kv{kv}"] = statistics.median(train_ms[kv])
        results[f"ms_per_token_kv{kv}"] = statistics.median(generate_ms[kv])
    return results


PLANNED["modern_gqa_cache"] = SweepSpec(
    title="Grouped-query attention where it matters: key/value cache bytes and milliseconds per generated "
    "token, n_kv_head = 4, 2, 1, contexts of 64 and 1024 tokens",
    run=gqa_cache_run,
    points=[{"context": 64, "batch": 1}, {"context": 1024, "batch": 8}],
    config={"vocab_size": 2048, "rounds": 5, "train_steps": 1},
    smoke={"rounds": 1, "context": 16},
    margins={"ms_per_token_ratio": 1.2},
    metrics={
        **{
            f"cache_bytes_per_token_kv{kv}": {"unit": "bytes", "higher_is_better": False}
            for kv in GQA_KV_HEADS
        },
        **{f"ms_per_token_kv{kv}": {"unit": "ms", "higher_is_better": False} for kv in GQA_KV_HEADS},
        **{f"train_ms_per_step_kv{kv}": {"unit": "ms", "higher_is_better": False} for kv in GQA_KV_HEADS},
    },
    description="The Llama of modern_ablation (4 blocks, 4 query heads of 32, width 128, vocabulary 2048) "
    "with 4 key/value heads (full multi-head attention), 2 (grouped-query attention, the ablation's "
    "'llama') and 1 (multi-query), untrained (neither the cache's size nor the time depends on the "
    "weights), at the ablation's context (64, one sequence) and at 1024 tokens for 8 sequences, where "
    "the cache is large. Cache: the bytes of every block's keys and values (float32) per token, "
    "measured on the filled KVCaches. Time, one thread, CPU milliseconds: of a training step (AdamW, "
    "batch x context random tokens) and per token of cached greedy generation (Llama.generate, "
    "temperature 0) of context - 1 tokens after a one-token prompt; the three models interleaved "
    "(5 rounds, the order rotating; the median round). Quality at each n_kv_head: modern_ablation's "
    "points llama_mha, llama, llama_mqa. Declared before the run: fewer key/value heads are faster "
    "(generation or training) when every seed's median time is lower by the factor "
    "'ms_per_token_ratio' (1.2); the cache's bytes are exact (n_kv_head / n_head of full attention's). "
    "3 seeds (repeats). Timings: no reproduction compares them. Cost, measured before the run (one "
    "round with 2 training steps, one thread, the shared 2-core AMD EPYC at a load average of about "
    "8, so upper bounds): at context 1024, 4.3-4.8 CPU s a training step and 6-7 ms a generated "
    "token, 53 s a round; under 2 s at 64. With 1 training step a round: about 200 CPU s a run, "
    "10 CPU minutes in all (0.2 CPU-hours).",
)


# Run and committed (course_lib/sweeps/NAME.json): the spec moves unchanged from PLANNED.
SWEEPS = {
    "modern_gqa_cache": PLANNED.pop("modern_gqa_cache"),
    "modern_ablation": PLANNED.pop("modern_ablation"),
}

# ---------------------------------------------------------------------------
# modern_ablation_edges (declared 2026-12-07 by rule, while modern_ablation ran: 52 of its 81 runs
# recorded, every one-change variant but two runs of gpt2+gqa, none of the Llamas)
# ---------------------------------------------------------------------------
SWEEP_DIR = Path(__file__).resolve().parent.parent / "course_lib" / "sweeps"  # sweep.py's, committed


def chosen_rate(sweep, variant):
    """The rate of `sweep`'s grid with the lowest mean validation value (val_bpc) over the seeds
    for `variant`; a tie goes to the lower rate."""
    rates = sorted({p["lr"] for p in sweep.select(model=variant)})
    return min(rates, key=lambda lr: statistics.fmean(sweep.values("val_bpc", model=variant, lr=lr)))


def ablation_edge_points(ablation):
    """modern_ablation's declared rule for a rate chosen at an edge of its grid: the same point one
    factor of 2 beyond that edge (0.001 below, 0.016 above), for each variant whose chosen rate is
    at an edge, in the order of ABLATION."""
    points = []
    for variant in ABLATION:
        lr = chosen_rate(ablation, variant)
        if lr in (ABLATION_LRS[0], ABLATION_LRS[-1]):
            beyond = lr / 2 if lr == ABLATION_LRS[0] else lr * 2
            points.append({"model": variant, "tokenizer": "bpe-2048", "lr": beyond, "steps": ABLATION_STEPS})
    return points


def ablation_edges_spec(ablation):
    """modern_ablation_edges, declared by rule from the committed modern_ablation (None when no
    variant's chosen rate is at an edge)."""
    points = ablation_edge_points(ablation)
    if not points:
        return None
    base = {**PLANNED, **SWEEPS}["modern_ablation"]
    listed = ", ".join(f"{p['model']} at {p['lr']:g}" for p in points)
    return SweepSpec(
        title="modern_ablation's grid extended beyond an edge for the variants whose learning rate was "
        f"chosen there: {listed}",
        run=ablation_run,
        points=points,
        config=base.config,
        smoke=base.smoke,
        margins=dict(base.margins),
        metrics=base.metrics,
        records=[("test_bpc", "modern_ablation_test_bpc/{model}/lr{lr}")],
        description="Declared by modern_ablation's rule (bench_modern.ablation_edge_points), written while "
        "modern_ablation ran, before its Llama runs: every variant whose rate chosen on validation is at "
        "an edge of 0.002-0.008 is run once more, a factor of 2 beyond that edge, same runs otherwise "
        f"(ablation_run: {listed}). Declared before the run: each such variant's rate is then chosen on "
        "validation over the four rates (lowest mean over the seeds) and reported on test; if the "
        "chosen rate is the new one, it is again at an edge and the chapter claims nothing about that "
        "variant. Margin as modern_ablation's ('change', 0.02 bits per character, worst seed against "
        f"best seed). 3 seeds, {len(points) * 3} runs of about 250 CPU s: about "
        f"{len(points) * 3 * 250 / 3600:.1f} CPU-hours.",
    )


def ablation_sweeps(sweep_dir=SWEEP_DIR):
    """modern_ablation_edges as the committed files stand: declared (PLANNED) once
    modern_ablation.json is committed and a chosen rate sits at an edge; in SWEEPS once its own
    file is committed too."""
    path = Path(sweep_dir) / "modern_ablation.json"
    if not path.is_file():
        return {}, {}
    spec = ablation_edges_spec(read_sweep(path))
    if spec is None:
        return {}, {}
    if (Path(sweep_dir) / "modern_ablation_edges.json").is_file():
        return {"modern_ablation_edges": spec}, {}
    return {}, {"modern_ablation_edges": spec}


_edges_sweeps, _edges_planned = ablation_sweeps()
SWEEPS |= _edges_sweeps
PLANNED |= _edges_planned
