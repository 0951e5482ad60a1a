"""The Transformer (Vaswani et al., 2017), and a decoder-only GPT-style language model.

    EncoderLayer   x -> x + SelfAttn(x) -> x + FFN(x)            (each sub-layer: residual + LayerNorm)
    DecoderLayer   y -> y + MaskedSelfAttn(y) -> y + CrossAttn(y, memory) -> y + FFN(y)
    Encoder, Decoder   N layers stacked (and a final LayerNorm, as torch.nn.Transformer)
    Transformer    embeddings * sqrt(d_model) + positional encoding -> encoder -> decoder -> Linear
    greedy_decode, beam_search   generate a target sequence from a trained Transformer
    kv_cache_step  one step of causal self-attention that reuses the keys and values of the past
    GPT            decoder-only: token + learned position embeddings -> N causal blocks -> Linear

A sub-layer F (attention or the feed-forward network) is wrapped in a residual
connection and a layer norm, in one of two placements:

    post-LN (the 2017 paper, norm_first=False):  x = LayerNorm(x + Dropout(F(x)))
    pre-LN  (GPT-2 and most models since, norm_first=True):  x = x + Dropout(F(LayerNorm(x)))

The layers' parameters are named and shaped like torch.nn.TransformerEncoderLayer /
TransformerDecoderLayer's (self_attn, multihead_attn, linear1, linear2, norm1..3),
and the stacks like torch.nn.TransformerEncoder / TransformerDecoder's (layers.0, ...,
norm), so torch's state dicts load into ours (ReLU activation, batch_first=True).

Masks follow the course convention: bool, True = ALLOWED (torch.nn.Transformer's
boolean masks mean the opposite), broadcastable to (B, h, T_q, T_k). Every
attention layer keeps its last weights (detached) so that any layer and head can be
inspected after a forward pass: `EncoderLayer.last_weights`,
`DecoderLayer.last_self_weights` / `last_cross_weights`, each (B, h, T_q, T_k),
collected by `Transformer.attention_weights()` and `GPT.attention_weights()`.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import causal_mask, padding_mask_from_tokens
from .multihead import MultiHeadAttention, merge_heads
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

__all__ = [
    "FeedForward",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "Transformer",
    "shift_right",
    "greedy_decode",
    "beam_search",
    "GPT",
    "kv_cache_step",
    "count_parameters",
]


def feed_forward(x, linear1, linear2, dropout):
    """Position-wise feed-forward network: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2.

    The same two-layer MLP is applied to every position independently.
    x: (B, T, d_model) -> (B, T, d_model), through a hidden width d_ff.
    """
    return linear2(dropout(F.relu(linear1(x))))   # (B, T, d_ff) -> (B, T, d_model)


class FeedForward(nn.Module):
    """The position-wise FFN as a module (used by exercises and figures)."""

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return feed_forward(x, self.linear1, self.linear2, self.dropout)


# ---------------------------------------------------------------------------
# 1. The two layers
# ---------------------------------------------------------------------------

class EncoderLayer(nn.Module):
    """One encoder layer: self-attention, then the position-wise FFN.

        post-LN:  x = norm1(x + SelfAttn(x));   x = norm2(x + FFN(x))
        pre-LN:   x = x + SelfAttn(norm1(x));   x = x + FFN(norm2(x))

    forward(x (B, T, d_model), mask=None) -> (B, T, d_model); `mask` (True = allowed)
    broadcasts to (B, h, T, T): a padding mask (B, 1, 1, T), or a causal mask (T, T),
    which turns this layer into a GPT block. `self.last_weights`: (B, h, T, T).
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False, layer_norm_eps=1e-5):
        super().__init__()
        _check_sizes(d_model=d_model, num_heads=num_heads, d_ff=d_ff)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)             # inside the FFN
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.d_model, self.norm_first = d_model, norm_first
        self.last_weights = None

    def forward(self, x, mask=None):
        _check_states("x", x, self.d_model)
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), mask)
            x = x + self._feed_forward(self.norm2(x))
        else:
            x = self.norm1(x + self._self_attention(x, mask))
            x = self.norm2(x + self._feed_forward(x))
        return x                                                   # (B, T, d_model)

    def _self_attention(self, x, mask):
        out, weights = self.self_attn(x, x, x, mask)               # (B, T, d), (B, h, T, T)
        self.last_weights = weights.detach()
        return self.dropout1(out)

    def _feed_forward(self, x):
        return self.dropout2(feed_forward(x, self.linear1, self.linear2, self.dropout))


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

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False, layer_norm_eps=1e-5):
        super().__init__()
        _check_sizes(d_model=d_model, num_heads=num_heads, d_ff=d_ff)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.multihead_attn = MultiHeadAttention(d_model, num_heads, dropout)   # cross-attention
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))
        self.d_model, self.norm_first = d_model, norm_first
        self.last_self_weights = self.last_cross_weights = None

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        _check_states("x", x, self.d_model)
        _check_states("memory", memory, self.d_model)
        if memory.shape[0] != x.shape[0]:
            raise ValueError(f"x and memory need the same batch size, got x {tuple(x.shape)} "
                             f"and memory {tuple(memory.shape)}")
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
        out, weights = self.self_attn(x, x, x, mask)                   # (B, h, T, T)
        self.last_self_weights = weights.detach()
        return self.dropout1(out)

    def _cross_attention(self, x, memory, mask):
        out, weights = self.multihead_attn(x, memory, memory, mask)    # queries x; keys, values memory
        self.last_cross_weights = weights.detach()                     # (B, h, T, S)
        return self.dropout2(out)

    def _feed_forward(self, x):
        return self.dropout3(feed_forward(x, self.linear1, self.linear2, self.dropout))


# ---------------------------------------------------------------------------
# 2. Stacks of N layers
# ---------------------------------------------------------------------------

class Encoder(nn.Module):
    """N encoder layers, then a final LayerNorm (`norm`, as in torch.nn.Transformer).

    The final norm is needed with pre-LN (the residual stream is never normalised
    otherwise); torch.nn.Transformer adds it with post-LN too. final_norm=False
    drops it (to match a torch.nn.TransformerEncoder built with norm=None).

    forward(x (B, S, d_model), mask=None) -> (B, S, d_model)
    """

    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.1, norm_first=False,
                 final_norm=True):
        super().__init__()
        _check_sizes(num_layers=num_layers)
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model) if final_norm else None

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x) if self.norm is not None else x


class Decoder(nn.Module):
    """N decoder layers, then a final LayerNorm (`norm`), as torch.nn.TransformerDecoder.

    forward(x (B, T, d_model), memory (B, S, d_model), self_mask=None, memory_mask=None)
        -> (B, T, d_model)
    """

    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.1, norm_first=False,
                 final_norm=True):
        super().__init__()
        _check_sizes(num_layers=num_layers)
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model) if final_norm else None

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask)
        return self.norm(x) if self.norm is not None else x


# ---------------------------------------------------------------------------
# 3. The whole encoder-decoder model
# ---------------------------------------------------------------------------

class Transformer(nn.Module):
    """Encoder-decoder Transformer for sequence-to-sequence tasks.

        memory = Encoder(PE(Embed_src(src) * sqrt(d_model)), src_mask)
        h      = Decoder(PE(Embed_tgt(tgt_in) * sqrt(d_model)), memory, causal, src_mask)
        logits = h W_out + b_out                   (softmax over the target vocabulary)

    `tgt_in` is the target shifted right (<bos> y_1 ... y_{n-1}): with the causal mask,
    position t predicts y_t having seen only y_<t. Padding (`pad_id`) in the source is
    masked out of every attention over the source.

    forward(src (B, S), tgt_in (B, T)) -> logits (B, T, tgt_vocab_size)
    """

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, num_encoder_layers=2,
                 num_decoder_layers=2, d_ff=256, dropout=0.1, norm_first=False, max_len=256, pad_id=0):
        super().__init__()
        _check_sizes(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, max_len=max_len)
        self.d_model, self.pad_id, self.max_len = d_model, pad_id, max_len
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        self.positional = SinusoidalPositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout, norm_first)
        self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout, norm_first)
        self.out = nn.Linear(d_model, tgt_vocab_size)
        for embed in (self.src_embed, self.tgt_embed):     # times sqrt(d_model): unit variance,
            nn.init.normal_(embed.weight, std=d_model ** -0.5)   # the scale of the positional code

    def embed(self, embedding, tokens):
        """PE(Embedding(tokens) * sqrt(d_model)): (B, T) -> (B, T, d_model)."""
        _check_tokens("tokens", tokens, embedding.num_embeddings, self.max_len)
        return self.positional(embedding(tokens) * math.sqrt(self.d_model))

    def src_mask(self, src):
        """(B, 1, 1, S): True at real source tokens, False at padding."""
        return padding_mask_from_tokens(src, self.pad_id)

    def encode(self, src):
        """src (B, S) -> memory (B, S, d_model)."""
        return self.encoder(self.embed(self.src_embed, src), self.src_mask(src))

    def decode(self, tgt_in, memory, src):
        """tgt_in (B, T), memory (B, S, d_model), src (B, S) for its mask -> logits (B, T, V)."""
        T = tgt_in.shape[1]
        y = self.embed(self.tgt_embed, tgt_in)                                    # (B, T, d)
        h = self.decoder(y, memory, causal_mask(T, device=tgt_in.device), self.src_mask(src))
        return self.out(h)                                                        # (B, T, V)

    def forward(self, src, tgt_in):
        _check_tokens("src", src, self.src_embed.num_embeddings, self.max_len)
        _check_tokens("tgt_in", tgt_in, self.tgt_embed.num_embeddings, self.max_len)
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(f"src and tgt_in need the same batch size, got src {tuple(src.shape)} "
                             f"and tgt_in {tuple(tgt_in.shape)}")
        return self.decode(tgt_in, self.encode(src), src)

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
    if not torch.is_tensor(tgt) or tgt.dim() != 2:
        raise ValueError(f"tgt must be a (B, T) tensor of ids, got {_describe(tgt)}")
    bos = torch.full_like(tgt[:, :1], bos_id)          # (B, 1)
    return torch.cat([bos, tgt[:, :-1]], dim=1)        # (B, T)


# ---------------------------------------------------------------------------
# 4. Decoding: greedy and beam search
# ---------------------------------------------------------------------------

@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    """Generate with the most likely next token at every step.

        y_0 = <bos>;  y_t = argmax_v p(v | y_<t, src)  until <eos> or max_len tokens

    The source is encoded once; the decoder re-reads the whole prefix at every step
    (no key/value cache: simple, and fast enough for short outputs).

    model: a Transformer; src: (B, S) -> (B, L) ids without <bos>, L <= max_len; after a
    sequence's <eos> the rest of its row is <eos> too (Vocab.decode stops at the first).
    """
    _check_tokens("src", src, model.src_embed.num_embeddings, model.max_len)
    was_training = model.training
    model.eval()
    memory = model.encode(src)                                          # (B, S, d)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits = model.decode(ys, memory, src)[:, -1]                   # (B, V): the last position
        next_id = logits.argmax(-1).masked_fill(done, eos_id)           # (B,)
        ys = torch.cat([ys, next_id[:, None]], dim=1)
        done |= next_id == eos_id
        if done.all():
            break
    model.train(was_training)
    return ys[:, 1:]


@torch.no_grad()
def beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=0.0):
    """Keep the `beam_size` most likely prefixes at every step, for each source.

    A hypothesis scores sum_t log p(y_t | y_<t, src), divided by len^length_penalty
    when it ends (0: no normalisation). Finished hypotheses (ended by <eos>) are set
    aside; the search stops when the best finished one beats every live one that could
    still finish (or at max_len). beam_size=1 is greedy decoding.

    src: (B, S) -> (list of B id lists without <bos>/<eos>, list of B scores)
    """
    _check_tokens("src", src, model.src_embed.num_embeddings, model.max_len)
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    was_training = model.training
    model.eval()
    results, scores = [], []
    for b in range(src.shape[0]):
        ids, score = _beam_one(model, src[b:b + 1], max_len, bos_id, eos_id, beam_size, length_penalty)
        results.append(ids)
        scores.append(score)
    model.train(was_training)
    return results, scores


def _beam_one(model, src, max_len, bos_id, eos_id, k, alpha):
    """Beam search for one source (1, S)."""
    memory = model.encode(src)                                           # (1, S, d)
    beams = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)   # (k', t)
    beam_scores = torch.zeros(1, device=src.device)                      # (k',) log-probabilities
    finished = []                                                        # (score, ids)
    for t in range(1, max_len + 1):
        n = beams.shape[0]
        logp = model.decode(beams, memory.expand(n, -1, -1), src.expand(n, -1))[:, -1].log_softmax(-1)
        total = (beam_scores[:, None] + logp).flatten()                  # (k' * V,)
        top_scores, top = total.topk(min(2 * k, total.numel()))          # room for <eos> hits
        V = logp.shape[-1]
        new_beams, new_scores = [], []
        for score, index in zip(top_scores.tolist(), top.tolist()):
            beam, token = divmod(index, V)
            if token == eos_id:
                finished.append((score / t ** alpha, beams[beam, 1:].tolist()))
            else:
                new_beams.append(torch.cat([beams[beam], beams.new_tensor([token])]))
                new_scores.append(score)
            if len(new_beams) == k:
                break
        # Log-probabilities only decrease, so a live beam can at best keep its current score
        # (divided by max_len^alpha, the most a longer length can help a negative score).
        best_done = max((s for s, _ in finished), default=-math.inf)
        best_live = max(new_scores, default=-math.inf) / max_len ** alpha
        if not new_beams or best_done >= best_live:
            break
        beams, beam_scores = torch.stack(new_beams), torch.tensor(new_scores, device=src.device)
    else:  # max_len reached: unfinished beams compete as they are
        finished += [(s / max_len ** alpha, b[1:].tolist()) for s, b in zip(beam_scores.tolist(), beams)]
    score, ids = max(finished, key=lambda pair: pair[0])
    return ids, score


# ---------------------------------------------------------------------------
# 5. Decoder-only: a GPT-style language model
# ---------------------------------------------------------------------------

class GPT(nn.Module):
    """A decoder-only Transformer language model, in the style of GPT-2.

    A GPT block is a decoder layer without cross-attention (there is no encoder):
    masked self-attention and the FFN, i.e. exactly an `EncoderLayer` called with a
    causal mask. GPT-2 uses pre-LN (norm_first=True), learned position embeddings
    and a final LayerNorm:

        h = Embed(x) + P[:T];  h = Block_l(h, causal) for l = 1..N;  logits = LayerNorm(h) W_out

    forward(idx (B, T)) -> logits (B, T, vocab_size); logits[:, t] predicts idx[:, t + 1].
    """

    def __init__(self, vocab_size, d_model=64, num_heads=4, num_layers=2, d_ff=256, max_len=256,
                 dropout=0.0, norm_first=True):
        super().__init__()
        _check_sizes(vocab_size=vocab_size, num_layers=num_layers, max_len=max_len)
        self.vocab_size, self.max_len = vocab_size, max_len
        self.token_embed = nn.Embedding(vocab_size, d_model)
        self.position = LearnedPositionalEmbedding(max_len, d_model, dropout)
        self.blocks = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        nn.init.normal_(self.token_embed.weight, std=0.02)

    def forward(self, idx):
        _check_tokens("idx", idx, self.vocab_size, self.max_len)
        T = idx.shape[1]
        h = self.position(self.token_embed(idx))                 # (B, T, d)
        mask = causal_mask(T, device=idx.device)                 # (T, T): no peeking ahead
        for block in self.blocks:
            h = block(h, mask)
        return self.head(self.norm(h))                           # (B, T, V)

    @torch.no_grad()
    def generate(self, idx, num_tokens, temperature=1.0, generator=None):
        """Sample `num_tokens` more tokens: idx (B, T) -> (B, T + num_tokens).

        Each step reads the last max_len tokens and samples from softmax(logits / temperature).
        """
        was_training = self.training
        self.eval()
        for _ in range(num_tokens):
            logits = self(idx[:, -self.max_len:])[:, -1] / temperature      # (B, V)
            probs = torch.softmax(logits, dim=-1)
            idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
        self.train(was_training)
        return idx

    def attention_weights(self):
        """One (B, h, T, T) tensor per block, from the last forward pass."""
        return [block.last_weights for block in self.blocks]


def kv_cache_step(attn, x_t, cache=None):
    """One step of causal self-attention with a key/value cache (for fast generation).

    Generating token t with a full forward pass recomputes the keys and values of all
    t - 1 earlier tokens, which have not changed. A cache keeps them: project only the
    new token, append its key and value, and attend from its query to everything cached.

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


def count_parameters(model):
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---------------------------------------------------------------------------
# Input checks: each raises a ValueError naming the argument and shapes.
# ---------------------------------------------------------------------------

def _describe(x):
    return f"shape {tuple(x.shape)}" if torch.is_tensor(x) else type(x).__name__


def _check_sizes(**sizes):
    for name, n in sizes.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"{name} must be a positive int, got {n!r}")
    if "d_model" in sizes and sizes["d_model"] % sizes["num_heads"] != 0:
        raise ValueError(f"d_model={sizes['d_model']} is not divisible by num_heads={sizes['num_heads']}")


def _check_states(name, x, d_model):
    if not torch.is_tensor(x) or x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{name} must be (B, T, d_model={d_model}), got {_describe(x)}")


def _check_tokens(name, tokens, vocab_size, max_len):
    if not torch.is_tensor(tokens) or tokens.dim() != 2:
        raise ValueError(f"{name} must be a (B, T) tensor of token ids, got {_describe(tokens)}")
    if tokens.dtype not in (torch.long, torch.int32, torch.int64):
        raise TypeError(f"{name} must hold integer token ids, got dtype {tokens.dtype}")
    if tokens.shape[1] > max_len:
        raise ValueError(f"{name} has length T={tokens.shape[1]}, more than max_len={max_len}")
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise ValueError(f"{name} has ids outside [0, {vocab_size}): min {int(tokens.min())}, "
                         f"max {int(tokens.max())}")
