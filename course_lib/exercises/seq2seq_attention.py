"""Checks for chapter 4, "Attention in seq2seq"."""

from __future__ import annotations

from ._compare import within
from ._engine import Check, Mistake, Prediction
from ._forbid import Forbidden
from .attention import SDPA

# --------------------------------------------------------------------------------------
# The additive (Bahdanau, "concat") score
# --------------------------------------------------------------------------------------
check_additive_score = Check(
    "check_additive_score",
    "fn(q (..., T_q, d_q), k (..., T_k, d_k), W_q (d_h, d_q), "
    "W_k (d_h, d_k), v (d_h,)) -> (..., T_q, T_k) = v^T tanh(W_q q_i + W_k k_j)",
    params=("q", "k", "W_q", "W_k", "v"),
    mistakes=[
        Mistake("the result is (T_k, T_q): queries index the rows."),
        Mistake("the tanh is missing: without it the score is linear, q and k never interact."),
        Mistake("the weights are applied transposed: W_q q means q @ W_q.T for row vectors."),
    ],
    hints=["Project the queries and the keys into the same d_h-dim space with their own "
           "matrices (row vectors: q @ W_q.T).",
           "Add every projected query to every projected key by broadcasting: unsqueeze so that "
           "the result is (..., T_q, T_k, d_h).",
           "Apply the nonlinearity, then reduce the last dim with v."],
    forbidden=(Forbidden("course_lib.attention.AdditiveScore"),
               Forbidden("course_lib.attention.make_score")),
)


# --------------------------------------------------------------------------------------
# One Luong attention step
# --------------------------------------------------------------------------------------
check_luong_step = Check(
    "check_luong_step",
    "fn(s (B, H), enc (B, S, H), mask (B, S) bool, W_c (H, 2H)) -> "
    "(h_tilde (B, H), weights (B, S)): one step of Luong's dot attention",
    params=("s", "enc", "mask", "W_c"),
    outputs=("h_tilde", "weights"),
    mistakes=[
        Mistake("padding positions got weight: mask them out (-inf) before the softmax."),
        Mistake("the concatenation is [s_t; c_t]; Luong's is [c_t; s_t], the context first."),
        Mistake("the tanh is missing from the attentional state: h~ = tanh(W_c [c; s])."),
    ],
    hints=["Score every source position by its dot product with s_t, keep only the real "
           "positions, and normalise over the source.",
           "The context is the weighted sum of the encoder states; the attentional state "
           "combines the context and s_t through W_c and a tanh.",
           "Mind the order of the concatenation: Luong writes [c_t; h_t]."],
    forbidden=(Forbidden("course_lib.seq2seq.LuongDecoder.attention"),
               Forbidden("course_lib.seq2seq.LuongDecoder._output"),
               Forbidden("course_lib.seq2seq.LuongDecoder.step"),
               Forbidden("course_lib.attention.masked_softmax"), *SDPA),
)


# --------------------------------------------------------------------------------------
# Local attention weights
# --------------------------------------------------------------------------------------
check_local_weights = Check(
    "check_local_weights",
    "fn(scores (B, T, S), mask (B, S), p (B, T), window) -> (B, T, S): "
    "Luong's local-p weights",
    params=("scores", "mask", "p", "window"),
    mistakes=[
        Mistake("the Gaussian factor exp(-(j - p_t)^2 / (2 sigma^2)), sigma = D/2, is missing."),
        Mistake("padding positions inside the window got weight: combine the window with the mask."),
        Mistake("the softmax runs over the whole source: only positions with |j - p_t| <= D take "
                "part (the others get weight 0 before the Gaussian)."),
    ],
    hints=["Which positions j take part in the softmax of row t? Those inside the window "
           "around p_t that are also real (mask True).",
           "Build that (B, T, S) bool pattern from the distances j - p_t and the mask, and take "
           "a masked softmax with it.",
           "Then multiply by the Gaussian centred on p_t with sigma = D / 2."],
    forbidden=(Forbidden("course_lib.seq2seq.local_weights"),),
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
                 "sqrt(d) gives unit variance only for unit-variance components. The states of "
                 "an untrained GRU are far smaller still (this chapter measures them), so their "
                 "scaled scores start small and the softmax nearly uniform: the scaling that "
                 "protects a Transformer's softmax from saturating makes this one slow to "
                 "sharpen."),
    mistakes=[
        Mistake("the division by sqrt(d) makes the variance 1 only when q and k have unit-variance "
                "components; these are bounded by 1 in absolute value.", lambda m: 3 * m),
        Mistake("that is the unscaled score's spread (sqrt(d) times larger): the score here is "
                "divided by sqrt(d) = 8.", lambda m: 8 * m),
    ],
    hints=["Write q.k as a sum of d independent products and find the variance of one product.",
           "The variance of a uniform variable on (-1, 1) is (b - a)^2 / 12."],
)


# --------------------------------------------------------------------------------------
# Where attention looks: alignment accuracy
# --------------------------------------------------------------------------------------
check_alignment_accuracy = Check(
    "check_alignment_accuracy",
    "fn(weights (B, T, S), gold (B, T) long) -> float: the fraction of the scored target positions "
    "(gold >= 0; gold = -1 marks a position that depends on no source character) whose largest "
    "weight is on the gold source position",
    params=("weights", "gold"),
    forbidden=(Forbidden("course_lib.pages.alignment.alignment_accuracy"),
               Forbidden("course_lib.pages.alignment.argmax_offsets")),
    mistakes=[
        Mistake("the unscored positions (gold = -1) were counted: leave them out of the numerator "
                "and of the denominator."),
        Mistake("the argmax runs over the targets (dim 1): each target row's largest weight is over "
                "the source positions, the last dim."),
        Mistake("this is the number of hits; the accuracy is a fraction of the scored positions."),
    ],
    hints=["For every target row, the source position with the largest weight: one argmax over the "
           "last dim gives a (B, T) tensor.",
           "Compare it with gold where gold >= 0 only, and divide the hits by the number of scored "
           "positions; return a Python float."],
)
