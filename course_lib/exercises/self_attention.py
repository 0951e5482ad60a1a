"""Checks for chapter 6, "Self-attention"."""

from __future__ import annotations

from ._compare import within
from ._engine import Check, Mistake, Prediction
from ._forbid import Forbidden
from .attention import SDPA

# --------------------------------------------------------------------------------------
# Self-attention from projection matrices
# --------------------------------------------------------------------------------------
check_self_attention = Check(
    "check_self_attention",
    "fn(x (..., T, d_model), w_q (d_model, d_k), w_k, w_v (d_model, d_v)) "
    "-> (out (..., T, d_v), weights (..., T, T)): one head of self-attention",
    params=("x", "w_q", "w_k", "w_v"),
    outputs=("out", "weights"),
    mistakes=[
        Mistake("the scores are not scaled: divide Q K^T by sqrt(d_k), with d_k = W_q.shape[1]."),
        Mistake("the values are x itself: project them with W_v too."),
        Mistake("the keys use W_q: keys are x @ W_k."),
        Mistake("the projections are transposed: with W of shape (d_model, d_k), write x @ W."),
    ],
    hints=["Queries, keys and values are three projections of the same x.",
           "Then it is scaled dot-product attention of those three; d_k is the width of the "
           "queries.",
           "Return (out, weights)."],
    forbidden=(*SDPA, Forbidden("course_lib.multihead.MultiHeadAttention")),
)


# --------------------------------------------------------------------------------------
# Cross-attention
# --------------------------------------------------------------------------------------
check_cross_attention = Check(
    "check_cross_attention",
    "fn(y (..., T_y, d), x (..., T_x, d), w_q, w_k, w_v) -> "
    "(out (..., T_y, d_v), weights (..., T_y, T_x)): the decoder y attends to the encoder x",
    params=("y", "x", "w_q", "w_k", "w_v"),
    outputs=("out", "weights"),
    mistakes=[
        Mistake("the roles are swapped: the decoder (y) asks the queries, the encoder (x) answers."),
        Mistake("this is self-attention on y: keys and values must come from the encoder x."),
    ],
    hints=["Which sequence asks the questions, and which one is looked up?",
           "The weights have one row per decoder position and one column per encoder position."],
    forbidden=(*SDPA, Forbidden("course_lib.multihead.MultiHeadAttention")),
)


# --------------------------------------------------------------------------------------
# Cost of self-attention
# --------------------------------------------------------------------------------------
check_attention_flops = Check(
    "check_attention_flops",
    "fn(n, d) -> int: multiply-adds of one head of self-attention over "
    "n tokens, d_model = d_k = d_v = d",
    params=("n", "d"),
    mistakes=[
        Mistake("the projections to Q, K and V are missing (3 n d^2)."),
        Mistake("only one of the two n x n products is counted: the scores AND weights @ V."),
        Mistake("the n x n products (the scores and the weighted sum) are missing."),
    ],
    hints=["An (a, b) @ (b, c) product costs a*b*c multiply-adds.",
           "List every matrix product of one head: the projections, the scores, the weighted sum "
           "of the values (the softmax is negligible)."],
    no_shortcut="a count of multiply-adds: no library function gives it",
)


# --------------------------------------------------------------------------------------
# A decaying average: fixed weights in a lower-triangular matrix
# --------------------------------------------------------------------------------------
check_decay_weights = Check(
    "check_decay_weights",
    "fn(T, gamma) -> (T, T) float weights: row i averages the positions "
    "j <= i with weights proportional to gamma^(i - j), summing to 1; zero above the diagonal",
    params=("T", "gamma"),
    mistakes=[
        Mistake("the rows do not sum to 1: divide each row by its sum, so that the result is an "
                "average."),
        Mistake("the future is included: position i may only average the positions j <= i."),
        Mistake("the weights decay towards the START of the sequence: the most recent position "
                "(j = i) must weigh the most, so the exponent is the age i - j."),
        Mistake("this is the upper triangle: row i (the query position) averages the columns "
                "j <= i."),
    ],
    hints=["Start from the (T, T) matrix of ages i - j, with a row index i and a column index j.",
           "Raise gamma to the ages, keep the lower triangle (the diagonal included).",
           "Make every row an average."],
    no_shortcut="no library function builds these weights",
)


# --------------------------------------------------------------------------------------
# Predict, then measure: tied queries and keys
# --------------------------------------------------------------------------------------
check_tied_qk_prediction = Prediction(
    "check_tied_qk_prediction", "your prediction of the fraction of tokens whose largest weight "
    "is on themselves when W^Q = W^K (d_model = 64, d_k = 4, n = 8 random tokens), against the "
    "measurement",
    quantity="the fraction of tokens that attend most to themselves with W^Q = W^K, d_k = 4",
    tolerance=within(abs=0.15), example=0.715,
    explanation=("with W^Q = W^K = W the score of i against j is (x_i W).(x_j W) / sqrt(d_k), a "
                 "symmetric form, and the self-score |x_i W|^2 / sqrt(d_k) is never negative. But "
                 "it is not always the largest: by Cauchy-Schwarz (x_i W).(x_j W) <= |x_i W| |x_j W|, "
                 "which exceeds |x_i W|^2 whenever x_j W is longer than x_i W and points its way. "
                 "With d_k = 4 the projected lengths vary a lot (a chi-square with 4 degrees of "
                 "freedom), so a good share of tokens prefer a neighbour; with d_k = 64 the lengths "
                 "concentrate and nearly every token picks itself. Either way tied projections "
                 "bias attention towards the diagonal, which separate W^Q and W^K avoid."),
    mistakes=[
        Mistake("tying W^Q and W^K is not harmless: the self-score |x_i W|^2 is never negative, "
                "while a score against another random token is as often negative as positive.",
                lambda measured: 1 / 8),
        Mistake("a non-negative self-score is not always the largest: another token whose "
                "projection is longer and points the same way scores higher (Cauchy-Schwarz).",
                lambda measured: 1.0),
    ],
    hints=["Write the score of token i against token j with W^Q = W^K = W. What is special about "
           "j = i?",
           "Compare |x_i W|^2 with (x_i W).(x_j W): which inequality bounds the second, and when "
           "can it exceed the first? How much do the lengths |x_j W| vary with only 4 dimensions?"],
)


# --------------------------------------------------------------------------------------
# The cost of cross-attention, output projection included
# --------------------------------------------------------------------------------------
check_cross_attention_flops = Check(
    "check_cross_attention_flops",
    "fn(m, n, d) -> int: multiply-adds of one cross-attention "
    "layer (m queries, n keys and values, d_model = d_k = d_v = d), W^Q, W^K, W^V and W^O included",
    params=("m", "n", "d"),
    mistakes=[
        Mistake("the output projection W^O (m d^2) is missing."),
        Mistake("the keys and values are projected from the m decoder positions: they come from "
                "the n encoder positions (2 n d^2)."),
        Mistake("only one of the two m x n products is counted: the scores AND weights @ V."),
        Mistake("this is the count of self-attention over the m decoder positions: the keys "
                "come from the n encoder positions."),
    ],
    hints=["An (a, b) @ (b, c) product costs a b c multiply-adds. List the five products.",
           "Which products run over the m queries, which over the n keys, and which over both?"],
    no_shortcut="a count of multiply-adds: no library function gives it",
)
