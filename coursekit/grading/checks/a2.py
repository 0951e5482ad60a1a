"""References of assignment 2: a Transformer from a blank page (``course_lib/exercises/a2.py``),
parts 1 to 3: positions, multi-head attention, the masks. Part 4 (the layers and the model) is in
``a2_model.py``, parts 5 to 7 (the loss, the schedule, the training step, greedy decoding, the
goal) in ``a2_train.py``.

Each part's reference is written from tensor operations, with keywords that turn on its typical
mistakes; the shortcuts are right answers through what the part puts off limits (each must be
refused): the course's own modules, a subclass of one, torch's Transformer modules, and the aten
operators beneath ``F.scaled_dot_product_attention`` and ``F.cross_entropy``.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..references import Case, Reference, load, register


# --------------------------------------------------------------------------------------
# Part 1: positions
# --------------------------------------------------------------------------------------
def _table(d_model, max_len, blocks=False, exponent="pair", first=0):
    p = torch.arange(first, first + max_len, dtype=torch.float32)[:, None]  # (L, 1)
    if exponent == "pair":
        freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)  # (d/2,)
        angles = p * freq  # (L, d/2)
        if blocks:
            return torch.cat([angles.sin(), angles.cos()], dim=1)
        return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)  # interleaved
    k = torch.arange(d_model, dtype=torch.float32)  # every feature
    angles = p * 10000.0 ** (-k / d_model)
    return torch.where(k % 2 == 0, angles.sin(), angles.cos())


def add_positions(x, **mistake):
    return x + _table(x.shape[-1], x.shape[1], **mistake)


def _by_course_table(x):
    """Shortcut: the chapter's table."""
    return x + load("positional.sinusoidal_encoding")(x.shape[1], x.shape[-1])


def _by_course_module(x):
    """Shortcut: the chapter's module."""
    return load("positional.SinusoidalPositionalEncoding")(x.shape[-1], x.shape[1])(x)


def _positions_cases(g):
    d = [4, 6, 8][int(torch.randint(0, 3, (1,), generator=g))]
    return [
        Case(f"d_model {d}, one row of 3 positions", torch.randn(1, 3, d, generator=g)),
        Case("d_model 8, a batch of 2", torch.randn(2, 5, 8, generator=g)),
        Case("d_model 16, 12 positions", torch.randn(3, 12, 16, generator=g)),
    ]


def _positions_hidden(g):
    d = [6, 10, 12][int(torch.randint(0, 3, (1,), generator=g))]
    return [
        Case(f"d_model {d}, a batch of 2", torch.randn(2, 9, d, generator=g)),
        Case("d_model 14, 7 positions", torch.randn(1, 7, 14, generator=g)),
    ]


register(
    "check_a2_positions",
    Reference(
        seed=201,
        cases=_positions_cases,
        hidden=_positions_hidden,
        solution=add_positions,
        mistakes=[
            lambda x: add_positions(x, blocks=True),
            lambda x: add_positions(x, exponent="feature"),
            lambda x: add_positions(x, first=1),
        ],
        shortcuts=[_by_course_table, _by_course_module],
    ),
)


# --------------------------------------------------------------------------------------
# Part 2: multi-head attention
# --------------------------------------------------------------------------------------
def attention_class(scale=True, split="features", softmax_dim=-1, zero_empty=True):
    class MultiHeadAttention(nn.Module):
        def __init__(self, d_model, num_heads, dropout=0.0):
            super().__init__()
            self.h, self.d_k = num_heads, d_model // num_heads
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
            self.dropout = nn.Dropout(dropout)

        def split(self, x):
            B, T, _ = x.shape
            if split == "features":
                return x.view(B, T, self.h, self.d_k).transpose(1, 2)  # (B, h, T, d_k)
            return x.view(B, self.h, T, self.d_k)

        def forward(self, query, key_value, mask=None):
            q, k, v = (
                self.split(self.w_q(query)),
                self.split(self.w_k(key_value)),
                self.split(self.w_v(key_value)),
            )
            scores = q @ k.transpose(-1, -2)  # (B, h, T, S)
            if scale:
                scores = scores / math.sqrt(self.d_k)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = scores.softmax(softmax_dim)
            if zero_empty:
                weights = torch.nan_to_num(weights, nan=0.0)
            out = self.dropout(weights) @ v  # (B, h, T, d_k)
            B, _, T, _ = out.shape
            return self.w_o(out.transpose(1, 2).reshape(B, T, -1)), weights

    return MultiHeadAttention


_Attention = attention_class()


def _torch_state(state):
    """Our w_q, w_k, w_v, w_o as nn.MultiheadAttention's in_proj / out_proj."""
    return {
        "in_proj_weight": torch.cat([state[f"w_{n}.weight"] for n in "qkv"]),
        "in_proj_bias": torch.cat([state[f"w_{n}.bias"] for n in "qkv"]),
        "out_proj.weight": state["w_o.weight"],
        "out_proj.bias": state["w_o.bias"],
    }


class _TorchAttention(nn.Module):
    """Shortcut: torch.nn.MultiheadAttention under the statement's names."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        self.h = num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.torch = None

    def forward(self, query, key_value, mask=None):
        d = query.shape[-1]
        mha = nn.MultiheadAttention(d, self.h, batch_first=True)
        mha.load_state_dict(_torch_state(self.state_dict()))
        m = (
            None
            if mask is None
            else ~mask.expand(query.shape[0], self.h, query.shape[1], key_value.shape[1]).flatten(0, 1)
        )
        out, w = mha(query, key_value, key_value, attn_mask=m, average_attn_weights=False)
        return out, torch.nan_to_num(w, nan=0.0)


class _FusedAttention(_Attention):
    """Shortcut: the projections by hand, the attention by F.scaled_dot_product_attention."""

    def forward(self, query, key_value, mask=None):
        q, k, v = (
            self.split(self.w_q(query)),
            self.split(self.w_k(key_value)),
            self.split(self.w_v(key_value)),
        )
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        _, weights = super().forward(query, key_value, mask)
        B, _, T, _ = out.shape
        return self.w_o(out.transpose(1, 2).reshape(B, T, -1)), weights


class _AtenAttention(_Attention):
    """Shortcut: the aten operator beneath it, called through torch.ops."""

    def forward(self, query, key_value, mask=None):
        q, k, v = (
            self.split(self.w_q(query)),
            self.split(self.w_k(key_value)),
            self.split(self.w_v(key_value)),
        )
        float_mask = None if mask is None else torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
        out, weights = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, float_mask)
        B, _, T, _ = out.shape
        return self.w_o(torch.nan_to_num(out).transpose(1, 2).reshape(B, T, -1)), torch.nan_to_num(weights)


def _library_subclass():
    """Shortcut: a subclass of the course's MultiHeadAttention, renamed to the statement's names."""
    base = load("multihead.MultiHeadAttention")

    class Renamed(base):
        def __init__(self, d_model, num_heads, dropout=0.0):
            super().__init__(d_model, num_heads, dropout)
            del self.in_proj_weight, self.in_proj_bias, self.out_proj
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

        def forward(self, query, key_value, mask=None):
            self.in_proj_weight = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])
            self.in_proj_bias = torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
            self.out_proj = self.w_o
            out, weights = super().forward(query, key_value, key_value, mask)
            return out, torch.nan_to_num(weights)

    return Renamed


def _state(module_cls, *args, g):
    """The state dict of module_cls(*args) with every tensor redrawn from g (biases included)."""
    module = module_cls(*args)
    return {
        k: torch.randn(v.shape, generator=g) * (0.5 if v.dim() > 1 else 0.2)
        for k, v in module.state_dict().items()
    }


def _attention_cases(g):
    pad_keys = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]  # (2,1,1,6)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    tgt_real = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :]
    empty = torch.tensor([[True, True, False], [False, False, False]])[:, None, None, :]
    return [
        Case(
            "self-attention, 2 heads, no mask",
            8,
            2,
            _state(_Attention, 8, 2, g=g),
            torch.randn(2, 4, 8, generator=g),
            torch.randn(2, 4, 8, generator=g),
            None,
        ),
        Case(
            "cross-attention, T=3 queries, S=6 keys, source padding (B, 1, 1, S)",
            8,
            2,
            _state(_Attention, 8, 2, g=g),
            torch.randn(2, 3, 8, generator=g),
            torch.randn(2, 6, 8, generator=g),
            pad_keys,
        ),
        Case(
            "4 heads, causal and padding mask (B, 1, T, T)",
            16,
            4,
            _state(_Attention, 16, 4, g=g),
            torch.randn(2, 5, 16, generator=g),
            torch.randn(2, 5, 16, generator=g),
            causal & tgt_real,
        ),
        Case(
            "a source made only of padding (no allowed key)",
            8,
            2,
            _state(_Attention, 8, 2, g=g),
            torch.randn(2, 2, 8, generator=g),
            torch.randn(2, 3, 8, generator=g),
            empty,
        ),
    ]


register(
    "check_a2_attention",
    Reference(
        seed=202,
        cases=_attention_cases,
        solution=_Attention,
        mistakes=[
            attention_class(scale=False),
            attention_class(split="time"),
            attention_class(softmax_dim=-2),
            attention_class(zero_empty=False),
        ],
        shortcuts=[_TorchAttention, _FusedAttention, _AtenAttention, _library_subclass()],
    ),
)


# --------------------------------------------------------------------------------------
# Part 3: the masks
# --------------------------------------------------------------------------------------
def masks(src, tgt_in, pad_id, triangle="lower", pad_on="keys", pad_value=None):
    pad = pad_id if pad_value is None else pad_value
    T = tgt_in.shape[1]
    src_mask = (src != pad)[:, None, None, :]  # (B, 1, 1, S)
    allowed = torch.ones(T, T, dtype=torch.bool)
    allowed = allowed.tril() if triangle == "lower" else allowed.triu()  # (T, T)
    real = tgt_in != pad
    real = real[:, None, None, :] if pad_on == "keys" else real[:, None, :, None]
    return src_mask, allowed & real  # (B, 1, T, T)


def _masks_by_library(src, tgt_in, pad_id):
    T = tgt_in.shape[1]
    future = nn.Transformer.generate_square_subsequent_mask(T) < 0
    return (src != pad_id)[:, None, None, :], ~future & (tgt_in != pad_id)[:, None, None, :]


def _masks_by_course(src, tgt_in, pad_id):
    from_tokens, causal = load("attention.padding_mask_from_tokens"), load("attention.causal_mask")
    return from_tokens(src, pad_id), causal(tgt_in.shape[1]) & from_tokens(tgt_in, pad_id)


def _mask_cases(g):
    src, tgt = torch.randint(4, 10, (2, 5), generator=g), torch.randint(4, 10, (2, 4), generator=g)
    src_len, tgt_len = torch.randint(1, 5, (2,), generator=g), torch.randint(1, 4, (2,), generator=g)
    src[torch.arange(5) >= src_len[:, None]] = 0
    tgt[torch.arange(4) >= tgt_len[:, None]] = 0
    tgt[:, 0] = 1
    return [
        Case("pad_id 0, padded rows of lengths drawn at random", src, tgt, 0),
        Case(
            "pad_id 3, no padding in the target",
            torch.tensor([[5, 3, 3], [4, 5, 6]]),
            torch.tensor([[1, 7, 8, 9], [1, 8, 8, 9]]),
            3,
        ),
        Case(
            "pad_id 0, a batch of 3",
            torch.randint(4, 9, (3, 6), generator=g).tril(2),
            torch.tensor([[1, 5, 6, 7, 0], [1, 5, 0, 0, 0], [1, 4, 4, 4, 4]]),
            0,
        ),
    ]


def _mask_hidden(g):
    src = torch.randint(4, 9, (3, 5), generator=g)
    src[1, 3:], src[2, 2:] = 2, 2
    tgt = torch.randint(4, 9, (3, 6), generator=g)
    tgt[0, 4:], tgt[2, 1:] = 2, 2
    return [
        Case("pad_id 2, padded rows of different lengths", src, tgt, 2),
        Case("pad_id 0, one row", torch.tensor([[5, 6, 0]]), torch.tensor([[1, 7, 0, 0]]), 0),
    ]


register(
    "check_a2_masks",
    Reference(
        seed=203,
        cases=_mask_cases,
        hidden=_mask_hidden,
        solution=masks,
        mistakes=[
            lambda s, t, p: masks(s, t, p, triangle="upper"),
            lambda s, t, p: masks(s, t, p, pad_on="queries"),
            lambda s, t, p: masks(s, t, p, pad_value=0),
        ],
        shortcuts=[_masks_by_library, _masks_by_course],
    ),
)
