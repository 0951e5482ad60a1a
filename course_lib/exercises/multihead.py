"""Checks for chapter 7, "Multi-head attention and masks"."""

from __future__ import annotations

import math

import torch

from ._engine import Case, Check, Mistake, lib, load, no_grad, randn


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
