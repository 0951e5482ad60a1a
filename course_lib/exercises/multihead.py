"""Checks for chapter 7, "Multi-head attention and masks"."""

from __future__ import annotations

import torch

from ._compare import within
from ._engine import Check, Mistake, Prediction, no_grad
from ._forbid import Forbidden
from .attention import SDPA

# --------------------------------------------------------------------------------------
check_split_heads = Check(
    "check_split_heads",
    "fn(x (B, T, d_model), num_heads) -> (B, h, T, d_k): head i holds the "
    "features i*d_k ... (i+1)*d_k - 1",
    params=("x", "num_heads"),
    mistakes=[
        Mistake("heads take every h-th feature: view as (B, T, h, d_k), not (B, T, d_k, h), so "
                "each head gets a contiguous block of features."),
        Mistake("reshape alone mixes positions into heads: first view (B, T, h, d_k), then "
                "transpose(1, 2)."),
    ],
    hints=["Cut the feature dim into h blocks of d_k first: a view with one more dim.",
           "Then move the head dim in front of the time dim."],
    forbidden=(Forbidden("course_lib.multihead.split_heads"),),
)


check_merge_heads = Check(
    "check_merge_heads",
    "fn(x (B, h, T, d_k)) -> (B, T, h * d_k), the inverse of split_heads",
    params=("x",),
    mistakes=[
        Mistake("reshape alone mixes heads and positions: transpose(1, 2) first."),
        Mistake("the features of the heads are interleaved: move the head dim next to the "
                "feature dim as (B, T, h, d_k), not (B, T, d_k, h), before flattening."),
    ],
    hints=["Undo split_heads in reverse order.",
           "Bring the time dim back next to the batch dim (the tensor is then not contiguous), "
           "then flatten the last two dims."],
    forbidden=(Forbidden("course_lib.multihead.merge_heads"),),
)


# --------------------------------------------------------------------------------------
# Masks in nn.MultiheadAttention's convention
# --------------------------------------------------------------------------------------
check_key_padding_mask = Check(
    "check_key_padding_mask",
    "fn(lengths (B,), T) -> (B, T) bool, True where the key is PADDING "
    "(nn.MultiheadAttention's key_padding_mask)",
    params=("lengths", "T"),
    mistakes=[
        Mistake("the polarity is inverted: this is course_lib's / F.scaled_dot_product_attention's "
                "convention (True = allowed); nn.MultiheadAttention wants True = blocked."),
        Mistake("the shape must be (B, T) for nn.MultiheadAttention, not course_lib's (B, 1, 1, T)."),
        Mistake("key_padding_mask must be a bool tensor (a float one is ADDED to the scores)."),
    ],
    hints=["Compare the positions 0 .. T-1 with each sequence's length, by broadcasting.",
           "Read nn.MultiheadAttention's documentation: which value of key_padding_mask means "
           "'ignore this key'?"],
    forbidden=(Forbidden("course_lib.attention.padding_mask"),
               Forbidden("course_lib.attention.padding_mask_from_tokens")),
)


# --------------------------------------------------------------------------------------
# Multi-head attention forward pass
# --------------------------------------------------------------------------------------
check_multihead_forward = Check(
    "check_multihead_forward",
    "fn(x (B, T, d), mha, mask=None) -> (out (B, T, d), weights "
    "(B, h, T, T)): self-attention with the weights of a course_lib MultiHeadAttention",
    params=("x", "mha"),
    call=no_grad,
    outputs=("out", "weights"),
    mistakes=[
        Mistake("the weights have no head dim: return them per head, (B, h, T, T), not averaged."),
        Mistake("the scores are divided by sqrt(d_model); each head divides by sqrt(d_k)."),
        Mistake("the output projection is missing: merge the heads, then apply mha.out_proj."),
        Mistake("the mask is inverted: in course_lib (as in F.scaled_dot_product_attention) True "
                "means 'may attend'; nn.MultiheadAttention's attn_mask uses True for 'blocked'."),
        Mistake("the heads are split by a plain reshape to (B, h, T, d_k), which mixes positions "
                "and heads: view as (B, T, h, d_k), then swap T and h (split_heads)."),
    ],
    hints=["in_proj_weight stacks W_q, W_k and W_v as three row blocks (and in_proj_bias their "
           "biases); project x with each.",
           "Split each projection into h heads of d_k = d_model // h and run scaled dot-product "
           "attention in every head at once.",
           "Merge the heads back and apply the output projection; return the per-head weights."],
    forbidden=(Forbidden("course_lib.multihead.MultiHeadAttention.forward",
                         label="course_lib.multihead.MultiHeadAttention"),
               Forbidden("torch.nn.functional.multi_head_attention_forward"),
               Forbidden("torch.nn.MultiheadAttention")),
)


# --------------------------------------------------------------------------------------
# Multi-query attention: every head has its own queries, one key and one value head shared
# --------------------------------------------------------------------------------------
check_multi_query_attention = Check(
    "check_multi_query_attention",
    "fn(x (B, T, d), w_q (d, d), w_k (d, d_k), w_v (d, d_k), w_o (d, d), num_heads, mask=None) -> "
    "(out (B, T, d), weights (B, h, T, T)): h query heads, one key and one value head shared",
    params=("x", "w_q", "w_k", "w_v", "w_o", "num_heads"),
    outputs=("out", "weights"),
    mistakes=[
        Mistake("the scores are divided by sqrt(d_model); each head works in d_k = d_model / h "
                "dimensions and divides by sqrt(d_k)."),
        Mistake("the weights must stay per head, (B, h, T, T): the queries differ between heads, "
                "so their maps differ even though the keys are shared."),
        Mistake("the heads are merged without bringing the time dim back first: (B, h, T, d_k) must "
                "become (B, T, h, d_k) before it is flattened to (B, T, d)."),
        Mistake("the output projection w_o is missing."),
    ],
    hints=["Only the queries have h heads: split x @ w_q into (B, h, T, d_k); x @ w_k and x @ w_v "
           "are one head each, (B, T, d_k).",
           "Give the shared key and value a head dim of size 1, (B, 1, T, d_k): broadcasting then "
           "serves every query head with them in the same products as before.",
           "After the softmax and the product with the values, merge the heads as Concat does and "
           "apply w_o; mask the scores with -inf where the mask is False."],
    forbidden=(Forbidden("course_lib.multihead.MultiHeadAttention.forward",
                         label="course_lib.multihead.MultiHeadAttention"),
               Forbidden("torch.nn.functional.multi_head_attention_forward"), *SDPA),
)


# --------------------------------------------------------------------------------------
# Predict, then measure: how much weight goes to pads when nothing masks them
# --------------------------------------------------------------------------------------
def pad_weight_share(n_models=100, d_model=32, n_words=2, n_pads=4, seed=0):
    """The mean share of attention weight that the real words of "dogs bark <pad> x 4" give to
    the pads, with NO mask, over `n_models` freshly initialised one-head course_lib
    MultiHeadAttention layers (random N(0, 1) word and pad vectors, one pad vector repeated)."""
    from course_lib.multihead import MultiHeadAttention as MHA

    g = torch.Generator().manual_seed(seed)
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    shares = []
    try:
        for _ in range(n_models):
            mha = MHA(d_model, 1).eval()
            words, pad = torch.randn(n_words, d_model, generator=g), torch.randn(1, d_model, generator=g)
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
