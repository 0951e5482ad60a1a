"""Multi-head attention (Vaswani et al., 2017, section 3.2.2):

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Each head attends in its own d_k = d_model / h dimensional subspace. The h
projections W_i^Q (d_model x d_k) side by side form one d_model x d_model
matrix, so all heads are computed with one matmul per Q, K, V and a reshape
(`split_heads`); `merge_heads` undoes the reshape before W^O. The parameter
count, 4 d_model^2 (+ biases), does not depend on h.

Parameters are named and shaped like torch.nn.MultiheadAttention's
(in_proj_weight = [W^Q; W^K; W^V] stacked, in_proj_bias, out_proj), so its
state dict loads into ours. Batch first; masks follow the course convention
(bool True = allowed, or float added to the scores), broadcastable to
(B, h, T, S): a padding mask from `attention.padding_mask` is (B, 1, 1, S),
a causal mask (T, S).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import check_attention_inputs, check_bool, check_divisible, check_mask, check_prob
from .attention import _masked_softmax

__all__ = ["MultiHeadAttention", "KVCache", "split_heads", "merge_heads"]


def split_heads(x, num_heads):
    """(B, T, d_model) -> (B, h, T, d_k): head i gets features [i*d_k, (i+1)*d_k)."""
    B, T, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.view(B, T, num_heads, d_model // num_heads).transpose(1, 2)  # (B, h, T, d_k)


def merge_heads(x):
    """(B, h, T, d_k) -> (B, T, h * d_k): the heads' outputs side by side (Concat)."""
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first, the same function as nn.MultiheadAttention.

    forward(query (B, T, d_model), key (B, S, d_model), value (B, S, d_model), mask=None)
        -> out (B, T, d_model), weights (B, h, T, S)

    Self-attention passes the same tensor three times; cross-attention passes the
    decoder states as `query` and the encoder states as `key` and `value`.
    `forward` checks its inputs and runs `_forward`, which the Transformer's layers call
    directly (they check their own inputs once).
    """

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        check_divisible(d_model, num_heads)
        check_prob("dropout", dropout)
        check_bool("bias", bias)
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d_model, d_model))   # [W^Q; W^K; W^V]
        self.in_proj_bias = nn.Parameter(torch.empty(3 * d_model)) if bias else None
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)                  # W^O
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self):
        """The initialisation of nn.MultiheadAttention."""
        nn.init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            nn.init.zeros_(self.in_proj_bias)
            nn.init.zeros_(self.out_proj.bias)

    def project(self, query, key, value):
        """Q = query W^Q + b^Q, etc., split into heads: each (B, h, T or S, d_k)."""
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None,) * 3
        q = split_heads(F.linear(query, w_q, b_q), self.num_heads)   # (B, h, T, d_k)
        k = split_heads(F.linear(key, w_k, b_k), self.num_heads)     # (B, h, S, d_k)
        v = split_heads(F.linear(value, w_v, b_v), self.num_heads)   # (B, h, S, d_k)
        return q, k, v

    def forward(self, query, key, value, mask=None, cache=None):
        """cache: a KVCache holding the keys and values of earlier positions (self-attention
        during generation): the new ones are appended to it, and the queries attend to all."""
        check_attention_inputs(query, key, value, self.d_model)
        S = key.shape[1] + (len(cache) if cache is not None else 0)          # keys after the cache
        check_mask("mask", mask, (query.shape[0], self.num_heads, query.shape[1], S))
        return self._forward(query, key, value, mask, cache)

    def _forward(self, query, key, value, mask=None, cache=None):
        """softmax(Q K^T / sqrt(d_k) + M) V per head, then W^O (the inputs are not checked)."""
        q, k, v = self.project(query, key, value)
        if cache is not None:
            k, v = cache.extend(k, v)                        # (B, h, S_past + S, d_k)
        scores = (q / math.sqrt(self.d_k)) @ k.transpose(-2, -1)   # (B, h, T, S)
        weights = _masked_softmax(scores, mask)              # (B, h, T, S)
        heads = self.dropout(weights) @ v                    # (B, h, T, d_k)
        return self.out_proj(merge_heads(heads)), weights    # (B, T, d_model), (B, h, T, S)

    def extra_repr(self):
        return f"d_model={self.d_model}, num_heads={self.num_heads}, d_k={self.d_k}"


@dataclass
class KVCache:
    """The keys and values a self-attention layer has computed so far, each (B, h, T, d_k).

    Generating token t with a full forward pass would recompute the keys and values of the
    t - 1 earlier tokens, which have not changed; a cache keeps them, so each step projects
    only the new token (`MultiHeadAttention.forward(..., cache=...)` extends it in place).
    """
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None

    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]

    def extend(self, k, v):
        """Append new keys and values (B, h, T_new, d_k); return all of them."""
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v
