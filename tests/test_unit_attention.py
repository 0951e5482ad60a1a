"""Unit tests of course_lib.attention: small hand-computed examples, masks, and bad input."""

import math

import numpy as np
import pytest
import torch

from course_lib.attention import (
    AdditiveScore,
    GeneralScore,
    LocationScore,
    attend,
    causal_mask,
    cosine_score,
    dot_score,
    masked_softmax,
    padding_mask,
    padding_mask_from_tokens,
    scaled_dot_product_attention,
    scaled_dot_score,
)

D = torch.float64


def t(x):
    return torch.tensor(x, dtype=D)


def randn(*shape, seed=0):
    return torch.randn(*shape, dtype=D, generator=torch.Generator().manual_seed(seed))


def assert_close(actual, expected, **kw):
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=actual.dtype), **kw)


# ---------------------------------------------------------------------------
# Score functions
# ---------------------------------------------------------------------------


def test_dot_score_by_hand():
    q = t([[1, 2], [3, 4]])
    k = t([[1, 0], [0, 1], [1, 1]])
    # row i, column j = q_i . k_j
    assert_close(dot_score(q, k), [[1, 2, 3], [3, 4, 7]])


def test_dot_score_broadcasts_batch_dims():
    q, k = randn(2, 3, 4, 5, seed=1), randn(3, 6, 5, seed=2)  # k shared across the first dim
    scores = dot_score(q, k)
    assert scores.shape == (2, 3, 4, 6)
    for b in range(2):
        for h in range(3):
            assert_close(scores[b, h], q[b, h] @ k[h].T)


def test_scaled_dot_score_by_hand():
    q = t([[1, 1, 1, 1]])  # d_k = 4, sqrt(d_k) = 2
    k = t([[1, 1, 1, 1], [2, 0, 0, 0], [-1, 0, 0, 0]])
    assert_close(scaled_dot_score(q, k), [[4 / 2, 2 / 2, -1 / 2]])


def test_scaled_dot_score_has_unit_variance():
    # entries of variance 1: q.k has variance d_k, q.k / sqrt(d_k) has variance 1
    q, k = randn(2000, 256, seed=3), randn(1, 256, seed=4)
    assert dot_score(q, k).std().item() == pytest.approx(16.0, rel=0.1)
    assert scaled_dot_score(q, k).std().item() == pytest.approx(1.0, rel=0.1)


def test_cosine_score_by_hand():
    q = t([[1, 0]])
    k = t([[2, 0], [0, 3], [-1, 0], [1, 1]])
    expected = [[1, 0, -1, 1 / math.sqrt(2)]]
    assert_close(cosine_score(q, k), expected)
    assert_close(cosine_score(q, k, scale=5.0), np.multiply(expected, 5.0))


def test_cosine_score_ignores_lengths_and_stays_in_range():
    q, k = randn(2, 7, 8, seed=5), randn(2, 9, 8, seed=6)
    assert_close(cosine_score(q * 10, k * 0.1), cosine_score(q, k))
    assert cosine_score(q, k, scale=3.0).abs().max() <= 3.0 + 1e-12


def test_cosine_score_zero_vector_scores_zero_not_nan():
    q = torch.zeros(1, 3, dtype=D, requires_grad=True)
    k = t([[1, 2, 3], [0, 0, 0]])
    scores = cosine_score(q, k)
    assert_close(scores, [[0, 0]])
    scores.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_general_score_is_q_W_kT():
    torch.manual_seed(0)
    score = GeneralScore(d_q=3, d_k=5).double()
    assert score.W.weight.shape == (3, 5)
    q, k = randn(2, 4, 3, seed=7), randn(2, 6, 5, seed=8)
    assert_close(score(q, k), q @ score.W.weight @ k.transpose(-2, -1))


def test_general_score_with_identity_is_dot_score():
    score = GeneralScore(4, 4).double()
    with torch.no_grad():
        score.W.weight.copy_(torch.eye(4))
    q, k = randn(3, 4, seed=9), randn(5, 4, seed=10)
    assert_close(score(q, k), dot_score(q, k))


def test_additive_score_matches_the_equation_pair_by_pair():
    torch.manual_seed(0)
    score = AdditiveScore(d_q=3, d_k=5, d_hidden=7).double()
    q, k = randn(2, 4, 3, seed=11), randn(2, 6, 5, seed=12)
    scores = score(q, k)
    assert scores.shape == (2, 4, 6)
    W_q, W_k, v = score.W_q.weight, score.W_k.weight, score.v.weight[0]
    for b in range(2):
        for i in range(4):
            for j in range(6):
                expected = v @ torch.tanh(W_q @ q[b, i] + W_k @ k[b, j])
                assert_close(scores[b, i, j], expected)


def test_additive_score_gradients_reach_every_parameter():
    score = AdditiveScore(3, 5, 7).double()
    score(randn(4, 3), randn(6, 5)).sum().backward()
    for name, p in score.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_location_score_depends_on_the_query_only():
    torch.manual_seed(0)
    score = LocationScore(d_q=3, T_k=6).double()
    q = randn(2, 4, 3, seed=13)
    full = score(q)
    assert full.shape == (2, 4, 6)
    assert_close(full, q @ score.W.weight.T)
    # the keys' contents do not matter; their length cuts the scores
    assert_close(score(q, randn(2, 6, 5, seed=14)), full)
    assert_close(score(q, randn(2, 6, 5, seed=15)), full)
    assert_close(score(q, randn(2, 4, 5, seed=16)), full[..., :4])


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: GeneralScore(3, 5)(torch.randn(4, 2), torch.randn(6, 5)),
            ValueError,
            r"q of shape \(4, 2\) must have last dim d_q = 3, got 2",
        ),
        (
            lambda: GeneralScore(3, 5)(torch.randn(4, 3), torch.randn(6, 4)),
            ValueError,
            r"k of shape \(6, 4\) must have last dim d_k = 5, got 4",
        ),
        (
            lambda: AdditiveScore(3, 5, 7)(torch.randn(4, 3), torch.randn(6, 3)),
            ValueError,
            r"k of shape \(6, 3\) must have last dim d_k = 5, got 3",
        ),
        (
            lambda: AdditiveScore(3, 5, 7)(torch.randn(2, 4, 3), torch.randn(3, 6, 5)),
            ValueError,
            r"batch dims .* q of shape \(2, 4, 3\), k of shape \(3, 6, 5\) do not broadcast",
        ),
        (
            lambda: AdditiveScore(3, 5, 7)([[1.0, 2.0, 3.0]], torch.randn(6, 5)),
            TypeError,
            r"q must be a torch.Tensor, got list",
        ),
        (
            lambda: LocationScore(3, 6)(torch.randn(4, 2)),
            ValueError,
            r"q of shape \(4, 2\) must have last dim d_q = 3, got 2",
        ),
        (
            lambda: LocationScore(3, 6)(torch.randn(4, 3), torch.randn(7, 5)),
            ValueError,
            r"k of shape \(7, 5\) has 7 positions, more than the T_k = 6",
        ),
    ],
)
def test_score_modules_reject_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("score", [dot_score, scaled_dot_score, cosine_score])
@pytest.mark.parametrize(
    "q, k, error, match",
    [
        (
            torch.randn(3, 4),
            torch.randn(5, 6),
            ValueError,
            r"q of shape \(3, 4\) and k of shape \(5, 6\) must have the same last dim d, got 4 and 6",
        ),
        (
            torch.randn(2, 3, 4),
            torch.randn(3, 5, 4),
            ValueError,
            r"batch dims .* q of shape \(2, 3, 4\), k of shape \(3, 5, 4\) do not broadcast",
        ),
        (
            torch.randn(4),
            torch.randn(5, 4),
            ValueError,
            r"q must have shape \(\.\.\., T_q, d\), got shape \(4,\)",
        ),
        (
            torch.randn(3, 4),
            torch.randn(4),
            ValueError,
            r"k must have shape \(\.\.\., T_k, d\), got shape \(4,\)",
        ),
        (np.ones((3, 4)), torch.randn(5, 4), TypeError, r"q must be a torch.Tensor, got ndarray"),
        (torch.randn(3, 4), [[1.0] * 4], TypeError, r"k must be a torch.Tensor, got list"),
        (
            torch.ones(3, 4, dtype=torch.long),
            torch.randn(5, 4),
            TypeError,
            r"q must be a floating-point tensor, got dtype torch.int64",
        ),
        (
            torch.randn(3, 4),
            torch.randn(5, 4, dtype=D),
            TypeError,
            r"one dtype .* q is torch.float32, k is torch.float64",
        ),
    ],
)
def test_score_functions_reject_bad_input(score, q, k, error, match):
    with pytest.raises(error, match=match):
        score(q, k)


# ---------------------------------------------------------------------------
# masked_softmax
# ---------------------------------------------------------------------------


def test_masked_softmax_without_mask_is_softmax():
    scores = randn(2, 3, 4, seed=17)
    assert_close(masked_softmax(scores), torch.softmax(scores, dim=-1))


def test_masked_softmax_by_hand():
    scores = t([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, False, True], [True, True, False]])
    e1, e3 = math.exp(1), math.exp(3)
    expected = [[e1 / (e1 + e3), 0.0, e3 / (e1 + e3)], [0.5, 0.5, 0.0]]
    assert_close(masked_softmax(scores, mask), expected)


def test_masked_softmax_rows_sum_to_one_and_masked_entries_are_zero():
    scores = randn(4, 5, 6, seed=18)
    mask = torch.rand(4, 5, 6, generator=torch.Generator().manual_seed(0)) < 0.6
    mask[..., 0] = True
    weights = masked_softmax(scores, mask)
    assert_close(weights.sum(-1), torch.ones(4, 5))
    assert (weights[~mask] == 0).all()


def test_masked_softmax_float_mask_is_added():
    scores, bias = randn(3, 4, seed=19), randn(3, 4, seed=20)
    assert_close(masked_softmax(scores, bias), torch.softmax(scores + bias, dim=-1))


def test_masked_softmax_float_and_bool_masks_agree():
    scores = randn(3, 5, seed=21)
    mask = torch.tensor([[True, False, True, True, False]] * 3)
    additive = torch.zeros(3, 5, dtype=D).masked_fill(~mask, -math.inf)
    assert_close(masked_softmax(scores, additive), masked_softmax(scores, mask))


def test_masked_softmax_broadcasts_the_mask():
    scores = randn(2, 3, 4, seed=22)
    mask = torch.tensor([True, True, False, True])  # (T_k,): same for every row
    assert_close(masked_softmax(scores, mask), masked_softmax(scores, mask.expand(2, 3, 4)))


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masked_softmax_fully_masked_row_gives_zeros_and_finite_gradients(kind):
    scores = randn(2, 3, 4, seed=23).requires_grad_()
    allowed = torch.ones(2, 3, 4, dtype=torch.bool)
    allowed[0, 1] = False  # query 1 of batch 0 may see no key
    mask = allowed if kind == "bool" else torch.zeros(2, 3, 4, dtype=D).masked_fill(~allowed, -math.inf)
    weights = masked_softmax(scores, mask)
    assert not torch.isnan(weights).any()
    assert_close(weights[0, 1], torch.zeros(4))
    assert_close(weights[1], torch.softmax(scores[1], dim=-1))
    (weights * randn(2, 3, 4, seed=24)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert_close(scores.grad[0, 1], torch.zeros(4))


@pytest.mark.parametrize(
    "mask, error, match",
    [
        (
            torch.ones(2, 5, dtype=torch.bool),
            ValueError,
            r"mask of shape \(2, 5\) does not broadcast to the scores' shape \(4, 3, 7\)",
        ),
        (
            torch.ones(2, 4, 3, 7, dtype=torch.bool),
            ValueError,
            r"mask of shape \(2, 4, 3, 7\) does not broadcast to the scores' shape \(4, 3, 7\)",
        ),
        (torch.ones(3, 7, dtype=torch.long), TypeError, r"mask must be bool .* got dtype torch.int64"),
        ([[True] * 7] * 3, TypeError, r"mask must be a bool or float torch.Tensor, got list"),
    ],
)
def test_masked_softmax_rejects_bad_masks(mask, error, match):
    with pytest.raises(error, match=match):
        masked_softmax(torch.randn(4, 3, 7), mask)


@pytest.mark.parametrize(
    "scores, error, match",
    [
        (torch.randn(7), ValueError, r"scores must have shape \(\.\.\., T_q, T_k\), got shape \(7,\)"),
        ([[0.0, 1.0]], TypeError, r"scores must be a torch.Tensor, got list"),
        (torch.ones(3, 7, dtype=torch.long), TypeError, r"scores must be a floating-point tensor"),
    ],
)
def test_masked_softmax_rejects_bad_scores(scores, error, match):
    with pytest.raises(error, match=match):
        masked_softmax(scores)


# ---------------------------------------------------------------------------
# attend
# ---------------------------------------------------------------------------


def test_attend_by_hand():
    scores = t([[math.log(3), 0.0], [0.0, 0.0]])  # softmax rows: [3/4, 1/4] and [1/2, 1/2]
    values = t([[4.0, 0.0], [0.0, 8.0]])
    context, weights = attend(scores, values)
    assert_close(weights, [[0.75, 0.25], [0.5, 0.5]])
    assert_close(context, [[3.0, 2.0], [2.0, 4.0]])


def test_attend_with_mask_and_batch_dims():
    scores, values = randn(2, 3, 4, 5, seed=25), randn(2, 3, 5, 6, seed=26)
    mask = causal_mask(4, 5)
    context, weights = attend(scores, values, mask)
    assert context.shape == (2, 3, 4, 6) and weights.shape == (2, 3, 4, 5)
    assert_close(weights, masked_softmax(scores, mask))
    assert_close(context, weights @ values)


@pytest.mark.parametrize(
    "scores, values, mask, error, match",
    [
        (
            torch.randn(2, 3, 5),
            torch.randn(2, 4, 8),
            None,
            ValueError,
            r"scores of shape \(2, 3, 5\) weigh 5 keys, so values must have shape "
            r"\(\.\.\., 5, d_v\), got \(2, 4, 8\)",
        ),
        (
            torch.randn(2, 3, 5),
            torch.randn(3, 5, 8),
            None,
            ValueError,
            r"batch dims .* scores of shape \(2, 3, 5\), values of shape \(3, 5, 8\) do not broadcast",
        ),
        (torch.randn(3, 5), torch.randn(5), None, ValueError, r"values must have shape \(\.\.\., T_k, d_v\)"),
        (torch.randn(3, 5), "values", None, TypeError, r"values must be a torch.Tensor, got str"),
        (
            torch.randn(3, 5),
            torch.randn(5, 2),
            torch.ones(3, 4, dtype=torch.bool),
            ValueError,
            r"mask of shape \(3, 4\) does not broadcast to the scores' shape \(3, 5\)",
        ),
    ],
)
def test_attend_rejects_bad_input(scores, values, mask, error, match):
    with pytest.raises(error, match=match):
        attend(scores, values, mask)


# ---------------------------------------------------------------------------
# scaled_dot_product_attention
# ---------------------------------------------------------------------------

# d_k = 4, so scores = q.k / 2. Query 0 scores (ln 9) / 2 = ln 3 on key 0 and 0 on key 1:
# weights [3/4, 1/4]. Query 1 is zero: weights [1/2, 1/2].
Q = t([[math.log(3), math.log(3), 0, 0], [0, 0, 0, 0]])
K = t([[1, 1, 0, 0], [0, 0, 0, 0]])
V = t([[4, 0], [0, 8]])


def test_sdpa_by_hand():
    out, weights = scaled_dot_product_attention(Q, K, V)
    assert_close(weights, [[0.75, 0.25], [0.5, 0.5]])
    assert_close(out, [[3.0, 2.0], [2.0, 4.0]])


def test_sdpa_by_hand_with_causal_mask():
    out, weights = scaled_dot_product_attention(Q, K, V, causal_mask(2))
    assert_close(weights, [[1.0, 0.0], [0.5, 0.5]])  # query 0 sees key 0 only
    assert_close(out, [[4.0, 0.0], [2.0, 4.0]])


def test_sdpa_by_hand_with_float_mask():
    bias = t([[0.0, math.log(3)], [0.0, -math.inf]])  # query 0: scores ln 3 + 0 and 0 + ln 3
    out, weights = scaled_dot_product_attention(Q, K, V, bias)
    assert_close(weights, [[0.5, 0.5], [1.0, 0.0]])
    assert_close(out, [[2.0, 4.0], [4.0, 0.0]])


@pytest.mark.parametrize("batch", [(), (2,), (2, 3), (2, 3, 2)])
def test_sdpa_any_leading_batch_dims(batch):
    q, k, v = randn(*batch, 4, 8, seed=27), randn(*batch, 5, 8, seed=28), randn(*batch, 5, 3, seed=29)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (*batch, 4, 3) and weights.shape == (*batch, 4, 5)
    q2, k2, v2 = q.reshape(-1, 4, 8), k.reshape(-1, 5, 8), v.reshape(-1, 5, 3)
    for i in range(q2.shape[0]):  # each sequence on its own
        w = torch.softmax(q2[i] @ k2[i].T / math.sqrt(8), dim=-1)
        assert_close(weights.reshape(-1, 4, 5)[i], w)
        assert_close(out.reshape(-1, 4, 3)[i], w @ v2[i])


def test_sdpa_broadcasts_keys_and_values_over_batch_dims():
    q = randn(2, 3, 4, 8, seed=30)
    k, v = randn(5, 8, seed=31), randn(5, 3, seed=32)  # shared by every batch element and head
    out, weights = scaled_dot_product_attention(q, k, v)
    out2, weights2 = scaled_dot_product_attention(q, k.expand(2, 3, 5, 8), v.expand(2, 3, 5, 3))
    assert_close(out, out2)
    assert_close(weights, weights2)


def test_sdpa_fully_masked_query_gives_zero_row_and_finite_gradients():
    q, k, v = (randn(2, 3, 4, 5, seed=s).requires_grad_() for s in (33, 34, 35))
    lengths = torch.tensor([3, 0])  # sequence 1 is all padding: every query sees no key
    mask = padding_mask(lengths, max_len=4)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert_close(out[1], torch.zeros(3, 4, 5))
    assert_close(weights[1], torch.zeros(3, 4, 4))
    assert_close(weights[0].sum(-1), torch.ones(3, 4))
    (out * randn(2, 3, 4, 5, seed=36)).sum().backward()
    for x in (q, k, v):
        assert torch.isfinite(x.grad).all()
    assert_close(q.grad[1], torch.zeros(3, 4, 5))
    assert_close(v.grad[0, :, 3], torch.zeros(3, 5))  # the padded key gets no gradient


def test_sdpa_float_mask_with_an_all_minus_inf_row():
    q, k, v = randn(3, 4, seed=37), randn(5, 4, seed=38), randn(5, 2, seed=39)
    bias = torch.zeros(3, 5, dtype=D)
    bias[2] = -math.inf
    out, weights = scaled_dot_product_attention(q, k, v, bias)
    assert_close(out[2], torch.zeros(2))
    assert_close(weights[2], torch.zeros(5))
    assert_close(out[:2], scaled_dot_product_attention(q[:2], k, v)[0])


def test_sdpa_causal_and_padding_combined():
    q, k, v = randn(2, 1, 4, 3, seed=40), randn(2, 1, 4, 3, seed=41), randn(2, 1, 4, 2, seed=42)
    mask = causal_mask(4) & padding_mask([2, 4])
    assert mask.shape == (2, 1, 4, 4)
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    assert (weights[~mask.expand_as(weights)] == 0).all()
    assert (weights[0, 0, 3, :2] > 0).all()  # past the padding, query 3 still sees keys 0 and 1


@pytest.mark.parametrize(
    "q, k, v, mask, error, match",
    [
        (
            torch.randn(3, 4),
            torch.randn(5, 6),
            torch.randn(5, 2),
            None,
            ValueError,
            r"q of shape \(3, 4\) and k of shape \(5, 6\) must have the same last dim d, got 4 and 6",
        ),
        (
            torch.randn(3, 4),
            torch.randn(5, 4),
            torch.randn(6, 2),
            None,
            ValueError,
            r"k of shape \(5, 4\) and v of shape \(6, 2\) must have the same number of positions "
            r"T_k, got 5 and 6",
        ),
        (
            torch.randn(2, 3, 4),
            torch.randn(2, 5, 4),
            torch.randn(3, 5, 2),
            None,
            ValueError,
            r"batch dims .* q of shape \(2, 3, 4\), k of shape \(2, 5, 4\), v of shape \(3, 5, 2\) "
            r"do not broadcast",
        ),
        (
            torch.randn(2, 3, 4),
            torch.randn(4, 5, 4),
            torch.randn(4, 5, 2),
            None,
            ValueError,
            r"batch dims .* q of shape \(2, 3, 4\), k of shape \(4, 5, 4\) do not broadcast",
        ),
        (
            torch.randn(3, 4),
            torch.randn(5, 4),
            [1.0, 2.0],
            None,
            TypeError,
            r"v must be a torch.Tensor, got list",
        ),
        (
            None,
            torch.randn(5, 4),
            torch.randn(5, 2),
            None,
            TypeError,
            r"q must be a torch.Tensor, got NoneType",
        ),
        (
            torch.randn(3, 4),
            torch.randn(5, 4),
            torch.randn(5),
            None,
            ValueError,
            r"v must have shape \(\.\.\., T_k, d_v\), got shape \(5,\)",
        ),
        (
            torch.randn(3, 4),
            torch.randn(5, 4),
            torch.randn(5, 2, dtype=D),
            None,
            TypeError,
            r"q is torch.float32, k is torch.float32, v is torch.float64",
        ),
        (
            torch.randn(4, 3, 8),
            torch.randn(4, 7, 8),
            torch.randn(4, 7, 2),
            torch.ones(2, 5, dtype=torch.bool),
            ValueError,
            r"mask of shape \(2, 5\) does not broadcast to the scores' shape \(4, 3, 7\)",
        ),
        (
            torch.randn(4, 3, 8),
            torch.randn(4, 7, 8),
            torch.randn(4, 7, 2),
            torch.ones(7, 3, dtype=torch.bool),
            ValueError,
            r"mask of shape \(7, 3\) does not broadcast to the scores' shape \(4, 3, 7\)",
        ),
        (
            torch.randn(3, 8),
            torch.randn(7, 8),
            torch.randn(7, 2),
            torch.ones(3, 7, dtype=torch.int32),
            TypeError,
            r"mask must be bool \(True = allowed\) or floating-point .* got dtype torch.int32",
        ),
        (
            torch.randn(3, 8),
            torch.randn(7, 8),
            torch.randn(7, 2),
            0.0,
            TypeError,
            r"mask must be a bool or float torch.Tensor, got float",
        ),
    ],
)
def test_sdpa_rejects_bad_input(q, k, v, mask, error, match):
    with pytest.raises(error, match=match):
        scaled_dot_product_attention(q, k, v, mask)


# ---------------------------------------------------------------------------
# Masks
# ---------------------------------------------------------------------------


def test_causal_mask_contents():
    assert causal_mask(3).tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]
    assert causal_mask(1).tolist() == [[True]]
    assert causal_mask(3).dtype == torch.bool


def test_causal_mask_rectangular_is_top_left_aligned():
    assert causal_mask(2, 4).tolist() == [[True, False, False, False], [True, True, False, False]]
    assert causal_mask(3, 2).tolist() == [[True, False], [True, True], [True, True]]


def test_causal_mask_device_and_numpy_ints():
    assert causal_mask(np.int64(2), device="cpu").device.type == "cpu"


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((0,), ValueError, r"T_q must be a positive int, got 0"),
        ((-3,), ValueError, r"T_q must be a positive int, got -3"),
        ((3, 0), ValueError, r"T_k must be a positive int, got 0"),
        ((2.5,), TypeError, r"T_q must be an int, got float"),
        ((True,), TypeError, r"T_q must be an int, got bool"),
    ],
)
def test_causal_mask_rejects_bad_sizes(args, error, match):
    with pytest.raises(error, match=match):
        causal_mask(*args)


def test_padding_mask_contents_and_shape():
    mask = padding_mask(torch.tensor([2, 0, 3]), max_len=4)
    assert mask.shape == (3, 1, 1, 4) and mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [
        [True, True, False, False],
        [False, False, False, False],
        [True, True, True, False],
    ]


def test_padding_mask_default_max_len_and_list_input():
    mask = padding_mask([1, 3])
    assert mask.shape == (2, 1, 1, 3)
    assert mask[:, 0, 0].tolist() == [[True, False, False], [True, True, True]]


def test_padding_mask_broadcasts_over_heads_and_queries():
    mask = padding_mask([2, 3], max_len=3)  # (B, 1, 1, T_k)
    weights = masked_softmax(torch.zeros(2, 4, 5, 3, dtype=D), mask)  # (B, h, T_q, T_k)
    assert_close(weights[0, 1, 2], [0.5, 0.5, 0.0])
    assert_close(weights[1, 3, 4], [1 / 3, 1 / 3, 1 / 3])


@pytest.mark.parametrize(
    "lengths, max_len, error, match",
    [
        ([2, -1], None, ValueError, r"lengths must be >= 0, got \[2, -1\]"),
        ([2, 5], 4, ValueError, r"lengths \[2, 5\] exceed max_len = 4"),
        ([[2, 3]], None, ValueError, r"lengths must have shape \(B,\) with B >= 1, got shape \(1, 2\)"),
        ([], None, ValueError, r"lengths must have shape \(B,\) with B >= 1, got shape \(0,\)"),
        ([2.0, 3.0], None, TypeError, r"lengths must hold integers, got dtype torch.float32"),
        ([2, 3], 0, ValueError, r"max_len must be a positive int, got 0"),
        ([2, 3], 4.0, TypeError, r"max_len must be an int, got float"),
        ([0, 0], None, ValueError, r"lengths are all 0: pass max_len"),
    ],
)
def test_padding_mask_rejects_bad_input(lengths, max_len, error, match):
    with pytest.raises(error, match=match):
        padding_mask(lengths, max_len)


def test_padding_mask_from_tokens():
    tokens = torch.tensor([[5, 6, 7, 0], [8, 0, 0, 0]])
    mask = padding_mask_from_tokens(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 4)
    assert torch.equal(mask, padding_mask([3, 1], max_len=4))


@pytest.mark.parametrize(
    "tokens, error, match",
    [
        (torch.tensor([1, 2, 0]), ValueError, r"tokens must have shape \(B, T\), got shape \(3,\)"),
        ([[1, 2, 0]], TypeError, r"tokens must be a torch.Tensor, got list"),
    ],
)
def test_padding_mask_from_tokens_rejects_bad_input(tokens, error, match):
    with pytest.raises(error, match=match):
        padding_mask_from_tokens(tokens, pad_id=0)


def test_docstring_examples():
    import doctest

    import course_lib.attention

    result = doctest.testmod(course_lib.attention)
    assert result.attempted > 0 and result.failed == 0
