"""References of the checks of chapter 6, "Self-attention"."""

from __future__ import annotations

import math

import torch

from ..references import Case, Reference, lib, randn, register


def _sdpa(q, k, v, mask=None):
    return tuple(lib("attention.scaled_dot_product_attention")(q, k, v, mask=mask))


def _attend(q, k, v):
    """Attention from tensor operations (the mistakes are written on it)."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


def _unscaled(q, k, v):
    return _attend(q * math.sqrt(q.shape[-1]), k, v)


def _torch_sdpa(q, k, v):
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return out, _sdpa(q, k, v)[1]


# --------------------------------------------------------------------------------------
# Self-attention from projection matrices
# --------------------------------------------------------------------------------------
register(
    "check_self_attention",
    Reference(
        seed=10,
        cases=lambda g: [
            Case(
                "one sequence, d_k = d_v = d_model",
                randn(g, 5, 8),
                randn(g, 8, 8),
                randn(g, 8, 8),
                randn(g, 8, 8),
            ),
            Case("a batch, d_k != d_v", randn(g, 2, 6, 8), randn(g, 8, 4), randn(g, 8, 4), randn(g, 8, 3)),
            Case("a single token", randn(g, 3, 1, 4), randn(g, 4, 2), randn(g, 4, 2), randn(g, 4, 4)),
        ],
        solution=lambda x, wq, wk, wv: _sdpa(x @ wq, x @ wk, x @ wv),
        written=lambda x, wq, wk, wv: _attend(x @ wq, x @ wk, x @ wv),
        mistakes=[
            lambda x, wq, wk, wv: _unscaled(x @ wq, x @ wk, x @ wv),
            lambda x, wq, wk, wv: _attend(x @ wq, x @ wk, x),
            lambda x, wq, wk, wv: _attend(x @ wq, x @ wq, x @ wv),
            lambda x, wq, wk, wv: _attend(x @ wq.T, x @ wk.T, x @ wv.T),
        ],
        shortcuts=[
            lambda x, wq, wk, wv: _sdpa(x @ wq, x @ wk, x @ wv),
            lambda x, wq, wk, wv: _torch_sdpa(x @ wq, x @ wk, x @ wv),
        ],
    ),
)


# --------------------------------------------------------------------------------------
# Cross-attention
# --------------------------------------------------------------------------------------
register(
    "check_cross_attention",
    Reference(
        seed=11,
        cases=lambda g: [
            Case(
                "T_y = 3 decoder positions, T_x = 5 encoder positions",
                randn(g, 3, 8),
                randn(g, 5, 8),
                randn(g, 8, 8),
                randn(g, 8, 8),
                randn(g, 8, 8),
            ),
            Case(
                "a batch, T_y > T_x",
                randn(g, 2, 7, 6),
                randn(g, 2, 4, 6),
                randn(g, 6, 4),
                randn(g, 6, 4),
                randn(g, 6, 5),
            ),
        ],
        solution=lambda y, x, wq, wk, wv: _sdpa(y @ wq, x @ wk, x @ wv),
        written=lambda y, x, wq, wk, wv: _attend(y @ wq, x @ wk, x @ wv),
        mistakes=[
            lambda y, x, wq, wk, wv: _attend(x @ wq, y @ wk, y @ wv),
            lambda y, x, wq, wk, wv: _attend(y @ wq, y @ wk, y @ wv),
        ],
        shortcuts=[
            lambda y, x, wq, wk, wv: _sdpa(y @ wq, x @ wk, x @ wv),
            lambda y, x, wq, wk, wv: _torch_sdpa(y @ wq, x @ wk, x @ wv),
        ],
    ),
)


# --------------------------------------------------------------------------------------
# Cost of self-attention
# --------------------------------------------------------------------------------------
register(
    "check_attention_flops",
    Reference(
        cases=lambda g: [Case(f"n = {n}, d = {d}", n, d) for n, d in [(4, 2), (128, 64), (1, 8), (1024, 64)]],
        hidden=lambda g: [Case(f"n = {n}, d = {d}", n, d) for n, d in [(7, 3), (300, 32)]],
        solution=lambda n, d: 3 * n * d * d + 2 * n * n * d,
        mistakes=[
            lambda n, d: 2 * n * n * d,
            lambda n, d: 3 * n * d * d + n * n * d,
            lambda n, d: 3 * n * d * d,
        ],
        shortcuts=[],
    ),
)


# --------------------------------------------------------------------------------------
# A decaying average: fixed weights in a lower-triangular matrix
# --------------------------------------------------------------------------------------
def _decay_weights(T, gamma, causal=True, normalise=True, reverse=False):
    """W[i, j] = gamma^(i - j) / sum_{j' <= i} gamma^(i - j') for j <= i, else 0."""
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]  # (T, 1), (1, T)
    age = (j if reverse else i - j).abs().double()  # (T, T)
    w = gamma**age
    if causal:
        w = w * (j <= i)
    w = w / w.sum(-1, keepdim=True) if normalise else w
    return w.float()


register(
    "check_decay_weights",
    Reference(
        cases=lambda g: [
            Case(f"T = {T}, gamma = {gamma}", T, gamma)
            for T, gamma in [(4, 0.5), (6, 0.9), (1, 0.3), (5, 1.0)]
        ],
        hidden=lambda g: [Case(f"T = {T}, gamma = {gamma}", T, gamma) for T, gamma in [(7, 0.7), (3, 0.2)]],
        solution=_decay_weights,
        mistakes=[
            lambda T, gamma: _decay_weights(T, gamma, normalise=False),
            lambda T, gamma: _decay_weights(T, gamma, causal=False),
            lambda T, gamma: _decay_weights(T, gamma, reverse=True),
            lambda T, gamma: _decay_weights(T, gamma).T.contiguous(),
        ],
        shortcuts=[],
    ),
)


# --------------------------------------------------------------------------------------
# Predict, then measure: tied queries and keys
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# The cost of cross-attention, output projection included
# --------------------------------------------------------------------------------------
register(
    "check_cross_attention_flops",
    Reference(
        cases=lambda g: [
            Case(f"m = {m}, n = {n}, d = {d}", m, n, d)
            for m, n, d in [(3, 7, 4), (1, 100, 64), (50, 10, 8), (128, 128, 64)]
        ],
        hidden=lambda g: [
            Case(f"m = {m}, n = {n}, d = {d}", m, n, d) for m, n, d in [(5, 9, 6), (20, 3, 16)]
        ],
        solution=lambda m, n, d: 2 * m * d * d + 2 * n * d * d + 2 * m * n * d,
        mistakes=[
            lambda m, n, d: m * d * d + 2 * n * d * d + 2 * m * n * d,
            lambda m, n, d: 4 * m * d * d + 2 * m * n * d,
            lambda m, n, d: 2 * m * d * d + 2 * n * d * d + m * n * d,
            lambda m, n, d: 4 * m * d * d + 2 * m * m * d,
        ],
        shortcuts=[],
    ),
)
