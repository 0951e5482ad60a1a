"""course_lib.transformer against torch.nn.Transformer*: same parameter names and shapes, and
after load_state_dict the same outputs (eval mode, ReLU, batch_first=True), for both norm
placements and every mask kind. torch's boolean masks mean True = BLOCKED; ours True = allowed."""

import pytest
import torch
import torch.nn as nn

from course_lib.attention import causal_mask, padding_mask
from course_lib.transformer import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    Transformer,
    TransformerConfig,
)

D_MODEL, HEADS, D_FF = 16, 4, 24


def torch_encoder_layer(norm_first):
    return nn.TransformerEncoderLayer(
        D_MODEL, HEADS, D_FF, dropout=0.1, batch_first=True, norm_first=norm_first
    ).eval()


def torch_decoder_layer(norm_first):
    return nn.TransformerDecoderLayer(
        D_MODEL, HEADS, D_FF, dropout=0.1, batch_first=True, norm_first=norm_first
    ).eval()


def randomise(module, seed):
    """Random values in every parameter (LayerNorm gains and all biases too)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(
                torch.randn(p.shape, generator=g) * 0.3
                + (1.0 if p.dim() == 1 and p.shape[0] == D_MODEL else 0)
            )
    return module


def masks(B, T, S, kind, lengths):
    """(ours: True = allowed, broadcastable) and torch's (attn_mask, key_padding_mask)."""
    pad = padding_mask(lengths, S)  # (B, 1, 1, S)
    if kind == "none":
        return None, {}
    if kind == "padding":
        return pad, {"key_padding_mask": ~pad[:, 0, 0]}
    causal = causal_mask(T, S)
    if kind == "causal":
        return causal, {"attn_mask": ~causal}
    return causal & pad, {"attn_mask": ~causal, "key_padding_mask": ~pad[:, 0, 0]}


def test_parameter_names_and_shapes_are_torchs():
    for ours, theirs in [
        (EncoderLayer(D_MODEL, HEADS, D_FF), torch_encoder_layer(False)),
        (DecoderLayer(D_MODEL, HEADS, D_FF), torch_decoder_layer(False)),
    ]:
        ours_shapes = {k: tuple(v.shape) for k, v in ours.state_dict().items()}
        their_shapes = {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
        assert ours_shapes == their_shapes


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kind", ["none", "padding", "causal", "causal+padding"])
def test_encoder_layer_matches_torch(norm_first, kind):
    torch.manual_seed(0)
    theirs = randomise(torch_encoder_layer(norm_first), 1)
    ours = EncoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first).eval()
    ours.load_state_dict(theirs.state_dict())
    B, T = 3, 7
    x = torch.randn(B, T, D_MODEL)
    ours_mask, torch_kwargs = masks(B, T, T, kind, torch.tensor([7, 4, 1]))
    if "attn_mask" in torch_kwargs:
        torch_kwargs["src_mask"] = torch_kwargs.pop("attn_mask")
    if "key_padding_mask" in torch_kwargs:
        torch_kwargs["src_key_padding_mask"] = torch_kwargs.pop("key_padding_mask")
    expected = theirs(x, **torch_kwargs)
    got = ours(x, ours_mask)
    valid = (
        padding_mask(torch.tensor([7, 4, 1]), T)[:, 0, 0]
        if "padding" in kind
        else torch.ones(B, T, dtype=torch.bool)
    )
    # torch's fast path may return zeros at padded positions: compare the real ones
    torch.testing.assert_close(got[valid], expected[valid], atol=1e-5, rtol=1e-4)
    assert ours.last_weights.shape == (B, HEADS, T, T)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kind", ["none", "padding", "causal", "causal+padding"])
def test_decoder_layer_matches_torch(norm_first, kind):
    torch.manual_seed(0)
    theirs = randomise(torch_decoder_layer(norm_first), 2)
    ours = DecoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first).eval()
    ours.load_state_dict(theirs.state_dict())
    B, T, S = 3, 5, 6
    x, memory = torch.randn(B, T, D_MODEL), torch.randn(B, S, D_MODEL)
    src_len, tgt_len = torch.tensor([6, 3, 1]), torch.tensor([5, 2, 4])
    self_mask, self_kwargs = masks(B, T, T, "causal" if "causal" in kind else "none", tgt_len)
    pad_kind = "padding" if "padding" in kind else "none"
    mem_mask, mem_kwargs = masks(B, T, S, pad_kind, src_len)
    if "padding" in kind:  # target padding too, combined with the causal mask
        tgt_pad = padding_mask(tgt_len, T)
        self_mask = tgt_pad if self_mask is None else self_mask & tgt_pad
        self_kwargs["key_padding_mask"] = ~tgt_pad[:, 0, 0]
    kwargs = {}
    if "attn_mask" in self_kwargs:
        kwargs["tgt_mask"] = self_kwargs["attn_mask"]
    if "key_padding_mask" in self_kwargs:
        kwargs["tgt_key_padding_mask"] = self_kwargs["key_padding_mask"]
    if "key_padding_mask" in mem_kwargs:
        kwargs["memory_key_padding_mask"] = mem_kwargs["key_padding_mask"]
    expected = theirs(x, memory, **kwargs)
    got = ours(x, memory, self_mask, mem_mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    assert ours.last_self_weights.shape == (B, HEADS, T, T)
    assert ours.last_cross_weights.shape == (B, HEADS, T, S)


@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_match_torch_encoder_and_decoder(norm_first):
    torch.manual_seed(0)
    t_enc = nn.TransformerEncoder(
        torch_encoder_layer(norm_first), 3, norm=nn.LayerNorm(D_MODEL), enable_nested_tensor=False
    ).eval()
    t_dec = nn.TransformerDecoder(torch_decoder_layer(norm_first), 2, norm=nn.LayerNorm(D_MODEL)).eval()
    randomise(t_enc, 3), randomise(t_dec, 4)
    enc = Encoder(3, D_MODEL, HEADS, D_FF, norm_first=norm_first).eval()
    dec = Decoder(2, D_MODEL, HEADS, D_FF, norm_first=norm_first).eval()
    enc.load_state_dict(t_enc.state_dict())
    dec.load_state_dict(t_dec.state_dict())
    B, S, T = 2, 6, 4
    src, tgt = torch.randn(B, S, D_MODEL), torch.randn(B, T, D_MODEL)
    src_pad = padding_mask(torch.tensor([6, 3]), S)
    memory = enc(src, src_pad)
    t_memory = t_enc(src, src_key_padding_mask=~src_pad[:, 0, 0])
    torch.testing.assert_close(memory, t_memory, atol=1e-5, rtol=1e-4)
    out = dec(tgt, memory, causal_mask(T), src_pad)
    t_out = t_dec(tgt, t_memory, tgt_mask=~causal_mask(T), memory_key_padding_mask=~src_pad[:, 0, 0])
    torch.testing.assert_close(out, t_out, atol=1e-5, rtol=1e-4)


def test_stack_without_final_norm_matches_torch_with_norm_none():
    t_enc = randomise(
        nn.TransformerEncoder(torch_encoder_layer(False), 2, enable_nested_tensor=False).eval(), 5
    )
    enc = Encoder(2, D_MODEL, HEADS, D_FF, final_norm=False).eval()
    enc.load_state_dict(t_enc.state_dict())
    x = torch.randn(2, 5, D_MODEL)
    torch.testing.assert_close(enc(x), t_enc(x), atol=1e-5, rtol=1e-4)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_body_matches_nn_transformer(norm_first):
    """Our Transformer's encoder + decoder load nn.Transformer's state dict and agree with it."""
    torch.manual_seed(0)
    theirs = nn.Transformer(
        D_MODEL, HEADS, 2, 2, D_FF, dropout=0.1, batch_first=True, norm_first=norm_first
    ).eval()
    randomise(theirs, 6)
    config = TransformerConfig(11, 13, D_MODEL, HEADS, 2, 2, D_FF, norm_first=norm_first)
    ours = Transformer(config).eval()
    ours.encoder.load_state_dict(theirs.encoder.state_dict())
    ours.decoder.load_state_dict(theirs.decoder.state_dict())
    src = torch.tensor([[3, 4, 5, 6, 0, 0], [7, 8, 9, 10, 2, 1]])
    tgt_in = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 0]])
    x_src, x_tgt = ours.embed(ours.src_embed, src), ours.embed(ours.tgt_embed, tgt_in)
    pad = src == 0
    expected = theirs(
        x_src, x_tgt, tgt_mask=~causal_mask(4), src_key_padding_mask=pad, memory_key_padding_mask=pad
    )
    expected_logits = ours.out(expected)
    torch.testing.assert_close(ours(src, tgt_in), expected_logits, atol=1e-5, rtol=1e-4)


def test_gradients_match_torch_encoder_layer():
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, batch_first=True)
    randomise(theirs, 7).train()
    ours = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(2, 5, D_MODEL)
    ours(x, causal_mask(5)).square().sum().backward()
    theirs(x, src_mask=~causal_mask(5)).square().sum().backward()
    their_grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, their_grads[name].grad, atol=1e-4, rtol=1e-4)


ACTIVATIONS = [
    ("relu", "relu"),
    ("gelu", "gelu"),
    ("callable", lambda x: torch.nn.functional.silu(x)),
]  # any function, as in torch


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("name,activation", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
@pytest.mark.parametrize("norm_first", [False, True])
def test_activation_and_bias_options_match_torch(name, activation, bias, norm_first):
    """activation ("relu", "gelu" or a callable) and bias=False, as torch's layers take them:
    the same state dict keys, and after load_state_dict the same outputs."""
    torch.manual_seed(0)
    options = dict(dropout=0.1, activation=activation, norm_first=norm_first, bias=bias)
    pairs = [
        (
            EncoderLayer(D_MODEL, HEADS, D_FF, **options),
            nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, batch_first=True, **options),
        ),
        (
            DecoderLayer(D_MODEL, HEADS, D_FF, **options),
            nn.TransformerDecoderLayer(D_MODEL, HEADS, D_FF, batch_first=True, **options),
        ),
    ]
    x, memory, mask = torch.randn(2, 5, D_MODEL), torch.randn(2, 4, D_MODEL), causal_mask(5)
    for k, (ours, theirs) in enumerate(pairs):
        theirs = randomise(theirs.eval(), 10 + k)
        assert set(ours.state_dict()) == set(theirs.state_dict())
        assert bias or not any(name.endswith("bias") and "norm" not in name for name in ours.state_dict())
        ours.load_state_dict(theirs.state_dict())
        ours.eval()
        if isinstance(ours, EncoderLayer):
            got, expected = ours(x, mask), theirs(x, src_mask=~mask)
        else:
            got, expected = ours(x, memory, mask), theirs(x, memory, tgt_mask=~mask)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


def test_bool_options_are_type_checked():
    for make in (lambda: EncoderLayer(16, 4, 32, bias=1), lambda: DecoderLayer(16, 4, 32, norm_first="no")):
        with pytest.raises(TypeError, match="should be of type bool"):
            make()
    with pytest.raises(ValueError, match=r"activation must be one of \['relu', 'gelu'\], got 'tanh'"):
        EncoderLayer(16, 4, 32, activation="tanh")
