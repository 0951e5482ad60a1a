"""Checks for chapter 10, "Capstone: from LSTM to GPT"."""

from __future__ import annotations

import torch

from ._compare import within
from ._engine import Check, Mistake, Prediction
from ._forbid import Forbidden
from .attention import SDPA

# --------------------------------------------------------------------------------------
# bits per character
# --------------------------------------------------------------------------------------
check_bits_per_char = Check(
    "check_bits_per_char",
    "fn(logits (B, T, V), targets (B, T)) -> float: the mean cross-entropy "
    "of the next-character predictions, in bits",
    params=("logits", "targets"),
    mistakes=[
        Mistake("this is in nats (natural log): divide by ln 2 to get bits."),
        Mistake("this is the SUM over positions: take the mean (per character)."),
    ],
    hints=["F.cross_entropy gives the mean negative log-likelihood per position; flatten the "
           "batch and time dims first.",
           "Which logarithm does it use? Change the base to 2."],
    forbidden=(Forbidden("course_lib.train.bits_per_char"),),
)


# --------------------------------------------------------------------------------------
# sampling temperature
# --------------------------------------------------------------------------------------
check_temperature_probs = Check(
    "check_temperature_probs",
    "fn(logits (..., V), temperature) -> probabilities (..., V) = "
    "softmax(logits / temperature)",
    params=("logits", "temperature"),
    mistakes=[
        Mistake("the logits are multiplied by the temperature: divide by it."),
        Mistake("these are scaled logits, not probabilities: apply the softmax."),
        Mistake("the softmax runs over the wrong dim: use dim=-1 (the vocabulary)."),
    ],
    hints=["A temperature below 1 must sharpen the distribution, above 1 flatten it.",
           "Rescale the logits by the temperature, then normalise over the vocabulary."],
    no_shortcut="no library function returns these probabilities",
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


check_kv_cache_step = Check(
    "check_kv_cache_step",
    "fn(attn a gpt.CausalSelfAttention, x_t (B, 1, C), cache None or (k, v)) "
    "-> (out (B, 1, C), (k, v) each (B, h, t, d_k)): fed one token at a time, the GPT's causal "
    "self-attention",
    params=("attn", "x"),
    call=_run_cache,
    outputs=("outputs of the steps, concatenated over time", "the cache (k, v) after the last step"),
    mistakes=[
        Mistake("each token attends only to itself: concatenate the new k, v to the cache first."),
        Mistake("the scores are not scaled: divide q k^T by sqrt(d_k) of a head."),
        Mistake("the returned cache holds only the newest key and value: return the grown "
                "cache (the old keys and values followed by the new ones), or the next step "
                "forgets the past."),
    ],
    hints=["Which of q, k, v of the new token does the NEXT step still need, and which can be "
           "thrown away after this step?",
           "The new query must see every earlier position and itself. Where are the earlier "
           "keys and values, and along which dim do they line up with the new ones?",
           "Is a mask needed when the keys hold only the past and the present? Finish as "
           "multi-head attention does, and return what the next call needs."],
    forbidden=(Forbidden("course_lib.gpt.kv_cache_step"),
               Forbidden("course_lib.gpt.CausalSelfAttention.forward",
                         label="attn(x_t, cache) (its forward)"),
               Forbidden("course_lib.multihead.KVCache.extend", label="course_lib.multihead.KVCache"),
               *SDPA),
)


# --------------------------------------------------------------------------------------
# the memory of a key/value cache
# --------------------------------------------------------------------------------------
check_kv_cache_bytes = Check(
    "check_kv_cache_bytes",
    "fn(num_layers, num_heads, d_model, T, batch, bytes_per_number) -> "
    "int: the bytes the key/value caches of a GPT hold after T tokens of `batch` sequences",
    params=("num_layers", "num_heads", "d_model", "T", "batch", "bytes_per_number"),
    mistakes=[
        Mistake("only the keys are counted: the cache holds the values too (a factor 2)."),
        Mistake("this is one head's share: the heads together hold d_model numbers per token, "
                "for the keys and again for the values."),
        Mistake("this is one layer: every block keeps its own cache."),
        Mistake("this counts numbers, not bytes: multiply by bytes_per_number."),
        Mistake("the heads are counted twice: h heads of d_k = d_model / h numbers make d_model "
                "per token, not h * d_model."),
    ],
    hints=["What does one block keep for one token of one sequence? Count numbers, across all "
           "heads.",
           "Then multiply by everything that repeats that: tokens, sequences, blocks, and the "
           "size of one number. One of the arguments does not change the answer."],
    no_shortcut="a count of bytes: no library function gives it",
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
