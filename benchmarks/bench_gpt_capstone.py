"""Chapter 10's capstone GPT, the one the page trains live: nanoGPT's recipe for 1750 steps on two
threads, tied and untied, at three learning rates, with the share of real words in its samples
(sweep gpt_capstone, committed in course_lib/sweeps/ and drawn by
book/10_capstone_lstm_to_gpt.ipynb beside its own live run), and its headline numbers read from
that sweep (benchmarks/run.py). The model is bench_gpt.build's GPT.

    nice -n 10 python benchmarks/sweep.py gpt_capstone --jobs 1       # the page's GPT, 2 threads a run
    python benchmarks/run.py --only capstone_headlines                # its headline numbers

Two torch threads a run, as the page trains its GPT on two cores.
"""

import dataclasses
import re

import torch
from bench_gpt import build
from common import SweepSpec, record

from course_lib import data, train
from course_lib.gpt import known_word_share

STEPS = 1750  # chapter 10's live run (two threads; 1350 on one thread before 2026-11-28)

# ---------------------------------------------------------------------------
# The page's GPT: nanoGPT's recipe for 1750 steps on two threads, tied and untied, three learning rates
#
# Declared 2026-11-28, before the run. Until then the page trained 1350 steps on one thread, at peak
# rates 0.001/0.002/0.004: 0.004 did best for tied and untied alike (tied 2.07-2.11 bits per
# character on validation), at the edge of the grid, and 2.09 missed the goal of <= 2.0 in <= 120 s
# on two cores. One training step takes 85 ms on one thread and 45 ms on two (this machine, seed 0,
# 60 steps of plain AdamW). A pilot (seed 0, tied, 0.004, one thread, its own cosine decay each):
# 1.900 bits on validation after 2000 steps, 1.838 after 2400. Declared first at 2000 steps; the
# first run (0.002, tied, seed 0) trained in 114.8 s on two threads (the recipe's clipping, the
# evaluations and the smaller ops do not halve), too close to 120 s, so the sweep was stopped and
# declared again at 1750 steps (measured after: 78-115 s a run, the tied model at 0.004 87-92 s).
# The grid moves one factor of 2 up, centred on 0.004. Record goal: the tied model at its rate
# chosen on validation <= 2.0 bits (mean of 3 seeds), each seed's training <= 120 s.
# ---------------------------------------------------------------------------


SAMPLING = {"plain": {}, "t08": {"temperature": 0.8}, "top5": {"top_k": 5}, "p09": {"top_p": 0.9}}


def sampled_word_shares(model, corpus, prompt="The ", n=200, seed=0):
    """For each way of sampling in SAMPLING: n continuations of `prompt` up to the context's end,
    and the share of their complete words that occur in the training text (gpt.known_word_share)."""
    known = set(re.findall(r"[A-Za-z]+", corpus.vocab.decode(corpus.train.tolist())))
    ids = torch.tensor([corpus.vocab.encode(prompt)] * n)  # (n, P)
    length = model.config.block_size - ids.shape[1]
    shares = {}
    for name, kwargs in SAMPLING.items():
        out = model.generate(ids, length, generator=torch.Generator().manual_seed(seed), **kwargs)
        texts = [corpus.vocab.decode(row) for row in out[:, ids.shape[1] :].tolist()]
        shares[f"words_{name}"] = known_word_share(texts, known)[0]
    return shares


def capstone_run(point, seed, config):
    """The page's run: the GPT trained `steps` with GPT_RECIPE (warm-up, cosine decay) at the
    point's learning rate -> held-out bits per character on the validation and test texts
    (windows of 64), training seconds, parameters, and the share of real words in its samples
    (sampled_word_shares)."""
    corpus = data.char_corpus()
    torch.manual_seed(seed)
    model = build("gpt", len(corpus.vocab), tie_weights=point["tie_weights"])
    recipe = dataclasses.replace(train.GPT_RECIPE, lr=point["lr"])
    history = train.train_lm(
        model,
        corpus,
        point["steps"],
        recipe,
        seed=seed,
        eval_fn=lambda m: train.lm_heldout_loss(m, corpus.val, seq_len=config["eval_seq_len"]),
        progress=False,
    )
    test = train.lm_heldout_loss(model, corpus.test, seq_len=config["eval_seq_len"])
    return {
        "bpc": train.bits_per_char(history.evals[-1][1]),
        "test_bpc": train.bits_per_char(test),
        "train_seconds": history.seconds,
        "params": train.count_parameters(model),
        **sampled_word_shares(model, corpus),
    }


SWEEPS = {
    "gpt_capstone": SweepSpec(
        title=f"The capstone GPT, {STEPS} steps of nanoGPT's recipe on two threads, tied and untied, "
        "at three learning rates",
        run=capstone_run,
        points=[
            {"lr": lr, "steps": STEPS, "tie_weights": tie}
            for tie in (True, False)
            for lr in (2e-3, 4e-3, 8e-3)
        ],
        config={"eval_seq_len": 64, "threads": 2},
        smoke={"steps": 8},
        metrics={
            "bpc": {"unit": "bits/char", "higher_is_better": False},
            "test_bpc": {"unit": "bits/char", "higher_is_better": False},
            "train_seconds": {"unit": "s", "higher_is_better": False},
            "params": {"unit": "parameters", "higher_is_better": False},
            **{
                f"words_{name}": {
                    "unit": "share of sampled words found in the training text",
                    "higher_is_better": True,
                }
                for name in SAMPLING
            },
        },
        margins={"tying": 0.02, "sampling": 0.03},
        records=[("bpc", "capstone_gpt_heldout_bpc/tie_weights={tie_weights}/lr={lr}")],
        description="Chapter 10's GPT (nanoGPT's baby GPT: 4 blocks, 4 heads, width 128, context 64, "
        "no biases) trained for the page's 1750 steps on two torch threads with train.GPT_RECIPE "
        "(AdamW, betas 0.9/0.99, "
        "weight decay 0.1 on the matrices, 100 warm-up steps, cosine decay to 1e-4, batches of 12 "
        "windows of 64), with its output layer tied to the token embedding (nanoGPT, GPT-2) or "
        "separate, each at peak learning rates 0.002, 0.004 and 0.008 (nanoGPT's is 0.001; at 1350 "
        "steps 0.004 beat 0.001 and 0.002, tied and untied, so this grid is centred on it): tying is judged "
        "with each variant at its best learning rate on the validation text. Seed 0 of the tied "
        "model at the chosen rate is the page's live run. Margin 'tying': the smallest difference "
        "in held-out bits per character that the chapter calls a difference. After training, 200 "
        "continuations of 'The ' to the end of the context (60 characters) for each way of sampling "
        "(plain; temperature 0.8; top-k 5; top-p 0.9; generator seed 0): the share of their complete "
        "words found among the training text's words; margin 'sampling': the smallest difference in "
        "that share the chapter calls a difference. train_seconds: wall seconds of the training "
        "(its five validation passes included), each run alone on the two cores (--jobs 1). 3 seeds.",
    ),
}


# ---------------------------------------------------------------------------
# Its headline numbers (a benchmark of benchmarks/run.py)
# ---------------------------------------------------------------------------


def capstone_headlines(args):
    """The capstone GPT's held-out bits per character (the tied model at its best learning rate
    on validation; 3 seeds; goal <= 2.0 with each seed's training <= 120 s on two cores), read
    from the committed sweep: nothing is trained here."""
    from course_lib.pages.sweeps import load_sweep

    sweep = load_sweep("gpt_capstone")
    tied = sweep.select(tie_weights=True, steps=STEPS)
    best = min(tied, key=lambda p: sweep.summary("bpc", **p).mean)
    s = sweep.summary("bpc", **best)
    test = sweep.summary("test_bpc", **best)
    return [
        record(
            "capstone_gpt_heldout_bpc",
            s.mean,
            "bits/char",
            goal=2.0,
            lr=best["lr"],
            std=s.std,
            min=s.min,
            max=s.max,
            n=s.n,
            test_mean=test.mean,
            train_seconds_max=max(sweep.values("train_seconds", **best)),
            seconds_goal=120,
            threads=sweep.config.get("threads", 1),
        ),
    ]


BENCHMARKS = [
    ("GPT: the capstone's headline numbers, from the committed sweeps", capstone_headlines),
]
