"""Checks for chapter 10, "Capstone: from LSTM to GPT"."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._compare import within
from ._engine import Case, Check, Mistake, Prediction, lib, load, randn


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


def _cache_step(attn, x_t, cache, append=True, scale=True, keep_new_only=False):
    """One cached step of causal self-attention; the keywords are typical mistakes."""
    q, k_new, v_new = attn.qkv(x_t)  # each (B, h, 1, d_k)
    k, v = k_new, v_new
    if append and cache is not None:
        k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
    scores = q @ k.transpose(-2, -1) / (math.sqrt(k.shape[-1]) if scale else 1.0)
    out = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(x_t.shape)  # (B, 1, C)
    return attn.c_proj(out), ((k_new, v_new) if keep_new_only else (k, v))


def _cache_cases(g):
    attention, config = load("gpt.CausalSelfAttention"), load("gpt.GPTConfig")
    with torch.random.fork_rng():                         # the weights' init, from g
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=g)))
        four = attention(config(vocab_size=2, block_size=8, n_head=4, n_embd=16, bias=True)).eval()
        one = attention(config(vocab_size=2, block_size=8, n_head=1, n_embd=8)).eval()
    return [Case("4 heads, 6 tokens", four, randn(g, 2, 6, 16)),
            Case("1 head, 3 tokens", one, randn(g, 1, 3, 8))]


check_kv_cache_step = Check(
    "check_kv_cache_step", "fn(attn a gpt.CausalSelfAttention, x_t (B, 1, C), cache None or (k, v)) "
    "-> (out (B, 1, C), (k, v) each (B, h, t, d_k)): fed one token at a time, the GPT's causal "
    "self-attention",
    params=("attn", "x"),
    reference=lib("gpt.kv_cache_step"), call=_run_cache,
    cases=_cache_cases, seed=4,
    outputs=("outputs of the steps, concatenated over time", "the cache (k, v) after the last step"),
    mistakes=[
        Mistake("each token attends only to itself: concatenate the new k, v to the cache first.",
                lambda attn, x_t, cache: _cache_step(attn, x_t, cache, append=False)),
        Mistake("the scores are not scaled: divide q k^T by sqrt(d_k) of a head.",
                lambda attn, x_t, cache: _cache_step(attn, x_t, cache, scale=False)),
        Mistake("the returned cache holds only the newest key and value: return the grown "
                "cache (the old keys and values followed by the new ones), or the next step "
                "forgets the past.",
                lambda attn, x_t, cache: _cache_step(attn, x_t, cache, keep_new_only=True)),
    ],
    hints=["Which of q, k, v of the new token does the NEXT step still need, and which can be "
           "thrown away after this step?",
           "The new query must see every earlier position and itself. Where are the earlier "
           "keys and values, and along which dim do they line up with the new ones?",
           "Is a mask needed when the keys hold only the past and the present? Finish as "
           "multi-head attention does, and return what the next call needs."],
)


# --------------------------------------------------------------------------------------
# the memory of a key/value cache
# --------------------------------------------------------------------------------------
def _cache_bytes(num_layers, num_heads, d_model, T, batch, bytes_per_number):
    return 2 * num_layers * batch * T * d_model * bytes_per_number


check_kv_cache_bytes = Check(
    "check_kv_cache_bytes", "fn(num_layers, num_heads, d_model, T, batch, bytes_per_number) -> "
    "int: the bytes the key/value caches of a GPT hold after T tokens of `batch` sequences",
    params=("num_layers", "num_heads", "d_model", "T", "batch", "bytes_per_number"),
    reference=_cache_bytes,
    cases=lambda g: [Case("3 layers, 5 heads, d_model 10, 7 tokens, 2 sequences, float64",
                          3, 5, 10, 7, 2, 8),
                     Case("the capstone GPT, one sequence of 64, float32", 4, 4, 128, 64, 1, 4),
                     Case("GPT-2 small, 1024 tokens, 8 sequences, float16", 12, 12, 768, 1024, 8, 2)],
    mistakes=[
        Mistake("only the keys are counted: the cache holds the values too (a factor 2).",
                lambda L, h, d, T, B, b: L * B * T * d * b),
        Mistake("this is one head's share: the heads together hold d_model numbers per token, "
                "for the keys and again for the values.",
                lambda L, h, d, T, B, b: 2 * L * B * T * (d // h) * b),
        Mistake("this is one layer: every block keeps its own cache.",
                lambda L, h, d, T, B, b: 2 * B * T * d * b),
        Mistake("this counts numbers, not bytes: multiply by bytes_per_number.",
                lambda L, h, d, T, B, b: 2 * L * B * T * d),
        Mistake("the heads are counted twice: h heads of d_k = d_model / h numbers make d_model "
                "per token, not h * d_model.",
                lambda L, h, d, T, B, b: 2 * L * B * T * d * h * b),
    ],
    hints=["What does one block keep for one token of one sequence? Count numbers, across all "
           "heads.",
           "Then multiply by everything that repeats that: tokens, sequences, blocks, and the "
           "size of one number. One of the arguments does not change the answer."],
)


# --------------------------------------------------------------------------------------
# predict, then measure: the size of the nucleus
# --------------------------------------------------------------------------------------
check_nucleus_size_prediction = Prediction(
    "check_nucleus_size_prediction", "your prediction of the mean number of characters that "
    "nucleus sampling with top_p = 0.9 keeps, per position of held-out text, for the trained "
    "capstone GPT, against the measurement",
    quantity="the mean size of the top_p = 0.9 nucleus of the trained GPT on held-out text",
    tolerance=within(factor=3.0), example=10.0,
    explanation=("top_p is a probability mass, not a share of the vocabulary: the nucleus is the "
                 "smallest set of most likely characters whose probabilities sum to 0.9. A trained "
                 "model puts most of its mass on a few characters at most positions (after 'th' "
                 "it is nearly sure of 'e'), but at a word's start many continuations are "
                 "plausible, so the nucleus swings from one or two characters to dozens; the mean "
                 "lands far below 0.9 V and well above 1. It shrinks as the "
                 "model trains (lower bits per character), which is why the same top_p cuts "
                 "more from a weak model's tail."),
    mistakes=[
        Mistake("top_p = 0.9 does not keep 90 % of the vocabulary: it keeps the most likely "
                "characters until their probabilities add up to 0.9.",
                lambda measured: 0.9 * 100),
        Mistake("the model is rarely that sure: at many positions (a word's start) several "
                "characters are plausible, and the nucleus needs all of them to reach 0.9.",
                lambda measured: 1.0),
    ],
    hints=["Is top_p a share of the vocabulary or of the probability? What is the nucleus of a "
           "distribution that puts 0.95 on one character?",
           "The GPT's held-out bits per character is above: 2 to the power of it is the size of "
           "an equally uncertain uniform choice. How does the nucleus compare with that, given "
           "that it keeps only 90 % of the mass?"],
)
