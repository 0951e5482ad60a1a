"""course_lib.positional: the sinusoidal formula, its properties, learned embeddings."""

import math

import pytest
import torch

from course_lib.positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    sinusoidal_encoding,
)


def test_formula_entry_by_entry():
    pe = sinusoidal_encoding(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            w = 1 / 10000 ** (2 * i / 16)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(pos * w), abs=1e-5)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos * w), abs=1e-5)


def test_odd_d_model_keeps_the_last_sine():
    pe = sinusoidal_encoding(10, 7)
    assert pe.shape == (10, 7)
    pos = torch.arange(10.0)
    for i in range(3):
        w = 1 / 10000 ** (2 * i / 7)
        torch.testing.assert_close(pe[:, 2 * i], torch.sin(pos * w))
        torch.testing.assert_close(pe[:, 2 * i + 1], torch.cos(pos * w))
    torch.testing.assert_close(pe[:, 6], torch.sin(pos / 10000 ** (6 / 7)))


def test_codes_are_unique_and_offsets_are_rotations():
    pe = sinusoidal_encoding(200, 32)
    assert torch.cdist(pe, pe).add(torch.eye(200) * 1e9).min() > 0.1  # no two positions alike
    k = 5  # PE[pos + k] = M_k PE[pos] with M_k a block rotation independent of pos
    i = torch.arange(16.0)
    w = 10000 ** (-2 * i / 32)
    cos, sin = torch.cos(k * w), torch.sin(k * w)
    M = torch.zeros(32, 32)
    M[0::2, 0::2] = torch.diag(cos)
    M[0::2, 1::2] = torch.diag(sin)
    M[1::2, 0::2] = torch.diag(-sin)
    M[1::2, 1::2] = torch.diag(cos)
    torch.testing.assert_close(pe[:-k] @ M.T, pe[k:], atol=1e-4, rtol=1e-4)


def test_modules_add_the_encoding_and_reject_long_inputs():
    x = torch.randn(2, 6, 8)
    sin = SinusoidalPositionalEncoding(8, max_len=10)
    torch.testing.assert_close(sin(x), x + sinusoidal_encoding(6, 8))
    assert list(sin.parameters()) == [] and "pe" not in sin.state_dict()
    learned = LearnedPositionalEmbedding(8, max_len=10)
    torch.testing.assert_close(learned(x), x + learned.embedding.weight[:6])
    # positions start..start+T-1 (a cached decoder continues a sequence)
    torch.testing.assert_close(sin(x[:, :2], start=3), x[:, :2] + sinusoidal_encoding(5, 8)[3:5])
    torch.testing.assert_close(learned(x[:, :2], start=3), x[:, :2] + learned.embedding.weight[3:5])
    for module in (sin, learned):
        with pytest.raises(ValueError, match="T=11 from position 0 exceeds max_len=10"):
            module(torch.randn(1, 11, 8))
        with pytest.raises(ValueError, match="T=3 from position 8 exceeds max_len=10"):
            module(torch.randn(1, 3, 8), start=8)
        with pytest.raises(ValueError, match=r"x must be \(B, T, d_model=8\)"):
            module(torch.randn(6, 8))


@pytest.mark.parametrize("args", [(0, 8), (5, 0), (5.0, 8)])
def test_bad_sizes(args):
    with pytest.raises(ValueError, match="must be a positive int"):
        sinusoidal_encoding(*args)


def test_rope_matches_the_rotation_formula():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 7, 8, generator=g, dtype=torch.float64)
    y = apply_rope(x, base=100.0, start=3)
    for t in range(7):
        for i in range(4):
            theta = (t + 3) * 100.0 ** (-2 * i / 8)
            c, s = math.cos(theta), math.sin(theta)
            a, b = x[:, t, 2 * i], x[:, t, 2 * i + 1]
            torch.testing.assert_close(y[:, t, 2 * i], a * c - b * s)
            torch.testing.assert_close(y[:, t, 2 * i + 1], a * s + b * c)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))  # a rotation keeps lengths
    with pytest.raises(ValueError, match="must be even"):
        apply_rope(torch.randn(1, 3, 5))


def test_rope_scores_depend_on_the_offset_only():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 16, generator=g), torch.randn(1, 16, generator=g)

    def score(i, j):
        return (apply_rope(q, start=i) * apply_rope(k, start=j)).sum().item()

    for i, j, s in [(0, 3, 10), (5, 2, 100), (7, 7, 1000)]:
        assert score(i + s, j + s) == pytest.approx(score(i, j), abs=1e-3)
    assert abs(score(0, 3) - score(0, 4)) > 1e-3  # but on the offset it does


def test_alibi_bias_matches_the_formula():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(k + 1) for k in range(8)]))
    torch.testing.assert_close(alibi_slopes(2), torch.tensor([2.0**-4, 2.0**-8]))
    bias = alibi_bias(5, 4)
    assert bias.shape == (4, 5, 5)
    m = alibi_slopes(4)
    for h in range(4):
        for i in range(5):
            for j in range(5):
                expected = -math.inf if j > i else -m[h].item() * (i - j)
                assert bias[h, i, j].item() == pytest.approx(expected)
    sym = alibi_bias(4, 2, causal=False)
    torch.testing.assert_close(sym, sym.transpose(-2, -1))
    assert sym[0, 0, 3].item() == pytest.approx(-3 * alibi_slopes(2)[0].item())
    with pytest.raises(ValueError, match="num_heads"):
        alibi_slopes(0)


def test_alibi_bias_takes_other_slopes_and_names_a_wrong_shape():
    slopes = torch.tensor([0.5, 0.25])
    bias = alibi_bias(4, 2, slopes=slopes)
    assert bias[0, 3, 1].item() == pytest.approx(-0.5 * 2)
    assert bias[1, 3, 0].item() == pytest.approx(-0.25 * 3)
    assert bias[1, 0, 2].item() == -math.inf
    with pytest.raises(ValueError, match=r"shape \(num_heads,\) = \(2,\), got \(3,\)"):
        alibi_bias(4, 2, slopes=torch.ones(3))
    with pytest.raises(ValueError, match="got list"):
        alibi_bias(4, 2, slopes=[0.5, 0.25])
