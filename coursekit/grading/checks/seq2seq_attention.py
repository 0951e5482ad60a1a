"""References of the checks of chapter 4, "Attention in seq2seq"."""

from __future__ import annotations

import math

import torch

from ..references import Case, Reference, lib, load, randn, register


# --------------------------------------------------------------------------------------
# The additive (Bahdanau, "concat") score
# --------------------------------------------------------------------------------------
def _additive(q, k, W_q, W_k, v):
    module = load("attention.AdditiveScore")(q.shape[-1], k.shape[-1], W_q.shape[0])
    with torch.no_grad():
        module.W_q.weight.copy_(W_q)
        module.W_k.weight.copy_(W_k)
        module.v.weight.copy_(v[None])
        return module(q, k)


def _pairs(q_h, k_h):
    return q_h.unsqueeze(-2) + k_h.unsqueeze(-3)  # (..., T_q, T_k, d_h)


def _additive_written(q, k, W_q, W_k, v):
    """v^T tanh(W_q q_i + W_k k_j) for every pair, from tensor operations."""
    return torch.tanh(_pairs(q @ W_q.T, k @ W_k.T)) @ v  # (..., T_q, T_k)


def _additive_cases(g):
    def case(desc, q_shape, k_shape, d_h):
        return Case(
            desc,
            randn(g, *q_shape),
            randn(g, *k_shape),
            randn(g, d_h, q_shape[-1]),
            randn(g, d_h, k_shape[-1]),
            randn(g, d_h),
        )

    return [
        case("one query, four keys", (1, 3), (4, 3), 5),
        case("a batch, T_q != T_k, d_q != d_k", (2, 3, 4), (2, 6, 5), 8),
        case("a decoder state against the encoder states", (4, 1, 6), (4, 7, 6), 6),
    ]


register(
    "check_additive_score",
    Reference(
        seed=13,
        cases=_additive_cases,
        solution=_additive,
        written=_additive_written,
        mistakes=[
            lambda q, k, Wq, Wk, v: _additive_written(q, k, Wq, Wk, v).transpose(-2, -1),
            lambda q, k, Wq, Wk, v: _pairs(q @ Wq.T, k @ Wk.T) @ v,
            lambda q, k, Wq, Wk, v: torch.tanh(_pairs(q @ Wq, k @ Wk)) @ v,
        ],
        shortcuts=[_additive],
    ),
)


# --------------------------------------------------------------------------------------
# One Luong attention step
# --------------------------------------------------------------------------------------
def _luong(s, enc, mask, W_c, use_mask=True, context_first=True, tanh=True):
    """h~ = tanh(W_c [c; s]) with c the attention-weighted sum of enc; the keywords are mistakes."""
    scores = (enc @ s[:, :, None])[..., 0]  # (B, S)
    if use_mask:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, -1)  # (B, S)
    context = (weights[:, :, None] * enc).sum(1)  # (B, H)
    both = [context, s] if context_first else [s, context]
    h_tilde = torch.cat(both, -1) @ W_c.T  # (B, H)
    return torch.tanh(h_tilde) if tanh else h_tilde, weights


def _luong_by_attend(s, enc, mask, W_c):
    """The chapter's attend() with dot scores, then the attentional state."""
    context, weights = lib("attention.attend")((enc @ s[:, :, None])[..., 0][:, None], enc, mask[:, None])
    return torch.tanh(torch.cat([context[:, 0], s], -1) @ W_c.T), weights[:, 0]


def _luong_cases(g):
    def case(desc, B, S, H, lengths):
        mask = torch.arange(S) < torch.tensor(lengths)[:, None]
        enc = randn(g, B, S, H) * mask[..., None]
        return Case(desc, randn(g, B, H), enc, mask, randn(g, H, 2 * H, scale=0.5))

    return [
        case("no padding", 2, 5, 4, [5, 5]),
        case("right-padded sources", 3, 6, 4, [6, 2, 4]),
        case("a one-token source", 2, 3, 8, [1, 3]),
    ]


register(
    "check_luong_step",
    Reference(
        seed=14,
        cases=_luong_cases,
        solution=_luong,
        mistakes=[
            lambda *a: _luong(*a, use_mask=False),
            lambda *a: _luong(*a, context_first=False),
            lambda *a: _luong(*a, tanh=False),
        ],
        shortcuts=[_luong_by_attend],
    ),
)


# --------------------------------------------------------------------------------------
# Local attention weights
# --------------------------------------------------------------------------------------
def _local(scores, mask, p, window, gaussian=True):
    """Luong's local-p weights from tensor operations; gaussian=False is a typical mistake."""
    dist = torch.arange(scores.shape[-1]) - p[..., None]  # (B, T, S)
    allowed = mask[:, None, :] & (dist.abs() <= window)  # (B, T, S)
    weights = torch.nan_to_num(torch.softmax(scores.masked_fill(~allowed, -math.inf), -1))
    if gaussian:
        weights = weights * torch.exp(-(dist**2) / (2 * max(window / 2, 0.5) ** 2))
    return weights


def _local_cases(g):
    full = torch.ones(2, 8, dtype=torch.bool)
    padded = torch.arange(9) < torch.tensor([9, 5, 7])[:, None]
    return [
        Case(
            "centres inside the source, D = 2",
            randn(g, 2, 3, 8),
            full,
            torch.tensor([[1.0, 3.5, 6.2], [0.0, 4.0, 7.0]]),
            2,
        ),
        Case(
            "padded sources, D = 1",
            randn(g, 3, 2, 9),
            padded,
            torch.tensor([[2.0, 8.0], [4.4, 6.0], [0.3, 5.0]]),
            1,
        ),
        Case("a wide window, D = 4", randn(g, 1, 4, 8), full[:1], torch.tensor([[0.0, 2.0, 5.0, 7.5]]), 4),
    ]


def _gauss(scores, p, D):
    dist = torch.arange(scores.shape[-1]) - p[..., None]
    return torch.exp(-(dist**2) / (2 * max(D / 2, 0.5) ** 2))


register(
    "check_local_weights",
    Reference(
        seed=15,
        cases=_local_cases,
        solution=lib("seq2seq.local_weights"),
        written=_local,
        mistakes=[
            lambda s, m, p, D: _local(s, m, p, D, gaussian=False),
            lambda s, m, p, D: _local(s, torch.ones_like(m), p, D),
            lambda s, m, p, D: torch.softmax(s.masked_fill(~m[:, None], -math.inf), -1) * _gauss(s, p, D),
        ],
        shortcuts=[lambda s, m, p, D: lib("seq2seq.local_weights")(s, m, p, D)],
    ),
)


# --------------------------------------------------------------------------------------
# Predict, then measure: how large are scaled dot scores between tanh-bounded states?
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# Where attention looks: alignment accuracy
# --------------------------------------------------------------------------------------
def _alignment(weights, gold, scored_only=True, dim=-1, fraction=True):
    """The fraction of scored target positions whose argmax is the gold source position;
    the keywords are typical mistakes."""
    hits = weights.argmax(dim) if dim == -1 else weights.argmax(1)[:, None].expand_as(gold)
    scored = gold >= 0 if scored_only else torch.ones_like(gold, dtype=torch.bool)
    n_hits = float(((hits == gold) & scored).sum())
    return n_hits / float(scored.sum()) if fraction else n_hits


def _alignment_by_library(weights, gold):
    """course_lib.pages.alignment's accuracy, the gold positions given as its {t: (position,)} sources."""
    sources = [{t: (int(s),) for t, s in enumerate(row) if s >= 0} for row in gold]
    return float(load("pages.alignment.alignment_accuracy")(list(weights), sources))


def _alignment_cases(g):
    def case(description, B, T, S, unscored):
        weights = torch.softmax(randn(g, B, T, S, scale=3.0), -1)
        gold = torch.randint(0, S, (B, T), generator=g)
        gold[torch.rand(B, T, generator=g) < unscored] = -1
        agree = torch.rand(B, T, generator=g) < 0.6  # make most gold positions the argmax
        gold = torch.where(agree & (gold >= 0), weights.argmax(-1), gold)
        return Case(description, weights, gold)

    return [
        case("4 dates of 10 characters, 12 source positions", 4, 10, 12, 0.3),
        case("one target row per source position", 2, 6, 6, 0.0),
        case("half the positions unscored", 3, 8, 9, 0.5),
    ]


register(
    "check_alignment_accuracy",
    Reference(
        seed=16,
        cases=_alignment_cases,
        solution=_alignment,
        mistakes=[
            lambda w, g: _alignment(w, g, scored_only=False),
            lambda w, g: _alignment(w, g, dim=1),
            lambda w, g: _alignment(w, g, fraction=False),
        ],
        shortcuts=[_alignment_by_library],
    ),
)
