"""Unit tests of course_lib.pages.ablation (zero a head, set a head to its mean, remove the FFNs) and of
chapter 8's extrapolation experiment (course_lib.pages.positional_experiments)."""

import pytest
import torch

from course_lib.multihead import MultiHeadAttention
from course_lib.pages import positional_experiments as PE
from course_lib.pages.ablation import mean_head, without_ffn, zero_head
from tiny_models import tiny_transformer

torch.set_num_threads(1)


def test_zero_head_removes_one_head_until_the_hook_goes():
    torch.manual_seed(0)
    attn = MultiHeadAttention(16, num_heads=4).eval()
    x = torch.randn(2, 5, 16)
    full, _ = attn(x, x, x)
    handles = [zero_head(attn, h) for h in range(4)]
    none, _ = attn(x, x, x)
    assert torch.allclose(none, attn.out_proj.bias.expand_as(none)), "all heads zeroed: only W^O's bias"
    for handle in handles:
        handle.remove()
    again, _ = attn(x, x, x)
    assert torch.equal(again, full)


def test_mean_head_replaces_one_head_by_a_fixed_vector_until_the_hook_goes():
    torch.manual_seed(0)
    attn = MultiHeadAttention(16, num_heads=4).eval()
    x = torch.randn(2, 5, 16)
    full, _ = attn(x, x, x)
    mean = torch.randn(16)  # (h * d_k,)
    one = mean_head(attn, 1, mean)
    changed, _ = attn(x, x, x)
    one.remove()
    seen = {}
    grab = attn.out_proj.register_forward_pre_hook(lambda m, args: seen.setdefault("x", args[0].clone()))
    attn(x, x, x)
    grab.remove()
    expected = seen["x"].clone()
    expected[..., 4:8] = mean[4:8]  # head 1's d_k = 4 columns
    assert torch.allclose(changed, attn.out_proj(expected), atol=1e-6)
    handles = [mean_head(attn, h, mean) for h in range(4)]
    constant, _ = attn(x, x, x)
    assert torch.allclose(constant, attn.out_proj(mean).expand_as(constant), atol=1e-6), (
        "every head: W^O mean"
    )
    for handle in handles:
        handle.remove()
    assert torch.equal(attn(x, x, x)[0], full)


@pytest.mark.parametrize("norm_first", [False, True])
def test_without_ffn_deletes_the_ffns_and_their_parameters(norm_first):
    model = tiny_transformer(12, 9, norm_first=norm_first)
    ffn = sum(
        p.numel()
        for l in [*model.encoder.layers, *model.decoder.layers]
        for p in [*l.linear1.parameters(), *l.linear2.parameters()]
    )
    before = sum(p.numel() for p in model.parameters())
    without_ffn(model)
    assert sum(p.numel() for p in model.parameters()) == before - ffn
    layer = model.encoder.layers[0]
    x = torch.randn(2, 5, 16)
    attended = layer._self_attention(layer.norm1(x) if norm_first else x, None, None)
    expected = x + attended if norm_first else layer.norm2(layer.norm1(x + attended))
    assert torch.allclose(layer(x), expected, atol=1e-6)
    src, tgt = torch.randint(1, 12, (2, 6)), torch.randint(1, 9, (2, 4))
    assert model(src, tgt).shape == (2, 4, 9)


@pytest.mark.parametrize("scheme", sorted(PE.POSITION_SCHEMES))
def test_previous_token_models_are_causal(scheme):
    torch.manual_seed(0)
    model = PE.POSITION_SCHEMES[scheme]().eval()
    x, y = PE.previous_token(3, 12, torch.Generator().manual_seed(0))
    assert torch.equal(y[:, 1:], x[:, :-1]) and (y[:, 0] == PE.VOCAB).all()
    changed = x.clone()
    changed[:, 7] = (x[:, 7] + 1) % PE.VOCAB
    a, b = model(x), model(changed)
    assert a.shape == (3, 12, PE.VOCAB + 1)
    assert (a[:, :7] - b[:, :7]).abs().max() < 1e-6 and (a[:, 7:] - b[:, 7:]).abs().max() > 1e-6


def test_train_previous_token_names_an_unknown_scheme():
    with pytest.raises(ValueError, match="name must be one of"):
        PE.train_previous_token("absolute", 0)
