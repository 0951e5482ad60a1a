"""Chapter 4's sweeps: Bahdanau's decoder over four encoders (dates_encoders) and the score
functions with what attention looks like during training (dates_scores), on the held-out dates
of chapter 3's second round (``bench_seq2seq.py``, which holds chapter 3's sweeps and the
seq2seq benchmarks) and with its recipe.
"""

import dataclasses

import torch
from bench_seq2seq import HELD_OUT, _dates_held_out, _metrics, _variant
from common import SweepSpec

from course_lib import attention as A
from course_lib import data, seq2seq_train, train
from course_lib import seq2seq as S
from course_lib.pages import alignment as L

SWEEPS = {}


# Bahdanau's decoder over four encoders: the page's two (one-directional, bidirectional), a
# one-directional one as wide as the bidirectional one has parameters (84: 106,783 against
# 106,799), and a one-directional one that reads the source backwards.
ENCODERS = {
    "uni": {"hidden_size": 64},
    "bi": {"hidden_size": 64, "bidirectional": True},
    "uni_wide": {"hidden_size": 84},
    "backward": {"hidden_size": 64},
}


def _offset_shares(offsets):
    n = len(offsets)
    return {
        "on_source": sum(o == 0 for o in offsets) / n,
        "right_of_source": sum(o > 0 for o in offsets) / n,
        "left_of_source": sum(o < 0 for o in offsets) / n,
    }


def encoders_run(point, seed, config):
    """Dates: Bahdanau's decoder (additive score) over one of ENCODERS, trained `steps`; held-out
    exact match, alignment accuracy, and where the largest weight lands relative to the source
    character (the backward encoder's weights are flipped back into reading order first)."""
    train_pairs, test_pairs, src, tgt = _dates_held_out()
    flip = (lambda s: s[::-1]) if point["encoder"] == "backward" else (lambda s: s)
    train.seed_everything(seed)
    model = S.build_model(
        len(src),
        len(tgt),
        attention="bahdanau",
        embed_size=config["embed"],
        max_src_len=max(len(s) for s, _ in train_pairs) + 4,
        **ENCODERS[point["encoder"]],
    )
    read = [(flip(s), t) for s, t in train_pairs]
    seq2seq_train.train_seq2seq(
        model,
        read,
        src,
        tgt,
        point["steps"],
        dataclasses.replace(seq2seq_train.SEQ2SEQ_RECIPE, lr=config["lr"]),
        seed=seed,
        progress=False,
    )
    held_out = [(flip(s), t) for s, t in test_pairs]
    out = S.evaluate(model, held_out, src, tgt)
    weights = L.teacher_forced_weights(model, held_out, src, tgt)
    if point["encoder"] == "backward":
        weights = [w.flip(-1) for w in weights]  # (T, S): source positions in reading order again
    sources = [L.date_sources(s) for s, _ in test_pairs]
    out["alignment_accuracy"] = L.alignment_accuracy(weights, sources)
    out.update(_offset_shares(L.argmax_offsets(weights, sources)))
    out["parameters"] = sum(p.numel() for p in model.parameters())
    return out


SWEEPS["dates_encoders"] = SweepSpec(
    title="Dates: Bahdanau's model with a one-directional, a bidirectional, a parameter-matched "
    "one-directional and a backward-reading encoder, 300 steps: exact match, alignment accuracy, "
    "where the largest weight lands",
    run=encoders_run,
    points=[{"encoder": e, "steps": 300} for e in ENCODERS],
    config={"lr": 1e-2, "embed": 32, "held_out": HELD_OUT},
    smoke={"steps": 8},
    margins={
        "alignment_bi_vs_uni": 0.05,
        "alignment_bi_vs_wide": 0.05,
        "offset_direction": 0.05,
        "em_vs_no_attention": 0.2,  # exact match against dates_no_attention at the same budget
    },
    metrics={
        **_metrics(("exact_match", "position_accuracy", "alignment_accuracy")),
        **_metrics(("on_source", "right_of_source", "left_of_source")),
        **_metrics(["parameters"], "parameters", False),
    },
    description="Chapter 4's two encoders (the page trains seed 0 of each) and two interventions: "
    "a one-directional encoder with as many parameters as the bidirectional one (hidden 84), and "
    "a one-directional encoder that reads the source backwards (its states have read what "
    "follows a character, not what precedes it). Evaluated on the 942 held-out dates whose input "
    "does not occur in training. 3 seeds.",
)


class DotOver(torch.nn.Module):
    """The dot score divided by a constant: q . k / c (c = 1: dot; c = sqrt(d) = 8: scaled dot)."""

    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, q, k):
        return A.dot_score(q, k) / self.c  # (B, T, S)


SCORE_VARIANTS = (
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


@torch.no_grad()
def attention_statistics(model, pairs, src_vocab, tgt_vocab):
    """Teacher forced on `pairs`: the variance per component of the queries (the decoder states
    that score) and of the keys (the encoder states), the standard deviation of the raw products
    q.k and of the scores the softmax receives, over real (t, j) pairs, and the mean largest
    weight of an attention row."""
    calls = []
    hook = model.decoder.score.register_forward_hook(lambda mod, args, out: calls.append((*args, out)))
    was_training = model.training
    model.eval()
    batch = data.encode_pairs(pairs, src_vocab, tgt_vocab)
    _, weights = model(batch["src"], batch["src_len"], batch["tgt_in"])  # (B, T, S)
    hook.remove()
    model.train(was_training)
    q = torch.cat([c[0] for c in calls], 1)  # (B, T, H): one call for all steps, or one per step
    k = calls[0][1]  # (B, S, H)
    scores = torch.cat([c[2] for c in calls], 1)  # (B, T, S)
    q_real = batch["tgt_in"] != tgt_vocab.pad_id  # (B, T)
    k_real = torch.arange(k.shape[1]) < batch["src_len"][:, None]  # (B, S)
    both = q_real[:, :, None] & k_real[:, None, :]  # (B, T, S)
    return {
        "query_var": q[q_real].var(0).mean().item(),
        "key_var": k[k_real].var(0).mean().item(),
        "raw_std": (q @ k.transpose(1, 2))[both].std().item(),
        "score_std": scores[both].std().item(),
        "max_weight": weights.max(-1).values[q_real].mean().item(),
    }


PROBE_STEPS = (25, 50, 100)


def scores_probe_run(point, seed, config):
    """Dates: one decoder and score (SCORE_VARIANTS, or luong_dot_over_C: the dot score divided by
    C) trained `steps` at learning rate `lr`; held-out exact match, alignment accuracy, the
    scores' statistics at the end, and the mean largest attention weight after 25, 50 and 100
    steps (on 200 held-out dates)."""
    train_pairs, test_pairs, src, tgt = _dates_held_out()
    variant = point["variant"]
    over = variant.startswith("luong_dot_over_")
    train.seed_everything(seed)
    model = S.build_model(
        len(src),
        len(tgt),
        hidden_size=config["hidden"],
        embed_size=config["embed"],
        max_src_len=max(len(s) for s, _ in train_pairs) + 4,
        **(dict(attention="luong", score="dot") if over else _variant(variant)),
    )
    if over:
        model.decoder.score = DotOver(float(variant[len("luong_dot_over_") :]))
    probe, steps_done = {}, [0]

    def eval_fn(m):
        steps_done[0] += config["probe_every"]
        if steps_done[0] in PROBE_STEPS:
            stats = attention_statistics(m, test_pairs[:200], src, tgt)
            probe[f"max_weight_{steps_done[0]}"] = stats["max_weight"]

    seq2seq_train.train_seq2seq(
        model,
        train_pairs,
        src,
        tgt,
        point["steps"],
        dataclasses.replace(seq2seq_train.SEQ2SEQ_RECIPE, lr=point["lr"]),
        seed=seed,
        progress=False,
        eval_fn=eval_fn,
        eval_every=config["probe_every"],
    )
    out = S.evaluate(model, test_pairs, src, tgt)
    weights = L.teacher_forced_weights(model, test_pairs, src, tgt)
    out["alignment_accuracy"] = L.alignment_accuracy(weights, [L.date_sources(s) for s, _ in test_pairs])
    out.update(attention_statistics(model, test_pairs, src, tgt))
    out.update({f"max_weight_{s}": probe.get(f"max_weight_{s}", out["max_weight"]) for s in PROBE_STEPS})
    return out


_SCALES = ("luong_dot", "luong_dot_over_2", "luong_dot_over_4", "luong_scaled_dot")

SWEEPS["dates_scores"] = SweepSpec(
    title="Dates: every score function after 100 steps; the dot score divided by 1, 2, 4 and 8 "
    "(= sqrt(d)) after 100, 300 and 1000 steps and at three learning rates",
    run=scores_probe_run,
    points=[{"variant": v, "steps": 100, "lr": 1e-2} for v in SCORE_VARIANTS]
    + [{"variant": v, "steps": 100, "lr": 1e-2} for v in _SCALES[1:3]]
    + [{"variant": v, "steps": 300, "lr": 1e-2} for v in _SCALES]
    + [{"variant": v, "steps": 1000, "lr": 1e-2} for v in (_SCALES[0], _SCALES[3])]
    + [{"variant": v, "steps": 100, "lr": lr} for v in (_SCALES[0], _SCALES[3]) for lr in (3e-3, 3e-2)],
    config={"hidden": 64, "embed": 32, "probe_every": 25, "held_out": HELD_OUT},
    smoke={"steps": 8},
    margins={"em_score": 0.1, "alignment_score": 0.1, "em_local": 0.02, "max_weight_scale": 0.05},
    metrics={
        **_metrics(("exact_match", "position_accuracy", "alignment_accuracy")),
        **_metrics(("query_var", "key_var"), "variance per component", False),
        **_metrics(("raw_std", "score_std"), "std", False),
        **_metrics(["max_weight"] + [f"max_weight_{p}" for p in PROBE_STEPS], "weight", False),
    },
    description="Chapter 4's table (every score function, the chapter's recipe, 100 steps) on the "
    "942 held-out dates whose input does not occur in training, and the test of why the scaled "
    "dot score trails the dot score there: the dot score divided by c = 1, 2, 4, 8 (a dose of the "
    "same intervention), at longer budgets, and at learning rates 0.003 and 0.03 besides 0.01. "
    "The mean largest attention weight after 25, 50 and 100 steps measures how flat the softmax "
    "is early in training. 3 seeds.",
)
