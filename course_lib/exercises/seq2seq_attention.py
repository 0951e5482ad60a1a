"""Checks for chapter 4, "Attention in seq2seq"."""

from __future__ import annotations

import math

import torch

from ._compare import within
from ._engine import Case, Check, Mistake, Prediction, lib, load, randn


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


def _additive_cases(g):
    def case(desc, q_shape, k_shape, d_h):
        return Case(desc, randn(g, *q_shape), randn(g, *k_shape), randn(g, d_h, q_shape[-1]),
                    randn(g, d_h, k_shape[-1]), randn(g, d_h))

    return [case("one query, four keys", (1, 3), (4, 3), 5),
            case("a batch, T_q != T_k, d_q != d_k", (2, 3, 4), (2, 6, 5), 8),
            case("a decoder state against the encoder states", (4, 1, 6), (4, 7, 6), 6)]


check_additive_score = Check(
    "check_additive_score", "fn(q (..., T_q, d_q), k (..., T_k, d_k), W_q (d_h, d_q), "
    "W_k (d_h, d_k), v (d_h,)) -> (..., T_q, T_k) = v^T tanh(W_q q_i + W_k k_j)",
    params=("q", "k", "W_q", "W_k", "v"),
    reference=_additive, cases=_additive_cases, seed=13,
    mistakes=[
        Mistake("the result is (T_k, T_q): queries index the rows.",
                lambda q, k, Wq, Wk, v: _additive(q, k, Wq, Wk, v).transpose(-2, -1)),
        Mistake("the tanh is missing: without it the score is linear, q and k never interact.",
                lambda q, k, Wq, Wk, v: _pairs(q @ Wq.T, k @ Wk.T) @ v),
        Mistake("the weights are applied transposed: W_q q means q @ W_q.T for row vectors.",
                lambda q, k, Wq, Wk, v: torch.tanh(_pairs(q @ Wq, k @ Wk)) @ v),
    ],
    hints=["Project the queries and the keys into the same d_h-dim space with their own "
           "matrices (row vectors: q @ W_q.T).",
           "Add every projected query to every projected key by broadcasting: unsqueeze so that "
           "the result is (..., T_q, T_k, d_h).",
           "Apply the nonlinearity, then reduce the last dim with v."],
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


def _luong_cases(g):
    def case(desc, B, S, H, lengths):
        mask = torch.arange(S) < torch.tensor(lengths)[:, None]
        enc = randn(g, B, S, H) * mask[..., None]
        return Case(desc, randn(g, B, H), enc, mask, randn(g, H, 2 * H, scale=0.5))

    return [case("no padding", 2, 5, 4, [5, 5]), case("right-padded sources", 3, 6, 4, [6, 2, 4]),
            case("a one-token source", 2, 3, 8, [1, 3])]


check_luong_step = Check(
    "check_luong_step", "fn(s (B, H), enc (B, S, H), mask (B, S) bool, W_c (H, 2H)) -> "
    "(h_tilde (B, H), weights (B, S)): one step of Luong's dot attention",
    params=("s", "enc", "mask", "W_c"),
    reference=_luong, cases=_luong_cases, seed=14, outputs=("h_tilde", "weights"),
    mistakes=[
        Mistake("padding positions got weight: mask them out (-inf) before the softmax.",
                lambda *a: _luong(*a, use_mask=False)),
        Mistake("the concatenation is [s_t; c_t]; Luong's is [c_t; s_t], the context first.",
                lambda *a: _luong(*a, context_first=False)),
        Mistake("the tanh is missing from the attentional state: h~ = tanh(W_c [c; s]).",
                lambda *a: _luong(*a, tanh=False)),
    ],
    hints=["Score every source position by its dot product with s_t, keep only the real "
           "positions, and normalise over the source.",
           "The context is the weighted sum of the encoder states; the attentional state "
           "combines the context and s_t through W_c and a tanh.",
           "Mind the order of the concatenation: Luong writes [c_t; h_t]."],
)


# --------------------------------------------------------------------------------------
# Local attention weights
# --------------------------------------------------------------------------------------
def _local(scores, mask, p, window, gaussian=True):
    return lib("seq2seq.local_weights")(scores, mask, p, window, gaussian=gaussian)


def _local_cases(g):
    full = torch.ones(2, 8, dtype=torch.bool)
    padded = torch.arange(9) < torch.tensor([9, 5, 7])[:, None]
    return [
        Case("centres inside the source, D = 2", randn(g, 2, 3, 8), full,
             torch.tensor([[1.0, 3.5, 6.2], [0.0, 4.0, 7.0]]), 2),
        Case("padded sources, D = 1", randn(g, 3, 2, 9), padded,
             torch.tensor([[2.0, 8.0], [4.4, 6.0], [0.3, 5.0]]), 1),
        Case("a wide window, D = 4", randn(g, 1, 4, 8), full[:1],
             torch.tensor([[0.0, 2.0, 5.0, 7.5]]), 4),
    ]


def _gauss(scores, p, D):
    dist = torch.arange(scores.shape[-1]) - p[..., None]
    return torch.exp(-dist**2 / (2 * max(D / 2, 0.5) ** 2))


check_local_weights = Check(
    "check_local_weights", "fn(scores (B, T, S), mask (B, S), p (B, T), window) -> (B, T, S): "
    "Luong's local-p weights",
    params=("scores", "mask", "p", "window"),
    reference=_local, cases=_local_cases, seed=15,
    mistakes=[
        Mistake("the Gaussian factor exp(-(j - p_t)^2 / (2 sigma^2)), sigma = D/2, is missing.",
                lambda s, m, p, D: _local(s, m, p, D, gaussian=False)),
        Mistake("padding positions inside the window got weight: combine the window with the mask.",
                lambda s, m, p, D: _local(s, torch.ones_like(m), p, D)),
        Mistake("the softmax runs over the whole source: only positions with |j - p_t| <= D take "
                "part (the others get weight 0 before the Gaussian).",
                lambda s, m, p, D: torch.softmax(s.masked_fill(~m[:, None], -math.inf), -1)
                * _gauss(s, p, D)),
    ],
    hints=["Which positions j take part in the softmax of row t? Those inside the window "
           "around p_t that are also real (mask True).",
           "Build that (B, T, S) bool pattern from the distances j - p_t and the mask, and take "
           "a masked softmax with it.",
           "Then multiply by the Gaussian centred on p_t with sigma = D / 2."],
)


# --------------------------------------------------------------------------------------
# Predict, then measure: how large are scaled dot scores between tanh-bounded states?
# --------------------------------------------------------------------------------------
check_scaled_score_prediction = Prediction(
    "check_scaled_score_prediction", "your prediction of the standard deviation of the scaled "
    "dot score q.k / sqrt(d) for d = 64 and components drawn uniformly from (-1, 1), against the "
    "measurement",
    quantity="the standard deviation of q.k / sqrt(64) with q, k uniform in (-1, 1)^64",
    tolerance=within(rel=0.25), example=1 / 3,
    explanation=("q.k is a sum of d products q_i k_i, each of mean 0 and variance "
                 "Var(q_i) Var(k_i) = (1/3)^2 for components uniform in (-1, 1); so Var(q.k) = "
                 "d/9 and the scaled score has standard deviation 1/3, whatever d. Dividing by "
                 "sqrt(d) gives unit variance only for unit-variance components. States squashed "
                 "by tanh, like a GRU's, have a smaller variance (and trained encoders smaller "
                 "still), so their scaled scores are small and the softmax starts out nearly "
                 "uniform: the scaling that protects a Transformer's softmax from saturating makes "
                 "this one slow to sharpen."),
    mistakes=[
        Mistake("the division by sqrt(d) makes the variance 1 only when q and k have unit-variance "
                "components; these are bounded by 1 in absolute value.", lambda m: 3 * m),
        Mistake("that is the unscaled score's spread (sqrt(d) times larger): the score here is "
                "divided by sqrt(d) = 8.", lambda m: 8 * m),
    ],
    hints=["Write q.k as a sum of d independent products and find the variance of one product.",
           "The variance of a uniform variable on (-1, 1) is (b - a)^2 / 12."],
)
