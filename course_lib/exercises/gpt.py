"""Checks for chapter 10, "Capstone: from LSTM to GPT"."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._engine import Case, Check, Mistake, lib, load, randn


# --------------------------------------------------------------------------------------
# bits per character
# --------------------------------------------------------------------------------------
def _nats(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten()).item()


check_bits_per_char = Check(
    "check_bits_per_char", "fn(logits (B, T, V), targets (B, T)) -> float: the mean cross-entropy "
    "of the next-character predictions, in bits",
    params=("logits", "targets"),
    reference=lambda logits, targets: _nats(logits, targets) / math.log(2), seed=2,
    cases=lambda g: [
        Case("uniform logits: log2(V) bits", torch.zeros(2, 5, 8),
             torch.randint(0, 8, (2, 5), generator=g)),
        Case("random logits", randn(g, 3, 7, 11, scale=2.0), torch.randint(0, 11, (3, 7), generator=g)),
        Case("one sequence", randn(g, 1, 4, 5), torch.randint(0, 5, (1, 4), generator=g)),
    ],
    mistakes=[
        Mistake("this is in nats (natural log): divide by ln 2 to get bits.", _nats),
        Mistake("this is the SUM over positions: take the mean (per character).",
                lambda lg, t: _nats(lg, t) / math.log(2) * t.numel()),
    ],
    hints=["F.cross_entropy gives the mean negative log-likelihood per position; flatten the "
           "batch and time dims first.",
           "Which logarithm does it use? Change the base to 2."],
)


# --------------------------------------------------------------------------------------
# sampling temperature
# --------------------------------------------------------------------------------------
check_temperature_probs = Check(
    "check_temperature_probs", "fn(logits (..., V), temperature) -> probabilities (..., V) = "
    "softmax(logits / temperature)",
    params=("logits", "temperature"),
    reference=lambda x, t: torch.softmax(x / t, dim=-1), seed=3,
    cases=lambda g: [Case("temperature 1", randn(g, 2, 6), 1.0),
                     Case("temperature 0.5 (sharper)", randn(g, 3, 10), 0.5),
                     Case("temperature 2 (flatter), a single row", randn(g, 7), 2.0)],
    mistakes=[
        Mistake("the logits are multiplied by the temperature: divide by it.",
                lambda x, t: torch.softmax(x * t, -1)),
        Mistake("these are scaled logits, not probabilities: apply the softmax.",
                lambda x, t: x / t),
        Mistake("the softmax runs over the wrong dim: use dim=-1 (the vocabulary).",
                lambda x, t: torch.softmax(x / t, 0)),
    ],
    hints=["A temperature below 1 must sharpen the distribution, above 1 flatten it.",
           "Rescale the logits by the temperature, then normalise over the vocabulary."],
)


# --------------------------------------------------------------------------------------
# a key/value cache
# --------------------------------------------------------------------------------------
def _run_cache(step, attn, x):
    """Feed x (B, T, d) one token at a time through step; the outputs and the final cache."""
    with torch.no_grad():
        cache, outs = None, []
        for t in range(x.shape[1]):
            out, cache = step(attn, x[:, t:t + 1], cache)
            outs.append(out)
        return torch.cat(outs, dim=1), tuple(cache)


def _cache_step(attn, x_t, cache, append=True, scale=True):
    """One cached step of causal self-attention; the keywords are typical mistakes."""
    q, k, v = attn.project(x_t, x_t, x_t)  # each (B, h, 1, d_k)
    if append and cache is not None:
        k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
    scores = q @ k.transpose(-2, -1) / (math.sqrt(attn.d_k) if scale else 1.0)
    out = load("multihead.merge_heads")(torch.softmax(scores, -1) @ v)
    return attn.out_proj(out), (k, v)


def _cache_cases(g):
    MHA = load("multihead.MultiHeadAttention")
    return [Case("4 heads, 6 tokens", MHA(16, 4).eval(), randn(g, 2, 6, 16)),
            Case("1 head, 3 tokens", MHA(8, 1).eval(), randn(g, 1, 3, 8))]


check_kv_cache_step = Check(
    "check_kv_cache_step", "fn(attn, x_t (B, 1, d_model), cache None or (k, v)) -> (out (B, 1, "
    "d_model), (k, v) each (B, h, t, d_k)): fed one token at a time, causal multi-head "
    "self-attention",
    params=("attn", "x"),
    reference=lib("gpt.kv_cache_step", "transformer.kv_cache_step"), call=_run_cache,
    cases=_cache_cases, seed=4,
    outputs=("outputs of the steps, concatenated over time", "the cache (k, v) after the last step"),
    mistakes=[
        Mistake("each token attends only to itself: concatenate the new k, v to the cache first.",
                lambda attn, x_t, cache: _cache_step(attn, x_t, cache, append=False)),
        Mistake("the scores are not scaled: divide q k^T by sqrt(d_k) of a head.",
                lambda attn, x_t, cache: _cache_step(attn, x_t, cache, scale=False)),
    ],
    hints=["Project only the new token (attn.project gives q, k, v split into heads).",
           "Append its key and value to the cached ones along the time dim; the new query then "
           "attends to all of them (no mask needed: the cache holds only the past and present).",
           "Finish as multi-head attention does: merge the heads and apply attn.out_proj; "
           "return the output and the grown cache."],
)
