"""Seq2seq with and without attention: the headline numbers of chapters 3 and 4.

The same recipe as the notebooks (course_lib.seq2seq_train.train_seq2seq: one-cycle Adam, batches
grouped by length, seed 0), so the numbers should match the chapters' up to BLAS differences.
"""

import dataclasses
import time

import torch
from common import record

from course_lib import data, seq2seq_train, train
from course_lib import seq2seq as S


def _dates():
    train_pairs, test_pairs = data.date_pairs(20000, seed=1), data.date_pairs(1000, seed=2)
    src = data.Vocab.from_text([s for s, _ in train_pairs])
    tgt = data.Vocab.from_text([t for _, t in train_pairs])
    return train_pairs, test_pairs, src, tgt


def _one_thread(fn):
    def wrapped(args):
        before = torch.get_num_threads()
        torch.set_num_threads(1)  # tiny models: faster on one thread (as in the notebooks)
        try:
            return fn(args)
        finally:
            torch.set_num_threads(before)

    wrapped.__name__ = fn.__name__
    return wrapped


@_one_thread
def dates_attention_exact_match(args):
    """Chapter 4's date model: Luong decoder, concat score, 400 steps."""
    train_pairs, test_pairs, src, tgt = _dates()
    train.seed_everything(0)
    model = S.build_model(
        len(src), len(tgt), attention="luong", score="concat", hidden_size=64, embed_size=32
    )
    start = time.perf_counter()
    seq2seq_train.train_seq2seq(model, train_pairs, src, tgt, 400, progress=False)
    seconds = time.perf_counter() - start
    result = S.evaluate(model, test_pairs, src, tgt)
    return [
        record("dates_attention_exact_match", result["exact_match"], "fraction"),
        record("dates_attention_train_seconds", seconds, "s"),
    ]


def threads_tiny_model(args):
    """Why the notebooks set one thread: ms per training step of chapter 4's date model (Bahdanau,
    bidirectional, hidden 64, batches of 64) on 1 and on 2 threads, the median of 3 runs of 40
    steps each (after a warm-up run), measured in the same run. Ratio: 2 threads / 1 thread."""
    train_pairs, _, src, tgt = _dates()
    before = torch.get_num_threads()
    ms = {}
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            runs = []
            for i in range(4):
                train.seed_everything(0)
                model = S.build_model(
                    len(src),
                    len(tgt),
                    attention="bahdanau",
                    hidden_size=64,
                    embed_size=32,
                    bidirectional=True,
                )
                start = time.perf_counter()
                seq2seq_train.train_seq2seq(model, train_pairs, src, tgt, 40, progress=False)
                if i:  # the first run warms up
                    runs.append((time.perf_counter() - start) / 40 * 1000)
            ms[threads] = sorted(runs)[1]
    finally:
        torch.set_num_threads(before)
    return [record("seq2seq_train_step/2_threads_vs_1", ms[2], "ms", baseline=ms[1])]


# The score functions and the copy task by length are sweeps (3 seeds), below.
BENCHMARKS = [
    ("Seq2seq: dates with Luong attention (held-out exact match, 400 steps)", dates_attention_exact_match),
    ("Threads: a training step of chapter 4's date model on 2 threads against 1 (ms)", threads_tiny_model),
]


# ---------------------------------------------------------------------------
# Sweeps (benchmarks/sweep.py): chapters 3 and 4 on the evidence protocol
# ---------------------------------------------------------------------------

from common import SweepSpec  # noqa: E402

LETTERS = "abcdefghijklmnopqrstuvwxyz"
COPY_LENGTHS = (4, 8, 12, 16, 20, 30, 40)  # trained on 1-20: 30 and 40 are beyond


def _copy_data():
    vocab = data.Vocab.from_text(LETTERS)
    return vocab, data.copy_pairs(20000, seed=1, min_len=1, max_len=20)


def bottleneck_run(point, seed, config):
    """Copy task (strings of 1-20 letters), trained `steps` with the chapters' recipe; held-out
    exact match and per-position accuracy at each length in COPY_LENGTHS (100 strings each),
    and greedy vs beam search (with and without length normalisation) on 300 mixed lengths."""
    vocab, pairs = _copy_data()
    flip = (lambda s: s[::-1]) if point.get("reverse") else (lambda s: s)
    train.seed_everything(seed)
    attention, score = (None, None) if point["model"] == "no_attention" else ("luong", "dot")
    model = S.build_model(
        len(vocab), len(vocab), attention=attention, score=score, hidden_size=point["hidden"], embed_size=32
    )
    seq2seq_train.train_seq2seq(
        model,
        [(flip(s), t) for s, t in pairs],
        vocab,
        vocab,
        point["steps"],
        dataclasses.replace(seq2seq_train.SEQ2SEQ_RECIPE, lr=config["lr"]),
        seed=seed,
        progress=False,
    )
    out = {}
    for n in COPY_LENGTHS:
        held_out = [(flip(s), t) for s, t in data.copy_pairs(100, seed=100 + n, min_len=n, max_len=n)]
        preds = S.translate(model, [s for s, _ in held_out], vocab, vocab, max_len=n + 2)
        out[f"em_{n}"] = train.exact_match(preds, [t for _, t in held_out])
        out[f"acc_{n}"] = train.position_accuracy(preds, [t for _, t in held_out])
        if n in (4, 8):
            for i in range(n):
                out[f"acc_{n}_pos{i + 1}"] = sum(
                    len(p) > i and p[i] == t[i] for p, (_, t) in zip(preds, held_out)
                ) / len(held_out)
    mixed = [(flip(s), t) for s, t in data.copy_pairs(300, seed=99, min_len=1, max_len=20)]
    for beam, penalty in ((1, 0.0), (5, 0.0), (5, 1.0)):
        preds = S.translate(
            model, [s for s, _ in mixed], vocab, vocab, max_len=22, beam_size=beam, length_penalty=penalty
        )
        tag = "greedy" if beam == 1 else f"beam{beam}_lp{penalty:g}"
        out[f"mixed_em_{tag}"] = train.exact_match(preds, [t for _, t in mixed])
        out[f"mixed_len_{tag}"] = sum(len(p) for p in preds) / len(preds)
    return out


def _variant(label):
    """'bahdanau_concat', 'luong_<score>', 'luong_concat_feed' (input feeding), 'luong_local_p'."""
    if label.startswith("bahdanau"):
        return dict(attention="bahdanau", score="concat")
    if label == "luong_concat_feed":
        return dict(attention="luong", score="concat", input_feeding=True)
    if label == "luong_local_p":
        return dict(attention="luong", score="concat", window=4, local="predictive")
    return dict(attention="luong", score=label[len("luong_") :])


SWEEPS = {
    "bottleneck_exact_match": SweepSpec(
        title="Copy task without attention: held-out exact match by length, hidden size and "
        "budget; the source reversed; greedy vs beam search",
        run=bottleneck_run,
        points=[
            {"model": "no_attention", "hidden": 64, "steps": s, "reverse": False} for s in (250, 1000, 2000)
        ]
        + [{"model": "no_attention", "hidden": 128, "steps": 1000, "reverse": False}]
        + [{"model": "no_attention", "hidden": 64, "steps": 250, "reverse": True}],
        config={"lr": 1e-2, "train_lengths": [1, 20], "held_out_per_length": 100},
        smoke={"steps": 8},
        margins={"em_budget": 0.1, "em_width": 0.05, "em_greedy_vs_beam": 0.02, "acc_reversed": 0.02},
        metrics={
            **{
                f"{m}_{n}": {"unit": "fraction", "higher_is_better": True}
                for m in ("em", "acc")
                for n in COPY_LENGTHS
            },
            **{
                f"acc_{n}_pos{i}": {"unit": "fraction", "higher_is_better": True}
                for n in (4, 8)
                for i in range(1, n + 1)
            },
            **{
                f"mixed_em_{d}": {"unit": "fraction", "higher_is_better": True}
                for d in ("greedy", "beam5_lp0", "beam5_lp1")
            },
            **{
                f"mixed_len_{d}": {"unit": "characters", "higher_is_better": False}
                for d in ("greedy", "beam5_lp0", "beam5_lp1")
            },
        },
        records=[
            (f"em_{n}", f"bottleneck_exact_match/{{hidden}}/{n}/{{model}}/{{steps}}/reverse={{reverse}}")
            for n in (4, 8, 12, 20)
        ],
    ),
}

SWEEPS["copy_attention_lengths"] = SweepSpec(
    title="Copy task with Luong dot attention (400 steps, trained on 1-20 letters): held-out exact "
    "match and per-position accuracy by length, within and beyond the training lengths",
    run=bottleneck_run,
    points=[{"model": "luong_dot", "hidden": 64, "steps": 400, "reverse": False}],
    config=SWEEPS["bottleneck_exact_match"].config,
    smoke={"steps": 8},
    margins={"em_length": 0.3, "em_vs_no_attention": 0.1},
    metrics=SWEEPS["bottleneck_exact_match"].metrics,
    records=[(f"em_{n}", f"copy_attention_exact_match/{n}/{{model}}/{{steps}}") for n in (20, 30, 40)],
)

# The bottleneck as a capacity claim: the model without attention at doubling budgets, for two
# hidden sizes, until the last doubling no longer helps (chapter 3, "What a fixed vector holds").
# One sweep per hidden size so that the two can run side by side, one core each.
for _hidden in (32, 64):
    SWEEPS[f"bottleneck_plateau_h{_hidden}"] = SweepSpec(
        title=f"Copy task without attention, hidden size {_hidden}: held-out exact match by length "
        "at doubling budgets (2000, 4000, 8000 steps)",
        run=bottleneck_run,
        points=[
            {"model": "no_attention", "hidden": _hidden, "steps": s, "reverse": False}
            for s in (2000, 4000, 8000)
        ],
        config=SWEEPS["bottleneck_exact_match"].config,
        smoke={"steps": 8},
        margins={"in_range_width": 0.02},
        metrics=SWEEPS["bottleneck_exact_match"].metrics,
        records=[
            (f"em_{n}", f"bottleneck_exact_match/{{hidden}}/{n}/{{model}}/{{steps}}/plateau_sweep")
            for n in (4, 8, 12, 20)
        ],
        description="The encoder-decoder GRU without attention (embeddings 32) trained on strings of 1-20 "
        "letters with the chapters' recipe (Adam 0.01, one-cycle schedule) for 2000, 4000 and 8000 "
        "steps: where the last doubling stops helping, the model has reached what this recipe gets "
        "out of a fixed vector of this size. 3 seeds.",
    )


def plateau_sweep(title, points, description):
    """A sweep of the model without attention with bottleneck_exact_match's recipe and the
    plateau sweeps' records."""
    base = SWEEPS["bottleneck_exact_match"]
    return SweepSpec(
        title=title,
        run=bottleneck_run,
        points=points,
        config=base.config,
        smoke={"steps": 8},
        margins={"in_range_width": 0.02},
        metrics=base.metrics,
        records=SWEEPS["bottleneck_plateau_h32"].records,
        description=description,
    )


# The two narrowest vectors at the same budgets (they too still gained at 8000 steps).
SWEEPS["bottleneck_plateau_small"] = plateau_sweep(
    "Copy task without attention, hidden sizes 8 and 16: held-out exact match by length at "
    "doubling budgets (2000, 4000, 8000 steps)",
    [
        {"model": "no_attention", "hidden": h, "steps": s, "reverse": False}
        for h in (8, 16)
        for s in (2000, 4000, 8000)
    ],
    "bottleneck_plateau_h32 / _h64 with context vectors of 8 and 16 numbers: the same model "
    "and recipe at 2000, 4000 and 8000 steps. 3 seeds.",
)

# One more doubling (16000 steps) for the three narrowest vectors: does the gain of the last
# doubling (4000 -> 8000, positive for every width and seed) shrink to nothing? (It does not.)
SWEEPS["bottleneck_plateau_16k"] = plateau_sweep(
    "Copy task without attention, hidden sizes 8, 16 and 32: held-out exact match by length "
    "after 16000 steps",
    [{"model": "no_attention", "hidden": h, "steps": 16000, "reverse": False} for h in (8, 16, 32)],
    "bottleneck_plateau_small / _h32 one doubling further: the same model and recipe "
    "(one-cycle schedule over the whole budget) trained for 16000 steps. 3 seeds.",
)


# ---------------------------------------------------------------------------
# Chapters 3 and 4, second round (REVIEW.md A5-A9, B8-B12, C): a held-out set with no training
# input in it, exposure bias measured, the reversal at several budgets, the encoders' confounds
# (parameters, reading direction) and the sqrt(d) mechanism tested by interventions.
# ---------------------------------------------------------------------------

import torch.nn.functional as F  # noqa: E402

from course_lib import decoding  # noqa: E402


def _dates_held_out():
    """_dates() with the held-out inputs that also occur in the training set removed (the same
    date drawn twice in the same format): 942 of the 1000 remain."""
    train_pairs, test_pairs, src, tgt = _dates()
    seen = {s for s, _ in train_pairs}
    return train_pairs, [(s, t) for s, t in test_pairs if s not in seen], src, tgt


@torch.no_grad()
def exposure_bias(model, pairs, src_vocab, tgt_vocab):
    """Every target token (<eos> included) predicted twice: teacher forced (the decoder reads the
    true prefix) and free running (greedy decoding reads its own outputs). Up to a sequence's
    first error both read the same prefix; after it they differ only in what they read.

    -> tf_accuracy, free_accuracy: over all target tokens; tf_exact: sequences with every
       teacher-forced token right (the ones greedy decoding gets exactly right);
       after_tf, after_free: over the tokens after each sequence's first error; after_tokens
    """
    was_training = model.training
    model.eval()
    batch = data.encode_pairs(pairs, src_vocab, tgt_vocab)
    gold = batch["tgt_out"]  # (N, T): y_1 .. y_n <eos>, then padding
    real = gold != tgt_vocab.pad_id  # (N, T)
    forced = model(batch["src"], batch["src_len"], batch["tgt_in"])[0].argmax(-1)  # (N, T)
    y0 = torch.full_like(batch["src_len"], tgt_vocab.bos_id)  # (N,) <bos>
    state = model.start(batch["src"], batch["src_len"])
    free, _ = decoding.greedy(model.step, y0, state, gold.shape[1], tgt_vocab.eos_id)  # (N, L <= T)
    free = F.pad(free, (0, gold.shape[1] - free.shape[1]), value=tgt_vocab.eos_id)  # (N, T)
    tf_right, free_right = (forced == gold) & real, (free == gold) & real  # (N, T)
    wrong = real & ~tf_right
    T = gold.shape[1]
    first = torch.where(wrong.any(1), wrong.int().argmax(1), T)  # (N,): first teacher-forced error
    after = real & (torch.arange(T) > first[:, None])  # (N, T): the tokens after it
    model.train(was_training)
    n, n_after = real.sum().item(), max(after.sum().item(), 1)
    return {
        "tf_accuracy": tf_right.sum().item() / n,
        "free_accuracy": free_right.sum().item() / n,
        "tf_exact": (~wrong.any(1)).float().mean().item(),
        "after_tf": tf_right[after].sum().item() / n_after,
        "after_free": free_right[after].sum().item() / n_after,
        "after_tokens": after.sum().item(),
    }


def dates_plain_run(point, seed, config):
    """Chapter 3's date model (no attention) trained `steps`: held-out exact match and
    per-position accuracy (the held-out inputs in ISO form too), and exposure bias."""
    train_pairs, test_pairs, src, tgt = _dates_held_out()
    train.seed_everything(seed)
    model = S.build_model(
        len(src), len(tgt), attention=None, hidden_size=config["hidden"], embed_size=config["embed"]
    )
    seq2seq_train.train_seq2seq(
        model,
        train_pairs,
        src,
        tgt,
        point["steps"],
        dataclasses.replace(seq2seq_train.SEQ2SEQ_RECIPE, lr=config["lr"]),
        seed=seed,
        progress=False,
    )
    out = S.evaluate(model, test_pairs, src, tgt)
    iso = [(s, t) for s, t in test_pairs if s == t]
    out["iso_exact_match"] = S.evaluate(model, iso, src, tgt)["exact_match"]
    out.update(exposure_bias(model, test_pairs, src, tgt))
    return out


def _metrics(names, unit="fraction", higher_is_better=True):
    return {m: {"unit": unit, "higher_is_better": higher_is_better} for m in names}


HELD_OUT = "date_pairs(1000, seed=2) minus the inputs that occur in training"

SWEEPS["dates_no_attention"] = SweepSpec(
    title="Dates without attention (chapter 3): held-out exact match after 300, 1000 and 3000 "
    "steps, and exposure bias (teacher-forced vs free-running accuracy after the first error)",
    run=dates_plain_run,
    points=[{"steps": s} for s in (300, 1000, 3000)],
    config={"lr": 1e-2, "hidden": 64, "embed": 32, "held_out": HELD_OUT},
    smoke={"steps": 8},
    margins={"em_budget": 0.2, "after_error_gap": 0.05},
    metrics={
        **_metrics(("exact_match", "position_accuracy", "iso_exact_match", "tf_accuracy", "free_accuracy")),
        **_metrics(("tf_exact", "after_tf", "after_free")),
        **_metrics(["after_tokens"], "tokens", False),
    },
    description="Chapter 3's encoder-decoder GRU without attention (hidden 64, embeddings 32) on the "
    "dates with the course's recipe, evaluated on the 942 held-out dates whose input does not occur "
    "in training. Exposure bias: after a sequence's first error, the accuracy of the remaining "
    "tokens when the decoder reads the true prefix (teacher forced) and when it reads its own "
    "outputs (greedy). 3 seeds.",
)

SWEEPS["copy_reversal"] = SweepSpec(
    title="Copy task without attention, source reversed, after 1000, 2000 and 4000 steps (the same "
    "models with the source as is: bottleneck_exact_match, bottleneck_plateau_h64; same seeds)",
    run=bottleneck_run,
    points=[{"model": "no_attention", "hidden": 64, "steps": s, "reverse": True} for s in (1000, 2000, 4000)],
    config=SWEEPS["bottleneck_exact_match"].config,
    smoke={"steps": 8},
    margins={"acc_reversed": 0.02},
    metrics=SWEEPS["bottleneck_exact_match"].metrics,
    description="bottleneck_exact_match's reversed-source point (250 steps) at three more budgets, "
    "for chapter 3's reversal section: a run and its partner with the source as is share the "
    "seed, the initial weights and the order of the batches, so they compare in pairs. 3 seeds.",
)
