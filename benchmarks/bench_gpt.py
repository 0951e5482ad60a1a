"""Chapter 10's capstone: the GPT over seeds, weight tying, the GPT against an LSTM of its size,
and KV-cached generation. The sweeps are committed in course_lib/sweeps/ and drawn by
book/10_capstone_lstm_to_gpt.ipynb beside its own live run.

    python benchmarks/sweep.py gpt_capstone             # the GPT, untied and tied, 3 seeds
    python benchmarks/sweep.py gpt_vs_lstm --jobs 2     # GPT and LSTM at other learning rates
    python benchmarks/run.py --only kv_cache            # the KV cache's speed-up

Every model: the chapter's recipe (recipes.GPT_RECIPE: AdamW, warm-up then cosine decay,
batches of 12 windows of 64 characters), the learning rate from the point, held-out bits per
character on the whole validation text read in windows of 64; one torch thread.
"""

import time

import torch
from common import SweepSpec, record

from course_lib import data, recipes, train
from course_lib.charlm import CharLM
from course_lib.gpt import GPT, GPTConfig

STEPS = 1350  # chapter 10's live run
GPT_SHAPE = {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64}  # nanoGPT's baby GPT
# Two LSTM layers of 246 units (char-rnn's shape), embeddings of 64: 825,448 parameters
# against the GPT's 828,264.
LSTM_SHAPE = {"embed_size": 64, "hidden_size": 246, "num_layers": 2}
METRICS = {
    "bpc": {"unit": "bits/char", "higher_is_better": False},
    "train_seconds": {"unit": "s", "higher_is_better": False},
    "params": {"unit": "parameters", "higher_is_better": False},
}


def build(model, vocab_size, tie_weights=False):
    """The chapter's GPT, or the LSTM of about its size."""
    if model == "gpt":
        return GPT(GPTConfig(vocab_size, **GPT_SHAPE, tie_weights=tie_weights))
    return CharLM(vocab_size, "lstm", **LSTM_SHAPE)


def lm_run(point, seed, config):
    """One model trained `steps` with GPT_RECIPE at the point's learning rate: held-out bits per
    character, training seconds (one thread), parameters."""
    corpus = data.char_corpus()
    torch.manual_seed(seed)
    model = build(point["model"], len(corpus.vocab), point.get("tie_weights", False))
    recipe = dict(recipes.GPT_RECIPE, lr=point["lr"])
    history = recipes.train_lm(
        model,
        corpus,
        point["steps"],
        **recipe,
        seed=seed,
        eval_seq_len=config["eval_seq_len"],
        progress=False,
    )
    return {
        "bpc": train.bits_per_char(history.evals[-1][1]),
        "train_seconds": history.seconds,
        "params": train.count_parameters(model),
    }


CONFIG = {"eval_seq_len": 64}


def lm_sweep(**fields):
    """A sweep of `lm_run` with this module's configuration, recipe, modules and metrics."""
    return SweepSpec(run=lm_run, config=CONFIG, smoke={"steps": 8}, metrics=METRICS, **fields)


SWEEPS = {
    "gpt_capstone": lm_sweep(
        title=f"The capstone GPT, {STEPS} steps, with and without weight tying (learning rate 0.001)",
        points=[{"model": "gpt", "lr": 1e-3, "steps": STEPS, "tie_weights": tie} for tie in (False, True)],
        records=[("bpc", "capstone_gpt_heldout_bpc/tie_weights={tie_weights}")],
        description="Chapter 10's GPT (4 blocks, 4 heads, width 128, context 64) trained for the "
        "chapter's 1350 steps with GPT_RECIPE, as the page trains it (seed 0 is the page's run, on one "
        "thread instead of two); and the same model with its output layer tied to the token embedding "
        "(Press & Wolf 2017). 3 seeds.",
    ),
}

# GPT against an LSTM of its size at equal steps: each model at three learning rates a factor of 2
# apart, around its usual value (the GPT's 0.001 is gpt_capstone's untied point).
SWEEPS["gpt_vs_lstm"] = lm_sweep(
    title=f"GPT against an LSTM of the same size, {STEPS} steps each, at several learning rates",
    points=[{"model": "gpt", "lr": lr, "steps": STEPS} for lr in (5e-4, 2e-3)]
    + [{"model": "lstm", "lr": lr, "steps": STEPS} for lr in (2.5e-3, 5e-3, 1e-2)],
    records=[("bpc", "gpt_vs_lstm_heldout_bpc/equal_steps/{model}/lr{lr}")],
    description="The capstone GPT (828,264 parameters) at learning rates 0.0005 and 0.002 (0.001: "
    "gpt_capstone) and a two-layer LSTM (246 units, embeddings 64; 825,448 parameters) at 0.0025, "
    "0.005 and 0.01, each trained for the chapter's 1350 steps of 12 windows of 64 characters with "
    "GPT_RECIPE otherwise. 3 seeds.",
)

# Both models' best learning rates lay at the edge of their grids: one more step out for each.
SWEEPS["gpt_vs_lstm_edges"] = lm_sweep(
    title=f"GPT against an LSTM of the same size, {STEPS} steps: one more learning rate each, past the "
    "best of gpt_vs_lstm",
    points=[{"model": "gpt", "lr": 4e-3, "steps": STEPS}, {"model": "lstm", "lr": 2e-2, "steps": STEPS}],
    records=[("bpc", "gpt_vs_lstm_heldout_bpc/equal_steps/{model}/lr{lr}")],
    description="gpt_vs_lstm found each model best at the largest learning rate it tried (GPT 0.002, "
    "LSTM 0.01); this sweep adds GPT 0.004 and LSTM 0.02. 3 seeds.",
)

# Equal time: in gpt_vs_lstm (runs two at a time, one thread each) the median GPT run trained 1350
# steps in 140.9 s and the median LSTM run in 200.3 s, so the LSTM gets 1350 * 140.9 / 200.3 = 950
# steps in the GPT's time; at the learning rate that was its best in gpt_vs_lstm.
EQUAL_TIME_STEPS = 950
SWEEPS["gpt_vs_lstm_equal_time"] = lm_sweep(
    title=f"The LSTM in the GPT's training time: {EQUAL_TIME_STEPS} steps (learning rate 0.01)",
    points=[{"model": "lstm", "lr": 1e-2, "steps": EQUAL_TIME_STEPS}],
    records=[("bpc", "gpt_vs_lstm_heldout_bpc/equal_time/{model}/lr{lr}")],
    description="The LSTM of gpt_vs_lstm trained for as many steps as fit in the GPT's median "
    "training time for 1350 steps there (950 steps), at its best learning rate there. 3 seeds.",
)


def kv_cache_generate_speedup(args, tokens=500, repeats=3):
    """Generation of 500 tokens (one prompt character, batch 1) by a GPT of the capstone's shape
    with a context of 512, without and with the KV cache: median seconds of 3, interleaved; the
    value is uncached / cached. The weights are untrained: the time does not depend on them."""
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(104, **dict(GPT_SHAPE, block_size=tokens + 12))).eval()
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


def capstone_headlines(args):
    """The chapter's headline numbers, read from the committed sweeps (nothing is trained here):
    the capstone GPT's held-out bits per character (3 seeds; goal <= 2.2), and the GPT against the
    LSTM at equal steps and at equal time, each GPT and LSTM at its best learning rate (the value
    is the LSTM's mean, the baseline the GPT's; ratio < 1: the LSTM is better)."""
    from course_lib.evidence import load_sweep

    def spread(s):
        return {"std": s.std, "min": s.min, "max": s.max, "n": s.n}

    capstone = load_sweep("gpt_capstone").summary("bpc", model="gpt", lr=1e-3, steps=STEPS, tie_weights=False)
    grid = [load_sweep(name) for name in ("gpt_capstone", "gpt_vs_lstm", "gpt_vs_lstm_edges")]

    def best(model):  # the lowest mean over the learning rates tried, untied
        points = [
            (s, p) for s in grid for p in s.select(model=model, steps=STEPS) if not p.get("tie_weights")
        ]
        return min((s.summary("bpc", **p) for s, p in points), key=lambda x: x.mean)

    gpt, lstm = best("gpt"), best("lstm")
    equal_time = load_sweep("gpt_vs_lstm_equal_time")
    lstm_time = equal_time.summary("bpc", **equal_time.points[0])
    return [
        record("capstone_gpt_heldout_bpc", capstone.mean, "bits/char", goal=2.2, **spread(capstone)),
        record(
            "gpt_vs_lstm_heldout_bpc/equal_steps", lstm.mean, "bits/char", baseline=gpt.mean, **spread(lstm)
        ),
        record(
            "gpt_vs_lstm_heldout_bpc/equal_time",
            lstm_time.mean,
            "bits/char",
            baseline=gpt.mean,
            **spread(lstm_time),
        ),
    ]


BENCHMARKS = [
    ("GPT: generation of 500 tokens with and without the KV cache", kv_cache_generate_speedup),
    ("GPT: the capstone's headline numbers, from the committed sweeps", capstone_headlines),
]
