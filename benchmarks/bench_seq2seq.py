"""Seq2seq with and without attention: the headline numbers of chapters 3 and 4.

The same recipe as the notebooks (course_lib.recipes.train_seq2seq: one-cycle Adam, batches
grouped by length, seed 0), so the numbers should match the chapters' up to BLAS differences.
"""

import time

import torch
from common import record

from course_lib import data, recipes, train
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
    recipes.train_seq2seq(model, train_pairs, src, tgt, 400, progress=False)
    seconds = time.perf_counter() - start
    result = S.evaluate(model, test_pairs, src, tgt)
    return [
        record("dates_attention_exact_match", result["exact_match"], "fraction"),
        record("dates_attention_train_seconds", seconds, "s"),
    ]


# The score functions and the copy task by length are sweeps (3 seeds), below.
BENCHMARKS = [
    ("Seq2seq: dates with Luong attention (held-out exact match, 400 steps)", dates_attention_exact_match),
]


# ---------------------------------------------------------------------------
# Sweeps (benchmarks/sweep.py): chapters 3 and 4 on the evidence protocol
# ---------------------------------------------------------------------------

from common import SweepSpec  # noqa: E402

from course_lib import alignment as L  # noqa: E402

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
    recipes.train_seq2seq(
        model,
        [(flip(s), t) for s, t in pairs],
        vocab,
        vocab,
        point["steps"],
        lr=config["lr"],
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


def _date_setup():
    train_pairs, test_pairs, src, tgt = _dates()
    return train_pairs, test_pairs, src, tgt, max(len(s) for s, _ in train_pairs) + 4


def _variant(label):
    """'bahdanau_concat', 'luong_<score>', 'luong_concat_feed' (input feeding), 'luong_local_p'."""
    if label.startswith("bahdanau"):
        return dict(attention="bahdanau", score="concat")
    if label == "luong_concat_feed":
        return dict(attention="luong", score="concat", input_feeding=True)
    if label == "luong_local_p":
        return dict(attention="luong", score="concat", window=4, local="predictive")
    return dict(attention="luong", score=label[len("luong_") :])


@torch.no_grad()
def _key_statistics(model, pairs, src):
    """Variance per component of the encoder states (the keys) over real positions, and the
    standard deviation of the unscaled dot score q.k between decoder states and keys."""
    from course_lib.data import pad_batch

    x, lengths = pad_batch([src.encode(s) for s, _ in pairs[:500]], src.pad_id)
    memory = model.encode(x, lengths)
    real = torch.arange(x.shape[1])[None] < lengths[:, None]
    keys = memory.outputs[real]  # (N, H)
    return {"key_var": keys.var(0).mean().item(), "key_norm": keys.norm(dim=-1).mean().item()}


def scores_run(point, seed, config):
    """Dates: one decoder variant trained `steps` with the chapter's recipe; held-out exact match,
    per-position accuracy, alignment accuracy (teacher forced) and the keys' variance."""
    train_pairs, test_pairs, src, tgt, max_src = _date_setup()
    train.seed_everything(seed)
    model = S.build_model(
        len(src),
        len(tgt),
        hidden_size=64,
        embed_size=32,
        max_src_len=max_src,
        bidirectional=point.get("bidirectional", False),
        **_variant(point["variant"]),
    )
    recipes.train_seq2seq(
        model, train_pairs, src, tgt, point["steps"], lr=config["lr"], seed=seed, progress=False
    )
    out = S.evaluate(model, test_pairs, src, tgt)
    weights = L.teacher_forced_weights(model, test_pairs, src, tgt)
    out["alignment_accuracy"] = L.alignment_accuracy(weights, [L.date_sources(s) for s, _ in test_pairs])
    out.update(_key_statistics(model, test_pairs, src))
    return out


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
    "seq2seq_attention_scores": SweepSpec(
        title="Dates: every score function (100 steps) and Bahdanau with a uni- or bidirectional "
        "encoder (500 steps): exact match, alignment accuracy, keys' variance",
        run=scores_run,
        points=[
            {"variant": v, "steps": 100, "bidirectional": False}
            for v in (
                "bahdanau_concat",
                "luong_dot",
                "luong_scaled_dot",
                "luong_general",
                "luong_concat",
                "luong_location",
                "luong_cosine",
                "luong_concat_feed",
                "luong_local_p",
            )
        ]
        + [{"variant": "bahdanau_concat", "steps": 500, "bidirectional": b} for b in (False, True)],
        config={"lr": 1e-2, "hidden": 64, "embed": 32},
        smoke={"steps": 8},
        margins={"em_score": 0.1, "alignment_score": 0.1, "em_local": 0.02},
        metrics={
            "exact_match": {"unit": "fraction", "higher_is_better": True},
            "position_accuracy": {"unit": "fraction", "higher_is_better": True},
            "alignment_accuracy": {"unit": "fraction", "higher_is_better": True},
            "key_var": {"unit": "variance per component", "higher_is_better": False},
            "key_norm": {"unit": "L2 norm", "higher_is_better": False},
        },
        records=[
            ("exact_match", "score_function_exact_match/{variant}/{steps}/bi={bidirectional}"),
            ("alignment_accuracy", "bahdanau_alignment_accuracy/{variant}/{steps}/bi={bidirectional}"),
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

# Chapter 4's live comparison of the two encoders runs 300 steps (the notebook's time budget);
# the same two models with 3 seeds at that budget, for the page's overlay.
SWEEPS["bahdanau_encoders"] = SweepSpec(
    title="Dates: Bahdanau with a one-directional or a bidirectional encoder, 300 steps (chapter 4's "
    "live budget): exact match, alignment accuracy",
    run=scores_run,
    points=[{"variant": "bahdanau_concat", "steps": 300, "bidirectional": b} for b in (False, True)],
    config=SWEEPS["seq2seq_attention_scores"].config,
    smoke={"steps": 8},
    margins={"alignment_bi_vs_uni": 0.05},
    metrics=SWEEPS["seq2seq_attention_scores"].metrics,
    records=[
        ("exact_match", "score_function_exact_match/{variant}/{steps}/bi={bidirectional}"),
        ("alignment_accuracy", "bahdanau_alignment_accuracy/bi={bidirectional}"),
    ],
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
