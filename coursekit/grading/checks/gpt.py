"""References of the checks of chapter 10, "Capstone: from LSTM to GPT"."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from course_lib.exercises._data import build

from ..references import Case, Reference, lib, load, randn, register


# --------------------------------------------------------------------------------------
# bits per character
# --------------------------------------------------------------------------------------
def _nats(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten()).item()


register(
    "check_bits_per_char",
    Reference(
        seed=2,
        cases=lambda g: [
            Case(
                "uniform logits: log2(V) bits", torch.zeros(2, 5, 8), torch.randint(0, 8, (2, 5), generator=g)
            ),
            Case("random logits", randn(g, 3, 7, 11, scale=2.0), torch.randint(0, 11, (3, 7), generator=g)),
            Case("one sequence", randn(g, 1, 4, 5), torch.randint(0, 5, (1, 4), generator=g)),
        ],
        solution=lambda logits, targets: _nats(logits, targets) / math.log(2),
        mistakes=[
            _nats,
            lambda lg, t: _nats(lg, t) / math.log(2) * t.numel(),
        ],
        shortcuts=[lambda logits, targets: lib("train.bits_per_char")(_nats(logits, targets))],
    ),
)


# --------------------------------------------------------------------------------------
# sampling temperature
# --------------------------------------------------------------------------------------
register(
    "check_temperature_probs",
    Reference(
        seed=3,
        cases=lambda g: [
            Case("temperature 1", randn(g, 2, 6), 1.0),
            Case("temperature 0.5 (sharper)", randn(g, 3, 10), 0.5),
            Case("temperature 2 (flatter), a single row", randn(g, 7), 2.0),
        ],
        solution=lambda x, t: torch.softmax(x / t, dim=-1),
        mistakes=[
            lambda x, t: torch.softmax(x * t, -1),
            lambda x, t: x / t,
            lambda x, t: torch.softmax(x / t, 0),
        ],
    ),
)


# --------------------------------------------------------------------------------------
# a key/value cache
# --------------------------------------------------------------------------------------


def _cache_step(attn, x_t, cache, append=True, scale=True, keep_new_only=False):
    """One cached step of causal self-attention; the keywords are typical mistakes."""
    q, k_new, v_new = attn.qkv(x_t)  # each (B, h, 1, d_k)
    k, v = k_new, v_new
    if append and cache is not None:
        k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
    scores = q @ k.transpose(-2, -1) / (math.sqrt(k.shape[-1]) if scale else 1.0)
    out = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(x_t.shape)  # (B, 1, C)
    return attn.c_proj(out), ((k_new, v_new) if keep_new_only else (k, v))


def _cache_by_forward(attn, x_t, cache):
    """The attention's own forward with a KVCache."""
    if cache is None:
        cache = load("multihead.KVCache")()
    out = attn(x_t, cache)
    return out, cache


def _cache_cases(g):
    config = load("gpt.GPTConfig")
    with torch.random.fork_rng():  # the weights' init, from g
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=g)))
        four = build(
            "gpt.CausalSelfAttention", config(vocab_size=2, block_size=8, n_head=4, n_embd=16, bias=True)
        ).eval()
        one = build("gpt.CausalSelfAttention", config(vocab_size=2, block_size=8, n_head=1, n_embd=8)).eval()
    return [
        Case("4 heads, 6 tokens", four, randn(g, 2, 6, 16)),
        Case("1 head, 3 tokens", one, randn(g, 1, 3, 8)),
    ]


register(
    "check_kv_cache_step",
    Reference(
        seed=4,
        cases=_cache_cases,
        solution=lib("gpt.kv_cache_step"),
        written=_cache_step,
        mistakes=[
            lambda attn, x_t, cache: _cache_step(attn, x_t, cache, append=False),
            lambda attn, x_t, cache: _cache_step(attn, x_t, cache, scale=False),
            lambda attn, x_t, cache: _cache_step(attn, x_t, cache, keep_new_only=True),
        ],
        shortcuts=[lib("gpt.kv_cache_step"), _cache_by_forward],
    ),
)


# --------------------------------------------------------------------------------------
# the memory of a key/value cache
# --------------------------------------------------------------------------------------
def _cache_bytes(num_layers, num_heads, d_model, T, batch, bytes_per_number):
    return 2 * num_layers * batch * T * d_model * bytes_per_number


register(
    "check_kv_cache_bytes",
    Reference(
        cases=lambda g: [
            Case("3 layers, 5 heads, d_model 10, 7 tokens, 2 sequences, float64", 3, 5, 10, 7, 2, 8),
            Case("the capstone GPT, one sequence of 64, float32", 4, 4, 128, 64, 1, 4),
            Case("GPT-2 small, 1024 tokens, 8 sequences, float16", 12, 12, 768, 1024, 8, 2),
        ],
        solution=_cache_bytes,
        mistakes=[
            lambda L, h, d, T, B, b: L * B * T * d * b,
            lambda L, h, d, T, B, b: 2 * L * B * T * (d // h) * b,
            lambda L, h, d, T, B, b: 2 * B * T * d * b,
            lambda L, h, d, T, B, b: 2 * L * B * T * d,
            lambda L, h, d, T, B, b: 2 * L * B * T * d * h * b,
        ],
        shortcuts=[],
    ),
)


# --------------------------------------------------------------------------------------
# predict, then measure: the size of the nucleus
# --------------------------------------------------------------------------------------
