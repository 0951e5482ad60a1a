"""The race of chapter 10, settled on its own evidence (issue 37): the capstone GPT, the modern
decoder (course_lib.llama) and chapter 10's LSTM at matched size, each with dropout and learning
rate chosen on validation, annealed (cosine to a tenth) over a budget B that reads the training text
22 times, on characters and on BPE-2048. Declared before any of its runs, in two stages
(benchmarks/PLAN_ch12.md: costs, order, commands):

1. the selection grid, race_bpe2048_grid and race_chars_grid (in PLANNED): 3 models x 3 dropouts x
   3 learning rates at B, one seed. Its only use: choosing each model's (dropout, lr), the lowest
   validation value. It supports no claim (SweepSpec.selection_for);
2. the comparison, race_bpe2048 and race_chars: declared by rule (race_final_spec) as soon as its
   grid's file is committed in course_lib/sweeps/, with exactly the points race_final_points(grid)
   returns: each model's chosen (dropout, lr) at B and at 2B, 3 seeds. Every number the race
   reports comes from it.

    nohup .venv/bin/python benchmarks/sweep.py race_bpe2048_grid --jobs 2 > race_bpe_grid.log 2>&1 &
    # commit course_lib/sweeps/race_bpe2048_grid.json; then race_bpe2048 is declared:
    nohup .venv/bin/python benchmarks/sweep.py race_bpe2048 --jobs 2 > race_bpe.log 2>&1 &

A stage is in SWEEPS once its file is committed (race_sweeps), its spec unchanged. The runs are
bench_modern.decoder_run's, with `race_model`'s models. Chapter 10's race_run is not called: it
reads characters only and builds only chapter 10's two models without dropout.
"""

import json
import statistics
from pathlib import Path

import torch.nn as nn
from bench_gpt import LSTM_SHAPE
from bench_modern import CONTEXT, RUN_CONFIG, decoder_run, run_metrics
from common import SweepSpec

from course_lib.charlm import CharLM
from course_lib.gpt import GPT, GPTConfig
from course_lib.llama import Llama, LlamaConfig
from course_lib.pages.sweeps import read_sweep

# ---------------------------------------------------------------------------
# The models, matched in size
# ---------------------------------------------------------------------------


class DropoutLSTM(nn.Module):
    """Chapter 10's LSTM language model (a CharLM whose layers are torch's fused nn.LSTM) with
    dropout where Zaremba et al. (2014) put it, on the non-recurrent connections: on the
    embeddings, between the two layers (nn.LSTM's own `dropout`) and before the read-out.

        logits = head(drop(LSTM_2(drop(LSTM_1(drop(embed(x)))))))        (B, T, V)

    A wrapper rather than an option of CharLM: an edit of CharLM would make the committed sweeps
    that ran it stale. With dropout 0 it computes CharLM.forward's function."""

    def __init__(self, lm, dropout):
        super().__init__()
        self.lm = lm
        self.lm.rnn.dropout = float(dropout)  # nn.LSTM's dropout between its layers
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h, _ = self.lm.rnn(self.drop(self.lm.embed(x)))  # (B, T, H)
        return self.lm.head(self.drop(h))  # (B, T, V)


def lstm_params(vocab_size, hidden_size, embed_size=LSTM_SHAPE["embed_size"]):
    """Parameters of the two-layer LSTM language model: embedding, two layers (4 gates, two bias
    vectors each, as torch's), read-out with bias."""
    E, H, V = embed_size, hidden_size, vocab_size
    return V * E + (4 * H * (E + H) + 8 * H) + (4 * H * 2 * H + 8 * H) + H * V + V


def matched_hidden(vocab_size, target):
    """The LSTM's width whose parameter count is nearest `target` (the GPT's on the same tokens)."""
    return min(range(16, 1024), key=lambda h: abs(lstm_params(vocab_size, h) - target))


def gpt_params(vocab_size, context=CONTEXT):
    """The capstone GPT's parameters (tied embeddings, no biases)."""
    C, L = GPTConfig.n_embd, GPTConfig.n_layer
    return vocab_size * C + context * C + L * (12 * C * C + 2 * C) + C


def lstm(vocab_size, dropout=0.0, context=CONTEXT):
    """Chapter 10's LSTM (bench_gpt.build("lstm"): CharLM, embeddings of 64, two fused layers)
    at the width that matches the capstone GPT's parameters on these tokens (243 on characters,
    as chapter 10), with DropoutLSTM's dropout. Seeded by the caller."""
    hidden = matched_hidden(vocab_size, gpt_params(vocab_size, context))
    lm = CharLM(vocab_size, "lstm", LSTM_SHAPE["embed_size"], hidden, LSTM_SHAPE["num_layers"])
    fused = nn.LSTM(LSTM_SHAPE["embed_size"], hidden, LSTM_SHAPE["num_layers"], batch_first=True)
    fused.load_state_dict(lm.rnn.state_dict())  # the course LSTM's initial weights, as build()
    lm.rnn = fused
    return DropoutLSTM(lm, dropout)


def race_model(model, vocab_size, context=CONTEXT, dropout=0.0):
    """A model of the race, seeded by the caller: "gpt", the capstone GPT (gpt.py's defaults, no
    biases: the ablation's gpt2-bias); "modern", course_lib.llama.Llama of the same sizes with
    n_kv_head = n_head (the ablation's llama_mha), whose parameters match the GPT's; "lstm",
    chapter 10's LSTM matched in size (`lstm`)."""
    if model == "gpt":
        return GPT(GPTConfig(vocab_size, block_size=context, dropout=dropout))
    if model == "modern":
        return Llama(LlamaConfig(vocab_size, block_size=context, dropout=dropout))
    if model == "lstm":
        return lstm(vocab_size, dropout, context)
    raise ValueError(f"model must be 'gpt', 'modern' or 'lstm', got {model!r}")


def race_tokens_run(point, seed, config):
    """decoder_run of a race model (`race_model`): the GPT, the modern decoder or the LSTM."""
    return decoder_run(point, seed, config, race_model)


# ---------------------------------------------------------------------------
# The race's grids and rules (declared 2026-12-07, before any race run)
# ---------------------------------------------------------------------------
RACE_MODELS = ("gpt", "modern", "lstm")
RACE_LRS = {"gpt": (1e-3, 2e-3, 4e-3), "modern": (1e-3, 2e-3, 4e-3), "lstm": (2.5e-3, 5e-3, 1e-2)}
RACE_DROPOUTS = (0.0, 0.1, 0.2)
# Budgets: the same characters read on both tokenizers, 22 passes over the training text: 12000
# steps of 768 characters (chapter 10's best annealed budget for both models without dropout:
# the GPT's 24000-step runs were worse than its 12000, the LSTM's 16000 no better than its 12000),
# and 3304 steps of 768 BPE-2048 tokens (3.612 characters a token: 12000 * 768 / 3.612 / 768 = 3322,
# rounded down to a multiple of 8).
RACE_STEPS = {"chars": 12000, "bpe-2048": 3304}


def race_points(tokenizer):
    return [
        {"model": m, "tokenizer": tokenizer, "dropout": d, "lr": lr, "steps": RACE_STEPS[tokenizer]}
        for m in RACE_MODELS
        for d in RACE_DROPOUTS
        for lr in RACE_LRS[m]
    ]


def race_final_points(grid_sweep):
    """Stage 2's points, by the declared rule: for each model, the (dropout, lr) of the selection
    grid with the lowest validation value (val_bpc, the mean over the grid's seeds: it has one;
    a tie goes to the first in the grid's order), at the grid's budget B and at 2B.

        chosen(m) = argmin over (dropout, lr) of val_bpc(m, dropout, lr, B)
        -> [chosen(gpt) at B, at 2B, chosen(modern) at B, at 2B, chosen(lstm) at B, at 2B]"""
    out = []
    for m in RACE_MODELS:
        points = [p for p in grid_sweep.points if p["model"] == m]
        if not points:
            raise ValueError(f"grid_sweep has no point of model {m!r}: its points are {grid_sweep.points}")
        best = min(points, key=lambda p: statistics.mean(grid_sweep.values("val_bpc", **p)))
        out += [dict(best), dict(best, steps=2 * best["steps"])]
    return out


def race_grid_edges(point):
    """What of a chosen point lies at an edge of its grid, named for the chapter: the learning
    rate at the lowest or the highest of the model's three, dropout at the highest (0.2). Dropout
    0 is no edge: dropout cannot go lower. -> a list of phrases, [] when inside the grid."""
    lrs, edges = RACE_LRS[point["model"]], []
    if point["lr"] in (lrs[0], lrs[-1]):
        edges.append(
            f"lr {point['lr']:g} at the {'lowest' if point['lr'] == lrs[0] else 'highest'} of its grid"
        )
    if point["dropout"] == RACE_DROPOUTS[-1]:
        edges.append(f"dropout {point['dropout']:g} at the highest of its grid")
    return edges


def race_reported_budget(final_sweep, model):
    """The declared rule's budget for `model` in a stage-2 sweep (race_chars, race_bpe2048):
    reported at the budget (B or 2B) with the lower mean validation value; doubling still pays
    when it lowers that mean by more than the margin 'still_improving'.

        gain = mean val_bpc(B) - mean val_bpc(2B);  still_improving = gain > margin
        -> {"steps": the reported budget, "gain": gain, "still_improving": bool}"""
    points = final_sweep.select(model=model)
    if len(points) != 2:
        raise ValueError(f"final_sweep has {len(points)} points of model {model!r}, need 2 (B and 2B)")
    short, long = sorted(points, key=lambda p: p["steps"])
    val_b = statistics.mean(final_sweep.values("val_bpc", **short))
    val_2b = statistics.mean(final_sweep.values("val_bpc", **long))
    gain = val_b - val_2b
    return {
        "steps": long["steps"] if val_2b < val_b else short["steps"],
        "gain": gain,
        "still_improving": gain > final_sweep.margin("still_improving"),
    }


def race_repeat_differences(grid_sweep, final_sweep):
    """The free reproduction check: stage 2's seed 0 at the grid's budget repeats the grid's run
    of the same point and seed (same run function, config, data and initial weights), so on the
    same kernels every result but the timings must be equal bit for bit. -> the differences,
    each named ([] when every repeated run is reproduced)."""
    if grid_sweep.kernels != final_sweep.kernels:
        return [f"made on other kernels: grid {grid_sweep.kernels}, stage 2 {final_sweep.kernels}"]
    timings = {m for m, info in final_sweep.metrics.items() if info.get("unit") in ("s", "ms")}
    grid_runs = {(json.dumps(r["point"], sort_keys=True), r["seed"]): r for r in grid_sweep.runs}
    found, repeated = [], 0
    for run in final_sweep.runs:
        twin = grid_runs.get((json.dumps(run["point"], sort_keys=True), run["seed"]))
        if twin is None:
            continue
        repeated += 1
        for metric, value in run["results"].items():
            before = twin["results"].get(metric)
            if metric not in timings and before != value:
                found.append(f"{run['point']} seed {run['seed']}: {metric} {value!r}, {before!r} in the grid")
    if not repeated:
        found.append("no run of stage 2 repeats a run of the grid")
    return found


# ---------------------------------------------------------------------------
# The race in two stages (declared 2026-12-07, before any race run)
# ---------------------------------------------------------------------------
RACE_NAMES = {"bpe-2048": "race_bpe2048", "chars": "race_chars"}  # stage 2; stage 1 adds "_grid"
RACE_MARGINS = {"race": 0.05, "still_improving": 0.01}
RACE_FINAL_SEEDS = [0, 1, 2]
SWEEP_DIR = Path(__file__).resolve().parent.parent / "course_lib" / "sweeps"  # sweep.py's, committed

RACE_DESCRIPTION = (
    "The capstone GPT ('gpt': course_lib.gpt, nanoGPT's model at the capstone's sizes, 4 blocks, "
    "4 heads, width 128, no biases, tied), the modern decoder of the same sizes ('modern': "
    "course_lib.llama.Llama with "
    "n_kv_head = n_head = 4, so that its parameters match: grouped queries save cache, measured in "
    "modern_gqa_cache) and chapter 10's LSTM ('lstm': CharLM, embeddings of 64, two fused layers, "
    "243 units on characters, 197 on BPE-2048, the width whose parameters match the GPT's: 806,716 "
    "against 809,088 on characters, 1,055,868 against 1,057,920 on BPE-2048), each with dropout 0, "
    "0.1 or 0.2 (the decoders: gpt.py's and llama.py's dropout on the embeddings, the attention "
    "weights and each residual branch; the LSTM: bench_race.DropoutLSTM, on the embeddings, "
    "between the layers and before the read-out, as Zaremba et al. 2014) and three peak learning "
    "rates a factor of 2 apart (GPT and modern 0.001, 0.002, 0.004; LSTM 0.0025, 0.005, 0.01: "
    "chapter 10's grids, re-chosen for the cosine schedule). Trained by train.train_lm with "
    "GPT_RECIPE (AdamW, betas 0.9/0.99, weight decay 0.1 on the matrices, clipping 1), 100 warm-up "
    "steps, then a cosine decay to lr / 10 (nanoGPT's min_lr, chapter 10's annealed runs), batches "
    "of 12 windows of 64 tokens, for a budget B that reads the training text 22 times (chapter 10's "
    "best annealed budget without dropout, 12000 steps on characters; 3304 steps of BPE-2048 "
    "tokens read the same characters). Bits per character (bpe.bits_per_char) on the validation "
    "text at every eighth of the run and on the test text at the end; the test text's nats per "
    "token by position in the window. "
)
RACE_RULE = (
    "Declared before the run (2026-12-07, with its grid, before any race run). The race runs in two "
    "stages: a selection grid of one seed (race_chars_grid, race_bpe2048_grid), then this comparison "
    "with 3 seeds (0, 1, 2) at exactly the points bench_race.race_final_points(grid) returns: each "
    "model at the (dropout, lr) with the lowest validation value on its grid, at the grid's budget B "
    "and at 2B. Each model is reported at the budget (B or 2B) with the lower mean validation value "
    "over the seeds (race_reported_budget); the budget has stopped paying when the doubled run's mean "
    "validation value is not lower by more than the margin 'still_improving' (0.01 bits per "
    "character); if doubling still gains more than 0.01, the chapter says 'ahead at these budgets, "
    "still improving' and no more. A model is ahead of another when its worst seed's test value "
    "beats the other's best by the margin 'race' (0.05 bits per character, chapter 10's); otherwise "
    "no difference beyond the margin, said with evidence.no_robust_difference and the smallest "
    "difference the seeds could detect. A chosen learning rate at either edge of its grid, or "
    "dropout at its highest, is named as such (race_grid_edges). Seed 0 at B repeats the grid's run "
    "of the same point and seed: on the same kernels its numbers equal the grid's bit for bit "
    "(race_repeat_differences), a free reproduction check; its validation value chose the point, so "
    "the claims rest on the test values."
)
GRID_RULE = (
    "Declared before the run (2026-12-07, before any race run). Stage 1 of the race, the selection "
    "grid: 3 models x 3 dropouts x 3 learning rates at the budget B, one seed (0). Its only use is "
    "choosing each model's (dropout, lr): the point with the lowest validation value (val_bpc; a tie "
    "goes to the first in the grid's order), by bench_race.race_final_points. It supports no "
    "comparative claim: no chapter loads it and it writes no records (SweepSpec.selection_for); "
    "every number the race reports comes from stage 2, with 3 seeds. Once this file is committed, "
    "stage 2 is declared by rule (bench_race.race_final_spec). Stage 2's rule, declared now: "
)

# CPU seconds a run at the budget B, measured before the run (PLAN_ch12.md, "Measured costs"): one
# torch thread, pinned kernels, 200 steps after 10 untimed, dropout 0.1, 10 evaluations, and for
# BPE the tokenizer's training, on the 2-core AMD EPYC shared with other jobs at a load average of
# 6 to 12 (upper bounds). A run at 2B: about twice (an upper bound: the evaluations and the
# tokenizer's training do not double).
RACE_RUN_SECONDS = {
    "bpe-2048": {"gpt": 294, "modern": 331, "lstm": 227},
    "chars": {"gpt": 1003, "modern": 1100, "lstm": 646},
}


def race_cpu_hours(tokenizer, stage):
    """Estimated CPU-hours of a stage: "grid", each model's 9 points once at B; "final", each
    model's chosen point at B and at 2B (about 2 runs at B), 3 seeds."""
    per_model = RACE_RUN_SECONDS[tokenizer]
    if stage == "grid":
        runs_at_b = {m: len(RACE_DROPOUTS) * len(RACE_LRS[m]) for m in RACE_MODELS}
    elif stage == "final":
        runs_at_b = {m: len(RACE_FINAL_SEEDS) * (1 + 2) for m in RACE_MODELS}
    else:
        raise ValueError(f"stage must be 'grid' or 'final', got {stage!r}")
    return sum(runs_at_b[m] * per_model[m] for m in RACE_MODELS) / 3600


def race_cost(tokenizer, stage):
    seconds = ", ".join(f"{m} {s}" for m, s in RACE_RUN_SECONDS[tokenizer].items())
    runs = "27 runs (27 points x 1 seed)" if stage == "grid" else "18 runs (6 points x 3 seeds)"
    total = sum(race_cpu_hours(t, s) for t in RACE_STEPS for s in ("grid", "final"))
    return (
        f"Cost, estimated before the run from CPU seconds a run at B measured on the shared 2-core AMD "
        f"EPYC (upper bounds, PLAN_ch12.md): {seconds}; a run at 2B about twice. {runs}: about "
        f"{race_cpu_hours(tokenizer, stage):.1f} CPU-hours. The whole race, both stages on both "
        f"tokenizers: about {total:.1f} CPU-hours (the one-stage design it replaced, 3 seeds at every "
        "grid point, then the doubled budget: about 33)."
    )


def race_grid_spec(tokenizer):
    """Stage 1 (race_bpe2048_grid, race_chars_grid): the 27 points of `race_points`, one seed."""
    name = RACE_NAMES[tokenizer]
    return SweepSpec(
        title=f"The race's selection grid on {tokenizer} (one seed, no claim): GPT, modern decoder and "
        f"LSTM of matched size, dropout x learning rate, annealed over {RACE_STEPS[tokenizer]} steps",
        run=race_tokens_run,
        points=race_points(tokenizer),
        config=RUN_CONFIG,
        smoke={"steps": 8},
        margins=dict(RACE_MARGINS),  # stage 2's, declared with it; the grid makes no claim
        metrics=run_metrics(),
        seeds=[0],
        records=[],  # supports no claim: nothing of it goes to results.json
        description=RACE_DESCRIPTION + GRID_RULE + RACE_RULE + " " + race_cost(tokenizer, "grid"),
        selection_for=name,
    )


def race_final_spec(tokenizer, grid_sweep):
    """Stage 2 (race_bpe2048, race_chars), declared by rule from the committed selection grid:
    exactly race_final_points(grid_sweep), seeds 0, 1, 2."""
    if tokenizer not in RACE_STEPS:
        raise ValueError(f"tokenizer must be one of {sorted(RACE_STEPS)}, got {tokenizer!r}")
    if grid_sweep.points != race_points(tokenizer):
        raise ValueError(
            f"grid_sweep's points are not the {tokenizer} grid's race_points({tokenizer!r}): "
            f"{len(grid_sweep.points)} points, {grid_sweep.points[:2]}..."
        )
    name, steps = RACE_NAMES[tokenizer], RACE_STEPS[tokenizer]
    points = race_final_points(grid_sweep)
    chosen = "; ".join(
        f"{p['model']} dropout {p['dropout']:g}, lr {p['lr']:g}"
        + (f" ({', '.join(race_grid_edges(p))})" if race_grid_edges(p) else "")
        for p in points[::2]
    )
    return SweepSpec(
        title=f"GPT, modern decoder and LSTM of matched size on {tokenizer}, each at the dropout and "
        f"learning rate its grid chose on validation, annealed over {steps} and {2 * steps} steps, 3 seeds",
        run=race_tokens_run,
        points=points,
        config=RUN_CONFIG,
        smoke={"steps": 8},
        margins=dict(RACE_MARGINS),
        metrics=run_metrics(),
        seeds=list(RACE_FINAL_SEEDS),
        records=[("test_bpc", name + "_test_bpc/{model}/dropout{dropout}/lr{lr}/steps{steps}")],
        description=RACE_DESCRIPTION
        + RACE_RULE
        + f" Chosen on {name}_grid (seeds {grid_sweep.seeds}): {chosen}. "
        + race_cost(tokenizer, "final"),
    )


def race_sweeps(sweep_dir=SWEEP_DIR):
    """(SWEEPS, PLANNED) of the race as the committed files in `sweep_dir` stand: a stage is in
    SWEEPS once its file is committed (its spec unchanged), else in PLANNED; stage 2 is declared
    (race_final_spec) only once its grid's file is committed."""
    sweeps, planned = {}, {}
    for tokenizer, name in RACE_NAMES.items():
        grid_path = Path(sweep_dir) / f"{name}_grid.json"
        if not grid_path.is_file():
            planned[name + "_grid"] = race_grid_spec(tokenizer)
            continue
        sweeps[name + "_grid"] = race_grid_spec(tokenizer)
        final = race_final_spec(tokenizer, read_sweep(grid_path))
        (sweeps if (Path(sweep_dir) / f"{name}.json").is_file() else planned)[name] = final
    return sweeps, planned


SWEEPS, PLANNED = race_sweeps()
