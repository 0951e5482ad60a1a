"""Chapter 10's capstone: the GPT against an LSTM of the same size on the same text, weight
tying, and KV-cached generation. The sweeps are committed in course_lib/sweeps/ and drawn by
book/10_capstone_lstm_to_gpt.ipynb beside its own live run.

    python benchmarks/sweep.py gpt_vs_lstm              # both models, 3 learning rates, equal steps
    python benchmarks/sweep.py gpt_vs_lstm_equal_time   # the LSTM in the GPT's training time
    python benchmarks/sweep.py gpt_weight_tying         # the GPT with its output layer tied
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
from course_lib.gpt import GPT

STEPS = 1350  # chapter 10's live run
GPT_SHAPE = {"d_model": 128, "num_heads": 4, "num_layers": 4, "d_ff": 512, "max_len": 64}
# Two LSTM layers of 246 units (char-rnn's shape), embeddings of 64: 825,448 parameters
# against the GPT's 828,264.
LSTM_SHAPE = {"embed_size": 64, "hidden_size": 246, "num_layers": 2}
MODULES = [
    "course_lib.gpt",
    "course_lib.charlm",
    "course_lib.recipes",
    "course_lib.train",
    "course_lib.data",
    "course_lib.transformer",
    "course_lib.multihead",
    "course_lib.rnn",
]
RECIPE = [
    "course_lib.recipes:train_lm",
    "course_lib.recipes:warmup_cosine",
    "course_lib.recipes:lm_loss",
    "course_lib.train:lm_heldout_loss",
]
METRICS = {
    "bpc": {"unit": "bits/char", "higher_is_better": False},
    "train_seconds": {"unit": "s", "higher_is_better": False},
    "params": {"unit": "parameters", "higher_is_better": False},
}


def build(model, vocab_size, tie_weights=False):
    """The chapter's GPT, or the LSTM of about its size."""
    if model == "gpt":
        return GPT(vocab_size, **GPT_SHAPE, tie_weights=tie_weights)
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
GPT_LRS = (5e-4, 1e-3, 2e-3)
LSTM_LRS = (2.5e-3, 5e-3, 1e-2)


def _spec(title, points, records, description):
    return SweepSpec(
        title=title,
        run=lm_run,
        points=points,
        config=CONFIG,
        recipe=RECIPE,
        modules=MODULES,
        metrics=METRICS,
        records=records,
        description=description,
    )


SWEEPS = {
    "gpt_vs_lstm": _spec(
        f"GPT against an LSTM of the same size, {STEPS} steps each, three learning rates each",
        [{"model": "gpt", "lr": lr, "steps": STEPS} for lr in GPT_LRS]
        + [{"model": "lstm", "lr": lr, "steps": STEPS} for lr in LSTM_LRS],
        [("bpc", "gpt_vs_lstm_heldout_bpc/equal_steps/{model}/lr{lr}")],
        "The capstone GPT (4 blocks, 4 heads, width 128, context 64; 828,264 parameters) and a "
        "two-layer LSTM (246 units, embeddings 64; 825,448 parameters), each trained for the "
        "chapter's 1350 steps of 12 windows of 64 characters with GPT_RECIPE at three learning "
        "rates (a factor of 2 apart, around each model's usual value). 3 seeds.",
    ),
    "gpt_weight_tying": _spec(
        f"The GPT with its output layer tied to its token embedding, {STEPS} steps (learning rate 0.001)",
        [{"model": "gpt", "lr": 1e-3, "steps": STEPS, "tie_weights": True}],
        [("bpc", "gpt_weight_tying_heldout_bpc/tied")],
        "The capstone GPT with tie_weights=True (the output layer's weight is the token embedding, "
        "Press & Wolf 2017), trained as the untied GPT of gpt_vs_lstm at learning rate 0.001, same "
        "seeds. 3 seeds.",
    ),
}


def kv_cache_generate_speedup(args, tokens=500, repeats=3):
    """Generation of 500 tokens (one prompt character, batch 1) by a GPT of the capstone's shape
    with a context of 512, without and with the KV cache: median seconds of 3, interleaved; the
    value is uncached / cached. The weights are untrained: the time does not depend on them."""
    torch.manual_seed(0)
    gpt = GPT(104, **dict(GPT_SHAPE, max_len=tokens + 12)).eval()
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


BENCHMARKS = [("GPT: generation of 500 tokens with and without the KV cache", kv_cache_generate_speedup)]
