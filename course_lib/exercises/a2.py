"""Assignment 2: an encoder-decoder Transformer from a blank page, trained to read numbers.

The task (the book trains none like it): a number written in English words, British style, to its
digits::

    "three hundred and twelve"                       -> "312"
    "twelve thousand and four"                       -> "12004"
    "seven hundred thousand and seventeen"           -> "700017"

Both halves of the model matter: a word's meaning depends on its neighbours ("twelve" before
"thousand" is the 12 of "12004"), which the encoder reads, and each digit must be found in the
source, or written as a 0 that no word names, which is the decoder's cross-attention.

Public here (the learner's package carries it): the task's generator (``make_pairs``, drawn from a
seed), the vocabularies and ``encode``, a training loop over the learner's own ``train_step``
(``train``), the held-out exact match (``exact_match``, and ``measure_exact_match``, the goal's
measurement), the ablation harness (``ablation``), a toy model on which the checks run the
learner's training step and decoder (``ToySeq2Seq``), all in ``a2_task.py``; the records of the
checks of parts 1 to 4 (the model) here, of parts 5 to 7 (training, decoding, the goal) in
``a2_train.py``; this module re-exports them all.
The solutions are the learner's; the references stay with the grader.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ._compare import named
from ._engine import Check, Mistake, WrongResult
from .a2_task import (BOS_ID, EOS_ID, FROM_BLANK, MAX_DIGITS, ONES, PAD_ID, SRC_VOCAB, TENS,
                      TGT_VOCAB, ToySeq2Seq, ablation, encode, exact_match, is_held_out,
                      make_pairs, measure_exact_match, number_words, train, vocabularies)
from .a2_train import (check_a2_exact_match, check_a2_exact_match_prediction,
                       check_a2_greedy_decode, check_a2_lr_schedule, check_a2_smoothed_loss,
                       check_a2_train_step)

__all__ = ["BOS_ID", "EOS_ID", "MAX_DIGITS", "ONES", "PAD_ID", "SRC_VOCAB", "TENS", "TGT_VOCAB",
           "ToySeq2Seq", "ablation", "check_a2_attention", "check_a2_decoder_layer",
           "check_a2_encoder_layer", "check_a2_exact_match", "check_a2_exact_match_prediction",
           "check_a2_greedy_decode", "check_a2_lr_schedule", "check_a2_masks", "check_a2_model",
           "check_a2_positions", "check_a2_smoothed_loss", "check_a2_train_step", "encode",
           "exact_match", "is_held_out", "make_pairs", "measure_exact_match", "number_words", "train",
           "vocabularies"]


# --------------------------------------------------------------------------------------
# Part 1: positions
# --------------------------------------------------------------------------------------
check_a2_positions = Check(
    "check_a2_positions",
    "fn(x (B, T, d_model)) -> x + PE[:T], PE the sinusoidal table of Vaswani et al. (2017): "
    "PE[p, 2i] = sin(p / 10000^(2i / d_model)), PE[p, 2i + 1] = cos(p / 10000^(2i / d_model)), "
    "positions p = 0, 1, ..., T - 1, the same for every row of the batch",
    params=("x",), forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the sines and cosines are in two blocks, [sin ... sin, cos ... cos]; the statement "
                "interleaves them: even features sines, odd features cosines."),
        Mistake("feature k uses the exponent k / d_model: a sine and its cosine share one frequency, "
                "10000^(-2i / d_model) with 2i the even feature of the pair."),
        Mistake("the positions start at 1: the first position is p = 0 (its sines are 0, its "
                "cosines 1)."),
    ],
    hints=["Call your function on zeros of shape (1, 2, 4): position 0 must read [0, 1, 0, 1].",
           "One frequency per pair of features: d_model / 2 of them, from 1 down to about 1/10000. "
           "The angles are an outer product of the positions and the frequencies, (T, d_model / 2).",
           "The sines and cosines alternate: build the two (T, d_model / 2) tables, then interleave "
           "their columns."],
)


# --------------------------------------------------------------------------------------
# Part 2: multi-head attention
# --------------------------------------------------------------------------------------
def _load(module: nn.Module, state: dict, what: str) -> nn.Module:
    mine = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    wanted = {k: tuple(v.shape) for k, v in state.items()}
    if mine != wanted:
        missing = sorted(set(wanted) - set(mine))
        extra = sorted(set(mine) - set(wanted))
        shapes = sorted(k for k in set(mine) & set(wanted) if mine[k] != wanted[k])
        raise WrongResult(f"your {what}'s parameters are not those of the statement: "
                          f"missing {missing}, unexpected {extra}, other shapes {shapes}.")
    module.load_state_dict(state)
    return module.eval()


def _attention_observed(cls, d_model, num_heads, state, query, key_value, mask):
    attention = _load(cls(d_model, num_heads, dropout=0.0), state, "MultiHeadAttention")
    with torch.no_grad():
        result = attention(query, key_value, mask)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise WrongResult("forward must return (out (B, T, d_model), weights (B, h, T, S)).")
    return result


check_a2_attention = Check(
    "check_a2_attention",
    "cls(d_model, num_heads, dropout) -> a module with w_q, w_k, w_v, w_o (each nn.Linear(d_model, "
    "d_model)) whose forward(query (B, T, d_model), key_value (B, S, d_model), mask=None) returns "
    "(out (B, T, d_model), weights (B, h, T, S)): per head, softmax over the keys of q k^T / "
    "sqrt(d_k) where the boolean mask (broadcastable to (B, h, T, S), True = may attend) allows; a "
    "query with no allowed key gets zero weights; head i holds features i*d_k to (i+1)*d_k - 1 of "
    "each projection",
    params=("d_model", "num_heads", "state", "query", "key_value", "mask"),
    call=_attention_observed, compare=named("out", "weights"), outputs=("out", "weights"),
    forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the scores are not divided by sqrt(d_k), the width of one head (not of the model)."),
        Mistake("the heads are split with view(B, h, T, d_k): that cuts the sequence, not the "
                "features. Split the features into (h, d_k), then move h in front of T."),
        Mistake("the softmax runs over the queries (dim -2): each query's weights over the keys "
                "must sum to 1."),
        Mistake("a query whose keys are all masked gets NaN weights (the softmax of a row of -inf): "
                "the statement gives it zero weights."),
    ],
    hints=["Check the shapes at each step on a batch of 2, with h = 2: the projections (B, T, d), "
           "the heads (B, h, T, d_k), the scores (B, h, T, S), the output (B, T, d).",
           "Test one head by hand: with num_heads = 1, the weights of query t over the keys sum to 1 "
           "and are exactly 0 where the mask is False.",
           "A row of -inf gives NaN after the softmax; find those rows (or the NaNs) and give them "
           "zeros, without changing the other rows."],
)


# --------------------------------------------------------------------------------------
# Part 3: the masks
# --------------------------------------------------------------------------------------
check_a2_masks = Check(
    "check_a2_masks",
    "fn(src (B, S), tgt_in (B, T), pad_id) -> (src_mask (B, 1, 1, S), tgt_mask (B, 1, T, T)), bool, "
    "True = may attend: src_mask allows the real source tokens (for the encoder and the "
    "cross-attention); tgt_mask lets decoder position t attend to position s when s <= t and "
    "tgt_in[s] is not padding",
    params=("src", "tgt_in", "pad_id"), outputs=("src_mask", "tgt_mask"), forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the causal part is the wrong triangle: position t may attend to s <= t (itself "
                "and earlier positions), not to later ones."),
        Mistake("the target's padding masks the queries (rows) instead of the keys (columns): a "
                "padded position may still read, no position may read a padded one."),
        Mistake("the padding test is hard-coded to id 0: use pad_id."),
    ],
    hints=["Draw tgt_mask[0, 0] for a row of 4 tokens whose last is padding: a lower triangle with "
           "its last column False.",
           "Each mask is a product (logical and) of conditions with shapes that broadcast: the "
           "causal one is (T, T), the padding one has a 1 where the queries go."],
)


# --------------------------------------------------------------------------------------
# Part 4: the layers and the model
# --------------------------------------------------------------------------------------
def _encoder_layer_observed(cls, d_model, num_heads, d_ff, state, x, src_mask):
    layer = _load(cls(d_model, num_heads, d_ff, dropout=0.0), state, "EncoderLayer")
    with torch.no_grad():
        return layer(x, src_mask)


check_a2_encoder_layer = Check(
    "check_a2_encoder_layer",
    "cls(d_model, num_heads, d_ff, dropout) -> a pre-LN encoder layer with self_attn (your "
    "MultiHeadAttention), ln1, ln2 (nn.LayerNorm(d_model)), ff1 (Linear(d_model, d_ff)), ff2 "
    "(Linear(d_ff, d_model)); forward(x (B, S, d), src_mask) = x + SelfAttn(LN1(x)), then + "
    "FFN(LN2(.)), FFN = ff2(relu(ff1(.)))",
    params=("d_model", "num_heads", "d_ff", "state", "x", "src_mask"),
    call=_encoder_layer_observed, forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the layer norms come after the residual sums (post-LN, the 2017 paper's layer): "
                "the statement asks for pre-LN, x + F(LN(x))."),
        Mistake("the residual adds the normalised input, LN(x) + F(LN(x)): the residual stream is "
                "x itself, never normalised inside the layer."),
        Mistake("the feed-forward network reads the output of self-attention before it is added "
                "to x: each sub-layer reads the stream after the previous sub-layer's sum."),
    ],
    hints=["Two sub-layers, each the same wrapping of a function F: the stream x goes round F, F "
           "reads a normalised copy of it.",
           "With all the weights of self_attn set to zero, your layer must return x + "
           "FFN(LN2(x)): try it."],
)


def _decoder_layer_observed(cls, d_model, num_heads, d_ff, state, y, memory, tgt_mask, src_mask):
    layer = _load(cls(d_model, num_heads, d_ff, dropout=0.0), state, "DecoderLayer")
    with torch.no_grad():
        return layer(y, memory, tgt_mask, src_mask)


check_a2_decoder_layer = Check(
    "check_a2_decoder_layer",
    "cls(d_model, num_heads, d_ff, dropout) -> a pre-LN decoder layer with self_attn, cross_attn "
    "(your MultiHeadAttention), ln1, ln2, ln3, ff1, ff2; forward(y (B, T, d), memory (B, S, d), "
    "tgt_mask, src_mask): y + SelfAttn(LN1(y), tgt_mask), then + CrossAttn(LN2(.), memory, "
    "src_mask), then + FFN(LN3(.))",
    params=("d_model", "num_heads", "d_ff", "state", "y", "memory", "tgt_mask", "src_mask"),
    call=_decoder_layer_observed, forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the memory goes through ln2 too: only the decoder's stream is normalised before "
                "the cross-attention; the memory arrives normalised by the encoder's final norm."),
        Mistake("the cross-attention has no residual: its output replaces the stream instead of "
                "being added to it."),
        Mistake("the layer norms come after the residual sums (post-LN): the statement asks for "
                "pre-LN."),
    ],
    hints=["Three sub-layers wrapped as in your encoder layer; only the cross-attention takes a "
           "second input.",
           "In cross-attention the queries come from the decoder's stream and the keys and values "
           "from memory, under the source's mask."],
)


def _model_properties(cls, kwargs, src, tgt_in):
    """What the check observes of a Transformer built from ``cls``: shapes and properties, not
    weights (the learner names the model's parts as they like)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        tied, untied = cls(**kwargs, tie=True).eval(), cls(**kwargs, tie=False).eval()
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731 (shared weights once)
    pad, vocab = kwargs["pad_id"], kwargs["tgt_vocab_size"]
    with torch.no_grad():
        logits = tied(src, tgt_in)
        if not isinstance(logits, torch.Tensor):
            raise WrongResult(f"model(src, tgt_in) must return the logits, got {type(logits).__name__}.")
        same = lambda a, b: a.shape == b.shape and bool(torch.allclose(a, b, atol=1e-5))  # noqa: E731
        half = tgt_in.shape[1] // 2
        later = tgt_in.clone()
        later[:, half:] = torch.where(later[:, half:] == pad, later[:, half:],
                                      (later[:, half:] + 1 - 4) % (vocab - 4) + 4)
        padded = torch.cat([src, torch.full_like(src[:, :3], pad)], dim=1)
        swapped = src.clone()
        swapped[:, [0, 1]] = swapped[:, [1, 0]]
        changed = src.clone()
        changed[:, 0] = (changed[:, 0] + 1 - 4) % (kwargs["src_vocab_size"] - 4) + 4
        return {
            "logits shape": tuple(logits.shape),
            "decode(tgt_in, encode(src), src) equals model(src, tgt_in)":
                same(tied.decode(tgt_in, tied.encode(src), src), logits),
            "position t's logits ignore the target after t (causal)":
                same(tied(src, later)[:, :half], logits[:, :half]),
            "padding added to the source changes nothing": same(tied(padded, tgt_in), logits),
            "the source's first word changes the logits": not same(tied(changed, tgt_in), logits),
            "swapping the first two source words changes the logits":
                not same(tied(swapped, tgt_in), logits),
            "tie=True has tgt_vocab_size * d_model fewer parameters than tie=False":
                count(untied) - count(tied) == vocab * kwargs["d_model"],
        }


check_a2_model = Check(
    "check_a2_model",
    "cls(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, dropout, max_len, "
    "pad_id, tie) -> the encoder-decoder Transformer: encode(src) -> memory (B, S, d_model), "
    "decode(tgt_in, memory, src) -> logits (B, T, tgt_vocab_size), forward(src, tgt_in) -> logits; "
    "tie=True shares the target embedding with the output layer (checked by its properties: "
    "shapes, causality, source padding, word order, the tied parameters)",
    params=("kwargs", "src", "tgt_in"), call=_model_properties, forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the decoder's self-attention is not causal: position t reads the targets after "
                "it, which greedy decoding will not have."),
        Mistake("the cross-attention reads the source's padding: pass the source mask to every "
                "decoder layer, not only to the encoder."),
        Mistake("the source has no positional encoding: the encoder and the cross-attention then "
                "see the words as a bag, and 'twenty one thousand and five' reads like 'five "
                "thousand and twenty one'."),
        Mistake("tie=True copies the embedding's values into the output layer: they are two "
                "parameters that drift apart in training. Share the Parameter itself."),
    ],
    hints=["The failing property names what to look at; run it yourself on a batch of 2: e.g. "
           "change the last target token and compare the first positions' logits.",
           "Both embeddings go through your add_positions (scaled by sqrt(d_model) first, if "
           "you follow the paper); encode ends with a final LayerNorm, and so does the decoder "
           "before the output layer (pre-LN leaves the stream unnormalised otherwise).",
           "Tying: the output layer's weight (V, d) and the embedding's weight (V, d) have the same "
           "shape: assign one Parameter to both."],
)
