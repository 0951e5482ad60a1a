"""References of the checks of chapter 7, "Multi-head attention and masks"."""

from __future__ import annotations

import math

import torch

from course_lib.exercises._data import build

from ..references import Case, Reference, lib, load, randn, register


def _sdpa(q, k, v, mask=None):
    return tuple(lib("attention.scaled_dot_product_attention")(q, k, v, mask=mask))


# --------------------------------------------------------------------------------------
register(
    "check_split_heads",
    Reference(
        seed=12,
        cases=lambda g: [
            Case(f"h = {h}", randn(g, B, T, d), h)
            for B, T, d, h in [(2, 3, 8, 2), (1, 5, 12, 4), (3, 4, 6, 1), (2, 2, 8, 8)]
        ],
        solution=lib("multihead.split_heads"),
        written=lambda x, h: x.view(*x.shape[:2], h, x.shape[2] // h).transpose(1, 2),
        mistakes=[
            lambda x, h: x.view(*x.shape[:2], x.shape[2] // h, h).permute(0, 3, 1, 2),
            lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h),
        ],
        shortcuts=[lib("multihead.split_heads")],
    ),
)


register(
    "check_merge_heads",
    Reference(
        seed=13,
        cases=lambda g: [
            Case(f"h = {h}", randn(g, B, h, T, d_k))
            for B, h, T, d_k in [(2, 2, 3, 4), (1, 4, 5, 3), (3, 1, 4, 6)]
        ],
        solution=lib("multihead.merge_heads"),
        written=lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1),
        mistakes=[
            lambda x: x.reshape(x.shape[0], x.shape[2], -1),
            lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1),
        ],
        shortcuts=[lib("multihead.merge_heads")],
    ),
)


# --------------------------------------------------------------------------------------
# Masks in nn.MultiheadAttention's convention
# --------------------------------------------------------------------------------------
def _allowed(lengths, T):
    return torch.arange(T)[None, :] < lengths[:, None]  # (B, T), True = real token


register(
    "check_key_padding_mask",
    Reference(
        cases=lambda g: [
            Case(f"lengths = {ls}, T = {T}", torch.tensor(ls), T)
            for ls, T in [([3, 1, 2], 3), ([5, 2], 6), ([1], 1), ([4, 4, 2, 3], 4)]
        ],
        hidden=lambda g: [Case("random lengths, T = 6", torch.randint(1, 7, (5,), generator=g), 6)],
        solution=lambda lengths, T: ~lib("attention.padding_mask")(lengths, T)[:, 0, 0, :],
        written=lambda lengths, T: ~_allowed(lengths, T),
        mistakes=[
            lambda lengths, T: _allowed(lengths, T),
            lambda lengths, T: ~_allowed(lengths, T)[:, None, None, :],
            lambda lengths, T: (~_allowed(lengths, T)).float(),
        ],
        shortcuts=[lambda lengths, T: ~lib("attention.padding_mask")(lengths, T)[:, 0, 0, :]],
    ),
)


# --------------------------------------------------------------------------------------
# Multi-head attention forward pass
# --------------------------------------------------------------------------------------
def _mha(x, mha, mask=None, scale="d_k", out_proj=True, average=False, invert=False, split="heads"):
    """Multi-head self-attention from mha's weights; the keywords are the typical mistakes."""
    merge = load("multihead.merge_heads")
    with torch.no_grad():
        q, k, v = mha.project(x, x, x)  # each (B, h, T, d_k)
        if split == "reshape":  # (B, T, d) read as (B, h, T, d_k): positions and heads mixed
            B, T, _ = x.shape
            qkv = torch.nn.functional.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
            q, k, v = (t.reshape(B, mha.num_heads, T, mha.d_k) for t in qkv)
        if invert and mask is not None:
            mask = ~mask
        if scale == "d_model":
            q = q * math.sqrt(mha.d_k) / math.sqrt(mha.d_model)
        heads, weights = _sdpa(q, k, v, mask)
        out = merge(heads)
        out = mha.out_proj(out) if out_proj else out
        return out, weights.mean(1) if average else weights


def _mha_cases(g):
    causal, padding = load("attention.causal_mask"), load("attention.padding_mask")
    cases = []
    for B, T, d, h, mask in [
        (2, 4, 8, 2, None),
        (1, 5, 12, 3, causal(5)),
        (3, 3, 16, 4, padding(torch.tensor([3, 1, 2]))),
        (2, 3, 4, 1, None),
    ]:
        mha = build("multihead.MultiHeadAttention", d, h).eval()
        with torch.no_grad():
            mha.in_proj_bias.normal_()
        desc = f"d_model = {d}, h = {h}" + ("" if mask is None else f", mask {tuple(mask.shape)}")
        cases.append(Case(desc, randn(g, B, T, d), mha, **({} if mask is None else {"mask": mask})))
    return cases


register(
    "check_multihead_forward",
    Reference(
        seed=20,
        cases=_mha_cases,
        solution=lambda x, mha, mask=None: tuple(mha(x, x, x, mask=mask)),
        written=_mha,
        mistakes=[
            lambda x, mha, mask=None: _mha(x, mha, mask, average=True),
            lambda x, mha, mask=None: _mha(x, mha, mask, scale="d_model"),
            lambda x, mha, mask=None: _mha(x, mha, mask, out_proj=False),
            lambda x, mha, mask=None: _mha(x, mha, mask, invert=True),
            lambda x, mha, mask=None: _mha(x, mha, mask, split="reshape"),
        ],
        shortcuts=[lambda x, mha, mask=None: tuple(mha(x, x, x, mask=mask))],
    ),
)


# --------------------------------------------------------------------------------------
# Multi-query attention: every head has its own queries, one key and one value head shared
# --------------------------------------------------------------------------------------
def _multi_query(
    x, w_q, w_k, w_v, w_o, num_heads, mask=None, scale="d_k", out=True, average=False, merge="transpose"
):
    """Multi-query self-attention; the keywords are the typical mistakes.

    x (B, T, d); w_q (d, d); w_k, w_v (d, d_k); w_o (d, d); d_k = d // num_heads.
    """
    B, T, d = x.shape
    d_k = d // num_heads
    q = (x @ w_q).view(B, T, num_heads, d_k).transpose(1, 2)  # (B, h, T, d_k)
    k, v = (x @ w_k)[:, None], (x @ w_v)[:, None]  # (B, 1, T, d_k): shared
    scores = q @ k.transpose(-2, -1) / math.sqrt(d if scale == "d_model" else d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)  # (B, h, T, T)
    heads = weights @ v  # (B, h, T, d_k)
    merged = heads.transpose(1, 2).reshape(B, T, d) if merge == "transpose" else heads.reshape(B, T, d)
    result = merged @ w_o if out else merged
    return result, weights.mean(1) if average else weights


def _mqa_by_sdpa(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """The chapter's attention with the shared key and value broadcast over the heads."""
    B, T, d = x.shape
    q = (x @ w_q).view(B, T, num_heads, d // num_heads).transpose(1, 2)  # (B, h, T, d_k)
    out, weights = _sdpa(q, (x @ w_k)[:, None], (x @ w_v)[:, None], mask)
    return out.transpose(1, 2).reshape(B, T, d) @ w_o, weights


def _mqa_case(g, B, T, d, h, **kwargs):
    d_k = d // h
    return Case(
        f"d_model = {d}, h = {h}" + (", causal mask" if kwargs else ""),
        randn(g, B, T, d),
        randn(g, d, d, scale=d**-0.5),
        randn(g, d, d_k, scale=d**-0.5),
        randn(g, d, d_k, scale=d**-0.5),
        randn(g, d, d, scale=d**-0.5),
        h,
        **kwargs,
    )


register(
    "check_multi_query_attention",
    Reference(
        seed=31,
        cases=lambda g: [
            _mqa_case(g, 2, 4, 8, 2),
            _mqa_case(g, 1, 5, 12, 3),
            _mqa_case(g, 2, 3, 16, 4),
            _mqa_case(g, 1, 6, 8, 4, mask=torch.ones(6, 6, dtype=torch.bool).tril()),
        ],
        solution=_multi_query,
        mistakes=[
            lambda *a, mask=None: _multi_query(*a, mask=mask, scale="d_model"),
            lambda *a, mask=None: _multi_query(*a, mask=mask, average=True),
            lambda *a, mask=None: _multi_query(*a, mask=mask, merge="reshape"),
            lambda *a, mask=None: _multi_query(*a, mask=mask, out=False),
        ],
        shortcuts=[_mqa_by_sdpa],
    ),
)


# --------------------------------------------------------------------------------------
# Predict, then measure: how much weight goes to pads when nothing masks them
# --------------------------------------------------------------------------------------
