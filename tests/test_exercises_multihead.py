"""The checks of the chapters on self-attention, multi-head attention and positional encodings:
each passes on a solution, raises ExerciseNotAttempted on the stub, and names typical mistakes."""

import math

import pytest
import torch
import torch.nn.functional as F

from check_failures import fails_with
from course_lib import attention as A
from course_lib.exercises import (
    ExerciseNotAttempted,
    check_alibi_bias,
    check_attention_flops,
    check_cross_attention,
    check_key_padding_mask,
    check_merge_heads,
    check_multihead_forward,
    check_self_attention,
    check_shift_matrix,
    check_sinusoidal_encoding,
    check_split_heads,
)
from course_lib.multihead import merge_heads, split_heads


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: write your solution here")


# --- solutions, written as a learner would (the library's attention is off limits in the
# self- and cross-attention checks: they ask for it) ------------------------------------


def attend(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


def self_attention(x, w_q, w_k, w_v):
    return attend(x @ w_q, x @ w_k, x @ w_v)


def cross_attention(y, x, w_q, w_k, w_v):
    return attend(y @ w_q, x @ w_k, x @ w_v)


def flops(n, d):
    return 3 * n * d * d + 2 * n * n * d


def my_split(x, h):
    B, T, d = x.shape
    return x.view(B, T, h, d // h).transpose(1, 2)


def my_merge(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)


def key_padding(lengths, T):
    return torch.arange(T)[None, :] >= lengths[:, None]


def multihead(x, mha, mask=None):
    projected = F.linear(x, mha.in_proj_weight, mha.in_proj_bias)
    q, k, v = (split_heads(p, mha.num_heads) for p in projected.chunk(3, dim=-1))
    heads, weights = A.scaled_dot_product_attention(q, k, v, mask=mask)
    return mha.out_proj(merge_heads(heads)), weights


def sinusoidal(n, d):
    t = torch.arange(n, dtype=torch.float32)[:, None]
    omega = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    pe = torch.zeros(n, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(t * omega), torch.cos(t * omega)
    return pe


def shift(k, w):
    c, s = math.cos(w * k), math.sin(w * k)
    return torch.tensor([[c, s], [-s, c]])


def alibi(T, slope):
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    return (-slope * (i - j).float()).masked_fill(j > i, float("-inf"))


CHECKS = [
    (check_self_attention, self_attention),
    (check_cross_attention, cross_attention),
    (check_attention_flops, flops),
    (check_split_heads, my_split),
    (check_merge_heads, my_merge),
    (check_key_padding_mask, key_padding),
    (check_multihead_forward, multihead),
    (check_sinusoidal_encoding, sinusoidal),
    (check_shift_matrix, shift),
    (check_alibi_bias, alibi),
]


@pytest.mark.parametrize("check,solution", CHECKS, ids=[c.__name__ for c, _ in CHECKS])
def test_passes_on_the_solution(check, solution, capsys):
    assert check(solution)
    assert "all" in capsys.readouterr().out


@pytest.mark.parametrize("check", [c for c, _ in CHECKS], ids=[c.__name__ for c, _ in CHECKS])
def test_stub_is_not_attempted(check):
    with pytest.raises(ExerciseNotAttempted):
        check(stub)


# --- typical mistakes are named -------------------------------------------------------


def test_self_attention_mistakes():
    fails_with(
        check_self_attention,
        lambda x, q, k, v: attend(x @ q * math.sqrt(q.shape[1]), x @ k, x @ v),
        "not scaled",
    )
    fails_with(
        check_self_attention,
        lambda x, q, k, v: attend(x @ q, x @ k, x),
        "values are x itself",
    )
    fails_with(
        check_self_attention,
        lambda x, q, k, v: attend(x @ q, x @ q, x @ v),
        "keys use W_q",
    )


def test_cross_attention_mistakes():
    fails_with(
        check_cross_attention,
        lambda y, x, q, k, v: attend(y @ q, y @ k, y @ v),
        "self-attention on y",
    )
    fails_with(
        check_cross_attention,
        lambda y, x, q, k, v: attend(x @ q, y @ k, y @ v),
        "roles are swapped",
    )


def test_flops_mistakes():
    fails_with(check_attention_flops, lambda n, d: 2 * n * n * d, "projections")
    fails_with(check_attention_flops, lambda n, d: 3 * n * d * d + n * n * d, "only one of the two")


def test_split_and_merge_mistakes():
    fails_with(check_split_heads, lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), "reshape alone")
    fails_with(
        check_split_heads, lambda x, h: x.view(*x.shape[:2], -1, h).permute(0, 3, 1, 2), "every h-th feature"
    )
    fails_with(check_merge_heads, lambda x: x.reshape(x.shape[0], x.shape[2], -1), "transpose(1, 2)")


def test_key_padding_mask_mistakes():
    def allowed(lengths, T):
        return (torch.arange(T)[None, :] < lengths[:, None])[:, None, None, :]  # course_lib's layout

    fails_with(
        check_key_padding_mask, lambda lengths, T: allowed(lengths, T)[:, 0, 0, :], "polarity is inverted"
    )
    fails_with(check_key_padding_mask, lambda lengths, T: ~allowed(lengths, T), "(B, T)")
    fails_with(
        check_key_padding_mask, lambda lengths, T: ~A.padding_mask(lengths, T)[:, 0, 0, :], "off limits"
    )


def test_multihead_forward_mistakes():
    def averaged(x, mha, mask=None):
        out, w = multihead(x, mha, mask)
        return out, w.mean(1)

    def wrong_scale(x, mha, mask=None):
        projected = F.linear(x, mha.in_proj_weight, mha.in_proj_bias)
        q, k, v = (split_heads(p, mha.num_heads) for p in projected.chunk(3, dim=-1))
        q = q * math.sqrt(mha.d_k) / math.sqrt(mha.d_model)
        heads, weights = A.scaled_dot_product_attention(q, k, v, mask=mask)
        return mha.out_proj(merge_heads(heads)), weights

    def inverted_mask(x, mha, mask=None):
        return multihead(x, mha, None if mask is None else ~mask)

    def reshaped_heads(x, mha, mask=None):
        B, T, _ = x.shape
        projected = F.linear(x, mha.in_proj_weight, mha.in_proj_bias)
        q, k, v = (p.reshape(B, mha.num_heads, T, -1) for p in projected.chunk(3, dim=-1))
        heads, weights = A.scaled_dot_product_attention(q, k, v, mask=mask)
        return mha.out_proj(merge_heads(heads)), weights

    fails_with(check_multihead_forward, averaged, "no head dim")
    fails_with(check_multihead_forward, wrong_scale, "sqrt(d_model)")
    fails_with(check_multihead_forward, inverted_mask, "the mask is inverted")
    fails_with(check_multihead_forward, reshaped_heads, "plain reshape")


def test_sinusoidal_mistakes():
    def swapped(n, d):
        pe = sinusoidal(n, d)
        return torch.stack([pe[:, 1::2], pe[:, 0::2]], -1).flatten(1)

    def blocks(n, d):
        pe = sinusoidal(n, d)
        return torch.cat([pe[:, 0::2], pe[:, 1::2]], 1)

    def half_exponent(n, d):
        t = torch.arange(n, dtype=torch.float32)[:, None]
        a = t / 10000 ** (torch.arange(d // 2, dtype=torch.float32) / d)
        pe = torch.zeros(n, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(a), torch.cos(a)
        return pe

    fails_with(check_sinusoidal_encoding, swapped, "swapped")
    fails_with(check_sinusoidal_encoding, blocks, "interleave")
    fails_with(check_sinusoidal_encoding, half_exponent, "2i/d_model")


def _offsets(T):
    return (torch.arange(T)[:, None] - torch.arange(T)[None, :]).float()  # i - j


def test_shift_and_alibi_mistakes():
    fails_with(check_shift_matrix, lambda k, w: shift(k, w).T, "transpose")
    fails_with(check_alibi_bias, lambda T, m: -m * _offsets(T), "not masked")
    fails_with(
        check_alibi_bias, lambda T, m: (m * _offsets(T)).masked_fill(_offsets(T) < 0, float("-inf")), "sign"
    )
    fails_with(check_alibi_bias, lambda T, m: torch.ones(T, T, dtype=torch.bool).tril(), "float bias")
