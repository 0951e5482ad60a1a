"""References of assignment 2: a Transformer from a blank page (``course_lib/exercises/a2.py``).

Each part's reference is written from tensor operations, with keywords that turn on its typical
mistakes; the shortcuts are right answers through what the part puts off limits (each must be
refused): the course's own modules, a subclass of one, torch's Transformer modules, and the aten
operators beneath ``F.scaled_dot_product_attention`` and ``F.cross_entropy``.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.exercises import a2

from ..references import Case, GoalReference, Reference, load, register


# --------------------------------------------------------------------------------------
# Part 1: positions
# --------------------------------------------------------------------------------------
def _table(d_model, max_len, blocks=False, exponent="pair", first=0):
    p = torch.arange(first, first + max_len, dtype=torch.float32)[:, None]  # (L, 1)
    if exponent == "pair":
        freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)  # (d/2,)
        angles = p * freq  # (L, d/2)
        if blocks:
            return torch.cat([angles.sin(), angles.cos()], dim=1)
        return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)  # interleaved
    k = torch.arange(d_model, dtype=torch.float32)  # every feature
    angles = p * 10000.0 ** (-k / d_model)
    return torch.where(k % 2 == 0, angles.sin(), angles.cos())


def add_positions(x, **mistake):
    return x + _table(x.shape[-1], x.shape[1], **mistake)


def _by_course_table(x):
    """Shortcut: the chapter's table."""
    return x + load("positional.sinusoidal_encoding")(x.shape[1], x.shape[-1])


def _by_course_module(x):
    """Shortcut: the chapter's module."""
    return load("positional.SinusoidalPositionalEncoding")(x.shape[-1], x.shape[1])(x)


def _positions_cases(g):
    d = [4, 6, 8][int(torch.randint(0, 3, (1,), generator=g))]
    return [
        Case(f"d_model {d}, one row of 3 positions", torch.randn(1, 3, d, generator=g)),
        Case("d_model 8, a batch of 2", torch.randn(2, 5, 8, generator=g)),
        Case("d_model 16, 12 positions", torch.randn(3, 12, 16, generator=g)),
    ]


def _positions_hidden(g):
    d = [6, 10, 12][int(torch.randint(0, 3, (1,), generator=g))]
    return [
        Case(f"d_model {d}, a batch of 2", torch.randn(2, 9, d, generator=g)),
        Case("d_model 14, 7 positions", torch.randn(1, 7, 14, generator=g)),
    ]


register(
    "check_a2_positions",
    Reference(
        seed=201,
        cases=_positions_cases,
        hidden=_positions_hidden,
        solution=add_positions,
        mistakes=[
            lambda x: add_positions(x, blocks=True),
            lambda x: add_positions(x, exponent="feature"),
            lambda x: add_positions(x, first=1),
        ],
        shortcuts=[_by_course_table, _by_course_module],
    ),
)


# --------------------------------------------------------------------------------------
# Part 2: multi-head attention
# --------------------------------------------------------------------------------------
def attention_class(scale=True, split="features", softmax_dim=-1, zero_empty=True):
    class MultiHeadAttention(nn.Module):
        def __init__(self, d_model, num_heads, dropout=0.0):
            super().__init__()
            self.h, self.d_k = num_heads, d_model // num_heads
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
            self.dropout = nn.Dropout(dropout)

        def split(self, x):
            B, T, _ = x.shape
            if split == "features":
                return x.view(B, T, self.h, self.d_k).transpose(1, 2)  # (B, h, T, d_k)
            return x.view(B, self.h, T, self.d_k)

        def forward(self, query, key_value, mask=None):
            q, k, v = (
                self.split(self.w_q(query)),
                self.split(self.w_k(key_value)),
                self.split(self.w_v(key_value)),
            )
            scores = q @ k.transpose(-1, -2)  # (B, h, T, S)
            if scale:
                scores = scores / math.sqrt(self.d_k)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = scores.softmax(softmax_dim)
            if zero_empty:
                weights = torch.nan_to_num(weights, nan=0.0)
            out = self.dropout(weights) @ v  # (B, h, T, d_k)
            B, _, T, _ = out.shape
            return self.w_o(out.transpose(1, 2).reshape(B, T, -1)), weights

    return MultiHeadAttention


_Attention = attention_class()


def _torch_state(state):
    """Our w_q, w_k, w_v, w_o as nn.MultiheadAttention's in_proj / out_proj."""
    return {
        "in_proj_weight": torch.cat([state[f"w_{n}.weight"] for n in "qkv"]),
        "in_proj_bias": torch.cat([state[f"w_{n}.bias"] for n in "qkv"]),
        "out_proj.weight": state["w_o.weight"],
        "out_proj.bias": state["w_o.bias"],
    }


class _TorchAttention(nn.Module):
    """Shortcut: torch.nn.MultiheadAttention under the statement's names."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        self.h = num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.torch = None

    def forward(self, query, key_value, mask=None):
        d = query.shape[-1]
        mha = nn.MultiheadAttention(d, self.h, batch_first=True)
        mha.load_state_dict(_torch_state(self.state_dict()))
        m = (
            None
            if mask is None
            else ~mask.expand(query.shape[0], self.h, query.shape[1], key_value.shape[1]).flatten(0, 1)
        )
        out, w = mha(query, key_value, key_value, attn_mask=m, average_attn_weights=False)
        return out, torch.nan_to_num(w, nan=0.0)


class _FusedAttention(_Attention):
    """Shortcut: the projections by hand, the attention by F.scaled_dot_product_attention."""

    def forward(self, query, key_value, mask=None):
        q, k, v = (
            self.split(self.w_q(query)),
            self.split(self.w_k(key_value)),
            self.split(self.w_v(key_value)),
        )
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        _, weights = super().forward(query, key_value, mask)
        B, _, T, _ = out.shape
        return self.w_o(out.transpose(1, 2).reshape(B, T, -1)), weights


class _AtenAttention(_Attention):
    """Shortcut: the aten operator beneath it, called through torch.ops."""

    def forward(self, query, key_value, mask=None):
        q, k, v = (
            self.split(self.w_q(query)),
            self.split(self.w_k(key_value)),
            self.split(self.w_v(key_value)),
        )
        float_mask = None if mask is None else torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
        out, weights = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, float_mask)
        B, _, T, _ = out.shape
        return self.w_o(torch.nan_to_num(out).transpose(1, 2).reshape(B, T, -1)), torch.nan_to_num(weights)


def _library_subclass():
    """Shortcut: a subclass of the course's MultiHeadAttention, renamed to the statement's names."""
    base = load("multihead.MultiHeadAttention")

    class Renamed(base):
        def __init__(self, d_model, num_heads, dropout=0.0):
            super().__init__(d_model, num_heads, dropout)
            del self.in_proj_weight, self.in_proj_bias, self.out_proj
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

        def forward(self, query, key_value, mask=None):
            self.in_proj_weight = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])
            self.in_proj_bias = torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
            self.out_proj = self.w_o
            out, weights = super().forward(query, key_value, key_value, mask)
            return out, torch.nan_to_num(weights)

    return Renamed


def _state(module_cls, *args, g):
    """The state dict of module_cls(*args) with every tensor redrawn from g (biases included)."""
    module = module_cls(*args)
    return {
        k: torch.randn(v.shape, generator=g) * (0.5 if v.dim() > 1 else 0.2)
        for k, v in module.state_dict().items()
    }


def _attention_cases(g):
    pad_keys = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]  # (2,1,1,6)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    tgt_real = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :]
    empty = torch.tensor([[True, True, False], [False, False, False]])[:, None, None, :]
    return [
        Case(
            "self-attention, 2 heads, no mask",
            8,
            2,
            _state(_Attention, 8, 2, g=g),
            torch.randn(2, 4, 8, generator=g),
            torch.randn(2, 4, 8, generator=g),
            None,
        ),
        Case(
            "cross-attention, T=3 queries, S=6 keys, source padding (B, 1, 1, S)",
            8,
            2,
            _state(_Attention, 8, 2, g=g),
            torch.randn(2, 3, 8, generator=g),
            torch.randn(2, 6, 8, generator=g),
            pad_keys,
        ),
        Case(
            "4 heads, causal and padding mask (B, 1, T, T)",
            16,
            4,
            _state(_Attention, 16, 4, g=g),
            torch.randn(2, 5, 16, generator=g),
            torch.randn(2, 5, 16, generator=g),
            causal & tgt_real,
        ),
        Case(
            "a source made only of padding (no allowed key)",
            8,
            2,
            _state(_Attention, 8, 2, g=g),
            torch.randn(2, 2, 8, generator=g),
            torch.randn(2, 3, 8, generator=g),
            empty,
        ),
    ]


register(
    "check_a2_attention",
    Reference(
        seed=202,
        cases=_attention_cases,
        solution=_Attention,
        mistakes=[
            attention_class(scale=False),
            attention_class(split="time"),
            attention_class(softmax_dim=-2),
            attention_class(zero_empty=False),
        ],
        shortcuts=[_TorchAttention, _FusedAttention, _AtenAttention, _library_subclass()],
    ),
)


# --------------------------------------------------------------------------------------
# Part 3: the masks
# --------------------------------------------------------------------------------------
def masks(src, tgt_in, pad_id, triangle="lower", pad_on="keys", pad_value=None):
    pad = pad_id if pad_value is None else pad_value
    T = tgt_in.shape[1]
    src_mask = (src != pad)[:, None, None, :]  # (B, 1, 1, S)
    allowed = torch.ones(T, T, dtype=torch.bool)
    allowed = allowed.tril() if triangle == "lower" else allowed.triu()  # (T, T)
    real = tgt_in != pad
    real = real[:, None, None, :] if pad_on == "keys" else real[:, None, :, None]
    return src_mask, allowed & real  # (B, 1, T, T)


def _masks_by_library(src, tgt_in, pad_id):
    T = tgt_in.shape[1]
    future = nn.Transformer.generate_square_subsequent_mask(T) < 0
    return (src != pad_id)[:, None, None, :], ~future & (tgt_in != pad_id)[:, None, None, :]


def _masks_by_course(src, tgt_in, pad_id):
    from_tokens, causal = load("attention.padding_mask_from_tokens"), load("attention.causal_mask")
    return from_tokens(src, pad_id), causal(tgt_in.shape[1]) & from_tokens(tgt_in, pad_id)


def _mask_cases(g):
    src, tgt = torch.randint(4, 10, (2, 5), generator=g), torch.randint(4, 10, (2, 4), generator=g)
    src_len, tgt_len = torch.randint(1, 5, (2,), generator=g), torch.randint(1, 4, (2,), generator=g)
    src[torch.arange(5) >= src_len[:, None]] = 0
    tgt[torch.arange(4) >= tgt_len[:, None]] = 0
    tgt[:, 0] = 1
    return [
        Case("pad_id 0, padded rows of lengths drawn at random", src, tgt, 0),
        Case(
            "pad_id 3, no padding in the target",
            torch.tensor([[5, 3, 3], [4, 5, 6]]),
            torch.tensor([[1, 7, 8, 9], [1, 8, 8, 9]]),
            3,
        ),
        Case(
            "pad_id 0, a batch of 3",
            torch.randint(4, 9, (3, 6), generator=g).tril(2),
            torch.tensor([[1, 5, 6, 7, 0], [1, 5, 0, 0, 0], [1, 4, 4, 4, 4]]),
            0,
        ),
    ]


def _mask_hidden(g):
    src = torch.randint(4, 9, (3, 5), generator=g)
    src[1, 3:], src[2, 2:] = 2, 2
    tgt = torch.randint(4, 9, (3, 6), generator=g)
    tgt[0, 4:], tgt[2, 1:] = 2, 2
    return [
        Case("pad_id 2, padded rows of different lengths", src, tgt, 2),
        Case("pad_id 0, one row", torch.tensor([[5, 6, 0]]), torch.tensor([[1, 7, 0, 0]]), 0),
    ]


register(
    "check_a2_masks",
    Reference(
        seed=203,
        cases=_mask_cases,
        hidden=_mask_hidden,
        solution=masks,
        mistakes=[
            lambda s, t, p: masks(s, t, p, triangle="upper"),
            lambda s, t, p: masks(s, t, p, pad_on="queries"),
            lambda s, t, p: masks(s, t, p, pad_value=0),
        ],
        shortcuts=[_masks_by_library, _masks_by_course],
    ),
)


# --------------------------------------------------------------------------------------
# Part 4: the layers
# --------------------------------------------------------------------------------------
def encoder_layer_class(placement="pre", residual="stream", ffn_reads="sum"):
    class EncoderLayer(nn.Module):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
            super().__init__()
            self.self_attn = _Attention(d_model, num_heads, dropout)
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.ff1, self.ff2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
            self.dropout = nn.Dropout(dropout)

        def ffn(self, x):
            return self.dropout(self.ff2(self.dropout(F.relu(self.ff1(x)))))

        def forward(self, x, src_mask=None):
            if placement == "post":
                x = self.ln1(x + self.dropout(self.self_attn(x, x, src_mask)[0]))
                return self.ln2(x + self.ffn(x))
            h = self.ln1(x)
            attended = self.dropout(self.self_attn(h, h, src_mask)[0])
            x_new = (h if residual == "normalised" else x) + attended
            return x_new + self.ffn(self.ln2(x_new if ffn_reads == "sum" else x))

    return EncoderLayer


def decoder_layer_class(memory_norm=False, cross_residual=True, placement="pre"):
    class DecoderLayer(nn.Module):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
            super().__init__()
            self.self_attn = _Attention(d_model, num_heads, dropout)
            self.cross_attn = _Attention(d_model, num_heads, dropout)
            self.ln1, self.ln2, self.ln3 = (nn.LayerNorm(d_model) for _ in range(3))
            self.ff1, self.ff2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
            self.dropout = nn.Dropout(dropout)

        def ffn(self, x):
            return self.dropout(self.ff2(self.dropout(F.relu(self.ff1(x)))))

        def forward(self, y, memory, tgt_mask=None, src_mask=None):
            if placement == "post":
                y = self.ln1(y + self.dropout(self.self_attn(y, y, tgt_mask)[0]))
                y = self.ln2(y + self.dropout(self.cross_attn(y, memory, src_mask)[0]))
                return self.ln3(y + self.ffn(y))
            h = self.ln1(y)
            y = y + self.dropout(self.self_attn(h, h, tgt_mask)[0])
            h = self.ln2(y)
            crossed = self.dropout(
                self.cross_attn(h, self.ln2(memory) if memory_norm else memory, src_mask)[0]
            )
            y = y + crossed if cross_residual else crossed
            return y + self.ffn(self.ln3(y))

    return DecoderLayer


_Encoder, _Decoder = encoder_layer_class(), decoder_layer_class()


def _torch_layer_state(state, decoder=False):
    """Our names as nn.Transformer{En,De}coderLayer's."""
    out = {}
    for ours, theirs in [("self_attn", "self_attn"), ("cross_attn", "multihead_attn")]:
        if f"{ours}.w_q.weight" in state:
            sub = {k.split(".", 1)[1]: v for k, v in state.items() if k.startswith(ours + ".")}
            out.update({f"{theirs}.{k}": v for k, v in _torch_state(sub).items()})
    for ours, theirs in [
        ("ln1", "norm1"),
        ("ln2", "norm2"),
        ("ln3", "norm3"),
        ("ff1", "linear1"),
        ("ff2", "linear2"),
    ]:
        for p in ("weight", "bias"):
            if f"{ours}.{p}" in state:
                out[f"{theirs}.{p}"] = state[f"{ours}.{p}"]
    return out


def torch_layer_class(decoder):
    """Shortcut: torch's pre-LN layer under the statement's names."""
    base = _Decoder if decoder else _Encoder

    class TorchLayer(base):
        def forward(self, x, *args):
            d = x.shape[-1]
            cls = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
            layer = cls(
                d, self.self_attn.h, self.ff1.out_features, dropout=0.0, batch_first=True, norm_first=True
            ).eval()
            layer.load_state_dict(_torch_layer_state(self.state_dict(), decoder))
            if decoder:
                memory, tgt_mask, src_mask = args
                return layer(x, memory, tgt_mask=~tgt_mask[0, 0], memory_key_padding_mask=~src_mask[:, 0, 0])
            return layer(x, src_key_padding_mask=~args[0][:, 0, 0])

    return TorchLayer


def _course_layer_class(decoder):
    """Shortcut: the course's pre-LN layer, through a subclass that renames the parts."""
    base = load("transformer.DecoderLayer" if decoder else "transformer.EncoderLayer")

    class Renamed(nn.Module):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
            super().__init__()
            ours = (_Decoder if decoder else _Encoder)(d_model, num_heads, d_ff, dropout)
            for name, child in ours.named_children():
                setattr(self, name, child)
            self.args = (d_model, num_heads, d_ff)

        def forward(self, x, *args):
            layer = base(*self.args, dropout=0.0, norm_first=True).eval()
            layer.load_state_dict(_torch_layer_state(self.state_dict(), decoder), strict=False)
            return layer(x, *args)

    return Renamed


def _encoder_cases(g):
    src_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :]
    return [
        Case(
            "d_model 8, 2 heads, no mask",
            8,
            2,
            16,
            _state(_Encoder, 8, 2, 16, g=g),
            torch.randn(2, 4, 8, generator=g),
            None,
        ),
        Case(
            "d_model 16, 4 heads, source padding",
            16,
            4,
            32,
            _state(_Encoder, 16, 4, 32, g=g),
            torch.randn(2, 5, 16, generator=g),
            src_mask,
        ),
    ]


def _decoder_cases(g):
    src_mask = torch.tensor([[True] * 6, [True] * 2 + [False] * 4])[:, None, None, :]
    tgt_mask = (
        torch.ones(4, 4, dtype=torch.bool).tril()[None, None]
        & torch.tensor([[True] * 4, [True] * 3 + [False]])[:, None, None, :]
    )
    return [
        Case(
            "d_model 8, 2 heads, T=3, S=5, no masks",
            8,
            2,
            16,
            _state(_Decoder, 8, 2, 16, g=g),
            torch.randn(2, 3, 8, generator=g),
            torch.randn(2, 5, 8, generator=g),
            None,
            None,
        ),
        Case(
            "d_model 16, 4 heads, T=4, S=6, causal and padding masks",
            16,
            4,
            32,
            _state(_Decoder, 16, 4, 32, g=g),
            torch.randn(2, 4, 16, generator=g),
            torch.randn(2, 6, 16, generator=g),
            tgt_mask,
            src_mask,
        ),
    ]


register(
    "check_a2_encoder_layer",
    Reference(
        seed=204,
        cases=_encoder_cases,
        solution=_Encoder,
        mistakes=[
            encoder_layer_class(placement="post"),
            encoder_layer_class(residual="normalised"),
            encoder_layer_class(ffn_reads="input"),
        ],
        shortcuts=[torch_layer_class(False), _course_layer_class(False)],
    ),
)

register(
    "check_a2_decoder_layer",
    Reference(
        seed=205,
        cases=_decoder_cases,
        solution=_Decoder,
        mistakes=[
            decoder_layer_class(memory_norm=True),
            decoder_layer_class(cross_residual=False),
            decoder_layer_class(placement="post"),
        ],
        shortcuts=[torch_layer_class(True), _course_layer_class(True)],
    ),
)


# --------------------------------------------------------------------------------------
# Part 4: the model
# --------------------------------------------------------------------------------------
def model_class(causal=True, cross_mask=True, source_positions=True, tie_by="sharing"):
    class Transformer(nn.Module):
        def __init__(
            self,
            src_vocab_size,
            tgt_vocab_size,
            d_model=64,
            num_heads=4,
            num_layers=2,
            d_ff=128,
            dropout=0.0,
            max_len=32,
            pad_id=0,
            tie=True,
        ):
            super().__init__()
            self.pad_id, self.d_model = pad_id, d_model
            self.src_embed = nn.Embedding(src_vocab_size, d_model)
            self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
            for embedding in (self.src_embed, self.tgt_embed):
                nn.init.normal_(embedding.weight, std=d_model**-0.5)
            self.dropout = nn.Dropout(dropout)
            self.encoder = nn.ModuleList(
                _Encoder(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)
            )
            self.decoder = nn.ModuleList(
                _Decoder(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)
            )
            self.encoder_norm, self.decoder_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.out = nn.Linear(d_model, tgt_vocab_size)
            if tie and tie_by == "sharing":
                self.out.weight = self.tgt_embed.weight
            elif tie:
                self.out.weight.data.copy_(self.tgt_embed.weight.data)

        def embed(self, embedding, ids, positions=True):
            x = embedding(ids) * math.sqrt(self.d_model)
            return self.dropout(add_positions(x) if positions else x)

        def encode(self, src):
            src_mask = (src != self.pad_id)[:, None, None, :]
            x = self.embed(self.src_embed, src, source_positions)
            for layer in self.encoder:
                x = layer(x, src_mask)
            return self.encoder_norm(x)

        def decode(self, tgt_in, memory, src):
            src_mask, tgt_mask = masks(src, tgt_in, self.pad_id)
            if not causal:
                tgt_mask = (tgt_in != self.pad_id)[:, None, None, :]
            y = self.embed(self.tgt_embed, tgt_in)
            for layer in self.decoder:
                y = layer(y, memory, tgt_mask, src_mask if cross_mask else None)
            return self.out(self.decoder_norm(y))

        def forward(self, src, tgt_in):
            return self.decode(tgt_in, self.encode(src), src)

    return Transformer


_Model = model_class()


def _course_model():
    """Shortcut: the course's Transformer behind the statement's constructor."""
    Transformer, Config = load("transformer.Transformer"), load("transformer.TransformerConfig")

    class Wrapped(nn.Module):
        def __init__(
            self,
            src_vocab_size,
            tgt_vocab_size,
            d_model=64,
            num_heads=4,
            num_layers=2,
            d_ff=128,
            dropout=0.0,
            max_len=32,
            pad_id=0,
            tie=True,
        ):
            super().__init__()
            self.inner = Transformer(
                Config(
                    src_vocab_size,
                    tgt_vocab_size,
                    d_model,
                    num_heads,
                    num_layers,
                    num_layers,
                    d_ff,
                    dropout,
                    norm_first=True,
                    max_len=max_len,
                    pad_id=pad_id,
                )
            )
            if tie:
                self.inner.out.weight = self.inner.tgt_embed.weight

        def encode(self, src):
            return self.inner.encode(src)

        def decode(self, tgt_in, memory, src):
            return self.inner.decode(tgt_in, memory, src)

        def forward(self, src, tgt_in):
            return self.inner(src, tgt_in)

    return Wrapped


def _torch_model():
    """Shortcut: torch.nn.Transformer behind the statement's constructor."""

    class Wrapped(_Model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            d = self.d_model
            self.core = nn.Transformer(
                d,
                self.encoder[0].self_attn.h,
                len(self.encoder),
                len(self.decoder),
                self.encoder[0].ff1.out_features,
                0.0,
                batch_first=True,
                norm_first=True,
            )

        def encode(self, src):
            return self.core.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src == self.pad_id)

        def decode(self, tgt_in, memory, src):
            T = tgt_in.shape[1]
            h = self.core.decoder(
                self.embed(self.tgt_embed, tgt_in),
                memory,
                tgt_mask=nn.Transformer.generate_square_subsequent_mask(T),
                memory_key_padding_mask=src == self.pad_id,
            )
            return self.out(h)

    return Wrapped


def _model_cases(g):
    small = dict(
        src_vocab_size=12,
        tgt_vocab_size=9,
        d_model=16,
        num_heads=2,
        num_layers=1,
        d_ff=32,
        dropout=0.0,
        max_len=16,
        pad_id=0,
    )
    two = dict(small, d_model=24, num_heads=4, num_layers=2, d_ff=48, dropout=0.1)
    src = torch.tensor([[4, 5, 6, 7, 8], [9, 10, 11, 0, 0]])
    tgt = torch.tensor([[1, 4, 5, 6, 7, 8], [1, 6, 7, 8, 0, 0]])
    return [
        Case("1 layer each, d_model 16, 2 heads", small, src, tgt),
        Case(
            "2 layers each, d_model 24, 4 heads, dropout 0.1 (evaluated in eval mode)",
            two,
            torch.randint(4, 12, (3, 7), generator=g),
            torch.randint(4, 9, (3, 5), generator=g),
        ),
    ]


register(
    "check_a2_model",
    Reference(
        seed=206,
        cases=_model_cases,
        solution=_Model,
        mistakes=[
            model_class(causal=False),
            model_class(cross_mask=False),
            model_class(source_positions=False),
            model_class(tie_by="copy"),
        ],
        shortcuts=[_course_model(), _torch_model()],
    ),
)


# --------------------------------------------------------------------------------------
# Part 5: the loss, the schedule, the training step
# --------------------------------------------------------------------------------------
def smoothed_loss(logits, tgt_out, pad_id, eps, spread="others", mean_over="real"):
    V = logits.shape[-1]
    logp = logits.log_softmax(-1)  # (B, T, V)
    if spread == "all":  # F.cross_entropy's
        q = torch.full_like(logp, eps / V)
        q.scatter_add_(-1, tgt_out[..., None], torch.full_like(logp[..., :1], 1 - eps))
    else:
        q = torch.full_like(logp, eps / (V - 1 if spread == "with pad" else V - 2))
        if spread != "with pad":
            q[..., pad_id] = 0.0
        q.scatter_(-1, tgt_out[..., None], 1 - eps)
    per_token = -(q * logp).sum(-1)  # (B, T)
    real = tgt_out != pad_id
    if mean_over == "all":
        return per_token.mean()
    return per_token[real].sum() / real.sum()


def _loss_by_nll(logits, tgt_out, pad_id, eps):
    """Shortcut: the target's share through F.nll_loss."""
    V = logits.shape[-1]
    logp = logits.log_softmax(-1).flatten(0, 1)
    t = tgt_out.flatten()
    real = t != pad_id
    target_term = F.nll_loss(logp, t, ignore_index=pad_id, reduction="sum")
    others = -(logp.sum(-1) - logp[:, pad_id]) + logp.gather(1, t[:, None])[:, 0]
    return ((1 - eps) * target_term + eps / (V - 2) * others[real].sum()) / real.sum()


def _loss_by_cross_entropy(logits, tgt_out, pad_id, eps):
    """Shortcut: F.cross_entropy(label_smoothing=...) corrected to the statement's convention
    (through torch._C._nn, beneath the Python function)."""
    V = logits.shape[-1]
    logp = logits.log_softmax(-1)
    flat, t = logits.flatten(0, 1), tgt_out.flatten()
    smoothed = torch._C._nn.cross_entropy_loss(flat, t, None, 1, pad_id, eps * V / (V - 2))
    real = t != pad_id
    # cross_entropy spreads eps' / V on every token, the target and pad included: take them back
    correction = (
        eps / (V - 2) * (logp.flatten(0, 1)[:, pad_id] - logp.flatten(0, 1).gather(1, t[:, None])[:, 0])
    )
    return smoothed + correction[real].mean()


def _loss_cases(g):
    t1 = torch.tensor([[4, 5, 2, 0], [6, 2, 0, 0]])
    return [
        Case("eps 0: the ordinary cross-entropy", torch.randn(2, 4, 7, generator=g), t1, 0, 0.0),
        Case("eps 0.1, pad_id 0", torch.randn(2, 4, 7, generator=g), t1, 0, 0.1),
        Case(
            "eps 0.2, pad_id 3, V 11",
            torch.randn(3, 5, 11, generator=g),
            torch.tensor([[4, 5, 6, 2, 3], [7, 2, 3, 3, 3], [8, 9, 10, 4, 2]]),
            3,
            0.2,
        ),
    ]


register(
    "check_a2_smoothed_loss",
    Reference(
        seed=207,
        cases=_loss_cases,
        solution=smoothed_loss,
        mistakes=[
            lambda *a: smoothed_loss(*a, spread="all"),
            lambda *a: smoothed_loss(*a, mean_over="all"),
            lambda *a: smoothed_loss(*a, spread="with pad"),
        ],
        shortcuts=[_loss_by_nll, _loss_by_cross_entropy],
    ),
)


def lr_at(step, peak_lr, warmup, total_steps, count_from=1, fall="from peak"):
    s = step - (1 - count_from)
    if s <= warmup:
        return peak_lr * s / warmup
    if fall == "none":
        return peak_lr
    if fall == "from zero":
        return peak_lr * (total_steps - s) / total_steps
    return peak_lr * (total_steps - s) / (total_steps - warmup)


def _lr_by_scheduler(step, peak_lr, warmup, total_steps):
    """Shortcut: torch's LambdaLR over a dummy optimiser."""
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=peak_lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(i / warmup, (total_steps - i) / (total_steps - warmup))
    )
    for _ in range(step):
        sched.step()
    return opt.param_groups[0]["lr"]


def _random_schedule(g):
    warmup = int(torch.randint(2, 9, (1,), generator=g))
    total = warmup + int(torch.randint(5, 31, (1,), generator=g))
    peak = round(float(torch.rand(1, generator=g)) * 0.01 + 1e-4, 6)
    return Case(f"peak {peak:g}, warm-up {warmup} of {total} steps", peak, warmup, total)


register(
    "check_a2_lr_schedule",
    Reference(
        seed=208,
        cases=lambda g: [
            _random_schedule(g),
            Case("peak 0.5, warm-up 10 of 50 steps", 0.5, 10, 50),
            Case("peak 3e-3, warm-up 1 of 6 steps", 3e-3, 1, 6),
        ],
        hidden=lambda g: [_random_schedule(g), _random_schedule(g)],
        solution=lr_at,
        mistakes=[
            lambda *a: lr_at(*a, count_from=0),
            lambda *a: lr_at(*a, fall="from zero"),
            lambda *a: lr_at(*a, fall="none"),
        ],
        shortcuts=[_lr_by_scheduler],
    ),
)


def train_step(model, optimizer, src, tgt_out, step, hp, shift=True, zero=True, clip=True):
    for group in optimizer.param_groups:
        group["lr"] = lr_at(step, hp["peak_lr"], hp["warmup"], hp["total_steps"])
    bos = torch.full_like(tgt_out[:, :1], hp["bos_id"])
    tgt_in = torch.cat([bos, tgt_out[:, :-1]], dim=1) if shift else tgt_out
    model.train()
    loss = smoothed_loss(model(src, tgt_in), tgt_out, hp["pad_id"], hp["eps"])
    if zero:
        optimizer.zero_grad()
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), hp["clip"])
    optimizer.step()
    return loss.item()


def _train_step_by_library(model, optimizer, src, tgt_out, step, hp):
    """Shortcut: the loss by F.cross_entropy (here without smoothing, eps = 0)."""
    for group in optimizer.param_groups:
        group["lr"] = lr_at(step, hp["peak_lr"], hp["warmup"], hp["total_steps"])
    tgt_in = torch.cat([torch.full_like(tgt_out[:, :1], hp["bos_id"]), tgt_out[:, :-1]], dim=1)
    logits = model(src, tgt_in)
    loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=hp["pad_id"])
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), hp["clip"])
    optimizer.step()
    return loss.item()


def _toy_state(toy_args, g, scale=1.0):
    return {
        k: torch.randn(v.shape, generator=g) * scale for k, v in a2.ToySeq2Seq(*toy_args).state_dict().items()
    }


def _train_step_cases(g):
    hp = dict(peak_lr=0.5, warmup=3, total_steps=10, bos_id=1, pad_id=0, eps=0.0, clip=0.5)
    toy = (9, 8, 6, 16, 0)
    return [
        Case(
            "steps 2 and 3 (warm-up), eps 0",
            toy,
            _toy_state(toy, g),
            torch.randint(4, 9, (4, 5), generator=g),
            torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0], [5, 5, 2, 0], [6, 4, 7, 2]]),
            2,
            hp,
        ),
        Case(
            "steps 6 and 7 (falling), eps 0.1, clip 0.3",
            toy,
            _toy_state(toy, g),
            torch.randint(4, 9, (3, 6), generator=g),
            torch.tensor([[7, 6, 5, 4, 2], [4, 2, 0, 0, 0], [6, 6, 6, 2, 0]]),
            6,
            dict(hp, eps=0.1, clip=0.3),
        ),
    ]


register(
    "check_a2_train_step",
    Reference(
        seed=209,
        cases=_train_step_cases,
        solution=train_step,
        mistakes=[
            lambda *a: train_step(*a, shift=False),
            lambda *a: train_step(*a, zero=False),
            lambda *a: train_step(*a, clip=False),
        ],
        shortcuts=[_train_step_by_library],
    ),
)


# --------------------------------------------------------------------------------------
# Part 6: greedy decoding
# --------------------------------------------------------------------------------------
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id, keep_bos=False, fill=True, stop="all", prefix="whole"):
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        read = ys if prefix == "whole" else ys[:, -1:]
        token = model.decode(read, memory, src)[:, -1].argmax(-1)  # (B,)
        if fill:
            token = token.masked_fill(finished, eos_id)
        ys = torch.cat([ys, token[:, None]], dim=1)
        finished |= token == eos_id
        if finished.all() or (stop == "any" and finished.any()):
            break
    return ys if keep_bos else ys[:, 1:]


def _decode_by_library(model, src, max_len, bos_id, eos_id):
    """Shortcut: course_lib.decoding.greedy over a step function."""
    memory = model.encode(src)

    def step(y, prefix):
        prefix = torch.cat([prefix, y[:, None]], dim=1)
        return model.decode(prefix, memory, src)[:, -1], prefix

    y0 = torch.full((src.shape[0],), bos_id, dtype=torch.long)
    tokens, _ = load("decoding.greedy")(step, y0, src.new_zeros(src.shape[0], 0), max_len, eos_id)
    return tokens


def _decode_cases(g):
    cases = []
    for description, toy, B, S, max_len, _seed in [
        ("a batch of 4 whose rows end at different steps", (9, 7, 6, 16, 0), 4, 5, 8, 0),
        ("a batch of 3, some rows never end within max_len", (9, 7, 6, 16, 0), 3, 4, 6, 1),
        ("a batch of 5, max_len 10", (11, 8, 8, 16, 0), 5, 6, 10, 2),
    ]:
        state = _toy_state(toy, g, scale=1.5)
        state["out.bias"][2] += 1.0  # <eos> comes soon
        src = torch.randint(4, toy[0], (B, S), generator=g)
        src[-1, -2:] = 0  # a padded source
        cases.append(Case(description, toy, state, src, max_len, 1, 2))
    return cases


register(
    "check_a2_greedy_decode",
    Reference(
        seed=210,
        cases=_decode_cases,
        solution=greedy_decode,
        mistakes=[
            lambda *a: greedy_decode(*a, keep_bos=True),
            lambda *a: greedy_decode(*a, fill=False),
            lambda *a: greedy_decode(*a, stop="any"),
            lambda *a: greedy_decode(*a, prefix="last"),
        ],
        shortcuts=[_decode_by_library],
    ),
)


# --------------------------------------------------------------------------------------
# Part 7: the goal
# --------------------------------------------------------------------------------------
HP = dict(peak_lr=3e-3, warmup=60, total_steps=400, bos_id=a2.BOS_ID, pad_id=a2.PAD_ID, eps=0.1, clip=1.0)


def reference_model(seed=0):
    torch.manual_seed(seed)
    return _Model(
        len(a2.SRC_VOCAB),
        len(a2.TGT_VOCAB),
        d_model=64,
        num_heads=4,
        num_layers=2,
        d_ff=128,
        dropout=0.0,
        max_len=32,
        pad_id=a2.PAD_ID,
        tie=True,
    )


def trained_reference(seed=0, steps=400):
    model = reference_model(seed)
    a2.train(model, train_step, steps, dict(HP, total_steps=steps), seed=seed)
    return model.eval(), greedy_decode


register(
    "check_a2_exact_match",
    GoalReference(passing=trained_reference, missing=lambda: (reference_model().eval(), greedy_decode)),
)
