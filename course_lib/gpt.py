"""A decoder-only Transformer language model in the style of GPT-2, with a key/value cache.

A GPT block is a decoder layer without cross-attention (there is no encoder): masked
self-attention and the FFN, i.e. exactly a `transformer.EncoderLayer` called with a causal
mask. GPT-2 uses pre-LN (norm_first=True), GELU, learned position embeddings and a final
LayerNorm:

    h = E[x] + P[:T];   h = Block_l(h, causal) for l = 1..N;   logits = LayerNorm(h) W_out

Generation (`GPT.generate`) samples one token at a time through `course_lib.decoding`.
Without a cache every step re-reads the whole prefix; with one (`multihead.KVCache`, one per
block) each step computes the query, key and value of the new token only and attends to the
cached keys and values of the earlier ones: the same numbers, fewer operations.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from . import decoding
from ._checks import check_bool, check_ids, check_int
from .multihead import KVCache, merge_heads
from .positional import LearnedPositionalEmbedding
from .transformer import EncoderLayer

__all__ = ["GPT", "kv_cache_step"]


class GPT(nn.Module):
    """A decoder-only Transformer language model.

    forward(idx (B, T), caches=None) -> logits (B, T, vocab_size); logits[:, t] predicts
    idx[:, t + 1]. With `caches` (one KVCache per block, holding the keys and values of the
    tokens before idx), idx continues that sequence and the caches are extended in place.
    tie_weights: the output layer reuses the token embedding matrix (GPT-2, Press & Wolf 2017).
    """

    def __init__(self, vocab_size, d_model=64, num_heads=4, num_layers=2, d_ff=256, max_len=256,
                 dropout=0.0, activation="gelu", norm_first=True, bias=True, tie_weights=False):
        super().__init__()
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.max_len = check_int("max_len", max_len)
        check_int("num_layers", num_layers)
        self.token_embed = nn.Embedding(vocab_size, d_model)
        self.position = LearnedPositionalEmbedding(d_model, max_len, dropout)
        self.blocks = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, activation, norm_first=norm_first,
                         bias=bias) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model, bias=bias)
        self.head = nn.Linear(d_model, vocab_size, bias=bias)
        nn.init.normal_(self.token_embed.weight, std=0.02)
        if check_bool("tie_weights", tie_weights):
            self.head.weight = self.token_embed.weight  # one (V, d_model) matrix, used twice

    def forward(self, idx, caches=None):
        past = 0 if caches is None else len(caches[0])            # tokens already cached
        check_ids("idx", idx, self.vocab_size, self.max_len - past)
        T = idx.shape[1]
        h = self.position(self.token_embed(idx), start=past)       # (B, T, d)
        mask = torch.ones(T, past + T, dtype=torch.bool, device=idx.device).tril(past)  # (T, past + T):
        # query i sits at position past + i and may see keys j <= past + i (the cache and the past)
        for block, cache in zip(self.blocks, caches or [None] * len(self.blocks)):
            h = block(h, mask, cache)
        return self.head(self.norm(h))                             # (B, T, V)

    # -- decoding: the step protocol of course_lib.decoding --------------------------------

    def start(self, prompt, use_cache=True):
        """Read all of prompt (N, P) but its last token, which is the first one fed to `step`.
        -> y0 (N,), state {"ids": the tokens read so far, "caches": KVCaches or None}"""
        check_ids("prompt", prompt, self.vocab_size)
        caches = None
        if use_cache and prompt.shape[1] <= self.max_len:
            caches = [KVCache() for _ in self.blocks]
            if prompt.shape[1] > 1:
                self(prompt[:, :-1], caches)                       # fill the caches
        return prompt[:, -1], {"ids": prompt[:, :-1], "caches": caches}

    def step(self, y, state):
        """One token y (N,) -> logits (N, V) of the next one. With caches, only y is computed;
        once the sequence is longer than max_len (positions are absolute, so cached keys cannot
        slide), every step re-reads the last max_len tokens, as without a cache."""
        ids = torch.cat([state["ids"], y[:, None]], dim=1)         # (N, t)
        caches = state["caches"]
        if caches is not None and ids.shape[1] <= self.max_len:
            logits = self(y[:, None], caches)                      # the new token only
        else:
            caches = None
            logits = self(ids[:, -self.max_len:])                  # the whole window again
        return logits[:, -1], {"ids": ids, "caches": caches}

    @torch.no_grad()
    def generate(self, idx, num_tokens, temperature=1.0, top_k=None, top_p=None, use_cache=True,
                 generator=None):
        """Sample `num_tokens` more tokens (`decoding.sample`): idx (B, T) -> (B, T + num_tokens)."""
        was_training = self.training
        self.eval()
        y0, state = self.start(idx, use_cache)
        tokens, _ = decoding.sample(self.step, y0, state, num_tokens, temperature, top_k, top_p,
                                    generator=generator)
        self.train(was_training)
        return torch.cat([idx, tokens], dim=1)

    def attention_weights(self):
        """One (B, h, T_q, T_k) tensor per block, from the last forward pass."""
        return [block.last_weights for block in self.blocks]


def kv_cache_step(attn, x_t, cache=None):
    """One step of causal self-attention with a key/value cache, written out (`KVCache` and
    `MultiHeadAttention.forward(..., cache=...)` do the same inside the GPT).

    attn: a MultiHeadAttention; x_t: (B, 1, d_model); cache: None or (k, v), each (B, h, t, d_k)
        -> out (B, 1, d_model), (k, v) each (B, h, t + 1, d_k)
    Fed x[:, 0], x[:, 1], ... in turn, the outputs equal attn(x, x, x, causal_mask(T)).
    """
    q, k, v = attn.project(x_t, x_t, x_t)                       # each (B, h, 1, d_k)
    if cache is not None:
        k = torch.cat([cache[0], k], dim=2)                     # (B, h, t + 1, d_k)
        v = torch.cat([cache[1], v], dim=2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(attn.d_k), dim=-1)   # (B, h, 1, t + 1)
    out = attn.out_proj(merge_heads(weights @ v))               # (B, 1, d_model)
    return out, (k, v)
