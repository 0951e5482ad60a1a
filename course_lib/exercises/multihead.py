"""Checks for chapter 7, "Multi-head attention and masks"."""

from __future__ import annotations

import math

import torch

from ._compare import within
from ._engine import Case, Check, Mistake, Prediction, lib, load, no_grad, randn


def _sdpa(q, k, v, mask=None):
    return tuple(lib("attention.scaled_dot_product_attention")(q, k, v, mask=mask))


# --------------------------------------------------------------------------------------
check_split_heads = Check(
    "check_split_heads", "fn(x (B, T, d_model), num_heads) -> (B, h, T, d_k): head i holds the "
    "features i*d_k ... (i+1)*d_k - 1",
    params=("x", "num_heads"),
    reference=lib("multihead.split_heads"), seed=12,
    cases=lambda g: [Case(f"h = {h}", randn(g, B, T, d), h)
                     for B, T, d, h in [(2, 3, 8, 2), (1, 5, 12, 4), (3, 4, 6, 1), (2, 2, 8, 8)]],
    mistakes=[
        Mistake("heads take every h-th feature: view as (B, T, h, d_k), not (B, T, d_k, h), so "
                "each head gets a contiguous block of features.",
                lambda x, h: x.view(*x.shape[:2], x.shape[2] // h, h).permute(0, 3, 1, 2)),
        Mistake("reshape alone mixes positions into heads: first view (B, T, h, d_k), then "
                "transpose(1, 2).",
                lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h)),
    ],
    hints=["Cut the feature dim into h blocks of d_k first: a view with one more dim.",
           "Then move the head dim in front of the time dim."],
)

check_merge_heads = Check(
    "check_merge_heads", "fn(x (B, h, T, d_k)) -> (B, T, h * d_k), the inverse of split_heads",
    params=("x",),
    reference=lib("multihead.merge_heads"), seed=13,
    cases=lambda g: [Case(f"h = {h}", randn(g, B, h, T, d_k))
                     for B, h, T, d_k in [(2, 2, 3, 4), (1, 4, 5, 3), (3, 1, 4, 6)]],
    mistakes=[
        Mistake("reshape alone mixes heads and positions: transpose(1, 2) first.",
                lambda x: x.reshape(x.shape[0], x.shape[2], -1)),
        Mistake("the features of the heads are interleaved: move the head dim next to the "
                "feature dim as (B, T, h, d_k), not (B, T, d_k, h), before flattening.",
                lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1)),
    ],
    hints=["Undo split_heads in reverse order.",
           "Bring the time dim back next to the batch dim (the tensor is then not contiguous), "
           "then flatten the last two dims."],
)


# --------------------------------------------------------------------------------------
# Masks in nn.MultiheadAttention's convention
# --------------------------------------------------------------------------------------
def _allowed(lengths, T):
    return torch.arange(T)[None, :] < lengths[:, None]  # (B, T), True = real token


check_key_padding_mask = Check(
    "check_key_padding_mask", "fn(lengths (B,), T) -> (B, T) bool, True where the key is PADDING "
    "(nn.MultiheadAttention's key_padding_mask)",
    params=("lengths", "T"),
    reference=lambda lengths, T: ~lib("attention.padding_mask")(lengths, T)[:, 0, 0, :],
    cases=lambda g: [Case(f"lengths = {ls}, T = {T}", torch.tensor(ls), T)
                     for ls, T in [([3, 1, 2], 3), ([5, 2], 6), ([1], 1), ([4, 4, 2, 3], 4)]],
    mistakes=[
        Mistake("the polarity is inverted: this is course_lib's / F.scaled_dot_product_attention's "
                "convention (True = allowed); nn.MultiheadAttention wants True = blocked.",
                lambda lengths, T: _allowed(lengths, T)),
        Mistake("the shape must be (B, T) for nn.MultiheadAttention, not course_lib's (B, 1, 1, T).",
                lambda lengths, T: ~_allowed(lengths, T)[:, None, None, :]),
        Mistake("key_padding_mask must be a bool tensor (a float one is ADDED to the scores).",
                lambda lengths, T: (~_allowed(lengths, T)).float()),
    ],
    hints=["Compare the positions 0 .. T-1 with each sequence's length, by broadcasting.",
           "Read nn.MultiheadAttention's documentation: which value of key_padding_mask means "
           "'ignore this key'?"],
)


# --------------------------------------------------------------------------------------
# Multi-head attention forward pass
# --------------------------------------------------------------------------------------
def _mha(x, mha, mask=None, scale="d_k", out_proj=True, average=False):
    """Multi-head self-attention from mha's weights; the keywords are the typical mistakes."""
    merge = load("multihead.merge_heads")
    with torch.no_grad():
        q, k, v = mha.project(x, x, x)  # each (B, h, T, d_k)
        if scale == "d_model":
            q = q * math.sqrt(mha.d_k) / math.sqrt(mha.d_model)
        heads, weights = _sdpa(q, k, v, mask)
        out = merge(heads)
        out = mha.out_proj(out) if out_proj else out
        return out, weights.mean(1) if average else weights


def _mha_cases(g):
    MHA, causal, padding = (load(f"{p}") for p in ("multihead.MultiHeadAttention",
                                                   "attention.causal_mask", "attention.padding_mask"))
    cases = []
    for B, T, d, h, mask in [(2, 4, 8, 2, None), (1, 5, 12, 3, causal(5)),
                             (3, 3, 16, 4, padding(torch.tensor([3, 1, 2]))),
                             (2, 3, 4, 1, None)]:
        mha = MHA(d, h).eval()
        with torch.no_grad():
            mha.in_proj_bias.normal_()
        desc = f"d_model = {d}, h = {h}" + ("" if mask is None else f", mask {tuple(mask.shape)}")
        cases.append(Case(desc, randn(g, B, T, d), mha, **({} if mask is None else {"mask": mask})))
    return cases


check_multihead_forward = Check(
    "check_multihead_forward", "fn(x (B, T, d), mha, mask=None) -> (out (B, T, d), weights "
    "(B, h, T, T)): self-attention with the weights of a course_lib MultiHeadAttention",
    params=("x", "mha"),
    reference=lambda x, mha, mask=None: tuple(mha(x, x, x, mask=mask)),
    call=no_grad, cases=_mha_cases, seed=20,
    outputs=("out", "weights"),
    mistakes=[
        Mistake("the weights have no head dim: return them per head, (B, h, T, T), not averaged.",
                lambda x, mha, mask=None: _mha(x, mha, mask, average=True)),
        Mistake("the scores are divided by sqrt(d_model); each head divides by sqrt(d_k).",
                lambda x, mha, mask=None: _mha(x, mha, mask, scale="d_model")),
        Mistake("the output projection is missing: merge the heads, then apply mha.out_proj.",
                lambda x, mha, mask=None: _mha(x, mha, mask, out_proj=False)),
    ],
    hints=["in_proj_weight stacks W_q, W_k and W_v as three row blocks (and in_proj_bias their "
           "biases); project x with each.",
           "Split each projection into h heads of d_k = d_model // h and run scaled dot-product "
           "attention in every head at once.",
           "Merge the heads back and apply the output projection; return the per-head weights."],
)


# --------------------------------------------------------------------------------------
# Multi-query attention: every head has its own queries, one key and one value head shared
# --------------------------------------------------------------------------------------
def _multi_query(x, w_q, w_k, w_v, w_o, num_heads, mask=None, scale="d_k", out=True,
                 average=False, merge="transpose"):
    """Multi-query self-attention; the keywords are the typical mistakes.

    x (B, T, d); w_q (d, d); w_k, w_v (d, d_k); w_o (d, d); d_k = d // num_heads.
    """
    B, T, d = x.shape
    d_k = d // num_heads
    q = (x @ w_q).view(B, T, num_heads, d_k).transpose(1, 2)       # (B, h, T, d_k)
    k, v = (x @ w_k)[:, None], (x @ w_v)[:, None]                   # (B, 1, T, d_k): shared
    scores = q @ k.transpose(-2, -1) / math.sqrt(d if scale == "d_model" else d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)                         # (B, h, T, T)
    heads = weights @ v                                             # (B, h, T, d_k)
    merged = (heads.transpose(1, 2).reshape(B, T, d) if merge == "transpose"
              else heads.reshape(B, T, d))
    result = merged @ w_o if out else merged
    return result, weights.mean(1) if average else weights


def _mqa_case(g, B, T, d, h, **kwargs):
    d_k = d // h
    return Case(f"d_model = {d}, h = {h}" + (", causal mask" if kwargs else ""),
                randn(g, B, T, d), randn(g, d, d, scale=d ** -0.5), randn(g, d, d_k, scale=d ** -0.5),
                randn(g, d, d_k, scale=d ** -0.5), randn(g, d, d, scale=d ** -0.5), h, **kwargs)


check_multi_query_attention = Check(
    "check_multi_query_attention",
    "fn(x (B, T, d), w_q (d, d), w_k (d, d_k), w_v (d, d_k), w_o (d, d), num_heads, mask=None) -> "
    "(out (B, T, d), weights (B, h, T, T)): h query heads, one key and one value head shared",
    params=("x", "w_q", "w_k", "w_v", "w_o", "num_heads"),
    reference=_multi_query, seed=31, outputs=("out", "weights"),
    cases=lambda g: [_mqa_case(g, 2, 4, 8, 2), _mqa_case(g, 1, 5, 12, 3),
                     _mqa_case(g, 2, 3, 16, 4), _mqa_case(g, 1, 6, 8, 4,
                                                          mask=torch.ones(6, 6, dtype=torch.bool).tril())],
    mistakes=[
        Mistake("the scores are divided by sqrt(d_model); each head works in d_k = d_model / h "
                "dimensions and divides by sqrt(d_k).",
                lambda *a, mask=None: _multi_query(*a, mask=mask, scale="d_model")),
        Mistake("the weights must stay per head, (B, h, T, T): the queries differ between heads, "
                "so their maps differ even though the keys are shared.",
                lambda *a, mask=None: _multi_query(*a, mask=mask, average=True)),
        Mistake("the heads are merged without bringing the time dim back first: (B, h, T, d_k) must "
                "become (B, T, h, d_k) before it is flattened to (B, T, d).",
                lambda *a, mask=None: _multi_query(*a, mask=mask, merge="reshape")),
        Mistake("the output projection w_o is missing.",
                lambda *a, mask=None: _multi_query(*a, mask=mask, out=False)),
    ],
    hints=["Only the queries have h heads: split x @ w_q into (B, h, T, d_k); x @ w_k and x @ w_v "
           "are one head each, (B, T, d_k).",
           "Give the shared key and value a head dim of size 1, (B, 1, T, d_k): broadcasting then "
           "serves every query head with them in the same products as before.",
           "After the softmax and the product with the values, merge the heads as Concat does and "
           "apply w_o; mask the scores with -inf where the mask is False."],
)


# --------------------------------------------------------------------------------------
# Predict, then measure: how much weight goes to pads when nothing masks them
# --------------------------------------------------------------------------------------
def pad_weight_share(n_models=100, d_model=32, n_words=2, n_pads=4, seed=0):
    """The mean share of attention weight that the real words of "dogs bark <pad> x 4" give to
    the pads, with NO mask, over `n_models` freshly initialised one-head course_lib
    MultiHeadAttention layers (random N(0, 1) word and pad vectors, one pad vector repeated)."""
    MHA = load("multihead.MultiHeadAttention")
    g = torch.Generator().manual_seed(seed)
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    shares = []
    try:
        for _ in range(n_models):
            mha = MHA(d_model, 1).eval()
            words, pad = randn(g, n_words, d_model), randn(g, 1, d_model)
            x = torch.cat([words, pad.expand(n_pads, d_model)])[None]     # (1, T, d)
            with torch.no_grad():
                _, w = mha(x, x, x)                                      # (1, 1, T, T)
            shares.append(w[0, 0, :n_words, n_words:].sum(-1).mean())
    finally:
        torch.random.set_rng_state(state)
    return round(float(torch.stack(shares).mean()), 4)


check_pad_weight_prediction = Prediction(
    "check_pad_weight_prediction", "your prediction of the share of attention weight that the two "
    "real words of 'dogs bark' give to their four pads, untrained attention and no mask, against "
    "the measurement",
    quantity="the mean weight the real words give to the pads (no mask, untrained)",
    tolerance=within(abs=0.15), example=0.66,
    explanation=("nothing in attention knows that a token is padding: a pad is a vector like any "
                 "other. At initialisation the projections are small and the scores nearly equal, so "
                 "each of the 6 keys gets about 1/6 of the weight and the 4 pads together about 4/6. "
                 "The exact share varies from one initialisation to the next (the pads all share one "
                 "vector, so they rise and fall together), but on average the pads take most of the "
                 "weight of a short sentence in a long batch: without the padding mask the output of "
                 "'dogs bark' would depend on how long the OTHER sentences of its batch are."),
    mistakes=[
        Mistake("nothing tells attention that a pad is a pad without a mask: it is a vector like any "
                "other, and it gets weight like any other.", lambda measured: 0.0),
        Mistake("the pads do not take ALL the weight: at initialisation the scores are nearly equal, "
                "so every key, real or pad, gets a similar share.", lambda measured: 1.0),
    ],
    hints=["Without a mask, does anything in the formula of attention treat a pad differently from "
           "a word?",
           "At initialisation the scores q.k are small numbers close to each other: what does the "
           "softmax of nearly equal scores look like, and how many of the 6 keys are pads?"],
)
