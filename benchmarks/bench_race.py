"""The race of chapter 10, settled on its own evidence (issue 37): the capstone GPT, the modern
decoder (course_lib.llama) and chapter 10's LSTM at matched size, each with dropout and learning
rate chosen on validation, annealed (cosine to a tenth) over a budget that reads the training text
22 times, on characters (race_chars) and on BPE-2048 (race_bpe2048). Declared before they run, in
PLANNED (benchmarks/PLAN_ch12.md: costs, order, commands):

    nohup .venv/bin/python benchmarks/sweep.py race_bpe2048 --jobs 2 > race_bpe.log 2>&1 &
    nohup .venv/bin/python benchmarks/sweep.py race_chars --jobs 2 > race_chars.log 2>&1 &

race_long_points: the rule, declared now, that picks the runs at twice the budget once these end.
The runs are bench_modern.decoder_run's, with `race_model`'s models. Chapter 10's race_run is not
called: it reads characters only and builds only chapter 10's two models without dropout.
"""

import statistics

import torch.nn as nn
from bench_gpt import LSTM_SHAPE
from bench_modern import CONTEXT, RUN_CONFIG, decoder_run, run_metrics
from common import SweepSpec

from course_lib.charlm import CharLM
from course_lib.gpt import GPT, GPTConfig
from course_lib.llama import Llama, LlamaConfig

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
# The race (declared 2026-12-07, before its run)
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


def race_long_points(sweep):
    """The declared rule's second stage: for each model of a finished race sweep (race_chars or
    race_bpe2048), its (dropout, lr) with the lowest mean validation value over the seeds, at twice
    the budget. -> points of race_chars_long / race_bpe2048_long (declared once the first stage
    ends, with exactly these points)."""
    out = []
    for m in RACE_MODELS:
        points = [p for p in sweep.points if p["model"] == m]
        best = min(points, key=lambda p: statistics.mean(sweep.values("val_bpc", **p)))
        out.append(dict(best, steps=2 * best["steps"]))
    return out


RACE_RULE = (
    "Declared before the run. Each model (per tokenizer) at its (dropout, learning rate) with the "
    "lowest mean validation value over the seeds; a model is ahead of another when its worst seed's "
    "test value beats the other's best by the margin 'race' (0.05 bits per character, chapter 10's); "
    "otherwise no difference beyond the margin, said with evidence.no_robust_difference and the "
    "smallest difference the seeds could detect. A chosen learning rate at the edge of its grid is "
    "named as such. Stopped improving: the chosen (dropout, lr) of each model is run again at twice "
    "the budget, 3 seeds (race_chars_long / race_bpe2048_long, points by race_long_points); the budget "
    "has stopped paying when the doubled run's mean validation value is not lower by more than "
    "0.01 bits; each model is then reported at the budget of the two with the lower mean validation "
    "value. If doubling still gains more than 0.01, the chapter says 'ahead at these budgets, "
    "still improving' and no more."
)


# ---------------------------------------------------------------------------
# The race: race_chars and race_bpe2048
# ---------------------------------------------------------------------------
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
    "of 12 windows of 64 tokens, for a budget that reads the training text 22 times (chapter 10's "
    "best annealed budget without dropout, 12000 steps on characters; 3304 steps of BPE-2048 "
    "tokens read the same characters). Bits per character (bpe.bits_per_char) on the validation "
    "text at every eighth of the run and on the test text at the end; the test text's nats per "
    "token by position in the window. 3 seeds. "
)
RACE_COST = {
    "chars": "Cost, measured before the run (2026-12-07, one torch thread, pinned kernels, CPU time of 200 "
    "steps after 10 untimed, dropout 0.1, on the 2-core AMD EPYC shared with other jobs at a load average "
    "of 6 to 12, so upper bounds): GPT 83 ms a step, modern 91, LSTM 53 (chapter 10's committed annealed "
    "runs: GPT 73, LSTM 65 with their evaluations); with 10 evaluations of 0.5-0.8 s a run, 1003, 1100 "
    "and 646 CPU seconds a run: 81 runs, about 20.6 CPU-hours; the second stage (3 models x 3 seeds x "
    "24000 steps) about 4.6 more.",
    "bpe-2048": "Cost, measured before the run (2026-12-07, one torch thread, pinned kernels, CPU time of "
    "200 steps after 10 untimed, on the 2-core AMD EPYC shared with other jobs at a load average of 6 to "
    "12, so upper bounds): GPT 87 ms a step, modern 98, LSTM 67; with 10 evaluations of 0.2-0.3 s and the "
    "tokenizer's training a run, 294, 331 and 227 CPU seconds a run: 81 runs, about 6.4 CPU-hours; the "
    "second stage (3 models x 3 seeds x 6608 steps) about 1.4 more.",
}

PLANNED = {}
for _tokenizer, _name in (("bpe-2048", "race_bpe2048"), ("chars", "race_chars")):
    PLANNED[_name] = SweepSpec(
        title=f"GPT, modern decoder and LSTM of matched size on {_tokenizer}, dropout and learning rate "
        f"chosen on validation, annealed over {RACE_STEPS[_tokenizer]} steps (22 passes over the text)",
        run=race_tokens_run,
        points=race_points(_tokenizer),
        config=RUN_CONFIG,
        smoke={"steps": 8},
        margins={"race": 0.05, "still_improving": 0.01},
        metrics=run_metrics(),
        records=[("test_bpc", _name + "_test_bpc/{model}/dropout{dropout}/lr{lr}")],
        description=RACE_DESCRIPTION + RACE_RULE + " " + RACE_COST[_tokenizer],
    )
