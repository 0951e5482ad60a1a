"""course_lib.multihead.MultiHeadAttention is nn.MultiheadAttention, parameter for parameter.

After `ours.load_state_dict(theirs.state_dict())`, outputs, per-head weights and all
gradients match torch (batch_first=True, eval mode) for self- and cross-attention, several
d_model/h, and every mask kind. Torch's boolean masks mean the opposite of ours
(True = blocked), which these tests translate explicitly.
"""

import itertools

import pytest
import torch
import torch.nn as nn

from course_lib.attention import causal_mask, padding_mask
from course_lib.multihead import MultiHeadAttention, merge_heads, split_heads

SIZES = [(8, 1), (16, 2), (32, 4), (64, 8)]  # (d_model, num_heads)
MASKS = ["none", "causal", "padding", "both", "float"]
ATTENTION = ["self", "cross"]


def pair(d_model, h, bias=True, seed=0):
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(d_model, h, bias=bias, batch_first=True).eval()
    ours = MultiHeadAttention(d_model, h, bias=bias).eval()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def masks(kind, B, T, S, seed=0):
    """(our mask, torch attn_mask, torch key_padding_mask) meaning the same thing."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, S + 1, (B,), generator=g)
    lengths[0] = S
    ours_pad = padding_mask(lengths, S)  # (B, 1, 1, S), True = allowed
    torch_pad = ~ours_pad[:, 0, 0, :]  # (B, S), True = blocked
    causal = causal_mask(T, S)  # (T, S), True = allowed
    if kind == "none":
        return None, None, None
    if kind == "causal":
        return causal, ~causal, None
    if kind == "padding":
        return ours_pad, None, torch_pad
    if kind == "both":
        return causal & ours_pad, ~causal, torch_pad
    bias = torch.randn(T, S, generator=g)  # a float mask is added to the scores
    return bias, bias, None


@pytest.mark.parametrize("d_model,h", SIZES)
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("kind", ATTENTION)
def test_outputs_weights_and_gradients_match_torch(d_model, h, mask_kind, kind):
    ours, theirs = pair(d_model, h)
    B, T = 3, 5
    S = T if kind == "self" else 7
    if mask_kind in ("causal", "both") and kind == "cross":
        S = T  # a causal mask needs T == S (or a rectangular one: causal_mask(T, S))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, T, d_model, generator=g)
    memory = x if kind == "self" else torch.randn(B, S, d_model, generator=g)
    our_mask, attn_mask, key_padding_mask = masks(mask_kind, B, T, S)

    inputs = [x.clone().requires_grad_(), memory.clone().requires_grad_()]
    out, weights = ours(inputs[0], inputs[1], inputs[1], mask=our_mask)
    t_inputs = [x.clone().requires_grad_(), memory.clone().requires_grad_()]
    t_out, t_weights = theirs(
        t_inputs[0],
        t_inputs[1],
        t_inputs[1],
        attn_mask=attn_mask,
        key_padding_mask=key_padding_mask,
        need_weights=True,
        average_attn_weights=False,
    )
    assert weights.shape == (B, h, T, S)
    torch.testing.assert_close(out, t_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, t_weights, atol=1e-5, rtol=1e-5)

    grad = torch.randn_like(out)
    ours_grads = torch.autograd.grad(out, [*inputs, *ours.parameters()], grad)
    theirs_grads = torch.autograd.grad(t_out, [*t_inputs, *theirs.parameters()], grad)
    for a, b in zip(ours_grads, theirs_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_state_dict_names_and_shapes_are_torchs():
    ours, theirs = pair(32, 4)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: v.shape for k, v in theirs.state_dict().items()
    }
    ours_nb, theirs_nb = pair(32, 4, bias=False)
    assert set(ours_nb.state_dict()) == set(theirs_nb.state_dict()) == {"in_proj_weight", "out_proj.weight"}
    x = torch.randn(2, 3, 32)
    torch.testing.assert_close(ours_nb(x, x, x)[0], theirs_nb(x, x, x)[0], atol=1e-5, rtol=1e-5)


def test_parameter_count_does_not_depend_on_heads():
    counts = {h: sum(p.numel() for p in MultiHeadAttention(64, h).parameters()) for h in (1, 2, 4, 8)}
    assert set(counts.values()) == {4 * 64 * 64 + 4 * 64}


def test_fully_masked_rows_give_zeros_not_nan():
    ours, _ = pair(16, 2)
    x = torch.randn(2, 4, 16, requires_grad=True)
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[1, :, 2, :] = False  # batch 1, query 2 sees nothing
    out, weights = ours(x, x, x, mask=mask)
    assert torch.isfinite(out).all() and (weights[1, :, 2] == 0).all()
    torch.testing.assert_close(out[1, 2], ours.out_proj.bias)  # zero heads -> W^O 0 + b
    out.sum().backward()
    assert torch.isfinite(x.grad).all()


def test_split_and_merge_heads_are_inverse_and_slice_features():
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8)
    heads = split_heads(x, 4)  # (2, 4, 3, 2)
    assert heads.shape == (2, 4, 3, 2)
    assert torch.equal(heads[:, 1], x[..., 2:4])  # head 1 = features 2..3
    assert torch.equal(merge_heads(heads), x)


def test_dropout_applies_to_weights_in_training_only():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2, dropout=0.5)
    x = torch.randn(2, 6, 16)
    mha.eval()
    a, b = mha(x, x, x)[0], mha(x, x, x)[0]
    assert torch.equal(a, b)
    mha.train()
    assert not torch.allclose(mha(x, x, x)[0], a)


@pytest.mark.parametrize(
    "args,match",
    [
        ((30, 4), "d_model=30 is not divisible by num_heads=4"),
        ((32, 0), "num_heads must be a positive int, got 0"),
    ],
)
def test_bad_construction(args, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(*args)


def test_bad_inputs_name_the_argument_and_shapes():
    mha = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match=r"query must be \(B, T, d_model=16\), got shape \(2, 5, 8\)"):
        mha(torch.randn(2, 5, 8), x, x)
    with pytest.raises(ValueError, match="key and value need the same"):
        mha(x, x, torch.randn(2, 4, 16))
    with pytest.raises(ValueError, match="same batch size"):
        mha(x, torch.randn(3, 5, 16), torch.randn(3, 5, 16))
    with pytest.raises(ValueError, match=r"mask of shape \(5, 4\) does not broadcast"):
        mha(x, x, x, mask=torch.ones(5, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask must be bool"):
        mha(x, x, x, mask=torch.ones(5, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="not divisible"):
        split_heads(x, 3)


@pytest.mark.parametrize("d_model,h", list(itertools.product([12, 24], [1, 3])))
def test_other_sizes_match_torch(d_model, h):
    ours, theirs = pair(d_model, h, seed=3)
    x = torch.randn(4, 9, d_model)
    out, w = ours(x, x, x)
    t_out, t_w = theirs(x, x, x, average_attn_weights=False)
    torch.testing.assert_close(out, t_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, t_w, atol=1e-5, rtol=1e-5)
