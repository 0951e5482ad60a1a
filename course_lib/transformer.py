"""The Transformer (Vaswani et al., 2017), and a decoder-only GPT-style language model.

    EncoderLayer   x -> x + SelfAttn(x) -> x + FFN(x)            (each sub-layer: residual + LayerNorm)
    DecoderLayer   y -> y + MaskedSelfAttn(y) -> y + CrossAttn(y, memory) -> y + FFN(y)
    Encoder, Decoder   N layers stacked (and a final LayerNorm, as torch.nn.Transformer)
    Transformer    embeddings * sqrt(d_model) + positional encoding -> encoder -> decoder -> Linear
                   (its sizes in a TransformerConfig)
    greedy_decode, beam_search   a target sequence from a trained Transformer (`course_lib.decoding`)

The decoder-only GPT, built from the same layers, is in `course_lib.gpt`.

A sub-layer F (attention or the feed-forward network) is wrapped in a residual
connection and a layer norm, in one of two placements:

    post-LN (the 2017 paper, norm_first=False):  x = LayerNorm(x + Dropout(F(x)))
    pre-LN  (GPT-2 and most models since, norm_first=True):  x = x + Dropout(F(LayerNorm(x)))

The layers' parameters are named and shaped like torch.nn.TransformerEncoderLayer /
TransformerDecoderLayer's (self_attn, multihead_attn, linear1, linear2, norm1..3),
and the stacks like torch.nn.TransformerEncoder / TransformerDecoder's (layers.0, ...,
norm), so torch's state dicts load into ours (batch_first=True); like torch's, the layers
take `activation` ("relu", "gelu" or a callable) and `bias` (False: no bias in any linear
map or layer norm).

Masks follow the course convention: bool, True = ALLOWED (torch.nn.Transformer's
boolean masks mean the opposite), broadcastable to (B, h, T_q, T_k). Every
attention layer keeps its last weights (detached) so that any layer and head can be
inspected after a forward pass: `EncoderLayer.last_weights`,
`DecoderLayer.last_self_weights` / `last_cross_weights`, each (B, h, T_q, T_k),
collected by `Transformer.attention_weights()`.

Input checks run once, where a learner calls in (`forward`, `start`; `step` reads the model's own
tokens); inside, stacks and layers call unchecked `_forward`s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import decoding
from ._checks import (check_bool, check_choice, check_decoder_inputs, check_divisible, check_ids, check_int,
                      check_mask, check_prob, check_same_batch, check_states)
from .attention import padding_mask_from_tokens
from .multihead import MultiHeadAttention
from .positional import SinusoidalPositionalEncoding

__all__ = ["ACTIVATIONS", "FeedForward", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder",
           "TransformerConfig", "Transformer", "shift_right", "greedy_decode", "beam_search"]

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def get_activation(activation):
    """"relu", "gelu" (exact, as torch's) or a callable -> the function."""
    if callable(activation):
        return activation
    check_choice("activation", activation, ACTIVATIONS)
    return ACTIVATIONS[activation]


def feed_forward(x, linear1, linear2, dropout, activation=F.relu):
    """Position-wise feed-forward network: FFN(x) = act(x W_1 + b_1) W_2 + b_2, act = ReLU
    in the 2017 paper, GELU in GPT and BERT.

    The same two-layer MLP is applied to every position independently.
    x: (B, T, d_model) -> (B, T, d_model), through a hidden width d_ff.
    """
    return linear2(dropout(activation(linear1(x))))   # (B, T, d_ff) -> (B, T, d_model)


class FeedForward(nn.Module):
    """The position-wise FFN as a module (used by exercises and figures)."""

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu", bias=True):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout, self.activation = nn.Dropout(dropout), get_activation(activation)

    def forward(self, x):
        return feed_forward(x, self.linear1, self.linear2, self.dropout, self.activation)


# ---------------------------------------------------------------------------
# 1. The two layers
# ---------------------------------------------------------------------------

class EncoderLayer(nn.Module):
    """One encoder layer: self-attention, then the position-wise FFN.

        post-LN:  x = norm1(x + SelfAttn(x));   x = norm2(x + FFN(x))
        pre-LN:   x = x + SelfAttn(norm1(x));   x = x + FFN(norm2(x))

    forward(x (B, T, d_model), mask=None, cache=None) -> (B, T, d_model); `mask` (True =
    allowed) broadcasts to (B, h, T, T): a padding mask (B, 1, 1, T), or a causal mask (T, T),
    which turns this layer into a GPT block (`cache`: the block's `multihead.KVCache` during
    generation). `self.last_weights`: (B, h, T, T).
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, norm_first=False, bias=True):
        super().__init__()
        _check_layer_args(d_model, num_heads, d_ff, dropout, norm_first, bias)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, bias=bias)
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.dropout = nn.Dropout(dropout)             # inside the FFN
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.activation = get_activation(activation)
        self.d_model, self.norm_first = d_model, norm_first
        self.last_weights = None

    def forward(self, x, mask=None, cache=None):
        check_states("x", x, self.d_model)
        T, S = x.shape[1], x.shape[1] + (len(cache) if cache is not None else 0)
        check_mask("mask", mask, (x.shape[0], self.self_attn.num_heads, T, S))
        return self._forward(x, mask, cache)

    def _forward(self, x, mask=None, cache=None):
        """The layer's arithmetic, inputs unchecked (`forward` checks them; `Encoder` calls this)."""
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), mask, cache)
            x = x + self._feed_forward(self.norm2(x))
        else:
            x = self.norm1(x + self._self_attention(x, mask, cache))
            x = self.norm2(x + self._feed_forward(x))
        return x                                                   # (B, T, d_model)

    def _self_attention(self, x, mask, cache):
        out, weights = self.self_attn._forward(x, x, x, mask, cache)   # (B, T, d), (B, h, T, T)
        self.last_weights = weights.detach()
        return self.dropout1(out)

    def _feed_forward(self, x):
        return self.dropout2(feed_forward(x, self.linear1, self.linear2, self.dropout,
                                          self.activation))


class DecoderLayer(nn.Module):
    """One decoder layer: masked self-attention, cross-attention, FFN.

        post-LN:  y = norm1(y + SelfAttn(y, causal));  y = norm2(y + CrossAttn(y, memory));
                  y = norm3(y + FFN(y))
        pre-LN:   y = y + SelfAttn(norm1(y));  y = y + CrossAttn(norm2(y), memory);
                  y = y + FFN(norm3(y))

    In cross-attention the queries come from the decoder (y) and the keys and values
    from the encoder's output (`memory`): each target position looks up the source.

    forward(x (B, T, d_model), memory (B, S, d_model), self_mask=None, memory_mask=None)
        -> (B, T, d_model). self_mask broadcasts to (B, h, T, T) (usually causal_mask(T)),
        memory_mask to (B, h, T, S) (usually the source padding mask (B, 1, 1, S)).
    After a call: `last_self_weights` (B, h, T, T), `last_cross_weights` (B, h, T, S).
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, norm_first=False, bias=True):
        super().__init__()
        _check_layer_args(d_model, num_heads, d_ff, dropout, norm_first, bias)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, bias=bias)
        self.multihead_attn = MultiHeadAttention(d_model, num_heads, dropout, bias=bias)   # cross
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))
        self.activation = get_activation(activation)
        self.d_model, self.norm_first = d_model, norm_first
        self.last_self_weights = self.last_cross_weights = None

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        _check_decoder_inputs(self, x, memory, self_mask, memory_mask)
        return self._forward(x, memory, self_mask, memory_mask)

    def _forward(self, x, memory, self_mask=None, memory_mask=None):
        """The layer's arithmetic, inputs unchecked (`forward` checks them; `Decoder` calls this)."""
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), self_mask)
            x = x + self._cross_attention(self.norm2(x), memory, memory_mask)
            x = x + self._feed_forward(self.norm3(x))
        else:
            x = self.norm1(x + self._self_attention(x, self_mask))
            x = self.norm2(x + self._cross_attention(x, memory, memory_mask))
            x = self.norm3(x + self._feed_forward(x))
        return x                                                       # (B, T, d_model)

    def _self_attention(self, x, mask):
        out, weights = self.self_attn._forward(x, x, x, mask)          # (B, h, T, T)
        self.last_self_weights = weights.detach()
        return self.dropout1(out)

    def _cross_attention(self, x, memory, mask):
        out, weights = self.multihead_attn._forward(x, memory, memory, mask)  # queries x; keys, values memory
        self.last_cross_weights = weights.detach()                     # (B, h, T, S)
        return self.dropout2(out)

    def _feed_forward(self, x):
        return self.dropout3(feed_forward(x, self.linear1, self.linear2, self.dropout,
                                          self.activation))


# ---------------------------------------------------------------------------
# 2. Stacks of N layers
# ---------------------------------------------------------------------------

class Encoder(nn.Module):
    """N encoder layers, then a final LayerNorm (`norm`, as in torch.nn.Transformer).

    The final norm is needed with pre-LN (the residual stream is never normalised
    otherwise); torch.nn.Transformer adds it with post-LN too. final_norm=False
    drops it (to match a torch.nn.TransformerEncoder built with norm=None).
    Keyword arguments after d_ff go to every `EncoderLayer`.

    forward(x (B, S, d_model), mask=None) -> (B, S, d_model)
    """

    def __init__(self, num_layers, d_model, num_heads, d_ff, final_norm=True, **layer_kwargs):
        super().__init__()
        check_int("num_layers", num_layers)
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, **layer_kwargs)
                                    for _ in range(num_layers))
        self.norm = _final_norm(d_model, final_norm, layer_kwargs)

    def forward(self, x, mask=None):
        check_states("x", x, self.layers[0].d_model)
        check_mask("mask", mask, (x.shape[0], self.layers[0].self_attn.num_heads, x.shape[1], x.shape[1]))
        return self._forward(x, mask)

    def _forward(self, x, mask=None):
        for layer in self.layers:
            x = layer._forward(x, mask)                                 # (B, S, d_model)
        return self.norm(x) if self.norm is not None else x


class Decoder(nn.Module):
    """N decoder layers, then a final LayerNorm (`norm`), as torch.nn.TransformerDecoder.

    forward(x (B, T, d_model), memory (B, S, d_model), self_mask=None, memory_mask=None)
        -> (B, T, d_model)
    """

    def __init__(self, num_layers, d_model, num_heads, d_ff, final_norm=True, **layer_kwargs):
        super().__init__()
        check_int("num_layers", num_layers)
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, **layer_kwargs)
                                    for _ in range(num_layers))
        self.norm = _final_norm(d_model, final_norm, layer_kwargs)

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        _check_decoder_inputs(self.layers[0], x, memory, self_mask, memory_mask)
        return self._forward(x, memory, self_mask, memory_mask)

    def _forward(self, x, memory, self_mask=None, memory_mask=None):
        for layer in self.layers:
            x = layer._forward(x, memory, self_mask, memory_mask)      # (B, T, d_model)
        return self.norm(x) if self.norm is not None else x


def _final_norm(d_model, final_norm, layer_kwargs):
    if not check_bool("final_norm", final_norm):
        return None
    return nn.LayerNorm(d_model, eps=layer_kwargs.get("layer_norm_eps", 1e-5),
                        bias=layer_kwargs.get("bias", True))


# ---------------------------------------------------------------------------
# 3. The whole encoder-decoder model
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class TransformerConfig:
    """The sizes and choices of an encoder-decoder Transformer. The defaults are chapter 9's small
    model; the paper's base model is d_model=512, num_heads=8, 6 + 6 layers, d_ff=2048, dropout 0.1
    (Vaswani et al. 2017, table 3). Change one field with `dataclasses.replace(config, d_ff=128)`."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 64
    num_heads: int = 4
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    d_ff: int = 256                # the feed-forward network's hidden width
    dropout: float = 0.1
    activation: str = "relu"       # or "gelu"
    norm_first: bool = False       # False: post-LN (the paper); True: pre-LN (GPT-2)
    max_len: int = 256             # the longest sequence the positional encoding covers
    pad_id: int = 0                # the padding token of the source, masked out of attention
    bias: bool = True              # biases in every linear map and layer norm

    def __post_init__(self):
        for name in ("src_vocab_size", "tgt_vocab_size", "max_len"):
            check_int(name, getattr(self, name))


class Transformer(nn.Module):
    """Encoder-decoder Transformer for sequence-to-sequence tasks.

        memory = Encoder(PE(Embed_src(src) * sqrt(d_model)), src_mask)
        h      = Decoder(PE(Embed_tgt(tgt_in) * sqrt(d_model)), memory, causal, src_mask)
        logits = h W_out + b_out                   (softmax over the target vocabulary)

    `tgt_in` is the target shifted right (<bos> y_1 ... y_{n-1}): with the causal mask,
    position t predicts y_t having seen only y_<t. Padding (`pad_id`) in the source is
    masked out of every attention over the source.

    Transformer(TransformerConfig(src_vocab_size, tgt_vocab_size, d_model=64, ...)).
    forward(src (B, S), tgt_in (B, T)) -> logits (B, T, tgt_vocab_size)
    start(src) -> the decoding state;  step(y (B,), state) -> logits (B, V), state:
    the step protocol of `course_lib.decoding` (greedy, beam search, sampling).
    """

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__} "
                            f"(e.g. TransformerConfig(src_vocab_size, tgt_vocab_size, d_model=64))")
        c = self.config = config
        self.d_model, self.pad_id, self.max_len = c.d_model, c.pad_id, c.max_len
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.positional = SinusoidalPositionalEncoding(c.d_model, c.max_len, c.dropout)
        layer = dict(dropout=c.dropout, activation=c.activation, norm_first=c.norm_first, bias=c.bias)
        self.encoder = Encoder(c.num_encoder_layers, c.d_model, c.num_heads, c.d_ff, **layer)
        self.decoder = Decoder(c.num_decoder_layers, c.d_model, c.num_heads, c.d_ff, **layer)
        self.out = nn.Linear(c.d_model, c.tgt_vocab_size)
        for embed in (self.src_embed, self.tgt_embed):       # times sqrt(d_model): unit variance,
            nn.init.normal_(embed.weight, std=c.d_model ** -0.5)   # the scale of the positional code

    def embed(self, embedding, tokens):
        """PE(Embedding(tokens) * sqrt(d_model)): (B, T) -> (B, T, d_model)."""
        return self.positional(embedding(tokens) * math.sqrt(self.d_model))

    def src_mask(self, src):
        """(B, 1, 1, S): True at real source tokens, False at padding."""
        return padding_mask_from_tokens(src, self.pad_id)

    def encode(self, src):
        """src (B, S) -> memory (B, S, d_model) (src unchecked: `forward` and `start` check it)."""
        return self.encoder._forward(self.embed(self.src_embed, src), self.src_mask(src))

    def decode(self, tgt_in, memory, src):
        """tgt_in (B, T), memory (B, S, d_model), src (B, S) for its mask -> logits (B, T, V)."""
        T = tgt_in.shape[1]
        y = self.embed(self.tgt_embed, tgt_in)                                    # (B, T, d)
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).tril()  # causal_mask(T)
        h = self.decoder._forward(y, memory, causal, self.src_mask(src))          # (B, T, d)
        return self.out(h)                                                        # (B, T, V)

    def forward(self, src, tgt_in):
        check_ids("src", src, self.src_embed.num_embeddings, self.max_len)
        check_ids("tgt_in", tgt_in, self.tgt_embed.num_embeddings, self.max_len)
        check_same_batch("src", src, "tgt_in", tgt_in)
        memory = self.encode(src)                     # Encoder(PE(Embed(src) * sqrt(d))): (B, S, d)
        return self.decode(tgt_in, memory, src)       # Decoder(..., memory) W_out: (B, T, V)

    def start(self, src):
        """Encode the source once; the decoder's prefix starts empty."""
        check_ids("src", src, self.src_embed.num_embeddings, self.max_len)
        return {"src": src, "memory": self.encode(src), "prefix": src.new_zeros(src.shape[0], 0)}

    def step(self, y, state):
        """Append y (B,) to the prefix and re-read it all (no key/value cache: simple, and fast
        enough for short outputs) -> logits (B, V) of the next token."""
        prefix = torch.cat([state["prefix"], y[:, None]], dim=1)            # (B, t)
        logits = self.decode(prefix, state["memory"], state["src"])[:, -1]  # (B, V): the last position
        return logits, {**state, "prefix": prefix}

    def attention_weights(self):
        """The weights of the last forward pass, one (B, h, T_q, T_k) tensor per layer:
        {"encoder": [...], "decoder_self": [...], "cross": [...]}."""
        return {"encoder": [layer.last_weights for layer in self.encoder.layers],
                "decoder_self": [layer.last_self_weights for layer in self.decoder.layers],
                "cross": [layer.last_cross_weights for layer in self.decoder.layers]}


def shift_right(tgt, bos_id):
    """Teacher forcing's decoder input: <bos> followed by the target without its last token.

        tgt = y_1 ... y_n <eos>   ->   <bos> y_1 ... y_n

    tgt: (B, T) -> (B, T). Position t of the decoder then predicts tgt[:, t] from tgt[:, :t].
    """
    check_ids("tgt", tgt)
    bos = torch.full_like(tgt[:, :1], bos_id)          # (B, 1)
    return torch.cat([bos, tgt[:, :-1]], dim=1)        # (B, T)


# ---------------------------------------------------------------------------
# 4. Decoding (course_lib.decoding over Transformer.start / Transformer.step)
# ---------------------------------------------------------------------------

@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    """The most likely next token at every step, y_t = argmax_v p(v | y_<t, src), until <eos>
    or max_len tokens (`decoding.greedy`), in eval mode.

    src: (B, S) -> (B, L) ids without <bos>, L <= max_len; after a sequence's <eos> the rest
    of its row is <eos> too (Vocab.decode stops at the first).
    """
    was_training = model.training
    model.eval()
    y0 = torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)
    tokens, _ = decoding.greedy(model.step, y0, model.start(src), max_len, eos_id)
    model.train(was_training)
    return tokens


@torch.no_grad()
def beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=0.0):
    """Beam search (`decoding.beam_search`) in eval mode: the best of `beam_size` prefixes,
    ranked by log p / length^length_penalty.

    src: (B, S) -> tokens (B, K, L) best first, log-probabilities (B, K)
    """
    was_training = model.training
    model.eval()
    y0 = torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)
    out = decoding.beam_search(model.step, y0, model.start(src), max_len, beam_size, eos_id,
                               length_penalty)
    model.train(was_training)
    return out


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------

def _check_decoder_inputs(layer, x, memory, self_mask, memory_mask):
    check_decoder_inputs(x, memory, layer.d_model)
    (B, T, _), S, h = x.shape, memory.shape[1], layer.self_attn.num_heads
    check_mask("self_mask", self_mask, (B, h, T, T))
    check_mask("memory_mask", memory_mask, (B, h, T, S))


def _check_layer_args(d_model, num_heads, d_ff, dropout, norm_first, bias):
    check_divisible(d_model, num_heads)
    check_int("d_ff", d_ff)
    check_prob("dropout", dropout)
    check_bool("norm_first", norm_first)
    check_bool("bias", bias)

