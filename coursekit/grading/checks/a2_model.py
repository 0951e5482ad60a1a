"""References of assignment 2, part 4: the encoder and decoder layers and the model
(``course_lib/exercises/a2.py``; parts 1 to 3 in ``a2.py``, 5 to 7 in ``a2_train.py``).

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

from ..references import Case, Reference, load, register
from .a2 import _Attention, _state, _torch_state, add_positions, masks


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
