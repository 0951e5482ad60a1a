"""Checks for the chapter "Scaled dot-product attention"."""

from __future__ import annotations

import math

import torch

from ._compare import ATOL, within
from ._engine import Answer, Case, Check, Mistake, Prediction, lib, randn


def _t(k):
    return k.transpose(-2, -1)


# --------------------------------------------------------------------------------------
# Scaled dot-product scores
# --------------------------------------------------------------------------------------
check_scaled_dot_score = Check(
    "check_scaled_dot_score",
    "fn(q (..., T_q, d_k), k (..., T_k, d_k)) -> q k^T / sqrt(d_k), (..., T_q, T_k)",
    params=("q", "k"),
    reference=lib("attention.scaled_dot_score"),
    cases=lambda g: [
        Case("T_q != T_k", randn(g, 3, 4), randn(g, 5, 4)),
        Case("batch and head dims", randn(g, 2, 3, 4, 8), randn(g, 2, 3, 6, 8)),
        Case("d_k = 1", randn(g, 4, 1), randn(g, 6, 1)),
        Case("a single query", randn(g, 2, 1, 16), randn(g, 2, 7, 16)),
    ],
    mistakes=[
        Mistake("the scores are not scaled: divide by sqrt(d_k).", lambda q, k: q @ _t(k)),
        Mistake("the scores are divided by d_k; divide by sqrt(d_k) instead.",
                lambda q, k: q @ _t(k) / q.shape[-1]),
        Mistake("the result is (T_k, T_q): compute q @ k^T (queries index the rows), not k @ q^T.",
                lambda q, k: k @ _t(q) / math.sqrt(q.shape[-1])),
        Mistake("k.T reverses ALL the dims of a batched tensor: swap only the last two, "
                "k.transpose(-2, -1).", lambda q, k: q @ k.permute(*range(k.dim() - 1, -1, -1))
                / math.sqrt(q.shape[-1])),
    ],
    hints=["The score of query i and key j is their dot product: for all pairs at once, multiply "
           "q by k with k's last two dims swapped.",
           "Swap the dims with k.transpose(-2, -1), so that any batch dims stay in front.",
           "Then scale: a dot product of d_k unit-variance terms has variance d_k."],
)


# --------------------------------------------------------------------------------------
# Masked softmax
# --------------------------------------------------------------------------------------
def _masked_softmax(scores, mask):
    w = torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)
    return torch.nan_to_num(w, nan=0.0)


def _manual_softmax(scores, mask):  # exp without subtracting the max: overflows
    e = torch.exp(scores) * mask
    s = e.sum(-1, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))


def _masked_softmax_cases(g):
    random_mask = torch.rand(4, 6, generator=g) > 0.4
    random_mask[:, 0] = True  # every row keeps at least one key
    padding = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    padding[0, ..., 3:] = False  # first sequence: the last two keys are padding
    fully_masked = torch.ones(3, 4, dtype=torch.bool)
    fully_masked[1] = False  # query 1 may attend to nothing
    return [
        Case("random mask", randn(g, 4, 6), random_mask),
        Case("everything allowed", randn(g, 3, 5), torch.ones(3, 5, dtype=torch.bool)),
        Case("padding mask broadcast over heads and queries", randn(g, 2, 3, 4, 5), padding),
        Case("causal (T, T) mask broadcast over the batch", randn(g, 2, 5, 5),
             torch.ones(5, 5, dtype=torch.bool).tril()),
        Case("a query row with no allowed key (fully masked)", randn(g, 3, 4), fully_masked),
        Case("large scores (numerical stability)", randn(g, 3, 6, scale=500.0),
             torch.ones(3, 6, dtype=torch.bool)),
    ]


_NAN_ROW = ("a fully masked row came out as NaN (the softmax of a row of -inf is 0/0). The "
            "convention is a row of zeros: set such rows to 0.")
_UNIFORM_ROW = ("a fully masked row is uniform: a large negative number instead of -inf spreads "
                "the weight evenly. The convention is a row of zeros.")


def _weights_pattern(got, mask):
    """Mistakes that show in the weights whatever code made them (NaN, uniform or column-wise)."""
    if not isinstance(got, torch.Tensor) or got.shape != mask.shape or not got.is_floating_point():
        return None
    empty = ~mask.any(-1)  # query rows with no allowed key
    if bool(torch.isnan(got[empty]).any()):
        return _NAN_ROW
    if bool(torch.isnan(got).any()):
        return "NaN appeared: exp of large scores overflows; subtract each row's max before exp."
    if bool(empty.any()) and torch.allclose(got[empty], torch.full_like(got[empty], 1 / got.shape[-1]),
                                            atol=ATOL):
        return _UNIFORM_ROW
    sums = got.detach().double().sum(-2)
    if bool(((sums - 1).abs() < 1e-4).all()):
        return "the weights sum to 1 down each column: take the softmax over dim=-1 (the keys)."
    return None


check_masked_softmax = Check(
    "check_masked_softmax", "fn(scores, mask) -> weights: softmax over the last dim where mask "
    "(bool, broadcastable) is True; a row with no allowed key gives zeros",
    params=("scores", "mask"),
    reference=lib("attention.masked_softmax"),
    cases=_masked_softmax_cases, seed=1,
    mistakes=[
        Mistake(_NAN_ROW, lambda s, m: torch.softmax(s.masked_fill(~m, -math.inf), dim=-1)),
        Mistake("the mask is inverted: True means ALLOWED (attend), False means masked out.",
                lambda s, m: _masked_softmax(s, ~m)),
        Mistake("the weights sum to 1 down each column: take the softmax over dim=-1 (the keys).",
                lambda s, m: torch.nan_to_num(torch.softmax(s.masked_fill(~m, -math.inf), -2))),
        Mistake(_UNIFORM_ROW, lambda s, m: torch.softmax(s.masked_fill(~m, -1e9), dim=-1)),
        Mistake("the mask is ignored: disallowed keys must get zero weight.",
                lambda s, m: torch.softmax(s, dim=-1)),
        Mistake("NaN appeared: exp of large scores overflows (inf / inf). Subtract each row's "
                "max before exp (torch.softmax does this for you).", _manual_softmax),
    ],
    diagnose=lambda case, got, expected: _weights_pattern(got, case.args[1].expand_as(case.args[0])),
    hints=["Give the disallowed scores a value whose exponential is exactly 0, then take the "
           "softmax over the keys (the last dim).",
           "masked_fill(~mask, float('-inf')) does the first part; mind which value of the mask "
           "means 'allowed'.",
           "A row that is all -inf gives 0/0 = NaN: detect those rows (mask.any(-1)) or replace "
           "NaN by 0 after the softmax."],
)


# --------------------------------------------------------------------------------------
# Causal mask
# --------------------------------------------------------------------------------------
def _ones(T):
    return torch.ones(T, T, dtype=torch.bool)


check_causal_mask = Check(
    "check_causal_mask", "fn(T) -> (T, T) bool mask, True where query i may attend to key j <= i",
    params=("T",),
    reference=lib("attention.causal_mask"),
    cases=lambda g: [Case(f"T = {T}", T) for T in (5, 1, 2, 8)],
    mistakes=[
        Mistake("the polarity is inverted: True must mark the ALLOWED positions (on and below "
                "the diagonal), not the masked ones.", lambda T: _ones(T).triu(1)),
        Mistake("this is the upper triangle: row i (the query) may see the keys j <= i.",
                lambda T: _ones(T).triu()),
        Mistake("the diagonal is missing: a position may attend to itself.",
                lambda T: _ones(T).tril(-1)),
        Mistake("masks are bool tensors (dtype=torch.bool or .bool()), not numbers.",
                lambda T: torch.ones(T, T).tril()),
    ],
    hints=["Row i is the query, column j the key: which entries of row i are allowed?",
           "The allowed entries form a triangle with the diagonal; torch has a function that "
           "keeps one triangle of a matrix.",
           "Start from a (T, T) bool tensor of ones."],
)


# --------------------------------------------------------------------------------------
# Scaled dot-product attention
# --------------------------------------------------------------------------------------
def _attention(q, k, v, mask=None, scale=True, invert=False, nan=False, dim=-1):
    """Attention with the typical mistakes as switches."""
    scores = q @ _t(k) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    allowed = torch.ones(scores.shape[-2:], dtype=torch.bool) if mask is None else mask
    allowed = ~allowed if invert else allowed
    w = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=dim)
    w = w if nan else torch.nan_to_num(w, nan=0.0)
    return w @ v, w


def _attention_cases(g):
    padding = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    padding[1, ..., 4:] = False
    fully_masked = torch.ones(4, 5, dtype=torch.bool)
    fully_masked[2] = False
    return [
        Case("no mask, T_q != T_k, d_v != d_k", randn(g, 3, 4), randn(g, 5, 4), randn(g, 5, 6)),
        Case("batch and heads with a padding mask", randn(g, 2, 2, 4, 8), randn(g, 2, 2, 6, 8),
             randn(g, 2, 2, 6, 3), mask=padding),
        Case("causal mask broadcast over the batch", randn(g, 2, 5, 4), randn(g, 2, 5, 4),
             randn(g, 2, 5, 4), mask=torch.ones(5, 5, dtype=torch.bool).tril()),
        Case("a query row with no allowed key (fully masked)", randn(g, 4, 8), randn(g, 5, 8),
             randn(g, 5, 2), mask=fully_masked),
        Case("d_k = 1", randn(g, 3, 1), randn(g, 4, 1), randn(g, 4, 2)),
    ]


def _allowed(case, weights):
    mask = case.kwargs.get("mask")
    return (torch.ones_like(weights, dtype=torch.bool) if mask is None else mask.expand(weights.shape))


check_attention = Check(
    "check_attention", "fn(q, k, v, mask=None) -> (out (..., T_q, d_v), weights (..., T_q, T_k))",
    params=("q", "k", "v"),
    reference=lambda q, k, v, mask=None: tuple(lib("attention.scaled_dot_product_attention")(
        q, k, v, mask=mask)),
    cases=_attention_cases, seed=2, outputs=("out", "weights"),
    mistakes=[
        Mistake("the scores are not scaled: divide q @ k^T by sqrt(d_k).",
                lambda q, k, v, mask=None: _attention(q, k, v, mask, scale=False)),
        Mistake("the outputs are swapped: return (out, weights), the output first.",
                lambda q, k, v, mask=None: _attention(q, k, v, mask)[::-1]),
        Mistake("the mask is inverted: True means ALLOWED.",
                lambda q, k, v, mask=None: _attention(q, k, v, mask, invert=mask is not None)),
        Mistake(_NAN_ROW, lambda q, k, v, mask=None: _attention(q, k, v, mask, nan=True)),
        Mistake("the mask is ignored: disallowed keys must get zero weight.",
                lambda q, k, v, mask=None: _attention(q, k, v)),
        Mistake("the weights sum to 1 down each column: take the softmax over dim=-1 (the keys).",
                lambda q, k, v, mask=None: _attention(q, k, v, mask, dim=-2)),
    ],
    diagnose=lambda case, got, expected: _weights_pattern(
        got[1] if isinstance(got, (tuple, list)) and len(got) == 2 else None,
        _allowed(case, expected[1])),
    hints=["Three steps: the scores, the weights, the weighted sum of the values.",
           "The weights are a masked softmax of the scaled scores over the keys; mask=None "
           "means every key is allowed.",
           "out = weights @ v; return (out, weights)."],
)


# --------------------------------------------------------------------------------------
# Predict, then measure: when does an unscaled softmax saturate?
# --------------------------------------------------------------------------------------
_T, _QUERIES, _GRID = 16, 2000, [2**e for e in range(11)]


def saturation_dk(statistic=torch.median, seed=0):
    """The smallest d_k in 1, 2, 4, ..., 1024 at which ``statistic`` (over 2000 random queries)
    of the largest softmax weight of UNSCALED scores q.k over T = 16 random keys reaches 0.9;
    q and k have i.i.d. N(0, 1) entries. None if it never does."""
    g = torch.Generator().manual_seed(seed)
    for d_k in _GRID:
        q, k = randn(g, _QUERIES, 1, d_k), randn(g, _QUERIES, _T, d_k)
        largest = torch.softmax((q @ _t(k))[:, 0], dim=-1).max(-1).values  # (queries,)
        if float(statistic(largest)) >= 0.9:
            return d_k
    return None


check_saturation_dk = Answer(
    "check_saturation_dk", "the smallest d_k (1, 2, 4, ..., 1024) at which a typical query's "
    "largest weight reaches 0.9, unscaled scores, T = 16 keys",
    quantity="the d_k at which the median largest weight reaches 0.9",
    reference=saturation_dk, tolerance=within(factor=1.5),
    mistakes=[
        Mistake("a typical query is the median over the queries, not the luckiest one (the max).",
                lambda: saturation_dk(torch.max)),
        Mistake("the mean is pulled down by the few queries whose two best keys score alike; a "
                "typical query is the median.", lambda: saturation_dk(torch.mean)),
    ],
    hints=["For each d_k, draw many queries and 16 keys each, take the softmax of the unscaled "
           "scores, and keep each query's largest weight.",
           "Summarise those largest weights by their median; stop at the first d_k where it "
           "reaches 0.9."],
)

check_saturation_prediction = Prediction(
    "check_saturation_prediction", "your prediction of the d_k at which a typical query's "
    "largest weight reaches 0.9 (unscaled scores, T = 16 keys), against the measurement",
    quantity="the d_k at which the median largest weight reaches 0.9",
    tolerance=within(factor=2.0), example=64,
    explanation=("unscaled, q.k has standard deviation sqrt(d_k), so the gaps between the 16 "
                 "scores grow like sqrt(d_k) and the softmax approaches an argmax. With "
                 "unit-variance queries and keys the largest weight reaches 0.9 at about "
                 "d_k = 64, a common head size, where the softmax has almost no gradient left. "
                 "Dividing by sqrt(d_k) keeps the scores at unit scale for every d_k."),
    mistakes=[
        Mistake("saturation comes much earlier: the spread of the scores grows like sqrt(d_k), "
                "so a moderate d_k already separates the best key clearly.", lambda m: 16 * m),
        Mistake("a weight of 0.9 over 16 keys needs the best score to beat the others by about "
                "ln(9 * 15) = 4.9, that is several standard deviations when d_k is small.",
                lambda m: m / 16),
    ],
)


# --------------------------------------------------------------------------------------
# A padding mask from the lengths
# --------------------------------------------------------------------------------------
def _padding_mask(lengths, T, allowed=True, keys_only=True, inclusive=False):
    """(B, 1, 1, T) bool, True at the real positions; the typical mistakes as switches."""
    positions = torch.arange(T)                                           # (T,)
    real = positions <= lengths[:, None] if inclusive else positions < lengths[:, None]  # (B, T)
    real = real if allowed else ~real
    return real[:, None, None, :] if keys_only else real[:, None, :, None]


check_padding_mask = Check(
    "check_padding_mask", "fn(lengths (B,) int64, T) -> (B, 1, 1, T) bool: True at the real "
    "(non-pad) key positions, broadcastable over heads and queries",
    params=("lengths", "T"),
    reference=lambda lengths, T: lib("attention.padding_mask")(lengths, T),
    cases=lambda g: [
        Case("lengths 5 and 3, T = 5", torch.tensor([5, 3]), 5),
        Case("three sequences, T longer than all of them", torch.tensor([1, 4, 2]), 6),
        Case("no padding at all", torch.tensor([3, 3]), 3),
    ],
    mistakes=[
        Mistake("the polarity is inverted: True marks the ALLOWED (real) positions, False the pads.",
                lambda lengths, T: _padding_mask(lengths, T, allowed=False)),
        Mistake("off by one: a sequence of length L has real positions 0, ..., L - 1.",
                lambda lengths, T: _padding_mask(lengths, T, inclusive=True)),
        Mistake("the mask has shape (B, T): give it the dims (B, 1, 1, T) so that it broadcasts over "
                "the heads and the queries of the (B, h, T_q, T) scores.",
                lambda lengths, T: _padding_mask(lengths, T)[:, 0, 0]),
        Mistake("this masks the queries, (B, 1, T, 1): a padding mask hides the KEYS, (B, 1, 1, T).",
                lambda lengths, T: _padding_mask(lengths, T, keys_only=False)),
    ],
    hints=["Position j of sequence b is real when j is smaller than that sequence's length.",
           "Compare a (T,) row of positions with a (B, 1) column of lengths: broadcasting gives "
           "(B, T).",
           "Then add the two singleton dims where the scores have their heads and queries."],
)


# --------------------------------------------------------------------------------------
# The gradient that reaches the queries, by hand
# --------------------------------------------------------------------------------------
def _grad_q(q, k, v, grad_out, scale="sqrt", jacobian="full"):
    """dL/dq for L = sum(grad_out * out), out = softmax(q k^T / c) v, with the mistakes as switches.

        dL/dp = grad_out v^T,  dL/ds = p * (dL/dp - sum_j p_j dL/dp_j),  dL/dq = (dL/ds) k / c
    """
    c = {"sqrt": math.sqrt(q.shape[-1]), "none": 1.0, "d_k": float(q.shape[-1])}[scale]
    p = torch.softmax(q @ _t(k) / c, dim=-1)                     # (..., T_q, T_k)
    dp = grad_out @ _t(v)                                        # (..., T_q, T_k)
    if jacobian == "full":
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))
    elif jacobian == "diagonal":
        ds = p * dp
    else:
        ds = dp
    return ds @ k / c                                            # (..., T_q, d_k)


def _autograd_grad_q(q, k, v, grad_out):
    with torch.enable_grad():
        q = q.detach().clone().requires_grad_(True)
        out = lib("attention.scaled_dot_product_attention")(q, k, v)[0]
        (grad,) = torch.autograd.grad(out, q, grad_out)
    return grad


def _no_grad(fn, *args, **kwargs):
    with torch.no_grad():
        return fn(*args, **kwargs)


check_attention_grad_q = Check(
    "check_attention_grad_q", "fn(q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v), "
    "grad_out (..., T_q, d_v)) -> dL/dq (..., T_q, d_k) for L = sum(grad_out * out), out = "
    "softmax(q k^T / sqrt(d_k)) v, written by hand (it runs under torch.no_grad())",
    params=("q", "k", "v", "grad_out"),
    reference=_autograd_grad_q, call=_no_grad, seed=5,
    cases=lambda g: [
        Case("T_q = 3, T_k = 5, d_k = 4, d_v = 2", randn(g, 3, 4), randn(g, 5, 4), randn(g, 5, 2),
             randn(g, 3, 2)),
        Case("batch and heads, d_k = 8", randn(g, 2, 3, 4, 8), randn(g, 2, 3, 6, 8),
             randn(g, 2, 3, 6, 3), randn(g, 2, 3, 4, 3)),
        Case("large scores (a nearly saturated softmax)", randn(g, 2, 16, scale=3.0),
             randn(g, 7, 16, scale=3.0), randn(g, 7, 4), randn(g, 2, 4)),
    ],
    mistakes=[
        Mistake("the 1/sqrt(d_k) is missing: s = q.k / sqrt(d_k), so ds/dq = k / sqrt(d_k).",
                lambda q, k, v, g: _grad_q(q, k, v, g, scale="none")),
        Mistake("the scale is applied twice or as 1/d_k: s = q.k / sqrt(d_k) contributes one "
                "factor 1/sqrt(d_k) to ds/dq (the softmax takes the scaled scores).",
                lambda q, k, v, g: _grad_q(q, k, v, g, scale="d_k")),
        Mistake("only the diagonal of the softmax Jacobian diag(p) - p p^T is used: every score "
                "moves every weight, so subtract the p-weighted mean of dL/dp in each row.",
                lambda q, k, v, g: _grad_q(q, k, v, g, jacobian="diagonal")),
        Mistake("the softmax was skipped in the chain rule: dL/ds is not dL/dp, it passes through "
                "the Jacobian diag(p) - p p^T.",
                lambda q, k, v, g: _grad_q(q, k, v, g, jacobian="none")),
    ],
    hints=["Go backwards through out = p v, p = softmax(s), s = q k^T / sqrt(d_k): first dL/dp, "
           "then dL/ds, then dL/dq.",
           "dL/dp has the shape of p, (..., T_q, T_k); it comes from grad_out and v.",
           "For one row, (dL/ds)_j = sum_i (dL/dp_i) p_i (delta_ij - p_j): write it without a "
           "loop, with the row's p-weighted mean of dL/dp.",
           "Last, each score s_ij depends on q_i through k_j / sqrt(d_k)."],
)


# --------------------------------------------------------------------------------------
# Predict, then measure: many keys dilute even scaled attention
# --------------------------------------------------------------------------------------
check_dilution_prediction = Prediction(
    "check_dilution_prediction", "your prediction of a typical query's largest weight over "
    "T = 1024 keys, scaled scores, d_k = 64, against the measurement",
    quantity="the median largest weight over 1024 keys (scaled, d_k = 64)",
    tolerance=within(factor=2.0), example=0.0142,
    explanation=("dividing by sqrt(d_k) makes each score a unit-variance number whatever d_k, but "
                 "it does nothing about the NUMBER of keys. The best of 1024 unit-variance scores "
                 "lies only about 3.2 standard deviations above the others' mean, a factor of "
                 "about e^3.2 = 25 in weight, against about 1024 * e^0.5 = 1700 for the sum of all "
                 "exponentials: the largest weight is near 0.015, not 0.2 as with 16 keys, and not "
                 "1/1024 either. Long sequences dilute attention at initialisation; training has to "
                 "sharpen the scores (larger q and k) as the context grows."),
    mistakes=[
        Mistake("the scaling fixes the scores' variance, not the number of keys: with 64 times "
                "more keys competing the largest weight cannot stay where it was with 16.",
                lambda measured: 0.22),
        Mistake("the weights are not uniform: the best of many unit-variance scores is a few "
                "standard deviations above the rest, and exp makes that a factor of tens.",
                lambda measured: 1 / 1024),
    ],
    hints=["With 16 keys (the figure of the chapter) a typical query's largest weight is about "
           "0.2. What changes when 1024 keys compete, and what does not?",
           "The largest of T standard normal numbers is about sqrt(2 ln T); the softmax's "
           "denominator is about T times the mean of exp(s)."],
)
